//===- OffloadDialect.td - The offload dialect --------------*- tablegen -*-===//
#ifndef OFFLOAD_DIALECT_TD
#define OFFLOAD_DIALECT_TD

include "mlir/IR/OpBase.td"
include "mlir/Interfaces/SideEffectInterfaces.td"

def Offload_Dialect : Dialect {
  let name = "offload";
  let cppNamespace = "::mlir::offload";
  let summary = "A training step with explicit saved values and memory placement";
  let description = [{
    The `offload` dialect models one training step of a neural network:
    value-semantics tensor compute at ATen granularity, the step's phases
    (forward, backward, optionally split into input- and weight-gradient
    halves, optimizer), every forward value that backward needs as an
    explicit saved value (`!offload.saved<T>`), recompute regions, copies
    between device and host memory with async tokens, and optimizer updates.

    A function carrying the unit attribute `offload.step` is a training step.
    Its body is one block whose op order is the execution order; the
    `offload.phase` markers split it into phases. The dialect verifies that
    markers appear in phase order, that `offload.save` only occurs in forward
    and `offload.restore` only after it, and that every argument and result
    carries `offload.name` and `offload.role`.
  }];
  let useDefaultTypePrinterParser = 1;
  let useDefaultAttributePrinterParser = 1;
  let hasOperationAttrVerify = 1;
  let hasConstantMaterializer = 0;
  // Inherent attributes live in the attribute dictionary: result types are
  // inferred from attributes while parsing `attr-dict`, which properties
  // would not hold yet. (No op here uses AttrSizedOperandSegments, whose
  // generated verifier is broken in this mode in MLIR 22.)
  let usePropertiesForAttributes = 0;
  let extraClassDeclaration = [{
    /// Attribute names used on step functions and their arguments/results.
    static constexpr ::llvm::StringLiteral kStepAttrName = "offload.step";
    static constexpr ::llvm::StringLiteral kNameAttrName = "offload.name";
    static constexpr ::llvm::StringLiteral kRoleAttrName = "offload.role";
    static constexpr ::llvm::StringLiteral kLocAttrName = "offload.source";
    /// Unit attribute on backward ops that produce an activation's gradient
    /// (set by offload-autodiff, read by offload-split-weight-grad).
    static constexpr ::llvm::StringLiteral kActivationGradAttrName =
        "offload.activation_grad";
    /// Unit attribute on the `offload.add` that sums a micro-batch's gradient
    /// (or loss) into its accumulator (gradient accumulation, set by
    /// offload-autodiff micro-batches=K): the memory plan writes the sum over
    /// the accumulator when the add is its only reader.
    static constexpr ::llvm::StringLiteral kAccumulateAttrName = "offload.accumulate";
    /// On an offload.save chosen for recompute by hand or by the planner
    /// (offload-recompute policy=marked): a unit attribute, or an integer
    /// group id >= 0 (saves with one id are recomputed by one region).
    static constexpr ::llvm::StringLiteral kRecomputeAttrName = "offload.recompute";
    /// Unit attribute on a forward compute op: its results are checkpoints
    /// of --offload-recompute (a recompute region's cone stops there and
    /// restores them, as torch.utils.checkpoint keeps a block's input),
    /// saved by that pass where a region reads them.
    static constexpr ::llvm::StringLiteral kCheckpointAttrName = "offload.checkpoint";
    /// Unit attribute on an offload.save chosen for host offload by hand or
    /// by the planner (offload-host-offload policy=marked).
    static constexpr ::llvm::StringLiteral kHostOffloadAttrName = "offload.host_offload";
    /// Unit attribute on a parameter argument chosen to live on the host
    /// (offload-host-parameters policy=marked).
    static constexpr ::llvm::StringLiteral kHostParameterAttrName = "offload.host_parameter";
    /// Dictionary attribute on a module: the target it was planned for,
    /// with the target file's keys (Analysis/Target.h, targetSpecToAttr).
    static constexpr ::llvm::StringLiteral kTargetAttrName = "offload.target";
    /// String attribute on a step the planner rewrote: "budget=B target=T".
    static constexpr ::llvm::StringLiteral kPlannedAttrName = "offload.planned";
    /// i64 attribute on a step: device bytes reserved for library
    /// workspace (cuBLAS/cuDNN), part of the plan's device memory.
    static constexpr ::llvm::StringLiteral kWorkspaceBytesAttrName = "offload.workspace_bytes";
    /// On a step argument or result that is rows [a, b) of a whole tensor of
    /// N rows (offload-slice-parameters): the whole tensor's binding name,
    /// and `array<i64: a, b, N>`.
    static constexpr ::llvm::StringLiteral kSliceOfAttrName = "offload.slice_of";
    static constexpr ::llvm::StringLiteral kSliceAttrName = "offload.slice";
    /// String attribute on a step that --offload-autodiff built: the pass
    /// with its options as a textual pipeline element
    /// (`offload-autodiff{lr=0.01 ...}`), so that the planner can rebuild
    /// the step after a rewrite of its forward (slicing; Autodiff.h).
    static constexpr ::llvm::StringLiteral kAutodiffAttrName = "offload.autodiff";

  private:
    void registerTypes();
  public:
  }];
}

// Device and host memory as side-effect resources: copies between them read
// one and write the other, so generic passes (CSE, DCE) never merge or drop a
// copy that matters, while pure compute ops stay freely foldable.
def Offload_DeviceMemory : Resource<"::mlir::offload::DeviceMemoryResource">;
def Offload_HostMemory : Resource<"::mlir::offload::HostMemoryResource">;

class Offload_Op<string mnemonic, list<Trait> traits = []>
    : Op<Offload_Dialect, mnemonic, traits> {
  // Set on ops that the lowering turns into a kernel instruction of the
  // runtime plan. offload-tblgen --gen-op-signatures lists exactly these ops
  // (operand/result counts, attributes, kinds, defaults) in the op-signature
  // table that the lowering and the runtime share (OpSignatures.h).
  bit hasKernel = 0;
}

#endif // OFFLOAD_DIALECT_TD
