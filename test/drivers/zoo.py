#!/usr/bin/python3
"""Model zoo: import, train and check gradients of real models against PyTorch.

    /usr/bin/python3 test/drivers/zoo.py --bin build/bin --work DIR
        [--set smoke|torchvision|blocks|all] [--models a,b,...] [--require-all]
    scripts/torch2-python test/drivers/zoo.py --bin build/bin --work DIR
        --set timm|timm-smoke|hf|hf-smoke [--models a,b,...] [--require-all]

For each model (train mode, batch 2, the smallest input it accepts, every
dropout and stochastic depth set to p = 0): trace it with torch.jit.trace,
import it (offload-import, cross-entropy on the logits), build the step
(offload-opt --offload-autodiff optimizer=none), run one step on the host
backend (offload-run) and compare every parameter gradient with PyTorch's
float64 step from the same parameters and inputs. The error of one gradient
tensor is max|g - g64| / max(max|g64|, 1e-3 x the model's largest |g64|)
(the floor keeps gradients that are zero in exact arithmetic, such as a conv
bias under batch norm, from dividing by rounding noise); a model's error is
the worst over its tensors. Next to ours the table prints PyTorch fp32's own error against the
same float64 reference.

Verdict (column `grads`):
  ok       our worst error <= max(1e-4, 4 x PyTorch fp32's worst error), for
           models where PyTorch fp32's own worst error is <= 1e-3;
  ok(f64)  for ill-conditioned models, where PyTorch fp32's own worst error
           exceeds 1e-3 (batch norm over a handful of values makes fp32
           chaotic, so neither fp32 step has correct digits to compare and
           their agreement would prove nothing): the model is traced,
           imported and run again in float64, and each gradient tensor must
           meet PyTorch's float64 one within max(1e-6, 100 x how far PyTorch's
           own float64 gradient moves when parameters and input move by four
           ulps); tensors PyTorch itself does not determine to 1e-4 (deep
           behind chaotic batch norms) are left out, and the verdict says how
           many were checked, `ok(f64, k/n tensors)`. A wrong VJP or
           conversion gives errors near 1 (see f64_bound for the 1e-6);
  ok(f64)  also where our error fails the `ok` bound only because one
           fp32 step of PyTorch was lucky: a decision (a ReLU's sign, a max
           pool's argmax) taken on a value whose exact size is within fp32
           rounding of the tie sends a gradient one way or the other, and
           which way depends on summation order. PyTorch fp32 is then run
           again with every parameter, buffer and input element moved by at
           most 2^-23 of itself, one or two fp32 ulps (fp32_jitter_worst, up
           to FP32_JITTER_TRIALS
           steps); if it is then more than 1e-3 off and ours is within 4 x
           that, the model is judged by the float64 run as above (column
           `PyTorch fp32's own` then reads `plain / jittered`);
  FAIL     otherwise.
Columns import/train say `ok` or the first line of the error.

The timm sets (PyTorch 2.x: scripts/torch2-python, with BUILD/python on
PYTHONPATH or found from --bin) build timm models (pretrained=False, 10
classes, 64x64 or the smallest input a model accepts, dropout and drop-path
0) and go the way a user goes: offload.compile (torch.export, the .pt2
importer) with return_gradients=True, one step on the host backend, the same
gradient verdict as above. Two more columns: `half arena`, whether the step
compiled with budget = half its unplanned arena (Step.unplanned_arena_bytes
of the step without returned gradients, SGD) plans and runs one step
bit-identically to that unplanned step (every tensor of state_dict() after the
step compared bit for bit; `no plan` gives the smallest arena the planner
reached); `compile s`, offload.compile's seconds for the unplanned step
(export, import, autodiff, lowering).

The HuggingFace sets (--set hf|hf-smoke, PyTorch 2.x; issue 28) build
transformers models from their config classes (no download: 2 layers,
width 64, vocabulary 128, dropout 0, `attn_implementation` "sdpa" unless the
row's name ends in `_eager`) and diffusers' UNet2DModel, and train them the
same way with the loss the model computes itself: the bare transformers model
is compiled with its keyword inputs (offload.compile(model, {"input_ids": ...,
"labels": ...}): the ModelOutput's `.loss`, no wrapper) and the step called
with them; UNet2DModel is wrapped in the DDPM loss (MSE of the predicted
noise), compiled with loss=None. PyTorch's float64 and fp32 references run the
same model on the same inputs. Rows ending in `_mask` (or `_mask_eager`) also
pass an `attention_mask` with padding: the second sequence's last 5 tokens
are masked (GPT-2's labels there are -100, RoBERTa's ids its pad id), so the
masks HF builds from it, and RoBERTa's position ids, are computed in the step
from that input. T5 gets only input_ids and labels: its decoder inputs are
HF's in-graph shift of the labels. Rows in HF_KNOWN_FAILING (none at present)
fail for the stated reason and do not count against --require-all.

--precision bf16-mixed|fp16-mixed (issue 29; docs/precision.md has the
tables): each row's step is built with precision=... (offload.compile for
timm and HF rows, offload-opt for the rest) and judged against PyTorch's fp32
model under torch.autocast("cpu", the low type), both against the float64
step, per gradient tensor by check_precision.py's rule (ours <= 4 x
max(autocast's error, half an ulp of the low type); run_model_mixed), the
step must compute linear/matmul/conv2d/attention in the low type, and timm
and HF rows must plan half their arena under the precision bit-identically
(fp16-mixed rows whose half arena is below what the planner reaches with
loss scaling in the step are run at the smallest arena instead and counted
apart; loss_scaling_limited).

Prints one table row per model as it finishes, then the table in Markdown.
Exits 1 when a model fails with --require-all (the smoke set's ctest uses it).
"""
import argparse
import contextlib
import gc
import os
import shutil
import subprocess
import sys
import time
import warnings
from collections import OrderedDict

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

PY = "/usr/bin/python3"
BATCH = 2
NUM_CLASSES = 10


# ---------------------------------------------------------------------------
# Models
# ---------------------------------------------------------------------------
class RoundTrip(nn.Module):
    """Linear(8,8) -> .double().float() -> Linear(8,4) (issue 16)."""

    def __init__(self):
        super().__init__()
        self.fc1, self.fc2 = nn.Linear(8, 8), nn.Linear(8, NUM_CLASSES)

    def forward(self, x):
        # .to(x.dtype): the float64 reference runs the same model in f64.
        return self.fc2(self.fc1(x).double().to(x.dtype))


class Pool(nn.Module):
    """Mean over the sequence then a linear head: [B, S, D] -> [B, classes]."""

    def __init__(self, d):
        super().__init__()
        self.head = nn.Linear(d, NUM_CLASSES)

    def forward(self, h):
        return self.head(h.mean(dim=1))


class Encoder(nn.Module):
    def __init__(self):
        super().__init__()
        layer = nn.TransformerEncoderLayer(32, 4, 64, 0.0, batch_first=True)
        self.enc, self.pool = nn.TransformerEncoder(layer, 2), Pool(32)

    def forward(self, x):
        return self.pool(self.enc(x))


class Decoder(nn.Module):
    """nn.TransformerDecoder with a causal mask, memory = the input."""

    def __init__(self):
        super().__init__()
        layer = nn.TransformerDecoderLayer(32, 4, 64, 0.0, batch_first=True)
        self.dec, self.pool = nn.TransformerDecoder(layer, 2), Pool(32)

    def forward(self, x):
        mask = nn.Transformer.generate_square_subsequent_mask(x.shape[1])
        return self.pool(self.dec(x, x, tgt_mask=mask))


class MHA(nn.Module):
    def __init__(self):
        super().__init__()
        self.mha, self.pool = nn.MultiheadAttention(32, 4, batch_first=True), Pool(32)

    def forward(self, x):
        return self.pool(self.mha(x, x, x, need_weights=False)[0])


