//===- OffloadComputeOps.td - Tensor compute ops at ATen granularity -*- tablegen -*-===//
//
// Part of offload. Value-semantics tensor ops, one per ATen function, with
// PyTorch 1.13 semantics (docs/op-semantics.md is the full table, shared with
// the runtime's kernels). Ops of the same shape come from one class each:
// unary elementwise ops and their backward ops, broadcasting binary ops,
// reductions. Every op implements the cost interface; forward ops implement
// the differentiation interface (VJPs in lib/Dialect/Offload/IR/OffloadVJP.cpp)
// and, where the result type follows from the operands, type inference.
//
//===----------------------------------------------------------------------===//
#ifndef OFFLOAD_COMPUTE_OPS_TD
#define OFFLOAD_COMPUTE_OPS_TD

include "offload/Dialect/Offload/IR/OffloadDialect.td"
include "offload/Dialect/Offload/IR/OffloadTypes.td"
include "offload/Dialect/Offload/IR/OffloadInterfaces.td"
include "mlir/Interfaces/InferTypeOpInterface.td"
include "mlir/Interfaces/SideEffectInterfaces.td"

// A pure compute op. `costOverrides` lists the cost methods the op defines
// itself (the rest use the interface defaults: one FLOP per result element,
// operand and result bytes).
class Offload_ComputeOp<string mnemonic, list<Trait> traits = [],
                        list<string> costOverrides = []>
    : Offload_Op<mnemonic, !listconcat([Pure,
        DeclareOpInterfaceMethods<Offload_CostOpInterface, costOverrides>],
        traits)> {
  let hasKernel = 1;
}

// A differentiable compute op whose VJP is written in OffloadVJP.cpp.
class Offload_DiffOp<string mnemonic, list<Trait> traits = [],
                     list<string> costOverrides = []>
    : Offload_ComputeOp<mnemonic, !listconcat(traits,
        [DeclareOpInterfaceMethods<Offload_DifferentiableOpInterface>]),
        costOverrides>;

//===----------------------------------------------------------------------===//
// Unary elementwise ops and their backward ops
//===----------------------------------------------------------------------===//

// `bwd` names the C++ class of the backward op (grad_output, saved) ->
// grad_input; it receives this op's attributes. `savesResult` picks what is
// saved: the result (relu, sigmoid, tanh: what PyTorch saves) or the input.
// An empty `bwd` means the VJP is hand-written in OffloadVJP.cpp.
class Offload_UnaryOp<string mnemonic, string bwd, bit savesResult,
                      dag attrs = (ins), string doc = "", string attrFormat = "">
    : Offload_DiffOp<mnemonic, [SameOperandsAndResultType]> {
  let summary = "Elementwise `" # mnemonic # "` (ATen semantics)";
  let description = doc # [{

    ```mlir
    %y = offload.}] # mnemonic # [{ %x : tensor<4x8xf32>
    ```
  }];
  let arguments = !con((ins Offload_FloatTensor:$input), attrs);
  let results = (outs Offload_FloatTensor:$result);
  let assemblyFormat = "$input " # attrFormat # " attr-dict `:` type($result)";
  let extraClassDefinition = !if(!empty(bwd), "", [{
    void $cppClass::getSavedValues(::llvm::SmallVectorImpl<::mlir::Value> &saved) {
      saved.push_back(}] # !if(savesResult, "getResult()", "getInput()") # [{);
    }
    ::llvm::LogicalResult $cppClass::buildVJP(::mlir::OpBuilder &b,
        ::mlir::ValueRange saved, ::mlir::ValueRange resultGrads,
        ::llvm::SmallVectorImpl<::mlir::Value> &operandGrads) {
      return ::mlir::offload::detail::buildUnaryVJP<}] # bwd # [{>(
          getOperation(), b, saved, resultGrads, operandGrads);
    }
  }]);
}

class Offload_UnaryBackwardOp<string mnemonic, string savedName, dag attrs = (ins),
                              string attrFormat = "">
    : Offload_ComputeOp<mnemonic, [SameOperandsAndResultType]> {
  let summary = "Gradient of `" # !subst("_backward", "", mnemonic) # "`";
  let description = [{
    `grad_input` from `grad_output` and the saved }] # savedName # [{ of the
    forward op (docs/op-semantics.md gives the formula).

    ```mlir
    %dx = offload.}] # mnemonic # [{ %dy, %s : tensor<4x8xf32>
    ```
  }];
  let arguments = !con((ins Offload_FloatTensor:$grad_output,
                            Offload_FloatTensor:$saved), attrs);
  let results = (outs Offload_FloatTensor:$grad_input);
  let assemblyFormat = "$grad_output `,` $saved " # attrFormat # " attr-dict `:` type($grad_input)";
}

def Offload_ReluOp : Offload_UnaryOp<"relu", "ReluBackwardOp", 1>;
def Offload_ReluBackwardOp : Offload_UnaryBackwardOp<"relu_backward", "result">;
def Offload_HardtanhOp : Offload_UnaryOp<"hardtanh", "HardtanhBackwardOp", 0,
    (ins F64Attr:$min_val, F64Attr:$max_val), "ReLU6 is hardtanh(0, 6).">;
def Offload_HardtanhBackwardOp : Offload_UnaryBackwardOp<"hardtanh_backward", "input",
    (ins F64Attr:$min_val, F64Attr:$max_val)>;
def Offload_HardswishOp : Offload_UnaryOp<"hardswish", "HardswishBackwardOp", 0>;
def Offload_HardswishBackwardOp : Offload_UnaryBackwardOp<"hardswish_backward", "input">;
def Offload_SiluOp : Offload_UnaryOp<"silu", "SiluBackwardOp", 0>;
def Offload_SiluBackwardOp : Offload_UnaryBackwardOp<"silu_backward", "input">;
def Offload_GeluOp : Offload_UnaryOp<"gelu", "GeluBackwardOp", 0,
    (ins DefaultValuedAttr<Offload_GeluApprox, "::mlir::offload::GeluApproximation::none">:$approximate),
    "", "(`approximate` $approximate^)?">;
def Offload_GeluBackwardOp : Offload_UnaryBackwardOp<"gelu_backward", "input",
    (ins DefaultValuedAttr<Offload_GeluApprox, "::mlir::offload::GeluApproximation::none">:$approximate),
    "(`approximate` $approximate^)?">;
def Offload_SigmoidOp : Offload_UnaryOp<"sigmoid", "SigmoidBackwardOp", 1>;
def Offload_SigmoidBackwardOp : Offload_UnaryBackwardOp<"sigmoid_backward", "result">;
def Offload_TanhOp : Offload_UnaryOp<"tanh", "TanhBackwardOp", 1>;
def Offload_TanhBackwardOp : Offload_UnaryBackwardOp<"tanh_backward", "result">;
def Offload_ExpOp : Offload_UnaryOp<"exp", "", 1>;
// Sinusoidal embeddings of values of the step (diffusers' timestep
// embedding); VJPs cos(x)·dy and -sin(x)·dy, saving the input.
def Offload_SinOp : Offload_UnaryOp<"sin", "", 0>;
def Offload_CosOp : Offload_UnaryOp<"cos", "", 0>;
def Offload_NegOp : Offload_UnaryOp<"neg", "", 0>;
def Offload_SqrtOp : Offload_UnaryOp<"sqrt", "", 1>;
def Offload_RsqrtOp : Offload_UnaryOp<"rsqrt", "", 1>;

