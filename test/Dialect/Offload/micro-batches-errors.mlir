// Gradient accumulation refuses, naming the op or input and why, what would
// compute something else than PyTorch's accumulation loop or cannot be
// split into micro-batches.
// RUN: offload-opt %s -split-input-file --offload-autodiff="optimizer=sgd micro-batches=4" -verify-diagnostics
// RUN: not offload-opt %s --offload-autodiff="micro-batches=0" 2>&1 | FileCheck %s --check-prefix=ZERO
// ZERO: offload-autodiff: micro-batches must be >= 1, got 0

// Batch norm in training mode: batch statistics per micro-batch.
func.func @batch_norm(%w: tensor<4xf32> {offload.name = "bn.weight", offload.role = #offload.role<parameter>},
                      %b: tensor<4xf32> {offload.name = "bn.bias", offload.role = #offload.role<parameter>},
                      %rm: tensor<4xf32> {offload.name = "bn.running_mean", offload.role = #offload.role<state>},
                      %rv: tensor<4xf32> {offload.name = "bn.running_var", offload.role = #offload.role<state>},
                      %x: tensor<8x4xf32> {offload.name = "x", offload.role = #offload.role<input>})
    -> (tensor<f32> {offload.name = "loss", offload.role = #offload.role<loss>}) attributes {offload.step} {
  offload.phase forward
  // expected-error @+1 {{'offload.batch_norm' op cannot run in micro-batches (offload-autodiff micro-batches=4): batch norm in training mode normalizes with the statistics of the batch it sees}}
  %y, %m, %is, %rm1, %rv1 = offload.batch_norm %x, %w, %b, %rm, %rv {momentum = 0.1 : f64, eps = 1.0e-5 : f64} : tensor<8x4xf32>, tensor<4xf32>
  %l = offload.reduce_sum %y : tensor<8x4xf32>
  return %l : tensor<f32>
}

// -----

// A batch that K does not divide.
func.func @not_divisible(%w: tensor<4x8xf32> {offload.name = "w", offload.role = #offload.role<parameter>},
    // expected-error @+1 {{offload-autodiff micro-batches=4: the batch of input 'x' (dim 0 of 'tensor<30x8xf32>') is 30, not divisible by 4}}
    %x: tensor<30x8xf32> {offload.name = "x", offload.role = #offload.role<input>})
    -> (tensor<f32> {offload.name = "loss", offload.role = #offload.role<loss>}) attributes {offload.step} {
  offload.phase forward
  %y = offload.linear %x, %w : tensor<30x8xf32>, tensor<4x8xf32>
  %l = offload.reduce_mean %y : tensor<30x4xf32>
  return %l : tensor<f32>
}

// -----

// An input without a batch dim.
func.func @no_batch_dim(%w: tensor<4xf32> {offload.name = "w", offload.role = #offload.role<parameter>},
    // expected-error @+1 {{offload-autodiff micro-batches=4: input 's' ('tensor<f32>') has no batch dim to slice; every input is sliced along dim 0}}
    %s: tensor<f32> {offload.name = "s", offload.role = #offload.role<input>})
    -> (tensor<f32> {offload.name = "loss", offload.role = #offload.role<loss>}) attributes {offload.step} {
  offload.phase forward
  %y = offload.mul %w, %s : tensor<4xf32>, tensor<f32>
  %l = offload.reduce_sum %y : tensor<4xf32>
  return %l : tensor<f32>
}

// -----

// A value of the whole batch's size that does not come from the inputs
// (here a constant) cannot meet a micro-batch.
func.func @whole_batch_constant(%w: tensor<8xf32> {offload.name = "w", offload.role = #offload.role<parameter>},
                                %x: tensor<32x8xf32> {offload.name = "x", offload.role = #offload.role<input>})
    -> (tensor<f32> {offload.name = "loss", offload.role = #offload.role<loss>}) attributes {offload.step} {
  offload.phase forward
  %c = offload.fill {value = 2.0 : f64} : tensor<32x8xf32>
  %y = offload.mul %x, %w : tensor<32x8xf32>, tensor<8xf32>
  // expected-error @+2 {{shapes are not broadcast-compatible: dimension 8 vs 32}}
  // expected-error @+1 {{'offload.add' op cannot run on a micro-batch (offload-autodiff micro-batches=4): its result type cannot be inferred from the micro-batch operands}}
  %z = offload.add %y, %c : tensor<32x8xf32>, tensor<32x8xf32>
  %l = offload.reduce_sum %z : tensor<32x8xf32>
  return %l : tensor<f32>
}

// -----

// A step that updates state would update it once per micro-batch.
// expected-error @+1 {{offload-autodiff micro-batches=4: result #1 ('count', role new_state) is not a loss}}
func.func @state(%w: tensor<8xf32> {offload.name = "w", offload.role = #offload.role<parameter>},
                 %n: tensor<i64> {offload.name = "count", offload.role = #offload.role<state>},
                 %x: tensor<32x8xf32> {offload.name = "x", offload.role = #offload.role<input>})
    -> (tensor<f32> {offload.name = "loss", offload.role = #offload.role<loss>},
        tensor<i64> {offload.name = "count", offload.role = #offload.role<new_state>}) attributes {offload.step} {
  offload.phase forward
  %y = offload.mul %x, %w : tensor<32x8xf32>, tensor<8xf32>
  %l = offload.reduce_sum %y : tensor<32x8xf32>
  %n1 = offload.add_scalar %n {value = 1.0 : f64} : tensor<i64>
  return %l, %n1 : tensor<f32>, tensor<i64>
}

// -----

// A pipeline stage runs its micro-batches through its schedule.
// expected-error @+1 {{offload-autodiff micro-batches=4 needs a training step (loss first)}}
func.func @stage(%w: tensor<8xf32> {offload.name = "w", offload.role = #offload.role<parameter>},
                 %x: tensor<32x8xf32> {offload.name = "x", offload.role = #offload.role<input>})
    -> (tensor<32x8xf32> {offload.name = "out", offload.role = #offload.role<output>}) attributes {offload.step} {
  offload.phase forward
  %y = offload.mul %x, %w : tensor<32x8xf32>, tensor<8xf32>
  return %y : tensor<32x8xf32>
}