class Recurrent(nn.Module):
    """RNN over [B, T, 16] (or [T, B, 16]), last step's output -> Linear."""

    def __init__(self, cell, out=32, **kwargs):
        super().__init__()
        self.batch_first = kwargs.setdefault("batch_first", True)
        self.rnn, self.head = cell(16, 32, **kwargs), nn.Linear(out, NUM_CLASSES)

    def forward(self, x):  # x [B, T, 16]
        if not self.batch_first:
            return self.head(self.rnn(x.transpose(0, 1))[0][-1])
        return self.head(self.rnn(x)[0][:, -1])


class Attention(nn.Module):
    """Cosine attention written with einsum and F.normalize (Swin v2 style),
    with a summed-out label: [B, S, 32] -> [B, classes]."""

    def __init__(self):
        super().__init__()
        self.qkv, self.head = nn.Linear(32, 96), nn.Linear(32, NUM_CLASSES)

    def forward(self, x):
        b, s, _ = x.shape
        q, k, v = self.qkv(x).reshape(b, s, 3, 4, 8).permute(2, 0, 3, 1, 4)
        a = torch.einsum("bhid,bhjd->bhij", F.normalize(q, dim=-1), F.normalize(k, dim=-1))
        o = torch.einsum("bhij,bhjd->bihd", a.softmax(-1), v).reshape(b, s, 32)
        return self.head(o.mean(1) + torch.einsum("bsd->bd", x))


class ConvBlock(nn.Module):
    """Conv2d(3, 8) -> LAYER -> ReLU -> global mean -> Linear."""

    def __init__(self, layer, channels=8):
        super().__init__()
        self.conv, self.layer = nn.Conv2d(3, 8, 3, padding=1), layer
        self.head = nn.Linear(channels, NUM_CLASSES)

    def forward(self, x):
        return self.head(torch.relu(self.layer(self.conv(x))).mean(dim=(2, 3)))


class MlpF64(nn.Module):
    """An all-float64 MLP: the step runs in f64 end to end (issue 16)."""

    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(16, 32), nn.Tanh(), nn.Linear(32, NUM_CLASSES))

    def forward(self, x):
        return self.net(x)


BLOCKS = {
    "roundtrip": (RoundTrip, (8,)),
    "mlp_f64": (lambda: MlpF64().double(), (16,)),
    "transformer_encoder": (Encoder, (8, 32)),
    "transformer_decoder": (Decoder, (8, 32)),
    "multihead_attention": (MHA, (8, 32)),
    "lstm": (lambda: Recurrent(nn.LSTM), (6, 16)),
    "gru": (lambda: Recurrent(nn.GRU), (6, 16)),
    "lstm_bidir_proj_2layer": (lambda: Recurrent(nn.LSTM, out=16, num_layers=2, bidirectional=True,
                                                 proj_size=8, batch_first=False), (6, 16)),
    "gru_bidir": (lambda: Recurrent(nn.GRU, out=64, bidirectional=True), (5, 16)),
    "rnn_tanh": (lambda: Recurrent(nn.RNN, num_layers=2), (5, 16)),
    "conv_transpose2d_groups": (lambda: ConvBlock(nn.ConvTranspose2d(
        8, 6, 3, stride=2, padding=1, output_padding=1, groups=2, dilation=1), channels=6),
        (3, 7, 7)),
    "einsum_attention": (Attention, (8, 32)),
    "conv_transpose2d": (lambda: ConvBlock(nn.ConvTranspose2d(8, 8, 3, stride=2)), (3, 8, 8)),
    "group_norm": (lambda: ConvBlock(nn.GroupNorm(4, 8)), (3, 8, 8)),
    "instance_norm2d": (lambda: ConvBlock(nn.InstanceNorm2d(8, affine=True)), (3, 8, 8)),
    "upsample_nearest": (lambda: ConvBlock(nn.Upsample(scale_factor=2, mode="nearest")), (3, 8, 8)),
    "upsample_bilinear": (lambda: ConvBlock(nn.Upsample(scale_factor=2, mode="bilinear")), (3, 8, 8)),
    "upsample_bilinear_align": (lambda: ConvBlock(nn.Upsample(size=(13, 5), mode="bilinear",
                                                              align_corners=True)), (3, 8, 8)),
    "pixel_shuffle": (lambda: ConvBlock(nn.PixelShuffle(2), channels=2), (3, 8, 8)),
}

# The smallest square input each torchvision family accepts (32 otherwise).
_MIN_SIZE = [("inception", 75), ("googlenet", 32), ("alexnet", 63), ("vit_", 224),
             ("swin", 32), ("maxvit", 224), ("squeezenet", 32)]

# What CI runs (ctest label `smoke`): small, fast, and each a different path.
SMOKE = ["roundtrip", "mlp_f64", "group_norm", "pixel_shuffle", "upsample_nearest",
         "lstm", "conv_transpose2d", "mobilenet_v3_small", "squeezenet1_1"]


# timm models (the timm sets; PyTorch 2.x): name -> (square input size,
# keyword arguments of timm.create_model besides pretrained=False and
# num_classes). Each family's smallest variant at 64x64 where it accepts
# img_size (or needs no fixed size), else the smallest size it takes.
TIMM = {
    "resnet18": (64, {}),
    "resnet18d": (64, {}),
    "resnet10t": (64, {}),
    "regnetx_002": (64, {}),
    "regnety_002": (64, {}),
    "efficientnet_b0": (64, {}),
    "mobilenetv3_small_050": (64, {}),
    "mobilenetv4_conv_small": (64, {}),
    "mnasnet_small": (64, {}),
    "lcnet_050": (64, {}),
    "ghostnet_050": (64, {}),
    "rexnet_100": (64, {}),
    "repvgg_a0": (64, {}),
    "dla46_c": (64, {}),
    "cs3darknet_focus_s": (64, {}),
    "hgnetv2_b0": (64, {}),
    "convnext_atto": (64, {}),
    "poolformer_s12": (64, {}),
    "edgenext_xx_small": (64, {}),
    "vit_tiny_patch16_224": (64, {"img_size": 64}),
    "deit_tiny_patch16_224": (64, {"img_size": 64}),
    "swin_tiny_patch4_window7_224": (64, {"img_size": 64, "window_size": 4}),
    "maxvit_pico_rw_256": (64, {"img_size": 64}),
    "coatnet_pico_rw_224": (64, {"img_size": 64}),
    "mobilevit_xxs": (64, {}),
    "mobilevitv2_050": (64, {}),
    "mixer_s16_224": (64, {"img_size": 64}),
    "resmlp_12_224": (64, {"img_size": 64}),
    "levit_128s": (64, {"img_size": 64}),
    "efficientvit_m0": (64, {"img_size": 64}),
    "efficientvit_b0": (64, {}),
    "pvt_v2_b0": (64, {}),
    "pit_ti_224": (64, {"img_size": 64}),
    "cait_xxs24_224": (64, {"img_size": 64}),
    "xcit_nano_12_p16_224": (64, {"img_size": 64}),
    "gmlp_ti16_224": (64, {"img_size": 64}),
    "tiny_vit_5m_224": (224, {}),
    "fastvit_t8": (64, {}),
    "inception_next_atto": (64, {}),
    "resnest14d": (64, {}),
    "nf_regnet_b0": (64, {}),
    "eva02_tiny_patch14_224": (56, {"img_size": 56}),
}

# What CI runs of the timm set (ctest zoo-timm-smoke): five fast rows, a
# CNN with batch norm, a ViT (attention decomposed), a model whose attention
# bias is gathered by an index buffer (aten.index.Tensor), MobileViT v2's
# linear attention (issue 28's precision report) and dla46_c, whose fp32
# gradients hang on one ReLU decision within fp32 rounding of its tie (the
# jittered verdict, fp32_jitter_worst).
TIMM_SMOKE = ["resnet10t", "vit_tiny_patch16_224", "levit_128s", "mobilevitv2_050", "dla46_c"]


# HuggingFace models (the hf sets; PyTorch 2.x): name -> a function of the
# attention implementation building (model, forward keyword names, inputs).
# Sizes: 2 layers, width 64, 4 heads, vocabulary 128, batch 2, 16 tokens.
HF_VOCAB, HF_SEQ = 128, 16


