//===- OffloadTypes.td - offload types ----------------------*- tablegen -*-===//
#ifndef OFFLOAD_TYPES_TD
#define OFFLOAD_TYPES_TD

include "offload/Dialect/Offload/IR/OffloadDialect.td"
include "mlir/IR/AttrTypeBase.td"
include "mlir/IR/BuiltinTypes.td"
include "mlir/IR/EnumAttr.td"

class Offload_Type<string name, string typeMnemonic, list<Trait> traits = []>
    : TypeDef<Offload_Dialect, name, traits> {
  let mnemonic = typeMnemonic;
}

def Offload_SavedType : Offload_Type<"Saved", "saved"> {
  let summary = "A forward value kept for the backward phase";
  let description = [{
    `!offload.saved<tensor<32x128xf32>>` is a handle to a forward value that
    the backward phase needs. It is produced by `offload.save` in forward and
    consumed by `offload.restore` in a backward phase; the memory passes
    rewrite these pairs (keep, recompute, offload to the host). The handle
    occupies the bytes of its tensor until its last restore.
  }];
  let parameters = (ins "::mlir::RankedTensorType":$tensorType);
  let assemblyFormat = "`<` $tensorType `>`";
}

def Offload_HostType : Offload_Type<"Host", "host"> {
  let summary = "A tensor resident in host memory";
  let description = [{
    `!offload.host<tensor<32x128xf32>>` is a tensor in the host arena (pinned
    memory on the CUDA backend). Compute ops never read it: it must be
    brought back with `offload.to_device` first. The one exception is the
    optimizer updates (`offload.sgd_update`, `offload.adamw_update`), which
    run on the host when all their operands are host values.
  }];
  let parameters = (ins "::mlir::RankedTensorType":$tensorType);
  let assemblyFormat = "`<` $tensorType `>`";
}

def Offload_TokenType : Offload_Type<"Token", "token"> {
  let summary = "Completion token of an asynchronous copy";
  let description = [{
    Like `!gpu.async.token`: an async op returns one, later async ops list it
    as a dependency, and `offload.wait` blocks compute until it completes.
    Lowering maps tokens to stream events.
  }];
}

def Offload_Phase : I32EnumAttr<"Phase", "phase of a training step", [
    I32EnumAttrCase<"forward", 0>,
    I32EnumAttrCase<"backward", 1>,
    I32EnumAttrCase<"backward_input", 2>,
    I32EnumAttrCase<"backward_weight", 3>,
    I32EnumAttrCase<"optimizer", 4>]> {
  let cppNamespace = "::mlir::offload";
}

def Offload_Reduction : I32EnumAttr<"Reduction", "loss reduction", [
    I32EnumAttrCase<"mean", 0>, I32EnumAttrCase<"sum", 1>]> {
  let cppNamespace = "::mlir::offload";
}

// offload.compare's predicate: ATen's eq, ne, lt, le, gt, ge.
def Offload_ComparePredicate : I32EnumAttr<"ComparePredicate", "comparison", [
    I32EnumAttrCase<"eq", 0>, I32EnumAttrCase<"ne", 1>, I32EnumAttrCase<"lt", 2>,
    I32EnumAttrCase<"le", 3>, I32EnumAttrCase<"gt", 4>, I32EnumAttrCase<"ge", 5>]> {
  let cppNamespace = "::mlir::offload";
}

def Offload_GeluApprox : I32EnumAttr<"GeluApproximation", "GELU approximation", [
    I32EnumAttrCase<"none", 0>, I32EnumAttrCase<"tanh", 1>]> {
  let cppNamespace = "::mlir::offload";
}

// Where the heads dim sits in attention's query, key, value and output
// (`offload.attention`, `offload.attention_backward`): bhld is head layout
// [N, H, L, E] (PyTorch's scaled_dot_product_attention), blhd token layout
// [N, L, H, E] (what a linear projection's output is when viewed as heads;
// FlashAttention's and cuDNN's native layout).
def Offload_AttentionLayout : I32EnumAttr<"AttentionLayout", "attention operand layout", [
    I32EnumAttrCase<"bhld", 0>, I32EnumAttrCase<"blhd", 1>]> {
  let cppNamespace = "::mlir::offload";
}

// Roles of a training step's arguments and results (`offload.role`), read
// through getArgRole/getResultRole (OffloadDialect.h). Arguments: parameter
// (trained), state (updated, not trained: batch-norm statistics),
// optimizer_state (momentum buffers, Adam moments, step counts), input (a
// batch input), rng_seed (the i64 seed of the counter-based RNG),
// output_gradient (a pipeline stage's incoming gradient). Results: loss,
// new_parameter, new_state, new_optimizer_state, gradient (of a parameter),
// output (a pipeline stage's result), input_gradient (of an input).
def Offload_Role : I32EnumAttr<"Role", "role of a step argument or result", [
    I32EnumAttrCase<"parameter", 0>,
    I32EnumAttrCase<"state", 1>,
    I32EnumAttrCase<"optimizer_state", 2>,
    I32EnumAttrCase<"input", 3>,
    I32EnumAttrCase<"rng_seed", 4>,
    I32EnumAttrCase<"output_gradient", 5>,
    I32EnumAttrCase<"loss", 6>,
    I32EnumAttrCase<"new_parameter", 7>,
    I32EnumAttrCase<"new_state", 8>,
    I32EnumAttrCase<"new_optimizer_state", 9>,
    I32EnumAttrCase<"gradient", 10>,
    I32EnumAttrCase<"output", 11>,
    I32EnumAttrCase<"input_gradient", 12>]> {
  let cppNamespace = "::mlir::offload";
  let genSpecializedAttr = 0;
}

// `#offload.role<parameter>`: the attribute form of a role.
def Offload_RoleAttr : EnumAttr<Offload_Dialect, Offload_Role, "role"> {
  let assemblyFormat = "`<` $value `>`";
}

// Type constraints. bf16 and f16 are accepted wherever floats are: kernels
// compute in f32 and round their results to the result type
// (docs/precision.md).
def Offload_FloatTensor : RankedTensorOf<[F32, F64, BF16, F16]>;
def Offload_IndexTensor : RankedTensorOf<[I64]>;
// Float or integer: the arithmetic ops that also run on position ids and
// masks (integers are never on a gradient's path).
def Offload_NumericTensor : RankedTensorOf<[F32, F64, BF16, F16, I64, I32]>;
// Integer or boolean: values that carry no gradient (ids, masks).
def Offload_IntOrBoolTensor : RankedTensorOf<[I64, I32, I1]>;
def Offload_AnyTensor : RankedTensorOf<[F32, F64, BF16, F16, I64, I32, I1]>;
def Offload_SeedTensor : 0DTensorOf<[I64]>;

// Optimizer updates run on the device or, with every operand in host memory,
// on the host (--offload-host-parameters).
def Offload_FloatTensorOrHost : AnyTypeOf<[Offload_FloatTensor, Offload_HostType],
    "float tensor, or a float tensor in host memory">;
def Offload_SeedTensorOrHost : AnyTypeOf<[Offload_SeedTensor, Offload_HostType],
    "0-d i64 tensor, or one in host memory">;
// An update's skip flag (`skip_if`, fp16 loss scaling's found_inf).
def Offload_FlagTensorOrHost : AnyTypeOf<[0DTensorOf<[I1]>, Offload_HostType],
    "0-d i1 tensor, or one in host memory">;

#endif // OFFLOAD_TYPES_TD
