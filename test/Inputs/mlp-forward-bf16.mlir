func.func @forward(%w1: tensor<16x8xbf16> {offload.name = "fc1.weight", offload.role = #offload.role<parameter>},
                   %b1: tensor<16xbf16> {offload.name = "fc1.bias", offload.role = #offload.role<parameter>},
                   %w2: tensor<4x16xbf16> {offload.name = "fc2.weight", offload.role = #offload.role<parameter>},
                   %b2: tensor<4xbf16> {offload.name = "fc2.bias", offload.role = #offload.role<parameter>},
                   %x: tensor<32x8xbf16> {offload.name = "x", offload.role = #offload.role<input>},
                   %t: tensor<32xi64> {offload.name = "y", offload.role = #offload.role<input>})
    -> (tensor<bf16> {offload.name = "loss", offload.role = #offload.role<loss>}) attributes {offload.step} {
  offload.phase forward
  %h = offload.linear %x, %w1, %b1 : tensor<32x8xbf16>, tensor<16x8xbf16>, tensor<16xbf16>
  %r = offload.relu %h : tensor<32x16xbf16>
  %z = offload.linear %r, %w2, %b2 : tensor<32x16xbf16>, tensor<4x16xbf16>, tensor<4xbf16>
  %l = offload.cross_entropy %z, %t : tensor<32x4xbf16>, tensor<32xi64>
  return %l : tensor<bf16>
}
