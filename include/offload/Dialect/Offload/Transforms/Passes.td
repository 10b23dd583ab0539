//===- Passes.td - offload passes ---------------------------*- tablegen -*-===//
#ifndef OFFLOAD_PASSES_TD
#define OFFLOAD_PASSES_TD

include "mlir/Pass/PassBase.td"

def CostReport : Pass<"offload-cost-report", "::mlir::ModuleOp"> {
  let summary = "Prints FLOPs and bytes of every op of each training step";
  let description = [{
    An analysis: for every function, prints one line per compute op (with
    `per-op`) giving its FLOPs (a multiply-add counts 2) and the bytes it
    reads and writes, from the ops' cost interface, then the totals per
    phase. The IR is not changed. The figures feed the planner's roofline
    time estimate.

    Example: `offload-opt --offload-cost-report model.mlir -o /dev/null`
  }];
  let options = [
    Option<"perOp", "per-op", "bool", /*default=*/"true",
           "Print one line per op, not only the totals">,
  ];
  let statistics = [
    Statistic<"numOps", "ops", "Compute ops counted">,
  ];
}

#endif // OFFLOAD_PASSES_TD
