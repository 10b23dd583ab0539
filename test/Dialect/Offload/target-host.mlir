// target=host reads the host target file that `offload-run --calibrate`
// writes (issue 31): $OFFLOAD_HOST_TARGET, else
// $XDG_CACHE_HOME/offload/host-target.json, else
// $HOME/.cache/offload/host-target.json. Nothing is measured while
// compiling; a missing or invalid file is an error naming the command that
// makes it.
// RUN: rm -rf %t && mkdir -p %t/cache/offload %t/home
// RUN: offload-opt %S/../../Inputs/mlp-forward.mlir --offload-autodiff -o %t/step.mlir
//
// The file lit.cfg.py gives (OFFLOAD_HOST_TARGET): its figures and source.
// RUN: offload-opt %t/step.mlir --offload-cost-report="per-op=false target=host report=-" -o /dev/null 2>&1 | FileCheck %s --check-prefix=FILE
// FILE: simulated step time on host:
// FILE: target figures: calibrated by offload-run --calibrate at {{[0-9-]+T[0-9:]+Z}} on {{.*}} hardware threads) with {{[0-9]+}} kernel thread{{s?}}: GEMM {{[0-9]+}} GFLOP/s
//
// Missing: each place it is looked for, named with the command.
// RUN: env OFFLOAD_HOST_TARGET=%t/none.json not offload-opt %t/step.mlir --offload-plan-memory="budget=1MiB target=host" -o /dev/null 2>&1 | FileCheck %s --check-prefix=ENVMISSING
// ENVMISSING: error: offload-plan-memory: target=host: the host target file '{{.*}}none.json' does not exist; measure this machine with `offload-run --calibrate {{.*}}none.json` (target=host reads OFFLOAD_HOST_TARGET, else ${XDG_CACHE_HOME:-~/.cache}/offload/host-target.json)
// RUN: env -u OFFLOAD_HOST_TARGET XDG_CACHE_HOME=%t/cache not offload-opt %t/step.mlir --offload-plan-memory="budget=1MiB target=host" -o /dev/null 2>&1 | FileCheck %s --check-prefix=XDG
// XDG: target=host: the host target file '{{.*}}cache/offload/host-target.json' does not exist; measure this machine with `offload-run --calibrate {{.*}}cache/offload/host-target.json`
// RUN: env -u OFFLOAD_HOST_TARGET -u XDG_CACHE_HOME HOME=%t/home not offload-opt %t/step.mlir --offload-plan-memory="budget=1MiB target=host" -o /dev/null 2>&1 | FileCheck %s --check-prefix=HOME
// HOME: target=host: the host target file '{{.*}}home/.cache/offload/host-target.json' does not exist
// A relative XDG_CACHE_HOME is ignored (XDG Base Directory).
// RUN: env -u OFFLOAD_HOST_TARGET XDG_CACHE_HOME=relative HOME=%t/home not offload-opt %t/step.mlir --offload-plan-memory="budget=1MiB target=host" -o /dev/null 2>&1 | FileCheck %s --check-prefix=HOME
// RUN: env -u OFFLOAD_HOST_TARGET -u XDG_CACHE_HOME -u HOME not offload-opt %t/step.mlir --offload-plan-memory="budget=1MiB target=host" -o /dev/null 2>&1 | FileCheck %s --check-prefix=NOHOME
// NOHOME: target=host: neither OFFLOAD_HOST_TARGET nor HOME (nor XDG_CACHE_HOME) is set, so there is no host target file to read; calibrate with `offload-run --calibrate FILE.json` and set OFFLOAD_HOST_TARGET=FILE.json
// "base": "host" says the same.
// RUN: echo '{"base": "host"}' > %t/over-host.json
// RUN: env OFFLOAD_HOST_TARGET=%t/none.json not offload-opt %t/step.mlir --offload-plan-memory="budget=1MiB target=%t/over-host.json" -o /dev/null 2>&1 | FileCheck %s --check-prefix=BASEMISSING
// BASEMISSING: error: offload-plan-memory: target file '{{.*}}over-host.json' ("base": "host"): target=host: the host target file '{{.*}}none.json' does not exist; measure this machine with `offload-run --calibrate
//
// Found in the cache folder (a copy of lit's file), and the same plan as
// through OFFLOAD_HOST_TARGET.
// RUN: cp "$OFFLOAD_HOST_TARGET" %t/cache/offload/host-target.json
// RUN: offload-opt %t/step.mlir --offload-plan-memory="budget=200000 target=host report=none" -o %t/env.mlir
// RUN: env -u OFFLOAD_HOST_TARGET XDG_CACHE_HOME=%t/cache offload-opt %t/step.mlir --offload-plan-memory="budget=200000 target=host report=none" -o %t/xdg.mlir
// RUN: cmp %t/env.mlir %t/xdg.mlir
//
// Invalid: not JSON, a figure missing, a "base" of its own (the host file
// must be complete).
// RUN: echo '{"name": "host",' > %t/bad.json
// RUN: env OFFLOAD_HOST_TARGET=%t/bad.json not offload-opt %t/step.mlir --offload-plan-memory="budget=1MiB target=host" -o /dev/null 2>&1 | FileCheck %s --check-prefix=BADJSON
// BADJSON: error: offload-plan-memory: target=host: {{.*}}bad.json{{.*}}; measure this machine with `offload-run --calibrate {{.*}}bad.json`
// RUN: echo '{"name": "host", "memory_bytes": 0}' > %t/incomplete.json
// RUN: env OFFLOAD_HOST_TARGET=%t/incomplete.json not offload-opt %t/step.mlir --offload-plan-memory="budget=1MiB target=host" -o /dev/null 2>&1 | FileCheck %s --check-prefix=INCOMPLETE
// INCOMPLETE: error: offload-plan-memory: target=host: target file '{{.*}}incomplete.json': missing number 'memory_bytes_per_second'; measure this machine with `offload-run --calibrate
// RUN: env OFFLOAD_HOST_TARGET=%t/over-host.json not offload-opt %t/step.mlir --offload-plan-memory="budget=1MiB target=host" -o /dev/null 2>&1 | FileCheck %s --check-prefix=HOSTBASE
// HOSTBASE: error: offload-plan-memory: target=host: target file '{{.*}}over-host.json': the host target file must be complete, without 'base' (it is what "base": "host" reads); measure this machine with `offload-run --calibrate
//
// The host file has no memory size of its own: the planner needs budget=.
// RUN: not offload-opt %t/step.mlir --offload-plan-memory="target=host" -o /dev/null 2>&1 | FileCheck %s --check-prefix=NOBUDGET
// NOBUDGET: error: offload-plan-memory: give budget=BYTES (target 'host' has no memory size of its own)
//
// Measured figures a calibrated file carries, checked: maps of op rates and
// of [size, rate] points.
// RUN: echo '{"name": "h", "memory_bytes": 0, "memory_bytes_per_second": 1e10, "flops_per_second": 1e11, "host_to_device_bytes_per_second": 5e9, "device_to_host_bytes_per_second": 5e9, "calibration_threads": 3, "copy_latency_seconds": 2e-5, "op_bytes_per_second": {"offload.add": 3e9}, "sized_flops_per_second": {"offload.matmul": [[16, 1e10], [4096, 5e10]]}}' > %t/threads3.json
// RUN: env OFFLOAD_HOST_TARGET=%t/threads3.json offload-opt %t/step.mlir --offload-cost-report="per-op=false target=host report=-" -o /dev/null 2>&1 | FileCheck %s --check-prefix=FIGURES
// FIGURES: simulated step time on host: {{.*}} copies not hidden
// FIGURES: target figures: target file {{.*}}threads3.json
// RUN: echo '{"base": "host", "calibration_threads": 2}' > %t/wants2.json
// RUN: env OFFLOAD_HOST_TARGET=%t/threads3.json not offload-opt %t/step.mlir --offload-plan-memory="budget=1MiB target=%t/wants2.json" -o /dev/null 2>&1 | FileCheck %s --check-prefix=THREADS
// THREADS: error: offload-plan-memory: target file '{{.*}}wants2.json': 'calibration_threads' is 2 but the host target file '{{.*}}threads3.json' was calibrated with 3 thread(s); calibrate it with `offload-run --calibrate {{.*}}threads3.json --threads 2`
// RUN: echo '{"base": "h100-sxm", "sized_flops_per_second": {"offload.matmul": [[4096, 1e10], [16, 5e10]]}}' > %t/unsorted.json
// RUN: not offload-opt %t/step.mlir --offload-plan-memory="budget=1MiB target=%t/unsorted.json" -o /dev/null 2>&1 | FileCheck %s --check-prefix=UNSORTED
// UNSORTED: error: offload-plan-memory: target file '{{.*}}unsorted.json': 'sized_flops_per_second': 'offload.matmul': sizes must be in ascending order
// RUN: echo '{"base": "h100-sxm", "op_bytes_per_second": {"offload.add": 0}}' > %t/zero.json
// RUN: not offload-opt %t/step.mlir --offload-plan-memory="budget=1MiB target=%t/zero.json" -o /dev/null 2>&1 | FileCheck %s --check-prefix=ZERO
// ZERO: error: offload-plan-memory: target file '{{.*}}zero.json': 'op_bytes_per_second': the rate of 'offload.add' must be a finite number > 0
// RUN: echo '{"base": "h100-sxm", "copy_latency_seconds": -1}' > %t/latency.json
// RUN: not offload-opt %t/step.mlir --offload-plan-memory="budget=1MiB target=%t/latency.json" -o /dev/null 2>&1 | FileCheck %s --check-prefix=LATENCY
// LATENCY: error: offload-plan-memory: target file '{{.*}}latency.json': 'copy_latency_seconds' must be a number in [0, 1]
// RUN: echo '{"base": "h100-sxm", "sized_bytes_per_second": {"offload.sgd_update": [[1, 2, 3]]}}' > %t/triple.json
// RUN: not offload-opt %t/step.mlir --offload-plan-memory="budget=1MiB target=%t/triple.json" -o /dev/null 2>&1 | FileCheck %s --check-prefix=TRIPLE
// TRIPLE: error: offload-plan-memory: target file '{{.*}}triple.json': 'sized_bytes_per_second': 'offload.sgd_update': every point must be [size, rate], both finite and > 0
//
// The host file is an input of the command: no output may replace it.
// RUN: cp $OFFLOAD_HOST_TARGET %t/host.json
// RUN: env OFFLOAD_HOST_TARGET=%t/host.json not offload-opt %t/step.mlir --offload-plan-memory="budget=1MiB target=host report=%t/host.json" -o /dev/null 2>&1 | FileCheck %s --check-prefix=CLASH
// CLASH: host target file (offload-plan-memory target=host)
// RUN: cmp $OFFLOAD_HOST_TARGET %t/host.json
