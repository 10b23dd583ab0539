// RUN: offload-opt %S/../../Inputs/mlp-forward.mlir --offload-slice-parameters="slice-bytes=256 report=-" 2>&1 | FileCheck %s
// RUN: offload-opt %S/../../Inputs/mlp-forward.mlir --offload-slice-parameters="slice-bytes=256 report=-" \
// RUN:   --offload-autodiff="optimizer=sgd momentum=0.9 return-gradients=true" 2>&1 | FileCheck %s --check-prefix=AD
// RUN: offload-opt %S/../../Inputs/mlp-forward.mlir --offload-slice-parameters=slice-bytes=256 \
// RUN:   --offload-autodiff="optimizer=sgd momentum=0.9 return-gradients=true" --offload-host-parameters \
// RUN:   --convert-offload-to-plan="output=%t.oflp" -o /dev/null
// RUN: offload-run --dump-plan %t.oflp | FileCheck %s --check-prefix=PLAN
// RUN: offload-opt %s --offload-slice-parameters="slice-bytes=64 report=-" 2>&1 | FileCheck %s --check-prefix=WARN
// RUN: not offload-opt %s --offload-slice-parameters=slice-bytes=0 2>&1 | FileCheck %s --check-prefix=ZERO
// ZERO: error: offload-slice-parameters: slice-bytes must be > 0

// fc1.weight (16x8 f32, 512 bytes) becomes two 8-row slices, and so does
// its bias; the linear becomes one linear per slice and a cat along the
// last dimension. fc2.weight (256 bytes) is not above the slice size.
// CHECK: slice parameters @forward: 'fc1.weight' (512 bytes) in 2 slices of up to 8 rows (256 bytes)
// CHECK: %arg0: tensor<4x16xf32> {offload.name = "fc2.weight"
// CHECK-SAME: %[[W0:arg[0-9]+]]: tensor<8x8xf32> {offload.name = "fc1.weight[0:8]", offload.role = #offload.role<parameter>, offload.slice = array<i64: 0, 8, 16>, offload.slice_of = "fc1.weight"}
// CHECK-SAME: %[[B0:arg[0-9]+]]: tensor<8xf32> {offload.name = "fc1.bias[0:8]", offload.role = #offload.role<parameter>, offload.slice = array<i64: 0, 8, 16>, offload.slice_of = "fc1.bias"}
// CHECK-SAME: %[[W1:arg[0-9]+]]: tensor<8x8xf32> {offload.name = "fc1.weight[8:16]", offload.role = #offload.role<parameter>, offload.slice = array<i64: 8, 16, 16>
// CHECK-SAME: %[[B1:arg[0-9]+]]: tensor<8xf32> {offload.name = "fc1.bias[8:16]"
// CHECK: %[[Y0:.*]] = offload.linear %{{.*}}, %[[W0]], %[[B0]]
// CHECK-NEXT: %[[Y1:.*]] = offload.linear %{{.*}}, %[[W1]], %[[B1]]
// CHECK-NEXT: offload.cat %[[Y0]], %[[Y1]] {dim = 1 : i64} : tensor<32x8xf32>, tensor<32x8xf32>
// CHECK-NOT: fc1.weight"

// Autodiff gives each slice its momentum buffer and gradient, as rows of
// the whole tensor's.
// AD-DAG: {offload.name = "fc1.weight[8:16].momentum_buffer", offload.role = #offload.role<optimizer_state>, offload.slice = array<i64: 8, 16, 16>, offload.slice_of = "fc1.weight.momentum_buffer"}
// AD-DAG: {offload.name = "grad:fc1.weight[0:8]", offload.role = #offload.role<gradient>, offload.slice = array<i64: 0, 8, 16>, offload.slice_of = "grad:fc1.weight"}
// AD-DAG: {offload.name = "fc1.bias[0:8]", offload.role = #offload.role<new_parameter>, offload.slice = array<i64: 0, 8, 16>, offload.slice_of = "fc1.bias"}

// The plan binds every slice to its bytes of the whole tensor.
// PLAN: in  "fc1.weight[8:16]" -> %{{[0-9]+}} (parameter) slice of "fc1.weight" at byte 256
// PLAN: in  "fc1.bias[8:16]" -> %{{[0-9]+}} (parameter) slice of "fc1.bias" at byte 32
// PLAN: in  "fc1.weight[8:16].momentum_buffer" -> %{{[0-9]+}} (optimizer_state) slice of "fc1.weight.momentum_buffer" at byte 256
// PLAN: out "grad:fc1.weight[8:16]" -> %{{[0-9]+}} (gradient) slice of "grad:fc1.weight" at byte 256

// A weight read by anything but a linear stays whole, with a warning.
// WARN: warning: offload-slice-parameters: 'w' is read by offload.matmul, not as a linear weight; not sliced
// WARN: slice parameters @tied: no weight above 64 bytes to slice
func.func @tied(%w: tensor<8x4xf32> {offload.name = "w", offload.role = #offload.role<parameter>},
                %x: tensor<2x4xf32> {offload.name = "x", offload.role = #offload.role<input>})
    -> (tensor<2x8xf32> {offload.name = "y", offload.role = #offload.role<output>}) attributes {offload.step} {
  offload.phase forward
  %y = offload.linear %x, %w : tensor<2x4xf32>, tensor<8x4xf32>
  %z = offload.matmul %x, %w {transpose_b = true} : tensor<2x4xf32>, tensor<8x4xf32>
  %s = offload.add %y, %z : tensor<2x8xf32>, tensor<2x8xf32>
  return %s : tensor<2x8xf32>
}
