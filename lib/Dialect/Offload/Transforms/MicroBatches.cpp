//===- MicroBatches.cpp - Gradient accumulation over micro-batches --------===//
//
// Part of offload. The two halves of --offload-autodiff's micro-batches=K
// (docs/training.md):
//
// 1. splitStepBatch, on the forward step before differentiation: every input
//    (role `input`) is sliced along dim 0 to its first micro-batch and the
//    forward ops are retyped for the micro-batch (result types inferred again
//    from the sliced operands). Autodiff then builds one micro-batch's
//    forward and backward as it builds a whole step.
// 2. unrollMicroBatches, after the backward: the forward and backward are
//    cloned for micro-batches 1..K-1 (each slicing its own rows of the
//    inputs, each dropout drawing its own random numbers), the parameter
//    gradients are summed into f32 accumulators right where each
//    micro-batch's gradient is final, and the loss becomes the mean of the
//    micro-batch losses. The optimizer phase that follows reads the
//    accumulators.
//
// Unrolling keeps the step one straight-line block: the memory plan, the
// memory passes and the planner see each micro-batch's saved values die at
// the end of its backward, and the accumulators live across.
//
//===----------------------------------------------------------------------===//

#include "offload/Dialect/Offload/Transforms/Autodiff.h"

#include "offload/Dialect/Offload/IR/OffloadOps.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Interfaces/InferTypeOpInterface.h"
#include "llvm/ADT/DenseMap.h"

using namespace mlir;
using namespace mlir::offload;

static std::string typeString(Type t) {
  std::string s;
  llvm::raw_string_ostream os(s);
  os << t;
  return s;
}

static StringRef argName(func::FuncOp fn, unsigned i) {
  auto a = fn.getArgAttrOfType<StringAttr>(i, OffloadDialect::kNameAttrName);
  return a ? a.getValue() : StringRef("?");
}

/// The dim of `now` that is `old`'s divided by k, all others equal; -1 when
/// the shapes are equal; -2 otherwise.
static int64_t splitDim(RankedTensorType old, RankedTensorType now, int64_t k) {
  if (old.getRank() != now.getRank())
    return -2;
  int64_t dim = -1;
  for (int64_t d = 0; d < old.getRank(); ++d) {
    if (old.getDimSize(d) == now.getDimSize(d))
      continue;
    if (dim >= 0 || now.getDimSize(d) * k != old.getDimSize(d))
      return -2;
    dim = d;
  }
  return dim;
}

namespace {
/// Where a value's batch is: dim `dim`, whose size is outer x `count` x
/// `inner` (row-major), the batch index being the middle factor. A reshape
/// that merges the batch with a dim before it ([T, B, E] -> [T * B, E])
/// leaves the batch inside a dim; `inner` keeps the split exact.
struct BatchDim {
  int64_t dim = 0, inner = 1, count = 1;
};
} // namespace

