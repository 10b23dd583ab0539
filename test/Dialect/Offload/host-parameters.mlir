// RUN: offload-opt %S/../../Inputs/mlp-forward.mlir --offload-autodiff="optimizer=sgd momentum=0.9" \
// RUN:   --offload-host-parameters="prefetch-distance=1 refetch=always report=-" 2>&1 | FileCheck %s
// RUN: offload-opt %S/../../Inputs/mlp-forward.mlir --offload-autodiff="optimizer=sgd momentum=0.9" \
// RUN:   --offload-host-parameters="refetch=never link-bandwidth=1e30 report=-" 2>&1 | FileCheck %s --check-prefix=FAST
// RUN: offload-opt %S/../../Inputs/mlp-forward.mlir --offload-autodiff="optimizer=sgd momentum=0.9" \
// RUN:   --offload-host-parameters="refetch=never link-bandwidth=1 report=-" 2>&1 | FileCheck %s --check-prefix=SLOW
// RUN: offload-opt %S/../../Inputs/mlp-forward.mlir --offload-autodiff="optimizer=adamw return-gradients=true" \
// RUN:   --offload-host-parameters="policy=names names=fc2.* report=-" 2>&1 | FileCheck %s --check-prefix=NAMES
// RUN: offload-opt %S/../../Inputs/mlp-forward.mlir --offload-autodiff="optimizer=adamw precision=fp16-mixed" \
// RUN:   --offload-host-parameters="report=-" 2>&1 | FileCheck %s --check-prefix=SCALED
// RUN: offload-opt %S/../../Inputs/mlp-forward.mlir --offload-autodiff="optimizer=sgd momentum=0.9" \
// RUN:   --offload-host-parameters --convert-offload-to-plan="output=%t.oflp" -o /dev/null
// RUN: offload-run --dump-plan %t.oflp | FileCheck %s --check-prefix=PLAN
// RUN: not offload-opt %S/../../Inputs/mlp-forward.mlir --offload-host-parameters 2>&1 | FileCheck %s --check-prefix=NOBWD
// RUN: not offload-opt %S/../../Inputs/mlp-forward.mlir --offload-autodiff \
// RUN:   --offload-host-parameters="refetch=sometimes" 2>&1 | FileCheck %s --check-prefix=BADOPT
// RUN: not offload-opt %S/../../Inputs/mlp-forward.mlir --offload-autodiff \
// RUN:   --offload-host-parameters="link-bandwidth=0" 2>&1 | FileCheck %s --check-prefix=BADBW
// RUN: not offload-opt %S/../../Inputs/mlp-forward.mlir --offload-autodiff \
// RUN:   --offload-host-offload="device-flops=-1" 2>&1 | FileCheck %s --check-prefix=BADBW2

// Explicit distance 1, fetched again for backward: each parameter comes to
// the device one compute op before its forward use and is waited for just
// before it; fc2.weight, read again in backward (the input gradient), comes
// back once more; every gradient goes to the host as soon as it exists, and
// the SGD updates run over host values.
// CHECK: host parameters @forward (policy all): 4 parameters, 1696 bytes of parameters and optimizer state on the host; 1 prefetched again for backward, 0 kept
// CHECK: %arg0: !offload.host<tensor<16x8xf32>> {offload.name = "fc1.weight", offload.role = #offload.role<parameter>}
// CHECK-SAME: %arg7: !offload.host<tensor<16x8xf32>> {offload.name = "fc1.weight.momentum_buffer"
// CHECK: offload.phase forward
// CHECK: %[[W1:.*]], %[[T1:.*]] = offload.to_device async %arg0 {prefetch_distance = 1 : i64}
// CHECK: offload.wait [%[[T1]]]
// CHECK: offload.linear %arg4, %[[W1]]
// CHECK: %[[W2:.*]], %[[T2:.*]] = offload.to_device async %arg2 {prefetch_distance = 1 : i64}
// CHECK-NEXT: offload.to_device async %arg3
// CHECK-NEXT: offload.relu
// CHECK: offload.wait [%[[T2]]]
// CHECK: offload.linear %{{.*}}, %[[W2]]
// CHECK: offload.phase backward
// CHECK: %[[W2B:.*]], %[[T2B:.*]] = offload.to_device async %arg2 {prefetch_distance = 1 : i64}
// CHECK-NEXT: offload.cross_entropy_backward
// CHECK: offload.wait [%[[T2B]]]
// CHECK-NEXT: offload.matmul %{{.*}}, %[[W2B]] {offload.activation_grad}
// CHECK-NEXT: %[[G2:.*]] = offload.matmul
// CHECK-NEXT: %[[G2H:.*]], %[[G2T:.*]] = offload.to_host async %[[G2]] : tensor<4x16xf32>
// CHECK: offload.wait [%[[G2T]]]
// CHECK: offload.phase optimizer
// CHECK: %[[STEP:.*]] = offload.to_host %arg6 : tensor<i64>
// CHECK: offload.sgd_update %arg0, %{{.*}}, %arg7, %[[STEP]] {{.*}} : !offload.host<tensor<16x8xf32>>, !offload.host<tensor<i64>>
// CHECK: offload.sgd_update %arg2, %[[G2H]], %arg9, %[[STEP]]
// CHECK-NOT: offload.sgd_update {{.*}} : tensor

