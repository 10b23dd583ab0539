// --offload-data-parallel zero=1 world-size=W (ZeRO-1): per bucket an
// offload.reduce_scatter right after its last gradient (with the
// parameters' slice), a wait and ONE update of the flat shard in the
// optimizer phase, an offload.all_gather over the parameters right after
// it; the optimizer state becomes one 1-D shard per bucket and state kind
// (ceil(n / W) elements), waited-for all-gathers before the return.
// RUN: offload-opt %S/../../Inputs/mlp-forward.mlir --offload-autodiff="optimizer=sgd momentum=0.9" \
// RUN:   --offload-data-parallel="bucket-bytes=100 zero=1 world-size=2 report=-" 2>%t.report | FileCheck %s
// RUN: FileCheck %s --check-prefix=REPORT < %t.report
// AdamW: two moment shards per bucket; world size 3 pads the shard.
// RUN: offload-opt %S/../../Inputs/mlp-forward.mlir --offload-autodiff="optimizer=adamw" \
// RUN:   --offload-data-parallel="zero=1 world-size=3" | FileCheck %s --check-prefix=ADAMW
// The step round-trips through the printer and the generic form.
// RUN: offload-opt %S/../../Inputs/mlp-forward.mlir --offload-autodiff="optimizer=sgd" \
// RUN:   --offload-data-parallel="bucket-bytes=100 zero=1 world-size=2" -mlir-print-op-generic | offload-opt | FileCheck %s --check-prefix=GENERIC
// The memory plan: the sharded state is half the persistent state at W=2
// (SGD momentum: 848 -> 424 bytes: shards of 32 + 66 + 8 elements).
// RUN: offload-opt %S/../../Inputs/mlp-forward.mlir --offload-autodiff="optimizer=sgd momentum=0.9" \
// RUN:   --offload-data-parallel="zero=1 world-size=2" --offload-memory-report -o /dev/null 2>&1 | FileCheck %s --check-prefix=MEM
// RUN: offload-opt %S/../../Inputs/mlp-forward.mlir --offload-autodiff="optimizer=sgd momentum=0.9" \
// RUN:   --offload-data-parallel --offload-memory-report -o /dev/null 2>&1 | FileCheck %s --check-prefix=MEM-PLAIN
// The cost model: a reduce-scatter and an all-gather each cost half the
// bucket's all-reduce (848 bytes: 2 x 848 / 25e9 s in all, as plain).
// RUN: offload-opt %S/../../Inputs/mlp-forward.mlir --offload-autodiff="optimizer=sgd" \
// RUN:   --offload-data-parallel="bucket-bytes=100 zero=1 world-size=2" --offload-cost-report="target=l4" -o /dev/null 2>&1 \
// RUN:   | FileCheck %s --check-prefix=COST
// Errors.
// RUN: not offload-opt %S/../../Inputs/mlp-forward.mlir --offload-autodiff="optimizer=sgd" \
// RUN:   --offload-data-parallel="zero=2" -o /dev/null 2>&1 | FileCheck %s --check-prefix=STAGE
// RUN: not offload-opt %S/../../Inputs/mlp-forward.mlir --offload-autodiff="optimizer=sgd" \
// RUN:   --offload-data-parallel="zero=1" -o /dev/null 2>&1 | FileCheck %s --check-prefix=NOWS
// RUN: not offload-opt %S/../../Inputs/mlp-forward.mlir --offload-autodiff="optimizer=sgd" \
// RUN:   --offload-data-parallel="zero=1 world-size=0" -o /dev/null 2>&1 | FileCheck %s --check-prefix=NOWS
// RUN: not offload-opt %S/../../Inputs/mlp-forward.mlir --offload-autodiff="optimizer=sgd" \
// RUN:   --offload-data-parallel="world-size=2" -o /dev/null 2>&1 | FileCheck %s --check-prefix=WSONLY
// Early updates: a bucket's wait, flat update and all-gather follow the next
// bucket's reduce-scatter (the last bucket's at the end of backward).
// RUN: offload-opt %S/../../Inputs/mlp-forward.mlir --offload-autodiff="optimizer=sgd momentum=0.9" --offload-early-update \
// RUN:   --offload-data-parallel="bucket-bytes=100 zero=1 world-size=2" | FileCheck %s --check-prefix=EARLY
// Micro-batches: one reduce-scatter per bucket after the last micro-batch's
// backward (the accumulated gradients), the updates in the optimizer phase.
// RUN: offload-opt %S/../../Inputs/mlp-forward.mlir --offload-autodiff="optimizer=sgd micro-batches=2" \
// RUN:   --offload-data-parallel="zero=1 world-size=2" | FileCheck %s --check-prefix=MICRO
// RUN: not offload-opt %S/../../Inputs/mlp-forward.mlir --offload-autodiff="optimizer=sgd" \
// RUN:   --offload-data-parallel="zero=1 world-size=2" --offload-data-parallel="zero=1 world-size=2" -o /dev/null 2>&1 | FileCheck %s --check-prefix=TWICE

