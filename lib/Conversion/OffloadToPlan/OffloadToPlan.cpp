//===- OffloadToPlan.cpp - Lower a training step to a runtime plan --------===//
//
// Part of offload. Implements --convert-offload-to-plan. See Passes.td.
//
//===----------------------------------------------------------------------===//

#include "offload/Conversion/Passes.h"
#include "offload/Conversion/OffloadToPlan.h"
#include "offload/Dialect/Offload/Analysis/MemoryPlan.h"
#include "offload/Dialect/Offload/IR/OffloadOps.h"
#include "offload/Dialect/Offload/Transforms/PassReport.h"
#include "offload/Runtime/OpSignatures.h"
#include "offload/Runtime/Plan.h"
#include "offload/Support/OutputFiles.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Tools/mlir-translate/Translation.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/raw_ostream.h"

// The lowering speaks the plan format (PlanFormat.h, Plan.h,
// OpSignatures.h), never the kernel interface: the compiler links no
// kernels (docs/design.md, "The compiler without the runtime").
#ifdef OFFLOAD_RUNTIME_KERNEL_H
#error "the plan lowering must not include offload/Runtime/Kernel.h; use PlanFormat.h"
#endif

#define DEBUG_TYPE "convert-offload-to-plan"

namespace mlir {
namespace offload {
#define GEN_PASS_DEF_CONVERTOFFLOADTOPLAN
#include "offload/Conversion/Passes.h.inc"
} // namespace offload
} // namespace mlir

using namespace mlir;
using namespace mlir::offload;
namespace rt = ::offload::rt;

static FailureOr<rt::DType> dtypeOf(Location loc, Type t) {
  if (auto s = dyn_cast<SavedType>(t))
    t = s.getTensorType();
  if (auto h = dyn_cast<HostType>(t))
    t = h.getTensorType();
  Type e = cast<RankedTensorType>(t).getElementType();
  if (e.isF32())
    return rt::DType::F32;
  if (e.isF64())
    return rt::DType::F64;
  if (e.isInteger(64))
    return rt::DType::I64;
  if (e.isInteger(32))
    return rt::DType::I32;
  if (e.isInteger(1))
    return rt::DType::Bool;
  if (e.isBF16())
    return rt::DType::BF16;
  if (e.isF16())
    return rt::DType::F16;
  return emitError(loc) << "the runtime has no element type for " << t;
}

/// The bytes of a constant in the runtime's layout (row-major; i1 as one
/// byte per element).
static FailureOr<std::vector<uint8_t>> constantBytes(ConstantOp op) {
  auto dense = dyn_cast<DenseElementsAttr>(op.getValue());
  if (!dense)
    return op.emitOpError("only dense constants can be lowered");
  Type e = dense.getElementType();
  std::vector<uint8_t> out;
  auto append = [&](const void *p, size_t n) {
    const uint8_t *b = static_cast<const uint8_t *>(p);
    out.insert(out.end(), b, b + n);
  };
  if (e.isF32())
    for (float v : dense.getValues<float>()) append(&v, 4);
  else if (e.isF64())
    for (double v : dense.getValues<double>()) append(&v, 8);
  else if (e.isInteger(64))
    for (int64_t v : dense.getValues<int64_t>()) append(&v, 8);
  else if (e.isInteger(32))
    for (int32_t v : dense.getValues<int32_t>()) append(&v, 4);
  else if (e.isInteger(1))
    for (bool v : dense.getValues<bool>()) out.push_back(v ? 1 : 0);
  else if (e.isBF16() || e.isF16())
    for (const APFloat &v : dense.getValues<APFloat>()) {
      uint16_t bits = uint16_t(v.bitcastToAPInt().getZExtValue());
      append(&bits, 2);
    }
  else
    return op.emitOpError() << "constant of element type " << e
                            << " has no runtime layout";
  return out;
}

static std::vector<int64_t> shapeOf(Type t) {
  if (auto s = dyn_cast<SavedType>(t))
    t = s.getTensorType();
  if (auto h = dyn_cast<HostType>(t))
    t = h.getTensorType();
  auto shape = cast<RankedTensorType>(t).getShape();
  return std::vector<int64_t>(shape.begin(), shape.end());
}