/// The micro-batch result types of `op`, whose operands were retyped
/// (`oldType` holds their whole-batch types, `batchOf` where each one's
/// batch is), with the reshape's new batch dim in `reshapeBatch`.
static FailureOr<SmallVector<Type>>
microBatchTypes(Operation *op, int64_t k, const llvm::DenseMap<Value, Type> &oldType,
                const llvm::DenseMap<Value, BatchDim> &batchOf, BatchDim &reshapeBatch,
                std::string &why) {
  SmallVector<Type> types;
  if (auto infer = dyn_cast<InferTypeOpInterface>(op)) {
    if (failed(infer.inferReturnTypes(op->getContext(), op->getLoc(), op->getOperands(),
                                      op->getRawDictionaryAttrs(), op->getPropertiesStorage(),
                                      op->getRegions(), types))) {
      why = "its result type cannot be inferred from the micro-batch operands (above)";
      return failure();
    }
    return types;
  }
  // The first retyped operand.
  Value in;
  for (Value v : op->getOperands())
    if (batchOf.count(v)) {
      in = v;
      break;
    }
  auto oldIn = cast<RankedTensorType>(oldType.lookup(in));
  auto newIn = cast<RankedTensorType>(in.getType());
  BatchDim bd = batchOf.lookup(in);
  int64_t d = bd.dim;
  for (Value r : op->getResults()) {
    auto rt = dyn_cast<RankedTensorType>(r.getType());
    if (!rt) {
      types.push_back(r.getType());
      continue;
    }
    SmallVector<int64_t> shape(rt.getShape());
    if (isa<ReshapeOp>(op)) {
      // Row-major: one batch index spans `after` elements, the batch `span`;
      // the result dim e holding both bounds holds the batch.
      int64_t after = bd.inner;
      for (int64_t i = d + 1; i < oldIn.getRank(); ++i)
        after *= oldIn.getDimSize(i);
      int64_t span = after * bd.count, e = -1, suffix = 1;
      for (int64_t i = rt.getRank() - 1; i >= 0 && e < 0; --i) {
        int64_t within = suffix * shape[i];
        if (after % suffix == 0 && within % span == 0)
          e = i;
        suffix = within;
      }
      if (e < 0) {
        why = "the reshape from " + typeString(oldIn) + " to " + typeString(rt) +
              " splits the batch (dim " + std::to_string(d) + ") across dims";
        return failure();
      }
      int64_t inside = 1;
      for (int64_t i = e + 1; i < rt.getRank(); ++i)
        inside *= shape[i];
      reshapeBatch = {e, after / inside, bd.count};
      shape[e] /= k;
    } else if (isa<BroadcastToOp>(op)) {
      int64_t e = d + rt.getRank() - oldIn.getRank();
      if (e < 0 || shape[e] != oldIn.getDimSize(d)) {
        why = "the broadcast does not keep the batch dim";
        return failure();
      }
      shape[e] = newIn.getDimSize(d);
    } else if (rt.getShape() == oldIn.getShape()) {
      // Elementwise (copy, dropout, masked_fill, cumsum, ...): the result
      // has its input's shape.
      shape.assign(newIn.getShape().begin(), newIn.getShape().end());
    } else {
      why = "its result type is not inferred from its operands";
      return failure();
    }
    types.push_back(rt.clone(shape));
  }
  return types;
}

