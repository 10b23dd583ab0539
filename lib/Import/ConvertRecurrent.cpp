//===- ConvertRecurrent.cpp - LSTM, GRU and RNN unrolled over time --------===//
//
// Part of offload. `aten::lstm`, `aten::gru`, `aten::rnn_tanh` and
// `aten::rnn_relu` (nn.LSTM, nn.GRU, nn.RNN on padded, not packed, input)
// unrolled over the static sequence length into ops the dialect already
// has: one `linear` of the whole input sequence by W_ih per layer and
// direction, then per time step a `linear` of the hidden state by W_hh,
// slices of the gate vector, sigmoid/tanh/relu, mul and add. Gradients are
// therefore those of finite-difference-checked ops, and every step's values
// are ordinary saved values the memory passes can recompute or offload.
//
// Cell formulas (PyTorch 1.13, torch/nn/modules/rnn.py docstrings; gate
// order in the stacked weights is the same):
//   LSTM  (i, f, g, o) = (σ, σ, tanh, σ)(x W_ih^T + b_ih + h W_hh^T + b_hh)
//         c' = f * c + i * g,  h' = o * tanh(c')  [h' = h' W_hr^T with proj_size]
//   GRU   r = σ(x W_ir^T + b_ir + h W_hr^T + b_hr),  z likewise,
//         n = tanh(x W_in^T + b_in + r * (h W_hn^T + b_hn)),
//         h' = (1 - z) * n + z * h, computed as n + z * (h - n)
//   RNN   h' = tanh or relu(x W_ih^T + b_ih + h W_hh^T + b_hh)
// Layers > 0 read the previous layer's output (both directions concatenated
// on the feature dim); training-mode dropout between layers is the dialect's
// seeded dropout. The reverse direction reads time steps T-1 .. 0 and writes
// its outputs back in time order. Shapes: input [B, T, I] (batch_first) or
// [T, B, I], h0/c0 [layers * directions, B, H]; outputs [B, T, D*H] or
// [T, B, D*H], h_n and c_n [layers * directions, B, H] (h_n's last dim is
// proj_size with a projection). Packed sequences are refused.
//
//===----------------------------------------------------------------------===//
#include "OpBuilder.h"

using namespace mlir;
using namespace mlir::offload;
using namespace ::offload::import;
using namespace ::offload::import::ts;

