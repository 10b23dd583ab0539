// Slicing under mixed precision (issue 29): after --offload-autocast (or in
// the planner's rebuild of a bf16-mixed step) a linear reads its weight
// through a cast; the master is sliced, each slice cast, and the linear
// reads the concatenation of the casts, so the step computes what it
// computed unsliced, bit for bit (Integration/slice-parameters-bf16.test
// runs it).
// RUN: offload-opt %S/../../Inputs/mlp-forward.mlir --offload-autocast=precision=bf16-mixed \
// RUN:   --offload-slice-parameters="slice-bytes=256 report=-" 2>&1 | FileCheck %s
// RUN: offload-opt %S/../../Inputs/mlp-forward.mlir --offload-autocast=precision=fp16-mixed \
// RUN:   --offload-slice-parameters="slice-bytes=256 report=-" 2>&1 | FileCheck %s --check-prefix=F16
// RUN: offload-opt %S/../../Inputs/mlp-forward.mlir --offload-autocast=precision=bf16-mixed \
// RUN:   --offload-slice-parameters=slice-bytes=256 \
// RUN:   --offload-autodiff="optimizer=sgd momentum=0.9 return-gradients=true precision=bf16-mixed" \
// RUN:   2>&1 | FileCheck %s --check-prefix=AD
// RUN: offload-opt %s --offload-slice-parameters="slice-bytes=64 report=-" 2>&1 | FileCheck %s --check-prefix=WARN

// fc1.weight (16x8 f32, 512 bytes) becomes two 8-row f32 slices, each cast
// to bf16 and concatenated along rows; the bias (64 bytes) and its cast stay
// whole; fc2.weight (256 bytes) is not above the slice size.
// CHECK: slice parameters @forward: 'fc1.weight' (512 bytes) in 2 slices of up to 8 rows (256 bytes), each cast to bf16; the casts concatenated
// CHECK: func.func @forward(
// CHECK-NOT: fc1.weight"
// CHECK-SAME: %[[W0:arg[0-9]+]]: tensor<8x8xf32> {offload.name = "fc1.weight[0:8]", offload.role = #offload.role<parameter>, offload.slice = array<i64: 0, 8, 16>, offload.slice_of = "fc1.weight"}
// CHECK-SAME: %[[W1:arg[0-9]+]]: tensor<8x8xf32> {offload.name = "fc1.weight[8:16]", offload.role = #offload.role<parameter>, offload.slice = array<i64: 8, 16, 16>, offload.slice_of = "fc1.weight"}
// CHECK: %[[C0:.*]] = offload.copy %[[W0]] : tensor<8x8xf32> -> tensor<8x8xbf16>
// CHECK-NEXT: %[[C1:.*]] = offload.copy %[[W1]] : tensor<8x8xf32> -> tensor<8x8xbf16>
// CHECK-NEXT: %[[CAT:.*]] = offload.cat %[[C0]], %[[C1]] {dim = 0 : i64} : tensor<8x8xbf16>, tensor<8x8xbf16>
// CHECK-NEXT: %[[B:.*]] = offload.copy %{{.*}} : tensor<16xf32> -> tensor<16xbf16>
// CHECK-NEXT: offload.linear %{{.*}}, %[[CAT]], %[[B]] : tensor<32x8xbf16>, tensor<16x8xbf16>, tensor<16xbf16>
// CHECK-NOT: fc1.weight"

// F16: slice parameters @forward: 'fc1.weight' (512 bytes) in 2 slices of up to 8 rows (256 bytes), each cast to f16; the casts concatenated
// F16: offload.cat %{{.*}}, %{{.*}} {dim = 0 : i64} : tensor<8x8xf16>, tensor<8x8xf16>

// Autodiff with the same precision (what the planner's rebuild runs) leaves
// the casts as they are and gives each f32 slice its f32 gradient and
// momentum buffer: the bf16 weight gradient is sliced, each slice cast back.
// AD-DAG: tensor<8x8xf32> {offload.name = "grad:fc1.weight[0:8]", offload.role = #offload.role<gradient>, offload.slice = array<i64: 0, 8, 16>, offload.slice_of = "grad:fc1.weight"}
// AD-DAG: tensor<8x8xf32> {offload.name = "fc1.weight[8:16].momentum_buffer", offload.role = #offload.role<optimizer_state>, offload.slice = array<i64: 8, 16, 16>, offload.slice_of = "fc1.weight.momentum_buffer"}
// AD-DAG: offload.slice %{{.*}} {dim = 0 : i64, end = 8 : i64, offload.activation_grad, start = 0 : i64} : tensor<16x8xbf16>
// AD-DAG: offload.copy %{{.*}} : tensor<8x8xbf16> -> tensor<8x8xf32>

// A weight read through its cast and also directly is left whole, with the
// pass's warning (only a weight read by casts alone is sliced this way).
// WARN: warning: offload-slice-parameters: 'w' is read by offload.copy, not as a linear weight; not sliced
// WARN: slice parameters @mixed: no weight above 64 bytes to slice
func.func @mixed(%w: tensor<8x4xf32> {offload.name = "w", offload.role = #offload.role<parameter>},
                 %x: tensor<2x4xf32> {offload.name = "x", offload.role = #offload.role<input>})
    -> (tensor<2x8xf32> {offload.name = "y", offload.role = #offload.role<output>}) attributes {offload.step} {
  offload.phase forward
  %wl = offload.copy %w : tensor<8x4xf32> -> tensor<8x4xbf16>
  %xl = offload.copy %x : tensor<2x4xf32> -> tensor<2x4xbf16>
  %yl = offload.linear %xl, %wl : tensor<2x4xbf16>, tensor<8x4xbf16>
  %y = offload.copy %yl : tensor<2x8xbf16> -> tensor<2x8xf32>
  %z = offload.linear %x, %w : tensor<2x4xf32>, tensor<8x4xf32>
  %s = offload.add %y, %z : tensor<2x8xf32>, tensor<2x8xf32>
  return %s : tensor<2x8xf32>
}