// CHECK-LABEL: func.func @forward
// CHECK-SAME: %arg6: tensor<i64> {offload.name = "optimizer.step", offload.role = #offload.role<optimizer_state>}
// CHECK-SAME: %arg7: tensor<32xf32> {offload.name = "zero1.bucket0.momentum_buffer", offload.role = #offload.role<optimizer_state>}
// CHECK-SAME: %arg8: tensor<66xf32> {offload.name = "zero1.bucket1.momentum_buffer"
// CHECK-SAME: %arg9: tensor<8xf32> {offload.name = "zero1.bucket2.momentum_buffer"
// CHECK-SAME: -> (tensor<f32> {offload.name = "loss"
// CHECK-SAME: tensor<32xf32> {offload.name = "zero1.bucket0.momentum_buffer", offload.role = #offload.role<new_optimizer_state>}
// CHECK: offload.phase backward
// CHECK: %[[W2:.*]] = offload.matmul %{{.*}}, %{{.*}} {transpose_a = true}
// CHECK-NEXT: %[[G0:.*]], %[[P0:.*]], %[[T0:.*]] = offload.reduce_scatter %[[W2]], %arg2 {bucket = 0 : i64, world_size = 2 : i64} : tensor<4x16xf32>, tensor<4x16xf32> -> tensor<32xf32>, tensor<32xf32>
// CHECK: %[[G1:.*]], %[[P1:.*]], %[[T1:.*]] = offload.reduce_scatter %{{.*}}, %{{.*}}, %arg3, %arg0 {bucket = 1 : i64, world_size = 2 : i64} : tensor<4xf32>, tensor<16x8xf32>, tensor<4xf32>, tensor<16x8xf32> -> tensor<66xf32>, tensor<66xf32>
// CHECK: %[[G2:.*]], %[[P2:.*]], %[[T2:.*]] = offload.reduce_scatter %{{.*}}, %arg1 {bucket = 2 : i64, world_size = 2 : i64}
// CHECK-NEXT: offload.phase optimizer
// CHECK-NEXT: offload.wait [%[[T1]]]
// CHECK-NEXT: %[[N1:.*]], %{{.*}}, %{{.*}} = offload.sgd_update %[[P1]], %[[G1]], %arg8, %arg6 {{.*}} : tensor<66xf32>, tensor<i64>
// CHECK-NEXT: %[[A1:.*]]:2, %[[U1:.*]] = offload.all_gather %[[N1]] into %arg3, %arg0 {bucket = 1 : i64, world_size = 2 : i64} : tensor<66xf32> into tensor<4xf32>, tensor<16x8xf32>
// CHECK-NEXT: offload.wait [%[[T2]]]
// CHECK-NEXT: offload.sgd_update %[[P2]], %[[G2]], %arg9, %arg6
// CHECK-NEXT: offload.all_gather
// CHECK-NEXT: offload.wait [%[[T0]]]
// CHECK-NEXT: offload.sgd_update %[[P0]], %[[G0]], %arg7, %arg6
// CHECK-NEXT: %{{.*}}, %[[U0:.*]] = offload.all_gather
// CHECK-NEXT: offload.wait [%[[U0]], %[[U1]], %{{.*}}]
// CHECK-NEXT: return %{{.*}}, %[[A1]]#1,
// CHECK-NOT: offload.sgd_update

