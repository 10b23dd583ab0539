// Transform passes never print to the IR output stream, and say nothing
// unless asked: every pass that can report takes report= (PassReport.h):
// off by default, `report=-` (or true) for stderr, `report=FILE` for a file.
// The dedicated report passes print to stderr by default.
//
// Default: stdout is the IR, stderr is empty.
// RUN: offload-opt %S/../../Inputs/chain-forward.mlir --offload-autodiff \
// RUN:   --offload-recompute="policy=ops ops=relu" --offload-split-weight-grad --offload-host-offload=policy=all \
// RUN:   2>%t.quiet | offload-opt --offload-inline-recompute | FileCheck %s --check-prefix=ALL
// RUN: offload-opt %S/../../Inputs/chain-forward.mlir --offload-autodiff="optimizer=sgd momentum=0.9" \
// RUN:   --offload-host-parameters -o /dev/null 2>>%t.quiet
// RUN: offload-opt %S/../../Inputs/chain-forward.mlir --offload-slice-parameters=slice-bytes=256 \
// RUN:   --offload-autodiff="optimizer=sgd momentum=0.9" --offload-early-update --offload-plan-memory="budget=16000" \
// RUN:   --convert-offload-to-plan="output=%t.oflp" -o /dev/null 2>>%t.quiet
// RUN: count 0 < %t.quiet
//
// report=- (and report=true): the report on stderr, the IR on stdout.
// RUN: offload-opt %S/../../Inputs/chain-forward.mlir --offload-autodiff \
// RUN:   --offload-recompute="policy=ops ops=relu,batch_norm report=-" 2>%t.report | offload-opt | FileCheck %s
// RUN: FileCheck %s --check-prefix=REPORT < %t.report
// RUN: offload-opt %S/../../Inputs/chain-forward.mlir --offload-autodiff \
// RUN:   --offload-recompute="policy=ops ops=relu,batch_norm report=true" 2>&1 >/dev/null | FileCheck %s --check-prefix=REPORT
//
// report=FILE: each pass's report in its file, nothing on stderr; the
// dedicated report passes take the same option.
// RUN: rm -f %t.*.txt
// RUN: offload-opt %S/../../Inputs/chain-forward.mlir --offload-autodiff \
// RUN:   --offload-recompute="policy=ops ops=relu,batch_norm report=%t.rc.txt" \
// RUN:   --offload-split-weight-grad="report=%t.split.txt" \
// RUN:   --offload-memory-report="report=%t.mem.txt" --offload-cost-report="report=%t.cost.txt" \
// RUN:   --offload-saved-value-report="report=%t.saved.txt" \
// RUN:   --convert-offload-to-plan="output=%t.oflp report=%t.plan.txt" 2>%t.stderr | offload-opt | FileCheck %s
// RUN: count 0 < %t.stderr
// RUN: FileCheck %s --check-prefix=REPORT < %t.rc.txt
// RUN: FileCheck %s --check-prefix=SPLIT < %t.split.txt
// RUN: FileCheck %s --check-prefix=MEM < %t.mem.txt
// RUN: FileCheck %s --check-prefix=COST < %t.cost.txt
// RUN: FileCheck %s --check-prefix=SAVED < %t.saved.txt
// RUN: FileCheck %s --check-prefix=PLAN < %t.plan.txt
// A report file that cannot be written fails the pass before it runs, and
// a failed command leaves no report behind.
// RUN: not offload-opt %S/../../Inputs/chain-forward.mlir --offload-autodiff \
// RUN:   --offload-recompute="policy=all report=%t.nodir/r.txt" 2>&1 | FileCheck %s --check-prefix=NODIR
// RUN: not offload-opt %S/../../Inputs/chain-forward.mlir --offload-autodiff \
// RUN:   --offload-recompute="policy=all report=%t.failed.txt" --offload-plan-memory="budget=10" -o /dev/null 2>/dev/null
// RUN: not test -e %t.failed.txt
// The dedicated report passes print to stderr by default, and report=false
// silences them.
// RUN: offload-opt %S/../../Inputs/chain-forward.mlir --offload-autodiff \
// RUN:   --offload-memory-report -o /dev/null 2>&1 | FileCheck %s --check-prefix=MEM
// RUN: offload-opt %S/../../Inputs/chain-forward.mlir --offload-autodiff \
// RUN:   --offload-memory-report=report=false -o /dev/null 2>&1 | count 0

// CHECK: func.func @forward
// CHECK: offload.recompute
// REPORT: recompute @forward (policy ops)
// ALL: func.func @forward
// ALL: offload.phase backward_input
// SPLIT: split @forward: {{[0-9]+}} of {{[0-9]+}} backward ops moved to W
// MEM: memory plan of @forward
// COST: cost report for @forward
// SAVED: {{[0-9]+}} saved values
// PLAN: plan {{.*}}.oflp: {{[0-9]+}} instructions
// NODIR: error: offload-recompute: the report: cannot write '{{.*}}nodir/r.txt': directory '{{.*}}nodir' does not exist

// Every report= option has the same help text: 11 text-only, and the 2 with
// a JSON form (the memory report and the planner) name json:FILE.
// RUN: offload-opt --help | grep -c "report=<string> *- Where the report goes: - or true (stderr), FILE, or false (none)" | FileCheck %s --check-prefix=HELPREPORT
// HELPREPORT: 11
// RUN: offload-opt --help | grep -c "report=<string> *- Where the report goes: - or true (stderr), FILE, json:FILE or json:- " | FileCheck %s --check-prefix=HELPJSON
// HELPJSON: 2

// Keyword options are enums: --help lists their values, and a bad value
// fails in the option parser, before any pass runs.
// RUN: offload-opt --help | FileCheck %s --check-prefix=HELP
// HELP: --offload-autodiff
// HELP: --optimizer=<value>
// HELP-NEXT: =sgd
// HELP-NEXT: =adamw
// HELP-NEXT: =none
// HELP: --step-counters=<value>
// HELP-NEXT: =shared
// HELP-NEXT: =per-parameter
// RUN: not offload-opt %S/../../Inputs/mlp-forward.mlir --offload-autodiff="optimizer=adam" 2>&1 | FileCheck %s --check-prefix=BADOPT
// BADOPT: for the --optimizer option: Cannot find option named 'adam'!
// RUN: not offload-opt %S/../../Inputs/mlp-forward.mlir --offload-host-offload="policy=largest" 2>&1 | FileCheck %s --check-prefix=BADPOL
// BADPOL: for the --policy option: Cannot find option named 'largest'!
