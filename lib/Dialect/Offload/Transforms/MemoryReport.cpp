//===- MemoryReport.cpp - Print the static memory plan --------------------===//
//
// Part of offload. Implements --offload-memory-report.
//
//===----------------------------------------------------------------------===//

#include "offload/Dialect/Offload/Transforms/PassReport.h"
#include "offload/Dialect/Offload/Transforms/Passes.h"
#include "offload/Dialect/Offload/Analysis/MemoryPlan.h"

#include "llvm/Support/Format.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/raw_ostream.h"

#define DEBUG_TYPE "offload-memory-report"

namespace mlir {
namespace offload {
#define GEN_PASS_DEF_MEMORYREPORT
#include "offload/Dialect/Offload/Transforms/Passes.h.inc"
} // namespace offload
} // namespace mlir

using namespace mlir;
using namespace mlir::offload;

namespace {
struct MemoryReportPass : public offload::impl::MemoryReportBase<MemoryReportPass> {
  using MemoryReportBase::MemoryReportBase;
  void runOnOperation() override {
    if (failed(out.run(report, "offload-memory-report", getOperation().getLoc(),
                       [&] { runPass(); }, /*hasJson=*/true)))
      signalPassFailure();
  }
  /// The report (report=, PassReport.h).
  PassReport out;
  // The JSON form (report=json:FILE): {"format": "offload-memory-report",
  // "version": 1, "functions": [{"function", "peak_device_bytes",
  // "peak_point", "peak_op", "device_arena_bytes", "host_arena_bytes",
  // "persistent_device_bytes", "largest_at_peak": [{"bytes", "begin",
  // "end", "op", "loc"}]}], "text"}: the same figures as the text (in bytes
  // and program points), and the text itself.
  static llvm::json::Object planJson(func::FuncOp fn, const MemoryPlan &plan, unsigned top) {
    llvm::json::Array largest;
    SmallVector<const PlannedBuffer *> live = plan.temporariesAtPeak();
    for (unsigned i = 0; i < live.size() && i < top; ++i) {
      Value v = live[i]->values.front();
      std::string loc;
      llvm::raw_string_ostream los(loc);
      los << v.getLoc();
      largest.push_back(llvm::json::Object{
          {"bytes", live[i]->bytes},
          {"begin", live[i]->begin},
          {"end", live[i]->end},
          {"op", v.getDefiningOp() ? v.getDefiningOp()->getName().getStringRef().str()
                                   : std::string("argument")},
          {"loc", loc}});
    }
    return llvm::json::Object{
        {"function", fn.getName().str()},
        {"peak_device_bytes", plan.peakDeviceBytes},
        {"peak_point", plan.peakPoint},
        {"peak_op", plan.schedule.empty()
                        ? std::string("-")
                        : plan.schedule[plan.peakPoint]->getName().getStringRef().str()},
        {"device_arena_bytes", plan.deviceArenaBytes},
        {"host_arena_bytes", plan.hostArenaBytes},
        {"persistent_device_bytes", plan.persistentDeviceBytes()},
        {"largest_at_peak", std::move(largest)}};
  }
  void runPass() {
    // With report=json:..., the text goes into the JSON form's "text".
    llvm::raw_ostream &os = out ? *out.stream() : llvm::nulls();
    llvm::json::Array functions;
    bool failedAny = false;
    MemoryPlanAnalysis &plans = getAnalysis<MemoryPlanAnalysis>();
    getOperation().walk([&](func::FuncOp fn) {
      if (fn.isExternal())
        return;
      FailureOr<const MemoryPlan *> plan = plans.lookup(fn);
      if (failed(plan)) {
        failedAny = true;
        return;
      }
      if (out.json())
        functions.push_back(planJson(fn, **plan, top));
      os << "memory plan of @" << fn.getName() << "\n";
      os << llvm::format("  peak device bytes: %lld at op #%lld (%s)\n",
                         (long long)(*plan)->peakDeviceBytes, (long long)(*plan)->peakPoint,
                         (*plan)->schedule.empty()
                             ? "-"
                             : (*plan)->schedule[(*plan)->peakPoint]->getName().getStringRef().str().c_str());
      os << llvm::format("  device arena bytes: %lld\n  host arena bytes: %lld\n",
                         (long long)(*plan)->deviceArenaBytes, (long long)(*plan)->hostArenaBytes);
      os << llvm::format("  persistent device bytes (arguments, results): %lld\n",
                         (long long)(*plan)->persistentDeviceBytes());
      SmallVector<const PlannedBuffer *> live = (*plan)->temporariesAtPeak();
      os << "  largest temporaries live at the peak:\n";
      for (unsigned i = 0; i < live.size() && i < top; ++i) {
        Value v = live[i]->values.front();
        std::string what = v.getDefiningOp()
                               ? v.getDefiningOp()->getName().getStringRef().str()
                               : "argument";
        os << llvm::format("    %12lld bytes  [%lld, %lld]  %s", (long long)live[i]->bytes,
                           (long long)live[i]->begin, (long long)live[i]->end,
                           what.c_str())
           << "  " << v.getLoc() << "\n";
      }
    });
    if (out.json())
      out.setJson(llvm::json::Object{{"format", "offload-memory-report"},
                                     {"version", 1},
                                     {"functions", std::move(functions)}});
    if (failedAny)
      signalPassFailure();
    markAllAnalysesPreserved();
  }
};
} // namespace
