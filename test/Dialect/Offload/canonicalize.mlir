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

// -----

// A transpose of the last two dims feeding a matmul folds into its flag (an
// already transposed operand flips back); other permutations stay.
// CHECK-LABEL: func.func @matmul_transpose_flags
// CHECK-SAME: (%[[A:.*]]: tensor<2x4x3xf32>, %[[B:.*]]: tensor<2x5x4xf32>, %[[C:.*]]: tensor<3x4xf32>, %[[D:.*]]: tensor<4x2x3xf32>)
func.func @matmul_transpose_flags(%a: tensor<2x4x3xf32>, %b: tensor<2x5x4xf32>, %c: tensor<3x4xf32>, %d: tensor<4x2x3xf32>)
    -> (tensor<2x3x5xf32>, tensor<3x3xf32>, tensor<2x4x4xf32>) {
  %ta = offload.transpose %a {perm = array<i64: 0, 2, 1>} : tensor<2x4x3xf32>
  %tb = offload.transpose %b {perm = array<i64: 0, 2, 1>} : tensor<2x5x4xf32>
  // CHECK: %[[M1:.*]] = offload.matmul %[[A]], %[[B]] {transpose_a = true, transpose_b = true}
  %m1 = offload.matmul %ta, %tb : tensor<2x3x4xf32>, tensor<2x4x5xf32>
  %tc = offload.transpose %c {perm = array<i64: 1, 0>} : tensor<3x4xf32>
  // CHECK: %[[M2:.*]] = offload.matmul %[[C]], %[[C]] {transpose_b = true} : tensor<3x4xf32>, tensor<3x4xf32>
  %m2 = offload.matmul %c, %tc : tensor<3x4xf32>, tensor<4x3xf32>
  // The batch dimension moves: not a last-two swap.
  // CHECK: %[[TD:.*]] = offload.transpose %[[D]] {perm = array<i64: 1, 0, 2>}
  // CHECK: %[[M3:.*]] = offload.matmul %[[TD]], %[[TD]] {transpose_b = true}
  %td = offload.transpose %d {perm = array<i64: 1, 0, 2>} : tensor<4x2x3xf32>
  %m3 = offload.matmul %td, %td {transpose_b = true} : tensor<2x4x3xf32>, tensor<2x4x3xf32>
  // CHECK: return %[[M1]], %[[M2]], %[[M3]]
  return %m1, %m2, %m3 : tensor<2x3x5xf32>, tensor<3x3xf32>, tensor<2x4x4xf32>
}

// -----

// A flag already set flips back to the default (left out).
// CHECK-LABEL: func.func @matmul_transpose_flip_back
// CHECK-SAME: (%[[A:.*]]: tensor<3x4xf32>, %[[B:.*]]: tensor<4x5xf32>)
func.func @matmul_transpose_flip_back(%a: tensor<3x4xf32>, %b: tensor<4x5xf32>) -> tensor<3x5xf32> {
  %ta = offload.transpose %a {perm = array<i64: 1, 0>} : tensor<3x4xf32>
  // CHECK: offload.matmul %[[A]], %[[B]] : tensor<3x4xf32>, tensor<4x5xf32>
  %m = offload.matmul %ta, %b {transpose_a = true} : tensor<4x3xf32>, tensor<4x5xf32>
  return %m : tensor<3x5xf32>
}
