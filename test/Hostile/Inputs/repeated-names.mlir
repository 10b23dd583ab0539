// An MLP whose two ReLUs come from one source line: their saved values had
// one candidate name ("relu net.py:7") in the planner's problem and
// decisions files (issue 34); names now carry the op's position.
func.func @forward(%w1: tensor<16x8xf32> {offload.name = "fc1.weight", offload.role = #offload.role<parameter>},
                   %w2: tensor<16x16xf32> {offload.name = "fc2.weight", offload.role = #offload.role<parameter>},
                   %w3: tensor<4x16xf32> {offload.name = "fc3.weight", offload.role = #offload.role<parameter>},
                   %x: tensor<32x8xf32> {offload.name = "x", offload.role = #offload.role<input>},
                   %t: tensor<32xi64> {offload.name = "y", offload.role = #offload.role<input>})
    -> (tensor<f32> {offload.name = "loss", offload.role = #offload.role<loss>}) attributes {offload.step} {
  offload.phase forward
  %h1 = offload.matmul %x, %w1 {transpose_a = false, transpose_b = true} : tensor<32x8xf32>, tensor<16x8xf32> loc("net.py":6:0)
  %r1 = offload.relu %h1 : tensor<32x16xf32> loc("net.py":7:0)
  %h2 = offload.matmul %r1, %w2 {transpose_a = false, transpose_b = true} : tensor<32x16xf32>, tensor<16x16xf32> loc("net.py":6:0)
  %r2 = offload.relu %h2 : tensor<32x16xf32> loc("net.py":7:0)
  %z = offload.matmul %r2, %w3 {transpose_a = false, transpose_b = true} : tensor<32x16xf32>, tensor<4x16xf32> loc("net.py":8:0)
  %l = offload.cross_entropy %z, %t : tensor<32x4xf32>, tensor<32xi64> loc("net.py":9:0)
  return %l : tensor<f32>
}