def _hf_tokens(g, n=HF_SEQ, low=0):
    return torch.randint(low, HF_VOCAB, (BATCH, n), generator=g)


def _hf_gpt2(attn, g):
    import transformers as T
    cfg = T.GPT2Config(n_layer=2, n_embd=64, n_head=4, vocab_size=HF_VOCAB, n_positions=64,
                       resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0, use_cache=False,
                       bos_token_id=0, eos_token_id=0, attn_implementation=attn)
    ids = _hf_tokens(g)
    return T.GPT2LMHeadModel(cfg), {"input_ids": ids, "labels": ids.clone()}


def _hf_llama(attn, g):
    import transformers as T
    cfg = T.LlamaConfig(num_hidden_layers=2, hidden_size=64, intermediate_size=128,
                        num_attention_heads=4, num_key_value_heads=2, vocab_size=HF_VOCAB,
                        max_position_embeddings=64, use_cache=False, bos_token_id=0,
                        eos_token_id=0, pad_token_id=0, attn_implementation=attn)
    ids = _hf_tokens(g)
    return T.LlamaForCausalLM(cfg), {"input_ids": ids, "labels": ids.clone()}


def _hf_mistral(attn, g):
    # GQA (4 query heads, 2 key/value heads); sliding_window=None: full causal
    # attention (a window at least the sequence's length masks nothing either).
    import transformers as T
    cfg = T.MistralConfig(num_hidden_layers=2, hidden_size=64, intermediate_size=128,
                          num_attention_heads=4, num_key_value_heads=2, vocab_size=HF_VOCAB,
                          max_position_embeddings=64, sliding_window=None, use_cache=False,
                          bos_token_id=0, eos_token_id=0, pad_token_id=0,
                          attn_implementation=attn)
    ids = _hf_tokens(g)
    return T.MistralForCausalLM(cfg), {"input_ids": ids, "labels": ids.clone()}


def _hf_bert(attn, g):
    import transformers as T
    cfg = T.BertConfig(num_hidden_layers=2, hidden_size=64, intermediate_size=128,
                       num_attention_heads=4, vocab_size=HF_VOCAB, max_position_embeddings=64,
                       hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0, num_labels=3,
                       attn_implementation=attn)
    return (T.BertForSequenceClassification(cfg),
            {"input_ids": _hf_tokens(g), "labels": torch.randint(0, 3, (BATCH,), generator=g)})


def _hf_roberta(attn, g):
    # Token ids from 2 up: 1 is RoBERTa's padding id (pad_token_id, also the
    # padding_idx of its word and position embeddings), and a user's batch
    # without padding has none.
    import transformers as T
    cfg = T.RobertaConfig(num_hidden_layers=2, hidden_size=64, intermediate_size=128,
                          num_attention_heads=4, vocab_size=HF_VOCAB, max_position_embeddings=64,
                          hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0, num_labels=3,
                          pad_token_id=1, bos_token_id=0, eos_token_id=2,
                          attn_implementation=attn)
    return (T.RobertaForSequenceClassification(cfg),
            {"input_ids": _hf_tokens(g, low=2),
             "labels": torch.randint(0, 3, (BATCH,), generator=g)})


def _hf_vit(attn, g):
    import transformers as T
    cfg = T.ViTConfig(num_hidden_layers=2, hidden_size=64, intermediate_size=128,
                      num_attention_heads=4, image_size=32, patch_size=8,
                      hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0,
                      num_labels=NUM_CLASSES, attn_implementation=attn)
    return (T.ViTForImageClassification(cfg),
            {"pixel_values": torch.randn(BATCH, 3, 32, 32, generator=g),
             "labels": torch.randint(0, NUM_CLASSES, (BATCH,), generator=g)})


def _hf_t5(attn, g):
    # Labels only: the decoder's inputs are T5's own _shift_right of them in
    # the graph (a new_zeros, a copy into its slice, masked_fill of -100).
    import transformers as T
    cfg = T.T5Config(num_layers=2, num_decoder_layers=2, d_model=64, d_ff=128, d_kv=16,
                     num_heads=4, vocab_size=HF_VOCAB, dropout_rate=0.0, use_cache=False,
                     decoder_start_token_id=0, pad_token_id=0, attn_implementation=attn)
    return (T.T5ForConditionalGeneration(cfg),
            {"input_ids": _hf_tokens(g), "labels": _hf_tokens(g, low=1)})


def _hf_whisper(attn, g):
    # Whisper's encoder under WhisperForAudioClassification (the projector,
    # the mean over frames, a classifier and its cross entropy on labels, as
    # audio classification fine-tunes it): 16 mel bins, 16 source positions,
    # so input features of 32 frames (the two convolutions halve them once).
    import transformers as T
    cfg = T.WhisperConfig(encoder_layers=2, decoder_layers=2, d_model=64, encoder_ffn_dim=128,
                          decoder_ffn_dim=128, encoder_attention_heads=4,
                          decoder_attention_heads=4, num_mel_bins=16, max_source_positions=16,
                          max_target_positions=16, vocab_size=HF_VOCAB, classifier_proj_size=32,
                          num_labels=NUM_CLASSES, dropout=0.0, attention_dropout=0.0,
                          activation_dropout=0.0, use_cache=False, pad_token_id=0,
                          bos_token_id=0, eos_token_id=0, decoder_start_token_id=0,
                          attn_implementation=attn)
    return (T.WhisperForAudioClassification(cfg),
            {"input_features": torch.randn(BATCH, 16, 32, generator=g),
             "labels": torch.randint(0, NUM_CLASSES, (BATCH,), generator=g)})


# Padding in the `_mask` rows: the second sequence's last HF_PAD tokens.
HF_PAD = 5


def _with_padding(build_row, pad_id=None):
    """A row of `build_row` whose inputs also hold an `attention_mask` [B, T]
    (int64 ones, zeros on the second sequence's last HF_PAD tokens), with
    the padded tokens as a data collator leaves them: their ids `pad_id`
    (when given), token-level labels -100 (ignored by the loss)."""
    def build(attn, g):
        model, inputs = build_row(attn, g)
        ids = inputs["input_ids"].clone()
        mask = torch.ones_like(ids)
        mask[1, -HF_PAD:] = 0
        if pad_id is not None:
            ids[mask == 0] = pad_id
        out = {"input_ids": ids, "attention_mask": mask}
        labels = inputs["labels"]
        if labels.shape == ids.shape:
            labels = labels.clone()
            labels[mask == 0] = -100
        out["labels"] = labels
        return model, out
    return build


class DDPMLoss(nn.Module):
    """diffusers' UNet2DModel trained as DDPM does: MSE between the noise and
    the model's prediction from the noisy sample and the timestep."""

    def __init__(self, unet):
        super().__init__()
        self.unet = unet

    def forward(self, noisy, timesteps, noise):
        return F.mse_loss(self.unet(noisy, timesteps).sample, noise)


def _hf_unet2d(attn, g):
    import diffusers
    unet = diffusers.UNet2DModel(sample_size=16, in_channels=3, out_channels=3,
                                 layers_per_block=1, block_out_channels=(32, 64),
                                 down_block_types=("DownBlock2D", "AttnDownBlock2D"),
                                 up_block_types=("AttnUpBlock2D", "UpBlock2D"),
                                 norm_num_groups=8, attention_head_dim=16)
    return (DDPMLoss(unet),
            (torch.randn(BATCH, 3, 16, 16, generator=g),
             torch.randint(0, 1000, (BATCH,), generator=g),
             torch.randn(BATCH, 3, 16, 16, generator=g)))


