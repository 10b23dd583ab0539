// Every verifier message of offload.attention and offload.attention_backward
// (verifyAttentionOperands, OffloadOps.cpp).
// RUN: offload-opt %s -split-input-file -verify-diagnostics

func.func @rank(%q: tensor<2x4x8x16xf32>, %k: tensor<4x8x16xf32>, %v: tensor<2x4x8x16xf32>) {
  // expected-error @+1 {{'offload.attention' op expects query [N, Hq, L, E], key [N, Hkv, S, E] and value [N, Hkv, S, Ev]}}
  %o, %l = offload.attention %q, %k, %v {scale = 0.25 : f64} : tensor<2x4x8x16xf32>, tensor<4x8x16xf32>, tensor<2x4x8x16xf32>
  return
}

// -----

func.func @element_type(%q: tensor<2x4x8x16xf32>, %k: tensor<2x4x8x16xf64>, %v: tensor<2x4x8x16xf32>) {
  // expected-error @+1 {{query, key and value must have one element type}}
  %o, %l = offload.attention %q, %k, %v {scale = 0.25 : f64} : tensor<2x4x8x16xf32>, tensor<2x4x8x16xf64>, tensor<2x4x8x16xf32>
  return
}

// -----

func.func @batch(%q: tensor<2x4x8x16xf32>, %k: tensor<3x4x8x16xf32>, %v: tensor<3x4x8x16xf32>) {
  // expected-error @+1 {{query, key and value must have the same batch size}}
  %o, %l = offload.attention %q, %k, %v {scale = 0.25 : f64} : tensor<2x4x8x16xf32>, tensor<3x4x8x16xf32>, tensor<3x4x8x16xf32>
  return
}

// -----

func.func @kv(%q: tensor<2x4x8x16xf32>, %k: tensor<2x4x8x16xf32>, %v: tensor<2x4x9x16xf32>) {
  // expected-error @+1 {{key and value must have the same heads and length}}
  %o, %l = offload.attention %q, %k, %v {scale = 0.25 : f64} : tensor<2x4x8x16xf32>, tensor<2x4x8x16xf32>, tensor<2x4x9x16xf32>
  return
}

// -----

func.func @head_size(%q: tensor<2x4x8x16xf32>, %k: tensor<2x4x8x8xf32>, %v: tensor<2x4x8x16xf32>) {
  // expected-error @+1 {{query and key must have the same head size}}
  %o, %l = offload.attention %q, %k, %v {scale = 0.25 : f64} : tensor<2x4x8x16xf32>, tensor<2x4x8x8xf32>, tensor<2x4x8x16xf32>
  return
}

// -----

func.func @heads(%q: tensor<2x4x8x16xf32>, %k: tensor<2x3x8x16xf32>, %v: tensor<2x3x8x16xf32>) {
  // expected-error @+1 {{query heads (4) must be a multiple of key/value heads (3)}}
  %o, %l = offload.attention %q, %k, %v {scale = 0.25 : f64} : tensor<2x4x8x16xf32>, tensor<2x3x8x16xf32>, tensor<2x3x8x16xf32>
  return
}

// -----

func.func @dropout(%q: tensor<2x4x8x16xf32>, %s: tensor<i64>) {
  // expected-error @+1 {{dropout_p 1 must be in [0, 1)}}
  %o, %l = offload.attention %q, %q, %q, %s {scale = 0.25 : f64, dropout_p = 1.0 : f64} : tensor<2x4x8x16xf32>, tensor<2x4x8x16xf32>, tensor<2x4x8x16xf32>, tensor<i64>
  return
}

// -----

func.func @scale(%q: tensor<2x4x8x16xf32>) {
  // expected-error @+1 {{scale must be finite}}
  %o, %l = offload.attention %q, %q, %q {scale = 0x7FF0000000000000 : f64} : tensor<2x4x8x16xf32>, tensor<2x4x8x16xf32>, tensor<2x4x8x16xf32>
  return
}

// -----

func.func @extras(%q: tensor<2x4x8x16xf32>) {
  // expected-error @+1 {{expects 1 extra operand(s) (the mask when has_mask, then the seed when dropout_p > 0), got 0}}
  %o, %l = offload.attention %q, %q, %q {scale = 0.25 : f64, has_mask = true} : tensor<2x4x8x16xf32>, tensor<2x4x8x16xf32>, tensor<2x4x8x16xf32>
  return
}

// -----

func.func @mask_type(%q: tensor<2x4x8x16xf32>, %m: tensor<8x8xi64>) {
  // expected-error @+1 {{mask must be i1 or the query's element type}}
  %o, %l = offload.attention %q, %q, %q, %m {scale = 0.25 : f64, has_mask = true} : tensor<2x4x8x16xf32>, tensor<2x4x8x16xf32>, tensor<2x4x8x16xf32>, tensor<8x8xi64>
  return
}

// -----