namespace {

enum class Cell { LSTM, GRU, RNNTanh, RNNRelu };

/// The tensors of a list input (built in the model, or constant tensors such
/// as LSTM's folded zero initial states).
std::vector<mlir::Value> tensorList(StepBuilder &im, Call &n, size_t i, Type hint) {
  Arg &l = im.in(n, i);
  if (l.kind != Arg::List)
    im.fail(n, "argument " + std::to_string(i) + " must be a list of tensors");
  std::vector<mlir::Value> out;
  for (const Arg &e : l.elems) {
    if (e.kind == Arg::Tensor)
      out.push_back(e.value);
    else if (e.kind == Arg::Const)
      out.push_back(im.materialize(n, e, hint));
    else
      im.fail(n, "argument " + std::to_string(i) + ": list element is not a tensor");
  }
  return out;
}

/// x[.., start:end] on the last dim of a [B, G] tensor.
mlir::Value cols(StepBuilder &im, Call &n, mlir::Value x, int64_t start, int64_t end) {
  return emitSlice(im, n, x, im.tt(x).getRank() - 1, start, end, 1);
}

/// One direction of one layer. `gx` [B, T, G] or [T, B, G] is the input
/// product x W_ih^T + b_ih for the whole sequence; returns the hidden state
/// of every step in time order ([B, Hout] each) and the final h (and c).
struct DirResult {
  std::vector<mlir::Value> outs;
  mlir::Value h, c;
};

DirResult runDirection(StepBuilder &im, Call &n, Cell cell, mlir::Value gx, int64_t tdim,
                       bool reverse, mlir::Value h, mlir::Value c, mlir::Value whh,
                       mlir::Value bhh, mlir::Value whr) {
  auto gt = im.tt(gx);
  int64_t T = gt.getDimSize(tdim), B = gt.getDimSize(1 - tdim), G = gt.getDimSize(2);
  int64_t H = cell == Cell::LSTM ? G / 4 : cell == Cell::GRU ? G / 3 : G;
  DirResult r;
  r.outs.resize(T);
  for (int64_t k = 0; k < T; ++k) {
    int64_t t = reverse ? T - 1 - k : k;
    mlir::Value xt = im.reshape(n, emitSlice(im, n, gx, tdim, t, t + 1, 1), {B, G});
    SmallVector<mlir::Value> ops = {h, whh};
    if (bhh)
      ops.push_back(bhh);
    mlir::Value gh = im.emit1<LinearOp>(n, ops);
    switch (cell) {
    case Cell::LSTM: {
      mlir::Value g = im.emit1<AddOp>(n, {xt, gh});
      mlir::Value ifo = im.emit1<SigmoidOp>(n, {g}, {}, {g.getType()});
      mlir::Value i = cols(im, n, ifo, 0, H), f = cols(im, n, ifo, H, 2 * H),
                  o = cols(im, n, ifo, 3 * H, 4 * H);
      mlir::Value gg = cols(im, n, g, 2 * H, 3 * H);
      gg = im.emit1<TanhOp>(n, {gg}, {}, {gg.getType()});
      c = im.emit1<AddOp>(n, {im.emit1<MulOp>(n, {f, c}), im.emit1<MulOp>(n, {i, gg})});
      mlir::Value tc = im.emit1<TanhOp>(n, {c}, {}, {c.getType()});
      h = im.emit1<MulOp>(n, {o, tc});
      if (whr)
        h = im.emit1<LinearOp>(n, {h, whr});
      break;
    }
    case Cell::GRU: {
      mlir::Value rz = im.emit1<AddOp>(n, {cols(im, n, xt, 0, 2 * H), cols(im, n, gh, 0, 2 * H)});
      rz = im.emit1<SigmoidOp>(n, {rz}, {}, {rz.getType()});
      mlir::Value rg = cols(im, n, rz, 0, H), z = cols(im, n, rz, H, 2 * H);
      mlir::Value nn = im.emit1<AddOp>(
          n, {cols(im, n, xt, 2 * H, 3 * H),
              im.emit1<MulOp>(n, {rg, cols(im, n, gh, 2 * H, 3 * H)})});
      nn = im.emit1<TanhOp>(n, {nn}, {}, {nn.getType()});
      mlir::Value d = im.emit1<SubOp>(n, {h, nn});
      h = im.emit1<AddOp>(n, {nn, im.emit1<MulOp>(n, {z, d})});
      break;
    }
    case Cell::RNNTanh:
    case Cell::RNNRelu: {
      mlir::Value s = im.emit1<AddOp>(n, {xt, gh});
      h = cell == Cell::RNNTanh ? im.emit1<TanhOp>(n, {s}, {}, {s.getType()})
                                : im.emit1<ReluOp>(n, {s}, {}, {s.getType()});
      break;
    }
    }
    r.outs[t] = h;
  }
  r.h = h;
  r.c = c;
  return r;
}

template <Cell C>
void convertRecurrent(StepBuilder &im, Call &n) {
  // lstm(input, hx[], params[], has_biases, num_layers, dropout, train,
  //      bidirectional, batch_first); gru/rnn_*: hx is one tensor.
  // The packed overloads (lstm.data: data, batch_sizes, hx, params, ...) have
  // the weight list where the padded ones have has_biases.
  if (n.numInputs() != 9 || im.in(n, 3).kind != Arg::Bool)
    im.fail(n, "packed sequences (pack_padded_sequence) are not supported; pass a padded "
               "tensor");
  mlir::Value x = im.tensorIn(n, 0);
  auto xt = im.tt(x);
  Type et = xt.getElementType();
  if (xt.getRank() != 3 || !isa<FloatType>(et))
    im.fail(n, "the recurrent layer's input must be a float tensor of rank 3");
  std::vector<mlir::Value> hx =
      C == Cell::LSTM ? tensorList(im, n, 1, et) : std::vector<mlir::Value>{im.tensorIn(n, 1, et)};
  std::vector<mlir::Value> params = tensorList(im, n, 2, et);
  bool hasBias = im.getBool(n, 3);
  int64_t layers = im.getInt(n, 4);
  double p = im.getDouble(n, 5);
  bool train = im.getBool(n, 6), bidir = im.getBool(n, 7), batchFirst = im.getBool(n, 8);
  int64_t D = bidir ? 2 : 1;
  int64_t per = hasBias ? 4 : 2;
  bool proj = false;
  if (layers < 1)
    im.fail(n, "num_layers must be >= 1");
  if (int64_t(params.size()) == layers * D * (per + 1) && C == Cell::LSTM)
    proj = true, ++per;
  else if (int64_t(params.size()) != layers * D * per)
    im.fail(n, "expected " + std::to_string(layers * D * per) + " weight tensors, got " +
                   std::to_string(params.size()));
  if (hx.size() != (C == Cell::LSTM ? 2u : 1u))
    im.fail(n, "unexpected number of initial states");
  int64_t tdim = batchFirst ? 1 : 0;
  int64_t B = xt.getDimSize(1 - tdim), T = xt.getDimSize(tdim);
  // Initial state of layer l, direction d: hx[l*D + d] as [B, H].
  auto state = [&](mlir::Value s, int64_t k) {
    auto st = im.tt(s);
    if (st.getRank() != 3 || st.getDimSize(0) != layers * D || st.getDimSize(1) != B)
      im.fail(n, "initial state must be [num_layers * directions, batch, hidden]");
    return im.reshape(n, emitSlice(im, n, s, 0, k, k + 1, 1), {B, st.getDimSize(2)});
  };
  mlir::Value seq = x;
  std::vector<mlir::Value> hn, cn;
  for (int64_t l = 0; l < layers; ++l) {
    if (l > 0 && train && p > 0) {
      if (p >= 1.0)
        im.fail(n, "dropout probability must be in [0, 1)");
      int64_t off = im.nextDropoutOffset(im.tt(seq).getNumElements());
      seq = im.emit1<DropoutOp>(n, {seq, im.seed(n)}, {im.f64("p", p), im.i64("offset", off)},
                                {seq.getType()});
    }
    std::vector<DirResult> dirs;
    for (int64_t d = 0; d < D; ++d) {
      size_t base = size_t((l * D + d) * per);
      mlir::Value wih = params[base], whh = params[base + 1];
      mlir::Value bih = hasBias ? params[base + 2] : mlir::Value();
      mlir::Value bhh = hasBias ? params[base + 3] : mlir::Value();
      mlir::Value whr = proj ? params[base + per - 1] : mlir::Value();
      SmallVector<mlir::Value> ops = {seq, wih};
      if (bih)
        ops.push_back(bih);
      mlir::Value gx = im.emit1<LinearOp>(n, ops);
      mlir::Value h0 = state(hx[0], l * D + d);
      mlir::Value c0 = C == Cell::LSTM ? state(hx[1], l * D + d) : mlir::Value();
      dirs.push_back(runDirection(im, n, C, gx, tdim, d == 1, h0, c0, whh, bhh, whr));
      hn.push_back(dirs.back().h);
      if (C == Cell::LSTM)
        cn.push_back(dirs.back().c);
    }
    // The layer's output sequence: per step [B, D*H], stacked on the time dim.
    std::vector<mlir::Value> steps;
    for (int64_t t = 0; t < T; ++t) {
      mlir::Value o = dirs[0].outs[t];
      if (D == 2)
        o = im.emit1<CatOp>(n, {o, dirs[1].outs[t]}, {im.i64("dim", 1)});
      int64_t F = im.tt(o).getDimSize(1);
      steps.push_back(im.reshape(n, o, batchFirst ? ArrayRef<int64_t>{B, 1, F}
                                                  : ArrayRef<int64_t>{1, B, F}));
    }
    seq = steps.size() == 1 ? steps[0] : im.emit1<CatOp>(n, steps, {im.i64("dim", tdim)});
  }
  auto stack = [&](const std::vector<mlir::Value> &v) {
    std::vector<mlir::Value> r;
    for (mlir::Value s : v)
      r.push_back(im.reshape(n, s, {1, B, im.tt(s).getDimSize(1)}));
    return r.size() == 1 ? r[0] : im.emit1<CatOp>(n, r, {im.i64("dim", 0)});
  };
  im.setOut(n, 0, Arg::tensor(seq));
  im.setOut(n, 1, Arg::tensor(stack(hn)));
  if (C == Cell::LSTM)
    im.setOut(n, 2, Arg::tensor(stack(cn)));
}

} // namespace

void ts::registerRecurrentConversions(OpTable &t) {
  t["aten::lstm"] = convertRecurrent<Cell::LSTM>;
  t["aten::gru"] = convertRecurrent<Cell::GRU>;
  t["aten::rnn_tanh"] = convertRecurrent<Cell::RNNTanh>;
  t["aten::rnn_relu"] = convertRecurrent<Cell::RNNRelu>;
}
