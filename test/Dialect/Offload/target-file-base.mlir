// Target files that start from another target ("base", issue 13): a
// built-in GPU or the calibrated host (the file OFFLOAD_HOST_TARGET names,
// which lit.cfg.py and ctest's fixture host-target.calibrate write), with
// only the figures the file names replaced. Bad bases and
// calibration_threads are errors naming the key (target-host.mlir tests the
// host file itself).
// RUN: offload-opt %S/../../Inputs/mlp-forward.mlir --offload-autodiff -o %t.step.mlir
// RUN: echo '{"base": "h100-sxm", "name": "small-h100", "memory_bytes": 100000}' > %t.gpu.json
// RUN: echo '{"base": "host", "host_to_device_bytes_per_second": 1e6, "device_to_host_bytes_per_second": 1e6}' > %t.host.json
// RUN: echo '{"base": "h200"}' > %t.unknown.json
// RUN: echo '{"base": 7}' > %t.notstring.json
// RUN: echo '{"base": "h100-sxm", "calibration_threads": 1}' > %t.threadsgpu.json
// RUN: echo '{"base": "host", "calibration_threads": 0}' > %t.threads0.json
// RUN: echo '{"base": "host", "flops_per_second": -1}' > %t.negative.json
//
// The base's figures with the file's memory: the default budget is 100000.
// RUN: offload-opt %t.step.mlir --offload-plan-memory="target=%t.gpu.json report=-" -o /dev/null 2>&1 | FileCheck %s --check-prefix=GPU
// GPU: the step fits unplanned: device arena {{[0-9]+}} bytes ({{.*}}) <= budget 100000 bytes (97.66 KiB) on small-h100
// The same step's simulated time is the base's, to the last digit (the
// file replaces no rate).
// RUN: offload-opt %t.step.mlir --offload-cost-report="per-op=false target=%t.gpu.json report=-" -o /dev/null 2>&1 | sed -n 's/.*simulated step time on [^:]*: \(.*\)/\1/p' > %t.gpu.time
// RUN: offload-opt %t.step.mlir --offload-cost-report="per-op=false target=h100-sxm report=-" -o /dev/null 2>&1 | sed -n 's/.*simulated step time on [^:]*: \(.*\)/\1/p' > %t.builtin.time
// RUN: test -s %t.gpu.time && diff %t.gpu.time %t.builtin.time
//
// The calibrated host behind a 1 MB/s link: every offloaded byte costs 1 us
// each way, so the copies dominate the simulated step.
// RUN: offload-opt %t.step.mlir --offload-host-offload="policy=all" --offload-cost-report="per-op=false target=%t.host.json report=-" -o /dev/null 2>&1 | FileCheck %s --check-prefix=HOST
// HOST: simulated step time on {{.*}}host.json: {{.*}} host-to-device {{[0-9.]+}}e-03 s, device-to-host {{[0-9.]+}}e-03 s
// HOST: target figures: target file {{.*}}host.json over host (calibrated by offload-run --calibrate at {{.*}} kernel thread{{s?}}: GEMM
//
// RUN: not offload-opt %t.step.mlir --offload-plan-memory="budget=1GiB target=%t.unknown.json" -o /dev/null 2>&1 | FileCheck %s --check-prefix=UNKNOWN
// UNKNOWN: error: offload-plan-memory: target file '{{.*}}unknown.json': unknown base target 'h200'; expected one of h100-sxm, h100-pcie, a100-80g, a100-40g, l4, rtx-4090, or host
// RUN: not offload-opt %t.step.mlir --offload-plan-memory="budget=1GiB target=%t.notstring.json" -o /dev/null 2>&1 | FileCheck %s --check-prefix=NOTSTRING
// NOTSTRING: error: offload-plan-memory: target file '{{.*}}notstring.json': 'base' must be a string naming a built-in target or 'host'
// RUN: not offload-opt %t.step.mlir --offload-plan-memory="budget=1GiB target=%t.threadsgpu.json" -o /dev/null 2>&1 | FileCheck %s --check-prefix=THREADSGPU
// THREADSGPU: error: offload-plan-memory: target file '{{.*}}threadsgpu.json': 'calibration_threads' needs "base": "host"
// RUN: not offload-opt %t.step.mlir --offload-plan-memory="budget=1GiB target=%t.threads0.json" -o /dev/null 2>&1 | FileCheck %s --check-prefix=THREADS0
// THREADS0: error: offload-plan-memory: target file '{{.*}}threads0.json': 'calibration_threads' must be an integer in [1, 1024]
// RUN: not offload-opt %t.step.mlir --offload-plan-memory="budget=1GiB target=%t.negative.json" -o /dev/null 2>&1 | FileCheck %s --check-prefix=NEGRATE
// NEGRATE: error: offload-plan-memory: target file '{{.*}}negative.json': 'flops_per_second' must be a number > 0