LogicalResult mlir::offload::splitStepBatch(func::FuncOp fn, int64_t k,
                                            MicroBatchSplit &split) {
  split.k = k;
  MLIRContext *ctx = fn.getContext();
  Block &body = fn.getBody().front();
  // The same mathematics only.
  for (Operation &op : body)
    if (isa<BatchNormOp>(op))
      return op.emitOpError()
             << "cannot run in micro-batches (offload-autodiff micro-batches=" << k
             << "): batch norm in training mode normalizes with the statistics of the "
                "batch it sees, so K micro-batches compute something else than the "
                "whole batch (and update the running statistics K times); put the model "
                "in eval mode, or replace batch norm by a norm without batch statistics "
                "(layer or group norm), or train with micro-batches=1";
  for (unsigned i = 0; i < fn.getNumResults(); ++i) {
    std::optional<Role> role = getResultRole(fn, i);
    auto name = fn.getResultAttrOfType<StringAttr>(i, OffloadDialect::kNameAttrName);
    if (role == Role::loss)
      continue;
    return fn.emitOpError() << "offload-autodiff micro-batches=" << k << ": result #" << i
                            << " ('" << (name ? name.getValue() : "?") << "', role "
                            << (role ? stringifyRole(*role) : "none")
                            << ") is not a loss; gradient accumulation needs a training step "
                               "that returns only its loss (a step that updates state or "
                               "returns an output would update or return it per micro-batch)";
  }

  // The slices of the inputs, at the start of the forward.
  OpBuilder b(ctx);
  if (!body.empty() && isa<PhaseOp>(body.front()))
    b.setInsertionPointAfter(&body.front());
  else
    b.setInsertionPointToStart(&body);
  llvm::DenseMap<Value, Type> oldType;
  llvm::DenseMap<Value, BatchDim> batchOf;
  for (BlockArgument arg : body.getArguments()) {
    if (getArgRole(fn, arg.getArgNumber()) != Role::input || arg.use_empty())
      continue;
    // The input's location: the importers name it (loc("x")) without a
    // file; the step's (the model file) then holds the name.
    Location loc = arg.getLoc();
    if (isa<UnknownLoc>(loc))
      loc = fn.getLoc();
    else if (auto n = dyn_cast<NameLoc>(loc); n && isa<UnknownLoc>(n.getChildLoc()))
      loc = NameLoc::get(n.getName(), fn.getLoc());
    auto t = dyn_cast<RankedTensorType>(arg.getType());
    if (!t || t.getRank() == 0 || !t.hasStaticShape())
      return mlir::emitError(loc) << "offload-autodiff micro-batches=" << k << ": input '"
                                  << argName(fn, arg.getArgNumber()) << "' (" << arg.getType()
                                  << ") has no batch dim to slice; every input is sliced "
                                     "along dim 0";
    int64_t batch = t.getDimSize(0);
    if (batch % k != 0)
      return mlir::emitError(loc) << "offload-autodiff micro-batches=" << k << ": the batch of input '"
                                  << argName(fn, arg.getArgNumber()) << "' (dim 0 of " << t
                                  << ") is " << batch << ", not divisible by " << k;
    auto slice = SliceOp::create(b, arg.getLoc(), arg, b.getI64IntegerAttr(0),
                                 b.getI64IntegerAttr(0), b.getI64IntegerAttr(batch / k),
                                 b.getI64IntegerAttr(1));
    arg.replaceAllUsesExcept(slice.getResult(), slice);
    oldType[slice.getResult()] = t;
    batchOf[slice.getResult()] = {0, 1, batch};
    split.slices.push_back(slice);
  }
  if (split.slices.empty())
    return fn.emitOpError() << "offload-autodiff micro-batches=" << k
                            << ": the step reads no input (role 'input') to split";

  // Retype the forward for the micro-batch, in program order.
  for (Operation &op : body.without_terminator()) {
    if (llvm::none_of(op.getOperands(), [&](Value v) { return batchOf.count(v); }))
      continue;
    if (llvm::is_contained(split.slices, &op))
      continue;
    std::string why;
    BatchDim reshaped;
    FailureOr<SmallVector<Type>> types =
        microBatchTypes(&op, k, oldType, batchOf, reshaped, why);
    if (failed(types))
      return op.emitOpError() << "cannot run on a micro-batch (offload-autodiff micro-batches="
                              << k << "): " << why;
    for (auto [r, t] : llvm::zip(op.getResults(), *types)) {
      if (r.getType() == t)
        continue;
      auto oldT = dyn_cast<RankedTensorType>(r.getType());
      auto newT = dyn_cast<RankedTensorType>(t);
      int64_t d = oldT && newT ? splitDim(oldT, newT, k) : -2;
      if (d < 0)
        return op.emitOpError() << "cannot run on a micro-batch (offload-autodiff micro-batches="
                                << k << "): result #" << r.getResultNumber() << " would be "
                                << t << " instead of " << r.getType()
                                << ", not the whole-batch type with one dim divided by " << k;
      // The batch's place in the result: the reshape's, else that of an
      // operand whose batch dim has the same size.
      BatchDim bd{d, 1, 0};
      if (isa<ReshapeOp>(op))
        bd = reshaped;
      for (Value v : op.getOperands()) {
        auto it = batchOf.find(v);
        if (it == batchOf.end())
          continue;
        if (!bd.count)
          bd.count = it->second.count;
        if (!isa<ReshapeOp>(op) &&
            cast<RankedTensorType>(oldType.lookup(v)).getDimSize(it->second.dim) ==
                oldT.getDimSize(d)) {
          bd = {d, it->second.inner, it->second.count};
          break;
        }
      }
      oldType[r] = r.getType();
      batchOf[r] = bd;
      r.setType(t);
    }
    if (failed(mlir::verify(&op)))
      return op.emitOpError() << "cannot run on a micro-batch (offload-autodiff micro-batches="
                              << k << "): the op does not verify with micro-batch types";
  }
  for (Value v : body.getTerminator()->getOperands())
    if (batchOf.count(v))
      return fn.emitOpError() << "offload-autodiff micro-batches=" << k
                              << ": a result has a batch dim";
  return success();
}

