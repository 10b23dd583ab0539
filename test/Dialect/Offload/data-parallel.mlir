// --offload-data-parallel: gradients grouped into buckets in the order
// backward makes them final, one offload.all_reduce per bucket right after
// its last gradient, each update after a wait on its own bucket's token.
// RUN: offload-opt %S/../../Inputs/mlp-forward.mlir --offload-autodiff="optimizer=sgd momentum=0.9" \
// RUN:   --offload-data-parallel="bucket-bytes=100 report=-" 2>%t.report | FileCheck %s
// RUN: FileCheck %s --check-prefix=REPORT < %t.report
// With early updates, a bucket's updates follow the issue of the next
// bucket's reduction (one reduction in flight under backward).
// RUN: offload-opt %S/../../Inputs/mlp-forward.mlir --offload-autodiff="optimizer=sgd momentum=0.9" \
// RUN:   --offload-early-update --offload-data-parallel="bucket-bytes=100" | FileCheck %s --check-prefix=EARLY
// The default (25 MiB) puts every gradient of this small model in one bucket.
// RUN: offload-opt %S/../../Inputs/mlp-forward.mlir --offload-autodiff="optimizer=sgd" \
// RUN:   --offload-data-parallel | FileCheck %s --check-prefix=ONE
// The step round-trips through the printer and the generic form.
// RUN: offload-opt %S/../../Inputs/mlp-forward.mlir --offload-autodiff="optimizer=sgd" \
// RUN:   --offload-data-parallel="bucket-bytes=100" -mlir-print-op-generic | offload-opt | FileCheck %s --check-prefix=ONE-GENERIC
// Communication time: 848 gradient bytes, ring all-reduce 2 x 848 bytes over
// the target's link (L4: PCIe, 25e9 bytes/s; a target file's
// collective_bytes_per_second).
// RUN: offload-opt %S/../../Inputs/mlp-forward.mlir --offload-autodiff="optimizer=sgd" \
// RUN:   --offload-data-parallel="bucket-bytes=100" --offload-cost-report="target=l4" -o /dev/null 2>&1 \
// RUN:   | FileCheck %s --check-prefix=COST
// RUN: echo '{"base": "h100-sxm", "collective_bytes_per_second": 1e9}' > %t.target.json
// RUN: offload-opt %S/../../Inputs/mlp-forward.mlir --offload-autodiff="optimizer=sgd" \
// RUN:   --offload-data-parallel="bucket-bytes=100" --offload-cost-report="target=%t.target.json" -o /dev/null 2>&1 \
// RUN:   | FileCheck %s --check-prefix=COST-FILE
// Errors.
// RUN: not offload-opt %S/../../Inputs/mlp-forward.mlir --offload-autodiff="optimizer=sgd" \
// RUN:   --offload-data-parallel="bucket-bytes=0" -o /dev/null 2>&1 | FileCheck %s --check-prefix=ZERO
// RUN: not offload-opt %S/../../Inputs/mlp-forward.mlir --offload-autodiff="optimizer=sgd" \
// RUN:   --offload-data-parallel --offload-data-parallel -o /dev/null 2>&1 | FileCheck %s --check-prefix=TWICE
// RUN: not offload-opt %S/../../Inputs/mlp-forward.mlir --offload-autodiff="optimizer=sgd" \
// RUN:   --offload-host-parameters --offload-data-parallel -o /dev/null 2>&1 | FileCheck %s --check-prefix=HOST

// CHECK-LABEL: func.func @forward
// CHECK: offload.phase backward
// CHECK: %[[W2:.*]] = offload.matmul %{{.*}}, %{{.*}} {transpose_a = true}
// CHECK-NEXT: %[[R0:.*]], %[[T0:.*]] = offload.all_reduce %[[W2]] {bucket = 0 : i64} : tensor<4x16xf32>
// CHECK: %[[R1:.*]]:2, %[[T1:.*]] = offload.all_reduce %{{.*}}, %{{.*}} {bucket = 1 : i64} : tensor<4xf32>, tensor<16x8xf32>
// CHECK: %[[R2:.*]], %[[T2:.*]] = offload.all_reduce %{{.*}} {bucket = 2 : i64} : tensor<16xf32>
// CHECK-NEXT: offload.phase optimizer
// CHECK-NEXT: offload.wait [%[[T1]]]
// CHECK-NEXT: offload.sgd_update %arg0, %[[R1]]#1
// CHECK-NEXT: offload.wait [%[[T2]]]
// CHECK-NEXT: offload.sgd_update %arg1, %[[R2]],
// CHECK-NEXT: offload.wait [%[[T0]]]
// CHECK-NEXT: offload.sgd_update %arg2, %[[R0]],
// CHECK-NEXT: offload.sgd_update %arg3, %[[R1]]#0,

// REPORT: data parallel @forward: bucket 0: 1 gradients, 256 bytes, updates in the optimizer phase
// REPORT: data parallel @forward: bucket 1: 2 gradients, 528 bytes
// REPORT: data parallel @forward: bucket 2: 1 gradients, 64 bytes

// EARLY: %[[R0:.*]], %[[T0:.*]] = offload.all_reduce %{{.*}} {bucket = 0 : i64}
// EARLY: %[[R1:.*]]:2, %[[T1:.*]] = offload.all_reduce %{{.*}}, %{{.*}} {bucket = 1 : i64}
// EARLY-NEXT: offload.wait [%[[T0]]]
// EARLY-NEXT: offload.sgd_update %arg2, %[[R0]],
// EARLY: %[[R2:.*]], %[[T2:.*]] = offload.all_reduce %{{.*}} {bucket = 2 : i64}
// EARLY-NEXT: offload.wait [%[[T1]]]
// EARLY-NEXT: offload.sgd_update %arg3, %[[R1]]#0,
// EARLY-NEXT: offload.sgd_update %arg0, %[[R1]]#1,
// EARLY-NEXT: offload.wait [%[[T2]]]
// EARLY-NEXT: offload.sgd_update %arg1, %[[R2]],
// EARLY-NEXT: offload.phase optimizer

// ONE: offload.all_reduce %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} {bucket = 0 : i64}
// ONE-NOT: offload.all_reduce

// ONE-GENERIC-COUNT-3: offload.all_reduce

// COST: data parallel: all-reduce 6.784000e-08 s on the communication stream (link 2.5e+10 bytes/s
// COST-FILE: data parallel: all-reduce 1.696000e-06 s on the communication stream (link 1e+09 bytes/s

// ZERO: bucket-bytes=0 must be at least 1
// TWICE: is already in the step; run --offload-data-parallel once
// HOST: run --offload-data-parallel before --offload-host-parameters
