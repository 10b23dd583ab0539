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

// Keyword options are enums: --help lists their values, and a bad value
// fails in the option parser, before any pass runs.
// RUN: offload-opt --help | FileCheck %s --check-prefix=HELP
// HELP: --offload-autodiff
// HELP: --optimizer=<value>
// HELP-NEXT: =sgd
// HELP-NEXT: =adamw
// HELP-NEXT: =none
// HELP: --step-counters=<value>
// HELP-NEXT: =shared
// HELP-NEXT: =per-parameter
// RUN: not offload-opt %S/../../Inputs/mlp-forward.mlir --offload-autodiff="optimizer=adam" 2>&1 | FileCheck %s --check-prefix=BADOPT
// BADOPT: for the --optimizer option: Cannot find option named 'adam'!
// RUN: not offload-opt %S/../../Inputs/mlp-forward.mlir --offload-host-offload="policy=largest" 2>&1 | FileCheck %s --check-prefix=BADPOL
// BADPOL: for the --policy option: Cannot find option named 'largest'!
