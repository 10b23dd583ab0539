// The target a module is planned for, as a module attribute
// (`offload.target`, Analysis/Target.h): the planner records it, and the
// host-offload passes price with it when they are given no target or rates
// of their own, so the planner's mechanisms use the planner's cost model.

// The planner records every figure of its target on the module.
// RUN: offload-opt %S/../../Inputs/mlp-forward.mlir --offload-autodiff \
// RUN:   --offload-plan-memory="budget=8000 target=rtx-4090" 2>/dev/null | FileCheck %s --check-prefix=PLANNED
// PLANNED: module attributes {offload.target = {bf16_flops_per_second = {{.*}}, host_to_device_bytes_per_second = 2.500000e+10 : f64, {{.*}}name = "rtx-4090"
// ... and it reads back: printed, parsed and planned again, the same module.
// RUN: offload-opt %S/../../Inputs/mlp-forward.mlir --offload-autodiff \
// RUN:   --offload-plan-memory="budget=8000 target=rtx-4090" -o %t.planned.mlir 2>/dev/null
// RUN: offload-opt %t.planned.mlir -o %t.again.mlir
// RUN: cmp %t.planned.mlir %t.again.mlir

// A mechanism prices with the module's target: over a link of 1e20 bytes/s
// both prefetches sit one compute op before their use; over the same
// module with link-bandwidth=1e3 given to the pass (explicit rates win
// over the attribute), the second one is issued earlier.
// RUN: offload-opt %S/../../Inputs/mlp-forward.mlir --offload-autodiff -o %t.step.mlir
// RUN: sed 's/^module {/module attributes {offload.target = {name = "fast-link", memory_bytes = 0 : i64, memory_bytes_per_second = 1.0e12 : f64, flops_per_second = 1.0e12 : f64, host_to_device_bytes_per_second = 1.0e20 : f64, device_to_host_bytes_per_second = 1.0e9 : f64}} {/' %t.step.mlir > %t.fast.mlir
// RUN: offload-opt %t.fast.mlir --offload-host-offload=policy=all | FileCheck %s --check-prefix=FAST
// FAST: offload.to_device async {{.*}}prefetch_distance = 1
// FAST: offload.to_device async {{.*}}prefetch_distance = 1
// RUN: offload-opt %t.fast.mlir --offload-host-offload="policy=all link-bandwidth=1e3" | FileCheck %s --check-prefix=SLOW
// SLOW: offload.to_device async {{.*}}prefetch_distance = 1
// SLOW: offload.to_device async {{.*}}prefetch_distance = 2

// A malformed target is an error naming the attribute and the key, at the
// pass that reads it.
// RUN: sed 's/^module {/module attributes {offload.target = {name = "bad", memory_bytes = 0 : i64}} {/' %t.step.mlir > %t.bad.mlir
// RUN: not offload-opt %t.bad.mlir --offload-host-offload=policy=all 2>&1 | FileCheck %s --check-prefix=BAD
// BAD: error: offload-host-offload: the module's 'offload.target' attribute: missing number 'memory_bytes_per_second'
// RUN: not offload-opt %t.bad.mlir --offload-host-parameters=policy=all 2>&1 | FileCheck %s --check-prefix=BAD-PARAMS
// BAD-PARAMS: error: offload-host-parameters: the module's 'offload.target' attribute: missing number 'memory_bytes_per_second'

// The dialect checks where it may sit.
// RUN: not offload-opt %s -split-input-file 2>&1 | FileCheck %s --check-prefix=VERIFY
// VERIFY: error: 'func.func' op 'offload.target' must be a dictionary attribute on a module
func.func @f() attributes {offload.target = {name = "x"}} {
  return
}
