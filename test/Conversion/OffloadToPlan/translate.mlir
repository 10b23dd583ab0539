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
// REQUIRES: offload-run

// CHECK: predicted peak device {{[0-9]+}} bytes
// CHECK-DAG: in  "fc1.weight" -> %{{[0-9]+}} (parameter)
// CHECK-DAG: offload.sgd_update(

// NOSTEP: expected exactly one function with 'offload.step', found 0

// HELP: --offload-to-plan
