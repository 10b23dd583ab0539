// RUN: offload-opt %S/../../Inputs/mlp-forward.mlir --offload-autodiff --offload-split-weight-grad=report=- 2>&1 | FileCheck %s
// RUN: offload-opt %S/../../Inputs/chain-forward.mlir --offload-autodiff --offload-split-weight-grad=report=- 2>&1 | FileCheck %s --check-prefix=CHAIN
// RUN: not offload-opt %S/../../Inputs/mlp-forward.mlir --offload-split-weight-grad 2>&1 | FileCheck %s --check-prefix=NOBWD

// MLP: B computes the activations' gradients (cross-entropy, the second
// layer's input gradient, ReLU's); W the four weight and bias gradients.
// ReLU's saved result is read by B (relu_backward) and by W (fc2's weight
// gradient); the logits only by B.
// CHECK: split @forward: 5 of 11 backward ops moved to W; alive between B and W:
// CHECK: offload.phase backward_input
// CHECK: %[[DZ:.*]] = offload.cross_entropy_backward {{.*}} {offload.activation_grad}
// CHECK: %[[DR:.*]] = offload.matmul %[[DZ]], %{{.*}} {offload.activation_grad}
// CHECK: %[[DH:.*]] = offload.relu_backward %[[DR]], %{{.*}} {offload.activation_grad}
// CHECK-NEXT: offload.phase backward_weight
// CHECK-NEXT: offload.restore
// CHECK-NEXT: offload.matmul %[[DZ]], %{{.*}} {transpose_a = true}
// CHECK-NEXT: offload.reduce_sum %[[DZ]]
// CHECK-NEXT: offload.matmul %[[DH]], %{{.*}} {transpose_a = true}
// CHECK-NEXT: offload.reduce_sum %[[DH]]
// CHECK-NEXT: offload.phase optimizer

// Batch norm's backward yields its input's gradient with its parameters':
// it stays in B; the linear layers' weight gradients go to W.
// CHAIN: offload.phase backward_input
// CHAIN: offload.gelu_backward
// CHAIN: offload.batch_norm_backward
// CHAIN: offload.phase backward_weight
// CHAIN-NOT: _backward
// CHAIN-COUNT-3: offload.matmul {{.*}} {transpose_a = true}
// CHAIN: offload.phase optimizer

// NOBWD: offload-split-weight-grad: the step has no backward phase; run --offload-autodiff first
