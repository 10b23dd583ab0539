// RUN: offload-opt %s --offload-fuse-attention=report=- 2>%t.report | FileCheck %s
// RUN: FileCheck %s --check-prefix=REPORT < %t.report
// RUN: offload-opt %s --offload-fuse-attention=token-layout=false | FileCheck %s --check-prefix=HEADS
// RUN: offload-opt %s --offload-fuse-attention | offload-opt | FileCheck %s

// The transposes that HF and nanoGPT code writes around attention
// (q.view(B, T, H, E).transpose(1, 2) for q, k and v; y.transpose(1, 2)
// .contiguous().view(B, T, C)) fold into the token-layout attention
// (layout blhd) on the untransposed views: no transpose copy is left, and
// the output is what the view to [B, T, C] reads (foldAttentionTokenLayout,
// run by --offload-fuse-attention unless token-layout=false, and by the
// importer). Exact: the same values; the host kernels give the same bits
// (KernelsAttentionTest, TokenLayoutIsBitIdenticalToHeadLayout).

// nanoGPT's block spelled out: fused, then put in the token layout.
// CHECK-LABEL: func.func @nanogpt
// CHECK-SAME: (%[[X:[^:]*]]: tensor<2x8x32xf32>
// CHECK-NOT: offload.transpose
// CHECK-NOT: offload.softmax
// CHECK: %[[Q:.*]] = offload.reshape %{{.*}} : tensor<2x8x32xf32> -> tensor<2x8x4x8xf32>
// CHECK: %[[K:.*]] = offload.reshape %{{.*}} : tensor<2x8x32xf32> -> tensor<2x8x4x8xf32>
// CHECK: %[[V:.*]] = offload.reshape %{{.*}} : tensor<2x8x32xf32> -> tensor<2x8x4x8xf32>
// CHECK: %[[O:.*]], %{{.*}} = offload.attention %[[Q]], %[[K]], %[[V]] layout blhd {is_causal = true, scale = 0.35{{[0-9]*}} : f64} : tensor<2x8x4x8xf32>, tensor<2x8x4x8xf32>, tensor<2x8x4x8xf32>
// CHECK-NEXT: %[[Y:.*]] = offload.reshape %[[O]] : tensor<2x8x4x8xf32> -> tensor<2x8x32xf32>
// CHECK-NOT: offload.transpose
// CHECK: return %[[Y]]
// HEADS-LABEL: func.func @nanogpt
// HEADS: %[[O:.*]], %{{.*}} = offload.attention %{{.*}}, %{{.*}}, %{{.*}} {is_causal = true, scale = 0.35{{[0-9]*}} : f64} : tensor<2x4x8x8xf32>, tensor<2x4x8x8xf32>, tensor<2x4x8x8xf32>
// HEADS-NEXT: offload.transpose %[[O]] {perm = array<i64: 0, 2, 1, 3>}
func.func @nanogpt(%x: tensor<2x8x32xf32> {offload.name = "x", offload.role = #offload.role<input>}, %w: tensor<96x32xf32> {offload.name = "w", offload.role = #offload.role<parameter>}) -> (tensor<2x8x32xf32> {offload.name = "y", offload.role = #offload.role<output>}) attributes {offload.step} {
  offload.phase forward
  %qkv = offload.linear %x, %w : tensor<2x8x32xf32>, tensor<96x32xf32>
  %q0 = offload.slice %qkv {dim = 2 : i64, start = 0 : i64, end = 32 : i64} : tensor<2x8x96xf32>
  %k0 = offload.slice %qkv {dim = 2 : i64, start = 32 : i64, end = 64 : i64} : tensor<2x8x96xf32>
  %v0 = offload.slice %qkv {dim = 2 : i64, start = 64 : i64, end = 96 : i64} : tensor<2x8x96xf32>
  %q1 = offload.reshape %q0 : tensor<2x8x32xf32> -> tensor<2x8x4x8xf32>
  %q = offload.transpose %q1 {perm = array<i64: 0, 2, 1, 3>} : tensor<2x8x4x8xf32>
  %k1 = offload.reshape %k0 : tensor<2x8x32xf32> -> tensor<2x8x4x8xf32>
  %k = offload.transpose %k1 {perm = array<i64: 0, 2, 1, 3>} : tensor<2x8x4x8xf32>
  %v1 = offload.reshape %v0 : tensor<2x8x32xf32> -> tensor<2x8x4x8xf32>
  %v = offload.transpose %v1 {perm = array<i64: 0, 2, 1, 3>} : tensor<2x8x4x8xf32>
  %kt = offload.transpose %k {perm = array<i64: 0, 1, 3, 2>} : tensor<2x4x8x8xf32>
  %s = offload.matmul %q, %kt : tensor<2x4x8x8xf32>, tensor<2x4x8x8xf32>
  %c = offload.mul_scalar %s {value = 0.35355339059327379 : f64} : tensor<2x4x8x8xf32>
  %m = offload.constant dense<[[false, true, true, true, true, true, true, true], [false, false, true, true, true, true, true, true], [false, false, false, true, true, true, true, true], [false, false, false, false, true, true, true, true], [false, false, false, false, false, true, true, true], [false, false, false, false, false, false, true, true], [false, false, false, false, false, false, false, true], [false, false, false, false, false, false, false, false]]> : tensor<8x8xi1>
  %f = offload.masked_fill %c, %m {value = 0xFFF0000000000000 : f64} : tensor<2x4x8x8xf32>, tensor<8x8xi1>
  %p = offload.softmax %f {dim = 3 : i64} : tensor<2x4x8x8xf32>
  %o = offload.matmul %p, %v : tensor<2x4x8x8xf32>, tensor<2x4x8x8xf32>
  %yt = offload.transpose %o {perm = array<i64: 0, 2, 1, 3>} : tensor<2x4x8x8xf32>
  %y = offload.reshape %yt : tensor<2x8x4x8xf32> -> tensor<2x8x32xf32>
  return %y : tensor<2x8x32xf32>
}

// An attention already there (scaled_dot_product_attention), grouped-query
// with a mask and dropout, key and value one transposed value, the output
// read through two transposes: the extras and attributes carry over, lse's
// reader reads the new lse, both transposes become the new output.
// CHECK-LABEL: func.func @sdpa_gqa
// CHECK-SAME: (%[[Q:[^:]*]]: tensor<2x8x4x16xf32> {{.*}} %[[KV:[^:]*]]: tensor<2x6x2x16xf32> {{.*}} %[[M:[^:]*]]: tensor<8x6xi1> {{.*}} %[[SEED:[^:]*]]: tensor<i64>
// CHECK-NOT: offload.transpose
// CHECK: %[[O:.*]], %[[LSE:.*]] = offload.attention %[[Q]], %[[KV]], %[[KV]], %[[M]], %[[SEED]] layout blhd {dropout_p = 1.000000e-01 : f64, has_mask = true, offset = 5 : i64, scale = 2.500000e-01 : f64} : tensor<2x8x4x16xf32>, tensor<2x6x2x16xf32>, tensor<2x6x2x16xf32>, tensor<8x6xi1>, tensor<i64>
// CHECK-NOT: offload.transpose
// CHECK: offload.add %[[O]], %[[O]] : tensor<2x8x4x16xf32>, tensor<2x8x4x16xf32>
// CHECK: offload.reduce_sum %[[LSE]]
func.func @sdpa_gqa(%q0: tensor<2x8x4x16xf32> {offload.name = "q", offload.role = #offload.role<input>}, %kv0: tensor<2x6x2x16xf32> {offload.name = "kv", offload.role = #offload.role<input>}, %m: tensor<8x6xi1> {offload.name = "m", offload.role = #offload.role<input>}, %seed: tensor<i64> {offload.name = "rng_seed", offload.role = #offload.role<rng_seed>}) -> (tensor<2x8x4x16xf32> {offload.name = "y", offload.role = #offload.role<output>}, tensor<f32> {offload.name = "z", offload.role = #offload.role<output>}) attributes {offload.step} {
  offload.phase forward
  %q = offload.transpose %q0 {perm = array<i64: 0, 2, 1, 3>} : tensor<2x8x4x16xf32>
  %kv = offload.transpose %kv0 {perm = array<i64: 0, 2, 1, 3>} : tensor<2x6x2x16xf32>
  %o, %lse = offload.attention %q, %kv, %kv, %m, %seed {scale = 0.25 : f64, has_mask = true, dropout_p = 0.1 : f64, offset = 5 : i64} : tensor<2x4x8x16xf32>, tensor<2x2x6x16xf32>, tensor<2x2x6x16xf32>, tensor<8x6xi1>, tensor<i64>
  %a = offload.transpose %o {perm = array<i64: 0, 2, 1, 3>} : tensor<2x4x8x16xf32>
  %b = offload.transpose %o {perm = array<i64: 0, 2, 1, 3>} : tensor<2x4x8x16xf32>
  %y = offload.add %a, %b : tensor<2x8x4x16xf32>, tensor<2x8x4x16xf32>
  %z = offload.reduce_sum %lse : tensor<2x4x8xf32>
  return %y, %z : tensor<2x8x4x16xf32>, tensor<f32>
}

// The transposed query has another reader: attention reads the untransposed
// value, the transpose stays for the other reader.
// CHECK-LABEL: func.func @shared_query
// CHECK-SAME: (%[[Q:[^:]*]]: tensor<2x8x4x16xf32>
// CHECK: %[[QT:.*]] = offload.transpose %[[Q]] {perm = array<i64: 0, 2, 1, 3>}
// CHECK: %[[O:.*]], %{{.*}} = offload.attention %[[Q]], %[[Q]], %[[Q]] layout blhd
// CHECK: offload.reshape %[[O]]
// CHECK: offload.reduce_sum %[[QT]]
func.func @shared_query(%q0: tensor<2x8x4x16xf32> {offload.name = "q", offload.role = #offload.role<input>}) -> (tensor<2x8x64xf32> {offload.name = "y", offload.role = #offload.role<output>}, tensor<f32> {offload.name = "z", offload.role = #offload.role<output>}) attributes {offload.step} {
  offload.phase forward
  %q = offload.transpose %q0 {perm = array<i64: 0, 2, 1, 3>} : tensor<2x8x4x16xf32>
  %o, %lse = offload.attention %q, %q, %q {scale = 0.25 : f64} : tensor<2x4x8x16xf32>, tensor<2x4x8x16xf32>, tensor<2x4x8x16xf32>
  %t = offload.transpose %o {perm = array<i64: 0, 2, 1, 3>} : tensor<2x4x8x16xf32>
  %y = offload.reshape %t : tensor<2x8x4x16xf32> -> tensor<2x8x64xf32>
  %z = offload.reduce_sum %q : tensor<2x4x8x16xf32>
  return %y, %z : tensor<2x8x64xf32>, tensor<f32>
}

// Kept in the head layout: a value (not a transpose) for the key; an output
// read directly; a transpose of other dims.
// CHECK-LABEL: func.func @kept
// CHECK-COUNT-3: offload.attention %{{[^ ]*}}, %{{[^ ]*}}, %{{[^ ]*}} {scale
// CHECK-NOT: layout blhd
// CHECK: return
func.func @kept(%x: tensor<2x8x4x16xf32> {offload.name = "x", offload.role = #offload.role<input>}, %h: tensor<2x4x8x16xf32> {offload.name = "h", offload.role = #offload.role<input>}) -> (tensor<2x8x4x16xf32> {offload.name = "a", offload.role = #offload.role<output>}, tensor<2x4x8x16xf32> {offload.name = "b", offload.role = #offload.role<output>}, tensor<2x4x16x8xf32> {offload.name = "c", offload.role = #offload.role<output>}) attributes {offload.step} {
  offload.phase forward
  %q = offload.transpose %x {perm = array<i64: 0, 2, 1, 3>} : tensor<2x8x4x16xf32>
  %o1, %l1 = offload.attention %q, %h, %q {scale = 0.25 : f64} : tensor<2x4x8x16xf32>, tensor<2x4x8x16xf32>, tensor<2x4x8x16xf32>
  %a = offload.transpose %o1 {perm = array<i64: 0, 2, 1, 3>} : tensor<2x4x8x16xf32>
  %o2, %l2 = offload.attention %q, %q, %q {scale = 0.25 : f64} : tensor<2x4x8x16xf32>, tensor<2x4x8x16xf32>, tensor<2x4x8x16xf32>
  %o3, %l3 = offload.attention %q, %q, %q {scale = 0.25 : f64} : tensor<2x4x8x16xf32>, tensor<2x4x8x16xf32>, tensor<2x4x8x16xf32>
  %c = offload.transpose %o3 {perm = array<i64: 0, 1, 3, 2>} : tensor<2x4x8x16xf32>
  return %a, %o2, %c : tensor<2x8x4x16xf32>, tensor<2x4x8x16xf32>, tensor<2x4x16x8xf32>
}

// REPORT: fused: {{.*}}: scale 3.5{{[0-9]*}}e-01, causal
// REPORT: token layout: {{.*}}: the transposes around attention folded (layout blhd)
// REPORT: token layout: {{.*}}: the transposes around attention folded (layout blhd)
// REPORT: token layout: {{.*}}: the transposes around attention folded (layout blhd)
// REPORT: head layout kept: {{.*}}: query, key and value are not all transpose(1, 2) of a value
// REPORT: head layout kept: {{.*}}: the output is not read only through transpose(1, 2)
// REPORT: head layout kept: {{.*}}: the output is not read only through transpose(1, 2)
// REPORT: offload-fuse-attention: 1 attention(s) fused, 3 in the token layout
