// Gradient accumulation: --offload-autodiff micro-batches=K.
// RUN: offload-opt %s --offload-autodiff="optimizer=sgd lr=0.1 momentum=0.9 micro-batches=2" | FileCheck %s
// K=1 is today's step, bit for bit (the recorded options aside):
// RUN: offload-opt %s --offload-autodiff="optimizer=sgd micro-batches=1" | sed 's/ micro-batches=1//' > %t.k1
// RUN: offload-opt %s --offload-autodiff="optimizer=sgd" | sed 's/ micro-batches=1//' > %t.default
// RUN: diff %t.k1 %t.default
// RUN: offload-opt %s --offload-autodiff="optimizer=sgd micro-batches=4" | FileCheck %s --check-prefix=K4
// RUN: offload-opt %s --offload-autodiff="optimizer=none micro-batches=2" | FileCheck %s --check-prefix=NONE
// RUN: offload-opt %s --offload-autodiff="optimizer=sgd micro-batches=2" --offload-cost-report -o /dev/null 2>&1 | FileCheck %s --check-prefix=COST

// Reports (and plans) name a micro-batch's phases <phase>.<index>.
// COST: phase forward.0
// COST-NEXT: phase backward.0
// COST-NEXT: phase forward.1
// COST-NEXT: phase backward.1
// COST-NEXT: phase optimizer

// The MLP of autodiff.mlir at batch 32 in two micro-batches of 16 rows:
// micro-batch 0 reads rows [0, 16) of x and y, micro-batch 1 rows [16, 32)
// (sliced again in backward rather than saved), each backward starts from
// d(loss_i / 2) = 0.5, the gradients are summed where micro-batch 1's are
// final, the loss is the mean of the two, one update per parameter reads
// the sums.
// CHECK-LABEL: func.func @mlp
// CHECK: offload.phase forward micro_batch 0
// CHECK-NEXT: %[[X0:.*]] = offload.slice %arg4 {dim = 0 : i64, end = 16 : i64, start = 0 : i64} : tensor<32x8xf32>
// CHECK-NEXT: %[[Y0:.*]] = offload.slice %arg5 {dim = 0 : i64, end = 16 : i64, start = 0 : i64} : tensor<32xi64>
// CHECK-NEXT: offload.linear %[[X0]], %arg0, %arg1 : tensor<16x8xf32>
// CHECK: %[[L0:.*]] = offload.cross_entropy %{{.*}}, %[[Y0]] : tensor<16x4xf32>, tensor<16xi64>
// CHECK-NEXT: offload.phase backward micro_batch 0
// CHECK-NEXT: offload.fill {value = 5.000000e-01 : f64} : tensor<f32>
// CHECK: %[[DW2A:.*]] = offload.matmul %{{.*}}, %{{.*}} {transpose_a = true} : tensor<16x4xf32>, tensor<16x16xf32>
// CHECK: offload.slice %arg4 {dim = 0 : i64, end = 16 : i64, start = 0 : i64}
// CHECK: offload.phase forward micro_batch 1
// CHECK-NEXT: %[[X1:.*]] = offload.slice %arg4 {dim = 0 : i64, end = 32 : i64, start = 16 : i64} : tensor<32x8xf32>
// CHECK-NEXT: offload.slice %arg5 {dim = 0 : i64, end = 32 : i64, start = 16 : i64} : tensor<32xi64>
// CHECK-NEXT: offload.linear %[[X1]], %arg0, %arg1 : tensor<16x8xf32>
// CHECK: %[[L1:.*]] = offload.cross_entropy
// CHECK-NEXT: %[[SUM:.*]] = offload.add %[[L0]], %[[L1]] {offload.accumulate} : tensor<f32>, tensor<f32>
// CHECK-NEXT: %[[MEAN:.*]] = offload.mul_scalar %[[SUM]] {value = 5.000000e-01 : f64} : tensor<f32>
// CHECK-NEXT: offload.phase backward micro_batch 1
// CHECK-NEXT: offload.fill {value = 5.000000e-01 : f64} : tensor<f32>
// CHECK: %[[DW2B:.*]] = offload.matmul %{{.*}}, %{{.*}} {transpose_a = true} : tensor<16x4xf32>, tensor<16x16xf32>
// CHECK-NEXT: %[[DW2:.*]] = offload.add %[[DW2A]], %[[DW2B]] {offload.accumulate} : tensor<4x16xf32>, tensor<4x16xf32>
// CHECK: offload.slice %arg4 {dim = 0 : i64, end = 32 : i64, start = 16 : i64}
// CHECK: offload.phase optimizer
// CHECK-NOT: offload.phase
// CHECK: offload.sgd_update %arg2, %[[DW2]],
// CHECK: return %[[MEAN]],

// K4-COUNT-4: offload.slice %arg4 {dim = 0 : i64
// K4: offload.phase forward micro_batch 3
// K4-NEXT: offload.slice %arg4 {dim = 0 : i64, end = 32 : i64, start = 24 : i64} : tensor<32x8xf32>
// K4: offload.mul_scalar %{{.*}} {value = 2.500000e-01 : f64} : tensor<f32>
// K4-NEXT: offload.phase backward micro_batch 3
// K4-NEXT: offload.fill {value = 2.500000e-01 : f64} : tensor<f32>
// K4: offload.phase optimizer

// Gradients only: the sums are the results.
// NONE: offload.phase backward micro_batch 1
// NONE: %[[G:.*]] = offload.add {{.*}} : tensor<16x8xf32>, tensor<16x8xf32>
// NONE-NOT: offload.phase optimizer
// NONE: return %{{.*}}, %[[G]],
func.func @mlp(%w1: tensor<16x8xf32> {offload.name = "fc1.weight", offload.role = #offload.role<parameter>},
               %b1: tensor<16xf32> {offload.name = "fc1.bias", offload.role = #offload.role<parameter>},
               %w2: tensor<4x16xf32> {offload.name = "fc2.weight", offload.role = #offload.role<parameter>},
               %b2: tensor<4xf32> {offload.name = "fc2.bias", offload.role = #offload.role<parameter>},
               %x: tensor<32x8xf32> {offload.name = "x", offload.role = #offload.role<input>},
               %t: tensor<32xi64> {offload.name = "y", offload.role = #offload.role<input>})
    -> (tensor<f32> {offload.name = "loss", offload.role = #offload.role<loss>}) attributes {offload.step} {
  offload.phase forward
  %h = offload.linear %x, %w1, %b1 : tensor<32x8xf32>, tensor<16x8xf32>, tensor<16xf32>
  %r = offload.relu %h : tensor<32x16xf32>
  %z = offload.linear %r, %w2, %b2 : tensor<32x16xf32>, tensor<4x16xf32>, tensor<4xf32>
  %l = offload.cross_entropy %z, %t : tensor<32x4xf32>, tensor<32xi64>
  return %l : tensor<f32>
}
