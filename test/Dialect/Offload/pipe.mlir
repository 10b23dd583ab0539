// Transform passes never print to the IR output stream: their one-line
// reports go to stderr, so the output of one offload-opt parses in the next.
// RUN: offload-opt %S/../../Inputs/chain-forward.mlir --offload-autodiff \
// RUN:   --offload-recompute="policy=ops ops=relu,batch_norm" 2>%t.report | offload-opt | FileCheck %s
// RUN: FileCheck %s --check-prefix=REPORT < %t.report
// RUN: offload-opt %S/../../Inputs/chain-forward.mlir --offload-autodiff \
// RUN:   --offload-recompute="policy=ops ops=relu" --offload-split-weight-grad --offload-host-offload=policy=all \
// RUN:   --offload-memory-report --offload-saved-value-report --offload-cost-report 2>/dev/null \
// RUN:   | offload-opt --offload-inline-recompute | FileCheck %s --check-prefix=ALL

// CHECK: func.func @forward
// CHECK: offload.recompute
// REPORT: recompute @forward (policy ops)
// ALL: func.func @forward
// ALL: offload.phase backward_input
