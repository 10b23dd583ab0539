// The memory plan is an MLIR analysis (MemoryPlanAnalysis): computed once by
// its first consumer and kept across passes that leave the step unchanged
// (the reports, the exporter's pass spelling, a transform that finds
// nothing to do), so the second report does not compute it again. A pass
// that rewrites the step invalidates it.
// RUN: offload-opt %S/../../Inputs/chain-forward.mlir --offload-autodiff -o %t.step.mlir
// RUN: offload-opt %t.step.mlir --offload-memory-report \
// RUN:   --offload-recompute="policy=names names=no-such-layer" \
// RUN:   --offload-memory-report -o /dev/null -mlir-timing -mlir-timing-display=tree 2>&1 \
// RUN:   | FileCheck %s --check-prefix=KEPT
// RUN: offload-opt %t.step.mlir --offload-memory-report \
// RUN:   --offload-recompute="policy=all" --offload-memory-report -o /dev/null \
// RUN:   -mlir-timing -mlir-timing-display=tree 2>&1 | FileCheck %s --check-prefix=REDONE

// KEPT: MemoryReport
// KEPT-NEXT: (A) offload::MemoryPlanAnalysis
// KEPT: Recompute
// KEPT: MemoryReport
// KEPT-NOT: MemoryPlanAnalysis

// REDONE: MemoryReport
// REDONE-NEXT: (A) offload::MemoryPlanAnalysis
// REDONE: Recompute
// REDONE: MemoryReport
// REDONE-NEXT: (A) offload::MemoryPlanAnalysis
