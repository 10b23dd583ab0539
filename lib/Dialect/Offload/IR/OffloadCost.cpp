//===- OffloadCost.cpp - FLOP and byte counts of offload ops --------------===//
//
// Part of offload. FLOPs count a multiply-add as 2 (the convention of
// PyTorch's torch.utils.flop_counter and of Narayanan et al., SC'21,
// "Efficient Large-Scale Language Model Training on GPU Clusters").
//
//===----------------------------------------------------------------------===//

#include "offload/Dialect/Offload/IR/OffloadOps.h"

#include <algorithm>

using namespace mlir;
using namespace mlir::offload;

#include "offload/Dialect/Offload/IR/OffloadInterfaces.cpp.inc"

bool mlir::offload::detail::isFloatTensor(Type t) {
  auto rt = dyn_cast<RankedTensorType>(t);
  if (!rt)
    return false;
  Type e = rt.getElementType();
  return e.isF32() || e.isF64() || e.isBF16() || e.isF16();
}

bool mlir::offload::detail::isLowFloat(Type t) {
  if (auto rt = dyn_cast<RankedTensorType>(t))
    t = rt.getElementType();
  return t.isBF16() || t.isF16();
}

Type mlir::offload::detail::statisticsType(Type t) {
  return isLowFloat(t) ? Type(Float32Type::get(t.getContext())) : t;
}

int64_t mlir::offload::detail::tensorBytes(Type t) {
  auto rt = dyn_cast<RankedTensorType>(t);
  if (auto s = dyn_cast<SavedType>(t))
    rt = s.getTensorType();
  if (auto h = dyn_cast<HostType>(t))
    rt = h.getTensorType();
  if (!rt || !rt.hasStaticShape())
    return -1;
  unsigned bits = rt.getElementType().getIntOrFloatBitWidth();
  int64_t eltBytes = std::max<int64_t>(1, bits / 8);
  return rt.getNumElements() * eltBytes;
}

static int64_t sumBytes(TypeRange types) {
  int64_t total = 0;
  for (Type t : types) {
    if (isa<TokenType>(t))
      continue;
    int64_t b = mlir::offload::detail::tensorBytes(t);
    if (b < 0)
      return -1;
    total += b;
  }
  return total;
}

int64_t mlir::offload::detail::sumOperandBytes(Operation *op) {
  return sumBytes(op->getOperandTypes());
}
int64_t mlir::offload::detail::sumResultBytes(Operation *op) {
  return sumBytes(op->getResultTypes());
}
int64_t mlir::offload::detail::sumResultElements(Operation *op) {
  int64_t total = 0;
  for (Type t : op->getResultTypes()) {
    auto rt = dyn_cast<RankedTensorType>(t);
    if (!rt)
      continue;
    if (!rt.hasStaticShape())
      return -1;
    total += rt.getNumElements();
  }
  return total;
}

static int64_t numel(Type t) {
  if (auto h = dyn_cast<HostType>(t)) // host-side optimizer updates
    t = h.getTensorType();
  auto rt = cast<RankedTensorType>(t);
  return rt.hasStaticShape() ? rt.getNumElements() : -1;
}

int64_t LinearOp::getFlops() {
  auto w = getWeight().getType();
  int64_t out = numel(getResult().getType());
  if (out < 0)
    return -1;
  return 2 * out * w.getDimSize(1) + (getBias() ? out : 0);
}

int64_t MatmulOp::getFlops() {
  auto l = getLhs().getType();
  int64_t k = l.getDimSize(getTransposeA() ? l.getRank() - 2 : l.getRank() - 1);
  int64_t out = numel(getResult().getType());
  return out < 0 ? -1 : 2 * out * k;
}

/// Attention: 2·N·Hq·L·S·(E + Ev) forward (q kᵀ and P v); the backward
/// recomputes q kᵀ and forms dP, dV, dQ and dK: 4·N·Hq·L·S·E + 2·N·Hq·L·S·Ev
/// (the FLOP counts of FlashAttention's paper, Dao et al. 2022, section 3).
static int64_t attentionFlops(RankedTensorType q, RankedTensorType k, RankedTensorType v,
                              AttentionLayout layout, int64_t perE, int64_t perEv) {
  if (!q.hasStaticShape() || !k.hasStaticShape() || !v.hasStaticShape())
    return -1;
  AttentionDims qd = attentionDims(q, layout);
  int64_t rows = qd.n * qd.h * qd.l * attentionDims(k, layout).l;
  return rows * (perE * qd.e + perEv * v.getDimSize(3));
}
int64_t AttentionOp::getFlops() {
  return attentionFlops(getQuery().getType(), getKey().getType(), getValue().getType(),
                        getLayout(), 2, 2);
}
int64_t AttentionBackwardOp::getFlops() {
  return attentionFlops(getQuery().getType(), getKey().getType(), getValue().getType(),
                        getLayout(), 6, 4);
}