// Also takes i64 tensors: the importer increments batch-norm's
// `num_batches_tracked` counter with it (`value` is then integral).
def Offload_AddScalarOp : Offload_DiffOp<"add_scalar", [SameOperandsAndResultType]> {
  let summary = "Adds a constant: `x + value`";
  let arguments = (ins RankedTensorOf<[F32, F64, BF16, F16, I64]>:$input, F64Attr:$value);
  let results = (outs RankedTensorOf<[F32, F64, BF16, F16, I64]>:$result);
  let assemblyFormat = "$input attr-dict `:` type($result)";
  let hasFolder = 1;
}
def Offload_MulScalarOp : Offload_DiffOp<"mul_scalar", [SameOperandsAndResultType]> {
  let summary = "Multiplies by a constant: `x * value`";
  let arguments = (ins Offload_FloatTensor:$input, F64Attr:$value);
  let results = (outs Offload_FloatTensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($result)";
  let hasFolder = 1;
}

def Offload_FillOp : Offload_ComputeOp<"fill"> {
  let summary = "A tensor whose every element is `value`";
  let description = [{
    Deliberately not `ConstantLike`: canonicalization would hoist constants
    to the top of the step and keep them alive for its whole length, which
    changes the step's peak memory. A fill runs where it stands.

    ```mlir
    %one = offload.fill {value = 1.0 : f64} : tensor<f32>
    ```
  }];
  let arguments = (ins F64Attr:$value);
  let results = (outs Offload_AnyTensor:$result);
  let assemblyFormat = "attr-dict `:` type($result)";
}

def Offload_ConstantOp : Offload_ComputeOp<"constant", [
    AllTypesMatch<["value", "result"]>]> {
  let summary = "A tensor with the given dense value";
  let description = [{
    Values the importer evaluates at import time (a causal mask, position
    indices). Not `ConstantLike`, for the reason given at `offload.fill`: the
    constant materializes where it stands.

    ```mlir
    %pos = offload.constant dense<[0, 1, 2, 3]> : tensor<4xi64>
    ```
  }];
  let arguments = (ins ElementsAttr:$value);
  let results = (outs Offload_AnyTensor:$result);
  let assemblyFormat = "$value attr-dict";
  // Lowered to a constant buffer of the plan, not to an instruction.
  let hasKernel = 0;
}

//===----------------------------------------------------------------------===//
// Broadcasting binary ops
//===----------------------------------------------------------------------===//

// `operandType`: float tensors, or Offload_NumericTensor for the ops that
// also compute on integers (position ids, masks: HF's
// create_position_ids_from_input_ids); an integer result is never on a
// gradient's path, so the VJP only ever sees float operands.
class Offload_BinaryOp<string mnemonic, string doc,
                       Type operandType = Offload_FloatTensor>
    : Offload_DiffOp<mnemonic, [InferTypeOpAdaptor]> {
  let summary = "Elementwise `" # mnemonic # "` with numpy broadcasting";
  let description = doc # [{

    ```mlir
    %c = offload.}] # mnemonic # [{ %a, %b : tensor<4x8xf32>, tensor<8xf32>
    ```
  }];
  let arguments = (ins operandType:$lhs, operandType:$rhs);
  let results = (outs operandType:$result);
  let assemblyFormat = "$lhs `,` $rhs attr-dict `:` type($lhs) `,` type($rhs)";
  let extraClassDefinition = [{
    ::llvm::LogicalResult $cppClass::inferReturnTypes(::mlir::MLIRContext *ctx,
        std::optional<::mlir::Location> loc, Adaptor adaptor,
        ::llvm::SmallVectorImpl<::mlir::Type> &types) {
      return ::mlir::offload::detail::inferBroadcast(loc, adaptor.getLhs().getType(),
                                                     adaptor.getRhs().getType(), types);
    }
  }];
}
def Offload_AddOp : Offload_BinaryOp<"add", "`lhs + rhs`. Saves nothing. Also on i64/i32 "
    "(wrapping, as ATen's integer add).", Offload_NumericTensor>;
def Offload_SubOp : Offload_BinaryOp<"sub", "`lhs - rhs`. Saves nothing. Also on i64/i32.",
    Offload_NumericTensor>;
def Offload_MulOp : Offload_BinaryOp<"mul", "`lhs * rhs`. Saves both operands. Also on "
    "i64/i32.", Offload_NumericTensor>;
def Offload_DivOp : Offload_BinaryOp<"div", "`lhs / rhs`. Saves both operands.">;

def Offload_MaskedFillOp : Offload_DiffOp<"masked_fill", [
    AllTypesMatch<["input", "result"]>]> {
  let summary = "`input.masked_fill(mask, value)`; mask broadcasts to input";
  let description = [{
    Any element type (T5's labels: `masked_fill(labels == -100, pad)` on
    i64); `value` is rounded to it as ATen casts the Scalar. Only a float
    input is ever differentiated.
  }];
  let arguments = (ins Offload_AnyTensor:$input, RankedTensorOf<[I1]>:$mask, F64Attr:$value);
  let results = (outs Offload_AnyTensor:$result);
  let assemblyFormat = "$input `,` $mask attr-dict `:` type($input) `,` type($mask)";
  let hasVerifier = 1;
}

def Offload_WhereOp : Offload_DiffOp<"where", [InferTypeOpAdaptor]> {
  let summary = "`where(condition, lhs, rhs)` with broadcasting";
  let description = [{
    `lhs` and `rhs` of one element type, any (an integer or boolean
    `where` selects ids or mask bits); only a float one is differentiated.
  }];
  let arguments = (ins RankedTensorOf<[I1]>:$condition, Offload_AnyTensor:$lhs,
                       Offload_AnyTensor:$rhs);
  let results = (outs Offload_AnyTensor:$result);
  let assemblyFormat = "$condition `,` $lhs `,` $rhs attr-dict `:` type($condition) `,` type($lhs) `,` type($rhs)";
}

//===----------------------------------------------------------------------===//
// Boolean ops (masks)
//===----------------------------------------------------------------------===//

// Not differentiable: their operands and results are i1, never on a
// gradient's path (the autodiff's activity analysis follows float values).

def Offload_LogicalNotOp : Offload_ComputeOp<"logical_not", [SameOperandsAndResultType]> {
  let summary = "Elementwise `not` of a boolean tensor";
  let description = [{
    `~mask`: ATen's `bitwise_not` (and `logical_not`) on a bool tensor.

    ```mlir
    %m = offload.logical_not %causal : tensor<8x8xi1>
    ```
  }];
  let arguments = (ins RankedTensorOf<[I1]>:$input);
  let results = (outs RankedTensorOf<[I1]>:$result);
  let assemblyFormat = "$input attr-dict `:` type($result)";
}

