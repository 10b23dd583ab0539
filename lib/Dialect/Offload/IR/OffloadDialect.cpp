//===- OffloadDialect.cpp - offload dialect and step verifier -------------===//
//
// Part of offload. Registers the dialect and verifies the `offload.step`
// attribute: the structure of a training step (phase order, where saved
// values may be made and read, argument/result roles, waits before reading a
// prefetched tensor).
//
//===----------------------------------------------------------------------===//

#include "offload/Dialect/Offload/IR/OffloadDialect.h"
#include "offload/Dialect/Offload/IR/OffloadOps.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/DialectImplementation.h"
#include "mlir/Interfaces/FunctionInterfaces.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;
using namespace mlir::offload;

#include "offload/Dialect/Offload/IR/OffloadDialect.cpp.inc"
#include "offload/Dialect/Offload/IR/OffloadEnums.cpp.inc"

#define GET_TYPEDEF_CLASSES
#include "offload/Dialect/Offload/IR/OffloadTypes.cpp.inc"

#define GET_ATTRDEF_CLASSES
#include "offload/Dialect/Offload/IR/OffloadAttrs.cpp.inc"

void OffloadDialect::initialize() {
  addOperations<
#define GET_OP_LIST
#include "offload/Dialect/Offload/IR/OffloadOps.cpp.inc"
      >();
  registerTypes();
  addAttributes<
#define GET_ATTRDEF_LIST
#include "offload/Dialect/Offload/IR/OffloadAttrs.cpp.inc"
      >();
}

void OffloadDialect::registerTypes() {
  addTypes<
#define GET_TYPEDEF_LIST
#include "offload/Dialect/Offload/IR/OffloadTypes.cpp.inc"
      >();
}

bool mlir::offload::isArgumentRole(Role role) {
  switch (role) {
  case Role::parameter:
  case Role::state:
  case Role::optimizer_state:
  case Role::input:
  case Role::rng_seed:
  case Role::output_gradient:
    return true;
  default:
    return false;
  }
}

bool mlir::offload::isResultRole(Role role) { return !isArgumentRole(role); }

std::optional<Role> mlir::offload::getArgRole(FunctionOpInterface fn, unsigned i) {
  if (auto r = fn.getArgAttrOfType<RoleAttr>(i, OffloadDialect::kRoleAttrName))
    return r.getValue();
  return std::nullopt;
}

std::optional<Role> mlir::offload::getResultRole(FunctionOpInterface fn, unsigned i) {
  if (auto r = fn.getResultAttrOfType<RoleAttr>(i, OffloadDialect::kRoleAttrName))
    return r.getValue();
  return std::nullopt;
}

RoleAttr mlir::offload::getRoleAttr(MLIRContext *ctx, Role role) {
  return RoleAttr::get(ctx, role);
}

Attribute mlir::offload::getRoleAttr(MLIRContext *ctx, StringRef keyword) {
  if (std::optional<Role> r = symbolizeRole(keyword))
    return RoleAttr::get(ctx, *r);
  return Attribute();
}

void mlir::offload::setArgRole(FunctionOpInterface fn, unsigned i, Role role) {
  fn.setArgAttr(i, OffloadDialect::kRoleAttrName, getRoleAttr(fn->getContext(), role));
}

void mlir::offload::setArgAttrs(FunctionOpInterface fn, ArrayRef<unsigned> args,
                               StringRef name, Attribute value) {
  if (args.empty())
    return;
  MLIRContext *ctx = fn->getContext();
  unsigned n = fn.getNumArguments();
  SmallVector<Attribute> dicts;
  dicts.reserve(n);
  if (ArrayAttr all = fn.getAllArgAttrs())
    llvm::append_range(dicts, all.getValue());
  dicts.resize(n, DictionaryAttr::get(ctx));
  for (unsigned i : args) {
    NamedAttrList attrs(llvm::cast_or_null<DictionaryAttr>(dicts[i]));
    if (value)
      attrs.set(name, value);
    else
      attrs.erase(name);
    dicts[i] = attrs.getDictionary(ctx);
  }
  fn.setAllArgAttrs(dicts);
}

void mlir::offload::setResultRole(FunctionOpInterface fn, unsigned i, Role role) {
  fn.setResultAttr(i, OffloadDialect::kRoleAttrName, getRoleAttr(fn->getContext(), role));
}

/// Rank of a phase in the step order; backward and backward_input share a
/// rank (a step has one or the other).
static int phaseRank(Phase p) {
  switch (p) {
  case Phase::forward:
    return 0;
  case Phase::backward:
  case Phase::backward_input:
    return 1;
  case Phase::backward_weight:
    return 2;
  case Phase::optimizer:
    return 3;
  }
  return 0;
}

