//===- OffloadOps.td - Step structure, memory and optimizer ops -*- tablegen -*-===//
//
// Part of offload. The ops that give a training step its structure (phases,
// saved values, recompute regions), move tensors between device and host
// memory, and update parameters. Compute ops are in OffloadComputeOps.td.
//
//===----------------------------------------------------------------------===//
#ifndef OFFLOAD_OPS_TD
#define OFFLOAD_OPS_TD

include "offload/Dialect/Offload/IR/OffloadDialect.td"
include "offload/Dialect/Offload/IR/OffloadTypes.td"
include "offload/Dialect/Offload/IR/OffloadInterfaces.td"
include "mlir/IR/OpAsmInterface.td"
include "mlir/Interfaces/ControlFlowInterfaces.td"
include "mlir/Interfaces/InferTypeOpInterface.td"
include "mlir/Interfaces/SideEffectInterfaces.td"

//===----------------------------------------------------------------------===//
// Structure
//===----------------------------------------------------------------------===//

def Offload_PhaseOp : Offload_Op<"phase"> {
  let summary = "Marks the start of a phase of the training step";
  let description = [{
    Ops after this marker, up to the next marker, belong to `phase`. Markers
    appear in the order forward, backward (or backward_input then
    backward_weight), optimizer; a step without markers is all forward.
    The marker has unknown side effects on purpose: no generic pass moves or
    removes it.

    A step that accumulates gradients over K micro-batches
    (`--offload-autodiff="micro-batches=K"`) repeats the forward and
    backward phases once per micro-batch, each marker carrying its
    `micro_batch` index (0 to K-1), then ends with one optimizer phase:
    forward 0, backward 0, forward 1, backward 1, ..., optimizer. A step
    without the index is one micro-batch (the markers are as before).

    ```mlir
    offload.phase forward
    %y = offload.relu %x : tensor<4x8xf32>
    offload.phase backward
    ```
    ```mlir
    offload.phase forward micro_batch 1
    ```
  }];
  let arguments = (ins Offload_Phase:$phase, OptionalAttr<I64Attr>:$micro_batch);
  let assemblyFormat = "$phase (`micro_batch` $micro_batch^)? attr-dict";
  let builders = [
    OpBuilder<(ins "::mlir::offload::Phase":$phase), [{
      build($_builder, $_state, phase, ::mlir::IntegerAttr());
    }]>
  ];
  let extraClassDeclaration = [{
    /// The micro-batch this marker's phase belongs to (0 without the index).
    int64_t getMicroBatchIndex() {
      std::optional<uint64_t> m = getMicroBatch();
      return m ? int64_t(*m) : 0;
    }
    /// The phase's name in plans and reports: "forward", or "forward.1" for
    /// a marker with a micro-batch index.
    std::string getLabel() {
      std::string name = stringifyPhase(getPhase()).str();
      if (getMicroBatch())
        name += "." + std::to_string(getMicroBatchIndex());
      return name;
    }
  }];
}

def Offload_SaveOp : Offload_Op<"save", [Pure,
    TypesMatchWith<"result is the saved handle of the value's type", "value",
      "result", "::mlir::offload::SavedType::get($_self.getContext(), ::llvm::cast<::mlir::RankedTensorType>($_self))">]> {
  let summary = "Keeps a forward value for the backward phase";
  let description = [{
    Makes `value` an explicit saved value: the handle keeps its bytes alive
    until the last `offload.restore` of it. Only valid in the forward phase.
    The memory passes replace save/restore pairs by recomputation or host
    offload.

    ```mlir
    %s = offload.save %y : tensor<32x128xf32>
    ```
  }];
  let arguments = (ins Offload_AnyTensor:$value);
  let results = (outs Offload_SavedType:$result);
  let assemblyFormat = "$value attr-dict `:` type($value)";
}

