// Round-trip of every op and type of the offload dialect: print, re-parse,
// and re-parse the generic form.
// RUN: offload-opt %s | offload-opt | FileCheck %s
// RUN: offload-opt %s --mlir-print-op-generic | offload-opt | FileCheck %s

// CHECK-LABEL: func.func @structure
func.func @structure(%x: tensor<4x8xf32> {offload.name = "x", offload.role = #offload.role<input>})
    -> (tensor<4x8xf32> {offload.name = "out", offload.role = #offload.role<output>}) attributes {offload.step} {
  // CHECK: offload.phase forward
  offload.phase forward
  // CHECK: %[[Y:.*]] = offload.relu %{{.*}} : tensor<4x8xf32>
  %y = offload.relu %x : tensor<4x8xf32>
  // CHECK: %[[S:.*]] = offload.save %[[Y]] : tensor<4x8xf32>
  %s = offload.save %y : tensor<4x8xf32>
  // CHECK: %[[SX:.*]] = offload.save %{{.*}} : tensor<4x8xf32>
  %sx = offload.save %x : tensor<4x8xf32>
  // CHECK: offload.phase backward
  offload.phase backward
  // CHECK: offload.restore %[[S]] : !offload.saved<tensor<4x8xf32>>
  %r = offload.restore %s : !offload.saved<tensor<4x8xf32>>
  %rx = offload.restore %sx : !offload.saved<tensor<4x8xf32>>
  // CHECK: offload.recompute(%{{.*}}) {policy = "every-k"} : (tensor<4x8xf32>) -> tensor<4x8xf32> {
  // CHECK: ^bb0(%[[A:.*]]: tensor<4x8xf32>):
  // CHECK: offload.yield %{{.*}} : tensor<4x8xf32>
  %rc = offload.recompute (%rx) {policy = "every-k"} : (tensor<4x8xf32>) -> tensor<4x8xf32> {
  ^bb0(%a: tensor<4x8xf32>):
    %t = offload.relu %a : tensor<4x8xf32>
    offload.yield %t : tensor<4x8xf32>
  }
  // CHECK: %{{.*}}, %[[T0:.*]] = offload.to_host async %{{.*}} : tensor<4x8xf32>
  %h, %t0 = offload.to_host async %r : tensor<4x8xf32>
  // CHECK: offload.to_host %{{.*}} : tensor<4x8xf32>
  %h2 = offload.to_host %rc : tensor<4x8xf32>
  // CHECK: %{{.*}}, %[[T1:.*]] = offload.to_device async [%[[T0]]] %{{.*}} {prefetch_distance = 3 : i64} : !offload.host<tensor<4x8xf32>>
  %d, %t1 = offload.to_device async [%t0] %h {prefetch_distance = 3 : i64} : !offload.host<tensor<4x8xf32>>
  // CHECK: %[[J:.*]] = offload.wait async [%[[T1]]]
  %j = offload.wait async [%t1]
  // CHECK: offload.wait [%[[J]]]
  offload.wait [%j]
  %d2 = offload.to_device %h2 : !offload.host<tensor<4x8xf32>>
  %sum = offload.add %d, %d2 : tensor<4x8xf32>, tensor<4x8xf32>
  // CHECK: offload.phase optimizer
  offload.phase optimizer
  return %sum : tensor<4x8xf32>
}

// CHECK-LABEL: func.func @split_phases
func.func @split_phases() attributes {offload.step} {
  // CHECK: offload.phase backward_input
  offload.phase backward_input
  // CHECK: offload.phase backward_weight
  offload.phase backward_weight
  return
}

// CHECK-LABEL: func.func @elementwise
func.func @elementwise(%x: tensor<4x8xf32>, %v: tensor<8xf32>, %m: tensor<4x8xi1>, %d: tensor<2xf64>) {
  // CHECK: offload.relu_backward %{{.*}}, %{{.*}} : tensor<4x8xf32>
  %0 = offload.relu_backward %x, %x : tensor<4x8xf32>
  // CHECK: offload.hardtanh %{{.*}} {max_val = 6.000000e+00 : f64, min_val = 0.000000e+00 : f64} : tensor<4x8xf32>
  %1 = offload.hardtanh %x {min_val = 0.0 : f64, max_val = 6.0 : f64} : tensor<4x8xf32>
  // CHECK: offload.hardtanh_backward
  %2 = offload.hardtanh_backward %x, %x {min_val = 0.0 : f64, max_val = 6.0 : f64} : tensor<4x8xf32>
  // CHECK: offload.hardswish
  %3 = offload.hardswish %x : tensor<4x8xf32>
  // CHECK: offload.hardswish_backward
  %4 = offload.hardswish_backward %x, %x : tensor<4x8xf32>
  // CHECK: offload.silu
  %5 = offload.silu %x : tensor<4x8xf32>
  // CHECK: offload.silu_backward
  %6 = offload.silu_backward %x, %x : tensor<4x8xf32>
  // CHECK: offload.gelu %{{.*}} approximate tanh : tensor<4x8xf32>
  %7 = offload.gelu %x approximate tanh : tensor<4x8xf32>
  // CHECK: offload.gelu_backward
  %8 = offload.gelu_backward %x, %x : tensor<4x8xf32>
  // CHECK: offload.sigmoid
  %9 = offload.sigmoid %x : tensor<4x8xf32>
  // CHECK: offload.sigmoid_backward
  %10 = offload.sigmoid_backward %x, %x : tensor<4x8xf32>
  // CHECK: offload.tanh
  %11 = offload.tanh %x : tensor<4x8xf32>
  // CHECK: offload.tanh_backward
  %12 = offload.tanh_backward %x, %x : tensor<4x8xf32>
  // CHECK: offload.exp
  %13 = offload.exp %x : tensor<4x8xf32>
  // CHECK: offload.sin %{{.*}} : tensor<4x8xf32>
  %sin = offload.sin %x : tensor<4x8xf32>
  // CHECK: offload.cos %{{.*}} : tensor<4x8xf32>
  %cos = offload.cos %x : tensor<4x8xf32>
  // CHECK: offload.neg
  %14 = offload.neg %x : tensor<4x8xf32>
  // CHECK: offload.sqrt
  %15 = offload.sqrt %x : tensor<4x8xf32>
  // CHECK: offload.rsqrt
  %16 = offload.rsqrt %d : tensor<2xf64>
  // CHECK: offload.add_scalar %{{.*}} {value = 2.000000e+00 : f64}
  %17 = offload.add_scalar %x {value = 2.0 : f64} : tensor<4x8xf32>
  // CHECK: offload.mul_scalar %{{.*}} {value = 3.000000e+00 : f64}
  %18 = offload.mul_scalar %x {value = 3.0 : f64} : tensor<4x8xf32>
  // CHECK: offload.fill {value = 1.000000e+00 : f64} : tensor<f32>
  %19 = offload.fill {value = 1.0 : f64} : tensor<f32>
  // CHECK: offload.constant dense<[0, 1, 2]> : tensor<3xi64>
  %c3 = offload.constant dense<[0, 1, 2]> : tensor<3xi64>
  // CHECK: offload.constant dense<{{\[}}[false, true], [false, false]]> : tensor<2x2xi1>
  %cm = offload.constant dense<[[false, true], [false, false]]> : tensor<2x2xi1>
  // CHECK: offload.add_scalar %{{.*}} {value = 1.000000e+00 : f64} : tensor<i64>
  %ci = offload.constant dense<3> : tensor<i64>
  %ci1 = offload.add_scalar %ci {value = 1.0 : f64} : tensor<i64>
  // CHECK: offload.add %{{.*}}, %{{.*}} : tensor<4x8xf32>, tensor<8xf32>
  %20 = offload.add %x, %v : tensor<4x8xf32>, tensor<8xf32>
  // CHECK: offload.sub
  %21 = offload.sub %x, %v : tensor<4x8xf32>, tensor<8xf32>
  // CHECK: offload.mul
  %22 = offload.mul %v, %x : tensor<8xf32>, tensor<4x8xf32>
  // CHECK: offload.div
  %23 = offload.div %x, %x : tensor<4x8xf32>, tensor<4x8xf32>
  // CHECK: offload.masked_fill %{{.*}}, %{{.*}} {value = -1.000000e+09 : f64} : tensor<4x8xf32>, tensor<4x8xi1>
  %24 = offload.masked_fill %x, %m {value = -1.0e9 : f64} : tensor<4x8xf32>, tensor<4x8xi1>
  // CHECK: offload.where
  %25 = offload.where %m, %x, %v : tensor<4x8xi1>, tensor<4x8xf32>, tensor<8xf32>
  return
}

// Integer and boolean values of ids and masks (no gradient).
// CHECK-LABEL: func.func @ids_and_masks
func.func @ids_and_masks(%ids: tensor<2x16xi64>, %pad: tensor<i64>, %m: tensor<2x16xi32>,
                         %t: tensor<2x64xi64>, %b: tensor<2x16xi1>, %f: tensor<2x16xf32>) {
  // CHECK: offload.compare ne %{{.*}}, %{{.*}} : tensor<2x16xi64>, tensor<i64>
  %k = offload.compare ne %ids, %pad : tensor<2x16xi64>, tensor<i64>
  // CHECK: offload.compare lt %{{.*}}, %{{.*}} : tensor<2x16xf32>, tensor<2x16xf32>
  %lt = offload.compare lt %f, %f : tensor<2x16xf32>, tensor<2x16xf32>
  // CHECK: offload.cumsum %{{.*}} {dim = 1 : i64} : tensor<2x16xi32>
  %c = offload.cumsum %m {dim = 1 : i64} : tensor<2x16xi32>
  // CHECK: offload.mul %{{.*}}, %{{.*}} : tensor<2x16xi32>, tensor<2x16xi32>
  %p = offload.mul %c, %m : tensor<2x16xi32>, tensor<2x16xi32>
  // CHECK: offload.add %{{.*}}, %{{.*}} : tensor<2x16xi64>, tensor<i64>
  %q = offload.add %ids, %pad : tensor<2x16xi64>, tensor<i64>
  // CHECK: offload.gather %{{.*}}, %{{.*}} {dim = 1 : i64} : tensor<2x64xi64>, tensor<2x16xi64>
  %g = offload.gather %t, %q {dim = 1 : i64} : tensor<2x64xi64>, tensor<2x16xi64>
  // CHECK: offload.where %{{.*}}, %{{.*}}, %{{.*}} : tensor<2x16xi1>, tensor<2x16xi64>, tensor<i64>
  %w = offload.where %k, %ids, %pad : tensor<2x16xi1>, tensor<2x16xi64>, tensor<i64>
  // CHECK: offload.masked_fill %{{.*}}, %{{.*}} {value = -1.000000e+02 : f64} : tensor<2x16xi64>, tensor<2x16xi1>
  %l = offload.masked_fill %ids, %b {value = -100.0 : f64} : tensor<2x16xi64>, tensor<2x16xi1>
  return
}

// CHECK-LABEL: func.func @shapes
func.func @shapes(%x: tensor<4x8xf32>, %i: tensor<4x8xi64>) {
  // CHECK: offload.reduce_sum %{{.*}} {dims = array<i64: 0>} : tensor<4x8xf32>
  %0 = offload.reduce_sum %x {dims = array<i64: 0>} : tensor<4x8xf32>
  // CHECK: offload.reduce_mean %{{.*}} {dims = array<i64: 1>, keepdim = true} : tensor<4x8xf32>
  %1 = offload.reduce_mean %x {dims = array<i64: 1>, keepdim = true} : tensor<4x8xf32>
  // CHECK: offload.broadcast_to %{{.*}} : tensor<4x1xf32> -> tensor<4x8xf32>
  %2 = offload.broadcast_to %1 : tensor<4x1xf32> -> tensor<4x8xf32>
  // CHECK: offload.reshape %{{.*}} : tensor<4x8xf32> -> tensor<32xf32>
  %3 = offload.reshape %x : tensor<4x8xf32> -> tensor<32xf32>
  // CHECK: offload.transpose %{{.*}} {perm = array<i64: 1, 0>} : tensor<4x8xf32>
  %4 = offload.transpose %x {perm = array<i64: 1, 0>} : tensor<4x8xf32>
  // CHECK: offload.cat %{{.*}}, %{{.*}} {dim = 0 : i64} : tensor<4x8xf32>, tensor<4x8xf32>
  %5 = offload.cat %x, %x {dim = 0 : i64} : tensor<4x8xf32>, tensor<4x8xf32>
  // CHECK: offload.slice %{{.*}} {dim = 1 : i64, end = 6 : i64, start = 2 : i64} : tensor<4x8xf32>
  %6 = offload.slice %x {dim = 1 : i64, start = 2 : i64, end = 6 : i64} : tensor<4x8xf32>
  // CHECK: offload.slice_backward %{{.*}} {dim = 1 : i64, end = 6 : i64, start = 2 : i64} : tensor<4x4xf32> -> tensor<4x8xf32>
  %7 = offload.slice_backward %6 {dim = 1 : i64, start = 2 : i64, end = 6 : i64} : tensor<4x4xf32> -> tensor<4x8xf32>
  // CHECK: offload.copy %{{.*}} : tensor<4x8xi64> -> tensor<4x8xf32>
  %8 = offload.copy %i : tensor<4x8xi64> -> tensor<4x8xf32>
  return
}

// CHECK-LABEL: func.func @linalg
func.func @linalg(%x: tensor<32x64xf32>, %w: tensor<128x64xf32>, %b: tensor<128xf32>,
                  %a3: tensor<4x16x8xf32>) {
  // CHECK: offload.linear %{{.*}}, %{{.*}}, %{{.*}} : tensor<32x64xf32>, tensor<128x64xf32>, tensor<128xf32>
  %0 = offload.linear %x, %w, %b : tensor<32x64xf32>, tensor<128x64xf32>, tensor<128xf32>
  // CHECK: offload.linear %{{.*}}, %{{.*}} : tensor<32x64xf32>, tensor<128x64xf32>
  %1 = offload.linear %x, %w : tensor<32x64xf32>, tensor<128x64xf32>
  // CHECK: offload.matmul %{{.*}}, %{{.*}} {transpose_b = true} : tensor<4x16x8xf32>, tensor<4x16x8xf32>
  %2 = offload.matmul %a3, %a3 {transpose_b = true} : tensor<4x16x8xf32>, tensor<4x16x8xf32>
  return
}

// CHECK-LABEL: func.func @conv_pool
func.func @conv_pool(%x: tensor<2x4x8x8xf32>, %w: tensor<6x2x3x3xf32>, %b: tensor<6xf32>,
                     %dy: tensor<2x6x4x4xf32>, %rm: tensor<4xf32>) {
  // CHECK: offload.conv2d %{{.*}}, %{{.*}}, %{{.*}} {dilation = array<i64: 1, 1>, groups = 2 : i64, padding = array<i64: 1, 1>, stride = array<i64: 2, 2>}
  %0 = offload.conv2d %x, %w, %b {stride = array<i64: 2, 2>, padding = array<i64: 1, 1>,
      dilation = array<i64: 1, 1>, groups = 2 : i64}
      : tensor<2x4x8x8xf32>, tensor<6x2x3x3xf32>, tensor<6xf32>
  // CHECK: offload.conv2d_backward_input
  %1 = offload.conv2d_backward_input %dy, %w {stride = array<i64: 2, 2>, padding = array<i64: 1, 1>,
      dilation = array<i64: 1, 1>, groups = 2 : i64}
      : tensor<2x6x4x4xf32>, tensor<6x2x3x3xf32> -> tensor<2x4x8x8xf32>
  // CHECK: offload.conv2d_backward_weight
  %2 = offload.conv2d_backward_weight %dy, %x {stride = array<i64: 2, 2>, padding = array<i64: 1, 1>,
      dilation = array<i64: 1, 1>, groups = 2 : i64}
      : tensor<2x6x4x4xf32>, tensor<2x4x8x8xf32> -> tensor<6x2x3x3xf32>
  // CHECK: offload.max_pool2d
  %3, %idx = offload.max_pool2d %x {kernel_size = array<i64: 3, 3>, stride = array<i64: 2, 2>,
      padding = array<i64: 1, 1>, dilation = array<i64: 1, 1>} : tensor<2x4x8x8xf32>
  // CHECK: offload.max_pool2d_backward
  %4 = offload.max_pool2d_backward %3, %idx : tensor<2x4x4x4xf32>, tensor<2x4x4x4xi64> -> tensor<2x4x8x8xf32>
  // CHECK: offload.avg_pool2d
  %5 = offload.avg_pool2d %x {kernel_size = array<i64: 2, 2>, stride = array<i64: 2, 2>,
      padding = array<i64: 0, 0>, ceil_mode = true} : tensor<2x4x8x8xf32>
  // CHECK: offload.avg_pool2d_backward
  %6 = offload.avg_pool2d_backward %5 {kernel_size = array<i64: 2, 2>, stride = array<i64: 2, 2>,
      padding = array<i64: 0, 0>} : tensor<2x4x4x4xf32> -> tensor<2x4x8x8xf32>
  // CHECK: offload.adaptive_avg_pool2d %{{.*}} {output_size = array<i64: 1, 1>}
  %7 = offload.adaptive_avg_pool2d %x {output_size = array<i64: 1, 1>} : tensor<2x4x8x8xf32>
  // CHECK: offload.adaptive_avg_pool2d_backward
  %8 = offload.adaptive_avg_pool2d_backward %7 : tensor<2x4x1x1xf32> -> tensor<2x4x8x8xf32>
  // CHECK: offload.batch_norm %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} {eps = 1.000000e-05 : f64, momentum = 1.000000e-01 : f64} : tensor<2x4x8x8xf32>, tensor<4xf32>
  %y, %mean, %invstd, %nrm, %nrv = offload.batch_norm %x, %rm, %rm, %rm, %rm
      {momentum = 0.1 : f64, eps = 1.0e-5 : f64} : tensor<2x4x8x8xf32>, tensor<4xf32>
  // CHECK: offload.batch_norm_backward
  %dx, %dw, %db = offload.batch_norm_backward %y, %x, %rm, %mean, %invstd
      {eps = 1.0e-5 : f64} : tensor<2x4x8x8xf32>, tensor<4xf32>
  return
}

// CHECK-LABEL: func.func @norm_softmax
func.func @norm_softmax(%x: tensor<4x16x32xf32>, %w: tensor<32xf32>) {
  // CHECK: offload.layer_norm %{{.*}}, %{{.*}}, %{{.*}} {eps = 1.000000e-05 : f64, normalized_ndim = 1 : i64} : tensor<4x16x32xf32>, tensor<32xf32>
  %y, %mean, %rstd = offload.layer_norm %x, %w, %w {normalized_ndim = 1 : i64, eps = 1.0e-5 : f64}
      : tensor<4x16x32xf32>, tensor<32xf32>
  // CHECK: offload.layer_norm_backward
  %dx, %dw, %db = offload.layer_norm_backward %y, %x, %w, %mean, %rstd
      {normalized_ndim = 1 : i64} : tensor<4x16x32xf32>, tensor<32xf32>, tensor<4x16x1xf32>
  // CHECK: offload.softmax %{{.*}} {dim = 2 : i64}
  %s = offload.softmax %x {dim = 2 : i64} : tensor<4x16x32xf32>
  // CHECK: offload.softmax_backward
  %ds = offload.softmax_backward %x, %s {dim = 2 : i64} : tensor<4x16x32xf32>
  // CHECK: offload.log_softmax
  %l = offload.log_softmax %x {dim = 2 : i64} : tensor<4x16x32xf32>
  // CHECK: offload.log_softmax_backward
  %dl = offload.log_softmax_backward %x, %l {dim = 2 : i64} : tensor<4x16x32xf32>
  return
}

// CHECK-LABEL: func.func @embedding_dropout_losses
func.func @embedding_dropout_losses(%emb: tensor<256x64xf32>, %tok: tensor<4x32xi64>,
    %seed: tensor<i64>, %z: tensor<32x10xf32>, %t: tensor<32xi64>, %g: tensor<f32>) {
  // CHECK: offload.embedding %{{.*}}, %{{.*}} : tensor<256x64xf32>, tensor<4x32xi64>
  %e = offload.embedding %emb, %tok : tensor<256x64xf32>, tensor<4x32xi64>
  // CHECK: offload.embedding_backward
  %de = offload.embedding_backward %e, %tok : tensor<4x32x64xf32>, tensor<4x32xi64> -> tensor<256x64xf32>
  // CHECK: offload.embedding %{{.*}}, %{{.*}} {padding_idx = 0 : i64} : tensor<256x64xf32>, tensor<4x32xi64>
  %ep = offload.embedding %emb, %tok {padding_idx = 0 : i64} : tensor<256x64xf32>, tensor<4x32xi64>
  // CHECK: offload.embedding_backward %{{.*}}, %{{.*}} {padding_idx = 0 : i64}
  %dep = offload.embedding_backward %ep, %tok {padding_idx = 0 : i64} : tensor<4x32x64xf32>, tensor<4x32xi64> -> tensor<256x64xf32>
  // CHECK: offload.dropout %{{.*}}, %{{.*}} {offset = 0 : i64, p = 1.000000e-01 : f64} : tensor<4x32x64xf32>, tensor<i64>
  %d = offload.dropout %e, %seed {p = 0.1 : f64, offset = 0 : i64} : tensor<4x32x64xf32>, tensor<i64>
  // CHECK: offload.dropout_backward
  %dd = offload.dropout_backward %d, %seed {p = 0.1 : f64, offset = 0 : i64} : tensor<4x32x64xf32>, tensor<i64>
  // CHECK: offload.cross_entropy %{{.*}}, %{{.*}} {label_smoothing = 1.000000e-01 : f64} : tensor<32x10xf32>, tensor<32xi64>
  %l = offload.cross_entropy %z, %t {label_smoothing = 0.1 : f64} : tensor<32x10xf32>, tensor<32xi64>
  // CHECK: offload.cross_entropy_backward %{{.*}}, %{{.*}}, %{{.*}} reduction sum :
  %dl = offload.cross_entropy_backward %g, %z, %t reduction sum : tensor<f32>, tensor<32x10xf32>, tensor<32xi64>
  // CHECK: offload.nll_loss
  %n = offload.nll_loss %z, %t : tensor<32x10xf32>, tensor<32xi64>
  // CHECK: offload.nll_loss_backward
  %dn = offload.nll_loss_backward %g, %z, %t : tensor<f32>, tensor<32x10xf32>, tensor<32xi64>
  // CHECK: offload.mse_loss
  %m = offload.mse_loss %z, %z : tensor<32x10xf32>, tensor<32x10xf32>
  // CHECK: offload.mse_loss_backward
  %dm = offload.mse_loss_backward %g, %z, %z : tensor<f32>, tensor<32x10xf32>, tensor<32x10xf32>
  return
}

// CHECK-LABEL: func.func @optimizers
func.func @optimizers(%p: tensor<10x4xf32>, %g: tensor<10x4xf32>, %s: tensor<i64>) {
  // CHECK: offload.sgd_update %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} {dampening = 0.000000e+00 : f64, lr = 1.000000e-01 : f64, momentum = 9.000000e-01 : f64, nesterov = true, weight_decay = 0.000000e+00 : f64} : tensor<10x4xf32>, tensor<i64>
  %p1, %b1, %s1 = offload.sgd_update %p, %g, %g, %s {lr = 0.1 : f64, momentum = 0.9 : f64,
      dampening = 0.0 : f64, weight_decay = 0.0 : f64, nesterov = true} : tensor<10x4xf32>, tensor<i64>
  // CHECK: offload.adamw_update %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} {beta1 = 9.000000e-01 : f64
  %p2, %m2, %v2, %s2 = offload.adamw_update %p, %g, %g, %g, %s {lr = 1.0e-3 : f64, beta1 = 0.9 : f64,
      beta2 = 0.999 : f64, eps = 1.0e-8 : f64, weight_decay = 0.01 : f64} : tensor<10x4xf32>, tensor<i64>
  return
}

// Updates over host values run on the host (offload-host-parameters).
// CHECK-LABEL: func.func @host_optimizers
func.func @host_optimizers(%p: !offload.host<tensor<10x4xf32>>, %g: !offload.host<tensor<10x4xf32>>,
                           %s: !offload.host<tensor<i64>>) {
  // CHECK: offload.sgd_update {{.*}} : !offload.host<tensor<10x4xf32>>, !offload.host<tensor<i64>>
  %p1, %b1, %s1 = offload.sgd_update %p, %g, %g, %s {lr = 0.1 : f64, momentum = 0.9 : f64,
      dampening = 0.0 : f64, weight_decay = 0.0 : f64, nesterov = false}
      : !offload.host<tensor<10x4xf32>>, !offload.host<tensor<i64>>
  // CHECK: offload.adamw_update {{.*}} : !offload.host<tensor<10x4xf32>>, !offload.host<tensor<i64>>
  %p2, %m2, %v2, %s2 = offload.adamw_update %p, %g, %g, %g, %s {lr = 1.0e-3 : f64, beta1 = 0.9 : f64,
      beta2 = 0.999 : f64, eps = 1.0e-8 : f64, weight_decay = 0.01 : f64}
      : !offload.host<tensor<10x4xf32>>, !offload.host<tensor<i64>>
  return
}

// `skip_if %found_inf` (fp16 loss scaling): on the device and on the host.
// CHECK-LABEL: func.func @skipped_optimizers
func.func @skipped_optimizers(%p: tensor<10x4xf32>, %s: tensor<i64>, %f: tensor<i1>,
                              %hp: !offload.host<tensor<10x4xf32>>, %hs: !offload.host<tensor<i64>>,
                              %hf: !offload.host<tensor<i1>>) {
  // CHECK: offload.sgd_update %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} skip_if %{{.*}} {{{.*}}} : tensor<10x4xf32>, tensor<i64>, tensor<i1>
  %p1, %b1, %s1 = offload.sgd_update %p, %p, %p, %s skip_if %f {lr = 0.1 : f64, momentum = 0.9 : f64,
      dampening = 0.0 : f64, weight_decay = 0.0 : f64, nesterov = false} : tensor<10x4xf32>, tensor<i64>, tensor<i1>
  // CHECK: offload.adamw_update %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} skip_if %{{.*}} {{{.*}}} : tensor<10x4xf32>, tensor<i64>, tensor<i1>
  %p2, %m2, %v2, %s2 = offload.adamw_update %p, %p, %p, %p, %s skip_if %f {lr = 1.0e-3 : f64, beta1 = 0.9 : f64,
      beta2 = 0.999 : f64, eps = 1.0e-8 : f64, weight_decay = 0.01 : f64} : tensor<10x4xf32>, tensor<i64>, tensor<i1>
  // CHECK: offload.adamw_update {{.*}} skip_if {{.*}} : !offload.host<tensor<10x4xf32>>, !offload.host<tensor<i64>>, !offload.host<tensor<i1>>
  %p3, %m3, %v3, %s3 = offload.adamw_update %hp, %hp, %hp, %hp, %hs skip_if %hf {lr = 1.0e-3 : f64, beta1 = 0.9 : f64,
      beta2 = 0.999 : f64, eps = 1.0e-8 : f64, weight_decay = 0.01 : f64}
      : !offload.host<tensor<10x4xf32>>, !offload.host<tensor<i64>>, !offload.host<tensor<i1>>
  return
}

// bf16 moments for an f32 parameter (moments=bf16), on the device and on the host.
// CHECK-LABEL: func.func @bf16_moments
func.func @bf16_moments(%p: tensor<10x4xf32>, %m: tensor<10x4xbf16>, %s: tensor<i64>, %f: tensor<i1>,
                        %hp: !offload.host<tensor<10x4xf32>>, %hm: !offload.host<tensor<10x4xbf16>>,
                        %hs: !offload.host<tensor<i64>>) {
  // CHECK: offload.adamw_update {{.*}} skip_if %{{.*}} {{{.*}}} : tensor<10x4xf32> moments tensor<10x4xbf16>, tensor<i64>, tensor<i1>
  %p1, %m1, %v1, %s1 = offload.adamw_update %p, %p, %m, %m, %s skip_if %f {lr = 1.0e-3 : f64, beta1 = 0.9 : f64,
      beta2 = 0.999 : f64, eps = 1.0e-8 : f64, weight_decay = 0.01 : f64}
      : tensor<10x4xf32> moments tensor<10x4xbf16>, tensor<i64>, tensor<i1>
  // CHECK: offload.adamw_update {{.*}} : !offload.host<tensor<10x4xf32>> moments !offload.host<tensor<10x4xbf16>>, !offload.host<tensor<i64>>
  %p2, %m2, %v2, %s2 = offload.adamw_update %hp, %hp, %hm, %hm, %hs {lr = 1.0e-3 : f64, beta1 = 0.9 : f64,
      beta2 = 0.999 : f64, eps = 1.0e-8 : f64, weight_decay = 0.01 : f64}
      : !offload.host<tensor<10x4xf32>> moments !offload.host<tensor<10x4xbf16>>, !offload.host<tensor<i64>>
  return
}

// CHECK-LABEL: func.func @types
// CHECK-SAME: !offload.saved<tensor<2xf32>>, %{{.*}}: !offload.host<tensor<3x3xf64>>, %{{.*}}: !offload.token
func.func @types(%a: !offload.saved<tensor<2xf32>>, %b: !offload.host<tensor<3x3xf64>>, %c: !offload.token) {
  return
}

// CHECK-LABEL: func.func @all_reduce
// CHECK: %[[R:.*]]:2, %[[T:.*]] = offload.all_reduce %arg0, %arg1 {bucket = 3 : i64} : tensor<16x8xf32>, tensor<16xf64>
// CHECK-NEXT: offload.wait [%[[T]]]
func.func @all_reduce(%a: tensor<16x8xf32>, %b: tensor<16xf64>) -> (tensor<16x8xf32>, tensor<16xf64>) {
  %r:2, %t = offload.all_reduce %a, %b {bucket = 3 : i64} : tensor<16x8xf32>, tensor<16xf64>
  offload.wait [%t]
  return %r#0, %r#1 : tensor<16x8xf32>, tensor<16xf64>
}

// ZeRO-1: 144 elements over 2 ranks, shards of 72.
// CHECK-LABEL: func.func @reduce_scatter_all_gather
// CHECK: %[[G:.*]], %[[P:.*]], %[[T:.*]] = offload.reduce_scatter %arg2, %arg3, %arg0, %arg1 {bucket = 0 : i64, world_size = 2 : i64} : tensor<16x8xf32>, tensor<16xf32>, tensor<16x8xf32>, tensor<16xf32> -> tensor<72xf32>, tensor<72xf32>
// CHECK: %[[R:.*]]:2, %[[U:.*]] = offload.all_gather %[[G]] into %arg0, %arg1 {bucket = 0 : i64, world_size = 2 : i64} : tensor<72xf32> into tensor<16x8xf32>, tensor<16xf32>
func.func @reduce_scatter_all_gather(%w: tensor<16x8xf32>, %b: tensor<16xf32>, %gw: tensor<16x8xf32>,
                                     %gb: tensor<16xf32>) -> (tensor<16x8xf32>, tensor<16xf32>) {
  %g, %p, %t = offload.reduce_scatter %gw, %gb, %w, %b {bucket = 0 : i64, world_size = 2 : i64}
      : tensor<16x8xf32>, tensor<16xf32>, tensor<16x8xf32>, tensor<16xf32> -> tensor<72xf32>, tensor<72xf32>
  offload.wait [%t]
  %r:2, %u = offload.all_gather %g into %w, %b {bucket = 0 : i64, world_size = 2 : i64}
      : tensor<72xf32> into tensor<16x8xf32>, tensor<16xf32>
  offload.wait [%u]
  return %r#0, %r#1 : tensor<16x8xf32>, tensor<16xf32>
}
