// Per-dtype FLOP rates (issue 29): a bf16/f16 matrix product is priced at the
// target's dense bf16/f16 tensor-core rate, an f32 one at the fp32 rate
// (Target.cpp: H100 SXM 989.4 / 66.9 TFLOP/s, A100 312 / 19.5, L4 121 / 30.3,
// RTX 4090 165.2 / 82.6), each times the GEMM efficiency 0.7, and no faster
// than its bytes at 0.8 x the memory bandwidth.
// RUN: offload-opt %s --offload-autodiff="optimizer=sgd" --offload-cost-report=target=h100-sxm -o /dev/null 2>&1 | FileCheck %s --check-prefix=FP32
// RUN: offload-opt %s --offload-autodiff="optimizer=sgd precision=bf16-mixed" --offload-cost-report=target=h100-sxm -o /dev/null 2>&1 | FileCheck %s --check-prefix=BF16
// RUN: offload-opt %s --offload-autodiff="optimizer=sgd precision=fp16-mixed" --offload-cost-report=target=h100-sxm -o /dev/null 2>&1 | FileCheck %s --check-prefix=F16
// RUN: offload-opt %s --offload-autodiff="optimizer=sgd precision=bf16-mixed" --offload-cost-report=target=a100-80g -o /dev/null 2>&1 | FileCheck %s --check-prefix=A100
// RUN: offload-opt %s --offload-autodiff="optimizer=sgd precision=bf16-mixed" --offload-cost-report=target=l4 -o /dev/null 2>&1 | FileCheck %s --check-prefix=L4
// RUN: offload-opt %s --offload-autodiff="optimizer=sgd precision=bf16-mixed" --offload-cost-report=target=rtx-4090 -o /dev/null 2>&1 | FileCheck %s --check-prefix=RTX
// A target file sets its own (or a base's) rates: bf16_flops_per_second, f16_flops_per_second.
// RUN: echo '{"base": "h100-sxm", "bf16_flops_per_second": 100e12}' > %t.json
// RUN: offload-opt %s --offload-autodiff="optimizer=sgd precision=bf16-mixed" --offload-cost-report=target=%t.json -o /dev/null 2>&1 | FileCheck %s --check-prefix=FILE

// 2 x 1024^3 FLOPs: f32 at 66.9e12 x 0.7 = 4.5857e-05 s.
// FP32: offload.linear flops=2147483648 {{.*}} seconds=4.5857e-05
// FP32: simulated step time on h100-sxm: 2.574619e-04 s
// bf16 at 989.4e12 x 0.7 = 3.1007e-06 s (its 6 MiB at 2.68e12 B/s: 2.35e-06 s).
// BF16: offload.linear flops=2147483648 {{.*}} seconds=3.1007e-06
// BF16: simulated step time on h100-sxm: 5.620064e-05 s
// F16: offload.linear flops=2147483648 {{.*}} seconds=3.1007e-06
// fp16-mixed adds loss scaling's overflow check and unscaling (the skip is
// inside the updates; 9.06e-05 s when it was a `where` per updated value).
// F16: simulated step time on h100-sxm: 7.185113e-05 s
// On the A100, bf16 at 312e12 x 0.7.
// A100: offload.linear flops=2147483648 {{.*}} seconds=9.8328e-06
// On the L4, 121e12 x 0.7 gives 2.535e-05 s, but its 6 MiB at 300e9 x 0.8 B/s take longer.
// L4: offload.linear flops=2147483648 {{.*}} seconds=2.6214e-05
// FILE: offload.linear flops=2147483648 {{.*}} seconds=3.0678e-05
// RTX: offload.linear flops=2147483648 {{.*}} seconds=1.8570e-05
func.func @mlp(%x: tensor<1024x1024xf32> {offload.name = "x", offload.role = #offload.role<input>},
               %w1: tensor<1024x1024xf32> {offload.name = "w1", offload.role = #offload.role<parameter>},
               %w2: tensor<1024x1024xf32> {offload.name = "w2", offload.role = #offload.role<parameter>},
               %t: tensor<1024xi64> {offload.name = "t", offload.role = #offload.role<input>})
    -> (tensor<f32> {offload.name = "loss", offload.role = #offload.role<loss>}) attributes {offload.step} {
  offload.phase forward
  %h = offload.linear %x, %w1 : tensor<1024x1024xf32>, tensor<1024x1024xf32>
  %a = offload.relu %h : tensor<1024x1024xf32>
  %y = offload.linear %a, %w2 : tensor<1024x1024xf32>, tensor<1024x1024xf32>
  %l = offload.cross_entropy %y, %t : tensor<1024x1024xf32>, tensor<1024xi64>
  return %l : tensor<f32>
}