/// The host kernel's working set per task (lib/Runtime/Kernels/Attention.cpp,
/// blocks of B = 64 query rows, every value widened to double): forward, one
/// (n, h, row block): the block's queries and output, the head's keys and
/// values, and a B x S score tile: 8·(B·E + S·E + S·Ev + B·S + B·Ev) bytes.
/// Backward, one (n, kv head): keys, values and their double gradients, a
/// block's queries, output gradients and query gradient, and the B x S
/// probability, gradient and (with dropout) dropped-probability tiles. It is
/// O(B·S), never the L x S matrix. The same in either layout: a token-layout
/// (blhd) head's rows are gathered into the same packed buffers.
static constexpr int64_t kAttentionHostBlockRows = 64;
static int64_t attentionScratch(RankedTensorType q, RankedTensorType k, RankedTensorType v,
                                AttentionLayout layout, bool backward, bool dropout) {
  if (!q.hasStaticShape() || !k.hasStaticShape() || !v.hasStaticShape())
    return -1;
  int64_t b = std::min<int64_t>(kAttentionHostBlockRows, attentionDims(q, layout).l);
  int64_t s = attentionDims(k, layout).l, e = q.getDimSize(3), ev = v.getDimSize(3);
  if (!backward)
    return 8 * (b * e + s * e + s * ev + b * s + b * ev);
  return 8 * (2 * (s * e + s * ev) + 2 * b * e + b * ev + (dropout ? 3 : 2) * b * s + b);
}
int64_t AttentionOp::getScratchBytes() {
  return attentionScratch(getQuery().getType(), getKey().getType(), getValue().getType(),
                          getLayout(), false, false);
}
int64_t AttentionBackwardOp::getScratchBytes() {
  return attentionScratch(getQuery().getType(), getKey().getType(), getValue().getType(),
                          getLayout(), true, getDropoutP().convertToDouble() > 0);
}

/// 2 · (output elements) · (C/groups · KH · KW): one multiply-add per weight
/// tap per output element.
static int64_t convFlops(RankedTensorType out, RankedTensorType weight) {
  if (!out.hasStaticShape() || !weight.hasStaticShape())
    return -1;
  return 2 * out.getNumElements() * weight.getDimSize(1) * weight.getDimSize(2) *
         weight.getDimSize(3);
}

int64_t Conv2dOp::getFlops() {
  auto out = getResult().getType();
  return convFlops(out, getWeight().getType()) +
         (getBias() && out.hasStaticShape() ? out.getNumElements() : 0);
}
// The input and weight gradients each cost as much as the forward product.
int64_t Conv2dBackwardInputOp::getFlops() {
  return convFlops(getGradOutput().getType(), getWeight().getType());
}
int64_t Conv2dBackwardWeightOp::getFlops() {
  return convFlops(getGradOutput().getType(), getGradWeight().getType());
}

// Per element: weight decay (2), momentum (3), nesterov (2), update (2).
// An update with `skip_if` is priced as one that runs (its bytes are the
// default's, the flag's one byte included): a skipped step is the rare case
// of loss scaling, and costs at most this.
int64_t SgdUpdateOp::getFlops() { return 9 * numel(getParam().getType()); }
// Per element, following the AdamW formula in the op description: ~16.
int64_t AdamWUpdateOp::getFlops() { return 16 * numel(getParam().getType()); }

// A reshape is a view: it moves no bytes.
int64_t ReshapeOp::getFlops() { return 0; }
int64_t ReshapeOp::getBytesRead() { return 0; }
int64_t ReshapeOp::getBytesWritten() { return 0; }

int64_t RecomputeOp::getFlops() {
  int64_t total = 0;
  for (Operation &op : getBody().front()) {
    auto cost = dyn_cast<CostOpInterface>(&op);
    if (!cost)
      continue;
    int64_t f = cost.getFlops();
    if (f < 0)
      return -1;
    total += f;
  }
  return total;
}