HF = {
    "gpt2": _hf_gpt2, "gpt2_eager": _hf_gpt2,
    "gpt2_mask": _with_padding(_hf_gpt2), "gpt2_mask_eager": _with_padding(_hf_gpt2),
    "llama": _hf_llama, "llama_eager": _hf_llama, "mistral": _hf_mistral,
    "bert": _hf_bert, "bert_eager": _hf_bert,
    "bert_mask": _with_padding(_hf_bert), "bert_mask_eager": _with_padding(_hf_bert),
    "roberta": _hf_roberta, "roberta_mask": _with_padding(_hf_roberta, pad_id=1),
    "vit": _hf_vit, "t5": _hf_t5, "whisper": _hf_whisper,
    "unet2d": _hf_unet2d,
}

# HF rows that fail for a reason docs/import.md states (a feature offload
# lacks), by name: run and shown as the others, each must fail with its
# reason's text in the import column, and --require-all does not count
# them; one that passes (or fails otherwise) fails --require-all until it
# is taken off this list.
HF_KNOWN_FAILING = {}

# What CI runs of the hf set (ctest zoo-hf-smoke, label smoke): GPT-2 with a
# padding attention_mask (its causal mask and the padding mask combined in
# the step, SDPA fused into offload.attention with that bool mask, tied
# embeddings, labels -100 on padding), Llama (GQA through repeat_kv, rotary
# tables folded from a non-persistent buffer inside torch.no_grad), BERT in
# eager attention with padding (padding_idx, token-type ids gathered from a
# buffer, the additive float mask from the input) and RoBERTa (position ids
# computed from the input ids in the step).
HF_SMOKE = ["gpt2_mask", "llama", "bert_mask_eager", "roberta"]


def hf_model(name):
    """(model, example inputs) of HF row `name`, from fixed seeds: a bare
    transformers model with a dict of its keyword inputs (labels among them:
    it returns a ModelOutput whose `.loss` is set), or a module returning its
    scalar loss with a tuple of positional inputs (the UNet)."""
    attn = "eager" if name.endswith("_eager") else "sdpa"
    g = torch.Generator().manual_seed(1)
    return HF[name](attn, g)


def timm_model(name):
    """timm.create_model(name) as the zoo builds it: pretrained=False, 10
    classes, drop_rate = drop_path_rate = 0 (the head's functional dropout,
    GhostNet's p = 0.2 by default, and stochastic depth) where the model
    takes them, TIMM's keyword arguments; every timm DropPath set to p = 0
    (build() zeroes the torch.nn dropouts)."""
    import timm
    kwargs = {"drop_rate": 0.0, "drop_path_rate": 0.0, **TIMM[name][1]}
    while True:
        try:
            model = timm.create_model(name, pretrained=False, num_classes=NUM_CLASSES, **kwargs)
            break
        except TypeError as e:  # a model without one of the two rates
            unknown = [k for k in ("drop_rate", "drop_path_rate") if k in kwargs and k in str(e)]
            if not unknown:
                raise
            del kwargs[unknown[0]]
    for mod in model.modules():
        if type(mod).__name__ == "DropPath":
            mod.drop_prob = 0.0
    return model


def torchvision_models():
    import torchvision.models as m
    return m.list_models(module=m)


# The family each name of this run comes from, set by main() from --set:
# timm has rows named as torchvision classifiers (resnet18, efficientnet_b0),
# which `--set torchvision` / `all` must build from torchvision.
_FAMILY = {}


def family(name):
    """"hf", "timm" or "torchvision" (torchvision classifiers and the nn
    blocks): how `name` is built and stepped in this run."""
    if name in _FAMILY:
        return _FAMILY[name]
    return "hf" if name in HF else "timm" if name in TIMM else "torchvision"


def build(name):
    """(eager model in train mode, example input) from fixed seeds."""
    torch.manual_seed(0)
    if family(name) == "hf":
        model, inputs = hf_model(name)
        for mod in model.modules():
            if isinstance(mod, nn.modules.dropout._DropoutNd):
                mod.p = 0.0
        return model.train(), inputs, None
    if name in BLOCKS:
        ctor, shape = BLOCKS[name]
        model = ctor()
    elif family(name) == "timm":
        model = timm_model(name)
        shape = (3, TIMM[name][0], TIMM[name][0])
    else:
        import torchvision.models as m
        kwargs = {"num_classes": NUM_CLASSES}
        if name == "googlenet" or name.startswith("inception"):
            kwargs["aux_logits"] = False
            kwargs["init_weights"] = False
        model = m.get_model(name, **kwargs)
        size = next((s for p, s in _MIN_SIZE if name.startswith(p)), 32)
        shape = (3, size, size)
    for mod in model.modules():  # dropout p = 0: deterministic steps
        if isinstance(mod, nn.modules.dropout._DropoutNd):
            mod.p = 0.0
        if type(mod).__name__ == "StochasticDepth":
            mod.p = 0.0
        if isinstance(mod, (nn.TransformerEncoderLayer, nn.TransformerDecoderLayer,
                            nn.MultiheadAttention)):
            mod.dropout = 0.0 if isinstance(mod, nn.MultiheadAttention) else mod.dropout
    g = torch.Generator().manual_seed(1)
    x = torch.randn((BATCH,) + tuple(shape), generator=g)
    y = torch.randint(0, NUM_CLASSES, (BATCH,), generator=g)
    if name.endswith("_f64"):
        x = x.double()
    return model.train(), x, y


def type_string(t):
    suffix = {torch.float32: "f32", torch.float64: "f64", torch.int64: "i64"}[t.dtype]
    return "x".join([str(d) for d in t.shape] + [suffix])


def state_like(state, fn=lambda v: v.clone()):
    """A copy of a state dict with `fn` applied to each tensor, keeping the
    `_metadata` (module versions) that load_state_dict needs: MNASNet refuses a
    state dict without its version."""
    out = OrderedDict((k, fn(v)) for k, v in state.items())
    out._metadata = getattr(state, "_metadata", None)
    return out


def reference_grads(model, state, x, y, dtype, visit, jitter_rel=0.0, seed=7, autocast=None):
    """One cross-entropy step of PyTorch from `state`, in `dtype`. Calls
    visit(name, gradient as a float64 array) for every parameter with a
    gradient, then drops that gradient, so that a caller which keeps only
    figures holds one tensor at a time (regnet_y_128gf's 637.5M parameters with 10 classes:
    5.1 GB of float64 gradients).

    `model` is converted in place; `state` (float32) is copied into it by
    load_state_dict, which converts each tensor, so no converted copy of the
    state is made. With jitter_rel, every floating-point parameter, buffer
    and input element is multiplied by (1 + u), u uniform in
    [-jitter_rel, jitter_rel] from a generator seeded with `seed`, in
    state-dict order and then the input (see perturbed_errors). With
    `autocast` (torch.bfloat16 or torch.float16), the forward and the loss run
    under torch.autocast("cpu", autocast): PyTorch's own mixed precision, the
    yardstick of --precision (its gradients land on the `dtype` parameters)."""
    m = model.to(dtype)
    m.load_state_dict(state)
    # HF rows: a dict of keyword inputs or a tuple of inputs (floats
    # converted), the model's own loss.
    keys = list(x) if isinstance(x, dict) else None
    xs = tuple(t.to(dtype) if t.is_floating_point() else t
               for t in (x.values() if keys is not None else
                         x if isinstance(x, tuple) else (x,)))
    if jitter_rel:
        g = torch.Generator().manual_seed(seed)

        def jitter(v):
            # In float64, rounded once to v's dtype: at jitter_rel = 2^-23 an
            # fp32 element moves by one or two ulps at most (1 + u x 2^-23
            # computed in fp32 would round to 1 for most u).
            u = 2 * torch.rand(v.shape, generator=g, dtype=torch.float64) - 1
            return v.copy_(v.double() * (1 + jitter_rel * u))
        with torch.no_grad():
            for v in m.state_dict().values():
                if v.is_floating_point():
                    jitter(v)
            xs = tuple(jitter(t.clone()) if t.is_floating_point() else t for t in xs)
    for p in m.parameters():
        p.grad = None
    with (torch.autocast("cpu", dtype=autocast) if autocast is not None else
          contextlib.nullcontext()):
        out = m(**dict(zip(keys, xs))) if keys is not None else m(*xs)
        if y is not None:
            loss = F.cross_entropy(out, y)
        else:
            loss = out.loss if hasattr(out, "loss") else out
    (loss.float() if autocast is not None else loss).backward()
    del loss
    for n, p in m.named_parameters():
        if p.grad is not None:
            visit(n, p.grad.detach().to(torch.float64).numpy())
            p.grad = None