// REPORT: data parallel @forward: bucket 0: 1 gradients, 64 elements, ZeRO-1 shard of 32 elements per rank (world size 2); parameters in shard order: fc2.weight
// REPORT: data parallel @forward: bucket 1: 2 gradients, 132 elements, ZeRO-1 shard of 66 elements per rank (world size 2); parameters in shard order: fc2.bias fc1.weight
// REPORT: data parallel @forward: bucket 2: 1 gradients, 16 elements, ZeRO-1 shard of 8 elements per rank (world size 2); parameters in shard order: fc1.bias

// 212 elements over 3 ranks: shards of 71 (213, one padding element).
// ADAMW: {offload.name = "zero1.bucket0.exp_avg", offload.role = #offload.role<optimizer_state>}, %{{.*}}: tensor<71xf32> {offload.name = "zero1.bucket0.exp_avg_sq"
// ADAMW: offload.reduce_scatter {{.*}} {bucket = 0 : i64, world_size = 3 : i64} : {{.*}} -> tensor<71xf32>, tensor<71xf32>
// ADAMW: offload.adamw_update {{.*}} : tensor<71xf32>, tensor<i64>
// ADAMW: offload.all_gather {{.*}} : tensor<71xf32> into tensor<4x16xf32>, tensor<4xf32>, tensor<16x8xf32>, tensor<16xf32>
// ADAMW-NOT: offload.adamw_update

// GENERIC-COUNT-3: offload.reduce_scatter
// GENERIC-COUNT-3: offload.all_gather

// MEM: persistent device bytes (arguments, results): 2572
// MEM-PLAIN: persistent device bytes (arguments, results): 2996

// COST: data parallel (ZeRO-1): reduce-scatter and all-gather 6.784000e-08 s on the communication stream (link 2.5e+10 bytes/s, bytes / link each)

// STAGE: zero=2 is not a supported ZeRO stage; use 0 (off) or 1 (optimizer state sharded)
// NOWS: zero=1 needs world-size=W, the number of ranks (at least 1), at compile time
// WSONLY: world-size=2 is only used by zero=1 (a plan without ZeRO runs at any world size)
// EARLY: %{{.*}}, %{{.*}}, %[[T0:.*]] = offload.reduce_scatter {{.*}} {bucket = 0 : i64
// EARLY: %{{.*}}, %{{.*}}, %[[T1:.*]] = offload.reduce_scatter {{.*}} {bucket = 1 : i64
// EARLY-NEXT: offload.wait [%[[T0]]]
// EARLY-NEXT: offload.sgd_update
// EARLY-NEXT: offload.all_gather
// EARLY: %{{.*}}, %{{.*}}, %[[T2:.*]] = offload.reduce_scatter {{.*}} {bucket = 2 : i64
// EARLY-NEXT: offload.wait [%[[T1]]]
// EARLY-NEXT: offload.sgd_update
// EARLY-NEXT: offload.all_gather
// EARLY-NEXT: offload.wait [%[[T2]]]
// EARLY-NEXT: offload.sgd_update
// EARLY-NEXT: offload.all_gather
// EARLY-NEXT: offload.phase optimizer
// EARLY-NEXT: offload.wait
// MICRO: offload.phase backward micro_batch 1
// MICRO-NOT: offload.phase
// MICRO: offload.reduce_scatter {{.*}} {bucket = 0 : i64, world_size = 2 : i64}
// MICRO-NOT: offload.reduce_scatter
// MICRO: offload.phase optimizer
// MICRO: offload.sgd_update
// MICRO: offload.all_gather
// MICRO-NOT: offload.sgd_update
// TWICE: is already in the step; run --offload-data-parallel once
