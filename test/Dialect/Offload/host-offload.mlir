// RUN: offload-opt %S/../../Inputs/mlp-forward.mlir --offload-autodiff \
// RUN:   --offload-host-offload="policy=all prefetch-distance=2 wait-distance=1 report=-" 2>&1 | FileCheck %s
// RUN: offload-opt %S/../../Inputs/mlp-forward.mlir --offload-autodiff \
// RUN:   --offload-host-offload="policy=size min-bytes=1024 report=-" 2>&1 | FileCheck %s --check-prefix=SIZE
// RUN: offload-opt %S/../../Inputs/mlp-forward.mlir --offload-autodiff \
// RUN:   --offload-host-offload="policy=all" --convert-offload-to-plan="output=%t.oflp" -o /dev/null
// RUN: offload-run --dump-plan %t.oflp | FileCheck %s --check-prefix=PLAN
// RUN: not offload-opt %S/../../Inputs/mlp-forward.mlir --offload-host-offload 2>&1 | FileCheck %s --check-prefix=NOBWD
// RUN: offload-opt %S/../../Inputs/mlp-forward.mlir --offload-autodiff \
// RUN:   --offload-host-offload="policy=all link-bandwidth=1e30 report=-" 2>&1 | FileCheck %s --check-prefix=FAST
// RUN: offload-opt %S/../../Inputs/mlp-forward.mlir --offload-autodiff \
// RUN:   --offload-host-offload="policy=all link-bandwidth=1 report=-" 2>&1 | FileCheck %s --check-prefix=SLOW

// Placement from the cost model (no prefetch-distance): over an infinitely
// fast link each prefetch stays at its use; over a 1 byte/s link each rises
// to the start of backward, in the order of their uses (the logits first),
// since the copy cannot move into forward.
// FAST: offload.phase backward
// FAST-NEXT: offload.fill
// FAST-NEXT: offload.to_device async {{.*}} {prefetch_distance = 0 : i64} : !offload.host<tensor<32x4xf32>>
// FAST: offload.to_device async {{.*}} {prefetch_distance = 0 : i64} : !offload.host<tensor<32x16xf32>>
// SLOW: offload.phase backward
// SLOW-NEXT: offload.to_device async {{.*}} {prefetch_distance = 1 : i64} : !offload.host<tensor<32x4xf32>>
// SLOW-NEXT: offload.to_device async {{.*}} {prefetch_distance = 2 : i64} : !offload.host<tensor<32x16xf32>>

// The ReLU result goes to the host right after its last forward use (the
// second linear layer), its device copy is released one compute op later,
// and it comes back two compute ops before its first backward use, where
// compute waits for it. No save or restore is left.
// CHECK: host offload @forward (policy all): 2 saved values, 2560 bytes to the host and back
// CHECK: offload.phase forward
// CHECK: %[[R:.*]] = offload.relu
// CHECK-NEXT: %[[Z:.*]] = offload.linear %[[R]]
// CHECK-NEXT: %[[HR:.*]], %[[TR:.*]] = offload.to_host async %[[R]] : tensor<32x16xf32>
// CHECK-NEXT: offload.cross_entropy
// CHECK-NEXT: %[[HZ:.*]], %[[TZ:.*]] = offload.to_host async %[[Z]] : tensor<32x4xf32>
// CHECK-NEXT: offload.wait [%[[TR]]]
// CHECK-NEXT: offload.wait [%[[TZ]]]
// CHECK-NEXT: offload.phase backward
// CHECK-NEXT: %[[DZ:.*]], %[[TDZ:.*]] = offload.to_device async [%[[TZ]]] %[[HZ]] {prefetch_distance = 2 : i64}
// CHECK: %[[DR:.*]], %[[TDR:.*]] = offload.to_device async [%[[TR]]] %[[HR]] {prefetch_distance = 2 : i64}
// CHECK: offload.wait [%[[TDZ]]]
// CHECK-NEXT: offload.cross_entropy_backward %{{.*}}, %[[DZ]]
// CHECK: offload.wait [%[[TDR]]]
// CHECK-NEXT: offload.matmul
// CHECK-NOT: offload.save
// CHECK-NOT: offload.restore

// Only saved values of at least 1 KiB: the ReLU result (2048 bytes).
// SIZE: host offload @forward (policy size): 1 saved values, 2048 bytes to the host and back
// SIZE: offload.save %{{.*}} : tensor<32x4xf32>

// In the plan: copies on their own streams, synchronised by events.
// PLAN: [d2h] %{{[0-9]+}} = offload.to_host
// PLAN: [h2d] %{{[0-9]+}} = offload.to_device

// NOBWD: offload-host-offload: the step has no backward phase