static rt::BufferRole argumentRole(Role role) {
  switch (role) {
  case Role::parameter:
    return rt::BufferRole::Parameter;
  case Role::state:
    return rt::BufferRole::State;
  case Role::optimizer_state:
    return rt::BufferRole::OptimizerState;
  default:
    return rt::BufferRole::Input;
  }
}

/// The runtime commits outputs with a store role (parameter, state,
/// optimizer state) to its parameter store when a step succeeds.
static rt::BufferRole resultRole(Role role) {
  switch (role) {
  case Role::gradient:
  case Role::input_gradient:
    return rt::BufferRole::Gradient;
  case Role::new_parameter:
    return rt::BufferRole::Parameter;
  case Role::new_state:
    return rt::BufferRole::State;
  case Role::new_optimizer_state:
    return rt::BufferRole::OptimizerState;
  default:
    return rt::BufferRole::Output;
  }
}

/// The op's attributes as the runtime's AttrMap, converted by the kinds of
/// the op-signature table (OpSignatures.h, generated from the same ODS):
/// enum attributes become their keywords, bools 0/1. Attributes the op
/// leaves at their ODS default are filled in by populateDefaultAttrs, so a
/// kernel sees every attribute of its op; discardable attributes (not in
/// the table) are not the kernel's and are dropped.
static FailureOr<rt::AttrMap> convertAttrs(Operation *op,
                                           const rt::OpSignature &sig) {
  NamedAttrList attrs(op->getAttrDictionary());
  op->getName().populateDefaultAttrs(attrs);
  rt::AttrMap map;
  for (NamedAttribute na : attrs) {
    std::string name = na.getName().str();
    const rt::OpAttrSignature *as = sig.findAttr(name);
    if (!as)
      continue;
    Attribute a = na.getValue();
    rt::AttrValue v;
    bool ok = true;
    switch (as->kind) {
    case rt::OpAttrKind::Enum: {
      std::vector<std::string> cases = as->cases();
      auto i = dyn_cast<IntegerAttr>(a);
      ok = i && i.getInt() >= 0 && size_t(i.getInt()) < cases.size();
      if (ok)
        v = rt::attrString(cases[size_t(i.getInt())]);
      break;
    }
    case rt::OpAttrKind::Bool:
      if (auto b = dyn_cast<BoolAttr>(a))
        v = rt::attrInt(b.getValue() ? 1 : 0);
      else
        ok = false;
      break;
    case rt::OpAttrKind::Int:
      if (auto i = dyn_cast<IntegerAttr>(a))
        v = rt::attrInt(i.getInt());
      else
        ok = false;
      break;
    case rt::OpAttrKind::Float:
      if (auto f = dyn_cast<FloatAttr>(a))
        v = rt::attrFloat(f.getValueAsDouble());
      else
        ok = false;
      break;
    case rt::OpAttrKind::Ints:
      if (auto arr = dyn_cast<DenseI64ArrayAttr>(a))
        v = rt::attrInts(std::vector<int64_t>(arr.asArrayRef().begin(),
                                              arr.asArrayRef().end()));
      else
        ok = false;
      break;
    case rt::OpAttrKind::String:
      if (auto str = dyn_cast<StringAttr>(a))
        v = rt::attrString(str.str());
      else
        ok = false;
      break;
    }
    if (!ok)
      return op->emitOpError() << "attribute '" << name << "' = " << a
                               << " does not match its kind in the "
                                  "op-signature table";
    map.set(name, std::move(v));
  }
  return map;
}

