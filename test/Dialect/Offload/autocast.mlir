// --offload-autocast (issue 29): PyTorch's autocast as casts in a forward
// step; --offload-autodiff="precision=..." runs it first. Idempotent; the
// option parser lists the precision names.
// RUN: offload-opt %s --offload-autocast=precision=bf16-mixed | FileCheck %s
// RUN: offload-opt %s --offload-autocast=precision=fp16-mixed | FileCheck %s --check-prefix=F16
// RUN: offload-opt %s --offload-autocast=precision=bf16-mixed --offload-autocast=precision=bf16-mixed \
// RUN:   | FileCheck %s
// RUN: offload-opt %s --offload-autocast=precision=fp32 | FileCheck %s --check-prefix=FP32
// RUN: not offload-opt %s --offload-autocast=precision=bf16 2>&1 | FileCheck %s --check-prefix=BAD
// RUN: offload-opt %s --offload-autodiff="precision=bf16-mixed optimizer=sgd" \
// RUN:   | FileCheck %s --check-prefix=STEP

// CHECK-LABEL: func.func @block
// One cast per value: x feeds two linears through one bf16 copy.
// CHECK: %[[X:.*]] = offload.copy %arg0 : tensor<8x16xf32> -> tensor<8x16xbf16>
// CHECK: %[[W1:.*]] = offload.copy %arg1 : tensor<16x16xf32> -> tensor<16x16xbf16>
// CHECK: %[[H:.*]] = offload.linear %[[X]], %[[W1]] : tensor<8x16xbf16>, tensor<16x16xbf16>
// Elementwise ops keep their operands' type.
// CHECK: %[[G:.*]] = offload.gelu %[[H]] : tensor<8x16xbf16>
// CHECK: offload.linear %[[G]], {{.*}} : tensor<8x16xbf16>, tensor<16x16xbf16>
// CHECK-NOT: offload.copy %arg0
// CHECK: %[[Y2:.*]] = offload.linear %[[X]], {{.*}} : tensor<8x16xbf16>, tensor<16x16xbf16>
// Promotion: bf16 + f32 computes in f32.
// CHECK: %[[Y2F:.*]] = offload.copy %[[Y2]] : tensor<8x16xbf16> -> tensor<8x16xf32>
// CHECK: %[[R:.*]] = offload.add %arg0, %[[Y2F]] : tensor<8x16xf32>, tensor<8x16xf32>
// f32 ops: layer norm and softmax in f32.
// CHECK: offload.layer_norm %[[R]], {{.*}} : tensor<8x16xf32>, tensor<16xf32>
// CHECK: %[[S:.*]] = offload.softmax %{{.*}} {dim = 1 : i64} : tensor<8x16xf32>
// bf16 + bf16 stays bf16.
// CHECK: offload.mul %{{.*}}, %{{.*}} : tensor<8x16xbf16>, tensor<8x16xbf16>
// The loss: cross entropy reads f32 logits.
// CHECK: %[[Z:.*]] = offload.copy %{{.*}} : tensor<8x16xbf16> -> tensor<8x16xf32>
// CHECK: offload.cross_entropy %[[Z]], %arg3 : tensor<8x16xf32>, tensor<8xi64>
// F16: offload.linear {{.*}} : tensor<8x16xf16>, tensor<16x16xf16>
// FP32-NOT: offload.copy
// BAD: for the --precision option: 'bf16' is not a precision; expected fp32, bf16-mixed or fp16-mixed
func.func @block(%x: tensor<8x16xf32> {offload.name = "x", offload.role = #offload.role<input>},
                 %w1: tensor<16x16xf32> {offload.name = "w1", offload.role = #offload.role<parameter>},
                 %w2: tensor<16x16xf32> {offload.name = "w2", offload.role = #offload.role<parameter>},
                 %t: tensor<8xi64> {offload.name = "t", offload.role = #offload.role<input>},
                 %g: tensor<16xf32> {offload.name = "ln.weight", offload.role = #offload.role<parameter>})
    -> (tensor<f32> {offload.name = "loss", offload.role = #offload.role<loss>}) attributes {offload.step} {
  offload.phase forward
  %h = offload.linear %x, %w1 : tensor<8x16xf32>, tensor<16x16xf32>
  %a = offload.gelu %h : tensor<8x16xf32>
  %y = offload.linear %a, %w2 : tensor<8x16xf32>, tensor<16x16xf32>
  %y2 = offload.linear %x, %w2 : tensor<8x16xf32>, tensor<16x16xf32>
  %r = offload.add %x, %y2 : tensor<8x16xf32>, tensor<8x16xf32>
  %n, %m, %s = offload.layer_norm %r, %g, %g {normalized_ndim = 1 : i64, eps = 1.0e-5 : f64}
      : tensor<8x16xf32>, tensor<16xf32>
  %p = offload.softmax %y {dim = 1 : i64} : tensor<8x16xf32>
  %q = offload.mul %y, %y : tensor<8x16xf32>, tensor<8x16xf32>
  %l = offload.cross_entropy %q, %t : tensor<8x16xf32>, tensor<8xi64>
  return %l : tensor<f32>
}

// The training step: low-type ops in bf16 backward too, gradients of the
// f32 parameters in f32 (the casts' VJPs), the optimizer in f32, the saved
// activations in bf16.
// STEP-LABEL: func.func @block
// STEP-DAG: offload.save %{{.*}} : tensor<8x16xbf16>
// STEP: offload.phase backward
// STEP: offload.matmul {{.*}} : tensor<8x16xbf16>, tensor<8x16xbf16>
// STEP: offload.copy %{{.*}} : tensor<16x16xbf16> -> tensor<16x16xf32>
// STEP: offload.phase optimizer
// STEP: offload.sgd_update {{.*}} : tensor<16x16xf32>