class Offload_LogicalBinaryOp<string mnemonic, string aten>
    : Offload_ComputeOp<mnemonic, [InferTypeOpAdaptor]> {
  let summary = "Elementwise `" # !subst("logical_", "", mnemonic) #
                "` of boolean tensors with numpy broadcasting";
  let description = [{
    `}] # aten # [{`: ATen's `bitwise_}] # !subst("logical_", "", mnemonic) #
    [{` (and `logical_}] # !subst("logical_", "", mnemonic) # [{`) on bool tensors.

    ```mlir
    %m = offload.}] # mnemonic # [{ %a, %b : tensor<2x1x8xi1>, tensor<8x8xi1>
    ```
  }];
  let arguments = (ins RankedTensorOf<[I1]>:$lhs, RankedTensorOf<[I1]>:$rhs);
  let results = (outs RankedTensorOf<[I1]>:$result);
  let assemblyFormat = "$lhs `,` $rhs attr-dict `:` type($lhs) `,` type($rhs)";
  let extraClassDefinition = [{
    ::llvm::LogicalResult $cppClass::inferReturnTypes(::mlir::MLIRContext *ctx,
        std::optional<::mlir::Location> loc, Adaptor adaptor,
        ::llvm::SmallVectorImpl<::mlir::Type> &types) {
      return ::mlir::offload::detail::inferBroadcast(loc, adaptor.getLhs().getType(),
                                                     adaptor.getRhs().getType(), types);
    }
  }];
}
def Offload_LogicalAndOp : Offload_LogicalBinaryOp<"logical_and", "a & b">;
def Offload_LogicalOrOp : Offload_LogicalBinaryOp<"logical_or", "a | b">;

//===----------------------------------------------------------------------===//
// Comparisons, scans and gathers on values without gradients (ids, masks)
//===----------------------------------------------------------------------===//

// Not differentiable: their results are i1 or integer tensors, never on a
// gradient's path. HF computes position ids and padding masks from the
// step's inputs with them (RoBERTa's create_position_ids_from_input_ids,
// the masks of an `attention_mask` input).

def Offload_CompareOp : Offload_ComputeOp<"compare", [InferTypeOpAdaptor]> {
  let summary = "Elementwise comparison with numpy broadcasting, to a bool tensor";
  let description = [{
    ATen's `eq`, `ne`, `lt`, `le`, `gt`, `ge` on operands of one element
    type (the importer casts both to PyTorch's common dtype first, and a
    number to a 0-d tensor of it). Floats compare as IEEE does: NaN is
    unequal to everything and `ne` to itself.

    ```mlir
    %m = offload.compare ne %ids, %pad : tensor<2x16xi64>, tensor<i64>
    ```
  }];
  let arguments = (ins Offload_ComparePredicate:$predicate, Offload_AnyTensor:$lhs,
                       Offload_AnyTensor:$rhs);
  let results = (outs RankedTensorOf<[I1]>:$result);
  let assemblyFormat = "$predicate $lhs `,` $rhs attr-dict `:` type($lhs) `,` type($rhs)";
}

def Offload_CumsumOp : Offload_ComputeOp<"cumsum", [SameOperandsAndResultType]> {
  let summary = "Inclusive prefix sum of an integer tensor along `dim`";
  let description = [{
    `cumsum(input, dim)` on i64 or i32 (wrapping); PyTorch's cumsum of an
    integer or bool tensor returns int64, so the importer casts to i64
    first. `dim` is normalized (0 <= dim < rank).

    ```mlir
    %c = offload.cumsum %m {dim = 1 : i64} : tensor<2x16xi64>
    ```
  }];
  let arguments = (ins RankedTensorOf<[I64, I32]>:$input, I64Attr:$dim);
  let results = (outs RankedTensorOf<[I64, I32]>:$result);
  let assemblyFormat = "$input attr-dict `:` type($result)";
  let hasVerifier = 1;
}

def Offload_GatherOp : Offload_ComputeOp<"gather", [InferTypeOpAdaptor]> {
  let summary = "`torch.gather(input, dim, index)` of an integer or bool tensor";
  let description = [{
    `result[i0, ..., ik] = input[i0, ..., index[i0, ..., ik], ..., ik]` with
    the index at position `dim`: `index` (i64) has the input's rank and at
    most its size in every other dim; the result has the index's shape and
    the input's element type. An index outside [0, input.size(dim)) is a
    run-time error of the kernel, as in PyTorch. The importer also reads
    `x[idx0, idx1, ...]` (`index.Tensor` with index tensors known at import)
    as a gather of x flattened to [1, numel] by the linear offsets. Float
    inputs (which would need a VJP) are refused.

    ```mlir
    %t = offload.gather %types, %pos {dim = 1 : i64} : tensor<2x64xi64>, tensor<2x16xi64>
    ```
  }];
  let arguments = (ins Offload_IntOrBoolTensor:$input, Offload_IndexTensor:$index,
                       I64Attr:$dim);
  let results = (outs Offload_IntOrBoolTensor:$result);
  let assemblyFormat = "$input `,` $index attr-dict `:` type($input) `,` type($index)";
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Reductions, shape and data movement
//===----------------------------------------------------------------------===//

class Offload_ReduceOp<string mnemonic> : Offload_DiffOp<mnemonic, [InferTypeOpAdaptor]> {
  let summary = "`" # !subst("reduce_", "", mnemonic) # "` over `dims` (all when empty)";
  let description = [{
    ```mlir
    %s = offload.}] # mnemonic # [{ %x {dims = array<i64: 0>} : tensor<4x8xf32>
    ```
  }];
  let arguments = (ins Offload_FloatTensor:$input,
                       DefaultValuedAttr<DenseI64ArrayAttr, "{}">:$dims,
                       DefaultValuedAttr<BoolAttr, "false">:$keepdim);
  let results = (outs Offload_FloatTensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input)";
  let hasVerifier = 1;
}
def Offload_ReduceSumOp : Offload_ReduceOp<"reduce_sum">;
def Offload_ReduceMeanOp : Offload_ReduceOp<"reduce_mean">;

def Offload_BroadcastToOp : Offload_DiffOp<"broadcast_to"> {
  let summary = "Expands `input` to the result shape (numpy rules), materialized";
  let arguments = (ins Offload_AnyTensor:$input);
  let results = (outs Offload_AnyTensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input) `->` type($result)";
  let hasVerifier = 1;
  let hasFolder = 1;
}

def Offload_ReshapeOp : Offload_DiffOp<"reshape", [], ["getFlops", "getBytesRead", "getBytesWritten"]> {
  let summary = "A view of `input` with the result's shape (same element count)";
  let description = [{
    Covers `view`, `reshape`, `flatten`, `unsqueeze`, `squeeze`. The lowering
    aliases the result to the input's buffer: no copy, no bytes, no FLOPs.
  }];
  let arguments = (ins Offload_AnyTensor:$input);
  let results = (outs Offload_AnyTensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input) `->` type($result)";
  let hasVerifier = 1;
  let hasFolder = 1;
}

def Offload_TransposeOp : Offload_DiffOp<"transpose", [InferTypeOpAdaptor]> {
  let summary = "`input.permute(perm).contiguous()`";
  let arguments = (ins Offload_AnyTensor:$input, DenseI64ArrayAttr:$perm);
  let results = (outs Offload_AnyTensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input)";
  let hasFolder = 1;
}

def Offload_CatOp : Offload_DiffOp<"cat", [InferTypeOpAdaptor]> {
  let summary = "Concatenates `inputs` along `dim`";
  let arguments = (ins Variadic<Offload_AnyTensor>:$inputs, I64Attr:$dim);
  let results = (outs Offload_AnyTensor:$result);
  let assemblyFormat = "$inputs attr-dict `:` type($inputs)";
}

def Offload_SliceOp : Offload_DiffOp<"slice", [InferTypeOpAdaptor]> {
  let summary = "`input[start:end:step]` along `dim`, copied";
  let arguments = (ins Offload_AnyTensor:$input, I64Attr:$dim, I64Attr:$start,
                       I64Attr:$end, DefaultValuedAttr<I64Attr, "1">:$step);
  let results = (outs Offload_AnyTensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input)";
}
def Offload_SliceBackwardOp : Offload_ComputeOp<"slice_backward"> {
  let summary = "Gradient of `slice`: zeros with `grad_output` in the slice";
  let arguments = (ins Offload_FloatTensor:$grad_output, I64Attr:$dim, I64Attr:$start,
                       I64Attr:$end, DefaultValuedAttr<I64Attr, "1">:$step);
  let results = (outs Offload_FloatTensor:$grad_input);
  let assemblyFormat = "$grad_output attr-dict `:` type($grad_output) `->` type($grad_input)";
}

def Offload_CopyOp : Offload_DiffOp<"copy"> {
  let summary = "Copies `input`, casting the element type if they differ";
  let description = [{
    The VJP casts the cotangent back to `input`'s element type (an f32 ->
    f64 -> f32 round trip passes its gradient through); an integer or
    boolean input gets no gradient. Saves nothing.
  }];
  let arguments = (ins Offload_AnyTensor:$input);
  let results = (outs Offload_AnyTensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input) `->` type($result)";
  let hasFolder = 1;
}

