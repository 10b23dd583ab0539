// The planner's decisions on small steps, each kind forced by a budget
// (figures: test/Inputs/chain-forward.mlir and mlp-forward.mlir with SGD
// momentum; unplanned device arenas 19204 and 10756 bytes).
//
// A budget the step meets unplanned: nothing changes.
// RUN: offload-opt %S/../../Inputs/chain-forward.mlir --offload-autodiff="optimizer=sgd momentum=0.9" \
// RUN:   --offload-plan-memory="budget=30000 target=h100-sxm report=-" 2>%t.fits | FileCheck %s --check-prefix=FITS \
// RUN:   --implicit-check-not=offload.recompute --implicit-check-not=offload.to_host
// RUN: FileCheck %s --check-prefix=FITS-REPORT < %t.fits
// FITS: offload.planned = "budget=30000 target=h100-sxm"
// FITS-REPORT: plan-memory @forward: the step fits unplanned: device arena 19204 bytes (18.75 KiB) <= budget 30000 bytes (29.30 KiB) on h100-sxm; nothing changed
//
// Early optimizer updates alone (the mlp's peak is at the end of backward):
// each update runs right after its gradient, before the next layer's
// backward ops.
// RUN: offload-opt %S/../../Inputs/mlp-forward.mlir --offload-autodiff="optimizer=sgd momentum=0.9" \
// RUN:   --offload-plan-memory="budget=10500 report=-" 2>%t.early | FileCheck %s --check-prefix=EARLY
// RUN: FileCheck %s --check-prefix=EARLY-REPORT < %t.early
// EARLY: offload.phase backward
// EARLY: offload.sgd_update
// EARLY: offload.sgd_update
// EARLY: offload.relu_backward
// EARLY: offload.sgd_update
// EARLY: offload.sgd_update
// EARLY: offload.phase optimizer
// EARLY-NEXT: return
// EARLY-REPORT: update    optimizer updates{{.*}}early{{.*}}4 updates run as soon as their gradient is final
// EARLY-REPORT: decisions: 0 saved values recomputed, 0 offloaded, 2 kept; 0 parameters on the host; 4 early optimizer updates
// EARLY-REPORT: device arena: 10756 -> 10500 bytes
//
// Recompute of a saved value (the chain's peak is in backward, where saved
// activations are alive): on h100-sxm rerunning the linear is cheaper than
// copying it, and one value is enough (earlier decisions the aim no longer
// needs are given back).
// RUN: offload-opt %S/../../Inputs/chain-forward.mlir --offload-autodiff="optimizer=sgd momentum=0.9" \
// RUN:   --offload-plan-memory="budget=18000 report=-" 2>%t.saved | FileCheck %s --check-prefix=SAVED
// RUN: FileCheck %s --check-prefix=SAVED-REPORT < %t.saved
// SAVED: offload.phase backward
// SAVED: offload.recompute
// SAVED-REPORT: saved     linear block1.fc1{{.*}}2048 recompute{{.*}}live at the peak
// SAVED-REPORT: decisions: 1 saved values recomputed, 0 offloaded, 6 kept; 0 parameters on the host
//
// Offload with a prefetch: on a target whose link is far faster than its
// compute, copying the same value is the cheaper way.
// RUN: echo '{"name": "slow-compute", "memory_bytes": 100000, "memory_bytes_per_second": 1e9, "flops_per_second": 1e9, "host_to_device_bytes_per_second": 1e13, "device_to_host_bytes_per_second": 1e13}' > %t.slow.json
// RUN: offload-opt %S/../../Inputs/chain-forward.mlir --offload-autodiff="optimizer=sgd momentum=0.9" \
// RUN:   --offload-plan-memory="budget=18000 target=%t.slow.json report=-" 2>%t.offload | FileCheck %s --check-prefix=OFFLOAD
// RUN: FileCheck %s --check-prefix=OFFLOAD-REPORT < %t.offload
// OFFLOAD: offload.to_host async
// OFFLOAD: offload.phase backward
// OFFLOAD: offload.to_device async
// OFFLOAD-REPORT: saved     linear block1.fc1{{.*}}2048 offload{{.*}}live at the peak
// OFFLOAD-REPORT: decisions: 0 saved values recomputed, 1 offloaded, 6 kept; 0 parameters on the host
//
// A parameter on the host: its argument, optimizer state and update move
// there.
// RUN: offload-opt %S/../../Inputs/chain-forward.mlir --offload-autodiff="optimizer=sgd momentum=0.9" \
// RUN:   --offload-plan-memory="budget=16000 report=-" 2>%t.host | FileCheck %s --check-prefix=HOST
// RUN: FileCheck %s --check-prefix=HOST-REPORT < %t.host
// HOST: %arg6: !offload.host<tensor<4x16xf32>> {offload.name = "fc3.weight"
// HOST: offload.sgd_update {{.*}} : !offload.host<tensor<4x16xf32>>
// HOST-REPORT: parameter bn.bias{{.*}}host{{.*}}with others, exchanged for a costlier host parameter
// HOST-REPORT: parameter fc3.weight{{.*}}host{{.*}}with others, exchanged for a costlier host parameter
// HOST-REPORT: device arena: 19204 -> {{1[0-5][0-9][0-9][0-9]}} bytes
// The runs of the rounds, each from the same start: the greedy ends at a
// 15,876-byte arena; the exchange's one-for-several move (a costlier host
// parameter back on the device, bn.bias and fc3.weight on the host in its
// place) simulates 40% faster at the same arena and is kept. Its simulated stall is above the
// unhidden link time its prices assumed, so a run with the link weighted by
// the ratio follows (and here gives the same plan).
// HOST-REPORT: run greedy: aims 16000 (over) {{[0-9 (over)]+}}; arena 15876 bytes, 2.075e-07 s{{$}}
// HOST-REPORT-NEXT: run exchange: aims 16000 (over) {{[0-9 (over)]+}}; arena 15876 bytes, 1.22e-07 s, kept
// HOST-REPORT-NEXT: run exchange+re-plan: aims 16000 (over) {{[0-9 (over)]+}}; arena {{[0-9]+}} bytes, {{.*}} s{{$}}
// HOST-REPORT-NEXT: run exchange (link x{{[1-4]\.[0-9][0-9]}}): aims 16000
//
// The host-parameter re-plan (ruin and recreate): at 16,500 bytes, each host
// parameter in turn back on the device and barred from the host, the greedy
// re-covering the peak: 16,388 -> 15,620 bytes and a 32% shorter step.
// RUN: offload-opt %S/../../Inputs/chain-forward.mlir --offload-autodiff="optimizer=sgd momentum=0.9" \
// RUN:   --offload-plan-memory="budget=16500 report=-" -o /dev/null 2>&1 | FileCheck %s --check-prefix=REPLAN
// REPLAN: run greedy: aims 16500 (over) {{[0-9 (over)]+}}; arena 16388 bytes, 1.038e-07 s{{$}}
// REPLAN-NEXT: run exchange: aims 16500 (over) {{[0-9 (over)]+}}; arena 16388 bytes, 1.038e-07 s{{$}}
// REPLAN-NEXT: run exchange+re-plan: aims 16500 (over) {{[0-9 (over)]+}}; arena 15620 bytes, 7.073e-08 s, kept
//
// The climb: where the first aim fits with slack under the budget (the
// model's peak lies above the real arena), the aim rises by the slack until
// one overshoots, then it is bisected (at most 6 more checks). The wide
// classifier's only choice is fc2.weight on the host (a 1,381,636-byte arena
// under a 2,000,000-byte budget).
// RUN: offload-opt %S/../../Inputs/wide-classifier-forward.mlir --offload-autodiff="momentum=0.9" \
// RUN:   --offload-plan-memory="budget=2000000 report=-" -o /dev/null 2>&1 | FileCheck %s --check-prefix=CLIMB
// CLIMB: parameter fc2.weight {{.*}} host
// CLIMB: run greedy: aims 2000000 2618364 3236728 3855092 (over) 3545910 (over) {{[0-9 (over)]+}}; arena 1381636 bytes, {{.*}}, kept
//
// The report to a file, the IR alone on stdout (it parses again).
// RUN: offload-opt %S/../../Inputs/chain-forward.mlir --offload-autodiff="optimizer=sgd momentum=0.9" \
// RUN:   --offload-plan-memory="budget=16000 report=%t.table report-kept=true" 2>%t.stderr \
// RUN:   | offload-opt --offload-memory-report -o /dev/null 2>&1 | FileCheck %s --check-prefix=REPARSE
// RUN: FileCheck %s --check-prefix=TABLE < %t.table
// RUN: count 0 < %t.stderr
// REPARSE: device arena bytes: {{1[0-5][0-9][0-9][0-9]}}
// TABLE: kind      value or parameter
// TABLE-DAG: saved     relu block1.relu{{.*}}keep
// TABLE-DAG: parameter fc2.weight{{.*}}device
//
// Below the smallest reachable arena: one error with that arena, what is
// live at its peak and the budget to ask for; nothing on stdout. The named
// budget then succeeds.
// RUN: not offload-opt %S/../../Inputs/chain-forward.mlir --offload-autodiff="optimizer=sgd momentum=0.9" \
// RUN:   --offload-plan-memory="budget=10000" -o %t.never 2>&1 | FileCheck %s --check-prefix=SMALL
// RUN: not test -e %t.never
// SMALL: error: offload-plan-memory: no plan fits the budget of 10000 bytes (9.77 KiB) on h100-sxm; the smallest device arena reachable is [[SMALLEST:[0-9]+]] bytes ({{.*}}). Its peak, {{[0-9]+}} live bytes, is at op #{{[0-9]+}} '{{.*}}', with {{[0-9]+}} persistent device bytes (arguments, constants, results); the largest tensors live there: {{.*}}. Ask for budget=[[SMALLEST]] ({{.*}}) or more
// SMALL: note: {{.*}}the smallest arena's peak is here
// RUN: not offload-opt %S/../../Inputs/chain-forward.mlir --offload-autodiff="optimizer=sgd momentum=0.9" \
// RUN:   --offload-plan-memory="budget=10000" 2>&1 | sed -n 's/.*Ask for budget=\([0-9]*\).*/\1/p' > %t.min
// RUN: offload-opt %S/../../Inputs/chain-forward.mlir --offload-autodiff="optimizer=sgd momentum=0.9" \
// RUN:   --offload-plan-memory="budget=$(cat %t.min) report=-" -o /dev/null 2>&1 | FileCheck %s --check-prefix=MIN
// MIN: decisions:
// MIN: device arena: 19204 -> {{[0-9]+}} bytes
//
// A saved budget (saved-budget=, PyTorch's activation_memory_budget in
// bytes): the saved values kept on the device at most that many bytes, the
// arena within the target's memory. At 0 every saved value is recomputed
// (one shared region reruns the chain: the others are held from it) or
// offloaded (the batch norm's statistics); at 3000 of the 8832 saved bytes
// the two cheapest linear outputs and the add are recomputed.
// RUN: offload-opt %S/../../Inputs/chain-forward.mlir --offload-autodiff="optimizer=sgd momentum=0.9" \
// RUN:   --offload-plan-memory="saved-budget=0 report=-" 2>%t.saved0 | FileCheck %s --check-prefix=SAVED0
// RUN: FileCheck %s --check-prefix=SAVED0-REPORT < %t.saved0
// SAVED0: offload.planned = "budget=80000000000 saved-budget=0 target=h100-sxm"
// SAVED0-REPORT: saved budget 0 bytes (0 B): kept saved bytes 8832 -> 0 (saved values left on the device and checkpoints)
// SAVED0-REPORT: saved     linear block1.fc1{{.*}}recompute{{.*}}held from the region of linear (recomputed there once)
// SAVED0-REPORT: decisions: 5 saved values recomputed, 2 offloaded, 0 kept; 0 parameters on the host
// RUN: offload-opt %S/../../Inputs/chain-forward.mlir --offload-autodiff="optimizer=sgd momentum=0.9" \
// RUN:   --offload-plan-memory="saved-budget=3000 report=-" -o /dev/null 2>&1 | FileCheck %s --check-prefix=SAVED3K
// SAVED3K: saved budget 3000 bytes (2.93 KiB): kept saved bytes 8832 -> 2688
// SAVED3K: decisions: 3 saved values recomputed, 0 offloaded, 4 kept; 0 parameters on the host
// SAVED3K: run greedy: aims 3000;
// As a percentage of the step's saved bytes (PyTorch's
// activation_memory_budget=0.34): 34% of 8832 is 3002 bytes, rounded down.
// RUN: offload-opt %S/../../Inputs/chain-forward.mlir --offload-autodiff="optimizer=sgd momentum=0.9" \
// RUN:   --offload-plan-memory="saved-budget=34% report=-" 2>%t.saved34 | FileCheck %s --check-prefix=SAVED34
// RUN: FileCheck %s --check-prefix=SAVED34-REPORT < %t.saved34
// SAVED34: offload.planned = "budget=80000000000 saved-budget=3002 target=h100-sxm"
// SAVED34-REPORT: saved budget 3002 bytes (2.93 KiB): kept saved bytes 8832 -> 2688
//
// A target that reserves library workspace: the planner counts it in the
// budget, the lowering puts it above the arena as the plan's workspace
// buffer, and the predicted peak counts it.
// RUN: echo '{"name": "ws-gpu", "memory_bytes": 100000, "memory_bytes_per_second": 1e12, "flops_per_second": 1e13, "host_to_device_bytes_per_second": 2e10, "device_to_host_bytes_per_second": 2e10, "workspace_bytes": 4096}' > %t.ws.json
// RUN: offload-opt %S/../../Inputs/chain-forward.mlir --offload-autodiff="optimizer=sgd momentum=0.9" \
// RUN:   --offload-plan-memory="budget=20000 target=%t.ws.json report=none" \
// RUN:   --convert-offload-to-plan="output=%t.ws.oflp report=-" -o %t.ws.mlir 2>&1 | FileCheck %s --check-prefix=WS-LOWER
// RUN: FileCheck %s --check-prefix=WS-IR < %t.ws.mlir
// RUN: offload-run --dump-plan %t.ws.oflp | FileCheck %s --check-prefix=WS-PLAN
// WS-LOWER: plan {{.*}} peak device bytes [[PEAK:[0-9]+]] (memory plan: {{[0-9]+}}), device arena {{1[0-9][0-9][0-9][0-9]}} bytes
// WS-IR: offload.workspace_bytes = 4096
// WS-PLAN: workspace %{{[0-9]+}} (4096 bytes)
// WS-PLAN: "workspace" bool[4096] device@{{[0-9]+}}+4096 workspace live [0,
