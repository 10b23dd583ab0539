func.func @forward(%w1: tensor<16x8xf32> {offload.name = "fc1.weight", offload.role = #offload.role<parameter>},
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
