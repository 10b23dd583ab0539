func.func @forward(%w: tensor<4x3x3x3xf32> {offload.name = "conv.weight", offload.role = #offload.role<parameter>},
                   %x: tensor<2x3x8x8xf32> {offload.name = "x", offload.role = #offload.role<input>},
                   %t: tensor<2xi64> {offload.name = "y", offload.role = #offload.role<input>})
    -> (tensor<f32> {offload.name = "loss", offload.role = #offload.role<loss>}) attributes {offload.step} {
  offload.phase forward
  %c = offload.conv2d %x, %w {stride = array<i64: 1, 1>, padding = array<i64: 1, 1>, dilation = array<i64: 1, 1>, groups = 1 : i64} : tensor<2x3x8x8xf32>, tensor<4x3x3x3xf32>
  %r = offload.relu %c : tensor<2x4x8x8xf32>
  %p, %i = offload.max_pool2d %r {kernel_size = array<i64: 2, 2>, stride = array<i64: 2, 2>, padding = array<i64: 0, 0>, dilation = array<i64: 1, 1>} : tensor<2x4x8x8xf32>
  %a = offload.adaptive_avg_pool2d %p {output_size = array<i64: 1, 1>} : tensor<2x4x4x4xf32>
  %f = offload.reshape %a : tensor<2x4x1x1xf32> -> tensor<2x4xf32>
  %l = offload.cross_entropy %f, %t : tensor<2x4xf32>, tensor<2xi64>
  return %l : tensor<f32>
}
