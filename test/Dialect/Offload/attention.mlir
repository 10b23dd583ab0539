// RUN: offload-opt %s | offload-opt | FileCheck %s --check-prefix=ROUND
// RUN: offload-opt %s -mlir-print-op-generic | offload-opt | FileCheck %s --check-prefix=ROUND
// RUN: offload-opt %s --offload-autodiff=optimizer=none | FileCheck %s
// RUN: offload-opt %s --offload-autodiff=optimizer=none --offload-saved-value-report -o /dev/null 2>&1 | FileCheck %s --check-prefix=SAVED
// RUN: offload-opt %s --offload-autodiff="optimizer=none precision=bf16-mixed" | FileCheck %s --check-prefix=BF16
// RUN: offload-opt %s --offload-autodiff=optimizer=none --offload-cost-report="report=-" -o /dev/null 2>&1 | FileCheck %s --check-prefix=COST
// The host kernel's working set per task (OffloadCost.cpp): forward
// 8*(B*E + S*E + S*Ev + B*S + B*Ev) with B = min(64, L) = 16, S = 16,
// E = Ev = 8: 6144 bytes; backward 8*(2*(S*E + S*Ev) + 2*B*E + B*Ev + 2*B*S + B)
// = 11392 bytes.
// COST: offload.attention {{.*}} scratch=6144
// COST: offload.attention_backward {{.*}} scratch=11392
// The token layout (@decoder_tokens) has the same FLOPs and working set.
// COST: offload.attention {{.*}} scratch=6144
// COST: offload.attention_backward {{.*}} scratch=11392

// offload.attention: one forward op, one backward op. Its saved values are
// q, k, v, the output and the row log-sum-exp (N·Hq·L values), never the
// N·Hq·L·S probabilities; grouped-query attention saves the un-repeated
// key and value heads. A float mask gets a gradient only where it depends
// on a parameter (a learned bias): elsewhere the ops computing it are dead.

!x = tensor<2x16x8xf32>
!q = tensor<2x4x16x8xf32>
!kv = tensor<2x2x16x8xf32>