def Offload_RestoreOp : Offload_Op<"restore", [Pure,
    TypesMatchWith<"result is the tensor type of the saved handle", "saved",
      "result", "::llvm::cast<::mlir::offload::SavedType>($_self).getTensorType()">]> {
  let summary = "Reads a saved value in a backward phase";
  let description = [{
    ```mlir
    %y = offload.restore %s : !offload.saved<tensor<32x128xf32>>
    ```
  }];
  let arguments = (ins Offload_SavedType:$saved);
  let results = (outs Offload_AnyTensor:$result);
  let assemblyFormat = "$saved attr-dict `:` qualified(type($saved))";
  let hasFolder = 0;
}

def Offload_RecomputeOp : Offload_Op<"recompute", [IsolatedFromAbove,
    RecursiveMemoryEffects, SingleBlock,
    DeclareOpInterfaceMethods<Offload_CostOpInterface, ["getFlops"]>]> {
  let summary = "Recomputes forward values in backward instead of saving them";
  let description = [{
    A region cloned from the forward ops that produced the results, fed by
    `inputs` (restored saved values, parameters, or the step's inputs). The
    region is isolated from above, so CSE never merges the recomputed ops
    with their forward originals. Random ops inside regenerate the same
    numbers from their explicit seed and offset; ops that update state
    (batch-norm running statistics) have value semantics, so a recomputed
    copy's state results are simply unused.

    ```mlir
    %r = offload.recompute (%x) : (tensor<4x8xf32>) -> tensor<4x8xf32> {
    ^bb0(%a: tensor<4x8xf32>):
      %y = offload.relu %a : tensor<4x8xf32>
      offload.yield %y : tensor<4x8xf32>
    }
    ```
  }];
  let arguments = (ins Variadic<AnyType>:$inputs, OptionalAttr<StrAttr>:$policy);
  let results = (outs Variadic<AnyType>:$results);
  let regions = (region SizedRegion<1>:$body);
  let assemblyFormat = "`(` $inputs `)` attr-dict `:` functional-type($inputs, $results) $body";
  let hasVerifier = 1;
  let hasCanonicalizer = 1;
}

def Offload_YieldOp : Offload_Op<"yield", [Pure, Terminator, ReturnLike,
    HasParent<"RecomputeOp">]> {
  let summary = "Returns the values of a recompute region";
  let arguments = (ins Variadic<AnyType>:$values);
  let assemblyFormat = "($values^ `:` type($values))? attr-dict";
}

//===----------------------------------------------------------------------===//
// Device <-> host memory
//===----------------------------------------------------------------------===//

def Offload_ToHostOp : Offload_Op<"to_host", [
    MemoryEffects<[MemRead<Offload_DeviceMemory>, MemAlloc<Offload_HostMemory>,
                   MemWrite<Offload_HostMemory>]>,
    TypesMatchWith<"result is the host tensor of the value's type", "value",
      "result", "::mlir::offload::HostType::get($_self.getContext(), ::llvm::cast<::mlir::RankedTensorType>($_self))">]> {
  let summary = "Copies a tensor from device to host memory";
  let description = [{
    A device-to-host copy. With `async`, it runs on the device-to-host copy
    stream after its dependencies and returns a token; the device copy may
    only be freed after that token completes (the lowering takes care of it).
    Without `async` it is synchronous.

    ```mlir
    %h, %t = offload.to_host async [%t0] %x : tensor<32x128xf32>
    %h2 = offload.to_host %y : tensor<4xf32>
    ```
  }];
  let arguments = (ins Variadic<Offload_TokenType>:$asyncDependencies,
                       Offload_AnyTensor:$value);
  let results = (outs Offload_HostType:$result,
                      Optional<Offload_TokenType>:$asyncToken);
  let assemblyFormat = [{
    custom<AsyncDependencies>(type($asyncToken), $asyncDependencies) $value
    attr-dict `:` type($value)
  }];
}

def Offload_ToDeviceOp : Offload_Op<"to_device", [
    MemoryEffects<[MemRead<Offload_HostMemory>, MemAlloc<Offload_DeviceMemory>,
                   MemWrite<Offload_DeviceMemory>]>,
    TypesMatchWith<"result is the tensor type of the host value", "value",
      "result", "::llvm::cast<::mlir::offload::HostType>($_self).getTensorType()">]> {
  let summary = "Copies (prefetches) a tensor from host to device memory";
  let description = [{
    A host-to-device copy. With `async` it runs on the host-to-device stream
    and returns a token; its result may only be read by compute after an
    `offload.wait` on that token (the step verifier checks this). The
    optional `prefetch_distance` records how many compute ops before the
    first use the copy was issued.

    ```mlir
    %x, %t = offload.to_device async %h : !offload.host<tensor<32x128xf32>>
    offload.wait [%t]
    ```
  }];
  let arguments = (ins Variadic<Offload_TokenType>:$asyncDependencies,
                       Offload_HostType:$value,
                       OptionalAttr<I64Attr>:$prefetch_distance);
  let results = (outs Offload_AnyTensor:$result,
                      Optional<Offload_TokenType>:$asyncToken);
  let assemblyFormat = [{
    custom<AsyncDependencies>(type($asyncToken), $asyncDependencies) $value
    attr-dict `:` qualified(type($value))
  }];
}

def Offload_WaitOp : Offload_Op<"wait", [
    MemoryEffects<[MemRead<Offload_HostMemory>, MemWrite<Offload_DeviceMemory>]>]> {
  let summary = "Waits for asynchronous copies";
  let description = [{
    Without `async`, compute after this op waits for every dependency. With
    `async`, it returns a token that completes when all dependencies have
    (a join), and blocks nothing.

    ```mlir
    offload.wait [%t0, %t1]
    %t2 = offload.wait async [%t0, %t1]
    ```
  }];
  let arguments = (ins Variadic<Offload_TokenType>:$asyncDependencies);
  let results = (outs Optional<Offload_TokenType>:$asyncToken);
  let assemblyFormat = [{
    custom<AsyncDependencies>(type($asyncToken), $asyncDependencies) attr-dict
  }];
  let hasCanonicalizer = 1;
}

//===----------------------------------------------------------------------===//
// Optimizer updates
//===----------------------------------------------------------------------===//

def Offload_SgdUpdateOp : Offload_Op<"sgd_update", [Pure,
    AllTypesMatch<["param", "grad", "momentum_buffer", "new_param", "new_momentum_buffer"]>,
    AllTypesMatch<["step", "new_step"]>,
    DeclareOpInterfaceMethods<Offload_CostOpInterface, ["getFlops"]>]> {
  let hasKernel = 1;
  let summary = "One torch.optim.SGD step for one parameter";
  let description = [{
    Semantics of torch.optim.SGD 1.13 (maximize off), in this order:
    `g = grad + weight_decay * param`; with momentum, `buf = g` on the first
    step (`step == 0`) and `momentum * buf + (1 - dampening) * g` after;
    `g = nesterov ? g + momentum * buf : buf`; `param -= lr * g`;
    `new_step = step + 1`. `step` is an i64 scalar. `param`, `grad` and
    `momentum_buffer` are f32, f64, bf16 or f16, of one type; a bf16/f16
    update computes in f32 and rounds each stored result once to nearest
    even (a bf16-true model, docs/precision.md).

    `skip_if %found_inf` (optional, a 0-d i1 tensor; fp16 loss scaling's
    "gradients held an inf or NaN", docs/precision.md): when it is true the
    step is skipped and every result equals its operand bit for bit
    (`new_param = param`, `new_momentum_buffer = momentum_buffer`,
    `new_step = step`), written in place like an update.

    When every operand is an `!offload.host` value the update runs on the
    host, over the host arena (parameters kept on the host by
    --offload-host-parameters); otherwise every operand is a device tensor.

    ```mlir
    %p1, %b1, %s1 = offload.sgd_update %p, %g, %b, %s {lr = 1.0e-01 : f64,
        momentum = 9.0e-01 : f64, dampening = 0.0 : f64,
        weight_decay = 0.0 : f64, nesterov = false}
        : tensor<10x4xf32>, tensor<i64>
    %p2, %b2, %s2 = offload.sgd_update %p, %g, %b, %s skip_if %inf {lr = 1.0e-01 : f64,
        momentum = 9.0e-01 : f64, dampening = 0.0 : f64,
        weight_decay = 0.0 : f64, nesterov = false}
        : tensor<10x4xf32>, tensor<i64>, tensor<i1>
    ```
  }];
  let arguments = (ins Offload_FloatTensorOrHost:$param, Offload_FloatTensorOrHost:$grad,
                       Offload_FloatTensorOrHost:$momentum_buffer,
                       Offload_SeedTensorOrHost:$step,
                       Optional<Offload_FlagTensorOrHost>:$found_inf,
                       F64Attr:$lr, F64Attr:$momentum, F64Attr:$dampening,
                       F64Attr:$weight_decay, BoolAttr:$nesterov);
  let results = (outs Offload_FloatTensorOrHost:$new_param,
                      Offload_FloatTensorOrHost:$new_momentum_buffer,
                      Offload_SeedTensorOrHost:$new_step);
  let assemblyFormat = [{
    $param `,` $grad `,` $momentum_buffer `,` $step (`skip_if` $found_inf^)? attr-dict `:`
    type($param) `,` type($step) (`,` type($found_inf)^)?
  }];
  let hasVerifier = 1;
}

def Offload_AdamWUpdateOp : Offload_Op<"adamw_update", [Pure,
    AllTypesMatch<["param", "grad", "new_param"]>,
    AllTypesMatch<["exp_avg", "exp_avg_sq", "new_exp_avg", "new_exp_avg_sq"]>,
    AllTypesMatch<["step", "new_step"]>,
    DeclareOpInterfaceMethods<Offload_CostOpInterface, ["getFlops"]>]> {
  let hasKernel = 1;
  let summary = "One torch.optim.AdamW step for one parameter";
  let description = [{
    Semantics of torch.optim.AdamW 1.13 (amsgrad off): `param *= 1 - lr *
    weight_decay`; `m = beta1 * m + (1 - beta1) * g`; `v = beta2 * v +
    (1 - beta2) * g * g`; `t = step + 1`; `param -= (lr / (1 - beta1^t)) * m /
    (sqrt(v) / sqrt(1 - beta2^t) + eps)`.

    `param` and `grad` are f32, f64, bf16 or f16, of one type (bf16/f16:
    computed in f32, each stored result rounded once to nearest even). The
    moments have the parameter's shape and either its type or, for an
    f32 parameter, bf16 (`--offload-autodiff="moments=bf16"`): the update
    then reads them widened to f32, computes in f32 as above and stores
    each new moment rounded to bf16, to nearest even (Float16.h).

    As for `offload.sgd_update`, the update runs on the host when every
    operand is an `!offload.host` value, and `skip_if %found_inf` (a 0-d i1
    tensor) skips it: when true, every result equals its operand bit for bit
    (`new_step = step`).

    ```mlir
    %p1, %m1, %v1, %s1 = offload.adamw_update %p, %g, %m, %v, %s {lr = 1.0e-03 : f64,
        beta1 = 9.0e-01 : f64, beta2 = 9.990e-01 : f64, eps = 1.0e-08 : f64,
        weight_decay = 1.0e-02 : f64} : tensor<10x4xf32>, tensor<i64>
    %p2, %m2, %v2, %s2 = offload.adamw_update %p, %g, %m, %v, %s skip_if %inf {...}
        : tensor<10x4xf32>, tensor<i64>, tensor<i1>
    %p3, %m3, %v3, %s3 = offload.adamw_update %p, %g, %mb, %vb, %s {...}
        : tensor<10x4xf32> moments tensor<10x4xbf16>, tensor<i64>
    ```
  }];
  let arguments = (ins Offload_FloatTensorOrHost:$param, Offload_FloatTensorOrHost:$grad,
                       Offload_FloatTensorOrHost:$exp_avg, Offload_FloatTensorOrHost:$exp_avg_sq,
                       Offload_SeedTensorOrHost:$step,
                       Optional<Offload_FlagTensorOrHost>:$found_inf,
                       F64Attr:$lr, F64Attr:$beta1, F64Attr:$beta2, F64Attr:$eps,
                       F64Attr:$weight_decay);
  let results = (outs Offload_FloatTensorOrHost:$new_param, Offload_FloatTensorOrHost:$new_exp_avg,
                      Offload_FloatTensorOrHost:$new_exp_avg_sq, Offload_SeedTensorOrHost:$new_step);
  let assemblyFormat = [{
    $param `,` $grad `,` $exp_avg `,` $exp_avg_sq `,` $step (`skip_if` $found_inf^)? attr-dict `:`
    custom<AdamWTypes>(type($param), type($exp_avg), type($step), type($found_inf))
  }];
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Data parallel
//===----------------------------------------------------------------------===//

def Offload_AllReduceOp : Offload_Op<"all_reduce", [
    MemoryEffects<[MemRead<Offload_DeviceMemory>, MemAlloc<Offload_DeviceMemory>,
                   MemWrite<Offload_DeviceMemory>]>]> {
  let summary = "Averages a bucket of gradients across the ranks of a data-parallel job";
  let description = [{
    The mean over the ranks of each operand: result `i` is
    `(sum over ranks r of values[i] on rank r) / world_size`, elementwise,
    the world size being the runtime's (`offload-run --world-size`), so one
    plan serves every world size. With one rank every result equals its
    operand bit for bit. All ranks get the same bits (the engine reduces
    each element once and broadcasts it). `values` are the gradients of one
    bucket (`bucket`, numbered from 0 in the order backward makes them,
    `--offload-data-parallel`), device tensors of f32 or f64; the results
    are new buffers of the same types (the bucket buffer, counted by the
    memory plan, as DDP's default `gradient_as_bucket_view=False` has one).

    The reduction is always asynchronous: it runs on the communication
    stream once compute has made its operands, and returns a token; its
    results may only be read after an `offload.wait` on that token (the
    step verifier checks it), and its operands stay live until then (the
    memory plan and the lowering take care of it).

    ```mlir
    %g0, %g1, %t = offload.all_reduce %a, %b {bucket = 0 : i64}
        : tensor<16x8xf32>, tensor<16xf32>
    offload.wait [%t]
    ```
  }];
  let arguments = (ins Variadic<Offload_AnyTensor>:$values, I64Attr:$bucket);
  let results = (outs Variadic<Offload_AnyTensor>:$reduced,
                      Offload_TokenType:$asyncToken);
  let hasCustomAssemblyFormat = 1;
  let hasVerifier = 1;
}

def Offload_ReduceScatterOp : Offload_Op<"reduce_scatter", [
    MemoryEffects<[MemRead<Offload_DeviceMemory>, MemAlloc<Offload_DeviceMemory>,
                   MemWrite<Offload_DeviceMemory>]>]> {
  let summary = "This rank's shard of a gradient bucket's mean across ranks (ZeRO-1)";
  let description = [{
    `grads` (a bucket, device tensors of one element type, f32 or f64) are
    flattened and concatenated in order into a vector of `n` elements,
    zero-padded to `world_size * S` with `S = ceil(n / world_size)`; the
    mean over the ranks of that vector is cut into `world_size` chunks of
    `S` elements and `grad_shard` (`tensor<S x T>`) is chunk `rank`, the
    rank being the runtime's (the same plan runs on every rank).
    The operands are the gradients, then the parameters (one per gradient,
    of its type, in its order: `values` has an even count). `param_shard`
    (`tensor<S x T>`) is the same chunk of the parameters concatenated and zero-padded the same
    way, a local copy that needs no communication. `world_size` (>= 1) is
    fixed at compile time: the runtime refuses a job of another size. With
    one rank `grad_shard` and `param_shard` are the bucket and the
    parameters, flattened, bit for bit.

    Asynchronous as `offload.all_reduce`: it runs on the communication
    stream and its results may be read only after an `offload.wait` on
    `asyncToken`; its operands stay live until that wait.

    ```mlir
    %g, %p, %t = offload.reduce_scatter %gw, %gb, %w, %b {bucket = 0 : i64, world_size = 2 : i64}
        : tensor<16x8xf32>, tensor<16xf32>, tensor<16x8xf32>, tensor<16xf32> -> tensor<72xf32>, tensor<72xf32>
    ```
  }];
  let arguments = (ins Variadic<Offload_AnyTensor>:$values, I64Attr:$bucket, I64Attr:$world_size);
  let results = (outs Offload_AnyTensor:$grad_shard, Offload_AnyTensor:$param_shard,
                      Offload_TokenType:$asyncToken);
  let assemblyFormat = [{
    $values attr-dict `:` type($values) `->` type($grad_shard) `,` type($param_shard)
  }];
  let extraClassDeclaration = [{
    /// The first half of the operands: the bucket's gradients.
    ::mlir::OperandRange getGrads() { return getValues().take_front(getValues().size() / 2); }
    /// The second half: the parameters, one per gradient, in its order.
    ::mlir::OperandRange getParams() { return getValues().drop_front(getValues().size() / 2); }
  }];
  let hasVerifier = 1;
}

def Offload_AllGatherOp : Offload_Op<"all_gather", [
    MemoryEffects<[MemRead<Offload_DeviceMemory>, MemAlloc<Offload_DeviceMemory>,
                   MemWrite<Offload_DeviceMemory>]>]> {
  let summary = "Rebuilds a bucket's parameters from every rank's shard (ZeRO-1)";
  let description = [{
    The inverse layout of `offload.reduce_scatter`: `shard` (`tensor<S x T>`,
    T f32 or f64) is this rank's chunk; the chunks of ranks 0 to
    `world_size - 1` end to end form a vector of `world_size * S`
    elements whose first `n` elements (`n` the sum of the results' element
    counts, `S = ceil(n / world_size)`) are the results, flattened and
    concatenated in order, of element type T. The padding is dropped. Every
    rank gets the same bits. With one rank the results are `shard`
    reshaped, bit for bit.

    `params` (after `into`, one per result, of its type) are the parameters
    the results replace: their values are not read; they name the buffers
    the memory plan writes the results over when the all-gather is their
    last reader (as an optimizer update writes its new parameter in place),
    so ZeRO-1 needs no second copy of the parameters.

    Asynchronous as `offload.all_reduce` (communication stream, results
    read after an `offload.wait` on `asyncToken`).

    ```mlir
    %w1, %b1, %t = offload.all_gather %p into %w, %b {bucket = 0 : i64, world_size = 2 : i64}
        : tensor<72xf32> into tensor<16x8xf32>, tensor<16xf32>
    ```
  }];
  let arguments = (ins Offload_AnyTensor:$shard, Variadic<Offload_AnyTensor>:$params,
                       I64Attr:$bucket, I64Attr:$world_size);
  let results = (outs Variadic<Offload_AnyTensor>:$gathered, Offload_TokenType:$asyncToken);
  let builders = [
    OpBuilder<(ins "::mlir::Value":$shard, "::mlir::ValueRange":$params, "int64_t":$bucket,
                   "int64_t":$worldSize)>
  ];
  let hasCustomAssemblyFormat = 1;
  let hasVerifier = 1;
}

#endif // OFFLOAD_OPS_TD
