// RUN: offload-opt %s --canonicalize --split-input-file | FileCheck %s

// CHECK-LABEL: func.func @identity_folds
// CHECK-SAME: (%[[X:.*]]: tensor<4x8xf32>, %[[S:.*]]: tensor<i64>)
func.func @identity_folds(%x: tensor<4x8xf32>, %s: tensor<i64>)
    -> (tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>) {
  %a = offload.add_scalar %x {value = 0.0 : f64} : tensor<4x8xf32>
  %m = offload.mul_scalar %x {value = 1.0 : f64} : tensor<4x8xf32>
  %t = offload.transpose %x {perm = array<i64: 0, 1>} : tensor<4x8xf32>
  %r = offload.reshape %x : tensor<4x8xf32> -> tensor<4x8xf32>
  %b = offload.broadcast_to %x : tensor<4x8xf32> -> tensor<4x8xf32>
  %d = offload.dropout %x, %s {p = 0.0 : f64, offset = 0 : i64} : tensor<4x8xf32>, tensor<i64>
  // CHECK: return %[[X]], %[[X]], %[[X]], %[[X]], %[[X]], %[[X]]
  return %a, %m, %t, %r, %b, %d : tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>
}

// -----

// CHECK-LABEL: func.func @no_fold_when_not_identity
func.func @no_fold_when_not_identity(%x: tensor<4x8xf32>, %s: tensor<i64>) -> (tensor<4x8xf32>, tensor<8x4xf32>, tensor<4x8xf32>) {
  // CHECK: offload.mul_scalar %{{.*}} {value = 2.000000e+00 : f64}
  %m = offload.mul_scalar %x {value = 2.0 : f64} : tensor<4x8xf32>
  // CHECK: offload.transpose
  %t = offload.transpose %x {perm = array<i64: 1, 0>} : tensor<4x8xf32>
  // CHECK: offload.dropout
  %d = offload.dropout %x, %s {p = 0.5 : f64, offset = 0 : i64} : tensor<4x8xf32>, tensor<i64>
  return %m, %t, %d : tensor<4x8xf32>, tensor<8x4xf32>, tensor<4x8xf32>
}

// -----

// CHECK-LABEL: func.func @reshape_chain
func.func @reshape_chain(%x: tensor<4x8xf32>) -> tensor<2x16xf32> {
  // CHECK-NEXT: %[[R:.*]] = offload.reshape %{{.*}} : tensor<4x8xf32> -> tensor<2x16xf32>
  // CHECK-NEXT: return %[[R]]
  %a = offload.reshape %x : tensor<4x8xf32> -> tensor<32xf32>
  %b = offload.reshape %a : tensor<32xf32> -> tensor<2x16xf32>
  return %b : tensor<2x16xf32>
}

// -----

// A recompute region that recomputes nothing forwards its input; an empty
// wait disappears; a fill is not hoisted (not ConstantLike) and dead pure
// ops go away, while copies (memory effects) stay.
// CHECK-LABEL: func.func @structure
// CHECK-SAME: (%[[X:.*]]: tensor<4xf32>)
func.func @structure(%x: tensor<4xf32>) -> tensor<4xf32> {
  // CHECK-NOT: offload.recompute
  // CHECK-NOT: offload.wait
  // CHECK: offload.relu %[[X]]
  // CHECK: offload.fill
  // CHECK: offload.to_host
  %r = offload.recompute (%x) : (tensor<4xf32>) -> tensor<4xf32> {
  ^bb0(%a: tensor<4xf32>):
    offload.yield %a : tensor<4xf32>
  }
  offload.wait
  %dead = offload.exp %x : tensor<4xf32>
  %y = offload.relu %r : tensor<4xf32>
  %one = offload.fill {value = 1.0 : f64} : tensor<4xf32>
  %z = offload.add %y, %one : tensor<4xf32>, tensor<4xf32>
  %h = offload.to_host %z : tensor<4xf32>
  return %z : tensor<4xf32>
}
