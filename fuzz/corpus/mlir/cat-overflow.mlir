func.func @f(%x: tensor<4x9223372036854775807xf32>) {
  %0 = offload.cat %x, %x {dim = 1 : i64} : tensor<4x9223372036854775807xf32>, tensor<4x9223372036854775807xf32>
  return
}
