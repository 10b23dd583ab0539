// --offload-early-update: each optimizer update runs right after the last op
// it depends on (its gradient, and the last other reader of its parameter).
// RUN: offload-opt %S/../../Inputs/mlp-forward.mlir --offload-autodiff="optimizer=sgd momentum=0.9" \
// RUN:   --offload-early-update="report=true" 2>%t.report | FileCheck %s
// RUN: FileCheck %s --check-prefix=REPORT < %t.report
// RUN: offload-opt %S/../../Inputs/mlp-forward.mlir --offload-autodiff="optimizer=adamw" \
// RUN:   --offload-early-update 2>&1 | FileCheck %s --check-prefix=ADAMW
// The memory plan: the gradients no longer pile up to the end of backward.
// RUN: offload-opt %S/../../Inputs/mlp-forward.mlir --offload-autodiff="optimizer=sgd momentum=0.9" \
// RUN:   --offload-memory-report -o /dev/null 2>&1 | FileCheck %s --check-prefix=BEFORE
// RUN: offload-opt %S/../../Inputs/mlp-forward.mlir --offload-autodiff="optimizer=sgd momentum=0.9" \
// RUN:   --offload-early-update --offload-memory-report -o /dev/null 2>&1 | FileCheck %s --check-prefix=AFTER
// Running it again moves nothing.
// RUN: offload-opt %S/../../Inputs/mlp-forward.mlir --offload-autodiff="optimizer=sgd momentum=0.9" \
// RUN:   --offload-early-update --offload-early-update="report=true" -o /dev/null 2>&1 | FileCheck %s --check-prefix=AGAIN

// CHECK-LABEL: func.func @forward
// fc2's weight gradient is final after the first matmuls; its update
// follows the last backward read of fc2.weight (the input-gradient matmul).
// CHECK: %[[DX:.*]] = offload.matmul %{{.*}}, %arg2 {offload.activation_grad
// CHECK-NEXT: %[[DW2:.*]] = offload.matmul
// CHECK-NEXT: offload.sgd_update %arg2, %[[DW2]]
// CHECK-NEXT: %[[DB2:.*]] = offload.reduce_sum
// CHECK-NEXT: offload.sgd_update %arg3, %[[DB2]]
// CHECK: offload.relu_backward
// CHECK: %[[DW1:.*]] = offload.matmul
// CHECK-NEXT: offload.sgd_update %arg0, %[[DW1]]
// CHECK: %[[DB1:.*]] = offload.reduce_sum
// CHECK-NEXT: offload.sgd_update %arg1, %[[DB1]]
// CHECK-NEXT: offload.phase optimizer
// CHECK-NEXT: return
// REPORT: early update @forward: 4 optimizer updates moved into backward
// ADAMW: offload.adamw_update %arg2
// ADAMW: offload.relu_backward
// ADAMW: offload.adamw_update %arg0
// ADAMW: offload.phase optimizer
// ADAMW-NEXT: return
// BEFORE: device arena bytes: 10756
// AFTER: device arena bytes: 10500
// AGAIN: early update @forward: 0 optimizer updates moved into backward
