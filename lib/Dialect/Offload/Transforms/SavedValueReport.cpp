//===- SavedValueReport.cpp - Table of the step's saved values ------------===//
//
// Part of offload. Implements --offload-saved-value-report.
//
//===----------------------------------------------------------------------===//

#include "offload/Dialect/Offload/Transforms/PassReport.h"
#include "offload/Dialect/Offload/Transforms/Passes.h"

#include "mlir/Interfaces/FunctionInterfaces.h"
#include "llvm/ADT/MapVector.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/raw_ostream.h"

#include <map>

#define DEBUG_TYPE "offload-saved-value-report"

namespace mlir {
namespace offload {
#define GEN_PASS_DEF_SAVEDVALUEREPORT
#include "offload/Dialect/Offload/Transforms/Passes.h.inc"
} // namespace offload
} // namespace mlir

using namespace mlir;
using namespace mlir::offload;

namespace {
struct SavedValueReportPass
    : public offload::impl::SavedValueReportBase<SavedValueReportPass> {
  using SavedValueReportBase::SavedValueReportBase;

  void runOnOperation() override {
    if (failed(out.run(report, "offload-saved-value-report", getOperation().getLoc(), [&] { runPass(); })))
      signalPassFailure();
  }
  /// The report (report=, PassReport.h).
  PassReport out;
  void runPass() {
    llvm::raw_ostream &os = out ? *out.stream() : llvm::nulls();
    getOperation().walk([&](FunctionOpInterface fn) {
      if (fn.isExternal())
        return;
      llvm::MapVector<std::string, std::pair<int64_t, int64_t>,
                      std::map<std::string, unsigned>>
          byLayer;
      int64_t total = 0, count = 0;
      os << "saved values of @" << fn.getName() << "\n";
      if (perValue)
        os << llvm::format("  %-4s %12s  %-24s %-40s %s\n", "#", "bytes", "producer",
                           "consumers", "location");
      fn.walk([&](SaveOp save) {
        int64_t bytes = mlir::offload::detail::tensorBytes(save.getValue().getType());
        Operation *producer = save.getValue().getDefiningOp();
        std::string consumers;
        for (Operation *user : save.getResult().getUsers()) {
          auto restore = dyn_cast<RestoreOp>(user);
          if (!restore)
            continue;
          for (Operation *reader : restore.getResult().getUsers()) {
            if (!consumers.empty())
              consumers += ",";
            consumers += reader->getName().stripDialect().str();
          }
        }
        Location loc = producer ? producer->getLoc() : save.getLoc();
        std::string layer = getLayerName(loc);
        auto &entry = byLayer[layer];
        entry.first += bytes;
        entry.second += 1;
        total += bytes;
        ++count;
        if (perValue) {
          std::string locStr;
          llvm::raw_string_ostream ls(locStr);
          loc.print(ls);
          os << llvm::format("  %-4lld %12lld  %-24s %-40s %s\n", (long long)count,
                             (long long)bytes,
                             producer ? producer->getName().getStringRef().str().c_str()
                                      : "<argument>",
                             consumers.c_str(), locStr.c_str());
        }
      });
      os << "  by layer:\n";
      for (auto &[layer, e] : byLayer)
        os << llvm::format("    %-48s %12lld bytes in %lld values\n", layer.c_str(),
                           (long long)e.first, (long long)e.second);
      os << llvm::format("  total: %lld bytes in %lld saved values\n", (long long)total,
                         (long long)count);
    });
    markAllAnalysesPreserved();
  }
};
} // namespace
