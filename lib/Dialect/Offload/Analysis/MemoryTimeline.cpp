//===- MemoryTimeline.cpp - Live device bytes by category over a step -----===//
//
// Part of offload. See MemoryTimeline.h.
//
//===----------------------------------------------------------------------===//

#include "offload/Dialect/Offload/Analysis/MemoryTimeline.h"
#include "offload/Dialect/Offload/IR/OffloadOps.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/Support/JSON.h"

using namespace mlir;
using namespace mlir::offload;

StringRef mlir::offload::memoryCategoryName(MemoryCategory c) {
  switch (c) {
  case MemoryCategory::Parameter:
    return "parameters";
  case MemoryCategory::OptimizerState:
    return "optimizer_state";
  case MemoryCategory::Input:
    return "inputs";
  case MemoryCategory::Copy:
    return "copies";
  case MemoryCategory::Gradient:
    return "gradients";
  case MemoryCategory::Saved:
    return "saved";
  case MemoryCategory::Temporary:
    return "temporaries";
  }
  llvm_unreachable("unknown memory category");
}

static MemoryCategory categoryOf(const PlannedBuffer &b, func::FuncOp fn,
                                 const llvm::DenseSet<Value> &gradients) {
  for (Value v : b.values)
    if (auto arg = dyn_cast<BlockArgument>(v)) {
      std::optional<Role> role = getArgRole(fn, arg.getArgNumber());
      if (role == Role::parameter)
        return MemoryCategory::Parameter;
      if (role == Role::optimizer_state)
        return MemoryCategory::OptimizerState;
      return MemoryCategory::Input;
    }
  for (Value v : b.values)
    if (v.getDefiningOp<ToDeviceOp>())
      return MemoryCategory::Copy;
  for (Value v : b.values)
    if (gradients.contains(v))
      return MemoryCategory::Gradient;
  for (Value v : b.values)
    if (isa<SavedType>(v.getType()) || v.getDefiningOp<SaveOp>())
      return MemoryCategory::Saved;
  return MemoryCategory::Temporary;
}

MemoryTimeline mlir::offload::computeMemoryTimeline(const MemoryPlan &plan) {
  MemoryTimeline t;
  t.points = int64_t(plan.schedule.size());
  t.arenaBytes = plan.deviceArenaBytes;
  t.peakBytes = plan.peakDeviceBytes;
  t.peakPoint = plan.peakPoint;
  if (plan.peakPoint < t.points)
    t.peakOp = plan.schedule[plan.peakPoint]->getName().getStringRef().str();

  llvm::DenseSet<Value> gradients;
  for (auto [point, op] : llvm::enumerate(plan.schedule)) {
    if (auto s = dyn_cast<SgdUpdateOp>(op))
      gradients.insert(s.getGrad());
    else if (auto a = dyn_cast<AdamWUpdateOp>(op))
      gradients.insert(a.getGrad());
    if (auto m = dyn_cast<PhaseOp>(op))
      t.phases.push_back({m.getLabel(), int64_t(point)});
  }
  // A difference array per category.
  std::array<SmallVector<int64_t>, kNumMemoryCategories> delta;
  for (auto &d : delta)
    d.assign(t.points + 1, 0);
  for (const PlannedBuffer &b : plan.buffers) {
    if (b.space != MemorySpace::Device || b.bytes <= 0)
      continue;
    unsigned c = unsigned(categoryOf(b, plan.function, gradients));
    delta[c][b.begin] += b.bytes;
    delta[c][b.end + 1] -= b.bytes;
  }
  for (unsigned c = 0; c < kNumMemoryCategories; ++c) {
    t.liveBytes[c].resize(t.points);
    int64_t running = 0;
    for (int64_t p = 0; p < t.points; ++p)
      t.liveBytes[c][p] = running += delta[c][p];
  }
  return t;
}

void mlir::offload::writeMemoryTimelineJson(
    raw_ostream &os, StringRef stepName, StringRef targetName, int64_t budgetBytes,
    ArrayRef<std::pair<std::string, const MemoryTimeline *>> plans) {
  llvm::json::OStream j(os);
  j.object([&] {
    j.attribute("format", "offload-memory-timeline");
    j.attribute("version", 1);
    j.attribute("step", stepName);
    j.attribute("target", targetName);
    j.attribute("budget_bytes", budgetBytes);
    j.attributeArray("categories", [&] {
      for (unsigned c = 0; c < kNumMemoryCategories; ++c)
        j.value(memoryCategoryName(MemoryCategory(c)));
    });
    j.attributeArray("plans", [&] {
      for (auto &[name, t] : plans)
        j.object([&] {
          j.attribute("name", name);
          j.attribute("points", t->points);
          j.attribute("arena_bytes", t->arenaBytes);
          j.attribute("peak_bytes", t->peakBytes);
          j.attribute("peak_point", t->peakPoint);
          j.attribute("peak_op", t->peakOp);
          j.attributeArray("phases", [&] {
            for (auto &[phase, point] : t->phases)
              j.object([&] {
                j.attribute("phase", phase);
                j.attribute("point", point);
              });
          });
          j.attributeObject("live_bytes", [&] {
            for (unsigned c = 0; c < kNumMemoryCategories; ++c)
              j.attributeArray(memoryCategoryName(MemoryCategory(c)), [&] {
                for (int64_t v : t->liveBytes[c])
                  j.value(v);
              });
          });
        });
    });
  });
  os << "\n";
}