// ROUND-LABEL: func.func @decoder
// ROUND: %{{.*}}, %{{.*}} = offload.attention %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} {has_mask = true, is_causal = true, scale = 0.3535{{[0-9]*}} : f64} : tensor<2x4x16x8xf32>, tensor<2x2x16x8xf32>, tensor<2x2x16x8xf32>, tensor<2x1x1x16xi1>
// CHECK-LABEL: func.func @decoder
// CHECK: offload.phase forward
// CHECK: %[[Q:.*]] = offload.transpose
// CHECK-NEXT: %[[SQ:.*]] = offload.save %[[Q]]
// CHECK: %[[O:.*]], %[[LSE:.*]] = offload.attention %[[Q]], %[[K:[^,]*]], %[[V:[^,]*]], %arg4
// CHECK-DAG: offload.save %[[O]]
// CHECK-DAG: offload.save %[[LSE]]
// CHECK: offload.phase backward
// CHECK: %[[DQ:.*]], %[[DK:.*]], %[[DV:.*]] = offload.attention_backward %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %arg4 {has_mask = true, is_causal = true, {{.*}}} : tensor<2x4x16x8xf32>, tensor<2x4x16x8xf32>, tensor<2x2x16x8xf32>, tensor<2x2x16x8xf32>, tensor<2x4x16xf32>, tensor<2x1x1x16xi1>
// CHECK-NOT: offload.softmax
// CHECK-NOT: offload.exp
// CHECK: return
func.func @decoder(%wq: tensor<32x8xf32> {offload.name = "wq", offload.role = #offload.role<parameter>},
                   %wk: tensor<16x8xf32> {offload.name = "wk", offload.role = #offload.role<parameter>},
                   %wv: tensor<16x8xf32> {offload.name = "wv", offload.role = #offload.role<parameter>},
                   %x: !x {offload.name = "x", offload.role = #offload.role<input>},
                   %m: tensor<2x1x1x16xi1> {offload.name = "keep", offload.role = #offload.role<input>})
    -> (tensor<f32> {offload.name = "loss", offload.role = #offload.role<loss>}) attributes {offload.step} {
  offload.phase forward
  %q0 = offload.linear %x, %wq : !x, tensor<32x8xf32>
  %q1 = offload.reshape %q0 : tensor<2x16x32xf32> -> tensor<2x16x4x8xf32>
  %q = offload.transpose %q1 {perm = array<i64: 0, 2, 1, 3>} : tensor<2x16x4x8xf32>
  %k0 = offload.linear %x, %wk : !x, tensor<16x8xf32>
  %k1 = offload.reshape %k0 : tensor<2x16x16xf32> -> tensor<2x16x2x8xf32>
  %k = offload.transpose %k1 {perm = array<i64: 0, 2, 1, 3>} : tensor<2x16x2x8xf32>
  %v0 = offload.linear %x, %wv : !x, tensor<16x8xf32>
  %v1 = offload.reshape %v0 : tensor<2x16x16xf32> -> tensor<2x16x2x8xf32>
  %v = offload.transpose %v1 {perm = array<i64: 0, 2, 1, 3>} : tensor<2x16x2x8xf32>
  %o, %lse = offload.attention %q, %k, %v, %m {scale = 0.35355339059327379 : f64, is_causal = true, has_mask = true}
      : !q, !kv, !kv, tensor<2x1x1x16xi1>
  %l = offload.reduce_sum %o : !q
  return %l : tensor<f32>
}

// SAVED: saved values of @decoder
// SAVED: 4096 offload.transpose attention_backward
// SAVED: 2048 offload.transpose attention_backward
// SAVED: 2048 offload.transpose attention_backward
// SAVED-DAG: 512 offload.attention attention_backward
// SAVED-DAG: 4096 offload.attention attention_backward
// SAVED: total: 12800 bytes in 5 saved values

// A float mask that is an input: no gradient, so none of the ops that
// would compute it survives.
// ROUND-LABEL: func.func @input_mask
// ROUND: offload.attention %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} {dropout_p = 1.000000e-01 : f64, has_mask = true, offset = 64 : i64, scale = 2.500000e-01 : f64}
// CHECK-LABEL: func.func @input_mask
// CHECK: offload.attention_backward {{.*}} {dropout_p = 1.000000e-01 : f64, has_mask = true, {{.*}}offset = 64 : i64, scale = 2.500000e-01 : f64}
// CHECK-NOT: offload.exp
// CHECK: return
func.func @input_mask(%q: !q {offload.name = "q", offload.role = #offload.role<parameter>},
                      %k: !kv {offload.name = "k", offload.role = #offload.role<parameter>},
                      %v: !kv {offload.name = "v", offload.role = #offload.role<parameter>},
                      %m: tensor<16x16xf32> {offload.name = "bias", offload.role = #offload.role<input>},
                      %seed: tensor<i64> {offload.name = "rng_seed", offload.role = #offload.role<input>})
    -> (tensor<f32> {offload.name = "loss", offload.role = #offload.role<loss>}) attributes {offload.step} {
  offload.phase forward
  %o, %lse = offload.attention %q, %k, %v, %m, %seed {scale = 0.25 : f64, has_mask = true, dropout_p = 0.1 : f64, offset = 64 : i64}
      : !q, !kv, !kv, tensor<16x16xf32>, tensor<i64>
  %l = offload.reduce_sum %o : !q
  return %l : tensor<f32>
}

// A learned bias (a parameter passed as the float mask): its gradient
// dS = P (dP - D), recomputed from q, k, v, the output and lse, summed over
// the batch it broadcasts along.
// CHECK-LABEL: func.func @learned_bias
// CHECK-SAME: tensor<4x16x16xf32> {offload.name = "grad:bias", offload.role = #offload.role<gradient>}
// CHECK: offload.attention_backward
// CHECK: offload.matmul %{{.*}}, %{{.*}} {transpose_b = true} : tensor<2x2x32x8xf32>, tensor<2x2x16x8xf32>
// CHECK: offload.hardtanh
// CHECK: offload.exp
// CHECK: offload.reduce_sum %{{.*}} {dims = array<i64: 0>} : tensor<2x4x16x16xf32>
// Under bf16-mixed (T5's learned relative-position bias, issue 29) the
// attention is bf16 and its lse f32: the probabilities are recomputed in f32
// from widened operands, and the mask's gradient is summed in f32 and rounded
// to the bf16 mask's type once, before its cast back to the f32 bias.
// BF16-LABEL: func.func @learned_bias
// BF16: offload.attention_backward
// BF16: offload.copy %{{.*}} : tensor<2x4x16x8xbf16> -> tensor<2x4x16x8xf32>
// BF16: offload.matmul %{{.*}}, %{{.*}} {transpose_b = true} : tensor<2x2x32x8xf32>, tensor<2x2x16x8xf32>
// BF16: offload.reshape %{{.*}} : tensor<2x4x16xf32> -> tensor<2x4x16x1xf32>
// BF16: %[[DB:.*]] = offload.reduce_sum %{{.*}} {dims = array<i64: 0>} : tensor<2x4x16x16xf32>
// BF16-NEXT: %[[DBL:.*]] = offload.copy %[[DB]] {offload.activation_grad} : tensor<4x16x16xf32> -> tensor<4x16x16xbf16>
// BF16-NEXT: offload.copy %[[DBL]] : tensor<4x16x16xbf16> -> tensor<4x16x16xf32>
func.func @learned_bias(%q: !q {offload.name = "q", offload.role = #offload.role<parameter>},
                        %k: !kv {offload.name = "k", offload.role = #offload.role<parameter>},
                        %v: !kv {offload.name = "v", offload.role = #offload.role<parameter>},
                        %b: tensor<4x16x16xf32> {offload.name = "bias", offload.role = #offload.role<parameter>})
    -> (tensor<f32> {offload.name = "loss", offload.role = #offload.role<loss>}) attributes {offload.step} {
  offload.phase forward
  %o, %lse = offload.attention %q, %k, %v, %b {scale = 0.25 : f64, has_mask = true}
      : !q, !kv, !kv, tensor<4x16x16xf32>
  %l = offload.reduce_sum %o : !q
  return %l : tensor<f32>
}

// The token layout (layout blhd: q, k, v, out [N, L, H, E], lse [N, Hq, L]),
// as the importer makes @decoder's attention: the reshapes of the
// projections go in (views: the saved q, k and v are the projections'
// buffers), the backward takes the layout and returns the gradients in it,
// and the output gradient reaches the projections through reshapes only.
// ROUND-LABEL: func.func @decoder_tokens
// ROUND: offload.attention %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} layout blhd {has_mask = true, is_causal = true, scale = 0.3535{{[0-9]*}} : f64} : tensor<2x16x4x8xf32>, tensor<2x16x2x8xf32>, tensor<2x16x2x8xf32>, tensor<2x1x1x16xi1>
// CHECK-LABEL: func.func @decoder_tokens
// CHECK: offload.phase forward
// CHECK-NOT: offload.transpose
// CHECK: %[[O:.*]], %[[LSE:.*]] = offload.attention {{.*}} layout blhd
// CHECK: offload.phase backward
// CHECK-NOT: offload.transpose
// CHECK: %[[DQ:.*]], %[[DK:.*]], %[[DV:.*]] = offload.attention_backward %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %arg4 layout blhd {has_mask = true, is_causal = true, {{.*}}} : tensor<2x16x4x8xf32>, tensor<2x16x4x8xf32>, tensor<2x16x2x8xf32>, tensor<2x16x2x8xf32>, tensor<2x4x16xf32>, tensor<2x1x1x16xi1>
// CHECK-DAG: offload.reshape %[[DQ]] {{.*}}: tensor<2x16x4x8xf32> -> tensor<2x16x32xf32>
// CHECK-DAG: offload.reshape %[[DK]] {{.*}}: tensor<2x16x2x8xf32> -> tensor<2x16x16xf32>
// CHECK-DAG: offload.reshape %[[DV]] {{.*}}: tensor<2x16x2x8xf32> -> tensor<2x16x16xf32>
// CHECK-NOT: offload.transpose
// CHECK: return
func.func @decoder_tokens(%wq: tensor<32x8xf32> {offload.name = "wq", offload.role = #offload.role<parameter>},
                          %wk: tensor<16x8xf32> {offload.name = "wk", offload.role = #offload.role<parameter>},
                          %wv: tensor<16x8xf32> {offload.name = "wv", offload.role = #offload.role<parameter>},
                          %x: !x {offload.name = "x", offload.role = #offload.role<input>},
                          %m: tensor<2x1x1x16xi1> {offload.name = "keep", offload.role = #offload.role<input>})
    -> (tensor<f32> {offload.name = "loss", offload.role = #offload.role<loss>}) attributes {offload.step} {
  offload.phase forward
  %q0 = offload.linear %x, %wq : !x, tensor<32x8xf32>
  %q = offload.reshape %q0 : tensor<2x16x32xf32> -> tensor<2x16x4x8xf32>
  %k0 = offload.linear %x, %wk : !x, tensor<16x8xf32>
  %k = offload.reshape %k0 : tensor<2x16x16xf32> -> tensor<2x16x2x8xf32>
  %v0 = offload.linear %x, %wv : !x, tensor<16x8xf32>
  %v = offload.reshape %v0 : tensor<2x16x16xf32> -> tensor<2x16x2x8xf32>
  %o, %lse = offload.attention %q, %k, %v, %m layout blhd {scale = 0.35355339059327379 : f64, is_causal = true, has_mask = true}
      : tensor<2x16x4x8xf32>, tensor<2x16x2x8xf32>, tensor<2x16x2x8xf32>, tensor<2x1x1x16xi1>
  %y = offload.reshape %o : tensor<2x16x4x8xf32> -> tensor<2x16x32xf32>
  %l = offload.reduce_sum %y : tensor<2x16x32xf32>
  return %l : tensor<f32>
}

// SAVED: saved values of @decoder_tokens
// SAVED-DAG: 4096 offload.reshape attention_backward
// SAVED-DAG: 2048 offload.reshape attention_backward
// SAVED-DAG: 2048 offload.reshape attention_backward
// SAVED-DAG: 512 offload.attention attention_backward
// SAVED-DAG: 4096 offload.attention attention_backward
// SAVED: total: 12800 bytes in 5 saved values

// A learned bias in the token layout: its gradient is composed in the head
// layout, from q, k, v, the output and its gradient transposed to it.
// CHECK-LABEL: func.func @learned_bias_tokens
// CHECK-SAME: tensor<4x16x16xf32> {offload.name = "grad:bias", offload.role = #offload.role<gradient>}
// CHECK: offload.attention_backward {{.*}} layout blhd
// CHECK: offload.transpose %{{.*}} {perm = array<i64: 0, 2, 1, 3>} : tensor<2x16x4x8xf32>
// CHECK: offload.matmul %{{.*}}, %{{.*}} {transpose_b = true} : tensor<2x2x32x8xf32>, tensor<2x2x16x8xf32>
// CHECK: offload.exp
// CHECK: offload.reduce_sum %{{.*}} {dims = array<i64: 0>} : tensor<2x4x16x16xf32>
func.func @learned_bias_tokens(%q: tensor<2x16x4x8xf32> {offload.name = "q", offload.role = #offload.role<parameter>},
                               %k: tensor<2x16x2x8xf32> {offload.name = "k", offload.role = #offload.role<parameter>},
                               %v: tensor<2x16x2x8xf32> {offload.name = "v", offload.role = #offload.role<parameter>},
                               %b: tensor<4x16x16xf32> {offload.name = "bias", offload.role = #offload.role<parameter>})
    -> (tensor<f32> {offload.name = "loss", offload.role = #offload.role<loss>}) attributes {offload.step} {
  offload.phase forward
  %o, %lse = offload.attention %q, %k, %v, %b layout blhd {scale = 0.25 : f64, has_mask = true}
      : tensor<2x16x4x8xf32>, tensor<2x16x2x8xf32>, tensor<2x16x2x8xf32>, tensor<4x16x16xf32>
  %l = offload.reduce_sum %o : tensor<2x16x4x8xf32>
  return %l : tensor<f32>
}
