// Gradient accumulation under mixed precision, with dropout, and through
// reshapes that move the batch inside a merged dim.
// RUN: offload-opt %s -split-input-file --offload-autodiff="precision=fp16-mixed optimizer=sgd momentum=0.9 micro-batches=2" | FileCheck %s --check-prefix=FP16
// RUN: offload-opt %s -split-input-file --offload-autodiff="optimizer=sgd micro-batches=2" | FileCheck %s --check-prefix=F32

// fp16 loss scaling: each micro-batch's backward starts from scale / K, the
// f32 gradient sums are checked for inf/NaN once and unscaled once, and the
// updates skip on that one flag.
// FP16-LABEL: func.func @mlp
// FP16: %[[EFF:.*]] = offload.where
// FP16-NEXT: %[[SEED:.*]] = offload.mul_scalar %[[EFF]] {value = 5.000000e-01 : f64} : tensor<f32>
// FP16: offload.phase forward micro_batch 1
// FP16: offload.phase backward micro_batch 1
// FP16: offload.mul_scalar %{{.*}} {value = 5.000000e-01 : f64} : tensor<f32>
// FP16: %[[G1:.*]] = offload.add %{{.*}}, %{{.*}} {offload.accumulate} : tensor<16x16xf32>, tensor<16x16xf32>
// FP16: offload.phase optimizer
// FP16: offload.div %{{.*}}, %[[EFF]]
// FP16: offload.mul_scalar %[[G1]] {value = 0.000000e+00 : f64} : tensor<16x16xf32>
// FP16: %[[INF:.*]] = offload.compare ne
// FP16: offload.sgd_update %arg1, %{{.*}}, %{{.*}}, %{{.*}} skip_if %[[INF]]
func.func @mlp(%x: tensor<8x16xf32> {offload.name = "x", offload.role = #offload.role<input>},
               %w1: tensor<16x16xf32> {offload.name = "w1", offload.role = #offload.role<parameter>},
               %w2: tensor<16x16xf32> {offload.name = "w2", offload.role = #offload.role<parameter>},
               %t: tensor<8xi64> {offload.name = "t", offload.role = #offload.role<input>})
    -> (tensor<f32> {offload.name = "loss", offload.role = #offload.role<loss>}) attributes {offload.step} {
  offload.phase forward
  %h = offload.linear %x, %w1 : tensor<8x16xf32>, tensor<16x16xf32>
  %a = offload.relu %h : tensor<8x16xf32>
  %y = offload.linear %a, %w2 : tensor<8x16xf32>, tensor<16x16xf32>
  %l = offload.cross_entropy %y, %t : tensor<8x16xf32>, tensor<8xi64>
  return %l : tensor<f32>
}

// -----

// bf16 parameters (a model converted with .to(torch.bfloat16)): the
// gradients are summed in f32 and rounded to bf16 once, for the update.
// F32-LABEL: func.func @bf16_params
// F32: offload.phase backward micro_batch 0
// F32: %[[G0:.*]] = offload.matmul {{.*}} : tensor<4x8xbf16>, tensor<4x8xbf16>
// F32-NEXT: %[[C0:.*]] = offload.copy %[[G0]] : tensor<8x8xbf16> -> tensor<8x8xf32>
// F32: offload.phase backward micro_batch 1
// F32: %[[G1:.*]] = offload.matmul {{.*}} : tensor<4x8xbf16>, tensor<4x8xbf16>
// F32-NEXT: %[[C1:.*]] = offload.copy %[[G1]] : tensor<8x8xbf16> -> tensor<8x8xf32>
// F32-NEXT: %[[S:.*]] = offload.add %[[C0]], %[[C1]] {offload.accumulate} : tensor<8x8xf32>, tensor<8x8xf32>
// F32: offload.phase optimizer
// F32-NEXT: %[[B:.*]] = offload.copy %[[S]] : tensor<8x8xf32> -> tensor<8x8xbf16>
// F32-NEXT: offload.sgd_update %arg0, %[[B]],
func.func @bf16_params(%w: tensor<8x8xbf16> {offload.name = "w", offload.role = #offload.role<parameter>},
                       %x: tensor<8x8xbf16> {offload.name = "x", offload.role = #offload.role<input>})
    -> (tensor<f32> {offload.name = "loss", offload.role = #offload.role<loss>}) attributes {offload.step} {
  offload.phase forward
  %y = offload.linear %x, %w : tensor<8x8xbf16>, tensor<8x8xbf16>
  %s = offload.reduce_mean %y : tensor<8x8xbf16>
  %l = offload.copy %s : tensor<bf16> -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// Dropout: micro-batch 1 draws past every Philox counter micro-batch 0
// uses (offset 0 + 12 x 8 elements), in forward and in its VJP. The batch
// merged into [T * B, E] and split back stays split by its rows.
// F32-LABEL: func.func @dropout_reshape
// F32: offload.phase forward micro_batch 0
// F32: offload.transpose %{{.*}} {perm = array<i64: 1, 0, 2>} : tensor<4x3x8xf32>
// F32: offload.reshape %{{.*}} : tensor<3x4x8xf32> -> tensor<12x8xf32>
// F32: offload.dropout %{{.*}}, %arg2 {offset = 0 : i64, p = 1.000000e-01 : f64} : tensor<12x8xf32>
// F32: offload.reshape %{{.*}} : tensor<12x8xf32> -> tensor<3x4x8xf32>
// F32: offload.phase forward micro_batch 1
// F32: offload.dropout %{{.*}}, %arg2 {offset = 96 : i64, p = 1.000000e-01 : f64} : tensor<12x8xf32>
// F32: offload.phase backward micro_batch 1
// F32: offload.dropout_backward %{{.*}}, %arg2 {{{.*}}offset = 96 : i64, p = 1.000000e-01 : f64}
func.func @dropout_reshape(%w: tensor<8x8xf32> {offload.name = "w", offload.role = #offload.role<parameter>},
                           %x: tensor<8x3x8xf32> {offload.name = "x", offload.role = #offload.role<input>},
                           %seed: tensor<i64> {offload.name = "rng_seed", offload.role = #offload.role<rng_seed>})
    -> (tensor<f32> {offload.name = "loss", offload.role = #offload.role<loss>}) attributes {offload.step} {
  offload.phase forward
  %t = offload.transpose %x {perm = array<i64: 1, 0, 2>} : tensor<8x3x8xf32>
  %m = offload.reshape %t : tensor<3x8x8xf32> -> tensor<24x8xf32>
  %y = offload.linear %m, %w : tensor<24x8xf32>, tensor<8x8xf32>
  %d = offload.dropout %y, %seed {p = 0.1 : f64, offset = 0 : i64} : tensor<24x8xf32>, tensor<i64>
  %b = offload.reshape %d : tensor<24x8xf32> -> tensor<3x8x8xf32>
  %l = offload.reduce_mean %b : tensor<3x8x8xf32>
  return %l : tensor<f32>
}