/// A step with parameters and no backward phase was not differentiated: its
/// plan would only compute the loss, and offload-run would "train" it
/// without changing a parameter. Fails with an error naming a parameter
/// unless `forwardOnly` (an inference plan, asked for). `who` names the
/// exporter in the error and `forwardOnlyOption` its spelling of the option.
static LogicalResult checkStepTrains(func::FuncOp step, bool forwardOnly, StringRef who,
                                     StringRef forwardOnlyOption) {
  if (forwardOnly || hasBackwardPhase(step))
    return success();
  for (unsigned i = 0; i < step.getNumArguments(); ++i) {
    if (getArgRole(step, i) == Role::parameter) {
      auto name = step.getArgAttrOfType<StringAttr>(i, OffloadDialect::kNameAttrName);
      return step.emitError() << who << ": step '" << step.getName()
                              << "' has parameters (e.g. '"
                              << (name ? name.getValue() : StringRef("?"))
                              << "') but no backward phase: the plan would train "
                                 "nothing; run --offload-autodiff first, or pass "
                              << forwardOnlyOption << " for an inference plan";
    }
  }
  return success();
}

FailureOr<func::FuncOp> mlir::offload::findStep(ModuleOp module) {
  SmallVector<func::FuncOp> steps;
  module.walk([&](func::FuncOp fn) {
    if (fn->hasAttr(OffloadDialect::kStepAttrName))
      steps.push_back(fn);
  });
  if (steps.size() != 1)
    return module.emitError() << "expected exactly one function with '"
                              << OffloadDialect::kStepAttrName << "', found "
                              << steps.size();
  return steps.front();
}

namespace {
struct ConvertOffloadToPlanPass
    : public mlir::offload::impl::ConvertOffloadToPlanBase<ConvertOffloadToPlanPass> {
  using ConvertOffloadToPlanBase::ConvertOffloadToPlanBase;

  void runOnOperation() override {
    if (output.empty()) {
      getOperation().emitError(
          "convert-offload-to-plan: give the plan file with output=<path>");
      return signalPassFailure();
    }
    if (std::string e = ::offload::OutputFiles::process().claim(
            output, "the plan of convert-offload-to-plan (output=)");
        !e.empty()) {
      mlir::emitError(getOperation().getLoc()) << "convert-offload-to-plan: " << e;
      return signalPassFailure();
    }
    if (failed(out.open(report, "convert-offload-to-plan", getOperation().getLoc())))
      return signalPassFailure();
    FailureOr<func::FuncOp> step = findStep(getOperation());
    if (failed(step) || failed(checkStepTrains(*step, forwardOnly, "convert-offload-to-plan", "forward-only=true")) || failed(lower(*step)))
      return signalPassFailure();
    // The IR is unchanged: the memory plan stays valid for later passes.
    markAllAnalysesPreserved();
  }

  LogicalResult lower(func::FuncOp fn);
  /// The plan summary (report=, PassReport.h).
  PassReport out;
};
} // namespace

LogicalResult ConvertOffloadToPlanPass::lower(func::FuncOp fn) {
  int64_t memoryPlanPeak = 0;
  FailureOr<const MemoryPlan *> mp = getAnalysis<MemoryPlanAnalysis>().lookup(fn);
  if (failed(mp))
    return failure();
  FailureOr<rt::PlanData> data = lowerStepToPlan(fn, &memoryPlanPeak, *mp);
  if (failed(data))
    return failure();
  // Through the process's output files: offload-opt renames the plan into
  // place only when the whole command succeeds (OutputFiles.h).
  std::vector<uint8_t> bytes = rt::Plan::serialize(*data);
  if (std::string e = ::offload::OutputFiles::process().write(
          output, bytes.data(), bytes.size(), "the plan of convert-offload-to-plan (output=)");
      !e.empty())
    return mlir::emitError(fn.getLoc()) << "cannot write the plan: " << e;
  if (out)
    writePlanSummary(*out.stream(), output, *data, memoryPlanPeak);
  return out.close(fn.getLoc());
}

void mlir::offload::writePlanSummary(llvm::raw_ostream &os, llvm::StringRef name,
                                     const rt::PlanData &data, int64_t memoryPlanPeak) {
  os << llvm::format("plan %s: %zu instructions, %zu buffers, peak device bytes %llu "
                     "(memory plan: %lld), device arena %llu bytes, host arena %llu bytes\n",
                     name.str().c_str(), data.instructions.size(), data.buffers.size(),
                     (unsigned long long)data.predictedPeakDeviceBytes, (long long)memoryPlanPeak,
                     (unsigned long long)data.deviceCapacity,
                     (unsigned long long)data.hostCapacity);
}