def stored_grads(model, state, x, y, dtype, d):
    """reference_grads written to d/NAME.npy, returned as {name: read-only
    memory map}: the float64 reference every other result is compared with,
    kept on disk rather than in memory."""
    os.makedirs(d, exist_ok=True)
    paths = {}

    def save(n, g):
        paths[n] = os.path.join(d, n + ".npy")
        np.save(paths[n], g)
    reference_grads(model, state, x, y, dtype, save)
    return {n: np.load(path, mmap_mode="r") for n, path in paths.items()}


def errors_against(model, state, x, y, dtype, g64, floor, **kwargs):
    """{name: rel_err(PyTorch's gradient in `dtype`, g64)}, one tensor held
    at a time (kwargs: reference_grads' jitter or autocast)."""
    errs = {}

    def measure(n, g):
        if n in g64:
            errs[n] = rel_err(g, g64[n], floor)
    reference_grads(model, state, x, y, dtype, measure, **kwargs)
    return errs


def perturbed_errors(model, state, x, y, g64, floor, rel=2.0 ** -50):
    """How far PyTorch's float64 gradients move (rel_err against g64) when
    every parameter and input element is multiplied by (1 + u), u uniform in
    [-rel, rel] (rel = 2^-50: four ulps): how much of PyTorch's own float64
    result is determined by the inputs at all."""
    return errors_against(model, state, x, y, torch.float64, g64, floor, jitter_rel=rel)


# At most this many PyTorch fp32 steps at ulp-sized perturbations
# (fp32_jitter_worst).
FP32_JITTER_TRIALS = 16


def fp32_jitter_worst(model, state, x, y, g64, floor, names, trials=FP32_JITTER_TRIALS):
    """PyTorch fp32's worst error against g64 (over the tensors `names`) in up
    to `trials` steps, each with every floating-point parameter, buffer and
    input element multiplied by (1 + u), u uniform in [-2^-23, 2^-23] (one
    or two fp32 ulps at most; seeds 1000, 1001, ...), stopping at the first step
    above 1e-3: what an fp32 step may be off by when its gradient hangs on a
    decision (a ReLU's sign, a max pool's argmax) taken on a value within
    fp32 rounding of the tie. dla46_c at batch 2: one ReLU input of
    level4.tree1.tree2 is +9.7e-6 in float64 and moves by ~1e-5 with the
    summation order of the 7x7 stem convolution; under these perturbations
    PyTorch fp32 flips it in 7 of 20 steps (seeds 1000-1019; the first at
    1005) and ours in 12, each then 9.4e-2 off."""
    worst = 0.0
    for k in range(trials):
        errs = errors_against(model, state, x, y, torch.float32, g64, floor,
                              jitter_rel=2.0 ** -23, seed=1000 + k)
        worst = max(worst, max(errs[n] for n in names))
        if worst > 1e-3:
            break
    return worst


def autocast_jitter_worst(model, state, x, y, g64, floor, precision, names, ours,
                          trials=FP32_JITTER_TRIALS):
    """PyTorch autocast's worst error per tensor of `names` against g64 over
    up to `trials` steps, each with every floating-point parameter, buffer
    and input element multiplied by (1 + u), u uniform in [-h, h] with h half
    an ulp of the low type (2^-9 bf16, 2^-12 f16: a move that changes which
    low-type value an element rounds to, as another equally valid rounding
    would; seeds 1000, 1001, ...), stopping once every tensor of `names`
    meets the rule (ours[n] within check_precision.within_rule of it). The
    mixed-precision analogue of fp32_jitter_worst: where a tensor's gradient
    hangs on decisions within the low type's rounding (batch norm over a
    handful of values, a ReLU near its tie), one autocast step is one draw
    of an error that varies by O(1) between draws."""
    import check_precision as cp
    low, _, half_ulp = cp.low_type(precision)
    worst = {n: 0.0 for n in names}
    for k in range(trials):
        errs = errors_against(model, state, x, y, torch.float32, g64, floor,
                              jitter_rel=half_ulp, seed=1000 + k, autocast=low)
        for n in names:
            worst[n] = max(worst[n], errs[n])
        if all(cp.within_rule(ours[n], worst[n], precision) for n in names):
            break
    return worst


def f64_bound(noise64):
    """What our float64 gradient of one tensor may differ from PyTorch's when
    PyTorch's own float64 gradient moves by `noise64` under four-ulp
    perturbations of the inputs (perturbed_errors): 100 x that, at least 1e-6.
    The floor is there because PyTorch 1.13's float64 reference is not
    float64 everywhere: hardsigmoid's backward multiplies by the float
    constant 1.0f/6.0f (0.1666666716..., relative error 3e-8; MobileNetV3's
    squeeze-excitation blocks then show ~3e-8 in our float64 step, which uses
    1/6 exactly). A wrong VJP gives errors near 1."""
    return max(1e-6, 100 * noise64)


def rel_err(a, b, floor):
    return float(np.max(np.abs(a - b))) / max(float(np.max(np.abs(b))), floor)


def first_line(text):
    for line in text.splitlines():
        if "error" in line:
            return line.strip()[:160]
    lines = [l for l in text.splitlines() if l.strip()]
    return (lines[-1] if lines else "failed")[:160]


def tool(cmd, timeout):
    try:
        r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                           text=True, timeout=timeout)
        return r.returncode, r.stdout
    except subprocess.TimeoutExpired:
        return 124, f"timed out after {timeout} s"


def save_trace(model, x, path):
    """torch.jit.trace of `model` on x, saved to `path`; the model's state is
    restored afterwards (tracing runs a forward, which updates batch-norm
    running statistics)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        state = state_like(model.state_dict())
        traced = torch.jit.trace(model, (x,), check_trace=False)
        model.load_state_dict(state)
    traced.save(path)


def our_step(make_model, x, y, d, bin_dir, timeout, precision="fp32"):
    """Traces make_model() on x, imports it, builds (in `precision`; the step
    in d/step.mlir) and runs one step on the host backend. The model is made
    and dropped before the tools run, so a large one is not held twice.
    Returns (import status, train status, gradients npz or None)."""
    os.makedirs(d, exist_ok=True)
    save_trace(make_model(), x, os.path.join(d, "model.pt"))
    np.savez(os.path.join(d, "inputs.npz"), x=x.numpy(), y=y.numpy())
    rc, out = tool([os.path.join(bin_dir, "offload-import"), os.path.join(d, "model.pt"),
                    "--input", "x=" + type_string(x), "--input", "y=" + type_string(y),
                    "--loss", "cross_entropy", "--params-out", os.path.join(d, "params.npz"),
                    "-o", os.path.join(d, "model.mlir")], timeout)
    imported = "ok" if rc == 0 else first_line(out)
    if rc != 0:
        return imported, "", None
    rc, out = tool([os.path.join(bin_dir, "offload-opt"), os.path.join(d, "model.mlir"),
                    f"--offload-autodiff=optimizer=none precision={precision}",
                    "-o", os.path.join(d, "step.mlir")], timeout)
    if rc == 0:
        rc, out = tool([os.path.join(bin_dir, "offload-translate"), "--offload-to-plan",
                        os.path.join(d, "step.mlir"), "-o", os.path.join(d, "step.oflp")], timeout)
    if rc == 0:
        rc, out = tool([os.path.join(bin_dir, "offload-run"), os.path.join(d, "step.oflp"),
                        "--params", os.path.join(d, "params.npz"),
                        "--inputs", os.path.join(d, "inputs.npz"),
                        "--steps", "1", "--dump", os.path.join(d, "ours.npz")], timeout)
    if rc != 0:
        return imported, first_line(out), None
    return imported, "ok", np.load(os.path.join(d, "ours.npz"))


def _offload(bin_dir):
    """The offload package, its tools taken from bin_dir. The package and its
    runtime extension come from PYTHONPATH (BUILD/python, as the ctests set
    it; test/drivers/README.md)."""
    os.environ["OFFLOAD_BIN"] = os.path.abspath(bin_dir)
    try:
        import offload
    except ImportError as e:
        ext = os.path.join(os.path.dirname(os.path.abspath(bin_dir)), "python")
        sys.exit(f"zoo.py: cannot import the offload package ({e}); run with "
                 f"PYTHONPATH={ext}")
    return offload


def _compile_failure(e):
    """(import status, train status) of an offload.compile error: export and
    import failures go to the import column, the rest to train."""
    text = first_line(getattr(e, "message", None) or str(e))
    if getattr(e, "stage", "") in ("export", "import"):
        return text, ""
    return "ok", text


def _step_args(x, y):
    """offload.compile's example inputs and loss for a row: (x, y) with
    cross entropy, or an HF row's inputs (a dict of keyword inputs, or a
    tuple) with the model's own loss."""
    if y is None:
        return (dict(x) if isinstance(x, dict) else tuple(x)), None
    return (x, y), "cross_entropy"


