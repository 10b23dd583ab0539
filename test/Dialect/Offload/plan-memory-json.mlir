// Machine-readable results: report=json:FILE on the planner and the memory
// report, and the exit-code contract (docs/design.md, "Exit codes"): no plan
// fits -> exit 3 with the JSON report written all the same, stating the
// smallest reachable arena; nothing else of the command is left behind.
// (mlp-forward.mlir with SGD momentum: unplanned device arena 10756 bytes.)
//
// RUN: offload-opt %S/../../Inputs/mlp-forward.mlir --offload-autodiff="optimizer=sgd momentum=0.9" -o %t.step.mlir
//
// A plan: status, figures, decisions, the runs of the search, the text.
// RUN: offload-opt %t.step.mlir --offload-plan-memory="budget=9000 target=h100-sxm report=json:%t.plan.json" -o %t.planned.mlir
// RUN: FileCheck %s --check-prefix=PLAN < %t.plan.json
// PLAN: "format": "offload-plan-report"
// PLAN: "plans_built": {{[1-9][0-9]*}}
// PLAN: "status": "planned"
// PLAN: "text": "plan-memory @forward: budget 9000 bytes
// PLAN: "version": 1
//
// The step fits unplanned.
// RUN: offload-opt %t.step.mlir --offload-plan-memory="budget=20000 report=json:-" -o /dev/null 2>&1 | FileCheck %s --check-prefix=FITS
// FITS: "arena_bytes": 10756
// FITS: "status": "fits-unplanned"
//
// No plan fits: exit code 3, the JSON report names the smallest arena,
// and -o is not written.
// RUN: rm -f %t.none.json %t.none.mlir
// RUN: sh -c 'offload-opt %t.step.mlir --offload-plan-memory="budget=1000 report=json:%t.none.json" -o %t.none.mlir 2>/dev/null; echo "exit=$?"' | FileCheck %s --check-prefix=EXIT
// EXIT: exit=3
// RUN: FileCheck %s --check-prefix=NONE < %t.none.json
// NONE: "smallest_arena_bytes": {{[1-9][0-9]*}}
// NONE: "status": "no-plan"
// NONE: "suggested_budget_bytes": {{[1-9][0-9]*}}
// RUN: not test -e %t.none.mlir
//
// A text report is not kept by a failed command, and an error that is not
// "no plan fits" exits 1 and leaves no JSON behind.
// RUN: rm -f %t.none.txt %t.bad.json
// RUN: sh -c 'offload-opt %t.step.mlir --offload-plan-memory="budget=1000 report=%t.none.txt" -o /dev/null 2>/dev/null; echo "exit=$?"' | FileCheck %s --check-prefix=EXIT
// RUN: not test -e %t.none.txt
// RUN: sh -c 'offload-opt %t.step.mlir --offload-plan-memory="budget=1000 target=nosuch report=json:%t.bad.json" -o /dev/null 2>/dev/null; echo "exit=$?"' | FileCheck %s --check-prefix=EXIT1
// EXIT1: exit=1
// RUN: not test -e %t.bad.json
//
// The memory report's JSON form.
// RUN: offload-opt %t.step.mlir --offload-memory-report=report=json:- -o /dev/null 2>&1 | FileCheck %s --check-prefix=MEM
// MEM: "format": "offload-memory-report"
// MEM: "device_arena_bytes": 10756
// MEM: "function": "forward"
//
// A pass without a JSON form refuses json:.
// RUN: not offload-opt %t.step.mlir --offload-saved-value-report=report=json:- -o /dev/null 2>&1 | FileCheck %s --check-prefix=NOJSON
// NOJSON: offload-saved-value-report: report=json:-: this pass's report has no JSON form
