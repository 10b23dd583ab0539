//===- Passes.td - offload conversions -----------------------*- tablegen -*-===//
#ifndef OFFLOAD_CONVERSION_PASSES_TD
#define OFFLOAD_CONVERSION_PASSES_TD

include "mlir/Pass/PassBase.td"

def ConvertOffloadToPlan : Pass<"convert-offload-to-plan", "::mlir::ModuleOp"> {
  let summary = "Deprecated spelling of the plan exporter "
                "(offload-translate --offload-to-plan)";
  let description = [{
    Deprecated: plan emission is an exporter, `offload-translate
    --offload-to-plan step.mlir -o step.plan` (docs/design.md, "The plan
    exporter"); this pass spelling is kept for one release and then removed.
    It writes the same plan, leaves the IR unchanged and preserves every
    analysis (the memory plan among them).

    Lowers the function carrying `offload.step` to the runtime's static plan
    (include/offload/Runtime/Plan.h, a versioned FlatBuffers file):

    * every SSA tensor gets the buffer of the step's memory plan
      (MemoryPlan.h: liveness over the op order, views aliased, best-fit
      arena offsets), in the device or host arena; `offload.reshape`
      becomes an alias, `offload.save`/`offload.restore` name the same
      buffer, phase markers become the plan's phases;
    * async copies run on the host-to-device or device-to-host stream, each
      token becomes an event, and a copy first waits for an event recorded
      on the compute stream, so it never reads a tensor still being written;
    * arguments bind as inputs by `offload.name`; results bind as outputs
      (`loss`, updated parameters and state under the parameter's name,
      gradients as `grad:<name>`);
    * the predicted peak device bytes are stored in the plan and, with
      `report=-` (stderr) or `report=FILE`, written with the plan summary
      (never to the IR output stream; off by default).

    IR is unchanged. Example:
    `offload-opt step.mlir --convert-offload-to-plan="output=step.plan"`
  }];
  let options = [
    Option<"output", "output", "std::string", /*default=*/"\"\"",
           "Path of the plan file to write (required)">,
    Option<"report", "report", "std::string", /*default=*/"\"\"",
           "Where the report goes: - or true (stderr), FILE, or false (none)">,
    Option<"quiet", "quiet", "bool", /*default=*/"false",
           "Deprecated, no effect: the plan summary is off unless report= "
           "asks for it">,
    Option<"forwardOnly", "forward-only", "bool", /*default=*/"false",
           "Lower a step that has parameters but no backward phase (an "
           "inference plan); without it such a step is refused, since the "
           "plan would compute the loss and train nothing">,
  ];
}

#endif