func.func @mask_shape(%q: tensor<2x4x8x16xf32>, %m: tensor<3x1x8xi1>) {
  // expected-error @+1 {{mask must broadcast to [N, Hq, L, S]}}
  %o, %l = offload.attention %q, %q, %q, %m {scale = 0.25 : f64, has_mask = true} : tensor<2x4x8x16xf32>, tensor<2x4x8x16xf32>, tensor<2x4x8x16xf32>, tensor<3x1x8xi1>
  return
}

// -----

func.func @seed(%q: tensor<2x4x8x16xf32>, %s: tensor<1xi64>) {
  // expected-error @+1 {{the dropout seed must be an i64 scalar}}
  %o, %l = offload.attention %q, %q, %q, %s {scale = 0.25 : f64, dropout_p = 0.1 : f64} : tensor<2x4x8x16xf32>, tensor<2x4x8x16xf32>, tensor<2x4x8x16xf32>, tensor<1xi64>
  return
}

// -----

func.func @bwd_out(%q: tensor<2x4x8x16xf32>, %o: tensor<2x4x8x8xf32>, %l: tensor<2x4x8xf32>) {
  // expected-error @+1 {{grad_out and out must be [N, Hq, L, Ev]}}
  %dq, %dk, %dv = offload.attention_backward %o, %q, %q, %q, %o, %l {scale = 0.25 : f64} : tensor<2x4x8x8xf32>, tensor<2x4x8x16xf32>, tensor<2x4x8x16xf32>, tensor<2x4x8x16xf32>, tensor<2x4x8xf32>
  return
}

// -----

func.func @bwd_lse(%q: tensor<2x4x8x16xf32>, %l: tensor<2x4x8x1xf32>) {
  // expected-error @+1 {{lse must be [N, Hq, L]}}
  %dq, %dk, %dv = offload.attention_backward %q, %q, %q, %q, %q, %l {scale = 0.25 : f64} : tensor<2x4x8x16xf32>, tensor<2x4x8x16xf32>, tensor<2x4x8x16xf32>, tensor<2x4x8x16xf32>, tensor<2x4x8x1xf32>
  return
}

// -----

// The token layout (blhd) reads heads from dim 2: 3 query heads do not
// group over 2 key/value heads (the same shapes are fine in bhld).
func.func @tokens_heads(%q: tensor<2x8x3x16xf32>, %k: tensor<2x8x2x16xf32>) {
  // expected-error @+1 {{query heads (3) must be a multiple of key/value heads (2)}}
  %o, %l = offload.attention %q, %k, %k layout blhd {scale = 0.25 : f64} : tensor<2x8x3x16xf32>, tensor<2x8x2x16xf32>, tensor<2x8x2x16xf32>
  return
}

// -----

func.func @tokens_rank(%q: tensor<2x8x16xf32>) {
  // expected-error @+1 {{expects (layout blhd) query [N, L, Hq, E], key [N, S, Hkv, E] and value [N, S, Hkv, Ev]}}
  %o, %l = "offload.attention"(%q, %q, %q) {scale = 0.25 : f64, layout = 1 : i32} : (tensor<2x8x16xf32>, tensor<2x8x16xf32>, tensor<2x8x16xf32>) -> (tensor<2x8x16xf32>, tensor<2x8xf32>)
  return
}

// -----

func.func @tokens_bwd_out(%q: tensor<2x8x4x16xf32>, %o: tensor<2x4x8x16xf32>, %l: tensor<2x4x8xf32>) {
  // expected-error @+1 {{grad_out and out must be [N, L, Hq, Ev] (layout blhd)}}
  %dq, %dk, %dv = offload.attention_backward %o, %q, %q, %q, %o, %l layout blhd {scale = 0.25 : f64} : tensor<2x4x8x16xf32>, tensor<2x8x4x16xf32>, tensor<2x8x4x16xf32>, tensor<2x8x4x16xf32>, tensor<2x4x8xf32>
  return
}

// -----

func.func @tokens_bwd_lse(%q: tensor<2x8x4x16xf32>, %l: tensor<2x8x4xf32>) {
  // expected-error @+1 {{lse must be [N, Hq, L]}}
  %dq, %dk, %dv = offload.attention_backward %q, %q, %q, %q, %q, %l layout blhd {scale = 0.25 : f64} : tensor<2x8x4x16xf32>, tensor<2x8x4x16xf32>, tensor<2x8x4x16xf32>, tensor<2x8x4x16xf32>, tensor<2x8x4xf32>
  return
}

// -----

func.func @bad_layout(%q: tensor<2x8x4x16xf32>) {
  // expected-error @+1 {{expected string or keyword containing one of the following enum values for attribute 'layout' [bhld, blhd]}}
  %o, %l = offload.attention %q, %q, %q layout bshd {scale = 0.25 : f64} : tensor<2x8x4x16xf32>, tensor<2x8x4x16xf32>, tensor<2x8x4x16xf32>
  return
}
