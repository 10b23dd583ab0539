// Bad input to the planner: each a clear error naming the problem, and no
// module printed.
// RUN: echo '{"name": "x", "memory_bytes": 1000}' > %t.incomplete.json
// RUN: echo '{not json' > %t.malformed.json
// RUN: echo '{"name": "x", "memory_bytes": 1000, "memory_bytes_per_second": 1e12, "flops_per_second": 1e13, "host_to_device_bytes_per_second": 2e10, "device_to_host_bytes_per_second": 2e10, "gemm_eficiency": 0.5}' > %t.typo.json
// RUN: echo '{"name": "x", "memory_bytes": 1000, "memory_bytes_per_second": 1e12, "flops_per_second": -1, "host_to_device_bytes_per_second": 2e10, "device_to_host_bytes_per_second": 2e10}' > %t.negative.json
// RUN: echo '{"name": "tiny-gpu", "memory_bytes": 100000, "memory_bytes_per_second": 1e12, "flops_per_second": 1e13, "host_to_device_bytes_per_second": 2e10, "device_to_host_bytes_per_second": 2e10}' > %t.good.json
// RUN: offload-opt %S/../../Inputs/mlp-forward.mlir --offload-autodiff -o %t.step.mlir
//
// RUN: not offload-opt %t.step.mlir --offload-plan-memory="budget=1GiB target=h200" -o /dev/null 2>&1 | FileCheck %s --check-prefix=TARGET
// TARGET: error: offload-plan-memory: unknown target 'h200'; expected one of h100-sxm, h100-pcie, a100-80g, a100-40g, l4, rtx-4090, host (this machine, as offload-run --calibrate measured it), or a FILE.json
// RUN: not offload-opt %t.step.mlir --offload-plan-memory="budget=1GiB target=%t.missing.json" -o /dev/null 2>&1 | FileCheck %s --check-prefix=MISSING
// MISSING: error: offload-plan-memory: cannot open target file '{{.*}}missing.json': No such file or directory
// RUN: not offload-opt %t.step.mlir --offload-plan-memory="budget=1GiB target=%t.malformed.json" -o /dev/null 2>&1 | FileCheck %s --check-prefix=MALFORMED
// MALFORMED: error: offload-plan-memory: target file '{{.*}}malformed.json' is not valid JSON
// RUN: not offload-opt %t.step.mlir --offload-plan-memory="budget=1GiB target=%t.incomplete.json" -o /dev/null 2>&1 | FileCheck %s --check-prefix=INCOMPLETE
// INCOMPLETE: error: offload-plan-memory: target file '{{.*}}incomplete.json': missing number 'memory_bytes_per_second'
// RUN: not offload-opt %t.step.mlir --offload-plan-memory="budget=1GiB target=%t.typo.json" -o /dev/null 2>&1 | FileCheck %s --check-prefix=TYPO
// TYPO: error: offload-plan-memory: target file '{{.*}}typo.json': unknown key 'gemm_eficiency'
// RUN: not offload-opt %t.step.mlir --offload-plan-memory="budget=1GiB target=%t.negative.json" -o /dev/null 2>&1 | FileCheck %s --check-prefix=NEGRATE
// NEGRATE: error: offload-plan-memory: target file '{{.*}}negative.json': 'flops_per_second' must be a number > 0
// A good target file works, and its memory is the default budget.
// RUN: offload-opt %t.step.mlir --offload-plan-memory="target=%t.good.json report=-" -o /dev/null 2>&1 | FileCheck %s --check-prefix=GOODFILE
// GOODFILE: the step fits unplanned: device arena 10756 bytes (10.50 KiB) <= budget 100000 bytes (97.66 KiB) on tiny-gpu
//
// RUN: not offload-opt %t.step.mlir --offload-plan-memory="budget=0" -o /dev/null 2>&1 | FileCheck %s --check-prefix=ZERO
// ZERO: error: offload-plan-memory: the budget must be at least 1 byte, got '0'
// RUN: not offload-opt %t.step.mlir --offload-plan-memory="budget=-5GiB" -o /dev/null 2>&1 | FileCheck %s --check-prefix=NEG
// NEG: error: offload-plan-memory: the budget must be at least 1 byte, got '-5GiB'
// RUN: not offload-opt %t.step.mlir --offload-plan-memory="budget=lots" -o /dev/null 2>&1 | FileCheck %s --check-prefix=PARSE
// PARSE: error: offload-plan-memory: cannot parse the budget 'lots'; expected bytes, or a number with KiB, MiB, GiB, TiB, kB, MB, GB or TB
// RUN: not offload-opt %t.step.mlir --offload-plan-memory="budget=12GB/s" -o /dev/null 2>&1 | FileCheck %s --check-prefix=UNIT
// UNIT: error: offload-plan-memory: unknown unit 'GB/s' in the budget '12GB/s'
// Units: binary and decimal suffixes, fractions.
// RUN: not offload-opt %t.step.mlir --offload-plan-memory="budget=1.5KiB" -o /dev/null 2>&1 | FileCheck %s --check-prefix=KIB
// KIB: no plan fits the budget of 1536 bytes
// RUN: offload-opt %t.step.mlir --offload-plan-memory="budget=0.02MB report=-" -o /dev/null 2>&1 | FileCheck %s --check-prefix=MB
// MB: budget 20000 bytes
// The saved budget (saved-budget=): 0 is allowed, negative, unparsable or
// unknown units are errors naming it.
// RUN: not offload-opt %t.step.mlir --offload-plan-memory="saved-budget=-1" -o /dev/null 2>&1 | FileCheck %s --check-prefix=SAVED-NEG
// SAVED-NEG: error: offload-plan-memory: the saved budget must be at least 0 bytes, got '-1'
// RUN: not offload-opt %t.step.mlir --offload-plan-memory="saved-budget=half" -o /dev/null 2>&1 | FileCheck %s --check-prefix=SAVED-PARSE
// SAVED-PARSE: error: offload-plan-memory: cannot parse the saved budget 'half'
// An option the pass does not have is named with the pass, before MLIR's
// pipeline parser would report it without a location.
// RUN: not offload-opt %t.step.mlir --offload-plan-memory="bugdet=1GB" -o /dev/null 2>&1 | FileCheck %s --check-prefix=UNKNOWN-OPTION
// UNKNOWN-OPTION: offload-opt: error: --offload-plan-memory=bugdet=1GB: no such option bugdet; offload-opt --help lists the pass's options
// UNKNOWN-OPTION-NOT: <unknown>
// RUN: not offload-opt %t.step.mlir --offload-plan-memory="saved-budget=150%" -o /dev/null 2>&1 | FileCheck %s --check-prefix=SAVED-PERCENT
// SAVED-PERCENT: error: offload-plan-memory: cannot parse the saved budget '150%'; expected bytes, or a percentage of the step's saved bytes from 0% to 100%
// RUN: not offload-opt %t.step.mlir --offload-plan-memory="saved-budget=2kb" -o /dev/null 2>&1 | FileCheck %s --check-prefix=SAVED-UNIT
// SAVED-UNIT: error: offload-plan-memory: unknown unit 'kb' in the saved budget '2kb'
// A saved budget whose plan's arena cannot fit the budget: the error names
// the fewest kept saved bytes and the arena that plan needs.
// RUN: not offload-opt %t.step.mlir --offload-plan-memory="saved-budget=0 budget=5000" -o /dev/null 2>&1 | FileCheck %s --check-prefix=SAVED-ARENA
// SAVED-ARENA: error: offload-plan-memory: no plan keeps at most 0 saved bytes (0 B) on h100-sxm within the budget of 5000 bytes (4.88 KiB); the step saves {{[0-9]+}} bytes, and the plan keeping the fewest (0, every saved value recomputed or offloaded) needs a device arena of [[A:[0-9]+]] bytes ({{.*}}). Ask for budget=[[A]] or more, or plan without saved-budget= (parameters then may move to the host)
// A budget above the target's memory is a warning.
// RUN: offload-opt %t.step.mlir --offload-plan-memory="budget=1TB target=l4 report=-" -o /dev/null 2>&1 | FileCheck %s --check-prefix=BIG
// BIG: warning: offload-plan-memory: the budget of 1000000000000 bytes is more than l4's 24000000000 bytes of memory
//
// RUN: not offload-opt %S/../../Inputs/mlp-forward.mlir --offload-plan-memory="budget=1GiB" -o /dev/null 2>&1 | FileCheck %s --check-prefix=NOAD
// NOAD: error: offload-plan-memory: the step has no backward phase; run --offload-autodiff first
// RUN: not offload-opt %t.step.mlir --offload-plan-memory="budget=8000" --offload-plan-memory="budget=8000" -o /dev/null 2>&1 | FileCheck %s --check-prefix=TWICE
// TWICE: error: offload-plan-memory: the step is already planned (budget=8000 target=h100-sxm); run the planner once, on the step as --offload-autodiff built it
// RUN: not offload-opt %t.step.mlir --offload-recompute="policy=all report=false" --offload-plan-memory="budget=8000" -o /dev/null 2>&1 | FileCheck %s --check-prefix=MANUAL
// MANUAL: error: offload-plan-memory: the step already has a memory rewrite ('offload.recompute'); the planner decides recompute and offload itself
// RUN: not offload-opt %t.step.mlir --offload-plan-memory="budget=8000 report=%t.nodir/x.txt" -o /dev/null 2>&1 | FileCheck %s --check-prefix=REPORT
// REPORT: error: offload-plan-memory: the report: cannot write '{{.*}}nodir/x.txt': directory '{{.*}}nodir' does not exist