def _run_step(step, args):
    """One step on a row's inputs: by keyword for a dict."""
    return step(**args) if isinstance(args, dict) else step(*args)


# fp16-mixed: at most this many skipped steps (GradScaler's 2^16 halved down
# to 2^0) before a row's gradients count as non-finite. dla46_c and
# mobilenetv4_conv_small overflow in fp16 at 2^8 (PyTorch's autocast too:
# their stem convolutions' weight gradients are sums over 64x64 pixels).
FP16_MAX_SKIPS = 16


def compiled_step(make_model, x, y, d, bin_dir, timeout, precision="fp32"):
    """our_step through the Python package, as a PyTorch 2.x user runs it:
    offload.compile(make_model(), (x, y), return_gradients=True,
    precision=precision) (torch.export and the .pt2 importer; its files in d,
    the step in d/step.mlir) and one step on the host backend (SGD; under
    fp16-mixed with GradScaler's loss scaling, and the gradients returned
    unscaled).
    Returns (import status, train status, {"grad:NAME": gradient} or None)."""
    offload = _offload(bin_dir)
    args, loss = _step_args(x, y)
    try:
        step = offload.compile(make_model(), args, loss=loss, verbose=False, workdir=d,
                               return_gradients=True, precision=precision)
        if "rng_seed" in dict(step.session.input_bindings()):
            # Our dropout masks are not PyTorch's: the step must have none.
            return "ok", "a dropout with p > 0 is left in the model", None
        _run_step(step, args)
        # fp16-mixed: a step whose scaled gradients overflow is skipped and
        # the scale halved, as GradScaler does; a skipped step leaves the
        # parameters bit-identical, so the next one is the same step at half
        # the scale (PyTorch's GradScaler overflows on the same rows: HF's
        # vit at 2^16).
        steps = 1
        while step.skipped_steps == steps and steps <= FP16_MAX_SKIPS:
            _run_step(step, args)
            steps += 1
        train = "ok"
        if step.skipped_steps:
            if step.skipped_steps == steps:
                return "ok", f"every one of {steps} steps skipped (inf/NaN gradients)", None
            train = (f"ok ({step.skipped_steps} skipped, loss scale "
                     f"2^{int(np.log2(step.loss_scale))})")
    except offload.CompileError as e:
        return (*_compile_failure(e), None)
    except offload.OffloadError as e:
        return "ok", first_line(str(e)), None
    return "ok", train, {"grad:" + n: g.numpy() for n, g in step.gradients().items()}


def half_arena(model, x, y, d, bin_dir, precision="fp32", at_smallest=False):
    """Whether `model`'s step (SGD, no returned gradients, in `precision`) compiled with
    budget = half its unplanned arena runs one step bit-identically to the
    unplanned step: every tensor of state_dict() after the step, bit for bit.
    Returns (the verdict's text, offload.compile's seconds for the unplanned
    step). With at_smallest, a half arena below the smallest the planner
    reaches is followed by a plan at that smallest arena, run and compared
    the same way: `no plan (...); at the smallest (P%): ok`."""
    offload = _offload(bin_dir)
    args, loss = _step_args(x, y)
    t0 = time.time()
    try:
        full = offload.compile(model, args, loss=loss, verbose=False, precision=precision,
                               workdir=os.path.join(d, "unplanned"))
    except offload.OffloadError as e:
        return "unplanned: " + first_line(str(e)), time.time() - t0
    seconds = time.time() - t0
    # fp16-mixed: steps until one is not skipped (compiled_step), so that
    # the comparison is of an update, not of parameters a skip left alone;
    # the planned step runs as many.
    steps = 0
    while steps == full.skipped_steps and steps <= FP16_MAX_SKIPS:
        _run_step(full, args)
        steps += 1
    want = full.state_dict()
    arena = full.unplanned_arena_bytes
    mib = 1 << 20

    def planned(budget, name):
        """None when the plan at `budget` runs bit-identically, else why not."""
        try:
            step = offload.compile(model, args, loss=loss, budget=budget, verbose=False,
                                   precision=precision, workdir=os.path.join(d, name))
            for _ in range(steps):
                _run_step(step, args)
        except offload.BudgetError:
            raise
        except offload.OffloadError as e:
            return first_line(str(e))
        got = step.state_dict()
        differ = [k for k in want if want[k].numpy().tobytes() != got[k].numpy().tobytes()]
        return f"FAIL ({len(differ)} tensors differ, e.g. {differ[0]})" if differ else None

    budget = arena // 2
    try:
        why = planned(budget, "half")
    except offload.BudgetError as e:
        smallest = e.smallest_reachable_bytes
        text = f"no plan ({arena} B -> {budget} B: smallest {smallest} B)"
        if not at_smallest or smallest is None:
            return text, seconds
        try:
            why = planned(smallest, "smallest")
        except offload.BudgetError as e2:
            why = first_line(str(e2))
        return text + f"; at the smallest ({100 * smallest / arena:.0f}%): {why or 'ok'}", seconds
    if why:
        return why, seconds
    return f"ok ({arena / mib:.1f} -> {budget / mib:.1f} MiB)", seconds


def grad_errors(ours, g64, floor):
    """Per-tensor errors of `ours` against g64, and the names of nonzero
    reference gradients ours lacks."""
    errs, missing = {}, []
    for n, ref in g64.items():
        key = "grad:" + n
        if key not in ours:
            if np.any(ref != 0):
                missing.append(n)
            continue
        errs[n] = rel_err(ours[key].astype(np.float64), ref, floor)
    return errs, missing


def fp32_decides(row, model, state, x, y, g64, floor, names):
    """Whether our fp32 error, above the `ok` bound of a model PyTorch fp32
    gets within 1e-3, is one PyTorch fp32 itself reaches when the inputs move
    by an ulp or two: its jittered worst (fp32_jitter_worst, kept in
    row["torch32_jitter"]) above 1e-3 and ours within 4 x that. The model is
    then judged in float64 like an ill-conditioned one."""
    jit = fp32_jitter_worst(model, state, x, y, g64, floor, names)
    row["torch32_jitter"] = jit
    return jit > 1e-3 and row["ours"] <= 4 * jit


def start_row(name, work, **extra):
    """What every row begins with: the row (its keys, `extra` added), the
    start time, the row's folder, the model with its batch and a copy of its
    state, whether it goes through offload.compile (timm and HF rows, on
    PyTorch 2.x) or through the tools on a TorchScript trace (the rest; both
    are judged alike), and the function that builds and runs our step."""
    row = {"model": name, "import": "", "train": "", "ours": None, "torch32": None,
           "ours64": None, "grads": "", "seconds": 0.0, **extra}
    t0 = time.time()
    model, x, y = build(name)
    compiled = family(name) in ("timm", "hf")
    return (row, t0, os.path.join(work, name), model, x, y,
            state_like(model.state_dict()), compiled, compiled_step if compiled else our_step)


