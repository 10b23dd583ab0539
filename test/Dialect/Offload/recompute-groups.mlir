// offload-recompute policy=marked with group ids: saves whose
// `offload.recompute` is one integer share one region (placed before the
// first backward use of any of them, each op once, every value yielded);
// a unit attribute keeps a region of its own. The planner groups a
// recomputed value with the recomputed region that already reruns it.
// RUN: offload-opt %S/../../Inputs/chain-forward.mlir --offload-autodiff -o %t.mlir
// RUN: sed -e 's/%5 = offload.save %4 :/%5 = offload.save %4 {offload.recompute = 0 : i64} :/' \
// RUN:     -e 's/%7 = offload.save %6 :/%7 = offload.save %6 {offload.recompute = 0 : i64} :/' \
// RUN:     -e 's/%10 = offload.save %9 :/%10 = offload.save %9 {offload.recompute} :/' %t.mlir > %t.marked.mlir
// RUN: offload-opt %t.marked.mlir "--offload-recompute=policy=marked report=-" 2>&1 | FileCheck %s
// RUN: sed -e 's/%5 = offload.save %4 :/%5 = offload.save %4 {offload.recompute = -1 : i64} :/' %t.mlir \
// RUN:   | not offload-opt - 2>&1 | FileCheck %s --check-prefix=BAD

// CHECK: recompute @forward (policy marked): 3 of 7 saved values recomputed in 2 regions
// The unit-marked value: a region of its own, one result.
// CHECK: offload.phase backward
// CHECK: = offload.recompute({{.*}}) {policy = "marked"} : ({{.*}}) -> tensor<32x16xf32> {
// The group: one region, both values, each op once.
// CHECK: = offload.recompute({{.*}}) {policy = "marked"} : ({{.*}}) -> (tensor<32x16xf32>, tensor<32x16xf32>) {
// CHECK-COUNT-1: offload.linear
// CHECK-NOT: offload.linear
// CHECK: offload.yield %{{.*}}, %{{.*}} : tensor<32x16xf32>, tensor<32x16xf32>

// BAD: 'offload.save' op 'offload.recompute' must be a unit attribute or an integer group id >= 0
