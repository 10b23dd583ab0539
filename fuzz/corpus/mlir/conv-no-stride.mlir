func.func @f(%x: tensor<2x3x8x8xf32>, %w: tensor<4x3x3x3xf32>) {
  %y = offload.conv2d %x, %w {padding = array<i64: 0, 0>, dilation = array<i64: 1, 1>, groups = 1 : i64} : tensor<2x3x8x8xf32>, tensor<4x3x3x3xf32>
  return
}
