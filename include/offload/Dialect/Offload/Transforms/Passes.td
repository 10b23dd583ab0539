//===- Passes.td - offload passes ---------------------------*- tablegen -*-===//
#ifndef OFFLOAD_PASSES_TD
#define OFFLOAD_PASSES_TD

include "mlir/Pass/PassBase.td"

// The one report option of every pass that can say what it did
// (PassReport.h, docs/design.md "Reports"): off by default in transform
// passes, stderr by default in the dedicated report passes.
class ReportOption<string default>
    : Option<"report", "report", "std::string", default,
             "Where the report goes: - or true (stderr), FILE, or false (none)">;
def TransformReportOption : ReportOption<"\"\"">;
def AnalysisReportOption : ReportOption<"\"-\"">;
// Passes with a JSON form of their report as well (report=json:FILE).
class JsonReportOption<string default>
    : Option<"report", "report", "std::string", default,
             "Where the report goes: - or true (stderr), FILE, json:FILE or json:- "
             "(its JSON form, with the text in \"text\"; docs/design.md \"Reports\"), "
             "or false (none)">;


// The precision policy's option (Lightning's names), shared by
// --offload-autodiff and --offload-autocast.
def PrecisionOption
    : Option<"precision", "precision", "::mlir::offload::PrecisionOption",
             /*default=*/"::mlir::offload::Precision::Fp32",
             "Mixed precision as PyTorch's autocast runs it, with f32 master weights "
             "(docs/precision.md): fp32 (everything in its own type), bf16-mixed (matmul, "
             "linear, conv and attention in bf16 from casts of f32 values), fp16-mixed "
             "(the same in f16, with GradScaler's dynamic loss scaling in --offload-autodiff)">;

def CostReport : Pass<"offload-cost-report", "::mlir::ModuleOp"> {
  let summary = "Prints FLOPs and bytes of every op of each training step";
  let description = [{
    An analysis: for every function, prints one line per compute op (with
    `per-op`) giving its FLOPs (a multiply-add counts 2) and the bytes it
    reads and writes, from the ops' cost interface, then the totals per
    phase. The IR is not changed. The figures feed the planner's roofline
    time estimate. With `target=`, also prints the step time that the
    timeline simulator gives on that target (one compute stream, two copy
    streams; the same model the planner uses), for comparing plans made by
    hand with the planner's.

    Example: `offload-opt --offload-cost-report model.mlir -o /dev/null`
  }];
  let options = [
    Option<"perOp", "per-op", "bool", /*default=*/"true",
           "Print one line per op, not only the totals">,
    Option<"target", "target", "std::string", /*default=*/"\"\"",
           "Also print the step's simulated time on this target (h100-sxm, ..., "
           "host or FILE.json; Analysis/Timeline.h): compute, copies, stalls">,
    AnalysisReportOption,
  ];
  let statistics = [
    Statistic<"numOps", "ops", "Compute ops counted">,
  ];
}

def Autocast : Pass<"offload-autocast", "::mlir::ModuleOp"> {
  let summary = "Inserts the casts of mixed precision into forward-only steps";
  let description = [{
    PyTorch's autocast as a rewrite of a forward-only step (what
    `--offload-autodiff="precision=..."` runs first; docs/precision.md has
    the tables and their sources, ATen's `autocast_mode.h` op lists for
    CUDA):

    * low-precision ops (`linear`, `matmul`, `conv2d`,
      `conv2d_backward_input` as conv_transpose2d, `attention`): every f32
      operand is cast to bf16/f16 (`offload.copy`) and the result is in the
      low type;
    * f32 ops (`softmax`, `log_softmax`, `layer_norm`, `cross_entropy`,
      `nll_loss`, `mse_loss`, `exp`, `rsqrt`, `reduce_sum`): every bf16/f16
      operand is cast to f32;
    * ops that combine floats (`add`, `sub`, `mul`, `div`, `where`, `cat`):
      operands of different float types are cast to the widest, as PyTorch's
      type promotion computes them;
    * every other op runs in the type of its operands (a relu of a bf16
      value is bf16; `batch_norm` takes a bf16 input with its f32
      parameters, statistics in f32).

    f64 values are never cast (autocast leaves them alone). One cast per
    value and type, placed before its first reader and shared by all (PyTorch
    caches the casts of parameters; it casts activations per use). A step
    result whose type changed is cast back to its declared type. Running it
    twice changes nothing.

    Example: `offload-opt --offload-autocast=precision=bf16-mixed fwd.mlir`
  }];
  let options = [
    PrecisionOption,
  ];
  let statistics = [
    Statistic<"numCasts", "casts", "Casts inserted">,
  ];
  let dependentDialects = ["::mlir::offload::OffloadDialect"];
}

