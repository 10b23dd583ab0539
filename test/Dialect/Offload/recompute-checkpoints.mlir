// offload-recompute's checkpoints beyond the saved values: a forward op
// marked `offload.checkpoint` (or whose layer matches checkpoints=GLOB) has
// its results kept for the regions, so a cone stops there instead of
// rerunning its producer. Here the relu output and the second linear's
// output are recomputed; batch norm's output is not a saved value (relu
// saves its own output), so without the checkpoint both regions rerun the
// batch norm from its saved input.
// RUN: offload-opt %S/../../Inputs/chain-forward.mlir --offload-autodiff -o %t.mlir
// RUN: sed -e 's/%5 = offload.save %4 :/%5 = offload.save %4 {offload.recompute} :/' \
// RUN:     -e 's/%7 = offload.save %6 :/%7 = offload.save %6 {offload.recompute} :/' %t.mlir > %t.marked.mlir
// RUN: offload-opt %t.marked.mlir "--offload-recompute=policy=marked report=-" 2>&1 \
// RUN:   | FileCheck %s --check-prefix=PLAIN
// RUN: sed -e 's/offload.batch_norm %0, %arg1, %arg2, %arg3, %arg4 {eps/offload.batch_norm %0, %arg1, %arg2, %arg3, %arg4 {offload.checkpoint, eps/' \
// RUN:     %t.marked.mlir > %t.checkpoint.mlir
// RUN: offload-opt %t.checkpoint.mlir "--offload-recompute=policy=marked report=-" 2>&1 | FileCheck %s
// The glob form, on the importer's layer names (the NameLocs of the input).
// RUN: offload-opt %S/../../Inputs/chain-forward.mlir --offload-autodiff \
// RUN:   "--offload-recompute=policy=names names=block1.relu checkpoints=block0.*,block1.bn report=-" 2>&1 \
// RUN:   | FileCheck %s --check-prefix=GLOB
// RUN: sed -e 's/{eps = 1.000000e-05 : f64, momentum/{offload.checkpoint = 1 : i64, eps = 1.000000e-05 : f64, momentum/' %t.mlir \
// RUN:   | not offload-opt - 2>&1 | FileCheck %s --check-prefix=BAD
// RUN: not offload-opt %t.mlir "--offload-recompute=policy=all checkpoints=[" 2>&1 | FileCheck %s --check-prefix=BADGLOB

// PLAIN: recompute @forward (policy marked): 2 of 7 saved values recomputed in 2 regions, 4096 bytes no longer saved, 18560 FLOPs added
// PLAIN-NOT: checkpoints

// The report (stderr, before the module).
// CHECK: recompute @forward (policy marked): 2 of 7 saved values recomputed in 2 regions, 4096 bytes no longer saved, 17408 FLOPs added
// CHECK: recompute @forward: 1 of 3 checkpoints read by a region and saved (2048 bytes)
// The checkpoint is saved right after its op; its other results (running
// statistics) are read by no region and not saved.
// CHECK: offload.phase forward
// CHECK: %result, %save_mean, %save_invstd, %new_running_mean, %new_running_var = offload.batch_norm
// CHECK-NOT: offload.checkpoint
// CHECK-NEXT: = offload.save %result : tensor<32x16xf32>
// CHECK: offload.phase backward
// Both regions start from the restored checkpoint: no batch norm reruns.
// CHECK: offload.recompute({{.*}}) {policy = "marked"} : (tensor<32x16xf32>, tensor<16x16xf32>) -> tensor<32x16xf32> {
// CHECK-NEXT: ^bb0
// CHECK-NEXT: offload.relu
// CHECK-NEXT: offload.linear
// CHECK-NEXT: offload.yield
// CHECK: offload.recompute({{.*}}) {policy = "marked"} : (tensor<32x16xf32>) -> tensor<32x16xf32> {
// CHECK-NEXT: ^bb0
// CHECK-NEXT: offload.relu
// CHECK-NEXT: offload.yield
// CHECK-NOT: offload.batch_norm %
// CHECK: offload.batch_norm_backward

// GLOB: recompute @forward: 1 of 3 checkpoints read by a region and saved (2048 bytes)
// GLOB: offload.recompute({{.*}}) {policy = "names"} : (tensor<32x16xf32>) -> tensor<32x16xf32> {
// GLOB-NEXT: ^bb0
// GLOB-NEXT: offload.relu
// GLOB-NEXT: offload.yield

// BAD: 'offload.checkpoint' must be a unit attribute
// BADGLOB: offload-recompute: bad glob '[' in checkpoints=
