// AdamW with bf16 moments (issue 29): --offload-autodiff="moments=bf16" makes
// every exp_avg / exp_avg_sq argument and result bf16 (the parameters stay
// f32), the updates take them as `moments tensor<...xbf16>`, and the option
// is recorded with the step (so the planner rebuilds the same step). A bad
// value is refused by the option parser with the names it takes; moments=
// other than f32 needs optimizer=adamw.
// RUN: offload-opt %S/../../Inputs/mlp-forward.mlir --offload-autodiff="optimizer=adamw moments=bf16" | FileCheck %s
// RUN: offload-opt %S/../../Inputs/mlp-forward.mlir --offload-autodiff="optimizer=adamw moments=bf16" \
// RUN:   --offload-host-parameters="report=-" 2>&1 | FileCheck %s --check-prefix=HOST
// RUN: offload-opt %S/../../Inputs/mlp-forward.mlir --offload-autodiff="optimizer=adamw" | FileCheck %s --check-prefix=F32
// RUN: not offload-opt %S/../../Inputs/mlp-forward.mlir --offload-autodiff="optimizer=adamw moments=fp8" 2>&1 | FileCheck %s --check-prefix=BAD
// RUN: not offload-opt %S/../../Inputs/mlp-forward.mlir --offload-autodiff="optimizer=sgd moments=bf16" 2>&1 | FileCheck %s --check-prefix=SGD

// CHECK-LABEL: func.func @forward
// CHECK-SAME: %arg0: tensor<16x8xf32> {offload.name = "fc1.weight", offload.role = #offload.role<parameter>}
// CHECK-SAME: tensor<16x8xbf16> {offload.name = "fc1.weight.exp_avg", offload.role = #offload.role<optimizer_state>}
// CHECK-SAME: tensor<16x8xbf16> {offload.name = "fc1.weight.exp_avg_sq", offload.role = #offload.role<optimizer_state>}
// CHECK-SAME: tensor<16x8xf32> {offload.name = "fc1.weight", offload.role = #offload.role<new_parameter>}
// CHECK-SAME: tensor<16x8xbf16> {offload.name = "fc1.weight.exp_avg", offload.role = #offload.role<new_optimizer_state>}
// CHECK-SAME: offload.autodiff = "{{.*}}moments=bf16
// CHECK: offload.adamw_update %arg0, {{.*}} : tensor<16x8xf32> moments tensor<16x8xbf16>, tensor<i64>
// CHECK: offload.adamw_update %arg1, {{.*}} : tensor<16xf32> moments tensor<16xbf16>, tensor<i64>
// Host parameters: 212 f32 elements (848 bytes) and their two bf16 moments
// (848 bytes; 2544 in all with f32 moments).
// HOST: 4 parameters, 1696 bytes of parameters and optimizer state on the host
// HOST: offload.adamw_update {{.*}} : !offload.host<tensor<16x8xf32>> moments !offload.host<tensor<16x8xbf16>>, !offload.host<tensor<i64>>
// F32-NOT: bf16
// BAD: for the --moments option: 'fp8' is not a moments type; expected f32 or bf16
// SGD: error: offload-autodiff: moments=bf16 needs optimizer=adamw (the moments are AdamW's exp_avg and exp_avg_sq), got optimizer=sgd
