// Gradient accumulation's sums (`offload.add {offload.accumulate}`) are
// written over their accumulator when the add is its only reader: one
// buffer per accumulator for the whole step, as `param.grad += g`.
// RUN: offload-opt %s -split-input-file --offload-memory-report 2>&1 | FileCheck %s

// In place: x, g0 and g1 are alive at the add (3 x 4096 bytes); the sum
// takes g0's buffer.
// CHECK-LABEL: memory plan of @in_place
// CHECK-NEXT: peak device bytes: 12288 at op
func.func @in_place(%x: tensor<1024xf32> {offload.name = "x", offload.role = #offload.role<input>})
    -> (tensor<1024xf32> {offload.name = "grad:w", offload.role = #offload.role<gradient>}) attributes {offload.step} {
  offload.phase forward micro_batch 0
  offload.phase backward micro_batch 0
  %g0 = offload.mul_scalar %x {value = 2.0 : f64} : tensor<1024xf32>
  offload.phase forward micro_batch 1
  offload.phase backward micro_batch 1
  %g1 = offload.mul_scalar %x {value = 3.0 : f64} : tensor<1024xf32>
  %s = offload.add %g0, %g1 {offload.accumulate} : tensor<1024xf32>, tensor<1024xf32>
  return %s : tensor<1024xf32>
}

// -----

// Not in place: the accumulator is read after the add (the sum needs its
// own buffer), or the add is not an accumulation.
// CHECK-LABEL: memory plan of @read_after
// CHECK-NEXT: peak device bytes: 16384 at op #{{[0-9]+}} (offload.add)
func.func @read_after(%x: tensor<1024xf32> {offload.name = "x", offload.role = #offload.role<input>})
    -> (tensor<1024xf32> {offload.name = "grad:w", offload.role = #offload.role<gradient>},
        tensor<1024xf32> {offload.name = "grad:v", offload.role = #offload.role<gradient>}) attributes {offload.step} {
  offload.phase forward micro_batch 0
  offload.phase backward micro_batch 0
  %g0 = offload.mul_scalar %x {value = 2.0 : f64} : tensor<1024xf32>
  offload.phase forward micro_batch 1
  offload.phase backward micro_batch 1
  %g1 = offload.mul_scalar %x {value = 3.0 : f64} : tensor<1024xf32>
  %s = offload.add %g0, %g1 {offload.accumulate} : tensor<1024xf32>, tensor<1024xf32>
  return %s, %g0 : tensor<1024xf32>, tensor<1024xf32>
}

// -----

// CHECK-LABEL: memory plan of @plain_add
// CHECK-NEXT: peak device bytes: 16384 at op #{{[0-9]+}} (offload.add)
func.func @plain_add(%x: tensor<1024xf32> {offload.name = "x", offload.role = #offload.role<input>})
    -> (tensor<1024xf32> {offload.name = "grad:w", offload.role = #offload.role<gradient>}) attributes {offload.step} {
  offload.phase forward
  offload.phase backward
  %g0 = offload.mul_scalar %x {value = 2.0 : f64} : tensor<1024xf32>
  %g1 = offload.mul_scalar %x {value = 3.0 : f64} : tensor<1024xf32>
  %s = offload.add %g0, %g1 : tensor<1024xf32>, tensor<1024xf32>
  return %s : tensor<1024xf32>
}
