// A linear classifier whose weight dominates the step: 4096 classes x 64
// features (1 MiB fp32) after a 64x64 hidden layer, batch 8. The planner
// must slice fc2.weight to meet budgets below the whole weight's footprint.
func.func @forward(%w1: tensor<64x64xf32> {offload.name = "fc1.weight", offload.role = #offload.role<parameter>},
                   %b1: tensor<64xf32> {offload.name = "fc1.bias", offload.role = #offload.role<parameter>},
                   %w2: tensor<4096x64xf32> {offload.name = "fc2.weight", offload.role = #offload.role<parameter>},
                   %b2: tensor<4096xf32> {offload.name = "fc2.bias", offload.role = #offload.role<parameter>},
                   %x: tensor<8x64xf32> {offload.name = "x", offload.role = #offload.role<input>},
                   %t: tensor<8xi64> {offload.name = "y", offload.role = #offload.role<input>})
    -> (tensor<f32> {offload.name = "loss", offload.role = #offload.role<loss>}) attributes {offload.step} {
  offload.phase forward
  %h = offload.linear %x, %w1, %b1 : tensor<8x64xf32>, tensor<64x64xf32>, tensor<64xf32>
  %r = offload.relu %h : tensor<8x64xf32>
  %z = offload.linear %r, %w2, %b2 : tensor<8x64xf32>, tensor<4096x64xf32>, tensor<4096xf32>
  %l = offload.cross_entropy %z, %t : tensor<8x4096xf32>, tensor<8xi64>
  return %l : tensor<f32>
}