//===----------------------------------------------------------------------===//
// Linear algebra
//===----------------------------------------------------------------------===//

def Offload_LinearOp : Offload_DiffOp<"linear", [InferTypeOpAdaptor],
                                      ["getFlops"]> {
  let summary = "`linear(x, weight, bias)`: `x @ weight^T + bias`";
  let description = [{
    `input` [*, K], `weight` [M, K], optional `bias` [M] -> [*, M].
    FLOPs: 2·rows·K·M (+ rows·M for the bias). Saves `input` and `weight`,
    as PyTorch does.

    ```mlir
    %y = offload.linear %x, %w, %b : tensor<32x64xf32>, tensor<128x64xf32>, tensor<128xf32>
    ```
  }];
  let arguments = (ins Offload_FloatTensor:$input, Offload_FloatTensor:$weight,
                       Optional<Offload_FloatTensor>:$bias);
  let results = (outs Offload_FloatTensor:$result);
  let assemblyFormat = "$input `,` $weight (`,` $bias^)? attr-dict `:` type($input) `,` type($weight) (`,` type($bias)^)?";
}

def Offload_MatmulOp : Offload_DiffOp<"matmul", [InferTypeOpAdaptor], ["getFlops"]> {
  let summary = "Batched matrix product with optional transposes";
  let description = [{
    `lhs` [..., M, K] (or [..., K, M] with `transpose_a`), `rhs` [..., K, N]
    (or [..., N, K] with `transpose_b`) -> [..., M, N]; batch dimensions
    broadcast. FLOPs: 2·batch·M·N·K. Saves both operands.

    ```mlir
    %c = offload.matmul %a, %b {transpose_b = true} : tensor<4x16x8xf32>, tensor<4x16x8xf32>
    ```
  }];
  let arguments = (ins Offload_FloatTensor:$lhs, Offload_FloatTensor:$rhs,
                       DefaultValuedAttr<BoolAttr, "false">:$transpose_a,
                       DefaultValuedAttr<BoolAttr, "false">:$transpose_b);
  let results = (outs Offload_FloatTensor:$result);
  let assemblyFormat = "$lhs `,` $rhs attr-dict `:` type($lhs) `,` type($rhs)";
  // An operand that is a transpose of the last two dims becomes the
  // transpose's input with the flag flipped.
  let hasCanonicalizeMethod = 1;
}

//===----------------------------------------------------------------------===//
// Convolution and pooling
//===----------------------------------------------------------------------===//