def FuseAttention : Pass<"offload-fuse-attention", "::mlir::ModuleOp"> {
  let summary = "Rewrites spelled-out softmax(scale · q kᵀ + mask) v into offload.attention";
  let description = [{
    Runs on forward-only steps, before `--offload-autodiff` (the importer
    runs it at the end of every import; `offload-import
    --no-fuse-attention` turns that off). Models that spell attention out
    (TorchScript from PyTorch 1.13: nanoGPT-style blocks, the
    MultiheadAttention of 1.13) import as

        matmul(q, kᵀ) [· c] [masked_fill(M, -inf) | + A] softmax(-1)
        [dropout] matmul(·, v)

    and each such chain becomes one `offload.attention` when it is exactly
    that op: the scale c a constant (`mul_scalar`, or `div`/`mul` by a
    scalar fill or constant, after the matmul or on q before it; none: 1);
    q, k, v of rank 4 [N, H, L, E] with equal batch dims, or of rank 3
    [B, L, E] (1.13's MultiheadAttention, B = batch · heads), read as
    [1, B, L, E] (a view; the dropout's element order is unchanged); a
    constant i1 mask filled with -inf becomes the op's keep mask (not M),
    or `is_causal` when M is the strictly upper-triangular [L, S] matrix
    (with leading dims of 1); a constant float mask A of the query's type
    is the op's additive mask; a dropout over the softmax's result carries
    its p, offset and seed over (the op's dropout runs over the same
    N·H·L·S elements in the same order). Every intermediate (the scores,
    scaled, masked, the probabilities, dropped out, and a scaled q) must
    be read by the next op of the chain only.

    Refused (left spelled out; `report=` says why): a second user of an
    intermediate, a mask or scale that is not a constant, a softmax over
    another dim, operands whose batch dims broadcast, other ranks, a mask
    that removes every key of some query (NaN spelled out, 0 fused).

    Then, with `token-layout` (the default), every head-layout attention of
    the step (fused here or already there) whose query, key and value are
    each `transpose(x, 1, 2)` and whose output is read only through
    `transpose(1, 2)`, as HF's and nanoGPT's attention is written
    (`q.view(B, T, H, E).transpose(1, 2)` ... `y.transpose(1, 2)
    .contiguous().view(B, T, C)`), becomes the token-layout op
    (`layout blhd`) on the untransposed values (foldAttentionTokenLayout,
    FuseAttention.h): the same values, no transpose copies, and its output
    is the buffer the output projection's reshape views, saved once.
    `token-layout=false` keeps the head layout (the CUDA kernels take only
    bhld until they learn blhd; docs/import.md).

    Example: `offload-opt --offload-fuse-attention=report=- fwd.mlir`
  }];
  let options = [
    TransformReportOption,
    Option<"tokenLayout", "token-layout", "bool", "true",
           "Fold transpose(1, 2) of query, key, value and output into the "
           "token-layout attention (layout blhd)">,
  ];
  let statistics = [
    Statistic<"numFused", "fused", "Attentions formed">,
    Statistic<"numTokenLayout", "token-layout", "Attentions put in the token layout">,
  ];
}

def Autodiff : Pass<"offload-autodiff", "::mlir::ModuleOp"> {
  let summary = "Builds the training step: backward from VJPs, saved values, optimizer update";
  let description = [{
    Turns every forward-only step (a function with `offload.step` whose
    first result has role `loss`) into a complete training step:

    1. Activity analysis: a value is *active* when it depends on a parameter
       (role `parameter`) and the loss depends on it. Only ops with active
       results get a VJP, so nothing is saved for inactive ops.
    2. Every forward value that an active op's VJP reads (its
       `DifferentiableOpInterface::getSavedValues`) and that an op produced
       becomes an explicit saved value: `offload.save` right after its
       producer, `offload.restore` right before its VJP. Function arguments
       (parameters, inputs) are read directly: they live for the whole step.
    3. `offload.phase backward`, then the VJPs in reverse program order,
       seeded with d(loss) = 1; cotangents reaching one value are summed.
    4. `offload.phase optimizer`, then one `offload.sgd_update` or
       `offload.adamw_update` per parameter. Optimizer state becomes new
       arguments (role `optimizer_state`: `<param>.momentum_buffer`,
       `<param>.exp_avg`, `<param>.exp_avg_sq`, and one shared
       `optimizer.step` counter) with matching `new_optimizer_state`
       results; updated parameters are `new_parameter` results named like
       the parameter. With `optimizer=none` the gradients are the results.

    With `precision=bf16-mixed` (or `fp16-mixed`) the forward is first
    rewritten as `--offload-autocast` does (casts to the low type before
    matmul, linear, conv and attention, to f32 before autocast's f32 ops),
    so backward runs those ops in the low type too, the casts' VJPs bring
    gradients back to the f32 master weights, and the optimizer state stays
    f32. Under `fp16-mixed` with an optimizer the step also scales its loss
    as torch.amp.GradScaler does (`loss-scale=dynamic`, the default):
    backward starts from `amp.scale`, the gradients are checked for inf/NaN
    and unscaled in f32, a step with any keeps every parameter and
    optimizer state (the updates' `skip_if`), and `amp.scale`,
    `amp.growth_tracker` and `amp.skipped_steps` are optimizer state
    (docs/precision.md).

    `moments=bf16` (with `optimizer=adamw`) keeps AdamW's `exp_avg` and
    `exp_avg_sq` in bf16, as DeepSpeed and torchtitan can: the update reads
    them, computes in f32 and stores each rounded to bf16 (to nearest even),
    2 bytes per element of state instead of 4. The parameters and the
    update's arithmetic are unchanged. Default `f32`.

    `micro-batches=K` (gradient accumulation) runs the compiled batch as K
    micro-batches: every input (role `input`: the model's inputs and the
    target) is sliced along dim 0 into K equal parts, the forward and the
    backward are unrolled once per micro-batch (phase markers `forward
    micro_batch i`, `backward micro_batch i`), each micro-batch's backward
    starts from d(loss_i) = 1/K (scale/K under fp16 loss scaling), the
    parameter gradients are summed in f32 accumulators across the
    micro-batches, and the optimizer updates once. The step's loss is the
    mean of the micro-batch losses. This is PyTorch's accumulation loop
    (`(loss_i / K).backward()` K times, then `step()`). Refused with the
    op's location where it is a different computation: batch norm in
    training mode (batch statistics), a step that updates state; and where
    the batch cannot be split: an input without a batch dim, a batch not
    divisible by K, an op whose result cannot be computed per micro-batch
    (docs/training.md). Default 1: the step is unchanged.

    Example:
    `offload-opt --offload-autodiff="optimizer=adamw lr=1e-3 weight-decay=0.01"`
  }];
  let options = [
    Option<"optimizer", "optimizer", "::mlir::offload::OptimizerKind",
           /*default=*/"::mlir::offload::OptimizerKind::Sgd",
           "Optimizer update",
           [{::llvm::cl::values(
             clEnumValN(::mlir::offload::OptimizerKind::Sgd, "sgd", "torch.optim.SGD"),
             clEnumValN(::mlir::offload::OptimizerKind::AdamW, "adamw", "torch.optim.AdamW"),
             clEnumValN(::mlir::offload::OptimizerKind::None, "none", "gradients only"))}]>,
    Option<"lr", "lr", "double", /*default=*/"0.01", "Learning rate">,
    Option<"momentum", "momentum", "double", /*default=*/"0.0",
           "SGD momentum factor">,
    Option<"dampening", "dampening", "double", /*default=*/"0.0",
           "SGD dampening for momentum">,
    Option<"nesterov", "nesterov", "bool", /*default=*/"false",
           "SGD Nesterov momentum">,
    Option<"weightDecay", "weight-decay", "double", /*default=*/"0.0",
           "Weight decay (L2 for SGD, decoupled for AdamW)">,
    Option<"beta1", "beta1", "double", /*default=*/"0.9", "AdamW beta1">,
    Option<"beta2", "beta2", "double", /*default=*/"0.999", "AdamW beta2">,
    Option<"eps", "eps", "double", /*default=*/"1e-8", "AdamW epsilon">,
    Option<"stepCounters", "step-counters", "::mlir::offload::StepCounters",
           /*default=*/"::mlir::offload::StepCounters::Shared",
           "Optimizer step counters: shared (one `optimizer.step` for all parameters, "
           "which equals torch.optim's per-parameter counts in a plain training loop) or "
           "per-parameter (`<param>.step`, as torch.optim keeps them; needed when plans "
           "that update different parameters share one store, e.g. one plan per task)",
           [{::llvm::cl::values(
             clEnumValN(::mlir::offload::StepCounters::Shared, "shared", "one optimizer.step"),
             clEnumValN(::mlir::offload::StepCounters::PerParameter, "per-parameter", "<param>.step per parameter"))}]>,
    Option<"returnGradients", "return-gradients", "bool", /*default=*/"false",
           "Also return every parameter gradient (role `gradient`, named "
           "`grad:<param>`); they then stay alive until the step ends">,
    PrecisionOption,
    Option<"moments", "moments", "::mlir::offload::MomentsOption",
           /*default=*/"::mlir::offload::Moments::F32",
           "Element type of AdamW's exp_avg and exp_avg_sq: f32 (as torch.optim keeps them "
           "for f32 parameters) or bf16 (computed in f32, stored rounded to nearest even; "
           "docs/precision.md). Only with optimizer=adamw">,
    Option<"lossScale", "loss-scale", "std::string", /*default=*/"\"dynamic\"",
           "fp16 loss scaling under precision=fp16-mixed with an optimizer: dynamic "
           "(torch.amp.GradScaler's rule; step state amp.scale, amp.growth_tracker, "
           "amp.skipped_steps; docs/precision.md) or none">,
    Option<"initScale", "init-scale", "double", /*default=*/"65536.0",
           "GradScaler's init_scale: the scale a zero (fresh) amp.scale stands for">,
    Option<"growthInterval", "growth-interval", "int64_t", /*default=*/"2000",
           "GradScaler's growth_interval: clean steps before the scale doubles">,
    Option<"microBatches", "micro-batches", "int64_t", /*default=*/"1",
           "Gradient accumulation: run the batch as K equal micro-batches (inputs sliced "
           "along dim 0), accumulate the gradients in f32, update once; the loss is the "
           "mean of the micro-batch losses">,
  ];
  let dependentDialects = ["::mlir::offload::OffloadDialect"];
  let statistics = [
    Statistic<"numSaved", "saved-values", "Forward values made explicit saved values">,
    Statistic<"numVJPs", "vjps", "Ops differentiated">,
  ];
}

def SavedValueReport : Pass<"offload-saved-value-report", "::mlir::ModuleOp"> {
  let summary = "Prints every saved value with its bytes, producer, consumers and location";
  let description = [{
    An analysis for users: one row per `offload.save` (bytes, producing op,
    the backward ops that read it, source location), then totals by layer
    (the layer is the location's name when the importer recorded a module
    path, else its file:line) and the step's total. The IR is unchanged.
    Compare the total with PyTorch's own saved-tensor bytes from
    `python/saved_tensor_bytes.py`.
  }];
  let options = [
    Option<"perValue", "per-value", "bool", /*default=*/"true",
           "Print one row per saved value, not only the totals">,
    AnalysisReportOption,
  ];
}

def MemoryReport : Pass<"offload-memory-report", "::mlir::ModuleOp"> {
  let summary = "Prints the static memory plan: peak device bytes, arena sizes, what is live at the peak";
  let description = [{
    Computes the step's memory plan (liveness over the program order, views
    aliased, greedy best-fit arena offsets; include/offload/Dialect/Offload/
    Analysis/MemoryPlan.h) and prints the peak of live device bytes, the op
    where it is reached, the device and host arena sizes, and the largest
    buffers live at the peak. The runtime measures the same peak.
  }];
  let options = [
    Option<"top", "top", "unsigned", /*default=*/"10",
           "How many of the largest buffers live at the peak to list">,
    JsonReportOption<"\"-\"">,
  ];
}

def Recompute : Pass<"offload-recompute", "::mlir::ModuleOp"> {
  let summary = "Rematerializes saved values in backward instead of keeping them";
  let description = [{
    Activation checkpointing as a rewrite of the training step. Each chosen
    saved value stops being kept from forward to backward: its restores are
    replaced by an `offload.recompute` region, placed just before the first
    backward use, that clones the forward ops producing it from values that
    stay available (parameters and inputs, and saved values that are kept,
    restored there). Values of one segment are recomputed by one region.

    Policies (`policy=`):
    * `ops`: saved values whose whole recomputation consists of the op
      kinds in `ops` (selective checkpointing of cheap ops:
      `ops=relu,gelu,add,layer_norm,batch_norm` never reruns a matmul or a
      convolution; a value whose recomputation would stays saved);
    * `every-k`: keeps every k-th saved value (in forward order) as a
      checkpoint and recomputes the segments between them;
    * `sqrt`: `every-k` with k = round(sqrt(n)) for n saved values (Chen et
      al., "Training Deep Nets with Sublinear Memory Cost", 2016);
    * `names`: saved values whose layer (the importer's module path, or
      file:line) matches the glob `names` (e.g. `layer2.*`);
    * `all`: every saved value (the forward is recomputed from its inputs);
    * `marked`: saves carrying the attribute `offload.recompute` (set by
      the planner, or by hand): a unit attribute, one region per value; an
      integer group id, one region for all saves with that id (placed
      before the first backward use of any of them, each op of their cones
      run once, every value held from there to its own uses).
    Running the pass again on its output applies a second policy on top of
    the first (nested checkpointing): saves that remain are candidates.

    Checkpoints beyond the saved values: a forward op carrying the unit
    attribute `offload.checkpoint`, or whose layer matches one of the globs
    `checkpoints` (comma-separated), has its results kept as checkpoints, whatever the policy:
    a cone stops there, as `torch.utils.checkpoint` keeps a block's input
    (which autodiff need not have saved: a residual block's input read only
    by its norm's reshape and the residual add), and as PyTorch's min-cut
    partitioner saves a convolution's output and recomputes the batch norm
    and ReLU after it. The pass saves each such result that a region reads
    (an `offload.save` right after its op, restored before the region); one
    no region reads is not saved. A checkpoint that is itself a chosen saved
    value is recomputed (the policy wins). The attribute is removed.

    Never unsafe: ops have value semantics, so a recomputed batch norm's
    running-statistics results are simply unused (state is updated once),
    and dropout regenerates its mask from its seed and offset. A value
    whose producers include a copy or an op with side effects is left
    saved. With `report=`: values recomputed, bytes no longer kept, FLOPs
    added.
  }];
  let options = [
    Option<"policy", "policy", "::mlir::offload::RecomputePolicy",
           /*default=*/"::mlir::offload::RecomputePolicy::Ops",
           "Which saved values to recompute",
           [{::llvm::cl::values(
             clEnumValN(::mlir::offload::RecomputePolicy::Ops, "ops", "producers among ops="),
             clEnumValN(::mlir::offload::RecomputePolicy::EveryK, "every-k", "segments of k layers"),
             clEnumValN(::mlir::offload::RecomputePolicy::Sqrt, "sqrt", "segments of sqrt(n) layers"),
             clEnumValN(::mlir::offload::RecomputePolicy::Names, "names", "layers matching names="),
             clEnumValN(::mlir::offload::RecomputePolicy::All, "all", "every saved value"),
             clEnumValN(::mlir::offload::RecomputePolicy::Marked, "marked", "values marked offload.recompute (the planner)"))}]>,
    ListOption<"ops", "ops", "std::string",
               "Op kinds to recompute with policy=ops (e.g. relu,gelu,add)">,
    Option<"k", "k", "unsigned", /*default=*/"2",
           "Segment length for policy=every-k">,
    Option<"names", "names", "std::string", /*default=*/"\"\"",
           "Glob over layer names for policy=names (required with it)">,
    ListOption<"checkpoints", "checkpoints", "std::string",
               "Globs over layer names (module path, or file:line) of forward "
               "ops whose results are checkpoints: regions restore them "
               "instead of rerunning their producers (any policy; none: only "
               "ops marked offload.checkpoint)">,
    TransformReportOption,
  ];
  let dependentDialects = ["::mlir::offload::OffloadDialect"];
  let statistics = [
    Statistic<"numRecomputed", "recomputed-values", "Saved values rematerialized">,
    Statistic<"numCheckpoints", "checkpoints-saved", "Checkpoints beyond the saved values that a region reads">,
    Statistic<"bytesFreed", "bytes-no-longer-saved", "Bytes no longer kept from forward to backward">,
  ];
}

def InlineRecompute : Pass<"offload-inline-recompute", "::mlir::ModuleOp"> {
  let summary = "Inlines recompute regions into the step (before lowering)";
  let description = [{
    Replaces each `offload.recompute` by its ops, cloned at its position.
    The lowering and the memory plan do this on a copy of the step; the
    pass exists to inspect the result. Do not run CSE afterwards: it would
    merge recomputed ops with their forward originals.
  }];
}

def SplitWeightGrad : Pass<"offload-split-weight-grad", "::mlir::ModuleOp"> {
  let summary = "Splits backward into input-gradient (B) and weight-gradient (W) phases";
  let description = [{
    Partitions the backward phase of each step into `backward_input` (B:
    everything on the path of the activations' gradients) and
    `backward_weight` (W: the ops whose results only feed parameter
    gradients -- a linear layer's weight-gradient matmul, a bias's
    reduction, a convolution's weight gradient, and the restores only they
    read). W ops move after B in their relative order; the boundary is the
    `offload.phase backward_weight` marker. A value that only B reads is
    dead when B ends, so the plan frees it there; what W needs stays.
    The runtime runs the two phases separately (Session::runPhase), so a
    pipeline schedule (zero-bubble) can run W later; a single-device plan
    runs W right after B, with bit-identical results.

    With `report=`, reports live bytes at the end of B (what is kept for W, by
    saved value and gradient), and per layer what W needs.
  }];
  let options = [
    TransformReportOption,
  ];
  let dependentDialects = ["::mlir::offload::OffloadDialect"];
}

// Options of the target's cost model shared by the host-offload passes
// (Prefetch.h, TargetModel).
defvar TargetModelOptions = [
    Option<"prefetchDistance", "prefetch-distance", "int", /*default=*/"-1",
           "Compute ops between a prefetch and its first use; -1 (default) places "
           "each prefetch from the cost model: early enough to finish before the use "
           "at link-bandwidth, never so early that it raises the peak">,
    Option<"linkBandwidth", "link-bandwidth", "double", /*default=*/"25e9",
           "Host<->device bandwidth per direction, bytes/s (cost model)">,
    Option<"deviceFlops", "device-flops", "double", /*default=*/"25e12",
           "Device compute throughput, FLOP/s (cost model)">,
    Option<"deviceBandwidth", "device-bandwidth", "double", /*default=*/"1.5e12",
           "Device memory bandwidth, bytes/s (cost model)">,
    Option<"target", "target", "std::string", /*default=*/"\"\"",
           "Take the cost model from a target instead of the three numbers above: "
           "a built-in GPU (h100-sxm, h100-pcie, a100-80g, a100-40g, l4, rtx-4090), "
           "host (this machine: the file offload-run --calibrate wrote, $OFFLOAD_HOST_TARGET or ~/.cache/offload/host-target.json) or FILE.json (docs/planner.md)">,
];

def HostOffload : Pass<"offload-host-offload", "::mlir::ModuleOp"> {
  let summary = "Moves saved values to host memory in forward and prefetches them for backward";
  let description = [{
    Each chosen saved value is copied to the host after its last forward
    use (`offload.to_host async`, on the device-to-host stream) and freed
    on the device once the copy completes (an `offload.wait` `wait-distance`
    ops later, at the latest when forward ends). In backward it is
    prefetched (`offload.to_device async`, on the host-to-device stream)
    and compute waits for it just before its first use. The copies overlap
    the compute in between.

    Prefetch placement: by default from the target's cost model (a roofline
    time per op from `device-flops` and `device-bandwidth`, the copy's time
    from `link-bandwidth`): the latest point from which the copy, queued
    behind earlier prefetches on the one host-to-device stream, finishes
    before the use, but never so early that the live device bytes plus the
    copy exceed the peak (so prefetching cannot raise the peak). An explicit
    `prefetch-distance=N` issues it N compute ops before the use instead.
    Each copy records the distance it got (`prefetch_distance`).

    Policies (`policy=`): `size` (saved values of at least `min-bytes`),
    `ops` (produced by the op kinds in `ops`, e.g. `ops=matmul,linear,conv2d`),
    `names` (layer glob), `all`, `marked` (saves carrying the unit attribute
    `offload.host_offload`, set by the planner or by hand). Results are bit-identical: copies move
    bytes. Prints what was offloaded.
  }];
  let options = !listconcat([
    Option<"policy", "policy", "::mlir::offload::HostOffloadPolicy",
           /*default=*/"::mlir::offload::HostOffloadPolicy::Size",
           "Which saved values to offload",
           [{::llvm::cl::values(
             clEnumValN(::mlir::offload::HostOffloadPolicy::Size, "size", "at least min-bytes"),
             clEnumValN(::mlir::offload::HostOffloadPolicy::Ops, "ops", "producers among ops="),
             clEnumValN(::mlir::offload::HostOffloadPolicy::Names, "names", "layers matching names="),
             clEnumValN(::mlir::offload::HostOffloadPolicy::All, "all", "every saved value"),
             clEnumValN(::mlir::offload::HostOffloadPolicy::Marked, "marked", "values marked offload.host_offload (the planner)"))}]>,
    Option<"minBytes", "min-bytes", "int64_t", /*default=*/"1048576",
           "Smallest saved value to offload with policy=size (bytes)">,
    ListOption<"ops", "ops", "std::string", "Producer op kinds for policy=ops">,
    Option<"names", "names", "std::string", /*default=*/"\"\"",
           "Layer glob for policy=names (required with it)">,
    Option<"waitDistance", "wait-distance", "unsigned", /*default=*/"2",
           "Compute ops after a device-to-host copy before its device buffer is released">,
    TransformReportOption,
  ], TargetModelOptions);
  let dependentDialects = ["::mlir::offload::OffloadDialect"];
}

def HostParameters : Pass<"offload-host-parameters", "::mlir::ModuleOp"> {
  let summary = "Keeps parameters, their gradients and optimizer state in host memory; the optimizer step runs on the host";
  let description = [{
    Runs after `--offload-autodiff`. Each chosen parameter argument becomes
    an `!offload.host` value, and so do its optimizer-state arguments
    (momentum buffer; AdamW's exp_avg and exp_avg_sq). The parameter is
    prefetched to the device (`offload.to_device async`) before its first
    forward use and freed after its last; for backward it is prefetched
    again, or kept on the device in between when the compute between its
    last forward and first backward use is estimated shorter than twice the
    copy (`refetch=auto`; `always` and `never` force either). Its gradient
    goes to the host as soon as it is computed (`offload.to_host async`; the
    device copy is freed `wait-distance` compute ops later), and the
    optimizer update (`offload.sgd_update` / `offload.adamw_update`) runs on
    the host over host values, in place. Returned gradients are returned
    from the host copy. The shared step counter stays on the device and is
    copied to the host once. State (batch-norm running statistics) stays on
    the device.

    Prefetch placement follows the same cost model as
    `--offload-host-offload` (see there), or `prefetch-distance=N`.

    Policies (`policy=`): `all`, `size` (parameters of at least `min-bytes`),
    `names` (glob over parameter names, e.g. `names=fc*`), `marked`
    (parameter arguments carrying the unit argument attribute
    `offload.host_parameter`, set by the planner or by hand). Results are
    bit-identical to the step without the pass: copies move bytes, and the
    host update runs the same kernel. Prints what was moved.

    Run it last among the memory passes: `--offload-recompute`,
    `--offload-split-weight-grad` and `--offload-host-offload` first (the
    copies and waits it adds hide the structure those passes look for).
  }];
  let options = !listconcat([
    Option<"policy", "policy", "::mlir::offload::HostParametersPolicy",
           /*default=*/"::mlir::offload::HostParametersPolicy::All",
           "Which parameters to keep on the host",
           [{::llvm::cl::values(
             clEnumValN(::mlir::offload::HostParametersPolicy::All, "all", "every parameter"),
             clEnumValN(::mlir::offload::HostParametersPolicy::Size, "size", "at least min-bytes"),
             clEnumValN(::mlir::offload::HostParametersPolicy::Names, "names", "parameters matching names="),
             clEnumValN(::mlir::offload::HostParametersPolicy::Marked, "marked", "parameters marked offload.host_parameter (the planner)"))}]>,
    Option<"minBytes", "min-bytes", "int64_t", /*default=*/"1048576",
           "Smallest parameter to keep on the host with policy=size (bytes)">,
    Option<"names", "names", "std::string", /*default=*/"\"\"",
           "Parameter-name glob for policy=names (required with it)">,
    Option<"refetch", "refetch", "::mlir::offload::RefetchMode",
           /*default=*/"::mlir::offload::RefetchMode::Auto",
           "Prefetch a parameter again for backward",
           [{::llvm::cl::values(
             clEnumValN(::mlir::offload::RefetchMode::Auto, "auto", "when the cost model says the copy hides"),
             clEnumValN(::mlir::offload::RefetchMode::Always, "always", "always"),
             clEnumValN(::mlir::offload::RefetchMode::Never, "never", "keep it on the device from forward"))}]>,
    Option<"waitDistance", "wait-distance", "unsigned", /*default=*/"2",
           "Compute ops after a gradient's device-to-host copy before its device buffer is released">,
    TransformReportOption,
  ], TargetModelOptions);
  let dependentDialects = ["::mlir::offload::OffloadDialect"];
}

def SliceParameters : Pass<"offload-slice-parameters", "::mlir::ModuleOp"> {
  let summary = "Splits a large linear layer's weight into row slices that are streamed one by one";
  let description = [{
    Runs on the forward step, before `--offload-autodiff`. A parameter
    weight `W : tensor<N x K>` of more than `slice-bytes` bytes that is read
    only as the weight of `offload.linear` ops (a `[num_classes x features]`
    classifier) becomes ceil(N / rows) parameter arguments of `rows =
    slice-bytes / (K * element bytes)` rows each, named `W[a:b]`, and so
    does its bias; each linear becomes one linear per slice and an
    `offload.cat` of their outputs along the last dimension. Autodiff then
    gives every slice its own gradient and update; with
    `--offload-host-parameters` every slice lives on the host and is
    prefetched while the previous one computes, and its gradient returns to
    the host slice by slice.

    Each slice argument carries `offload.slice_of` (the whole parameter's
    name) and `offload.slice = array<i64: a, b, N>` (rows [a, b) of N); the
    plan binds it to those rows of the whole tensor, so the runtime's
    parameter store and --params/--dump keep one tensor per parameter.
    Each output element and each weight-gradient element is the same dot
    product as without slicing; the input's gradient sums the slices'
    contributions one after another, so it (and what depends on it) matches
    to rounding, not bit for bit. A weight read by any other op, or with a
    bias that is not a parameter of its own, is left whole with a warning.

    Under mixed precision (after `--offload-autocast`, or in the planner's
    rebuild of a bf16-mixed/fp16-mixed step) a linear reads the weight
    through its cast (`offload.copy` to bf16/f16). A weight read only by
    such casts is sliced the same way (its f32 master into `W[a:b]` row
    slices), each slice is cast, and the readers of the cast read the
    `offload.cat` of the cast slices along rows; its bias stays whole. Each
    cast element is the same rounding of the same master element, so the
    step is bit-identical to the unsliced one; the master, its gradient and
    its optimizer state are the slices, the low-type copy is whole
    (docs/precision.md, "Weight slicing under mixed precision").
  }];
  let options = [
    Option<"sliceBytes", "slice-bytes", "int64_t", /*default=*/"67108864",
           "Largest slice of a weight (bytes); weights above it are sliced">,
    TransformReportOption,
  ];
  let dependentDialects = ["::mlir::offload::OffloadDialect"];
}

def DataParallel : Pass<"offload-data-parallel", "::mlir::ModuleOp"> {
  let summary = "Averages gradients across data-parallel ranks in buckets";
  let description = [{
    Runs after `--offload-autodiff` (and after `--offload-early-update`, if
    used), before the planner and the host-parameter passes. Groups the
    gradients that the optimizer updates read into buckets of about
    `bucket-bytes` bytes (default 25 MiB, `DistributedDataParallel`'s
    `bucket_cap_mb`) in the order backward makes them final -- a bucket
    closes once it holds at least `bucket-bytes`, as DDP's does -- and puts
    one `offload.all_reduce` per bucket right after the op that makes its
    last gradient final. The reduction runs on the communication stream;
    each update then reads its gradient's mean across ranks after an
    `offload.wait` on its own bucket's token only:

    - when the updates are still in the optimizer phase, the wait is right
      before the first update of the bucket (every reduction overlaps the
      rest of backward);
    - when `--offload-early-update` moved them into backward, the wait is
      right after the next bucket's reduction is issued (or at the end of
      backward for the last bucket) and the bucket's updates follow it: one
      bucket's reduction overlaps the computation of the next bucket's
      gradients.

    The bucket's results are new buffers (the memory plan counts them). The
    step's world size is the runtime's; with one rank the results are bit
    for bit those of the step without this pass. Errors: a gradient on the
    host (run this pass before `--offload-host-parameters`), an fp16
    loss-scaled update (`skip_if`: its overflow flag would differ between
    ranks), `bucket-bytes` < 1.

    `zero=1 world-size=W` (off by default) shards the optimizer state
    across the W ranks (ZeRO stage 1, Rajbhandari et al., 2020): a bucket
    holds updates of one kind and hyperparameters only; its gradients are
    reduce-scattered (`offload.reduce_scatter`: the mean of the bucket
    flattened end to end and zero-padded to a multiple of W, of which each
    rank keeps its own 1/W, together with the same slice of the
    parameters); one update runs on that flat shard with optimizer state
    that exists only for it (step arguments/results `zero1.bucketK.<state>`,
    1-D, ceil(n/W) elements: each rank's own shard); `offload.all_gather`
    then rebuilds the full parameters from every rank's updated shard,
    waited for at the end of the step. The world size is fixed at compile
    time (the runtime refuses another). Refused with zero=1: world-size < 1.
    With micro-batches the reduce-scatter follows the last micro-batch's
    accumulated gradients; with early updates a bucket's flat update follows
    the next bucket's reduce-scatter, as the all-reduce's updates do.

    Example: `offload-opt --offload-autodiff="optimizer=sgd" --offload-data-parallel="bucket-bytes=26214400"`
  }];
  let options = [
    Option<"bucketBytes", "bucket-bytes", "int64_t", "26214400",
           "Bytes of gradients per bucket (a bucket closes at or above it; DDP's default 25 MiB)">,
    Option<"zero", "zero", "int64_t", "0",
           "ZeRO stage: 0 (off, every rank keeps all optimizer state) or 1 (optimizer state sharded across world-size ranks)">,
    Option<"worldSize", "world-size", "int64_t", "0",
           "Ranks of the job, needed by zero=1 (the plan then runs only at this world size)">,
    TransformReportOption,
  ];
  let dependentDialects = ["::mlir::offload::OffloadDialect"];
  let statistics = [
    Statistic<"numBuckets", "buckets", "Gradient buckets reduced across ranks">,
  ];
}

def EarlyUpdate : Pass<"offload-early-update", "::mlir::ModuleOp"> {
  let summary = "Runs each optimizer update as soon as its gradient is final";
  let description = [{
    Runs after `--offload-autodiff` (and after `--offload-split-weight-grad`,
    if used). Autodiff puts every `offload.sgd_update` /
    `offload.adamw_update` in the optimizer phase, after all of backward, so
    every gradient is alive at the end of backward together with the
    parameters and optimizer state. This pass moves each update up to right
    after the last op it depends on: the producer of its gradient (and of
    any other operand), the last other reader of its parameter (the update
    writes the new parameter in place over it, so it must come after the
    backward ops that still read the old one), and the `offload.wait` of any
    async copy that reads or writes those values. The gradient then dies as
    soon as it is final -- the same trick PyTorch documents as fusing the
    optimizer step into backward (`register_post_accumulate_grad_hook`).

    Results are bit-identical: the same ops run on the same operands; only
    their order changes. The update ops stay in backward; the `optimizer`
    phase marker remains (and may end up empty).

    Example: `offload-opt --offload-autodiff="optimizer=sgd momentum=0.9" --offload-early-update`
  }];
  let options = [
    TransformReportOption,
  ];
  let dependentDialects = ["::mlir::offload::OffloadDialect"];
  let statistics = [
    Statistic<"numMoved", "updates-moved", "Optimizer updates moved into backward">,
  ];
}

def PlanMemory : Pass<"offload-plan-memory", "::mlir::ModuleOp"> {
  let summary = "Meets a device-memory budget in bytes: decides keep, recompute, offload and host placement";
  let description = [{
    The planner. Runs after `--offload-autodiff`, on the step as autodiff
    built it, and rewrites it so that its device arena (the lowered plan's
    device memory, fragmentation included, plus the target's workspace) is
    at most `budget` bytes, at the least simulated step time on `target`:

    * optimizer updates run as soon as their gradient is final
      (`--offload-early-update`), when the unplanned step does not fit;
    * each saved value is kept, recomputed in backward (a recompute region,
      chained through other recomputed values; `--offload-recompute`
      policy=marked) or offloaded to the host and prefetched
      (`--offload-host-offload` policy=marked);
    * each parameter stays on the device, or moves to the host with its
      gradient and optimizer state, its update running on the host
      (`--offload-host-parameters` policy=marked);
    * when no plan fits that way (`slice=auto`), linear weights too large
      to stream whole are cut into row slices (`--offload-slice-parameters`,
      which runs on the forward step: the planner rebuilds the step from
      its forward with the autodiff options recorded in `offload.autodiff`,
      after checking that the rebuild gives back the step exactly), each
      slice a parameter of its own, trying slice sizes from the largest
      power of two below the largest weight down to 64 KiB and keeping the
      first that fits.

    Decisions are greedy at the peak: while the live device bytes exceed the
    budget, of the candidates that would free bytes at the peak program
    point, take the one with the least added seconds per byte freed
    (recompute: the roofline time of the ops it reruns; offload: the copy
    time the link cannot hide, from the copies already chosen and the
    compute they overlap; host parameters: the host update plus unhidden
    copies). The rewritten step's real memory plan is then checked; when
    fragmentation or prefetch placement leaves it above the budget, the
    planner aims lower and adds decisions until it fits. When nothing fits,
    it fails with the smallest device arena it can reach, what is live at
    that arena's peak, and the budget to ask for; the module is then not
    written.

    Reports the decisions as one table (value or parameter, bytes,
    decision, added seconds, why) and a summary with the simulated step
    time on the target (docs/planner.md), with `report=-` (stderr) or
    `report=FILE`; off by default.

    Example:
    `offload-opt step.mlir --offload-autodiff="optimizer=sgd momentum=0.9" --offload-plan-memory="budget=12GiB target=h100-sxm"`
  }];
  let options = [
    Option<"budget", "budget", "std::string", /*default=*/"\"\"",
           "Device memory for the step: bytes, or a number with KiB, MiB, GiB, TiB "
           "(powers of 1024) or kB, MB, GB, TB (powers of 1000); default: the "
           "target's memory">,
    Option<"savedBudget", "saved-budget", "std::string", /*default=*/"\"\"",
           "Also bound the saved bytes: the saved values left on the device "
           "(neither recomputed nor offloaded) plus the checkpoints saved, at "
           "most these bytes (units as for budget; 0 allowed), or P% of the "
           "step's saved bytes (PyTorch's activation_memory_budget=0.5 is 50%); the "
           "device arena must still fit budget. Recompute regions' "
           "intermediates and values held by shared regions are not saved "
           "bytes. Default: no saved budget">,
    Option<"target", "target", "std::string", /*default=*/"\"h100-sxm\"",
           "The GPU planned for: h100-sxm, h100-pcie, a100-80g, a100-40g, l4, "
           "rtx-4090, host (this machine: the file offload-run --calibrate wrote, $OFFLOAD_HOST_TARGET or ~/.cache/offload/host-target.json) or FILE.json (docs/planner.md)">,
    JsonReportOption<"\"\"">,
    Option<"timelineFile", "timeline", "std::string", /*default=*/"\"\"",
           "Also write the memory timeline (live device bytes per program point "
           "by category, unplanned and planned, with the budget) as JSON to this "
           "file; python/plot_memory_timeline.py draws it">,
    Option<"problemFile", "problem", "std::string", /*default=*/"\"\"",
           "Also write the decision problem the planner solved (live-bytes "
           "profile, every candidate's options with seconds and freed byte "
           "ranges, the decisions taken) as JSON, for the exact oracle in "
           "bench/planner/oracle.py">,
    Option<"decisionsFile", "decisions", "std::string", /*default=*/"\"\"",
           "Replay: take every decision from this JSON file (an "
           "offload-plan-decisions file naming candidates by their index and "
           "name in the problem= file of the same step, as "
           "bench/planner/oracle.py writes for its optimum) instead of "
           "searching, and build and check that plan; an error when it does "
           "not fit the budget, naming its arena">,
    Option<"reportKept", "report-kept", "bool", /*default=*/"false",
           "Also list the saved values and parameters that stay as they are">,
    Option<"checkpoints", "checkpoints", "bool", /*default=*/"true",
           "Also decide checkpoints beyond the saved values: forward values "
           "autodiff did not save, saved where that lets recompute regions "
           "stop there (as PyTorch's min-cut partitioner may save any "
           "intermediate); false: the saved values only">,
    Option<"restarts", "restarts", "unsigned", /*default=*/"4",
           "Randomised restarts of the greedy on a step of up to 2,048 program "
           "points: the fastest run once more per restart, with every "
           "candidate's price scaled by a factor in [0.75, 1.25] drawn from "
           "the restart's fixed seed (plans reproduce); a plan kept where it "
           "simulates faster. 0: none">,
    Option<"waitDistance", "wait-distance", "unsigned", /*default=*/"2",
           "Compute ops after a device-to-host copy before its device buffer is "
           "released (passed to the host-offload passes)">,
    Option<"slice", "slice", "::mlir::offload::PlanSlicing",
           /*default=*/"::mlir::offload::PlanSlicing::Auto",
           "Slice large linear weights into rows when no plan fits without it",
           [{::llvm::cl::values(
             clEnumValN(::mlir::offload::PlanSlicing::Auto, "auto",
                        "when nothing else fits: the largest slice size that fits"),
             clEnumValN(::mlir::offload::PlanSlicing::Never, "never",
                        "never (the step as autodiff built it)"))}]>,
  ];
  let dependentDialects = ["::mlir::offload::OffloadDialect"];
  let statistics = [
    Statistic<"numRecomputed", "recomputed-values", "Saved values recomputed">,
    Statistic<"numOffloaded", "offloaded-values", "Saved values offloaded to the host">,
    Statistic<"numHostParameters", "host-parameters", "Parameters kept on the host">,
    Statistic<"numSlicedWeights", "sliced-weights", "Weights sliced into rows (slice=auto)">,
  ];
}

#endif // OFFLOAD_PASSES_TD
