// Every verifier message of the offload dialect.
// RUN: offload-opt %s -split-input-file -verify-diagnostics

// expected-error @+1 {{'offload.step' must be a unit attribute}}
func.func @step_not_unit() attributes {offload.step = 1 : i32} { return }

// -----

// expected-error @+1 {{'offload.step' may only be attached to a function}}
module attributes {offload.step} {}

// -----

// expected-error @+1 {{a training step ('offload.step') needs a body}}
func.func private @step_decl() attributes {offload.step}

// -----

// expected-error @+1 {{a training step must have exactly one block}}
func.func @two_blocks() attributes {offload.step} {
  cf.br ^bb1
^bb1:
  return
}

// -----

// expected-error @+1 {{argument #0 of a training step needs attributes 'offload.name' (a string) and 'offload.role' (#offload.role<...>)}}
func.func @no_name(%x: tensor<4xf32>) attributes {offload.step} { return }

// -----

// A role is an enum attribute: an unknown one fails in the parser.
// expected-error @+2 {{expected ::mlir::offload::Role to be one of: parameter, state, optimizer_state, input, rng_seed, output_gradient, loss, new_parameter, new_state, new_optimizer_state, gradient, output, input_gradient}}
// expected-error @+1 {{failed to parse Offload_RoleAttr parameter 'value'}}
func.func @bad_role(%x: tensor<4xf32> {offload.name = "x", offload.role = #offload.role<weights>}) attributes {offload.step} { return }

// -----

// expected-error @+1 {{argument #0 ('x') has role 'loss', which is a result role; expected parameter, state, optimizer_state, input, rng_seed or output_gradient}}
func.func @result_role_on_argument(%x: tensor<4xf32> {offload.name = "x", offload.role = #offload.role<loss>}) attributes {offload.step} { return }

// -----

// The role as a string (the form before roles were an enum) is refused.
// expected-error @+1 {{argument #0 of a training step needs attributes 'offload.name' (a string) and 'offload.role' (#offload.role<...>)}}
func.func @string_role(%x: tensor<4xf32> {offload.name = "x", offload.role = "input"}) attributes {offload.step} { return }

// -----

// expected-error @+1 {{two arguments are named 'x'}}
func.func @dup_name(%x: tensor<4xf32> {offload.name = "x", offload.role = #offload.role<input>},
                    %y: tensor<4xf32> {offload.name = "x", offload.role = #offload.role<input>}) attributes {offload.step} { return }

// -----

// expected-error @+1 {{result #0 of a training step needs attributes}}
func.func @res_no_name(%x: tensor<4xf32> {offload.name = "x", offload.role = #offload.role<input>}) -> tensor<4xf32> attributes {offload.step} {
  return %x : tensor<4xf32>
}

// -----

// expected-error @+1 {{result #0 ('l') has role 'parameter', which is an argument role; expected loss, new_parameter, new_state, new_optimizer_state, gradient, output or input_gradient}}
func.func @res_bad_role(%x: tensor<4xf32> {offload.name = "x", offload.role = #offload.role<input>})
    -> (tensor<4xf32> {offload.name = "l", offload.role = #offload.role<parameter>}) attributes {offload.step} {
  return %x : tensor<4xf32>
}

// -----

func.func @twice() attributes {offload.step} {
  offload.phase forward
  // expected-error @+1 {{phase 'forward' is marked twice in one step}}
  offload.phase forward
  return
}

// -----

func.func @out_of_order() attributes {offload.step} {
  // expected-note @+1 {{previous phase marker here}}
  offload.phase optimizer
  // expected-error @+1 {{phase 'backward' cannot follow 'optimizer'}}
  offload.phase backward
  return
}

// -----

func.func @both_backwards() attributes {offload.step} {
  offload.phase backward
  // expected-error @+1 {{a step has either one 'backward' phase or the split 'backward_input'/'backward_weight' phases, not both}}
  offload.phase backward_weight
  return
}

// -----

func.func @save_in_backward(%x: tensor<4xf32> {offload.name = "x", offload.role = #offload.role<input>}) attributes {offload.step} {
  // expected-note @+1 {{phase begins here}}
  offload.phase backward
  // expected-error @+1 {{saves a value in phase 'backward'; saved values are made in the forward phase}}
  %s = offload.save %x : tensor<4xf32>
  return
}

// -----

func.func @restore_in_forward(%x: tensor<4xf32> {offload.name = "x", offload.role = #offload.role<input>}) attributes {offload.step} {
  %s = offload.save %x : tensor<4xf32>
  // expected-error @+1 {{restores a saved value in the forward phase}}
  %r = offload.restore %s : !offload.saved<tensor<4xf32>>
  return
}

// -----

func.func @missing_wait(%x: tensor<4xf32> {offload.name = "x", offload.role = #offload.role<input>}) attributes {offload.step} {
  %h = offload.to_host %x : tensor<4xf32>
  // expected-note @+1 {{the copy is issued here}}
  %d, %t = offload.to_device async %h : !offload.host<tensor<4xf32>>
  // expected-error @+1 {{reads the result of an async offload.to_device before an offload.wait on its token}}
  %y = offload.relu %d : tensor<4xf32>
  return
}

// -----

func.func @joined_wait_ok(%x: tensor<4xf32> {offload.name = "x", offload.role = #offload.role<input>}) attributes {offload.step} {
  %h = offload.to_host %x : tensor<4xf32>
  %d, %t = offload.to_device async %h : !offload.host<tensor<4xf32>>
  %j = offload.wait async [%t]
  offload.wait [%j]
  %y = offload.relu %d : tensor<4xf32>
  return
}

// -----

// expected-error @+1 {{'offload.name' must be a string attribute}}
func.func @bad_name() attributes {offload.name = 3 : i32} { return }

// -----

// expected-error @+1 {{unknown offload attribute 'offload.color'}}
func.func @unknown_attr() attributes {offload.color = "red"} { return }

// -----

func.func @recompute_arity(%x: tensor<4xf32>) {
  // expected-error @+1 {{has 1 inputs but its region takes 2 arguments}}
  %r = offload.recompute (%x) : (tensor<4xf32>) -> tensor<4xf32> {
  ^bb0(%a: tensor<4xf32>, %b: tensor<4xf32>):
    offload.yield %a : tensor<4xf32>
  }
  return
}

// -----

func.func @recompute_types(%x: tensor<4xf32>) {
  // expected-error @+1 {{input #0 has type 'tensor<4xf32>' but region argument #0 has type 'tensor<4xf64>'}}
  %r = offload.recompute (%x) : (tensor<4xf32>) -> tensor<4xf32> {
  ^bb0(%a: tensor<4xf64>):
    offload.yield %x : tensor<4xf32>
  }
  return
}

// -----

func.func @recompute_yield(%x: tensor<4xf32>) {
  // expected-error @+1 {{yields 0 values of types () but returns ('tensor<4xf32>')}}
  %r = offload.recompute (%x) : (tensor<4xf32>) -> tensor<4xf32> {
  ^bb0(%a: tensor<4xf32>):
    offload.yield
  }
  return
}

// -----

func.func @recompute_isolated(%x: tensor<4xf32>) {
  // expected-note @+1 {{required by region isolation constraints}}
  %r = offload.recompute () : () -> tensor<4xf32> {
    // expected-error @+1 {{using value defined outside the region}}
    %y = offload.relu %x : tensor<4xf32>
    offload.yield %y : tensor<4xf32>
  }
  return
}

// -----

func.func @sgd_lr(%p: tensor<4xf32>, %s: tensor<i64>) {
  // expected-error @+1 {{invalid learning rate -1 (must be >= 0)}}
  %a, %b, %c = offload.sgd_update %p, %p, %p, %s {lr = -1.0 : f64, momentum = 0.0 : f64, dampening = 0.0 : f64, weight_decay = 0.0 : f64, nesterov = false} : tensor<4xf32>, tensor<i64>
  return
}

// -----

func.func @sgd_momentum(%p: tensor<4xf32>, %s: tensor<i64>) {
  // expected-error @+1 {{invalid momentum -0.5 (must be >= 0)}}
  %a, %b, %c = offload.sgd_update %p, %p, %p, %s {lr = 1.0 : f64, momentum = -0.5 : f64, dampening = 0.0 : f64, weight_decay = 0.0 : f64, nesterov = false} : tensor<4xf32>, tensor<i64>
  return
}

// -----

func.func @sgd_wd(%p: tensor<4xf32>, %s: tensor<i64>) {
  // expected-error @+1 {{invalid weight_decay -1 (must be >= 0)}}
  %a, %b, %c = offload.sgd_update %p, %p, %p, %s {lr = 1.0 : f64, momentum = 0.0 : f64, dampening = 0.0 : f64, weight_decay = -1.0 : f64, nesterov = false} : tensor<4xf32>, tensor<i64>
  return
}

// -----

func.func @sgd_nesterov(%p: tensor<4xf32>, %s: tensor<i64>) {
  // expected-error @+1 {{nesterov momentum requires a momentum > 0 and zero dampening}}
  %a, %b, %c = offload.sgd_update %p, %p, %p, %s {lr = 1.0 : f64, momentum = 0.9 : f64, dampening = 0.1 : f64, weight_decay = 0.0 : f64, nesterov = true} : tensor<4xf32>, tensor<i64>
  return
}

// -----

func.func @sgd_mixed_spaces(%p: !offload.host<tensor<4xf32>>, %s: tensor<i64>) {
  // expected-error @+1 {{mixes device and host operands; an update runs on the device or, with every operand an !offload.host value, on the host}}
  %a, %b, %c = "offload.sgd_update"(%p, %p, %p, %s) {lr = 1.0 : f64, momentum = 0.0 : f64, dampening = 0.0 : f64, weight_decay = 0.0 : f64, nesterov = false} : (!offload.host<tensor<4xf32>>, !offload.host<tensor<4xf32>>, !offload.host<tensor<4xf32>>, tensor<i64>) -> (!offload.host<tensor<4xf32>>, !offload.host<tensor<4xf32>>, tensor<i64>)
  return
}

// -----

func.func @sgd_skip_mixed_spaces(%p: tensor<4xf32>, %s: tensor<i64>, %f: !offload.host<tensor<i1>>) {
  // expected-error @+1 {{mixes device and host operands; an update runs on the device or, with every operand an !offload.host value, on the host}}
  %a, %b, %c = offload.sgd_update %p, %p, %p, %s skip_if %f {lr = 1.0 : f64, momentum = 0.0 : f64, dampening = 0.0 : f64, weight_decay = 0.0 : f64, nesterov = false} : tensor<4xf32>, tensor<i64>, !offload.host<tensor<i1>>
  return
}

// -----

func.func @sgd_skip_not_i1(%p: tensor<4xf32>, %s: tensor<i64>, %f: tensor<f32>) {
  // expected-error @+1 {{operand #4 must be 0-d i1 tensor, or one in host memory}}
  %a, %b, %c = offload.sgd_update %p, %p, %p, %s skip_if %f {lr = 1.0 : f64, momentum = 0.0 : f64, dampening = 0.0 : f64, weight_decay = 0.0 : f64, nesterov = false} : tensor<4xf32>, tensor<i64>, tensor<f32>
  return
}

// -----

func.func @adamw_skip_not_scalar(%p: tensor<4xf32>, %s: tensor<i64>, %f: tensor<2xi1>) {
  // expected-error @+1 {{operand #5 must be 0-d i1 tensor, or one in host memory}}
  %a, %b, %c, %d = offload.adamw_update %p, %p, %p, %p, %s skip_if %f {lr = 1.0 : f64, beta1 = 0.9 : f64, beta2 = 0.999 : f64, eps = 1.0e-8 : f64, weight_decay = 0.0 : f64} : tensor<4xf32>, tensor<i64>, tensor<2xi1>
  return
}

// -----

func.func @adamw_host_skip_not_i1(%p: !offload.host<tensor<4xf32>>, %s: !offload.host<tensor<i64>>, %f: !offload.host<tensor<f32>>) {
  // expected-error @+1 {{skip_if (found_inf) must be a 0-d i1 tensor, got '!offload.host<tensor<f32>>'}}
  %a, %b, %c, %d = offload.adamw_update %p, %p, %p, %p, %s skip_if %f {lr = 1.0 : f64, beta1 = 0.9 : f64, beta2 = 0.999 : f64, eps = 1.0e-8 : f64, weight_decay = 0.0 : f64} : !offload.host<tensor<4xf32>>, !offload.host<tensor<i64>>, !offload.host<tensor<f32>>
  return
}

// -----

func.func @sgd_host_step_not_i64(%p: !offload.host<tensor<4xf32>>, %s: !offload.host<tensor<f32>>) {
  // expected-error @+1 {{step must be a 0-d i64 tensor, got '!offload.host<tensor<f32>>'}}
  %a, %b, %c = offload.sgd_update %p, %p, %p, %s {lr = 1.0 : f64, momentum = 0.0 : f64, dampening = 0.0 : f64, weight_decay = 0.0 : f64, nesterov = false} : !offload.host<tensor<4xf32>>, !offload.host<tensor<f32>>
  return
}

// -----

func.func @adamw_f16_moments(%p: tensor<4xf32>, %m: tensor<4xf16>, %s: tensor<i64>) {
  // expected-error @+1 {{moments of type 'f16' for a 'f32' parameter; they must be the parameter's type, or bf16 for f32}}
  %a, %b, %c, %d = offload.adamw_update %p, %p, %m, %m, %s {lr = 1.0 : f64, beta1 = 0.9 : f64, beta2 = 0.999 : f64, eps = 1.0e-8 : f64, weight_decay = 0.0 : f64} : tensor<4xf32> moments tensor<4xf16>, tensor<i64>
  return
}

// -----

func.func @adamw_bf16_moments_f64(%p: tensor<4xf64>, %m: tensor<4xbf16>, %s: tensor<i64>) {
  // expected-error @+1 {{moments of type 'bf16' for a 'f64' parameter; they must be the parameter's type, or bf16 for f32}}
  %a, %b, %c, %d = offload.adamw_update %p, %p, %m, %m, %s {lr = 1.0 : f64, beta1 = 0.9 : f64, beta2 = 0.999 : f64, eps = 1.0e-8 : f64, weight_decay = 0.0 : f64} : tensor<4xf64> moments tensor<4xbf16>, tensor<i64>
  return
}

// -----

func.func @adamw_moments_shape(%p: tensor<4xf32>, %m: tensor<5xbf16>, %s: tensor<i64>) {
  // expected-error @+1 {{exp_avg has shape 'tensor<5xbf16>' but param is 'tensor<4xf32>'}}
  %a, %b, %c, %d = offload.adamw_update %p, %p, %m, %m, %s {lr = 1.0 : f64, beta1 = 0.9 : f64, beta2 = 0.999 : f64, eps = 1.0e-8 : f64, weight_decay = 0.0 : f64} : tensor<4xf32> moments tensor<5xbf16>, tensor<i64>
  return
}

// -----

func.func @sgd_types(%p: tensor<4xf32>, %g: tensor<5xf32>, %s: tensor<i64>) {
  // expected-error @+1 {{failed to verify that all of {param, grad, momentum_buffer, new_param, new_momentum_buffer} have same type}}
  %a, %b, %c = "offload.sgd_update"(%p, %g, %p, %s) {lr = 1.0 : f64, momentum = 0.0 : f64, dampening = 0.0 : f64, weight_decay = 0.0 : f64, nesterov = false} : (tensor<4xf32>, tensor<5xf32>, tensor<4xf32>, tensor<i64>) -> (tensor<4xf32>, tensor<4xf32>, tensor<i64>)
  return
}

// -----

func.func @adamw_lr(%p: tensor<4xf32>, %s: tensor<i64>) {
  // expected-error @+1 {{invalid learning rate -1 (must be >= 0)}}
  %a, %b, %c, %d = offload.adamw_update %p, %p, %p, %p, %s {lr = -1.0 : f64, beta1 = 0.9 : f64, beta2 = 0.999 : f64, eps = 1.0e-8 : f64, weight_decay = 0.0 : f64} : tensor<4xf32>, tensor<i64>
  return
}

// -----

func.func @adamw_eps(%p: tensor<4xf32>, %s: tensor<i64>) {
  // expected-error @+1 {{invalid eps -1 (must be >= 0)}}
  %a, %b, %c, %d = offload.adamw_update %p, %p, %p, %p, %s {lr = 1.0 : f64, beta1 = 0.9 : f64, beta2 = 0.999 : f64, eps = -1.0 : f64, weight_decay = 0.0 : f64} : tensor<4xf32>, tensor<i64>
  return
}

// -----

func.func @adamw_beta1(%p: tensor<4xf32>, %s: tensor<i64>) {
  // expected-error @+1 {{invalid beta1 1 (must be in [0, 1))}}
  %a, %b, %c, %d = offload.adamw_update %p, %p, %p, %p, %s {lr = 1.0 : f64, beta1 = 1.0 : f64, beta2 = 0.999 : f64, eps = 1.0e-8 : f64, weight_decay = 0.0 : f64} : tensor<4xf32>, tensor<i64>
  return
}

// -----

func.func @adamw_beta2(%p: tensor<4xf32>, %s: tensor<i64>) {
  // expected-error @+1 {{invalid beta2 -0.1 (must be in [0, 1))}}
  %a, %b, %c, %d = offload.adamw_update %p, %p, %p, %p, %s {lr = 1.0 : f64, beta1 = 0.9 : f64, beta2 = -0.1 : f64, eps = 1.0e-8 : f64, weight_decay = 0.0 : f64} : tensor<4xf32>, tensor<i64>
  return
}

// -----

func.func @adamw_wd(%p: tensor<4xf32>, %s: tensor<i64>) {
  // expected-error @+1 {{invalid weight_decay -0.01 (must be >= 0)}}
  %a, %b, %c, %d = offload.adamw_update %p, %p, %p, %p, %s {lr = 1.0 : f64, beta1 = 0.9 : f64, beta2 = 0.999 : f64, eps = 1.0e-8 : f64, weight_decay = -0.01 : f64} : tensor<4xf32>, tensor<i64>
  return
}

// -----

func.func @gather_rank(%x: tensor<2x64xi64>, %i: tensor<16xi64>) {
  // expected-error @+1 {{index of rank 1 for an input of rank 2 (they must be equal)}}
  %y = offload.gather %x, %i {dim = 1 : i64} : tensor<2x64xi64>, tensor<16xi64>
  return
}

// -----

func.func @gather_size(%x: tensor<2x64xi64>, %i: tensor<3x16xi64>) {
  // expected-error @+1 {{index size 3 at dim 0 exceeds the input's 2}}
  %y = offload.gather %x, %i {dim = 1 : i64} : tensor<2x64xi64>, tensor<3x16xi64>
  return
}

// -----

func.func @gather_float(%x: tensor<2x64xf32>, %i: tensor<2x16xi64>) {
  // expected-error @+1 {{operand #0 must be ranked tensor of 64-bit signless integer or 32-bit signless integer or 1-bit signless integer values}}
  %y = offload.gather %x, %i {dim = 1 : i64} : tensor<2x64xf32>, tensor<2x16xi64>
  return
}

// -----

func.func @cumsum_dim(%x: tensor<2x16xi64>) {
  // expected-error @+1 {{dim 2 is out of range for a rank-2 input}}
  %y = offload.cumsum %x {dim = 2 : i64} : tensor<2x16xi64>
  return
}

// -----

func.func @compare_types(%a: tensor<4xi64>, %b: tensor<4xf32>) {
  // expected-error @+1 {{operands have different element types}}
  %y = offload.compare eq %a, %b : tensor<4xi64>, tensor<4xf32>
  return
}

// -----

func.func @masked_fill_shape(%x: tensor<4x8xf32>, %m: tensor<3xi1>) {
  // expected-error @+1 {{mask of type 'tensor<3xi1>' does not broadcast to the input's shape}}
  %y = offload.masked_fill %x, %m {value = 0.0 : f64} : tensor<4x8xf32>, tensor<3xi1>
  return
}

// -----

func.func @reduce_range(%x: tensor<4x8xf32>) {
  // expected-error @+1 {{reduction dimension 2 is out of range for a rank-2 input}}
  %y = "offload.reduce_sum"(%x) {dims = array<i64: 2>} : (tensor<4x8xf32>) -> tensor<4x8xf32>
  return
}

// -----

func.func @reduce_repeat(%x: tensor<4x8xf32>) {
  // expected-error @+1 {{reduction dimension 0 is repeated}}
  %y = "offload.reduce_mean"(%x) {dims = array<i64: 0, 0>} : (tensor<4x8xf32>) -> tensor<8xf32>
  return
}

// -----

func.func @reduce_infer(%x: tensor<4x8xf32>) {
  // expected-error @+1 {{reduction dimension 5 out of range}}
  %y = offload.reduce_sum %x {dims = array<i64: 5>} : tensor<4x8xf32>
  return
}

// -----

func.func @broadcast_elt(%x: tensor<4xf32>) {
  // expected-error @+1 {{element types of input and result differ}}
  %y = offload.broadcast_to %x : tensor<4xf32> -> tensor<2x4xf64>
  return
}

// -----

func.func @broadcast_shape(%x: tensor<3xf32>) {
  // expected-error @+1 {{input of type 'tensor<3xf32>' does not broadcast to 'tensor<2x4xf32>'}}
  %y = offload.broadcast_to %x : tensor<3xf32> -> tensor<2x4xf32>
  return
}

// -----

func.func @reshape_elt(%x: tensor<4xf32>) {
  // expected-error @+1 {{element types of input and result differ}}
  %y = offload.reshape %x : tensor<4xf32> -> tensor<2x2xf64>
  return
}

// -----

func.func @reshape_count(%x: tensor<4xf32>) {
  // expected-error @+1 {{cannot reshape 4 elements into 6}}
  %y = offload.reshape %x : tensor<4xf32> -> tensor<2x3xf32>
  return
}

// -----

func.func @binary_broadcast(%a: tensor<4xf32>, %b: tensor<3xf32>) {
  // expected-error @+1 {{shapes are not broadcast-compatible: dimension 4 vs 3}}
  %c = offload.add %a, %b : tensor<4xf32>, tensor<3xf32>
  return
}

// -----

func.func @linear_features(%x: tensor<2x5xf32>, %w: tensor<3x4xf32>) {
  // expected-error @+1 {{linear input has 5 features but weight expects 4}}
  %y = offload.linear %x, %w : tensor<2x5xf32>, tensor<3x4xf32>
  return
}

// -----

func.func @matmul_k(%a: tensor<2x5xf32>, %b: tensor<4x3xf32>) {
  // expected-error @+1 {{matmul contraction sizes differ: 5 vs 4}}
  %c = offload.matmul %a, %b : tensor<2x5xf32>, tensor<4x3xf32>
  return
}

// -----

func.func @conv_rank(%x: tensor<2x4x8xf32>, %w: tensor<6x4x3x3xf32>) {
  // expected-error @+1 {{expects a rank-4 input [N, C, H, W] and weight [O, C/groups, KH, KW]}}
  %y = "offload.conv2d"(%x, %w) {stride = array<i64: 1, 1>, padding = array<i64: 0, 0>, dilation = array<i64: 1, 1>, groups = 1 : i64} : (tensor<2x4x8xf32>, tensor<6x4x3x3xf32>) -> tensor<2x6x6x6xf32>
  return
}

// -----

func.func @conv_attrs(%x: tensor<2x4x8x8xf32>, %w: tensor<6x4x3x3xf32>) {
  // expected-error @+1 {{stride, padding and dilation must have 2 values each}}
  %y = "offload.conv2d"(%x, %w) {stride = array<i64: 1>, padding = array<i64: 0, 0>, dilation = array<i64: 1, 1>, groups = 1 : i64} : (tensor<2x4x8x8xf32>, tensor<6x4x3x3xf32>) -> tensor<2x6x6x6xf32>
  return
}

// -----

func.func @conv_groups(%x: tensor<2x4x8x8xf32>, %w: tensor<6x4x3x3xf32>) {
  // expected-error @+1 {{groups must be >= 1, got 0}}
  %y = "offload.conv2d"(%x, %w) {stride = array<i64: 1, 1>, padding = array<i64: 0, 0>, dilation = array<i64: 1, 1>, groups = 0 : i64} : (tensor<2x4x8x8xf32>, tensor<6x4x3x3xf32>) -> tensor<2x6x6x6xf32>
  return
}

// -----

func.func @conv_channels(%x: tensor<2x4x8x8xf32>, %w: tensor<6x3x3x3xf32>) {
  // expected-error @+1 {{input has 4 channels but weight expects 3 x 1 groups}}
  %y = "offload.conv2d"(%x, %w) {stride = array<i64: 1, 1>, padding = array<i64: 0, 0>, dilation = array<i64: 1, 1>, groups = 1 : i64} : (tensor<2x4x8x8xf32>, tensor<6x3x3x3xf32>) -> tensor<2x6x6x6xf32>
  return
}

// -----

func.func @conv_divisible(%x: tensor<2x4x8x8xf32>, %w: tensor<5x2x3x3xf32>) {
  // expected-error @+1 {{output channels 5 are not divisible by groups 2}}
  %y = "offload.conv2d"(%x, %w) {stride = array<i64: 1, 1>, padding = array<i64: 0, 0>, dilation = array<i64: 1, 1>, groups = 2 : i64} : (tensor<2x4x8x8xf32>, tensor<5x2x3x3xf32>) -> tensor<2x5x6x6xf32>
  return
}

// -----

func.func @pool_pad(%x: tensor<2x4x8x8xf32>) {
  // expected-error @+1 {{pad should be at most half of the kernel size}}
  %y, %i = offload.max_pool2d %x {kernel_size = array<i64: 2, 2>, stride = array<i64: 2, 2>, padding = array<i64: 2, 2>, dilation = array<i64: 1, 1>} : tensor<2x4x8x8xf32>
  return
}

// -----

func.func @bn_rank(%x: tensor<4xf32>, %c: tensor<4xf32>) {
  // expected-error @+1 {{expects an input of rank >= 2 [N, C, ...]}}
  %y, %m, %s, %a, %b = "offload.batch_norm"(%x, %c, %c, %c, %c) {momentum = 0.1 : f64, eps = 1.0e-5 : f64} : (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>)
  return
}

// -----

func.func @bn_channels(%x: tensor<2x4x3x3xf32>, %c: tensor<5xf32>) {
  // expected-error @+1 {{per-channel operand of type 'tensor<5xf32>' does not match 4 channels}}
  %y, %m, %s, %a, %b = "offload.batch_norm"(%x, %c, %c, %c, %c) {momentum = 0.1 : f64, eps = 1.0e-5 : f64} : (tensor<2x4x3x3xf32>, tensor<5xf32>, tensor<5xf32>, tensor<5xf32>, tensor<5xf32>) -> (tensor<2x4x3x3xf32>, tensor<5xf32>, tensor<5xf32>, tensor<5xf32>, tensor<5xf32>)
  return
}

// -----

// Mixed precision allows a bf16/f16 input with f32 per-channel operands only.
func.func @bn_mixed_types(%x: tensor<2x4x3x3xf16>, %c: tensor<4xf64>) {
  // expected-error @+1 {{input element type 'f16' must be the per-channel operands' ('f64'), or bf16/f16 with f32 per-channel operands}}
  %y, %m, %s, %a, %b = "offload.batch_norm"(%x, %c, %c, %c, %c) {momentum = 0.1 : f64, eps = 1.0e-5 : f64} : (tensor<2x4x3x3xf16>, tensor<4xf64>, tensor<4xf64>, tensor<4xf64>, tensor<4xf64>) -> (tensor<2x4x3x3xf16>, tensor<4xf64>, tensor<4xf64>, tensor<4xf64>, tensor<4xf64>)
  return
}

// -----

func.func @dropout_p(%x: tensor<4xf32>, %s: tensor<i64>) {
  // expected-error @+1 {{dropout probability 1 must be in [0, 1)}}
  %y = offload.dropout %x, %s {p = 1.0 : f64, offset = 0 : i64} : tensor<4xf32>, tensor<i64>
  return
}

// -----

func.func @ce_rank(%z: tensor<4xf32>, %t: tensor<4xi64>) {
  // expected-error @+1 {{expects logits [N, C] and class-index target [N]}}
  %l = offload.cross_entropy %z, %t : tensor<4xf32>, tensor<4xi64>
  return
}

// -----

func.func @ce_batch(%z: tensor<4x3xf32>, %t: tensor<5xi64>) {
  // expected-error @+1 {{logits have batch 4 but target has 5}}
  %l = offload.cross_entropy %z, %t : tensor<4x3xf32>, tensor<5xi64>
  return
}

// -----

func.func @ce_smoothing(%z: tensor<4x3xf32>, %t: tensor<4xi64>) {
  // expected-error @+1 {{label_smoothing 2 must be in [0, 1]}}
  %l = offload.cross_entropy %z, %t {label_smoothing = 2.0 : f64} : tensor<4x3xf32>, tensor<4xi64>
  return
}

// -----

func.func @all_reduce_missing_wait(%x: tensor<4xf32> {offload.name = "x", offload.role = #offload.role<input>}) attributes {offload.step} {
  // expected-note @+1 {{the reduction is issued here}}
  %r, %t = offload.all_reduce %x {bucket = 0 : i64} : tensor<4xf32>
  // expected-error @+1 {{reads the result of an offload.all_reduce before an offload.wait on its token}}
  %y = offload.relu %r : tensor<4xf32>
  return
}

// -----

func.func @all_reduce_int(%x: tensor<4xi64>) {
  // expected-error @+1 {{operand #0 has element type 'i64'; the mean across ranks is of f32 or f64 gradients}}
  %r, %t = offload.all_reduce %x {bucket = 0 : i64} : tensor<4xi64>
  return
}

// -----

func.func @all_reduce_empty() {
  // expected-error @+1 {{reduces an empty bucket; give it at least one gradient}}
  %t = "offload.all_reduce"() {bucket = 0 : i64} : () -> !offload.token
  return
}

// -----

func.func @reduce_scatter_missing_wait(%g: tensor<4xf32> {offload.name = "g", offload.role = #offload.role<input>},
                                       %p: tensor<4xf32> {offload.name = "p", offload.role = #offload.role<parameter>}) attributes {offload.step} {
  // expected-note @+1 {{the reduction is issued here}}
  %s, %ps, %t = offload.reduce_scatter %g, %p {bucket = 0 : i64, world_size = 2 : i64} : tensor<4xf32>, tensor<4xf32> -> tensor<2xf32>, tensor<2xf32>
  // expected-error @+1 {{reads the result of an offload.reduce_scatter before an offload.wait on its token}}
  %y = offload.relu %s : tensor<2xf32>
  return
}

// -----

func.func @reduce_scatter_shard_size(%g: tensor<5xf32>, %p: tensor<5xf32>) {
  // expected-error @+1 {{has shard type 'tensor<2xf32>'; 5 elements of 'f32' over 2 ranks make a shard of 'tensor<3xf32>'}}
  %s, %ps, %t = offload.reduce_scatter %g, %p {bucket = 0 : i64, world_size = 2 : i64} : tensor<5xf32>, tensor<5xf32> -> tensor<2xf32>, tensor<2xf32>
  return
}

// -----

func.func @reduce_scatter_odd(%g: tensor<4xf32>) {
  // expected-error @+1 {{has 1 operands; it takes the gradients, then one parameter per gradient}}
  %s, %ps, %t = offload.reduce_scatter %g {bucket = 0 : i64, world_size = 2 : i64} : tensor<4xf32> -> tensor<2xf32>, tensor<2xf32>
  return
}

// -----

func.func @reduce_scatter_param_type(%g: tensor<4xf32>, %p: tensor<2x2xf32>) {
  // expected-error @+1 {{parameter #0 has type 'tensor<2x2xf32>', not its gradient's 'tensor<4xf32>'}}
  %s, %ps, %t = offload.reduce_scatter %g, %p {bucket = 0 : i64, world_size = 2 : i64} : tensor<4xf32>, tensor<2x2xf32> -> tensor<2xf32>, tensor<2xf32>
  return
}

// -----

func.func @reduce_scatter_mixed(%a: tensor<4xf32>, %b: tensor<4xf64>) {
  // expected-error @+1 {{gradient #1 has element type 'f64', not the bucket's 'f32'; a bucket has one element type}}
  %s, %ps, %t = offload.reduce_scatter %a, %b, %a, %b {bucket = 0 : i64, world_size = 2 : i64} : tensor<4xf32>, tensor<4xf64>, tensor<4xf32>, tensor<4xf64> -> tensor<4xf32>, tensor<4xf32>
  return
}

// -----

func.func @reduce_scatter_world(%g: tensor<4xf32>, %p: tensor<4xf32>) {
  // expected-error @+1 {{has world_size = 0; it must be at least 1}}
  %s, %ps, %t = offload.reduce_scatter %g, %p {bucket = 0 : i64, world_size = 0 : i64} : tensor<4xf32>, tensor<4xf32> -> tensor<4xf32>, tensor<4xf32>
  return
}

// -----

func.func @all_gather_shard_size(%s: tensor<4xf32>, %p: tensor<4xf32>) {
  // expected-error @+1 {{has shard type 'tensor<4xf32>'; 4 elements of 'f32' over 2 ranks make a shard of 'tensor<2xf32>'}}
  %r, %t = offload.all_gather %s into %p {bucket = 0 : i64, world_size = 2 : i64} : tensor<4xf32> into tensor<4xf32>
  return
}

// -----

func.func @all_gather_int(%s: tensor<2xi64>, %p: tensor<4xi64>) {
  // expected-error @+1 {{result #0 has element type 'i64'; sharded buckets are f32 or f64}}
  %r, %t = offload.all_gather %s into %p {bucket = 0 : i64, world_size = 2 : i64} : tensor<2xi64> into tensor<4xi64>
  return
}
