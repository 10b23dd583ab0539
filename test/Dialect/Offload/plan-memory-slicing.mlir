// The planner slices a linear weight when no plan fits without it
// (slice=auto): fc2.weight (4096x64 fp32, 1 MiB) must come to the device
// whole for its linear unless it is cut into row slices, each a parameter
// of its own that lives on the host and is prefetched.
// RUN: offload-opt %S/../../Inputs/wide-classifier-forward.mlir --offload-autodiff="momentum=0.9" -o %t.step.mlir
//
// The step records its autodiff options, from which the planner rebuilds it.
// RUN: FileCheck %s --check-prefix=STEP < %t.step.mlir
// STEP: offload.autodiff = "offload-autodiff{{[{]}}{{.*}}momentum=9.000000e-01{{.*}}optimizer=sgd{{.*}}}"
//
// Below the unsliced smallest arena: sliced, planned, reported. The largest
// slice size that fits is taken (128 KiB: 8 slices; 64 KiB would also fit).
// RUN: offload-opt %t.step.mlir --offload-plan-memory="budget=400000 report=-" -o %t.planned.mlir 2>&1 | FileCheck %s --check-prefix=REPORT
// REPORT: plan-memory @forward: budget 400000 bytes
// REPORT-NEXT: slicing: no plan fits without slicing (smallest arena [[UNSLICED:[0-9]+]] bytes); parameters above 131072 bytes sliced into rows: 'fc2.weight' (1048576 bytes) in 8 slices; 'fc2.bias' (16384 bytes) in 8 slices
// REPORT: parameter fc2.weight[0:512]
// REPORT: device arena: {{[0-9]+}} -> {{[0-9]+}} bytes
// RUN: FileCheck %s --check-prefix=IR < %t.planned.mlir
// IR: offload.name = "fc2.weight[0:512]"{{.*}}offload.slice = array<i64: 0, 512, 4096>, offload.slice_of = "fc2.weight"
// IR: offload.planned = "budget=400000 target=h100-sxm slice-bytes=131072"
// IR-COUNT-8: offload.linear {{.*}} tensor<512x64xf32>
//
// Nothing fits even sliced: the error names the smallest arena, reached by
// slicing, and the unsliced one.
// RUN: not offload-opt %t.step.mlir --offload-plan-memory="budget=1" -o %t.none.mlir 2>&1 | FileCheck %s --check-prefix=SMALLEST
// SMALLEST: error: offload-plan-memory: no plan fits the budget of 1 bytes {{.*}} the smallest device arena reachable is [[MIN:[0-9]+]] bytes
// SMALLEST: note: the smallest arena is reached by slicing: no plan fits without slicing (smallest arena {{[0-9]+}} bytes); parameters above {{[0-9]+}} bytes sliced
// (That the budget it names then succeeds, and runs within it, is checked
// end to end by test/Integration/planner-classifier.test.)
// RUN: test ! -e %t.none.mlir
//
// slice=never: the step as autodiff built it; the smallest arena is the
// unsliced one.
// RUN: not offload-opt %t.step.mlir --offload-plan-memory="budget=400000 slice=never" -o /dev/null 2>&1 | FileCheck %s --check-prefix=NEVER
// NEVER: error: offload-plan-memory: no plan fits the budget of 400000 bytes {{.*}} the smallest device arena reachable is 1{{[0-9][0-9][0-9][0-9][0-9][0-9]}} bytes
// NEVER-NOT: note: {{.*}}slicing
//
// A step rewritten after autodiff is not rebuilt from its forward (the
// rewrite would be lost): slicing is not tried, and the error says why.
// RUN: offload-opt %t.step.mlir --offload-early-update -o %t.early.mlir
// RUN: not offload-opt %t.early.mlir --offload-plan-memory="budget=400000" -o /dev/null 2>&1 | FileCheck %s --check-prefix=REWRITTEN
// REWRITTEN: note: slicing was not tried: the step was rewritten after --offload-autodiff
//
// A step without the autodiff record (built by an older offload-opt).
// RUN: sed -e 's/offload.autodiff = "[^"]*", //' %t.step.mlir > %t.unrecorded.mlir
// RUN: not offload-opt %t.unrecorded.mlir --offload-plan-memory="budget=400000" -o /dev/null 2>&1 | FileCheck %s --check-prefix=UNRECORDED
// UNRECORDED: note: slicing was not tried: the step carries no 'offload.autodiff' attribute
//
// --help lists the values.
// RUN: offload-opt --help | FileCheck %s --check-prefix=HELP
// HELP: --slice=<value>
// HELP: =auto
// HELP: =never
