//===- CostReport.cpp - FLOPs and bytes per op and phase ------------------===//
//
// Part of offload. Implements --offload-cost-report.
//
//===----------------------------------------------------------------------===//

#include "offload/Dialect/Offload/Transforms/PassReport.h"
#include "offload/Dialect/Offload/Analysis/Target.h"
#include "offload/Dialect/Offload/Analysis/Timeline.h"
#include "offload/Dialect/Offload/Transforms/Passes.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"

#include "mlir/Interfaces/FunctionInterfaces.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/raw_ostream.h"

#define DEBUG_TYPE "offload-cost-report"

namespace mlir {
namespace offload {
#define GEN_PASS_DEF_COSTREPORT
#include "offload/Dialect/Offload/Transforms/Passes.h.inc"
} // namespace offload
} // namespace mlir

using namespace mlir;
using namespace mlir::offload;

namespace {
struct Totals {
  int64_t flops = 0, bytesRead = 0, bytesWritten = 0, ops = 0;
  bool unknown = false;
};

struct CostReportPass : public offload::impl::CostReportBase<CostReportPass> {
  using CostReportBase::CostReportBase;

  void runOnOperation() override {
    if (failed(out.run(report, "offload-cost-report", getOperation().getLoc(), [&] { runPass(); })))
      signalPassFailure();
  }
  /// The report (report=, PassReport.h).
  PassReport out;
  void runPass() {
    llvm::raw_ostream &os = out ? *out.stream() : llvm::nulls();
    std::optional<TargetModel> model;
    std::string source;
    if (!target.empty()) {
      std::string error;
      FailureOr<TargetSpec> spec = resolveTarget(target, error);
      if (failed(spec)) {
        getOperation().emitError() << "offload-cost-report: " << error;
        return signalPassFailure();
      }
      model = TargetModel::fromSpec(*spec);
      source = spec->source;
    }
    getOperation().walk([&](FunctionOpInterface fn) {
      if (fn.isExternal())
        return;
      os << "cost report for @" << fn.getName() << "\n";
      SmallVector<std::pair<std::string, Totals>> phases;
      phases.push_back({"forward", {}});
      for (Operation &op : fn.getFunctionBody().front()) {
        if (auto marker = dyn_cast<PhaseOp>(op)) {
          phases.push_back({marker.getLabel(), {}});
          continue;
        }
        auto cost = dyn_cast<CostOpInterface>(&op);
        if (!cost)
          continue;
        Totals &t = phases.back().second;
        int64_t f = cost.getFlops(), r = cost.getBytesRead(), w = cost.getBytesWritten();
        if (f < 0 || r < 0 || w < 0)
          t.unknown = true;
        else {
          t.flops += f;
          t.bytesRead += r;
          t.bytesWritten += w;
        }
        ++t.ops;
        ++numOps;
        if (perOp) {
          os << llvm::format("  %-28s flops=%-12lld read=%-10lld written=%-10lld",
                             op.getName().getStringRef().str().c_str(), (long long)f,
                             (long long)r, (long long)w);
          // With a target: the op's modelled seconds on it.
          if (model)
            os << llvm::format(" seconds=%-11.4e", model->opSeconds(&op));
          // The host kernel's working set, where it has one.
          if (int64_t sc = cost.getScratchBytes(); sc != 0)
            os << " scratch=" << sc;
          os << " " << op.getLoc() << "\n";
        }
      }
      Totals all;
      for (auto &[name, t] : phases) {
        if (t.ops == 0)
          continue;
        os << llvm::format("  phase %-16s ops=%-5lld flops=%-14lld bytes_read=%-12lld "
                           "bytes_written=%lld%s\n",
                           name.c_str(), (long long)t.ops, (long long)t.flops,
                           (long long)t.bytesRead, (long long)t.bytesWritten,
                           t.unknown ? " (some ops have dynamic shapes)" : "");
        all.ops += t.ops;
        all.flops += t.flops;
        all.bytesRead += t.bytesRead;
        all.bytesWritten += t.bytesWritten;
      }
      os << llvm::format("  total ops=%lld flops=%lld bytes_read=%lld bytes_written=%lld\n",
                         (long long)all.ops, (long long)all.flops,
                         (long long)all.bytesRead, (long long)all.bytesWritten);
      if (auto f = dyn_cast<func::FuncOp>(fn.getOperation()); f && model) {
        Timeline t = simulateTimeline(f, *model);
        os << llvm::format("  simulated step time on %s: %.6e s (compute %.6e s, "
                           "host-to-device %.6e s, device-to-host %.6e s, copies not "
                           "hidden by compute %.6e s)\n",
                           target.c_str(), t.stepSeconds, t.computeSeconds,
                           t.hostToDeviceSeconds, t.deviceToHostSeconds, t.stallSeconds);
        bool zero1 = false;
        f.walk([&](ReduceScatterOp) { zero1 = true; });
        if (t.collectiveSeconds > 0 && !zero1)
          os << llvm::format("  data parallel: all-reduce %.6e s on the communication stream "
                             "(link %.4g bytes/s, ring all-reduce 2 x bytes / link)\n",
                             t.collectiveSeconds, model->collectiveBytesPerSecond);
        else if (t.collectiveSeconds > 0)
          os << llvm::format("  data parallel (ZeRO-1): reduce-scatter and all-gather %.6e s on "
                             "the communication stream (link %.4g bytes/s, bytes / link each)\n",
                             t.collectiveSeconds, model->collectiveBytesPerSecond);
        // Where the target's figures come from (datasheet, or the host
        // target file's source: when and where offload-run --calibrate ran).
        os << "  target figures: " << source << "\n";
      }
    });
    markAllAnalysesPreserved();
  }
};
} // namespace