FailureOr<rt::PlanData> mlir::offload::lowerStepToPlan(func::FuncOp original,
                                                       int64_t *memoryPlanPeak,
                                                       const MemoryPlan *memoryPlan) {
  // Recompute regions run inline at their position: the memory plan
  // describes a copy with them inlined, which is what is lowered (the
  // caller's IR is unchanged).
  std::optional<MemoryPlan> computed;
  const MemoryPlan *mp = memoryPlan;
  if (!mp) {
    FailureOr<MemoryPlan> fresh = computeMemoryPlan(original);
    if (failed(fresh))
      return failure();
    computed = std::move(*fresh);
    mp = &*computed;
  }
  func::FuncOp fn = mp->function;
  Block &body = fn.getBody().front();
  rt::PlanBuilder pb;
  pb.setProducer("offload convert-offload-to-plan");

  // Program point -> first/last instruction index emitted at or after/before
  // it, filled while emitting.
  SmallVector<int> firstInstrAt(mp->schedule.size() + 1, -1);

  // Buffers: one per memory-plan buffer; views get aliases.
  llvm::DenseMap<unsigned, int> planBuffer; // memory-plan buffer -> plan id
  llvm::DenseMap<unsigned, SmallVector<int>> planAliases; // views of it
  llvm::DenseMap<Value, int> bufferOfValue;
  auto nameOf = [&](Value v) -> std::string {
    if (auto arg = dyn_cast<BlockArgument>(v))
      if (auto n = fn.getArgAttrOfType<StringAttr>(arg.getArgNumber(),
                                                   OffloadDialect::kNameAttrName))
        return n.str();
    std::string s;
    llvm::raw_string_ostream os(s);
    if (Operation *def = v.getDefiningOp())
      os << def->getName().stripDialect() << "#" << mp->bufferOf.lookup(v);
    return s;
  };
  for (auto [idx, b] : llvm::enumerate(mp->buffers)) {
    if (b.bytes == 0 && b.values.empty())
      continue;
    Value root = b.values.front();
    // The root is the value the buffer was created for (alias root).
    for (Value v : b.values)
      if (!v.getDefiningOp() ||
          !isa<ReshapeOp, SaveOp, RestoreOp>(v.getDefiningOp())) {
        root = v;
        break;
      }
    FailureOr<rt::DType> dt = dtypeOf(root.getLoc(), root.getType());
    if (failed(dt))
      return failure();
    rt::BufferRole role = rt::BufferRole::Temporary;
    if (auto arg = dyn_cast<BlockArgument>(root))
      if (std::optional<Role> r = getArgRole(fn, arg.getArgNumber()))
        role = argumentRole(*r);
    int id = pb.buffer(nameOf(root), *dt, shapeOf(root.getType()), role,
                       b.space == MemorySpace::Host ? rt::MemorySpace::Host
                                                    : rt::MemorySpace::Device);
    pb.setOffset(id, b.offset);
    planBuffer[idx] = id;
    // Views (reshapes, and saved/restored reshapes) of another shape get
    // an alias of the buffer; values of the root's shape name it directly.
    std::vector<int64_t> rootShape = shapeOf(root.getType());
    for (Value v : b.values) {
      std::vector<int64_t> shape = shapeOf(v.getType());
      if (shape == rootShape) {
        bufferOfValue[v] = id;
        continue;
      }
      int a = pb.alias(nameOf(v), id, shape);
      bufferOfValue[v] = a;
      planAliases[idx].push_back(a);
    }
  }

  // A slice argument or result (offload-slice-parameters) is bound to its
  // rows of the whole tensor.
  auto sliceBinding = [&](DictionaryAttr attrs, Type t) -> LogicalResult {
    if (!attrs)
      return success();
    auto of = attrs.getAs<StringAttr>(OffloadDialect::kSliceOfAttrName);
    auto rows = attrs.getAs<DenseI64ArrayAttr>(OffloadDialect::kSliceAttrName);
    if (!of && !rows)
      return success();
    std::vector<int64_t> shape = shapeOf(t);
    if (!of || !rows || rows.size() != 3 || shape.empty() ||
        rows[1] - rows[0] != shape[0] || rows[0] < 0 || rows[1] > rows[2])
      return fn.emitOpError() << "malformed '" << OffloadDialect::kSliceAttrName
                              << "'/'" << OffloadDialect::kSliceOfAttrName
                              << "' on a value of type " << t;
    int64_t rowBytes = detail::tensorBytes(t) / std::max<int64_t>(shape[0], 1);
    std::vector<int64_t> whole = shape;
    whole[0] = rows[2];
    pb.sliceLastBinding(of.str(), whole, uint64_t(rows[0] * rowBytes));
    return success();
  };

  // Bindings: arguments in, results out.
  for (BlockArgument arg : body.getArguments()) {
    auto it = bufferOfValue.find(arg);
    if (it != bufferOfValue.end()) {
      pb.bindIn(nameOf(arg), it->second);
      if (failed(sliceBinding(fn.getArgAttrDict(arg.getArgNumber()), arg.getType())))
        return failure();
    }
  }

  // Instructions.
  llvm::DenseMap<Value, int> tokenEvent;
  llvm::DenseMap<Value, SmallVector<int>> joinEvents;
  auto eventsOf = [&](ValueRange tokens) {
    std::vector<int32_t> evs;
    std::function<void(Value)> add = [&](Value t) {
      auto j = joinEvents.find(t);
      if (j != joinEvents.end()) {
        for (int e : j->second)
          evs.push_back(e);
        return;
      }
      auto it = tokenEvent.find(t);
      if (it != tokenEvent.end())
        evs.push_back(it->second);
    };
    for (Value t : tokens)
      add(t);
    return evs;
  };
  auto operandIds = [&](Operation *op) {
    std::vector<int32_t> ids;
    for (Value v : op->getOperands()) {
      if (isa<TokenType>(v.getType()))
        continue; // dependencies become events, not operands
      ids.push_back(bufferOfValue.count(v) ? bufferOfValue[v] : -1);
    }
    // Optional trailing operands absent: the kernels see data == nullptr.
    if (const rt::OpSignature *sig =
            rt::findOpSignature(op->getName().getStringRef().str()))
      while (sig->maxInputs >= 0 && ids.size() < size_t(sig->maxInputs))
        ids.push_back(-1);
    return ids;
  };
  auto resultIds = [&](Operation *op) {
    std::vector<int32_t> ids;
    for (Value v : op->getResults())
      if (isa<RankedTensorType, HostType>(v.getType()))
        ids.push_back(bufferOfValue.count(v) ? bufferOfValue[v] : -1);
    return ids;
  };

  std::string currentPhase = "forward";
  int phaseStart = 0, numInstr = 0;
  for (auto [p, op] : llvm::enumerate(mp->schedule)) {
    firstInstrAt[p] = numInstr;
    if (auto marker = dyn_cast<PhaseOp>(op)) {
      // Micro-batch i's phases are "forward.i", "backward.i" (gradient
      // accumulation); a step of one micro-batch keeps the bare names.
      std::string next = marker.getLabel();
      if (numInstr > phaseStart || next != currentPhase) {
        if (numInstr > phaseStart)
          pb.phase(currentPhase, phaseStart, numInstr);
        phaseStart = numInstr;
      }
      currentPhase = next;
      continue;
    }
    if (isa<SaveOp, RestoreOp, ReshapeOp, func::ReturnOp>(op))
      continue;
    if (auto c = dyn_cast<ConstantOp>(op)) {
      FailureOr<std::vector<uint8_t>> bytes = constantBytes(c);
      if (failed(bytes))
        return failure();
      int id = bufferOfValue[c.getResult()];
      pb.buf(id).role = rt::BufferRole::Constant;
      pb.constant(id, std::move(*bytes));
      continue;
    }
    if (isa<ToHostOp, ToDeviceOp>(op)) {
      // Copies. An async one (it returns a token) runs on its copy stream.
      bool toHost = isa<ToHostOp>(op);
      ValueRange deps = toHost ? cast<ToHostOp>(op).getAsyncDependencies()
                               : cast<ToDeviceOp>(op).getAsyncDependencies();
      Value token = op->getNumResults() > 1 ? op->getResult(1) : Value();
      std::vector<int32_t> waits = eventsOf(deps);
      int rec = -1;
      int stream = rt::ComputeStream;
      if (token) {
        // The copy stream must not read the tensor before compute wrote it.
        int computeDone = pb.event();
        pb.instr(rt::kOpWait, {}, {}, {}, rt::ComputeStream, {}, computeDone);
        ++numInstr;
        waits.push_back(computeDone);
        rec = pb.event();
        tokenEvent[token] = rec;
        stream = toHost ? rt::DeviceToHostStream : rt::HostToDeviceStream;
      }
      pb.instr(toHost ? rt::kOpToHost : rt::kOpToDevice, operandIds(op), resultIds(op), {},
               stream, waits, rec);
      ++numInstr;
      continue;
    }
    if (isa<AllReduceOp, ReduceScatterOp, AllGatherOp>(op)) {
      // The communication stream reads the bucket after compute made it.
      int computeDone = pb.event();
      pb.instr(rt::kOpWait, {}, {}, {}, rt::ComputeStream, {}, computeDone);
      ++numInstr;
      int rec = pb.event();
      tokenEvent[op->getResults().back()] = rec;
      rt::AttrMap attrs;
      attrs.set("bucket", rt::attrInt(op->getAttrOfType<IntegerAttr>("bucket").getInt()));
      const char *name = rt::kOpAllReduce;
      if (auto ws = op->getAttrOfType<IntegerAttr>("world_size")) {
        attrs.set("world_size", rt::attrInt(ws.getInt()));
        name = isa<ReduceScatterOp>(op) ? rt::kOpReduceScatter : rt::kOpAllGather;
      }
      pb.instr(name, operandIds(op), resultIds(op), std::move(attrs),
               rt::CommStream, {computeDone}, rec);
      ++numInstr;
      continue;
    }
    if (auto w = dyn_cast<WaitOp>(op)) {
      std::vector<int32_t> evs = eventsOf(w.getAsyncDependencies());
      if (w.getAsyncToken()) {
        joinEvents[w.getAsyncToken()] = SmallVector<int>(evs.begin(), evs.end());
        continue;
      }
      pb.instr(rt::kOpWait, {}, {}, {}, rt::ComputeStream, evs, -1);
      ++numInstr;
      continue;
    }
    const rt::OpSignature *sig =
        rt::findOpSignature(op->getName().getStringRef().str());
    if (!sig)
      return op->emitOpError("has no lowering to the runtime plan (not a "
                             "kernel op of the op-signature table)");
    FailureOr<rt::AttrMap> attrs = convertAttrs(op, *sig);
    if (failed(attrs))
      return failure();
    pb.instr(op->getName().getStringRef().str(), operandIds(op), resultIds(op),
             std::move(*attrs), rt::ComputeStream);
    ++numInstr;
  }
  firstInstrAt[mp->schedule.size()] = numInstr;
  if (numInstr > phaseStart)
    pb.phase(currentPhase, phaseStart, numInstr);

  // Outputs.
  auto ret = cast<func::ReturnOp>(body.getTerminator());
  for (auto [i, v] : llvm::enumerate(ret.getOperands())) {
    auto name = fn.getResultAttrOfType<StringAttr>(i, OffloadDialect::kNameAttrName);
    std::optional<Role> role = getResultRole(fn, i);
    auto it = bufferOfValue.find(v);
    if (!name || it == bufferOfValue.end())
      return fn.emitOpError() << "result #" << i << " has no name or no buffer";
    std::string out = name.str();
    if (role && resultRole(*role) == rt::BufferRole::Gradient &&
        !StringRef(out).starts_with("grad:"))
      out = "grad:" + out;
    if (!isa<BlockArgument>(v)) {
      rt::BufferDesc &bd = pb.buf(it->second);
      if (bd.role == rt::BufferRole::Temporary)
        bd.role = role ? resultRole(*role) : rt::BufferRole::Output;
    }
    pb.bindOut(out, it->second);
    if (failed(sliceBinding(fn.getResultAttrDict(i), v.getType())))
      return failure();
  }

  // Live intervals in instruction indices: a buffer live on program points
  // [b, e] is live from the first instruction at or after b to the last
  // instruction before the first one after e.
  int last = std::max(numInstr - 1, 0);
  for (auto [idx, b] : llvm::enumerate(mp->buffers)) {
    auto it = planBuffer.find(idx);
    if (it == planBuffer.end())
      continue;
    int first = b.persistent && b.begin == 0 ? 0 : firstInstrAt[b.begin];
    int lastI = b.persistent ? last : firstInstrAt[b.end + 1] - 1;
    first = std::min(first, last);
    lastI = std::max(std::min(lastI, last), first);
    pb.setLive(it->second, first, lastI);
    for (int a : planAliases.lookup(idx))
      pb.setLive(a, first, lastI);
  }

  // Library workspace (cuBLAS/cuDNN scratch) the step reserves, e.g. from
  // the planner's target: a whole-step device buffer above the arena,
  // counted in the capacity and the predicted peak (docs/planner.md).
  int64_t deviceCapacity = mp->deviceArenaBytes;
  if (auto ws = original->getAttrOfType<IntegerAttr>(OffloadDialect::kWorkspaceBytesAttrName);
      ws && ws.getInt() > 0) {
    int id = pb.workspace(uint64_t(ws.getInt()));
    int64_t offset = alignedArenaBytes(mp->deviceArenaBytes);
    pb.setOffset(id, uint64_t(offset));
    pb.setLive(id, 0, last);
    deviceCapacity = offset + ws.getInt();
  }
  pb.setDeviceCapacity(deviceCapacity);
  pb.setHostCapacity(mp->hostArenaBytes);
  rt::PlanData data = pb.finish();
  data.predictedPeakDeviceBytes = rt::computePeakDeviceBytes(data);
  if (rt::Status st = rt::validatePlan(data); !st.ok())
    return mlir::emitError(fn.getLoc())
           << "convert-offload-to-plan produced an invalid plan (a compiler bug): "
           << st.message();
  if (memoryPlanPeak)
    *memoryPlanPeak = mp->peakDeviceBytes;
  return data;
}

