// RUN: offload-opt %S/../../Inputs/mlp-forward.mlir --offload-cost-report -o /dev/null 2>&1 | FileCheck %s --check-prefix=COST
// RUN: offload-opt %S/../../Inputs/mlp-forward.mlir --offload-autodiff --offload-saved-value-report -o /dev/null 2>&1 | FileCheck %s --check-prefix=SAVED
// RUN: offload-opt %S/../../Inputs/mlp-forward.mlir --offload-autodiff --offload-memory-report -o /dev/null 2>&1 | FileCheck %s --check-prefix=MEM

// linear 32x8 -> 16 with bias: 2*32*16*8 + 32*16 = 8704 FLOPs; reads
// 32*8*4 + 16*8*4 + 16*4 = 1600 bytes, writes 32*16*4 = 2048.
// COST: cost report for @forward
// COST: offload.linear flops=8704 read=1600 written=2048
// COST: offload.relu flops=512 read=2048 written=2048
// COST: phase forward

// ReLU's result (32x16 f32) and the logits (32x4 f32) are the saved values.
// SAVED: saved values of @forward
// SAVED: 2048 offload.relu relu_backward,matmul
// SAVED: 512 offload.linear cross_entropy_backward
// SAVED: total: 2560 bytes in 2 saved values

// MEM: memory plan of @forward
// MEM: peak device bytes: {{[0-9]+}} at op #{{[0-9]+}}
// MEM: device arena bytes:
// MEM: largest temporaries live at the peak:
// MEM: 2048 bytes
