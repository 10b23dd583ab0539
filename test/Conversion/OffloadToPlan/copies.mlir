// Copies in a plan: synchronous ones on the compute stream; async ones on
// their copy streams, after an event recorded on compute, with their token's
// event waited for by compute before the prefetched tensor is read.
// RUN: offload-opt %s --convert-offload-to-plan="output=%t.oflp" -o /dev/null
// RUN: offload-run --dump-plan %t.oflp | FileCheck %s
// RUN: offload-run %t.oflp --inputs %S/Inputs/x4x8.npz --dump %t.out.npz --poison | FileCheck %s --check-prefix=EXEC
// RUN: %python_torch -c "import numpy as np, sys; x = np.load(sys.argv[1])['x']; o = np.load(sys.argv[2])['out']; sys.exit(0 if np.array_equal(o, np.maximum(x, 0) + x) else 1)" %S/Inputs/x4x8.npz %t.out.npz
// REQUIRES: offload-run

// CHECK: [compute] {{.*}} = offload.relu
// CHECK-NEXT: [compute] offload.wait() {{.*}}record
// CHECK-NEXT: [d2h] %{{[0-9]+}} = offload.to_host({{.*}}) {{.*}}wait
// CHECK: [compute] %{{[0-9]+}} = offload.to_host(
// CHECK: [h2d] %{{[0-9]+}} = offload.to_device(
// CHECK: [compute] offload.wait() {{.*}}wait
// CHECK: [compute] %{{[0-9]+}} = offload.to_device(
// CHECK: offload.add
// EXEC-NOT: error
// EXEC: peak device bytes: planned [[P:[0-9]+]] measured [[P]]
func.func @step(%x: tensor<4x8xf32> {offload.name = "x", offload.role = #offload.role<input>})
    -> (tensor<4x8xf32> {offload.name = "out", offload.role = #offload.role<output>}) attributes {offload.step} {
  %y = offload.relu %x : tensor<4x8xf32>
  %h, %t0 = offload.to_host async %y : tensor<4x8xf32>
  %h2 = offload.to_host %x : tensor<4x8xf32>
  %d, %t1 = offload.to_device async [%t0] %h : !offload.host<tensor<4x8xf32>>
  offload.wait [%t1]
  %d2 = offload.to_device %h2 : !offload.host<tensor<4x8xf32>>
  %sum = offload.add %d, %d2 : tensor<4x8xf32>, tensor<4x8xf32>
  return %sum : tensor<4x8xf32>
}
