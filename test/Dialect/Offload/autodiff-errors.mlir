// Autodiff refuses, by op name and location, what it cannot differentiate,
// instead of treating it as a constant (a silent zero gradient).
// RUN: offload-opt %s -split-input-file --offload-autodiff="optimizer=none" -verify-diagnostics

// An op without a VJP (here a backward op) on the path from a parameter to
// the loss.
func.func @no_vjp(%w: tensor<4xf32> {offload.name = "w", offload.role = #offload.role<parameter>},
                  %x: tensor<4xf32> {offload.name = "x", offload.role = #offload.role<input>})
    -> (tensor<f32> {offload.name = "loss", offload.role = #offload.role<loss>}) attributes {offload.step} {
  offload.phase forward
  // expected-error @+1 {{'offload.relu_backward' op cannot be differentiated: it is on the path from the parameters to the loss but has no VJP}}
  %r = offload.relu_backward %x, %w : tensor<4xf32>
  %l = offload.reduce_sum %r : tensor<4xf32>
  return %l : tensor<f32>
}

// -----

// A VJP that gives no gradient for an operand computed from a parameter:
// batch-norm's running statistics are state, not trained.
func.func @no_gradient_for_operand(
    %x: tensor<2x3xf32> {offload.name = "x", offload.role = #offload.role<input>},
    %w: tensor<3xf32> {offload.name = "w", offload.role = #offload.role<parameter>})
    -> (tensor<f32> {offload.name = "loss", offload.role = #offload.role<loss>}) attributes {offload.step} {
  offload.phase forward
  %rm = offload.mul_scalar %w {value = 2.0 : f64} : tensor<3xf32>
  // expected-error @+1 {{'offload.batch_norm' op cannot be differentiated with respect to operand #3}}
  %y, %m, %is, %nrm, %nrv = offload.batch_norm %x, %w, %w, %rm, %w {momentum = 0.1 : f64, eps = 1.0e-5 : f64} : tensor<2x3xf32>, tensor<3xf32>
  %l = offload.reduce_sum %y : tensor<2x3xf32>
  return %l : tensor<f32>
}
