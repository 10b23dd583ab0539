//===- OffloadInterfaces.td - Cost and differentiation interfaces -*- tablegen -*-===//
//
// Part of offload. The interfaces that the memory passes, the planner and
// autodiff query on every compute op.
//
//===----------------------------------------------------------------------===//
#ifndef OFFLOAD_INTERFACES_TD
#define OFFLOAD_INTERFACES_TD

include "mlir/IR/OpBase.td"

def Offload_CostOpInterface : OpInterface<"CostOpInterface"> {
  let cppNamespace = "::mlir::offload";
  let description = [{
    The roofline inputs of an op: floating-point operations and bytes of
    device memory read and written, for the op's static shapes. The planner
    turns them into seconds with a target's peak FLOP/s and bandwidth:
    `time = max(flops / peak_flops, (bytes_read + bytes_written) / bandwidth)`
    (the roofline model, Williams et al., CACM 2009).

    Units: FLOPs count one multiply-add as 2 FLOPs (the convention of
    PyTorch's flop counter and of the MLPerf/Megatron papers); bytes are bytes.
    Ops with dynamic shapes report -1 (unknown).
  }];
  let methods = [
    InterfaceMethod<
      "Floating-point operations of one execution (a multiply-add is 2).",
      "int64_t", "getFlops", (ins), [{}],
      /*defaultImplementation=*/[{
        // Default: one operation per element of every result.
        return ::mlir::offload::detail::sumResultElements($_op.getOperation());
      }]>,
    InterfaceMethod<
      "Bytes of tensor operands read (each operand once).",
      "int64_t", "getBytesRead", (ins), [{}],
      [{ return ::mlir::offload::detail::sumOperandBytes($_op.getOperation()); }]>,
    InterfaceMethod<
      "Bytes of tensor results written.",
      "int64_t", "getBytesWritten", (ins), [{}],
      [{ return ::mlir::offload::detail::sumResultBytes($_op.getOperation()); }]>,
    InterfaceMethod<
      "Bytes of temporary memory one task of the op's host kernel holds "
      "beyond its operands and results (the host backend runs up to its "
      "thread count of tasks at once, on the host heap: not device memory, "
      "not in the plan's arena). 0 for most ops; the fused attention states "
      "its blocked working set here. The CUDA kernels need none (shared "
      "memory only) or take it from the plan's workspace buffer.",
      "int64_t", "getScratchBytes", (ins), [{}],
      [{ return 0; }]>,
  ];
}

def Offload_DifferentiableOpInterface : OpInterface<"DifferentiableOpInterface"> {
  let cppNamespace = "::mlir::offload";
  let description = [{
    Reverse-mode differentiation of an op: its vector-Jacobian product (VJP).

    `getSavedValues` lists the forward values (operands or results of this
    op) that the VJP reads. The autodiff pass turns each into an explicit
    saved value (`offload.save` in forward, `offload.restore` in backward)
    and passes the restored values, in the same order, to `buildVJP`. An op
    lists no more than PyTorch's autograd saves for the same ATen function,
    and less where a formula allows (ReLU saves its result, dropout saves
    only its seed).

    `buildVJP` is called with the builder positioned in the backward phase.
    `resultGrads[i]` is the cotangent of result i, or a null Value when that
    result does not reach the loss. It appends one Value per operand to
    `operandGrads`: the cotangent, or a null Value for an operand that is not
    differentiable (integer tensors, seeds, running statistics). The op's own
    attributes and types may be read; its SSA operands and results may not be
    used (they belong to the forward phase).
  }];
  let methods = [
    InterfaceMethod<
      "Forward values (operands or results of this op) the VJP reads.",
      "void", "getSavedValues", (ins "::llvm::SmallVectorImpl<::mlir::Value> &":$saved)>,
    InterfaceMethod<
      "Builds the VJP; see the interface description.",
      "::mlir::LogicalResult", "buildVJP",
      (ins "::mlir::OpBuilder &":$builder, "::mlir::ValueRange":$saved,
           "::mlir::ValueRange":$resultGrads,
           "::llvm::SmallVectorImpl<::mlir::Value> &":$operandGrads)>,
    InterfaceMethod<
      "Whether a cotangent flows to operand `index` (default: float tensors).",
      "bool", "isOperandDifferentiable", (ins "unsigned":$index), [{}],
      [{ return ::mlir::offload::detail::isFloatTensor($_op->getOperand(index).getType()); }]>,
  ];
}

#endif // OFFLOAD_INTERFACES_TD