static LogicalResult verifyRoles(FunctionOpInterface fn) {
  llvm::StringSet<> argNames;
  for (unsigned i = 0, e = fn.getNumArguments(); i < e; ++i) {
    auto name = fn.getArgAttrOfType<StringAttr>(i, OffloadDialect::kNameAttrName);
    std::optional<Role> role = getArgRole(fn, i);
    if (!name || !role)
      return fn.emitOpError() << "argument #" << i
                              << " of a training step needs attributes '"
                              << OffloadDialect::kNameAttrName << "' (a string) and '"
                              << OffloadDialect::kRoleAttrName << "' (#offload.role<...>)";
    if (!isArgumentRole(*role))
      return fn.emitOpError() << "argument #" << i << " ('" << name.getValue()
                              << "') has role '" << stringifyRole(*role)
                              << "', which is a result role; expected parameter, state, "
                                 "optimizer_state, input, rng_seed or output_gradient";
    if (!argNames.insert(name.getValue()).second)
      return fn.emitOpError() << "two arguments are named '" << name.getValue()
                              << "'";
  }
  for (unsigned i = 0, e = fn.getNumResults(); i < e; ++i) {
    auto name = fn.getResultAttrOfType<StringAttr>(i, OffloadDialect::kNameAttrName);
    std::optional<Role> role = getResultRole(fn, i);
    if (!name || !role)
      return fn.emitOpError() << "result #" << i
                              << " of a training step needs attributes '"
                              << OffloadDialect::kNameAttrName << "' (a string) and '"
                              << OffloadDialect::kRoleAttrName << "' (#offload.role<...>)";
    if (!isResultRole(*role))
      return fn.emitOpError() << "result #" << i << " ('" << name.getValue()
                              << "') has role '" << stringifyRole(*role)
                              << "', which is an argument role; expected loss, "
                                 "new_parameter, new_state, new_optimizer_state, "
                                 "gradient, output or input_gradient";
  }
  return success();
}

/// Largest tensor of a training step in bytes: 2^48, the bound the plan
/// format puts on a buffer (lib/Runtime/Plan.cpp). Byte counts stay far from
/// int64 overflow, which made the memory plan report a peak of 0 bytes.
constexpr uint64_t kMaxTensorBytes = uint64_t(1) << 48;

/// Whether a static tensor type (or a saved/host one) holds more than
/// kMaxTensorBytes; computed without overflow.
static bool tooLarge(Type t) {
  auto rt = dyn_cast<RankedTensorType>(t);
  if (auto sv = dyn_cast<SavedType>(t))
    rt = sv.getTensorType();
  if (auto h = dyn_cast<HostType>(t))
    rt = h.getTensorType();
  if (!rt || !rt.getElementType().isIntOrFloat())
    return false;
  uint64_t bytes = std::max<uint64_t>(1, rt.getElementType().getIntOrFloatBitWidth() / 8);
  for (int64_t d : rt.getShape()) {
    if (ShapedType::isDynamic(d) || d == 0)
      return false;
    if (uint64_t(d) > kMaxTensorBytes / bytes)
      return true;
    bytes *= uint64_t(d);
  }
  return bytes > kMaxTensorBytes;
}

