// The plan exporter: offload-translate --offload-to-plan writes the same plan
// as the deprecated pass spelling, reads the IR without changing it, and
// refuses a module without exactly one step.
// RUN: offload-opt %S/../../Inputs/mlp-forward.mlir --offload-autodiff="optimizer=sgd lr=0.1 momentum=0.9" -o %t.step.mlir
// RUN: offload-translate --offload-to-plan %t.step.mlir -o %t.plan
// RUN: offload-opt %t.step.mlir --convert-offload-to-plan="output=%t.pass.plan" -o /dev/null
// RUN: cmp %t.plan %t.pass.plan
// RUN: offload-run --dump-plan %t.plan | FileCheck %s
// RUN: not offload-translate --offload-to-plan %S/Inputs/no-step.mlir -o %t.none 2>&1 | FileCheck %s --check-prefix=NOSTEP
// RUN: offload-translate --help | FileCheck %s --check-prefix=HELP
// The summary (--report) and the inference plan (--forward-only), as the pass
// spells them report= and forward-only=true.
// RUN: offload-translate --offload-to-plan %t.step.mlir -o %t.plan2 --report=- 2>&1 | FileCheck %s --check-prefix=SUMMARY
// RUN: offload-translate --offload-to-plan %t.step.mlir -o %t.plan2 --report=%t.summary && FileCheck %s --check-prefix=SUMMARY < %t.summary
// RUN: rm -f %t.fwd && not offload-translate --offload-to-plan %S/../../Inputs/mlp-forward.mlir -o %t.fwd 2>&1 | FileCheck %s --check-prefix=TRAINS
// RUN: not test -e %t.fwd
// RUN: offload-translate --offload-to-plan %S/../../Inputs/mlp-forward.mlir -o %t.fwd --forward-only
// RUN: offload-opt %S/../../Inputs/mlp-forward.mlir --convert-offload-to-plan="output=%t.fwd.pass forward-only=true" -o /dev/null
// RUN: cmp %t.fwd %t.fwd.pass
// REQUIRES: offload-run

// CHECK: predicted peak device {{[0-9]+}} bytes
// CHECK-DAG: in  "fc1.weight" -> %{{[0-9]+}} (parameter)
// CHECK-DAG: offload.sgd_update(

// NOSTEP: expected exactly one function with 'offload.step', found 0

// SUMMARY: plan {{.*}}plan2: {{[0-9]+}} instructions, {{[0-9]+}} buffers, peak device bytes [[PEAK:[0-9]+]] (memory plan: [[PEAK]]), device arena {{[0-9]+}} bytes, host arena 0 bytes
// TRAINS: error: offload-to-plan: step 'forward' has parameters (e.g. 'fc1.weight') but no backward phase: the plan would train nothing; run --offload-autodiff first, or pass --forward-only for an inference plan

// HELP: --forward-only
// HELP: --offload-to-plan
// HELP: --report=<where>