//===----------------------------------------------------------------------===//
// The exporter: offload-translate --offload-to-plan
//===----------------------------------------------------------------------===//

LogicalResult mlir::offload::exportPlan(ModuleOp module, raw_ostream &os,
                                        const ExportPlanOptions &options) {
  PassReport out;
  if (failed(out.open(options.report, "offload-to-plan", module.getLoc())))
    return failure();
  FailureOr<func::FuncOp> step = findStep(module);
  if (failed(step) || failed(checkStepTrains(*step, options.forwardOnly, "offload-to-plan", "--forward-only")))
    return failure();
  int64_t memoryPlanPeak = 0;
  FailureOr<rt::PlanData> data = lowerStepToPlan(*step, &memoryPlanPeak);
  if (failed(data))
    return failure();
  std::vector<uint8_t> bytes = rt::Plan::serialize(*data);
  os.write(reinterpret_cast<const char *>(bytes.data()), bytes.size());
  if (out)
    writePlanSummary(*out.stream(), options.planName, *data, memoryPlanPeak);
  return out.close(step->getLoc());
}

void mlir::offload::registerToPlanTranslation() {
  static TranslateFromMLIRRegistration reg(
      "offload-to-plan",
      "Write the training step (the function with 'offload.step') as the "
      "runtime's plan file (FlatBuffers, include/offload/Runtime/Plan.fbs)",
      [](Operation *op, raw_ostream &os) -> LogicalResult {
        auto module = dyn_cast<ModuleOp>(op);
        if (!module)
          return op->emitError("offload-to-plan: expected a module");
        return exportPlan(module, os);
      },
      [](DialectRegistry &registry) {
        registry.insert<OffloadDialect, func::FuncDialect>();
      });
}