static LogicalResult verifyStep(FunctionOpInterface fn) {
  if (fn.isExternal())
    return fn.emitOpError("a training step ('offload.step') needs a body");
  Region &body = fn.getFunctionBody();
  if (!llvm::hasSingleElement(body))
    return fn.emitOpError("a training step must have exactly one block; its op "
                          "order is the execution order");
  if (failed(verifyRoles(fn)))
    return failure();

  Phase current = Phase::forward;
  PhaseOp lastMarker;
  llvm::DenseSet<int> seenPhases;
  bool sawBackward = false, sawSplit = false;
  // Gradient accumulation: K (forward, backward) pairs, each marker with its
  // micro-batch index, then one optimizer phase. A saved value is made and
  // read within one micro-batch.
  int64_t microBatch = 0;
  llvm::DenseMap<Operation *, int64_t> saveMicroBatch;
  // Tokens of async host-to-device copies not yet waited for, and the copy
  // whose result each guards.
  llvm::DenseMap<Value, Operation *> pendingTokens;
  llvm::DenseMap<Value, Value> pendingResults; // result -> token
  // Joined tokens (`wait async`) stand for the tokens they join.
  llvm::DenseMap<Value, SmallVector<Value>> joins;

  std::function<void(Value)> clearToken = [&](Value tok) {
    auto it = joins.find(tok);
    if (it != joins.end())
      for (Value t : it->second)
        clearToken(t);
    auto pit = pendingTokens.find(tok);
    if (pit != pendingTokens.end()) {
      for (Value r : pit->second->getResults())
        pendingResults.erase(r);
      pendingTokens.erase(pit);
    }
  };

  for (BlockArgument arg : body.front().getArguments())
    if (tooLarge(arg.getType()))
      return fn.emitOpError() << "argument #" << arg.getArgNumber() << " of type "
                              << arg.getType() << " holds more than 2^48 bytes, "
                              << "the largest tensor a plan can hold";
  for (Operation &op : body.front()) {
    for (OpResult r : op.getResults())
      if (tooLarge(r.getType()))
        return op.emitOpError() << "result #" << r.getResultNumber() << " of type "
                                << r.getType() << " holds more than 2^48 bytes, "
                                << "the largest tensor a plan can hold";
    if (auto marker = dyn_cast<PhaseOp>(op)) {
      Phase next = marker.getPhase();
      int64_t mb = marker.getMicroBatchIndex();
      if (next == Phase::optimizer && marker.getMicroBatch())
        return marker.emitOpError("the optimizer phase runs once per step, after every "
                                  "micro-batch; it takes no 'micro_batch' index");
      if (next != Phase::optimizer && mb != microBatch) {
        // A new micro-batch: its forward, right after the previous one's
        // backward.
        bool afterBackward = lastMarker && current != Phase::forward &&
                             current != Phase::optimizer;
        if (mb != microBatch + 1 || next != Phase::forward || !afterBackward) {
          auto diag = marker.emitOpError()
                      << "phase '" << stringifyPhase(next) << "' of micro-batch " << mb
                      << " cannot follow '" << stringifyPhase(current) << "' of micro-batch "
                      << microBatch
                      << "; the order is forward, backward of micro-batch 0, then of "
                         "micro-batch 1, ..., then optimizer";
          if (lastMarker)
            diag.attachNote(lastMarker.getLoc()) << "previous phase marker here";
          return diag;
        }
        microBatch = mb;
        seenPhases.clear();
        seenPhases.insert(int(next));
        current = next;
        lastMarker = marker;
        continue;
      }
      if (!seenPhases.insert(int(next)).second)
        return marker.emitOpError() << "phase '" << stringifyPhase(next)
                                    << "' is marked twice in one step";
      if (phaseRank(next) < phaseRank(current) ||
          (phaseRank(next) == phaseRank(current) && lastMarker)) {
        auto diag = marker.emitOpError()
                    << "phase '" << stringifyPhase(next) << "' cannot follow '"
                    << stringifyPhase(current)
                    << "'; the order is forward, backward (or backward_input, "
                       "backward_weight), optimizer";
        diag.attachNote(lastMarker.getLoc()) << "previous phase marker here";
        return diag;
      }
      if (next == Phase::backward)
        sawBackward = true;
      if (next == Phase::backward_input || next == Phase::backward_weight)
        sawSplit = true;
      if (sawBackward && sawSplit)
        return marker.emitOpError(
            "a step has either one 'backward' phase or the split "
            "'backward_input'/'backward_weight' phases, not both");
      current = next;
      lastMarker = marker;
      continue;
    }
    if (isa<SaveOp>(op) && current != Phase::forward) {
      auto diag = op.emitOpError()
                  << "saves a value in phase '" << stringifyPhase(current)
                  << "'; saved values are made in the forward phase";
      if (lastMarker)
        diag.attachNote(lastMarker.getLoc()) << "phase begins here";
      return diag;
    }
    if (isa<SaveOp>(op) && microBatch > 0)
      saveMicroBatch[&op] = microBatch;
    if (auto restore = dyn_cast<RestoreOp>(op)) {
      if (current == Phase::forward)
        return op.emitOpError("restores a saved value in the forward phase; "
                              "saved values are read only after forward");
      if (auto save = restore.getSaved().getDefiningOp<SaveOp>()) {
        int64_t savedIn = saveMicroBatch.lookup(save);
        if (savedIn != microBatch && current != Phase::optimizer) {
          auto diag = op.emitOpError()
                      << "restores in micro-batch " << microBatch
                      << " a value saved in micro-batch " << savedIn
                      << "; a saved value is read by the backward of its own micro-batch";
          diag.attachNote(save.getLoc()) << "saved here";
          return diag;
        }
      }
    }
    // A prefetched tensor may be read only after a wait on its token.
    for (Value operand : op.getOperands()) {
      auto it = pendingResults.find(operand);
      if (it == pendingResults.end() || isa<WaitOp>(op))
        continue;
      Operation *producer = pendingTokens.lookup(it->second);
      bool reduce = isa<AllReduceOp, ReduceScatterOp, AllGatherOp>(producer);
      auto diag = op.emitOpError()
                  << "reads the result of "
                  << (reduce ? "an " + producer->getName().getStringRef().str()
                             : std::string("an async offload.to_device"))
                  << " before an offload.wait on its token";
      diag.attachNote(producer->getLoc()) << (reduce ? "the reduction" : "the copy") << " is issued here";
      return diag;
    }
    if (auto toDevice = dyn_cast<ToDeviceOp>(op)) {
      if (Value tok = toDevice.getAsyncToken()) {
        pendingTokens[tok] = toDevice;
        pendingResults[toDevice.getResult()] = tok;
      }
    }
    if (isa<AllReduceOp, ReduceScatterOp, AllGatherOp>(op)) {
      // Collectives: every result but the token is pending until a wait.
      Value tok = op.getResults().back();
      pendingTokens[tok] = &op;
      for (Value r : op.getResults().drop_back())
        pendingResults[r] = tok;
    }
    if (auto wait = dyn_cast<WaitOp>(op)) {
      if (Value joined = wait.getAsyncToken())
        joins[joined] = llvm::to_vector(wait.getAsyncDependencies());
      else
        for (Value tok : wait.getAsyncDependencies())
          clearToken(tok);
    }
  }
  return success();
}