def Offload_Conv2dOp : Offload_DiffOp<"conv2d", [InferTypeOpAdaptor],
                                      ["getFlops"]> {
  let summary = "2-D convolution (`conv2d`), NCHW, groups and dilation";
  let description = [{
    `input` [N, C, H, W], `weight` [O, C/groups, KH, KW], optional `bias` [O].
    FLOPs: 2·N·O·OH·OW·(C/groups)·KH·KW. Saves `input` and `weight`.

    ```mlir
    %y = offload.conv2d %x, %w {stride = array<i64: 1, 1>, padding = array<i64: 1, 1>,
        dilation = array<i64: 1, 1>, groups = 1 : i64}
        : tensor<2x3x8x8xf32>, tensor<4x3x3x3xf32>
    ```
  }];
  let arguments = (ins Offload_FloatTensor:$input, Offload_FloatTensor:$weight,
                       Optional<Offload_FloatTensor>:$bias,
                       DenseI64ArrayAttr:$stride, DenseI64ArrayAttr:$padding,
                       DenseI64ArrayAttr:$dilation, I64Attr:$groups);
  let results = (outs Offload_FloatTensor:$result);
  let assemblyFormat = "$input `,` $weight (`,` $bias^)? attr-dict `:` type($input) `,` type($weight) (`,` type($bias)^)?";
  let hasVerifier = 1;
}
def Offload_Conv2dBackwardInputOp : Offload_DiffOp<"conv2d_backward_input", [], ["getFlops"]> {
  let summary = "Gradient of conv2d with respect to its input; also `conv_transpose2d`";
  let description = [{
    `grad_output` [N, O, OH, OW], `weight` [O, C/groups, KH, KW] ->
    `grad_input` [N, C, H, W], the adjoint of `conv2d` with the same stride,
    padding, dilation and groups applied to `grad_output`. H and W are taken
    from the result type: any H with floor((H + 2·pad - dil·(KH-1) - 1) / stride)
    + 1 == OH is valid, so the rows a strided convolution never reads (and
    `output_padding` of a transposed convolution) come out as zeros.

    The same product is PyTorch's `conv_transpose2d(x, weight, stride, padding,
    output_padding, groups, dilation)` without bias: a transposed
    convolution's weight [C_in, C_out/groups, KH, KW] is this op's weight, and
    H = (OH - 1)·stride - 2·pad + dil·(KH - 1) + output_padding + 1. The
    importer converts `nn.ConvTranspose2d` to it, so the op is differentiable:
    the VJP of `grad_input = J^T grad_output` (J the conv2d Jacobian) is
    d grad_output = conv2d(g, weight) and d weight =
    conv2d_backward_weight(grad_output, g). Saves `grad_output` and `weight`.
    FLOPs: those of the forward conv2d, 2·N·O·OH·OW·(C/groups)·KH·KW.

    ```mlir
    %y = offload.conv2d_backward_input %x, %w {stride = array<i64: 2, 2>,
        padding = array<i64: 0, 0>, dilation = array<i64: 1, 1>, groups = 1 : i64}
        : tensor<2x8x4x4xf32>, tensor<8x6x3x3xf32> -> tensor<2x6x9x9xf32>
    ```
  }];
  let arguments = (ins Offload_FloatTensor:$grad_output, Offload_FloatTensor:$weight,
                       DenseI64ArrayAttr:$stride, DenseI64ArrayAttr:$padding,
                       DenseI64ArrayAttr:$dilation, I64Attr:$groups);
  let results = (outs Offload_FloatTensor:$grad_input);
  let assemblyFormat = "$grad_output `,` $weight attr-dict `:` type($grad_output) `,` type($weight) `->` type($grad_input)";
  let hasVerifier = 1;
}
def Offload_Conv2dBackwardWeightOp : Offload_ComputeOp<"conv2d_backward_weight", [], ["getFlops"]> {
  let summary = "Gradient of conv2d with respect to its weight";
  let arguments = (ins Offload_FloatTensor:$grad_output, Offload_FloatTensor:$input,
                       DenseI64ArrayAttr:$stride, DenseI64ArrayAttr:$padding,
                       DenseI64ArrayAttr:$dilation, I64Attr:$groups);
  let results = (outs Offload_FloatTensor:$grad_weight);
  let assemblyFormat = "$grad_output `,` $input attr-dict `:` type($grad_output) `,` type($input) `->` type($grad_weight)";
}

def Offload_MaxPool2dOp : Offload_DiffOp<"max_pool2d", [InferTypeOpAdaptor]> {
  let summary = "`max_pool2d_with_indices`; saves only the indices";
  let arguments = (ins Offload_FloatTensor:$input, DenseI64ArrayAttr:$kernel_size,
                       DenseI64ArrayAttr:$stride, DenseI64ArrayAttr:$padding,
                       DenseI64ArrayAttr:$dilation,
                       DefaultValuedAttr<BoolAttr, "false">:$ceil_mode);
  let results = (outs Offload_FloatTensor:$result, Offload_IndexTensor:$indices);
  let assemblyFormat = "$input attr-dict `:` type($input)";
}
def Offload_MaxPool2dBackwardOp : Offload_ComputeOp<"max_pool2d_backward"> {
  let summary = "Gradient of max_pool2d: scatter-add at the saved indices";
  let arguments = (ins Offload_FloatTensor:$grad_output, Offload_IndexTensor:$indices);
  let results = (outs Offload_FloatTensor:$grad_input);
  let assemblyFormat = "$grad_output `,` $indices attr-dict `:` type($grad_output) `,` type($indices) `->` type($grad_input)";
}
def Offload_AvgPool2dOp : Offload_DiffOp<"avg_pool2d", [InferTypeOpAdaptor]> {
  let summary = "`avg_pool2d`; saves nothing";
  let arguments = (ins Offload_FloatTensor:$input, DenseI64ArrayAttr:$kernel_size,
                       DenseI64ArrayAttr:$stride, DenseI64ArrayAttr:$padding,
                       DefaultValuedAttr<BoolAttr, "false">:$ceil_mode,
                       DefaultValuedAttr<BoolAttr, "true">:$count_include_pad);
  let results = (outs Offload_FloatTensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input)";
}
def Offload_AvgPool2dBackwardOp : Offload_ComputeOp<"avg_pool2d_backward"> {
  let summary = "Gradient of avg_pool2d";
  let arguments = (ins Offload_FloatTensor:$grad_output, DenseI64ArrayAttr:$kernel_size,
                       DenseI64ArrayAttr:$stride, DenseI64ArrayAttr:$padding,
                       DefaultValuedAttr<BoolAttr, "false">:$ceil_mode,
                       DefaultValuedAttr<BoolAttr, "true">:$count_include_pad);
  let results = (outs Offload_FloatTensor:$grad_input);
  let assemblyFormat = "$grad_output attr-dict `:` type($grad_output) `->` type($grad_input)";
}
def Offload_AdaptiveAvgPool2dOp : Offload_DiffOp<"adaptive_avg_pool2d", [InferTypeOpAdaptor]> {
  let summary = "`adaptive_avg_pool2d`; saves nothing";
  let arguments = (ins Offload_FloatTensor:$input, DenseI64ArrayAttr:$output_size);
  let results = (outs Offload_FloatTensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input)";
}
def Offload_AdaptiveAvgPool2dBackwardOp : Offload_ComputeOp<"adaptive_avg_pool2d_backward"> {
  let summary = "Gradient of adaptive_avg_pool2d";
  let arguments = (ins Offload_FloatTensor:$grad_output);
  let results = (outs Offload_FloatTensor:$grad_input);
  let assemblyFormat = "$grad_output attr-dict `:` type($grad_output) `->` type($grad_input)";
}

//===----------------------------------------------------------------------===//
// Normalization and softmax
//===----------------------------------------------------------------------===//

def Offload_BatchNormOp : Offload_DiffOp<"batch_norm", [InferTypeOpAdaptor,
    AllTypesMatch<["weight", "bias", "running_mean", "running_var"]>]> {
  let summary = "Training-mode batch norm; running statistics as explicit state";
  let description = [{
    `native_batch_norm` in training mode over [N, C, ...]: normalizes with the
    batch statistics and returns the updated running statistics as values
    (`(1 - momentum) * running + momentum * batch_stat`, unbiased variance),
    so that recomputing the op never updates state twice. Saves `input`,
    `weight`, `save_mean` and `save_invstd`, as PyTorch does. `weight` and
    `bias` are required: the importer passes ones and zeros for a batch norm
    without affine parameters (exact in floating point).

    ```mlir
    %y, %m, %is, %rm1, %rv1 = offload.batch_norm %x, %w, %b, %rm, %rv
        {momentum = 0.1 : f64, eps = 1.0e-5 : f64} : tensor<2x4x8x8xf32>, tensor<4xf32>
    ```
  }];
  let arguments = (ins Offload_FloatTensor:$input, Offload_FloatTensor:$weight,
                       Offload_FloatTensor:$bias,
                       Offload_FloatTensor:$running_mean, Offload_FloatTensor:$running_var,
                       F64Attr:$momentum, F64Attr:$eps);
  let results = (outs Offload_FloatTensor:$result, Offload_FloatTensor:$save_mean,
                      Offload_FloatTensor:$save_invstd,
                      Offload_FloatTensor:$new_running_mean,
                      Offload_FloatTensor:$new_running_var);
  let assemblyFormat = [{
    $input `,` $weight `,` $bias `,` $running_mean `,` $running_var attr-dict
    `:` type($input) `,` type($running_mean)
  }];
  let hasVerifier = 1;
}
def Offload_BatchNormBackwardOp : Offload_ComputeOp<"batch_norm_backward", [
    AllTypesMatch<["grad_output", "input", "grad_input"]>,
    AllTypesMatch<["weight", "save_mean", "save_invstd", "grad_weight", "grad_bias"]>]> {
  let summary = "Gradient of training-mode batch norm";
  let arguments = (ins Offload_FloatTensor:$grad_output, Offload_FloatTensor:$input,
                       Offload_FloatTensor:$weight,
                       Offload_FloatTensor:$save_mean, Offload_FloatTensor:$save_invstd,
                       F64Attr:$eps);
  let results = (outs Offload_FloatTensor:$grad_input, Offload_FloatTensor:$grad_weight,
                      Offload_FloatTensor:$grad_bias);
  let assemblyFormat = [{
    $grad_output `,` $input `,` $weight `,` $save_mean `,` $save_invstd attr-dict
    `:` type($input) `,` type($save_mean)
  }];
}

def Offload_LayerNormOp : Offload_DiffOp<"layer_norm", [InferTypeOpAdaptor,
    AllTypesMatch<["weight", "bias"]>]> {
  let summary = "`native_layer_norm` over the last `normalized_ndim` dimensions";
  let description = [{
    `weight` and `bias` have the normalized shape and are required (ones and
    zeros for a layer norm without affine parameters). Saves `input`,
    `weight`, `mean` and `rstd`, as PyTorch does.
  }];
  let arguments = (ins Offload_FloatTensor:$input, Offload_FloatTensor:$weight,
                       Offload_FloatTensor:$bias,
                       I64Attr:$normalized_ndim, F64Attr:$eps);
  let results = (outs Offload_FloatTensor:$result, Offload_FloatTensor:$mean,
                      Offload_FloatTensor:$rstd);
  let assemblyFormat = [{
    $input `,` $weight `,` $bias attr-dict `:` type($input) `,` type($weight)
  }];
}
def Offload_LayerNormBackwardOp : Offload_ComputeOp<"layer_norm_backward", [
    AllTypesMatch<["grad_output", "input", "grad_input"]>,
    AllTypesMatch<["weight", "grad_weight", "grad_bias"]>, AllTypesMatch<["mean", "rstd"]>]> {
  let summary = "Gradient of layer norm";
  let arguments = (ins Offload_FloatTensor:$grad_output, Offload_FloatTensor:$input,
                       Offload_FloatTensor:$weight,
                       Offload_FloatTensor:$mean, Offload_FloatTensor:$rstd,
                       I64Attr:$normalized_ndim);
  let results = (outs Offload_FloatTensor:$grad_input, Offload_FloatTensor:$grad_weight,
                      Offload_FloatTensor:$grad_bias);
  let assemblyFormat = [{
    $grad_output `,` $input `,` $weight `,` $mean `,` $rstd attr-dict
    `:` type($input) `,` type($weight) `,` type($mean)
  }];
}

class Offload_SoftmaxLikeOp<string mnemonic> : Offload_DiffOp<mnemonic, [SameOperandsAndResultType]> {
  let summary = "`" # mnemonic # "` along `dim`; saves its result";
  let arguments = (ins Offload_FloatTensor:$input, I64Attr:$dim);
  let results = (outs Offload_FloatTensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($result)";
}
def Offload_SoftmaxOp : Offload_SoftmaxLikeOp<"softmax">;
def Offload_LogSoftmaxOp : Offload_SoftmaxLikeOp<"log_softmax">;
class Offload_SoftmaxLikeBackwardOp<string mnemonic> : Offload_ComputeOp<mnemonic, [SameOperandsAndResultType]> {
  let summary = "Gradient of `" # !subst("_backward", "", mnemonic) # "` from its result";
  let arguments = (ins Offload_FloatTensor:$grad_output, Offload_FloatTensor:$output, I64Attr:$dim);
  let results = (outs Offload_FloatTensor:$grad_input);
  let assemblyFormat = "$grad_output `,` $output attr-dict `:` type($grad_input)";
}
def Offload_SoftmaxBackwardOp : Offload_SoftmaxLikeBackwardOp<"softmax_backward">;
def Offload_LogSoftmaxBackwardOp : Offload_SoftmaxLikeBackwardOp<"log_softmax_backward">;

//===----------------------------------------------------------------------===//
// Embedding, dropout, losses
//===----------------------------------------------------------------------===//

def Offload_EmbeddingOp : Offload_DiffOp<"embedding", [InferTypeOpAdaptor]> {
  let summary = "Row lookup `weight[indices]`; saves the indices";
  let description = [{
    `padding_idx` (ATen's, -1 for none) does not change the lookup: row
    `padding_idx` gets no gradient (`embedding_backward` leaves it zero), as
    `nn.Embedding(..., padding_idx=p)` trains.

    ```mlir
    %e = offload.embedding %w, %ids {padding_idx = 0 : i64} : tensor<64x16xf32>, tensor<2x8xi64>
    ```
  }];
  let arguments = (ins Offload_FloatTensor:$weight, Offload_IndexTensor:$indices,
                       DefaultValuedAttr<I64Attr, "-1">:$padding_idx);
  let results = (outs Offload_FloatTensor:$result);
  let assemblyFormat = "$weight `,` $indices attr-dict `:` type($weight) `,` type($indices)";
}
def Offload_EmbeddingBackwardOp : Offload_ComputeOp<"embedding_backward"> {
  let summary = "Gradient of embedding: scatter-add rows of `grad_output`";
  let description = [{
    Row `padding_idx` (when not -1) stays zero: the lookups of that row add
    nothing to it.
  }];
  let arguments = (ins Offload_FloatTensor:$grad_output, Offload_IndexTensor:$indices,
                       DefaultValuedAttr<I64Attr, "-1">:$padding_idx);
  let results = (outs Offload_FloatTensor:$grad_weight);
  let assemblyFormat = "$grad_output `,` $indices attr-dict `:` type($grad_output) `,` type($indices) `->` type($grad_weight)";
}

def Offload_DropoutOp : Offload_DiffOp<"dropout", [AllTypesMatch<["input", "result"]>]> {
  let summary = "Dropout from a counter-based generator (Philox4x32-10)";
  let description = [{
    Element `i` is kept iff `philox_uniform(seed, offset + i) >= p`, and kept
    elements are scaled by `1 / (1 - p)` (docs/op-semantics.md). The same
    seed and offset give the same mask on every backend and in every
    recomputation; the VJP regenerates the mask, so only the seed is saved
    (PyTorch saves a mask of the input's size).

    ```mlir
    %y = offload.dropout %x, %seed {p = 1.0e-01 : f64, offset = 0 : i64} : tensor<4x8xf32>, tensor<i64>
    ```
  }];
  let arguments = (ins Offload_FloatTensor:$input, Offload_SeedTensor:$seed,
                       F64Attr:$p, I64Attr:$offset);
  let results = (outs Offload_FloatTensor:$result);
  let assemblyFormat = "$input `,` $seed attr-dict `:` type($input) `,` type($seed)";
  let hasVerifier = 1;
  let hasFolder = 1;
}
def Offload_DropoutBackwardOp : Offload_ComputeOp<"dropout_backward", [AllTypesMatch<["grad_output", "grad_input"]>]> {
  let summary = "Gradient of dropout, regenerating the mask from the seed";
  let arguments = (ins Offload_FloatTensor:$grad_output, Offload_SeedTensor:$seed,
                       F64Attr:$p, I64Attr:$offset);
  let results = (outs Offload_FloatTensor:$grad_input);
  let assemblyFormat = "$grad_output `,` $seed attr-dict `:` type($grad_output) `,` type($seed)";
}

def Offload_AttentionOp : Offload_DiffOp<"attention", [InferTypeOpAdaptor],
                                        ["getFlops", "getScratchBytes"]> {
  let summary = "Fused scaled dot-product attention (`scaled_dot_product_attention`)";
  let description = [{
    `query` [N, Hq, L, E], `key` [N, Hkv, S, E], `value` [N, Hkv, S, Ev], with
    Hq a multiple of Hkv (grouped-query attention: query head h reads key and
    value head h / (Hq / Hkv), PyTorch's `enable_gqa`). `extras` holds, in
    this order, the attention mask when `has_mask` (broadcastable to
    [N, Hq, L, S]; i1: true takes part, as PyTorch's boolean `attn_mask`;
    float of the query's type: added to the scaled scores) and the dropout
    seed (i64 scalar, the dropout op's Philox key) when `dropout_p` > 0.

    Results: `out` [N, Hq, L, Ev] = dropout(softmax(scale · q kᵀ + mask)) v,
    and `lse` [N, Hq, L], the log-sum-exp of each row of the scaled, masked
    scores. `is_causal` keeps key j for query i iff j <= i (PyTorch's
    top-left alignment, `tril(ones(L, S))`). A row with no key left has
    `out` 0 and `lse` -inf (PyTorch's safe softmax, 2.5 and later). Dropout
    keeps probability element ((n·Hq + h)·L + i)·S + j iff
    `philox_uniform(seed, offset + that index) >= dropout_p` and scales kept
    ones by 1 / (1 - dropout_p), as `offload.dropout` over the probability
    matrix. Saves `query`, `key`, `value`, `out`, `lse` and the extras:
    N·Hq·L values of statistics instead of the N·Hq·L·S probabilities.
    Gradients: `attention_backward` for query, key and value; a float mask
    that depends on a parameter (a learned bias) gets dS = P ∘ (dP - D)
    summed to its shape, composed by the VJP from matmul, exp and
    reductions (N·Hq·L·S values, only then); a boolean mask and the seed
    get none.
    FLOPs: 2·N·Hq·L·S·(E + Ev) (the causal mask's skipped half not taken
    off). Source: FlashAttention (Dao et al., 2022), Algorithm 1 and 2.

    `layout` (default `bhld`) says where the heads dim is in `query`, `key`,
    `value` and `out`: `bhld` is the head layout above (query [N, Hq, L, E],
    key [N, Hkv, S, E], value [N, Hkv, S, Ev], out [N, Hq, L, Ev]); `blhd`
    the token layout, the length and heads dims swapped: query [N, L, Hq, E],
    key [N, S, Hkv, E], value [N, S, Hkv, Ev], out [N, L, Hq, Ev], so that
    `x.view(N, L, H, E)` of a projection feeds the op and its output views
    as [N, L, H·Ev] without a transpose (FlashAttention's and cuDNN's own
    layout). Only where the tensors live changes: element (n, h, i, e) of
    the head layout is element (n, i, h, e) of the token layout, and the op
    computes the same values. `lse` is [N, Hq, L] and the mask broadcasts
    to [N, Hq, L, S] in either layout, and the dropout's element index is
    the one above. The importer uses `blhd` where the model transposes
    (1, 2) into and out of attention (docs/import.md).

    ```mlir
    %o, %lse = offload.attention %q, %k, %v {scale = 1.25e-01 : f64, is_causal = true}
        : tensor<2x4x16x64xf32>, tensor<2x4x16x64xf32>, tensor<2x4x16x64xf32>
    %o2, %lse2 = offload.attention %q2, %k2, %v2 layout blhd {scale = 1.25e-01 : f64}
        : tensor<2x16x4x64xf32>, tensor<2x16x4x64xf32>, tensor<2x16x4x64xf32>
    ```
  }];
  let arguments = (ins Offload_FloatTensor:$query, Offload_FloatTensor:$key,
                       Offload_FloatTensor:$value, Variadic<Offload_AnyTensor>:$extras,
                       F64Attr:$scale, DefaultValuedAttr<BoolAttr, "false">:$is_causal,
                       DefaultValuedAttr<BoolAttr, "false">:$has_mask,
                       DefaultValuedAttr<F64Attr, "0.0">:$dropout_p,
                       DefaultValuedAttr<I64Attr, "0">:$offset,
                       DefaultValuedAttr<Offload_AttentionLayout,
                                         "::mlir::offload::AttentionLayout::bhld">:$layout);
  let results = (outs Offload_FloatTensor:$out, Offload_FloatTensor:$lse);
  let assemblyFormat = [{
    $query `,` $key `,` $value (`,` $extras^)? (`layout` $layout^)? attr-dict `:` type($query)
    `,` type($key) `,` type($value) (`,` type($extras)^)?
  }];
  let hasVerifier = 1;
}
def Offload_AttentionBackwardOp : Offload_ComputeOp<"attention_backward", [
    AllTypesMatch<["query", "grad_query"]>, AllTypesMatch<["key", "grad_key"]>,
    AllTypesMatch<["value", "grad_value"]>, AllTypesMatch<["grad_out", "out"]>],
    ["getFlops", "getScratchBytes"]> {
  let summary = "Gradient of attention, recomputing the probabilities from `lse`";
  let description = [{
    `grad_out`, `query`, `key`, `value`, `out`, `lse` and `extras` as
    `offload.attention`'s operands and results, with the same attributes ->
    `grad_query`, `grad_key`, `grad_value` of the query's, key's and value's
    types (key and value gradients summed over the query heads that share
    a key/value head). With P the probabilities recomputed as
    exp(scale · q kᵀ + mask - lse) and D = rowsum(grad_out ∘ out):
    dV = P̃ᵀ dO, dP = (dO vᵀ) masked by the dropout keep mask / (1 - p),
    dS = P ∘ (dP - D), dQ = scale · dS k, dK = scale · dSᵀ q (P̃: P after
    dropout). It returns no mask gradient (see `offload.attention` for a
    learned float mask). FLOPs: 4·N·Hq·L·S·E + 2·N·Hq·L·S·Ev
    (a recomputation of q kᵀ, then dP, dV, dQ and dK). `layout` as the
    forward's: with `blhd`, `grad_out`, `out` and the three gradients are
    in the token layout too (grad_out and out [N, L, Hq, Ev], grad_query
    [N, L, Hq, E], grad_key [N, S, Hkv, E], grad_value [N, S, Hkv, Ev]);
    `lse` is [N, Hq, L] in either.
  }];
  let arguments = (ins Offload_FloatTensor:$grad_out, Offload_FloatTensor:$query,
                       Offload_FloatTensor:$key, Offload_FloatTensor:$value,
                       Offload_FloatTensor:$out, Offload_FloatTensor:$lse,
                       Variadic<Offload_AnyTensor>:$extras,
                       F64Attr:$scale, DefaultValuedAttr<BoolAttr, "false">:$is_causal,
                       DefaultValuedAttr<BoolAttr, "false">:$has_mask,
                       DefaultValuedAttr<F64Attr, "0.0">:$dropout_p,
                       DefaultValuedAttr<I64Attr, "0">:$offset,
                       DefaultValuedAttr<Offload_AttentionLayout,
                                         "::mlir::offload::AttentionLayout::bhld">:$layout);
  let results = (outs Offload_FloatTensor:$grad_query, Offload_FloatTensor:$grad_key,
                      Offload_FloatTensor:$grad_value);
  let assemblyFormat = [{
    $grad_out `,` $query `,` $key `,` $value `,` $out `,` $lse (`,` $extras^)?
    (`layout` $layout^)? attr-dict
    `:` type($grad_out) `,` type($query) `,` type($key) `,` type($value) `,` type($lse)
    (`,` type($extras)^)?
  }];
  let hasVerifier = 1;
}

def Offload_CrossEntropyOp : Offload_DiffOp<"cross_entropy", [InferTypeOpAdaptor]> {
  let summary = "`cross_entropy(logits, target)` with class indices";
  let description = [{
    `logits` [N, C], `target` [N] (i64) -> scalar. Saves `logits` and
    `target`. (The importer moves PyTorch's class dim 1 of other ranks last
    and flattens: [N, C, d1, ...] with [N, d1, ...] becomes [M, C] with [M].)

    ```mlir
    %l = offload.cross_entropy %z, %t : tensor<32x10xf32>, tensor<32xi64>
    ```
  }];
  let arguments = (ins Offload_FloatTensor:$logits, Offload_IndexTensor:$target,
                       DefaultValuedAttr<Offload_Reduction, "::mlir::offload::Reduction::mean">:$reduction,
                       DefaultValuedAttr<I64Attr, "-100">:$ignore_index,
                       DefaultValuedAttr<F64Attr, "0.0">:$label_smoothing);
  let results = (outs Offload_FloatTensor:$result);
  let assemblyFormat = "$logits `,` $target (`reduction` $reduction^)? attr-dict `:` type($logits) `,` type($target)";
  let hasVerifier = 1;
}
def Offload_CrossEntropyBackwardOp : Offload_ComputeOp<"cross_entropy_backward", [AllTypesMatch<["logits", "grad_input"]>]> {
  let summary = "Gradient of cross_entropy with respect to the logits";
  let arguments = (ins Offload_FloatTensor:$grad_output, Offload_FloatTensor:$logits,
                       Offload_IndexTensor:$target,
                       DefaultValuedAttr<Offload_Reduction, "::mlir::offload::Reduction::mean">:$reduction,
                       DefaultValuedAttr<I64Attr, "-100">:$ignore_index,
                       DefaultValuedAttr<F64Attr, "0.0">:$label_smoothing);
  let results = (outs Offload_FloatTensor:$grad_input);
  let assemblyFormat = "$grad_output `,` $logits `,` $target (`reduction` $reduction^)? attr-dict `:` type($grad_output) `,` type($logits) `,` type($target)";
}
def Offload_NllLossOp : Offload_DiffOp<"nll_loss", [InferTypeOpAdaptor]> {
  let summary = "`nll_loss(log_probs, target)`";
  let arguments = (ins Offload_FloatTensor:$input, Offload_IndexTensor:$target,
                       DefaultValuedAttr<Offload_Reduction, "::mlir::offload::Reduction::mean">:$reduction,
                       DefaultValuedAttr<I64Attr, "-100">:$ignore_index);
  let results = (outs Offload_FloatTensor:$result);
  let assemblyFormat = "$input `,` $target (`reduction` $reduction^)? attr-dict `:` type($input) `,` type($target)";
  let hasVerifier = 1;
}
def Offload_NllLossBackwardOp : Offload_ComputeOp<"nll_loss_backward", [AllTypesMatch<["input", "grad_input"]>]> {
  let summary = "Gradient of nll_loss";
  let arguments = (ins Offload_FloatTensor:$grad_output, Offload_FloatTensor:$input,
                       Offload_IndexTensor:$target,
                       DefaultValuedAttr<Offload_Reduction, "::mlir::offload::Reduction::mean">:$reduction,
                       DefaultValuedAttr<I64Attr, "-100">:$ignore_index);
  let results = (outs Offload_FloatTensor:$grad_input);
  let assemblyFormat = "$grad_output `,` $input `,` $target (`reduction` $reduction^)? attr-dict `:` type($grad_output) `,` type($input) `,` type($target)";
}
def Offload_MseLossOp : Offload_DiffOp<"mse_loss", [InferTypeOpAdaptor]> {
  let summary = "`mse_loss(input, target)`";
  let arguments = (ins Offload_FloatTensor:$input, Offload_FloatTensor:$target,
                       DefaultValuedAttr<Offload_Reduction, "::mlir::offload::Reduction::mean">:$reduction);
  let results = (outs Offload_FloatTensor:$result);
  let assemblyFormat = "$input `,` $target (`reduction` $reduction^)? attr-dict `:` type($input) `,` type($target)";
}
def Offload_MseLossBackwardOp : Offload_ComputeOp<"mse_loss_backward", [AllTypesMatch<["input", "target", "grad_input"]>]> {
  let summary = "Gradient of mse_loss";
  let arguments = (ins Offload_FloatTensor:$grad_output, Offload_FloatTensor:$input,
                       Offload_FloatTensor:$target,
                       DefaultValuedAttr<Offload_Reduction, "::mlir::offload::Reduction::mean">:$reduction);
  let results = (outs Offload_FloatTensor:$grad_input);
  let assemblyFormat = "$grad_output `,` $input `,` $target (`reduction` $reduction^)? attr-dict `:` type($grad_output) `,` type($input) `,` type($target)";
}

#endif // OFFLOAD_COMPUTE_OPS_TD