def run_model(name, bin_dir, work, timeout):
    row, t0, d, model, x, y, state, compiled, step = start_row(name, work)
    row["import"], row["train"], ours = step(lambda: model, x, y, d, bin_dir, timeout)
    if compiled and ours is not None:
        row["half"], row["compile"] = half_arena(model, x, y, d, bin_dir)
    if ours is not None:
        # PyTorch's float64 gradients stay on disk (d/ref64/*.npy); every
        # other step is reduced to per-tensor errors as it is computed.
        g64 = stored_grads(model, state, x, y, torch.float64, os.path.join(d, "ref64"))
        # A gradient that is zero in exact arithmetic (a conv bias under batch
        # norm) is measured against 1e-3 of the model's largest gradient.
        floor = 1e-3 * max(float(np.max(np.abs(g))) for g in g64.values())
        errs, missing = grad_errors(ours, g64, floor)
        del ours
        if missing or not errs:
            row["grads"] = "FAIL (no gradient for %s)" % (", ".join(missing[:3]) or "any")
        else:
            row["ours"] = max(errs.values())
            errs32 = errors_against(model, state, x, y, torch.float32, g64, floor)
            row["torch32"] = max(errs32[n] for n in errs)
            if not np.isfinite(row["ours"]):
                row["grads"] = "FAIL (non-finite gradient)"
            elif row["torch32"] <= 1e-3 and row["ours"] <= max(1e-4, 4 * row["torch32"]):
                row["grads"] = "ok"
            elif row["torch32"] <= 1e-3 and not (
                    fp32_decides(row, model, state, x, y, g64, floor, list(errs))):
                row["grads"] = "FAIL"
            else:
                # Ill-conditioned: fp32 rounding alone decides the digits (and
                # PyTorch's own fp32 error says so). Run our step in float64:
                # the same importer, VJPs and kernels, now with rounding
                # 2^29 times smaller, must meet PyTorch's float64 step.
                # Our float64 step needs about twice the fp32 one's memory
                # (15 GB for regnet_y_128gf): the fp32 model and its state
                # are dropped meanwhile and built again after (build() is
                # seeded, so both are the same).
                del model, state
                gc.collect()
                f64 = lambda t: t.double() if t.is_floating_point() else t
                x64 = ({k: f64(t) for k, t in x.items()} if isinstance(x, dict) else
                       tuple(f64(t) for t in x) if isinstance(x, tuple) else x.double())
                _, train64, ours64 = step(lambda: build(name)[0].double(), x64, y,
                                          d + "-f64", bin_dir, timeout)
                model = build(name)[0]
                state = state_like(model.state_dict())
                if ours64 is None:
                    row["grads"] = "FAIL (f64 step: %s)" % train64
                else:
                    errs64, missing64 = grad_errors(ours64, g64, floor)
                    del ours64
                    noise = perturbed_errors(model, state, x, y, g64, floor)
                    # Tensors whose float64 gradient PyTorch itself does not
                    # determine to 1e-4 (deep behind chaotic batch norms)
                    # cannot be checked; every other one must be within its
                    # own bound.
                    bounds = {n: f64_bound(noise[n]) for n in errs64}
                    checked = [n for n in errs64 if bounds[n] < 1e-2]
                    bad = [n for n in checked if not errs64[n] <= bounds[n]]
                    row["ours64"] = max((errs64[n] for n in checked), default=None)
                    row["checked"] = f"{len(checked)}/{len(errs64)}"
                    if missing64 or not checked or bad:
                        row["grads"] = "FAIL" + (f" ({bad[0]})" if bad else "")
                    else:
                        row["grads"] = "ok(f64)" if len(checked) == len(errs64) else \
                            f"ok(f64, {len(checked)}/{len(errs64)} tensors)"
    row["seconds"] = time.time() - t0
    return row


def run_model_mixed(name, bin_dir, work, timeout, precision):
    """One row under bf16-mixed / fp16-mixed (--precision): our step built
    with precision=... against PyTorch's fp32 model under
    torch.autocast("cpu", the low type), both against PyTorch's float64 step.
    Per gradient tensor, check_precision.py's rule (within_rule: ours <= 4 x
    max(autocast's error, half an ulp of the low type)); the step must have
    low-type linear/matmul/conv2d/attention ops (low_op_count); timm and HF
    rows must also plan half their arena under the precision and run
    bit-identically (half_arena). A tensor that fails the rule against the
    one autocast step is judged again against the worst of autocast steps at
    inputs moved within the low type's rounding (autocast_jitter_worst;
    verdict `ok(jittered, k tensors)`), as fp32_decides does for fp32. Row
    keys as run_model's, plus "ratio" (the worst ours / max(autocast, floor)
    before any jitter), "worst" (its tensor), "low_ops"; "torch32" holds
    autocast's worst error, "torch32_jitter" the jittered one's worst over
    the tensors that needed it."""
    import check_precision as cp
    low = cp.low_type(precision)[0]
    row, t0, d, model, x, y, state, compiled, step = start_row(name, work, ratio=None,
                                                               low_ops=None)
    row["import"], row["train"], ours = step(lambda: model, x, y, d, bin_dir, timeout,
                                             precision=precision)
    if ours is not None:
        with open(os.path.join(d, "step.mlir")) as f:
            row["low_ops"] = cp.low_op_count(f.read(), precision)
        if compiled:
            # fp16-mixed: GradScaler's skip keeps every parameter and its
            # update on the device (docs/precision.md, "Loss scaling"), so
            # half the arena may be out of reach; the plan at the smallest
            # arena the planner reaches is then run and compared instead.
            row["half"], row["compile"] = half_arena(model, x, y, d, bin_dir, precision,
                                                     at_smallest=precision == "fp16-mixed")
        g64 = stored_grads(model, state, x, y, torch.float64, os.path.join(d, "ref64"))
        floor = 1e-3 * max(float(np.max(np.abs(g))) for g in g64.values())
        errs, missing = grad_errors(ours, g64, floor)
        del ours
        errs_ac = errors_against(model, state, x, y, torch.float32, g64, floor, autocast=low)
        if missing or not errs:
            row["grads"] = "FAIL (no gradient for %s)" % (", ".join(missing[:3]) or "any")
        else:
            ratios = {n: cp.ratio(errs[n], errs_ac[n], precision) for n in errs}
            row["worst"] = max(ratios, key=ratios.get)
            row["ratio"] = ratios[row["worst"]]
            row["ours"] = max(errs.values())
            row["torch32"] = max(errs_ac[n] for n in errs)
            bad = [n for n in errs if not cp.within_rule(errs[n], errs_ac[n], precision)]
            if not np.isfinite(row["ours"]):
                row["grads"] = "FAIL (non-finite gradient)"
            elif not row["low_ops"]:
                row["grads"] = "FAIL (no low-type linear/matmul/conv2d/attention op)"
            elif bad:
                # A tensor whose gradient hangs on roundings of the low type:
                # PyTorch's autocast at inputs moved within that rounding.
                jit = autocast_jitter_worst(model, state, x, y, g64, floor, precision, bad, errs)
                row["torch32_jitter"] = max(jit.values())
                still = [n for n in bad if not cp.within_rule(errs[n], max(errs_ac[n], jit[n]),
                                                               precision)]
                row["grads"] = (f"FAIL ({len(still)} tensors, e.g. {still[0]})" if still else
                                f"ok(jittered, {len(bad)} tensors)")
            else:
                row["grads"] = "ok"
    row["seconds"] = time.time() - t0
    return row


def fmt(v):
    return "" if v is None else f"{v:.1e}"


def fmt32(row):
    """PyTorch fp32's own error, `plain / jittered` where it was jittered."""
    jit = row.get("torch32_jitter")
    return fmt(row["torch32"]) + ("" if jit is None else f" / {jit:.1e}")


