// --offload-data-parallel zero=1 refuses a bucket of bf16 parameters (a
// sharded bucket is f32 or f64, as the all-reduce's).
// RUN: not offload-opt %s --offload-data-parallel="zero=1 world-size=2" -o /dev/null 2>&1 | FileCheck %s
// CHECK: error: 'offload.sgd_update' op updates 'bf16' parameters; --offload-data-parallel zero=1 shards f32 or f64 buckets

func.func @step(%w: tensor<4xbf16> {offload.name = "w", offload.role = #offload.role<parameter>},
                %x: tensor<4xbf16> {offload.name = "x", offload.role = #offload.role<input>},
                %s: tensor<i64> {offload.name = "optimizer.step", offload.role = #offload.role<optimizer_state>},
                %m: tensor<4xbf16> {offload.name = "w.momentum_buffer", offload.role = #offload.role<optimizer_state>})
    -> (tensor<4xbf16> {offload.name = "w", offload.role = #offload.role<new_parameter>},
        tensor<4xbf16> {offload.name = "w.momentum_buffer", offload.role = #offload.role<new_optimizer_state>},
        tensor<i64> {offload.name = "optimizer.step", offload.role = #offload.role<new_optimizer_state>})
    attributes {offload.step} {
  offload.phase forward
  offload.phase backward
  %g = offload.relu %x : tensor<4xbf16>
  offload.phase optimizer
  %p1, %m1, %s1 = offload.sgd_update %w, %g, %m, %s {lr = 1.0e-01 : f64, momentum = 9.0e-01 : f64, dampening = 0.0 : f64, weight_decay = 0.0 : f64, nesterov = false} : tensor<4xbf16>, tensor<i64>
  return %p1, %m1, %s1 : tensor<4xbf16>, tensor<4xbf16>, tensor<i64>
}