LogicalResult mlir::offload::unrollMicroBatches(func::FuncOp fn, const MicroBatchSplit &split,
                                                OpBuilder &b, SmallVectorImpl<Value> &grads) {
  int64_t k = split.k;
  MLIRContext *ctx = fn.getContext();
  Block &body = fn.getBody().front();
  auto ret = cast<func::ReturnOp>(body.getTerminator());
  // Micro-batch 0: everything before the return now.
  SmallVector<Operation *> first;
  for (Operation &op : body.without_terminator())
    first.push_back(&op);
  auto f32 = b.getF32Type();
  // Each dropout draws from its own Philox counters: micro-batch i's start
  // past every counter micro-batch 0 uses.
  int64_t span = 0;
  for (Operation *op : first)
    if (auto d = dyn_cast<DropoutOp>(op)) {
      int64_t n = cast<RankedTensorType>(d.getInput().getType()).getNumElements();
      span = std::max(span, int64_t(d.getOffset()) + n);
    }
  for (Operation *op : first)
    if (auto m = dyn_cast<PhaseOp>(op))
      m.setMicroBatchAttr(b.getI64IntegerAttr(0));

  SmallVector<IRMapping> maps;
  maps.resize(size_t(k));
  b.setInsertionPoint(ret);
  for (int64_t i = 1; i < k; ++i) {
    IRMapping &map = maps[size_t(i)];
    for (Operation *op : first) {
      Operation *c = b.clone(*op, map);
      if (auto m = dyn_cast<PhaseOp>(c))
        m.setMicroBatchAttr(b.getI64IntegerAttr(i));
      else if (auto d = dyn_cast<DropoutOp>(c))
        d.setOffset(uint64_t(int64_t(d.getOffset()) + i * span));
      else if (auto d = dyn_cast<DropoutBackwardOp>(c))
        d.setOffset(uint64_t(int64_t(d.getOffset()) + i * span));
    }
    for (Operation *op : split.slices) {
      auto s = cast<SliceOp>(op);
      auto c = cast<SliceOp>(map.lookup(s.getResult()).getDefiningOp());
      int64_t rows = int64_t(s.getEnd()) - int64_t(s.getStart());
      c.setStart(uint64_t(i * rows));
      c.setEnd(uint64_t((i + 1) * rows));
    }
  }

  // Adds `v` (cast to f32) to `acc` right after v is computed.
  auto addAfter = [&](Value acc, Value v) -> Value {
    OpBuilder ab(ctx);
    ab.setInsertionPointAfterValue(v);
    auto vt = cast<RankedTensorType>(v.getType());
    if (vt.getElementType() != f32)
      v = CopyOp::create(ab, v.getLoc(), vt.clone(f32), v);
    if (!acc)
      return v;
    auto add = AddOp::create(ab, v.getLoc(), acc, v);
    add->setAttr(OffloadDialect::kAccumulateAttrName, ab.getUnitAttr());
    return add;
  };
  // The gradients, summed where each micro-batch's one is final.
  for (Value &g : grads) {
    Operation *def = g.getDefiningOp();
    if (!def || !llvm::is_contained(first, def))
      continue;
    if (isa<FillOp>(def)) {
      // A parameter the loss does not reach: zero in every micro-batch.
      auto gt = cast<RankedTensorType>(g.getType());
      if (gt.getElementType() != f32) {
        OpBuilder ab(ctx);
        ab.setInsertionPointAfter(def);
        g = CopyOp::create(ab, g.getLoc(), gt.clone(f32), g);
      }
      continue;
    }
    Value acc = addAfter(Value(), g);
    for (int64_t i = 1; i < k; ++i)
      acc = addAfter(acc, maps[size_t(i)].lookup(g));
    g = acc;
  }
  // The loss: the mean of the micro-batch losses, summed in f32.
  Value loss = ret.getOperand(0);
  auto lt = cast<RankedTensorType>(loss.getType());
  Value sum = addAfter(Value(), loss);
  for (int64_t i = 1; i < k; ++i)
    sum = addAfter(sum, maps[size_t(i)].lookup(loss));
  OpBuilder lb(ctx);
  lb.setInsertionPointAfterValue(sum);
  Value mean = MulScalarOp::create(lb, loss.getLoc(), sum, lb.getF64FloatAttr(1.0 / double(k)));
  if (lt.getElementType() != f32)
    mean = CopyOp::create(lb, loss.getLoc(), lt, mean);
  ret.setOperand(0, mean);
  b.setInsertionPoint(ret);
  return success();
}
