// RUN: offload-opt %s --offload-fuse-attention=report=- 2>%t.report | FileCheck %s
// RUN: FileCheck %s --check-prefix=REPORT < %t.report

// Spelled-out attention (TorchScript 1.13's models) becomes offload.attention
// where it is exactly that op; the rest stays as it is.

// Scale after the matmul (mul_scalar), k transposed through the matmul's flag.
// CHECK-LABEL: func.func @scaled_after
// CHECK-SAME: (%[[Q:[^:]*]]: {{.*}} %[[K:arg1]]: {{.*}} %[[V:arg2]]:
// CHECK-NEXT: offload.phase forward
// CHECK-NEXT: %[[O:.*]], %{{.*}} = offload.attention %[[Q]], %[[K]], %[[V]] {scale = 1.250000e-01 : f64} : tensor<2x4x8x16xf32>, tensor<2x4x6x16xf32>, tensor<2x4x6x32xf32>
// CHECK-NEXT: return %[[O]] : tensor<2x4x8x32xf32>
func.func @scaled_after(%q: tensor<2x4x8x16xf32> {offload.name = "q", offload.role = #offload.role<input>}, %k: tensor<2x4x6x16xf32> {offload.name = "k", offload.role = #offload.role<input>}, %v: tensor<2x4x6x32xf32> {offload.name = "v", offload.role = #offload.role<input>}) -> (tensor<2x4x8x32xf32> {offload.name = "r1", offload.role = #offload.role<output>}) attributes {offload.step} {
  offload.phase forward
  %s = offload.matmul %q, %k {transpose_b = true} : tensor<2x4x8x16xf32>, tensor<2x4x6x16xf32>
  %c = offload.mul_scalar %s {value = 0.125 : f64} : tensor<2x4x8x6xf32>
  %p = offload.softmax %c {dim = 3 : i64} : tensor<2x4x8x6xf32>
  %o = offload.matmul %p, %v : tensor<2x4x8x6xf32>, tensor<2x4x6x32xf32>
  return %o : tensor<2x4x8x32xf32>
}

// Scale on q (div by a scalar fill, as 1.13's MultiheadAttention), k
// through an explicit transpose, rank 3 [B*H, L, E] read as [1, B*H, L, E].
// CHECK-LABEL: func.func @scaled_q_rank3
// CHECK-NOT: offload.softmax
// CHECK: %[[Q4:.*]] = offload.reshape %{{.*}} : tensor<8x5x16xf32> -> tensor<1x8x5x16xf32>
// CHECK: %[[K4:.*]] = offload.reshape %{{.*}} : tensor<8x5x16xf32> -> tensor<1x8x5x16xf32>
// CHECK: %[[V4:.*]] = offload.reshape %{{.*}} : tensor<8x5x16xf32> -> tensor<1x8x5x16xf32>
// CHECK: %[[O:.*]], %{{.*}} = offload.attention %[[Q4]], %[[K4]], %[[V4]] {scale = 2.500000e-01 : f64}
// CHECK: %[[R:.*]] = offload.reshape %[[O]] : tensor<1x8x5x16xf32> -> tensor<8x5x16xf32>
// CHECK-NOT: offload.fill
// CHECK-NOT: offload.transpose
// CHECK: return %[[R]]
func.func @scaled_q_rank3(%q: tensor<8x5x16xf32> {offload.name = "q", offload.role = #offload.role<input>}, %k: tensor<8x5x16xf32> {offload.name = "k", offload.role = #offload.role<input>}, %v: tensor<8x5x16xf32> {offload.name = "v", offload.role = #offload.role<input>}) -> (tensor<8x5x16xf32> {offload.name = "r1", offload.role = #offload.role<output>}) attributes {offload.step} {
  offload.phase forward
  %four = offload.fill {value = 4.0 : f64} : tensor<f32>
  %qs = offload.div %q, %four : tensor<8x5x16xf32>, tensor<f32>
  %kt = offload.transpose %k {perm = array<i64: 0, 2, 1>} : tensor<8x5x16xf32>
  %s = offload.matmul %qs, %kt : tensor<8x5x16xf32>, tensor<8x16x5xf32>
  %p = offload.softmax %s {dim = 2 : i64} : tensor<8x5x5xf32>
  %o = offload.matmul %p, %v : tensor<8x5x5xf32>, tensor<8x5x16xf32>
  return %o : tensor<8x5x16xf32>
}

// A strictly upper-triangular constant masked with -inf is is_causal; the
// dropout over the probabilities carries its p, offset and seed over.
// CHECK-LABEL: func.func @causal_dropout
// CHECK-SAME: %[[SEED:[^:]*]]: tensor<i64>
// CHECK-NOT: offload.constant
// CHECK: offload.attention %{{.*}}, %{{.*}}, %{{.*}}, %[[SEED]] {dropout_p = 1.000000e-01 : f64, is_causal = true, offset = 96 : i64, scale = 2.500000e-01 : f64} : tensor<1x2x4x16xf32>, tensor<1x2x4x16xf32>, tensor<1x2x4x16xf32>, tensor<i64>
// CHECK-NOT: offload.dropout
func.func @causal_dropout(%q: tensor<1x2x4x16xf32> {offload.name = "q", offload.role = #offload.role<input>}, %k: tensor<1x2x4x16xf32> {offload.name = "k", offload.role = #offload.role<input>}, %v: tensor<1x2x4x16xf32> {offload.name = "v", offload.role = #offload.role<input>}, %seed: tensor<i64> {offload.name = "seed", offload.role = #offload.role<input>}) -> (tensor<1x2x4x16xf32> {offload.name = "r1", offload.role = #offload.role<output>}) attributes {offload.step} {
  offload.phase forward
  %s = offload.matmul %q, %k {transpose_b = true} : tensor<1x2x4x16xf32>, tensor<1x2x4x16xf32>
  %c = offload.mul_scalar %s {value = 0.25 : f64} : tensor<1x2x4x4xf32>
  %m = offload.constant dense<[[false, true, true, true], [false, false, true, true], [false, false, false, true], [false, false, false, false]]> : tensor<4x4xi1>
  %f = offload.masked_fill %c, %m {value = 0xFFF0000000000000 : f64} : tensor<1x2x4x4xf32>, tensor<4x4xi1>
  %p = offload.softmax %f {dim = 3 : i64} : tensor<1x2x4x4xf32>
  %d = offload.dropout %p, %seed {p = 0.1 : f64, offset = 96 : i64} : tensor<1x2x4x4xf32>, tensor<i64>
  %o = offload.matmul %d, %v : tensor<1x2x4x4xf32>, tensor<1x2x4x16xf32>
  return %o : tensor<1x2x4x16xf32>
}

// Another constant "masked" mask becomes the op's keep mask (not mask).
// CHECK-LABEL: func.func @keep_mask
// CHECK: %[[KEEP:.*]] = offload.constant dense<[true, false, true, true]> : tensor<4xi1>
// CHECK: offload.attention %{{.*}}, %{{.*}}, %{{.*}}, %[[KEEP]] {has_mask = true, scale = 1.000000e+00 : f64}
func.func @keep_mask(%q: tensor<1x2x4x16xf32> {offload.name = "q", offload.role = #offload.role<input>}, %k: tensor<1x2x4x16xf32> {offload.name = "k", offload.role = #offload.role<input>}, %v: tensor<1x2x4x16xf32> {offload.name = "v", offload.role = #offload.role<input>}) -> (tensor<1x2x4x16xf32> {offload.name = "r1", offload.role = #offload.role<output>}) attributes {offload.step} {
  offload.phase forward
  %s = offload.matmul %q, %k {transpose_b = true} : tensor<1x2x4x16xf32>, tensor<1x2x4x16xf32>
  %m = offload.constant dense<[false, true, false, false]> : tensor<4xi1>
  %f = offload.masked_fill %s, %m {value = 0xFFF0000000000000 : f64} : tensor<1x2x4x4xf32>, tensor<4xi1>
  %p = offload.softmax %f {dim = 3 : i64} : tensor<1x2x4x4xf32>
  %o = offload.matmul %p, %v : tensor<1x2x4x4xf32>, tensor<1x2x4x16xf32>
  return %o : tensor<1x2x4x16xf32>
}

// A constant float mask added to the scaled scores is the op's additive mask.
// CHECK-LABEL: func.func @additive_mask
// CHECK: %[[A:.*]] = offload.constant dense<{{.*}}> : tensor<4x4xf32>
// CHECK: offload.attention %{{.*}}, %{{.*}}, %{{.*}}, %[[A]] {has_mask = true, scale = 5.000000e-01 : f64}
// CHECK-NOT: offload.add
func.func @additive_mask(%q: tensor<1x2x4x16xf32> {offload.name = "q", offload.role = #offload.role<input>}, %k: tensor<1x2x4x16xf32> {offload.name = "k", offload.role = #offload.role<input>}, %v: tensor<1x2x4x16xf32> {offload.name = "v", offload.role = #offload.role<input>}) -> (tensor<1x2x4x16xf32> {offload.name = "r1", offload.role = #offload.role<output>}) attributes {offload.step} {
  offload.phase forward
  %s = offload.matmul %q, %k {transpose_b = true} : tensor<1x2x4x16xf32>, tensor<1x2x4x16xf32>
  %h = offload.fill {value = 0.5 : f64} : tensor<f32>
  %c = offload.mul %s, %h : tensor<1x2x4x4xf32>, tensor<f32>
  %a = offload.constant dense<[[0.0, -1.0, -2.0, 0xFF800000], [0.0, 0.0, -1.0, -2.0], [0.5, 0.0, 0.0, -1.0], [0.0, 0.0, 0.0, 0.0]]> : tensor<4x4xf32>
  %f = offload.add %c, %a : tensor<1x2x4x4xf32>, tensor<4x4xf32>
  %p = offload.softmax %f {dim = 3 : i64} : tensor<1x2x4x4xf32>
  %o = offload.matmul %p, %v : tensor<1x2x4x4xf32>, tensor<1x2x4x16xf32>
  return %o : tensor<1x2x4x16xf32>
}

// Refused: the probabilities have a second user (returned).
// CHECK-LABEL: func.func @second_user
// CHECK-NOT: offload.attention
// CHECK: offload.softmax
// CHECK: return
func.func @second_user(%q: tensor<1x2x4x16xf32> {offload.name = "q", offload.role = #offload.role<input>}, %k: tensor<1x2x4x16xf32> {offload.name = "k", offload.role = #offload.role<input>}, %v: tensor<1x2x4x16xf32> {offload.name = "v", offload.role = #offload.role<input>}) -> (tensor<1x2x4x16xf32> {offload.name = "r1", offload.role = #offload.role<output>}, tensor<1x2x4x4xf32> {offload.name = "r2", offload.role = #offload.role<output>}) attributes {offload.step} {
  offload.phase forward
  %s = offload.matmul %q, %k {transpose_b = true} : tensor<1x2x4x16xf32>, tensor<1x2x4x16xf32>
  %p = offload.softmax %s {dim = 3 : i64} : tensor<1x2x4x4xf32>
  %o = offload.matmul %p, %v : tensor<1x2x4x4xf32>, tensor<1x2x4x16xf32>
  return %o, %p : tensor<1x2x4x16xf32>, tensor<1x2x4x4xf32>
}

// Refused: the scores before the scale have a second user.
// CHECK-LABEL: func.func @scores_second_user
// CHECK-NOT: offload.attention
// CHECK: return
func.func @scores_second_user(%q: tensor<1x2x4x16xf32> {offload.name = "q", offload.role = #offload.role<input>}, %k: tensor<1x2x4x16xf32> {offload.name = "k", offload.role = #offload.role<input>}, %v: tensor<1x2x4x16xf32> {offload.name = "v", offload.role = #offload.role<input>}) -> (tensor<1x2x4x16xf32> {offload.name = "r1", offload.role = #offload.role<output>}, tensor<1x2x4x4xf32> {offload.name = "r2", offload.role = #offload.role<output>}) attributes {offload.step} {
  offload.phase forward
  %s = offload.matmul %q, %k {transpose_b = true} : tensor<1x2x4x16xf32>, tensor<1x2x4x16xf32>
  %c = offload.mul_scalar %s {value = 0.25 : f64} : tensor<1x2x4x4xf32>
  %p = offload.softmax %c {dim = 3 : i64} : tensor<1x2x4x4xf32>
  %o = offload.matmul %p, %v : tensor<1x2x4x4xf32>, tensor<1x2x4x16xf32>
  return %o, %s : tensor<1x2x4x16xf32>, tensor<1x2x4x4xf32>
}

// Refused: a mask that is not a constant (a step input).
// CHECK-LABEL: func.func @mask_not_constant
// CHECK-NOT: offload.attention
// CHECK: offload.masked_fill
// CHECK: return
func.func @mask_not_constant(%q: tensor<1x2x4x16xf32> {offload.name = "q", offload.role = #offload.role<input>}, %k: tensor<1x2x4x16xf32> {offload.name = "k", offload.role = #offload.role<input>}, %v: tensor<1x2x4x16xf32> {offload.name = "v", offload.role = #offload.role<input>}, %m: tensor<4x4xi1> {offload.name = "m", offload.role = #offload.role<input>}) -> (tensor<1x2x4x16xf32> {offload.name = "r1", offload.role = #offload.role<output>}) attributes {offload.step} {
  offload.phase forward
  %s = offload.matmul %q, %k {transpose_b = true} : tensor<1x2x4x16xf32>, tensor<1x2x4x16xf32>
  %f = offload.masked_fill %s, %m {value = 0xFFF0000000000000 : f64} : tensor<1x2x4x4xf32>, tensor<4x4xi1>
  %p = offload.softmax %f {dim = 3 : i64} : tensor<1x2x4x4xf32>
  %o = offload.matmul %p, %v : tensor<1x2x4x4xf32>, tensor<1x2x4x16xf32>
  return %o : tensor<1x2x4x16xf32>
}

// Refused: softmax over another dim than the keys'.
// CHECK-LABEL: func.func @softmax_other_dim
// CHECK-NOT: offload.attention
// CHECK: offload.softmax %{{.*}} {dim = 2 : i64}
// CHECK: return
func.func @softmax_other_dim(%q: tensor<1x2x4x16xf32> {offload.name = "q", offload.role = #offload.role<input>}, %k: tensor<1x2x4x16xf32> {offload.name = "k", offload.role = #offload.role<input>}, %v: tensor<1x2x4x16xf32> {offload.name = "v", offload.role = #offload.role<input>}) -> (tensor<1x2x4x16xf32> {offload.name = "r1", offload.role = #offload.role<output>}) attributes {offload.step} {
  offload.phase forward
  %s = offload.matmul %q, %k {transpose_b = true} : tensor<1x2x4x16xf32>, tensor<1x2x4x16xf32>
  %p = offload.softmax %s {dim = 2 : i64} : tensor<1x2x4x4xf32>
  %o = offload.matmul %p, %v : tensor<1x2x4x4xf32>, tensor<1x2x4x16xf32>
  return %o : tensor<1x2x4x16xf32>
}

// Refused: a mask whose row masks every key (NaN spelled out, 0 fused).
// CHECK-LABEL: func.func @row_all_masked
// CHECK-NOT: offload.attention
// CHECK: return
func.func @row_all_masked(%q: tensor<1x2x2x16xf32> {offload.name = "q", offload.role = #offload.role<input>}, %k: tensor<1x2x2x16xf32> {offload.name = "k", offload.role = #offload.role<input>}, %v: tensor<1x2x2x16xf32> {offload.name = "v", offload.role = #offload.role<input>}) -> (tensor<1x2x2x16xf32> {offload.name = "r1", offload.role = #offload.role<output>}) attributes {offload.step} {
  offload.phase forward
  %s = offload.matmul %q, %k {transpose_b = true} : tensor<1x2x2x16xf32>, tensor<1x2x2x16xf32>
  %m = offload.constant dense<[[false, true], [true, true]]> : tensor<2x2xi1>
  %f = offload.masked_fill %s, %m {value = 0xFFF0000000000000 : f64} : tensor<1x2x2x2xf32>, tensor<2x2xi1>
  %p = offload.softmax %f {dim = 3 : i64} : tensor<1x2x2x2xf32>
  %o = offload.matmul %p, %v : tensor<1x2x2x2xf32>, tensor<1x2x2x16xf32>
  return %o : tensor<1x2x2x16xf32>
}

// REPORT: fused: {{.*}}: scale 1.250000e-01
// REPORT: fused: {{.*}}: scale 2.500000e-01, [B, L, E] as [1, B, L, E]
// REPORT: fused: {{.*}}: scale 2.500000e-01, causal, dropout
// REPORT: fused: {{.*}}: scale 1.000000e+00, keep mask (not the masked_fill's)
// REPORT: fused: {{.*}}: scale 5.000000e-01, additive mask
// REPORT: refused: {{.*}}: the probabilities have another user
// REPORT: refused: {{.*}}: the unscaled scores have another user
// REPORT: refused: {{.*}}: the mask is not a constant
// REPORT: refused: {{.*}}: softmax over dim 2, not the last
// REPORT: refused: {{.*}}: the mask removes every key of some query
// REPORT: offload-fuse-attention: 5 attention(s) fused
