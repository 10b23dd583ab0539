// bf16 and f16 tensors (issue 29): accepted wherever floats are; per-row and
// per-channel statistics of low-type values are f32 (layer norm's mean and
// rstd, attention's log-sum-exp; batch norm's follow its f32 parameters);
// round trip in the custom and generic forms; the lowering gives them 2-byte
// buffers; a host kernel without bf16 support fails at plan load, naming the
// op and the type (LowPrecisionTest); the CUDA backend has a bf16/f16 kernel
// for each op of the bf16 MLP step, the optimizer updates included.
// RUN: offload-opt %s | offload-opt | FileCheck %s
// RUN: offload-opt %s --mlir-print-op-generic | offload-opt | FileCheck %s
// RUN: rm -rf %t && mkdir -p %t
// RUN: offload-opt %S/../../Inputs/mlp-forward-bf16.mlir --offload-autodiff="optimizer=none" \
// RUN:   -o %t/none.mlir
// RUN: FileCheck %s --check-prefix=STEP < %t/none.mlir
// RUN: offload-translate --offload-to-plan %t/none.mlir -o %t/none.oflp
// RUN: offload-run --dump-plan %t/none.oflp | FileCheck %s --check-prefix=PLAN
// RUN: offload-run %t/none.oflp --check --backend host | FileCheck %s --check-prefix=HOST
// RUN: offload-run %t/none.oflp --check --backend cuda | FileCheck %s --check-prefix=CUDA
// RUN: offload-opt %S/../../Inputs/mlp-forward-bf16.mlir --offload-autodiff="optimizer=sgd momentum=0.9" \
// RUN:   | offload-translate --offload-to-plan -o %t/sgd.oflp
// RUN: offload-run %t/sgd.oflp --check --backend host 2>&1 | FileCheck %s --check-prefix=SGD
// RUN: offload-run %t/sgd.oflp --check --backend cuda | FileCheck %s --check-prefix=CUDA-SGD

// CHECK-LABEL: func.func @low
func.func @low(%x: tensor<2x4x8x8xbf16>, %w: tensor<6x4x3x3xbf16>, %g: tensor<6xf32>,
               %h: tensor<2x5x16xf16>, %lw: tensor<16xf16>, %q: tensor<1x2x5x8xbf16>) {
  // CHECK: offload.conv2d {{.*}} : tensor<2x4x8x8xbf16>, tensor<6x4x3x3xbf16>
  %c = offload.conv2d %x, %w {stride = array<i64: 1, 1>, padding = array<i64: 1, 1>,
      dilation = array<i64: 1, 1>, groups = 1 : i64} : tensor<2x4x8x8xbf16>, tensor<6x4x3x3xbf16>
  // A bf16 input with f32 parameters and running statistics.
  // CHECK: offload.batch_norm {{.*}} : tensor<2x6x8x8xbf16>, tensor<6xf32>
  %y, %m, %s, %rm, %rv = offload.batch_norm %c, %g, %g, %g, %g {momentum = 0.1 : f64, eps = 1.0e-5 : f64}
      : tensor<2x6x8x8xbf16>, tensor<6xf32>
  // CHECK: offload.relu %{{.*}} : tensor<2x6x8x8xbf16>
  %r = offload.relu %y : tensor<2x6x8x8xbf16>
  // CHECK: offload.copy %{{.*}} : tensor<2x6x8x8xbf16> -> tensor<2x6x8x8xf32>
  %f = offload.copy %r : tensor<2x6x8x8xbf16> -> tensor<2x6x8x8xf32>
  // CHECK: %{{.*}}, %[[MEAN:.*]], %{{.*}} = offload.layer_norm {{.*}} : tensor<2x5x16xf16>, tensor<16xf16>
  %n, %mean, %rstd = offload.layer_norm %h, %lw, %lw {normalized_ndim = 1 : i64, eps = 1.0e-5 : f64}
      : tensor<2x5x16xf16>, tensor<16xf16>
  // f32 statistics: the inferred type takes part in the round trip.
  // CHECK: offload.mul_scalar %[[MEAN]] {value = 2.000000e+00 : f64} : tensor<2x5x1xf32>
  %m2 = offload.mul_scalar %mean {value = 2.0 : f64} : tensor<2x5x1xf32>
  // CHECK: %[[O:.*]], %[[LSE:.*]] = offload.attention {{.*}} : tensor<1x2x5x8xbf16>
  %o, %lse = offload.attention %q, %q, %q {scale = 0.35 : f64}
      : tensor<1x2x5x8xbf16>, tensor<1x2x5x8xbf16>, tensor<1x2x5x8xbf16>
  // CHECK: offload.exp %[[LSE]] : tensor<1x2x5xf32>
  %e = offload.exp %lse : tensor<1x2x5xf32>
  // CHECK: offload.fill {value = 1.000000e+00 : f64} : tensor<3xf16>
  %one = offload.fill {value = 1.0 : f64} : tensor<3xf16>
  // CHECK: offload.constant dense<[1.000000e+00, 2.500000e-01]> : tensor<2xbf16>
  %k = offload.constant dense<[1.0, 0.25]> : tensor<2xbf16>
  return
}

// A bf16-true MLP step: the gradients in bf16, saved values 2 bytes each.
// STEP: offload.save %{{.*}} : tensor<32x16xbf16>
// STEP: offload.cross_entropy_backward {{.*}} : tensor<bf16>, tensor<32x4xbf16>, tensor<32xi64>
// PLAN: "fc1.weight" bf16[16,8] device@{{[0-9]+}}+256 parameter
// PLAN: "grad:fc1.weight"
// HOST: host (chosen): has a kernel for every op
// CUDA: cuda (chosen): has a kernel for every op
// The optimizer updates take bf16 parameters (bf16-true: f32 compute, one
// rounding per stored value), on both backends.
// SGD: host (chosen): has a kernel for every op
// CUDA-SGD: cuda (chosen): has a kernel for every op