def passed(row):
    """A row's verdict: gradients ok and, for the timm rows, half the arena
    planned and run bit-identically."""
    return row["grads"].startswith("ok") and row.get("half", "ok").startswith("ok")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--bin", required=True)
    ap.add_argument("--work", required=True)
    ap.add_argument("--set", default="smoke",
                    choices=["smoke", "torchvision", "blocks", "all", "timm", "timm-smoke",
                             "hf", "hf-smoke"])
    ap.add_argument("--models", default="")
    ap.add_argument("--timeout", type=int, default=900, help="seconds per tool call")
    ap.add_argument("--keep", action="store_true",
                    help="keep every model's files (default: only those of failed models)")
    ap.add_argument("--require-all", action="store_true",
                    help="exit 1 unless every model imports, trains and has ok gradients")
    ap.add_argument("--precision", default="fp32", choices=["fp32", "bf16-mixed", "fp16-mixed"],
                    help="bf16-mixed / fp16-mixed: our mixed-precision step against PyTorch's "
                    "autocast, both judged by float64 (run_model_mixed)")
    args = ap.parse_args(argv)
    torch.set_num_threads(1)
    sets = {"smoke": lambda: SMOKE, "blocks": lambda: list(BLOCKS),
            "torchvision": torchvision_models,
            "all": lambda: torchvision_models() + list(BLOCKS),
            "timm": lambda: list(TIMM), "timm-smoke": lambda: TIMM_SMOKE,
            "hf": lambda: list(HF), "hf-smoke": lambda: HF_SMOKE}
    names = args.models.split(",") if args.models else sets[args.set]()
    known = set(BLOCKS) | set(TIMM) | set(HF) | set(torchvision_models())
    bad = [n for n in names if n not in known]
    if bad:
        ap.error("unknown model(s): " + ", ".join(bad))
    tv_names = set(torchvision_models())
    for n in names:
        if args.set in ("timm", "timm-smoke") and n in TIMM:
            _FAMILY[n] = "timm"
        elif args.set in ("hf", "hf-smoke") and n in HF:
            _FAMILY[n] = "hf"
        elif args.set in ("smoke", "torchvision", "blocks", "all") and (
                n in BLOCKS or n in tv_names):
            _FAMILY[n] = "torchvision"
    if any(family(n) != "torchvision" for n in names) and not hasattr(torch, "export"):
        ap.error(f"the timm and HF models need PyTorch 2.x (torch.export; this is {torch.__version__}): "
                 "run scripts/torch2-python test/drivers/zoo.py ...")
    rows = []
    mixed = args.precision != "fp32"
    for name in names:
        row = (run_model_mixed(name, args.bin, args.work, args.timeout, args.precision) if mixed
               else run_model(name, args.bin, args.work, args.timeout))
        rows.append(row)
        if not args.keep and passed(row):
            for d in (name, name + "-f64"):  # large models write GBs
                shutil.rmtree(os.path.join(args.work, d), ignore_errors=True)
        extra = (f"; half arena {row['half']}; compile {row['compile']:.1f} s"
                 if "half" in row else "")
        if mixed:
            print(f"{row['model']} {args.precision}: import {row['import']}; train "
                  f"{row['train'] or '-'}; grads {row['grads'] or '-'} (ours {fmt(row['ours'])}, "
                  f"autocast {fmt32(row)}, worst ratio "
                  f"{'' if row['ratio'] is None else format(row['ratio'], '.2f')} "
                  f"{row.get('worst', '')}; {row['low_ops']} low-type ops){extra}; "
                  f"{row['seconds']:.0f} s", flush=True)
            continue
        print(f"{row['model']}: import {row['import']}; train {row['train'] or '-'}; "
              f"grads {row['grads'] or '-'} (ours {fmt(row['ours'])}, "
              f"pytorch fp32 {fmt32(row)}, ours in f64 {fmt(row['ours64'])}){extra}; "
              f"{row['seconds']:.0f} s", flush=True)
    timm_cols = any(family(r["model"]) != "torchvision" for r in rows)
    print()
    if mixed:
        return mixed_table(rows, args, timm_cols)
    print("| model | import | train | worst grad error vs PyTorch f64 | PyTorch fp32's own | "
          "ours in f64 | grads |" + (" half arena | compile s |" if timm_cols else "") + " s |")
    print("|---|---|---|---|---|---|---|" + ("---|---|" if timm_cols else "") + "---|")
    for r in rows:
        extra = ""
        if timm_cols:
            extra = (f" {r.get('half') or '-'} | "
                     f"{'' if r.get('compile') is None else format(r['compile'], '.1f')} |")
        print(f"| {r['model']} | {r['import']} | {r['train'] or '-'} | {fmt(r['ours'])} | "
              f"{fmt32(r)} | {fmt(r['ours64'])} | {r['grads'] or '-'} |{extra} "
              f"{r['seconds']:.0f} |")
    good = sum(1 for r in rows if passed(r))
    print(f"\n{good} of {len(rows)} models train with gradients that agree with PyTorch" +
          (" (timm, HF: and plan half their arena bit-identically)" if timm_cols else ""))
    known = [r for r in rows if r["model"] in HF_KNOWN_FAILING]
    for r in known:
        why = HF_KNOWN_FAILING[r["model"]]
        if passed(r):
            print(f"{r['model']}: passes now; take it off HF_KNOWN_FAILING (and docs/import.md)")
        elif why not in r["import"]:
            print(f"{r['model']}: expected to fail with '{why}', failed otherwise")
        else:
            print(f"{r['model']}: fails as expected ({why})")
    expected = sum(1 for r in known if not passed(r) and HF_KNOWN_FAILING[r["model"]] in r["import"])
    return 1 if args.require_all and good + expected != len(rows) else 0


def mixed_table(rows, args, timm_cols):
    """The --precision table in Markdown and the exit code."""
    print(f"| model | {args.precision} | import | train | worst grad error vs PyTorch f64 | "
          "autocast's own | worst ratio ours / max(autocast, floor) | low-type ops | grads |" +
          (" half arena |" if timm_cols else "") + " s |")
    print("|---|---|---|---|---|---|---|---|---|" + ("---|" if timm_cols else "") + "---|")
    for r in rows:
        ratio = "" if r["ratio"] is None else f"{r['ratio']:.2f} ({r['worst']})"
        print(f"| {r['model']} | {args.precision} | {r['import']} | {r['train'] or '-'} | "
              f"{fmt(r['ours'])} | {fmt32(r)} | {ratio} | "
              f"{'' if r['low_ops'] is None else r['low_ops']} | {r['grads'] or '-'} |" +
              (f" {r.get('half') or '-'} |" if timm_cols else "") + f" {r['seconds']:.0f} |")
    good = sum(1 for r in rows if passed(r))
    print(f"\n{good} of {len(rows)} models train under {args.precision} within the rule "
          "(ours <= 4 x max(autocast's error, half an ulp of the low type) per tensor)" +
          (" and plan half their arena bit-identically" if timm_cols else ""))
    limited = [r for r in rows if loss_scaling_limited(r, args.precision)]
    if limited:
        print(f"{len(limited)} more train within the rule but plan only down to the smallest arena "
              "the planner reaches, above half (fp16-mixed: GradScaler's skip keeps every parameter "
              "and its update on the device, docs/precision.md 'Loss scaling'), and run "
              "bit-identically there: " + ", ".join(r["model"] for r in limited))
    return 1 if args.require_all and good + len(limited) != len(rows) else 0


def loss_scaling_limited(row, precision):
    """An fp16-mixed row whose gradients pass and whose only shortfall is the
    documented one: half the arena is below the smallest the planner reaches
    with loss scaling in the step, and the plan at that smallest arena ran
    bit-identically."""
    half = row.get("half") or ""
    return (precision == "fp16-mixed" and row["grads"].startswith("ok") and
            half.startswith("no plan") and half.endswith(": ok"))


if __name__ == "__main__":
    sys.exit(main())