LogicalResult OffloadDialect::verifyOperationAttribute(Operation *op,
                                                       NamedAttribute attr) {
  if (attr.getName() == kStepAttrName) {
    if (!isa<UnitAttr>(attr.getValue()))
      return op->emitOpError() << "'" << kStepAttrName << "' must be a unit attribute";
    auto fn = dyn_cast<FunctionOpInterface>(op);
    if (!fn)
      return op->emitOpError() << "'" << kStepAttrName
                               << "' may only be attached to a function";
    return verifyStep(fn);
  }
  if (attr.getName() == kCheckpointAttrName) {
    if (!isa<UnitAttr>(attr.getValue()))
      return op->emitOpError() << "'" << kCheckpointAttrName << "' must be a unit attribute";
    if (!isa<OffloadDialect>(op->getDialect()) || op->getNumResults() == 0 ||
        isa<SaveOp, RestoreOp>(op))
      return op->emitOpError() << "'" << kCheckpointAttrName
                               << "' may only be attached to a compute op of the offload "
                                  "dialect with results";
    return success();
  }
  if (attr.getName() == kTargetAttrName) {
    // Its keys and figures are checked where a pass reads it
    // (Target.h, targetSpecFromAttr; the dialect does not link the
    // cost model).
    if (!isa<ModuleOp>(op) || !isa<DictionaryAttr>(attr.getValue()))
      return op->emitOpError() << "'" << kTargetAttrName
                               << "' must be a dictionary attribute on a module";
    return success();
  }
  if (attr.getName() == kRoleAttrName) {
    if (!isa<RoleAttr>(attr.getValue()))
      return op->emitOpError() << "'" << kRoleAttrName
                               << "' must be a role attribute (#offload.role<...>)";
    return success();
  }
  if (attr.getName() == kNameAttrName || attr.getName() == kLocAttrName) {
    if (!isa<StringAttr>(attr.getValue()))
      return op->emitOpError() << "'" << attr.getName().getValue()
                               << "' must be a string attribute";
    return success();
  }
  if (attr.getName() == kPlannedAttrName || attr.getName() == kWorkspaceBytesAttrName ||
      attr.getName() == kAutodiffAttrName) {
    if (!isa<FunctionOpInterface>(op))
      return op->emitOpError() << "'" << attr.getName().getValue()
                               << "' may only be attached to a function";
    if ((attr.getName() == kPlannedAttrName || attr.getName() == kAutodiffAttrName) &&
        !isa<StringAttr>(attr.getValue()))
      return op->emitOpError() << "'" << attr.getName().getValue()
                               << "' must be a string attribute";
    if (attr.getName() == kWorkspaceBytesAttrName) {
      auto bytes = dyn_cast<IntegerAttr>(attr.getValue());
      if (!bytes || bytes.getValue().isNegative())
        return op->emitOpError() << "'" << kWorkspaceBytesAttrName
                                 << "' must be an integer >= 0";
    }
    return success();
  }
  if (attr.getName() == kRecomputeAttrName) {
    auto group = dyn_cast<IntegerAttr>(attr.getValue());
    if (!isa<UnitAttr>(attr.getValue()) && (!group || group.getValue().isNegative()))
      return op->emitOpError() << "'" << attr.getName().getValue()
                               << "' must be a unit attribute or an integer group id >= 0";
    return success();
  }
  if (attr.getName() == kActivationGradAttrName || attr.getName() == kHostOffloadAttrName ||
      attr.getName() == kAccumulateAttrName) {
    if (!isa<UnitAttr>(attr.getValue()))
      return op->emitOpError() << "'" << attr.getName().getValue()
                               << "' must be a unit attribute";
    return success();
  }
  return op->emitOpError() << "unknown offload attribute '"
                           << attr.getName().getValue() << "'";
}
