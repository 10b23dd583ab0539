// A forward-only step: linear -> batch norm -> relu -> linear -> gelu -> add
// -> linear -> cross-entropy, with module paths as NameLocs (as the importer
// records them).
func.func @forward(%w1: tensor<16x8xf32> {offload.name = "fc1.weight", offload.role = #offload.role<parameter>},
                   %g: tensor<16xf32> {offload.name = "bn.weight", offload.role = #offload.role<parameter>},
                   %b: tensor<16xf32> {offload.name = "bn.bias", offload.role = #offload.role<parameter>},
                   %rm: tensor<16xf32> {offload.name = "bn.running_mean", offload.role = #offload.role<state>},
                   %rv: tensor<16xf32> {offload.name = "bn.running_var", offload.role = #offload.role<state>},
                   %w2: tensor<16x16xf32> {offload.name = "fc2.weight", offload.role = #offload.role<parameter>},
                   %w3: tensor<4x16xf32> {offload.name = "fc3.weight", offload.role = #offload.role<parameter>},
                   %x: tensor<32x8xf32> {offload.name = "x", offload.role = #offload.role<input>},
                   %t: tensor<32xi64> {offload.name = "y", offload.role = #offload.role<input>})
    -> (tensor<f32> {offload.name = "loss", offload.role = #offload.role<loss>},
        tensor<16xf32> {offload.name = "bn.running_mean", offload.role = #offload.role<new_state>},
        tensor<16xf32> {offload.name = "bn.running_var", offload.role = #offload.role<new_state>}) attributes {offload.step} {
  offload.phase forward
  %h = offload.linear %x, %w1 : tensor<32x8xf32>, tensor<16x8xf32> loc("block1.fc1")
  %n, %m, %is, %nrm, %nrv = offload.batch_norm %h, %g, %b, %rm, %rv {momentum = 0.1 : f64, eps = 1.0e-5 : f64}
      : tensor<32x16xf32>, tensor<16xf32> loc("block1.bn")
  %r = offload.relu %n : tensor<32x16xf32> loc("block1.relu")
  %h2 = offload.linear %r, %w2 : tensor<32x16xf32>, tensor<16x16xf32> loc("block2.fc2")
  %a = offload.gelu %h2 : tensor<32x16xf32> loc("block2.gelu")
  %s = offload.add %a, %r : tensor<32x16xf32>, tensor<32x16xf32> loc("block2.add")
  %z = offload.linear %s, %w3 : tensor<32x16xf32>, tensor<4x16xf32> loc("head")
  %l = offload.cross_entropy %z, %t : tensor<32x4xf32>, tensor<32xi64> loc("loss")
  return %l, %nrm, %nrv : tensor<f32>, tensor<16xf32>, tensor<16xf32>
}
