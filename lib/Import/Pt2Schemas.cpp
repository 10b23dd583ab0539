//===- Pt2Schemas.cpp - Argument lists of the ATen overloads .pt2 uses ---===//
//
// Part of offload. A .pt2 stores a node's arguments by name and leaves out
// those at their default value; the shared conversions read arguments by
// position. This table lists, for each `op.overload` the .pt2 importer
// converts, the schema's arguments in order with their defaults, as
// PyTorch's native_functions.yaml declares them.
//
//===----------------------------------------------------------------------===//
#include "Pt2.h"

using namespace ::offload::import;
using namespace ::offload::import::ts;

namespace {

//===----------------------------------------------------------------------===//
// Op schemas: argument names and defaults, by `op.overload`
//===----------------------------------------------------------------------===//

/// The positional arguments of the ATen overloads offload converts, as
/// native_functions.yaml declares them (keyword-only arguments after `*`
/// included in order). A default is a Python literal: None, True, False, a
/// number, a list of ints, or a quoted string.
const char *const kSchemas[][2] = {
    {"relu.default", "self"}, {"sigmoid.default", "self"}, {"tanh.default", "self"},
    {"exp.default", "self"}, {"neg.default", "self"}, {"sqrt.default", "self"},
    {"rsqrt.default", "self"}, {"hardswish.default", "self"}, {"silu.default", "self"},
    {"gelu.default", "self, approximate='none'"},
    {"hardtanh.default", "self, min_val=-1, max_val=1"}, {"relu6.default", "self"},
    {"hardsigmoid.default", "self"},
    {"add.Tensor", "self, other, alpha=1"}, {"add.Scalar", "self, other, alpha=1"},
    {"sub.Tensor", "self, other, alpha=1"}, {"sub.Scalar", "self, other, alpha=1"},
    {"mul.Tensor", "self, other"}, {"mul.Scalar", "self, other"},
    {"div.Tensor", "self, other"}, {"div.Scalar", "self, other"},
    {"rsub.Scalar", "self, other, alpha=1"},
    {"addcmul.default", "self, tensor1, tensor2, value=1"},
    {"masked_fill.Scalar", "self, mask, value"}, {"where.self", "condition, self, other"},
    {"bitwise_not.default", "self"}, {"logical_not.default", "self"},
    {"bitwise_and.Tensor", "self, other"}, {"bitwise_or.Tensor", "self, other"},
    {"__and__.Tensor", "self, other"}, {"__or__.Tensor", "self, other"},
    {"logical_and.default", "self, other"}, {"logical_or.default", "self, other"},
    {"linear.default", "input, weight, bias=None"}, {"matmul.default", "self, other"},
    {"bmm.default", "self, mat2"}, {"mm.default", "self, mat2"},
    {"baddbmm.default", "self, batch1, batch2, beta=1, alpha=1"},
    {"conv1d.default",
     "input, weight, bias=None, stride=[1], padding=[0], dilation=[1], groups=1"},
    {"conv2d.default",
     "input, weight, bias=None, stride=[1, 1], padding=[0, 0], dilation=[1, 1], groups=1"},
    {"batch_norm.default",
     "input, weight, bias, running_mean, running_var, training, momentum, eps, cudnn_enabled"},
    {"layer_norm.default",
     "input, normalized_shape, weight=None, bias=None, eps=1e-05, cudnn_enable=True"},
    {"max_pool2d.default",
     "self, kernel_size, stride=[], padding=[0, 0], dilation=[1, 1], ceil_mode=False"},
    {"avg_pool2d.default", "self, kernel_size, stride=[], padding=[0, 0], ceil_mode=False, "
                           "count_include_pad=True, divisor_override=None"},
    {"adaptive_avg_pool2d.default", "self, output_size"},
    {"softmax.int", "self, dim, dtype=None"}, {"log_softmax.int", "self, dim, dtype=None"},
    {"dropout.default", "input, p, train"},
    {"embedding.default",
     "weight, indices, padding_idx=-1, scale_grad_by_freq=False, sparse=False"},
    {"cross_entropy_loss.default",
     "self, target, weight=None, reduction=1, ignore_index=-100, label_smoothing=0.0"},
    {"nll_loss.default", "self, target, weight=None, reduction=1, ignore_index=-100"},
    {"nll_loss_nd.default", "self, target, weight=None, reduction=1, ignore_index=-100"},
    {"nll_loss2d.default", "self, target, weight=None, reduction=1, ignore_index=-100"},
    {"mse_loss.default", "self, target, reduction=1"},
    {"scaled_dot_product_attention.default",
     "query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None, "
     "enable_gqa=False"},
    {"view.default", "self, size"}, {"reshape.default", "self, shape"},
    {"flatten.using_ints", "self, start_dim=0, end_dim=-1"},
    {"unflatten.int", "self, dim, sizes"}, {"unsqueeze.default", "self, dim"},
    {"squeeze.dim", "self, dim"}, {"squeeze.default", "self"},
    {"transpose.int", "self, dim0, dim1"}, {"t.default", "self"},
    {"permute.default", "self, dims"},
    {"contiguous.default", "self, memory_format=None"},
    {"clone.default", "self, memory_format=None"}, {"alias.default", "self"},
    {"reshape_as.default", "self, other"},
    {"_assert_tensor_metadata.default",
     "a, size=None, stride=None, dtype=None, device=None, layout=None"},
    {"index.Tensor", "self, indices"},
    {"expand.default", "self, size, implicit=False"},
    {"cat.default", "tensors, dim=0"}, {"stack.default", "tensors, dim=0"},
    {"slice.Tensor", "self, dim=0, start=None, end=None, step=1"},
    {"select.int", "self, dim, index"},
    {"chunk.default", "self, chunks, dim=0"},
    {"split.Tensor", "self, split_size, dim=0"},
    {"split_with_sizes.default", "self, split_sizes, dim=0"},
    {"mean.dim", "self, dim, keepdim=False, dtype=None"}, {"mean.default", "self, dtype=None"},
    {"sum.dim_IntList", "self, dim, keepdim=False, dtype=None"},
    {"sum.default", "self, dtype=None"},
    {"to.dtype", "self, dtype, non_blocking=False, copy=False, memory_format=None"},
    {"type_as.default", "self, other"},
    {"to.device", "self, device, dtype, non_blocking=False, copy=False, memory_format=None"},
    {"to.dtype_layout", "self, dtype=None, layout=None, device=None, pin_memory=None, "
                        "non_blocking=False, copy=False, memory_format=None"},
    {"_to_copy.default", "self, dtype=None, layout=None, device=None, pin_memory=None, "
                         "non_blocking=False, memory_format=None"},
    {"clamp.default", "self, min=None, max=None"}, {"clamp_min.default", "self, min"},
    {"clamp_max.default", "self, max"},
    {"group_norm.default", "input, num_groups, weight=None, bias=None, eps=1e-05, "
                           "cudnn_enabled=True"},
    {"pad.default", "self, pad, mode='constant', value=None"},
    {"constant_pad_nd.default", "self, pad, value=0"},
    {"pixel_shuffle.default", "self, upscale_factor"},
    {"roll.default", "self, shifts, dims=[]"},
    // ConvertComposite.cpp, ConvertRecurrent.cpp, the transposed convolution,
    // unbind, zero/fill.
    {"conv_transpose2d.input",
     "input, weight, bias=None, stride=[1, 1], padding=[0, 0], output_padding=[0, 0], "
     "groups=1, dilation=[1, 1]"},
    {"lstm.input",
     "input, hx, params, has_biases, num_layers, dropout, train, bidirectional, batch_first"},
    {"gru.input",
     "input, hx, params, has_biases, num_layers, dropout, train, bidirectional, batch_first"},
    {"rnn_tanh.input",
     "input, hx, params, has_biases, num_layers, dropout, train, bidirectional, batch_first"},
    {"rnn_relu.input",
     "input, hx, params, has_biases, num_layers, dropout, train, bidirectional, batch_first"},
    {"einsum.default", "equation, tensors, path=None"},
    {"linalg_vector_norm.default", "self, ord=2, dim=None, keepdim=False, dtype=None"},
    {"norm.Scalar", "self, p=2"},
    {"norm.ScalarOpt_dim", "self, p, dim, keepdim=False"},
    {"norm.ScalarOpt_dim_dtype", "self, p, dim, keepdim, dtype"},
    {"expand_as.default", "self, other"},
    {"upsample_bilinear2d.vec", "input, output_size, align_corners, scale_factors"},
    {"upsample_bilinear2d.default",
     "self, output_size, align_corners, scales_h=None, scales_w=None"},
    {"zero.default", "self"}, {"fill.Scalar", "self, value"},
    {"copy.default", "self, src, non_blocking=False"},
    {"unbind.int", "self, dim=0"},
    // What torch.export writes for HuggingFace transformers (issue 28): the
    // ops Pt2Fold.cpp evaluates on constants (position ids, masks, T5's
    // relative-position buckets) and the few converted for values of the
    // step (pow, addmm, detach).
    {"arange.default", "end, dtype=None, layout=None, device=None, pin_memory=None"},
    {"arange.start", "start, end, dtype=None, layout=None, device=None, pin_memory=None"},
    {"arange.start_step",
     "start, end, step=1, dtype=None, layout=None, device=None, pin_memory=None"},
    {"ones.default", "size, dtype=None, layout=None, device=None, pin_memory=None"},
    {"zeros.default", "size, dtype=None, layout=None, device=None, pin_memory=None"},
    {"empty.memory_format",
     "size, dtype=None, layout=None, device=None, pin_memory=None, memory_format=None"},
    {"full.default", "size, fill_value, dtype=None, layout=None, device=None, pin_memory=None"},
    {"scalar_tensor.default", "s, dtype=None, layout=None, device=None, pin_memory=None"},
    {"triu.default", "self, diagonal=0"}, {"tril.default", "self, diagonal=0"},
    {"ones_like.default",
     "self, dtype=None, layout=None, device=None, pin_memory=None, memory_format=None"},
    {"zeros_like.default",
     "self, dtype=None, layout=None, device=None, pin_memory=None, memory_format=None"},
    {"empty_like.default",
     "self, dtype=None, layout=None, device=None, pin_memory=None, memory_format=None"},
    {"full_like.default", "self, fill_value, dtype=None, layout=None, device=None, "
                          "pin_memory=None, memory_format=None"},
    {"new_ones.default", "self, size, dtype=None, layout=None, device=None, pin_memory=None"},
    {"new_zeros.default", "self, size, dtype=None, layout=None, device=None, pin_memory=None"},
    {"new_empty.default", "self, size, dtype=None, layout=None, device=None, pin_memory=None"},
    {"new_full.default",
     "self, size, fill_value, dtype=None, layout=None, device=None, pin_memory=None"},
    {"detach.default", "self"}, {"lift_fresh_copy.default", "self"},
    {"lift_fresh.default", "self"},
    {"abs.default", "self"}, {"log.default", "self"}, {"sin.default", "self"},
    {"cos.default", "self"}, {"floor.default", "self"}, {"ceil.default", "self"},
    {"trunc.default", "self"}, {"round.default", "self"}, {"sign.default", "self"},
    {"reciprocal.default", "self"},
    {"pow.Tensor_Scalar", "self, exponent"}, {"pow.Tensor_Tensor", "self, exponent"},
    {"pow.Scalar", "self, exponent"},
    {"eq.Scalar", "self, other"}, {"eq.Tensor", "self, other"},
    {"ne.Scalar", "self, other"}, {"ne.Tensor", "self, other"},
    {"lt.Scalar", "self, other"}, {"lt.Tensor", "self, other"},
    {"le.Scalar", "self, other"}, {"le.Tensor", "self, other"},
    {"gt.Scalar", "self, other"}, {"gt.Tensor", "self, other"},
    {"ge.Scalar", "self, other"}, {"ge.Tensor", "self, other"},
    {"bitwise_xor.Tensor", "self, other"}, {"__xor__.Tensor", "self, other"},
    {"logical_xor.default", "self, other"},
    {"minimum.default", "self, other"}, {"maximum.default", "self, other"},
    {"min.other", "self, other"}, {"max.other", "self, other"},
    {"fmin.default", "self, other"}, {"fmax.default", "self, other"},
    {"div.Tensor_mode", "self, other, rounding_mode"},
    {"div.Scalar_mode", "self, other, rounding_mode"},
    {"floor_divide.default", "self, other"}, {"floor_divide.Scalar", "self, other"},
    {"remainder.Tensor", "self, other"}, {"remainder.Scalar", "self, other"},
    {"rsub.Tensor", "self, other, alpha=1"},
    {"where.ScalarOther", "condition, self, other"},
    {"where.ScalarSelf", "condition, self, other"}, {"where.Scalar", "condition, self, other"},
    {"masked_fill.Tensor", "self, mask, value"},
    {"_unsafe_view.default", "self, size"}, {"squeeze.dims", "self, dim"},
    {"narrow.default", "self, dim, start, length"}, {"repeat.default", "self, repeats"},
    {"gather.default", "self, dim, index, sparse_grad=False"},
    {"cumsum.default", "self, dim, dtype=None"},
    {"diff.default", "self, n=1, dim=-1, prepend=None, append=None"},
    {"any.default", "self"}, {"any.dim", "self, dim, keepdim=False"},
    {"any.dims", "self, dim=None, keepdim=False"},
    {"all.default", "self"}, {"all.dim", "self, dim, keepdim=False"},
    {"all.dims", "self, dim=None, keepdim=False"},
    {"amax.default", "self, dim=[], keepdim=False"},
    {"amin.default", "self, dim=[], keepdim=False"},
    {"addmm.default", "self, mat1, mat2, beta=1, alpha=1"},
    // diffusers' UNet2DModel: nearest upsampling, and the broadcast
    // F.mse_loss applies first.
    {"upsample_nearest2d.vec", "input, output_size, scale_factors"},
    {"upsample_nearest2d.default", "self, output_size, scales_h=None, scales_w=None"},
    {"broadcast_tensors.default", "tensors"},
};


Arg parseDefault(llvm::StringRef s) {
  s = s.trim();
  if (s == "None")
    return Arg::none();
  if (s == "True" || s == "False")
    return Arg::boolean(s == "True");
  if (s.starts_with("'")) {
    Arg a;
    a.kind = Arg::String;
    a.s = s.drop_front().drop_back().str();
    return a;
  }
  if (s.starts_with("[")) {
    std::vector<int64_t> v;
    llvm::SmallVector<llvm::StringRef> parts;
    s.drop_front().drop_back().split(parts, ',', -1, false);
    for (llvm::StringRef p : parts) {
      int64_t x = 0;
      p.trim().getAsInteger(10, x);
      v.push_back(x);
    }
    return Arg::intList(v);
  }
  int64_t i = 0;
  if (!s.getAsInteger(10, i))
    return Arg::integer(i);
  double d = 0;
  s.getAsDouble(d);
  return Arg::number(d);
}

const llvm::StringMap<std::vector<Pt2ArgSpec>> &schemas() {
  static const llvm::StringMap<std::vector<Pt2ArgSpec>> table = [] {
    llvm::StringMap<std::vector<Pt2ArgSpec>> t;
    for (const auto &row : kSchemas) {
      std::vector<Pt2ArgSpec> args;
      llvm::SmallVector<llvm::StringRef> parts;
      // Split at top-level commas (not inside [...]).
      llvm::StringRef s(row[1]);
      int depth = 0;
      size_t start = 0;
      for (size_t i = 0; i <= s.size(); ++i) {
        if (i < s.size() && s[i] == '[')
          ++depth;
        if (i < s.size() && s[i] == ']')
          --depth;
        if (i == s.size() || (s[i] == ',' && depth == 0)) {
          parts.push_back(s.slice(start, i).trim());
          start = i + 1;
        }
      }
      for (llvm::StringRef p : parts) {
        Pt2ArgSpec a;
        auto [name, dflt] = p.split('=');
        a.name = name.trim().str();
        if (p.contains('=')) {
          a.hasDefault = true;
          a.dflt = parseDefault(dflt);
        }
        args.push_back(std::move(a));
      }
      t[row[0]] = std::move(args);
    }
    return t;
  }();
  return table;
}

} // namespace

auto ::offload::import::pt2Schema(const std::string &opOverload) -> const std::vector<Pt2ArgSpec> * {
  auto it = schemas().find(opOverload);
  return it == schemas().end() ? nullptr : &it->second;
}
