// fp16 loss scaling (issue 29): --offload-autodiff="precision=fp16-mixed" with
// an optimizer builds torch.amp.GradScaler's rule into the step: amp.scale,
// amp.growth_tracker and amp.skipped_steps are step state; backward starts
// from the scale (a zero scale, a fresh store's, stands for init-scale);
// gradients are checked for inf/NaN and unscaled in f32; every update takes
// the flag (`skip_if`) and keeps every value it writes when they held any (no
// `where` over an updated value); the scale halves on an overflow and doubles
// after growth-interval clean steps.
// RUN: offload-opt %s --offload-autodiff="precision=fp16-mixed optimizer=sgd momentum=0.9" | FileCheck %s
// RUN: offload-opt %s --offload-autodiff="precision=fp16-mixed optimizer=adamw" | FileCheck %s --check-prefix=ADAMW
// RUN: offload-opt %s --offload-autodiff="precision=fp16-mixed optimizer=sgd loss-scale=none" | FileCheck %s --check-prefix=NONE
// RUN: offload-opt %s --offload-autodiff="precision=bf16-mixed optimizer=sgd" | FileCheck %s --check-prefix=NONE
// RUN: offload-opt %s --offload-autodiff="precision=fp16-mixed optimizer=none" | FileCheck %s --check-prefix=NONE
// RUN: not offload-opt %s --offload-autodiff="precision=fp16-mixed loss-scale=static" 2>&1 | FileCheck %s --check-prefix=BAD
// RUN: not offload-opt %s --offload-autodiff="precision=fp16-mixed growth-interval=0" 2>&1 | FileCheck %s --check-prefix=BAD-INTERVAL

// CHECK-LABEL: func.func @mlp
// CHECK-SAME: %[[SCALE:[a-z0-9]+]]: tensor<f32> {offload.name = "amp.scale", offload.role = #offload.role<optimizer_state>}
// CHECK-SAME: %[[TRACKER:[a-z0-9]+]]: tensor<i64> {offload.name = "amp.growth_tracker", offload.role = #offload.role<optimizer_state>}
// CHECK-SAME: %[[SKIPPED:[a-z0-9]+]]: tensor<i64> {offload.name = "amp.skipped_steps", offload.role = #offload.role<optimizer_state>}
// CHECK-SAME: {offload.name = "amp.scale", offload.role = #offload.role<new_optimizer_state>}
// CHECK-SAME: {offload.name = "amp.growth_tracker", offload.role = #offload.role<new_optimizer_state>}
// CHECK-SAME: {offload.name = "amp.skipped_steps", offload.role = #offload.role<new_optimizer_state>}
// CHECK: offload.phase backward
// CHECK: %[[ZERO:.*]] = offload.fill {value = 0.000000e+00 : f64} : tensor<f32>
// CHECK: %[[INIT:.*]] = offload.fill {value = 6.553600e+04 : f64} : tensor<f32>
// CHECK: %[[FRESH:.*]] = offload.compare eq %[[SCALE]], %[[ZERO]]
// CHECK: %[[EFF:.*]] = offload.where %[[FRESH]], %[[INIT]], %[[SCALE]]
// The loss's cotangent is the scale: cross entropy's backward reads it.
// CHECK: offload.cross_entropy_backward %[[EFF]],
// CHECK: offload.phase optimizer
// CHECK: %[[INV:.*]] = offload.div %{{.*}}, %[[EFF]] : tensor<f32>, tensor<f32>
// CHECK: offload.mul_scalar %{{.*}} {value = 0.000000e+00 : f64} : tensor<16x16xf32>
// CHECK: offload.mul %{{.*}}, %[[INV]] : tensor<16x16xf32>, tensor<f32>
// CHECK: %[[FOUND:.*]] = offload.compare ne %[[TOTAL:.*]], %[[TOTAL]] : tensor<f32>, tensor<f32>
// CHECK-NOT: offload.where
// CHECK: offload.sgd_update %arg1, %{{.*}}, %{{.*}}, %{{.*}} skip_if %[[FOUND]] {{.*}} : tensor<16x16xf32>, tensor<i64>, tensor<i1>
// CHECK-NOT: offload.where
// CHECK: offload.sgd_update %arg2, %{{.*}}, %{{.*}}, %{{.*}} skip_if %[[FOUND]] {{.*}} : tensor<16x16xf32>, tensor<i64>, tensor<i1>
// CHECK-NOT: offload.where {{.*}}tensor<16x16xf32>
// CHECK-NOT: offload.where {{.*}}tensor<i64>, tensor<i64>
// GradScaler.update: growth after 2000 clean steps, backoff 0.5.
// CHECK: offload.fill {value = 2.000000e+03 : f64} : tensor<i64>
// CHECK: offload.mul_scalar %[[EFF]] {value = 2.000000e+00 : f64}
// CHECK: offload.mul_scalar %[[EFF]] {value = 5.000000e-01 : f64}
// CHECK: offload.where %[[FOUND]],
// CHECK: offload.copy %[[FOUND]] : tensor<i1> -> tensor<i64>
// NONE-NOT: amp.
// NONE-NOT: skip_if
// ADAMW: %[[FOUND:.*]] = offload.compare ne
// ADAMW-NOT: offload.where
// ADAMW: offload.adamw_update %arg1, {{.*}} skip_if %[[FOUND]] {{.*}} : tensor<16x16xf32>, tensor<i64>, tensor<i1>
// ADAMW-NOT: offload.where
// ADAMW: offload.adamw_update %arg2, {{.*}} skip_if %[[FOUND]] {{.*}} : tensor<16x16xf32>, tensor<i64>, tensor<i1>
// BAD: '{{.*}}static' is not a loss-scale; expected dynamic or none
// BAD-INTERVAL: growth-interval must be >= 1, got 0
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
