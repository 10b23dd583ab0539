// RUN: offload-opt %S/../../Inputs/chain-forward.mlir --offload-autodiff \
// RUN:   --offload-recompute="policy=ops ops=relu,batch_norm report=-" 2>&1 | FileCheck %s --check-prefix=OPS
// RUN: offload-opt %S/../../Inputs/chain-forward.mlir --offload-autodiff \
// RUN:   --offload-recompute="policy=ops ops=relu report=-" 2>&1 | FileCheck %s --check-prefix=OPSNONE
// RUN: offload-opt %S/../../Inputs/chain-forward.mlir --offload-autodiff \
// RUN:   --offload-recompute="policy=every-k k=2 report=-" 2>&1 | FileCheck %s --check-prefix=EVERYK
// RUN: offload-opt %S/../../Inputs/chain-forward.mlir --offload-autodiff \
// RUN:   --offload-recompute="policy=sqrt report=-" 2>&1 | FileCheck %s --check-prefix=SQRT
// RUN: offload-opt %S/../../Inputs/chain-forward.mlir --offload-autodiff \
// RUN:   --offload-recompute="policy=names names=block2.* report=-" 2>&1 | FileCheck %s --check-prefix=NAMES
// RUN: offload-opt %S/../../Inputs/chain-forward.mlir --offload-autodiff \
// RUN:   --offload-recompute="policy=all report=-" 2>&1 | FileCheck %s --check-prefix=ALL
// RUN: offload-opt %S/../../Inputs/chain-forward.mlir --offload-autodiff \
// RUN:   --offload-recompute="policy=every-k k=3 report=-" --offload-recompute="policy=names names=block2.fc2 report=-" 2>&1 | FileCheck %s --check-prefix=NESTED
// RUN: offload-opt %S/../../Inputs/chain-forward.mlir --offload-autodiff --offload-recompute="policy=all" \
// RUN:   --offload-inline-recompute 2>&1 | FileCheck %s --check-prefix=INLINE
// RUN: not offload-opt %S/../../Inputs/chain-forward.mlir --offload-recompute="policy=bogus" 2>&1 | FileCheck %s --check-prefix=BAD

// Selective: only ReLU's result is recomputed; its input (the batch norm's
// output) is not saved, so the region recomputes the batch norm too, from
// the kept saved linear output. The recomputed batch norm's running
// statistics are unused: the step returns the forward op's (state updated
// once).
// OPS: recompute @forward (policy ops): 1 of 7 saved values recomputed in 1 regions, 2048 bytes no longer saved, 1088 FLOPs added
// (With ops=relu alone nothing qualifies: ReLU's input is the batch norm's
// unsaved output, so recomputing it would rerun the batch norm.)
// OPS: offload.phase forward
// OPS: %[[H:.*]] = offload.linear
// OPS-NEXT: %[[SH:.*]] = offload.save %[[H]]
// OPS: %{{.*}}, %{{.*}}, %{{.*}}, %[[NRM:.*]], %[[NRV:.*]] = offload.batch_norm %[[H]]
// OPS: %[[R:.*]] = offload.relu
// OPS-NOT: offload.save %[[R]]
// OPS: offload.phase backward
// OPS: %[[RH:.*]] = offload.restore %[[SH]] :
// OPS-NEXT: %[[RC:.*]] = offload.recompute(%[[RH]], {{.*}}) {policy = "ops"}
// OPS-NEXT: ^bb0(
// OPS-NEXT: offload.batch_norm
// OPS-NEXT: %[[RR:.*]] = offload.relu
// OPS-NEXT: offload.yield %[[RR]]
// OPS: offload.relu_backward %{{.*}}, %[[RC]]
// OPS: return %{{.*}}, %[[NRM]], %[[NRV]],

// OPSNONE: recompute @forward (policy ops): 0 of 7 saved values recomputed in 0 regions
// OPSNONE-NOT: offload.recompute(

// every-k=2 keeps every second saved value as a checkpoint.
// (Per-channel statistics are always kept and do not count: 5 activations,
// the 1st, 3rd and 5th recomputed, each between kept checkpoints.)
// EVERYK: recompute @forward (policy every-k): 3 of 7 saved values recomputed in 3 regions
// EVERYK-COUNT-4: = offload.save %
// EVERYK-NOT: = offload.save %
// EVERYK-COUNT-3: offload.recompute

// sqrt(5 activations) rounds to 2: the same checkpoints as every-k=2.
// SQRT: recompute @forward (policy sqrt): 3 of 7 saved values recomputed in 3 regions
// SQRT-COUNT-3: offload.recompute

// By module path.
// NAMES: recompute @forward (policy names): 2 of 7 saved values recomputed in 2 regions
// NAMES-COUNT-2: offload.recompute({{.*}}) {policy = "names"}

// Everything, one region from the step's arguments: no save left.
// ALL: recompute @forward (policy all): 7 of 7 saved values recomputed in 1 regions, 8832 bytes no longer saved
// ALL-NOT: = offload.save %
// ALL: offload.recompute(
// ALL-NOT: = offload.restore %

// Nested: a second policy applied to what the first one kept.
// every-k=3 recomputes two segments (one region each); then the kept
// linear output is recomputed too.
// NESTED: recompute @forward (policy every-k): 4 of 7 saved values recomputed in 2 regions
// NESTED: recompute @forward (policy names): 1 of 3 saved values recomputed in 1 regions
// NESTED-COUNT-3: offload.recompute({{.*}}) {policy = "{{every-k|names}}"}

// Inlined for lowering: the region's ops in place, no region left.
// INLINE-NOT: offload.recompute
// INLINE: offload.phase backward
// INLINE: offload.batch_norm

// BAD: for the --policy option: Cannot find option named 'bogus'!
