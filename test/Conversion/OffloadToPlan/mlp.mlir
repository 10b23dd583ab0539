// Lower the MLP training step to a plan and read it back with offload-run.
// RUN: offload-opt %S/../../Inputs/mlp-forward.mlir --offload-autodiff="optimizer=sgd lr=0.1 momentum=0.9 return-gradients=true" \
// RUN:   --offload-memory-report --convert-offload-to-plan="output=%t.oflp report=-" -o /dev/null 2>&1 | FileCheck %s --check-prefix=COMPILE
// RUN: offload-run --dump-plan %t.oflp | FileCheck %s
// REQUIRES: offload-run

// The plan's peak (runtime rule over instructions) equals the compiler's
// memory plan (program points).
// COMPILE: memory plan of @forward
// COMPILE: peak device bytes: [[PEAK:[0-9]+]] at op
// COMPILE: plan {{.*}}: 16 instructions, {{[0-9]+}} buffers, peak device bytes [[PEAK]] (memory plan: [[PEAK]])

// CHECK: predicted peak device [[PEAK:[0-9]+]] bytes
// Optimizer updates run in place: the new fc1.weight and its momentum buffer
// are bound to the buffers of their inputs.
// CHECK-DAG: in  "fc1.weight" -> %[[W:[0-9]+]] (parameter)
// CHECK-DAG: out "fc1.weight" -> %[[W]] (parameter)
// CHECK-DAG: in  "fc1.weight.momentum_buffer" -> %[[M:[0-9]+]] (optimizer_state)
// CHECK-DAG: out "fc1.weight.momentum_buffer" -> %[[M]] (optimizer_state)
// CHECK-DAG: in  "x" -> %{{[0-9]+}} (input)
// CHECK-DAG: out "loss" -> %{{[0-9]+}} (output)
// CHECK-DAG: out "grad:fc2.bias" -> %{{[0-9]+}} (gradient)
// CHECK: phase forward [0,4):
// CHECK-NEXT: offload.linear
// CHECK: offload.cross_entropy({{.*}}reduction = "mean"
// CHECK: phase backward [4,12):
// CHECK: offload.cross_entropy_backward
// CHECK: offload.matmul({{.*}}) {transpose_a = [1], transpose_b = [0]}
// CHECK: phase optimizer [12,16):
// CHECK-COUNT-4: offload.sgd_update
