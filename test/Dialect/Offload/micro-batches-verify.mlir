// The step structure of gradient accumulation: K (forward, backward) pairs,
// each marker with its micro-batch index, then one optimizer phase; a saved
// value is read by the backward of its own micro-batch.
// RUN: offload-opt %s -split-input-file -verify-diagnostics | FileCheck %s

// Good: two micro-batches, then the update; the index round-trips.
// CHECK-LABEL: func.func @two
// CHECK: offload.phase forward micro_batch 0
// CHECK: offload.phase backward micro_batch 0
// CHECK: offload.phase forward micro_batch 1
// CHECK: offload.phase backward micro_batch 1
// CHECK: offload.phase optimizer
// CHECK-NOT: micro_batch
func.func @two(%x: tensor<4xf32> {offload.name = "x", offload.role = #offload.role<input>}) attributes {offload.step} {
  offload.phase forward micro_batch 0
  %s0 = offload.save %x : tensor<4xf32>
  offload.phase backward micro_batch 0
  %r0 = offload.restore %s0 : !offload.saved<tensor<4xf32>>
  offload.phase forward micro_batch 1
  %s1 = offload.save %x : tensor<4xf32>
  offload.phase backward micro_batch 1
  %r1 = offload.restore %s1 : !offload.saved<tensor<4xf32>>
  offload.phase optimizer
  return
}

// -----

// Good: the split backward of each micro-batch, no optimizer
// (gradients only).
// CHECK-LABEL: func.func @split
func.func @split() attributes {offload.step} {
  offload.phase forward micro_batch 0
  offload.phase backward_input micro_batch 0
  offload.phase backward_weight micro_batch 0
  offload.phase forward micro_batch 1
  offload.phase backward_input micro_batch 1
  offload.phase backward_weight micro_batch 1
  return
}

// -----

func.func @skips_a_micro_batch() attributes {offload.step} {
  offload.phase forward micro_batch 0
  // expected-note @+1 {{previous phase marker here}}
  offload.phase backward micro_batch 0
  // expected-error @+1 {{phase 'forward' of micro-batch 2 cannot follow 'backward' of micro-batch 0}}
  offload.phase forward micro_batch 2
  return
}

// -----

func.func @backward_before_its_forward() attributes {offload.step} {
  offload.phase forward micro_batch 0
  // expected-note @+1 {{previous phase marker here}}
  offload.phase backward micro_batch 0
  // expected-error @+1 {{phase 'backward' of micro-batch 1 cannot follow 'backward' of micro-batch 0}}
  offload.phase backward micro_batch 1
  return
}

// -----

func.func @next_forward_before_backward() attributes {offload.step} {
  // expected-note @+1 {{previous phase marker here}}
  offload.phase forward micro_batch 0
  // expected-error @+1 {{phase 'forward' of micro-batch 1 cannot follow 'forward' of micro-batch 0}}
  offload.phase forward micro_batch 1
  return
}

// -----

func.func @forward_twice_in_one_micro_batch() attributes {offload.step} {
  offload.phase forward micro_batch 0
  offload.phase backward micro_batch 0
  offload.phase forward micro_batch 1
  offload.phase backward micro_batch 1
  // expected-error @+1 {{phase 'forward' is marked twice in one step}}
  offload.phase forward micro_batch 1
  return
}

// -----

func.func @back_to_an_earlier_micro_batch() attributes {offload.step} {
  offload.phase forward micro_batch 0
  offload.phase backward micro_batch 0
  offload.phase forward micro_batch 1
  // expected-note @+1 {{previous phase marker here}}
  offload.phase backward micro_batch 1
  // expected-error @+1 {{phase 'forward' of micro-batch 0 cannot follow 'backward' of micro-batch 1}}
  offload.phase forward micro_batch 0
  return
}

// -----

func.func @forward_after_the_update() attributes {offload.step} {
  offload.phase forward micro_batch 0
  offload.phase backward micro_batch 0
  // expected-note @+1 {{previous phase marker here}}
  offload.phase optimizer
  // expected-error @+1 {{phase 'forward' of micro-batch 1 cannot follow 'optimizer' of micro-batch 0}}
  offload.phase forward micro_batch 1
  return
}

// -----

func.func @indexed_optimizer() attributes {offload.step} {
  offload.phase forward micro_batch 0
  offload.phase backward micro_batch 0
  // expected-error @+1 {{the optimizer phase runs once per step, after every micro-batch; it takes no 'micro_batch' index}}
  offload.phase optimizer micro_batch 0
  return
}

// -----

func.func @restore_across_micro_batches(%x: tensor<4xf32> {offload.name = "x", offload.role = #offload.role<input>}) attributes {offload.step} {
  offload.phase forward micro_batch 0
  // expected-note @+1 {{saved here}}
  %s0 = offload.save %x : tensor<4xf32>
  offload.phase backward micro_batch 0
  offload.phase forward micro_batch 1
  offload.phase backward micro_batch 1
  // expected-error @+1 {{restores in micro-batch 1 a value saved in micro-batch 0; a saved value is read by the backward of its own micro-batch}}
  %r0 = offload.restore %s0 : !offload.saved<tensor<4xf32>>
  return
}