// The cost model: with an infinitely fast link a prefetch stays at its use
// (distance 0); over a 1 byte/s link it rises as far as it can without
// raising the step's peak.
// FAST-COUNT-4: prefetch_distance = 0 : i64
// FAST-NOT: prefetch_distance = 1
// SLOW: 1 kept on the device from forward to backward
// Copies leave the one host-to-device stream in the order they are needed:
// fc2's rise to the top of the step but stay queued behind fc1's.
// SLOW: offload.phase forward
// SLOW-NEXT: offload.to_device async %arg0 {prefetch_distance = 0 : i64}
// SLOW-NEXT: offload.to_device async %arg1 {prefetch_distance = 0 : i64}
// SLOW-NEXT: offload.to_device async %arg2 {prefetch_distance = 2 : i64}
// SLOW-NEXT: offload.to_device async %arg3 {prefetch_distance = 2 : i64}

// policy=names: only fc2's parameters move; AdamW's two moments go with
// them, and the returned gradients of the moved parameters come from the
// host.
// NAMES: (policy names): 2 parameters, 816 bytes
// NAMES: %arg0: tensor<16x8xf32> {offload.name = "fc1.weight"
// NAMES-SAME: %arg2: !offload.host<tensor<4x16xf32>> {offload.name = "fc2.weight"
// NAMES-SAME: !offload.host<tensor<4x16xf32>> {offload.name = "fc2.weight.exp_avg", offload.role = #offload.role<optimizer_state>}
// NAMES-SAME: !offload.host<tensor<4x16xf32>> {offload.name = "fc2.weight.exp_avg_sq", offload.role = #offload.role<optimizer_state>}
// NAMES-SAME: !offload.host<tensor<4x16xf32>> {offload.name = "grad:fc2.weight", offload.role = #offload.role<gradient>}
// NAMES: offload.adamw_update %arg0, {{.*}} : tensor<16x8xf32>, tensor<i64>
// NAMES: offload.adamw_update %arg2, {{.*}} : !offload.host<tensor<4x16xf32>>, !offload.host<tensor<i64>>

// fp16 loss scaling: the updates skip an overflowing step themselves
// (`skip_if`), so every parameter and its moments move to the host as
// without scaling; the flag, computed on the device from all gradients, is
// copied to the host once.
// SCALED-NOT: warning
// SCALED: host parameters @forward (policy all): 4 parameters, 2544 bytes
// SCALED: %[[FOUND:.*]] = offload.compare ne
// SCALED-NEXT: %[[HFOUND:.*]] = offload.to_host %[[FOUND]] : tensor<i1>
// SCALED-COUNT-4: offload.adamw_update {{.*}} skip_if %[[HFOUND]] {{.*}} : !offload.host<tensor<{{.*}}>>, !offload.host<tensor<i64>>, !offload.host<tensor<i1>>
// SCALED-NOT: offload.where {{.*}}!offload.host

// In the plan, parameters and their momentum are host buffers bound by name,
// and the updates compute on host buffers.
// PLAN: "fc1.weight" f32[16,8] host@
// PLAN: bindings
// PLAN: in  "fc1.weight" -> %{{[0-9]+}} (parameter)
// PLAN: offload.sgd_update

// NOBWD: the step has no backward phase; run --offload-autodiff first
// BADOPT: for the --refetch option: Cannot find option named 'sometimes'!
// BADBW: error: offload-host-parameters: link-bandwidth, device-flops and device-bandwidth must be > 0
// BADBW-NOT: see current operation
// BADBW2: error: offload-host-offload: link-bandwidth, device-flops and device-bandwidth must be > 0
