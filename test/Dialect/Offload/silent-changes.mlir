// Options and pass orders that used to change a step silently are errors
// (issue 18): a NaN learning rate trained to NaN; policy=names without names
// recomputed everything; negative min-bytes and prefetch-distance were
// accepted; the memory passes before autodiff did nothing; the lowering of a
// step that was never differentiated wrote a plan that "trained" nothing.
//
// RUN: not offload-opt %S/../../Inputs/mlp-forward.mlir --offload-autodiff="optimizer=sgd lr=nan" -o /dev/null 2>&1 | FileCheck %s --check-prefix=LRNAN
// RUN: not offload-opt %S/../../Inputs/mlp-forward.mlir --offload-autodiff="optimizer=sgd lr=inf" -o /dev/null 2>&1 | FileCheck %s --check-prefix=LRINF
// RUN: not offload-opt %S/../../Inputs/mlp-forward.mlir --offload-autodiff="optimizer=adamw beta1=nan" -o /dev/null 2>&1 | FileCheck %s --check-prefix=BETA
// RUN: not offload-opt %S/../../Inputs/mlp-forward.mlir --offload-autodiff="optimizer=sgd lr=0.1" --offload-recompute=policy=names -o /dev/null 2>&1 | FileCheck %s --check-prefix=NAMES
// RUN: not offload-opt %S/../../Inputs/mlp-forward.mlir --offload-autodiff="optimizer=sgd lr=0.1" --offload-host-offload="policy=names" -o /dev/null 2>&1 | FileCheck %s --check-prefix=HONAMES
// RUN: not offload-opt %S/../../Inputs/mlp-forward.mlir --offload-autodiff="optimizer=sgd lr=0.1" --offload-host-offload="min-bytes=-1" -o /dev/null 2>&1 | FileCheck %s --check-prefix=MINBYTES
// RUN: not offload-opt %S/../../Inputs/mlp-forward.mlir --offload-autodiff="optimizer=sgd lr=0.1" --offload-host-parameters="policy=size min-bytes=-5" -o /dev/null 2>&1 | FileCheck %s --check-prefix=HPMINBYTES
// RUN: not offload-opt %S/../../Inputs/mlp-forward.mlir --offload-autodiff="optimizer=sgd lr=0.1" --offload-host-offload="policy=all prefetch-distance=-2" -o /dev/null 2>&1 | FileCheck %s --check-prefix=PREFETCH
// RUN: not offload-opt %S/../../Inputs/mlp-forward.mlir --offload-recompute=policy=all -o /dev/null 2>&1 | FileCheck %s --check-prefix=BEFORE
// RUN: not offload-opt %S/../../Inputs/mlp-forward.mlir --offload-host-offload=policy=all -o /dev/null 2>&1 | FileCheck %s --check-prefix=HOBEFORE
// RUN: not offload-opt %S/../../Inputs/mlp-forward.mlir --convert-offload-to-plan="output=%t.oflp" -o /dev/null 2>&1 | FileCheck %s --check-prefix=LOWER
// RUN: offload-opt %S/../../Inputs/mlp-forward.mlir --convert-offload-to-plan="output=%t.oflp forward-only=true" -o /dev/null
// RUN: offload-opt %S/../../Inputs/mlp-forward.mlir --offload-autodiff="optimizer=sgd lr=0.1" --offload-recompute="policy=names names=*" -o - | FileCheck %s --check-prefix=NAMESOK
//
// LRNAN: error: offload-autodiff: lr must be a finite number >= 0, got nan
// LRINF: error: offload-autodiff: lr must be a finite number >= 0, got inf
// BETA: error: offload-autodiff: beta1 must be a finite number in [0, 1), got nan
// NAMES: error: offload-recompute: policy=names needs names=GLOB
// HONAMES: error: offload-host-offload: policy=names needs names=GLOB
// MINBYTES: error: offload-host-offload: min-bytes must be >= 0, got -1
// HPMINBYTES: error: offload-host-parameters: min-bytes must be >= 0, got -5
// PREFETCH: error: offload-host-offload: prefetch-distance must be -1 (placed from the cost model) or >= 0 compute ops, got -2
// BEFORE: error: offload-recompute: step 'forward' has no backward phase, so no saved values to recompute; run --offload-autodiff first
// HOBEFORE: error: 'func.func' op offload-host-offload: the step has no backward phase
// LOWER: error: convert-offload-to-plan: step 'forward' has parameters (e.g. 'fc1.weight') but no backward phase: the plan would train nothing; run --offload-autodiff first, or pass forward-only=true for an inference plan
// NAMESOK: offload.recompute
