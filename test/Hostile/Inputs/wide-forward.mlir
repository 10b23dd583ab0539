// A step the host kernels split into many chunks (a 1x1 convolution with
// 2048 output channels, one chunk per channel): --threads N starts N - 1
// pool workers.
func.func @forward(%w: tensor<2048x1x1x1xf32> {offload.name = "conv.weight", offload.role = #offload.role<parameter>},
                   %x: tensor<1x1x2x2xf32> {offload.name = "x", offload.role = #offload.role<input>})
    -> (tensor<f32> {offload.name = "loss", offload.role = #offload.role<loss>}) attributes {offload.step} {
  offload.phase forward
  %y = offload.conv2d %x, %w {stride = array<i64: 1, 1>, padding = array<i64: 0, 0>, dilation = array<i64: 1, 1>, groups = 1 : i64} : tensor<1x1x2x2xf32>, tensor<2048x1x1x1xf32>
  %l = offload.reduce_sum %y {dims = array<i64: 0, 1, 2, 3>, keepdim = false} : tensor<1x2048x2x2xf32>
  return %l : tensor<f32>
}
