// RUN: offload-opt %s --offload-autodiff="optimizer=sgd lr=0.1 momentum=0.9" | FileCheck %s --check-prefixes=CHECK,SGD
// RUN: offload-opt %s --offload-autodiff="optimizer=adamw lr=1e-3 weight-decay=0.01" | FileCheck %s --check-prefixes=CHECK,ADAMW
// RUN: offload-opt %s --offload-autodiff="optimizer=none" | FileCheck %s --check-prefixes=CHECK,NONE
// RUN: offload-opt %s --offload-autodiff="optimizer=sgd return-gradients=true" | FileCheck %s --check-prefix=GRADS

// A two-layer MLP with cross-entropy: ReLU saves its result, the second
// linear layer reads the same value (one save), cross-entropy saves the
// logits; the inputs are arguments and are not saved; the first layer's
// input gradient is never built.

// CHECK-LABEL: func.func @mlp
// SGD-SAME: offload.name = "optimizer.step", offload.role = #offload.role<optimizer_state>
// SGD-SAME: offload.name = "fc1.weight.momentum_buffer", offload.role = #offload.role<optimizer_state>
// ADAMW-SAME: offload.name = "fc1.weight.exp_avg", offload.role = #offload.role<optimizer_state>
// ADAMW-SAME: offload.name = "fc1.weight.exp_avg_sq", offload.role = #offload.role<optimizer_state>
// SGD-SAME: -> (tensor<f32> {offload.name = "loss", offload.role = #offload.role<loss>}, tensor<16x8xf32> {offload.name = "fc1.weight", offload.role = #offload.role<new_parameter>}
// NONE-SAME: -> (tensor<f32> {offload.name = "loss", offload.role = #offload.role<loss>}, tensor<16x8xf32> {offload.name = "grad:fc1.weight", offload.role = #offload.role<gradient>}
// GRADS-LABEL: func.func @mlp
// GRADS-SAME: {offload.name = "grad:fc2.bias", offload.role = #offload.role<gradient>}
// CHECK: offload.phase forward
// CHECK: %[[H:.*]] = offload.linear
// CHECK: %[[R:.*]] = offload.relu %[[H]]
// CHECK-NEXT: %[[SR:.*]] = offload.save %[[R]]
// CHECK: %[[Z:.*]] = offload.linear %[[R]]
// CHECK-NEXT: %[[SZ:.*]] = offload.save %[[Z]]
// CHECK-NOT: offload.save
// CHECK: offload.phase backward
// CHECK: %[[ONE:.*]] = offload.fill {value = 1.000000e+00 : f64} : tensor<f32>
// CHECK: %[[RZ:.*]] = offload.restore %[[SZ]]
// CHECK: %[[DZ:.*]] = offload.cross_entropy_backward %[[ONE]], %[[RZ]]
// CHECK: %[[DR:.*]] = offload.matmul %[[DZ]], %{{.*}} : tensor<32x4xf32>, tensor<4x16xf32>
// CHECK: offload.matmul %[[DZ]], %{{.*}} {transpose_a = true}
// CHECK: offload.reduce_sum %[[DZ]] {dims = array<i64: 0>}
// CHECK: %[[RR:.*]] = offload.restore %[[SR]]
// CHECK: %[[DH:.*]] = offload.relu_backward %[[DR]], %[[RR]]
// CHECK: offload.matmul %[[DH]], %{{.*}} {transpose_a = true} : tensor<32x16xf32>, tensor<32x8xf32>
// CHECK-NOT: offload.matmul %[[DH]], %{{.*}} : tensor<32x16xf32>, tensor<16x8xf32>
// SGD: offload.phase optimizer
// SGD-COUNT-4: offload.sgd_update {{.*}}momentum = 9.000000e-01
// ADAMW: offload.phase optimizer
// ADAMW-COUNT-4: offload.adamw_update {{.*}}weight_decay = 1.000000e-02
// NONE-NOT: offload.phase optimizer
func.func @mlp(%w1: tensor<16x8xf32> {offload.name = "fc1.weight", offload.role = #offload.role<parameter>},
               %b1: tensor<16xf32> {offload.name = "fc1.bias", offload.role = #offload.role<parameter>},
               %w2: tensor<4x16xf32> {offload.name = "fc2.weight", offload.role = #offload.role<parameter>},
               %b2: tensor<4xf32> {offload.name = "fc2.bias", offload.role = #offload.role<parameter>},
               %x: tensor<32x8xf32> {offload.name = "x", offload.role = #offload.role<input>},
               %t: tensor<32xi64> {offload.name = "y", offload.role = #offload.role<input>})
    -> (tensor<f32> {offload.name = "loss", offload.role = #offload.role<loss>}) attributes {offload.step} {
  offload.phase forward
  %h = offload.linear %x, %w1, %b1 : tensor<32x8xf32>, tensor<16x8xf32>, tensor<16xf32>
  %r = offload.relu %h : tensor<32x16xf32>
  %z = offload.linear %r, %w2, %b2 : tensor<32x16xf32>, tensor<4x16xf32>, tensor<4xf32>
  %l = offload.cross_entropy %z, %t : tensor<32x4xf32>, tensor<32xi64>
  return %l : tensor<f32>
}

// Batch norm saves its batch statistics (its input and weight are
// arguments here); running statistics are state results of the forward, not
// differentiated; dropout saves only its seed, an argument: no save op.

// CHECK-LABEL: func.func @bn_dropout
// CHECK: offload.batch_norm
// CHECK-COUNT-2: offload.save %{{.*}} : tensor<4xf32>
// CHECK-NOT: offload.save
// CHECK: offload.phase backward
// CHECK: offload.dropout_backward %{{.*}}, %{{.*}} {{{.*}}offset = 0 : i64, p = 1.000000e-01 : f64}
// CHECK: offload.batch_norm_backward
func.func @bn_dropout(%w: tensor<4xf32> {offload.name = "bn.weight", offload.role = #offload.role<parameter>},
                      %b: tensor<4xf32> {offload.name = "bn.bias", offload.role = #offload.role<parameter>},
                      %rm: tensor<4xf32> {offload.name = "bn.running_mean", offload.role = #offload.role<state>},
                      %rv: tensor<4xf32> {offload.name = "bn.running_var", offload.role = #offload.role<state>},
                      %x: tensor<2x4x3x3xf32> {offload.name = "x", offload.role = #offload.role<input>},
                      %seed: tensor<i64> {offload.name = "rng_seed", offload.role = #offload.role<rng_seed>})
    -> (tensor<f32> {offload.name = "loss", offload.role = #offload.role<loss>},
        tensor<4xf32> {offload.name = "bn.running_mean", offload.role = #offload.role<new_state>},
        tensor<4xf32> {offload.name = "bn.running_var", offload.role = #offload.role<new_state>}) attributes {offload.step} {
  %y, %m, %is, %nrm, %nrv = offload.batch_norm %x, %w, %b, %rm, %rv {momentum = 0.1 : f64, eps = 1.0e-5 : f64}
      : tensor<2x4x3x3xf32>, tensor<4xf32>
  %d = offload.dropout %y, %seed {p = 0.1 : f64, offset = 0 : i64} : tensor<2x4x3x3xf32>, tensor<i64>
  %s = offload.reduce_sum %d : tensor<2x4x3x3xf32>
  return %s, %nrm, %nrv : tensor<f32>, tensor<4xf32>, tensor<4xf32>
}

// An embedding with padding_idx passes it to its backward (that row of the
// gradient stays zero); sin and cos save their input and differentiate to
// cos(x)·dy and -(dy·sin(x)).

// CHECK-LABEL: func.func @embedding_pad_sin_cos
// CHECK: offload.embedding %{{.*}}, %{{.*}} {padding_idx = 0 : i64}
// CHECK: offload.sin
// CHECK: offload.cos
// CHECK: offload.phase backward
// CHECK: %[[S:.*]] = offload.sin %{{.*}} : tensor<4x3xf32>
// CHECK: %[[DS:.*]] = offload.mul %{{.*}}, %[[S]]
// CHECK: offload.neg %[[DS]]
// CHECK: %[[C:.*]] = offload.cos %{{.*}} : tensor<4x3xf32>
// CHECK: offload.mul %{{.*}}, %[[C]]
// CHECK: offload.embedding_backward %{{.*}}, %{{.*}} {padding_idx = 0 : i64} : tensor<4x3xf32>, tensor<4xi64> -> tensor<10x3xf32>
func.func @embedding_pad_sin_cos(%w: tensor<10x3xf32> {offload.name = "emb.weight", offload.role = #offload.role<parameter>},
                                 %ids: tensor<4xi64> {offload.name = "ids", offload.role = #offload.role<input>})
    -> (tensor<f32> {offload.name = "loss", offload.role = #offload.role<loss>}) attributes {offload.step} {
  %e = offload.embedding %w, %ids {padding_idx = 0 : i64} : tensor<10x3xf32>, tensor<4xi64>
  %s = offload.sin %e : tensor<4x3xf32>
  %c = offload.cos %s : tensor<4x3xf32>
  %l = offload.reduce_sum %c : tensor<4x3xf32>
  return %l : tensor<f32>
}
