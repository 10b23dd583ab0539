//===- Session.cpp - Plan execution sessions ------------------------------===//
//
// Part of offload. Bindings, step orchestration and the atomic commit: a step
// uploads the store's committed values, runs, downloads every output binding
// and only then writes new parameter/state values back to the store.
//
//===----------------------------------------------------------------------===//

#include "Executor.h"

#include "offload/Runtime/Communicator.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>

using namespace offload::rt;

static bool isStoreRole(BufferRole r) {
  return r == BufferRole::Parameter || r == BufferRole::State ||
         r == BufferRole::OptimizerState;
}

/// The name a binding's value is bound under: the whole tensor's for a
/// slice binding.
static const std::string &boundName(const BindingDesc &b) {
  return b.sliceOf.empty() ? b.name : b.sliceOf;
}

/// The shape of the value bound under boundName(b).
static const std::vector<int64_t> &boundShape(const PlanData &d,
                                              const BindingDesc &b) {
  return b.sliceOf.empty() ? d.buffers[size_t(b.buffer)].shape : b.wholeShape;
}

std::vector<std::string> offload::rt::availableBackends() {
  std::vector<std::string> out{"host"};
  if (createCudaDevice())
    out.push_back("cuda");
  return out;
}

/// A backend's device by name (not opened).
static Expected<std::unique_ptr<Device>> makeDevice(const std::string &name) {
  if (name == "host")
    return createHostDevice();
  if (name == "cuda") {
    std::unique_ptr<Device> be = createCudaDevice();
    if (!be)
      return Status::error("backend 'cuda' is not available: this runtime "
                           "was built without CUDA (OFFLOAD_ENABLE_CUDA)");
    return std::move(be);
  }
  return Status::error("unknown backend '" + name +
                       "' (expected host or cuda)");
}

Expected<std::vector<std::string>>
offload::rt::backendOps(const std::string &backend) {
  auto be = makeDevice(backend);
  if (!be)
    return be.status();
  std::vector<std::string> ops = (*be)->ops();
  std::sort(ops.begin(), ops.end());
  return ops;
}

Expected<std::vector<std::string>>
offload::rt::missingOps(const Plan &plan, const std::string &backend) {
  auto be = makeDevice(backend);
  if (!be)
    return be.status();
  return (*be)->missingOps(plan.data());
}

namespace {
/// What every rank of a data-parallel job must agree on, as named numbers:
/// the first that differs between two ranks names the difference.
struct PlanFingerprint {
  static constexpr int kFields = 7;
  static const char *name(int k) {
    static const char *const names[kFields] = {
        "instructions",
        "buffers",
        "device arena bytes (a different budget?)",
        "host arena bytes",
        "gradient buckets (offload.all_reduce; a different bucket-bytes?)",
        "bytes reduced per step",
        "hash of the ops, buffer shapes and bindings"};
    return names[k];
  }
  uint64_t v[kFields] = {};

  static uint64_t fnv(uint64_t h, const void *p, size_t n) {
    // FNV-1a, 64 bits (Fowler, Noll, Vo; IETF draft-eastlake-fnv).
    const auto *b = static_cast<const uint8_t *>(p);
    for (size_t k = 0; k < n; ++k)
      h = (h ^ b[k]) * 1099511628211ULL;
    return h;
  }
  static uint64_t fnv(uint64_t h, const std::string &s) {
    return fnv(h, s.data(), s.size() + 1);
  }
  static PlanFingerprint of(const PlanData &d) {
    PlanFingerprint f;
    f.v[0] = d.instructions.size();
    f.v[1] = d.buffers.size();
    f.v[2] = d.deviceCapacity;
    f.v[3] = d.hostCapacity;
    uint64_t h = 14695981039346656037ULL;
    for (const InstructionDesc &in : d.instructions) {
      h = fnv(h, in.op);
      if (in.op == kOpAllReduce || in.op == kOpReduceScatter) {
        ++f.v[4];
        size_t n = in.op == kOpAllReduce ? in.inputs.size() : in.inputs.size() / 2;
        for (int id : std::vector<int>(in.inputs.begin(), in.inputs.begin() + long(n)))
          f.v[5] += d.buffers[size_t(id)].dataBytes();
      }
    }
    for (const BufferDesc &b : d.buffers) {
      h = fnv(h, &b.dtype, sizeof(b.dtype));
      h = fnv(h, b.shape.data(), b.shape.size() * sizeof(int64_t));
    }
    for (const BindingDesc &b : d.bindings)
      h = fnv(h, b.name);
    f.v[6] = h;
    return f;
  }
  std::string bytes() const {
    return std::string(reinterpret_cast<const char *>(v), sizeof(v));
  }
};

/// Refuses a job whose ranks run different plans, naming the first
/// difference from rank 0's.
Status checkSamePlan(const PlanData &d, Communicator &comm) {
  PlanFingerprint mine = PlanFingerprint::of(d);
  auto all = comm.allGather(mine.bytes(), "the plan check before the first "
                                          "step (an all-gather)");
  if (!all)
    return all.status();
  PlanFingerprint first;
  std::memcpy(first.v, (*all)[0].data(), sizeof(first.v));
  for (int r = 1; r < comm.worldSize(); ++r) {
    PlanFingerprint other;
    std::memcpy(other.v, (*all)[size_t(r)].data(), sizeof(other.v));
    // Every field that differs, so that the cause shows (a budget moves
    // the arena; bucket-bytes the buckets; a model everything).
    std::string diffs;
    for (int k = 0; k < PlanFingerprint::kFields; ++k)
      if (other.v[k] != first.v[k])
        diffs += (diffs.empty() ? "" : ", ") + std::string(PlanFingerprint::name(k)) +
                 " " + std::to_string(other.v[k]) + " against " +
                 std::to_string(first.v[k]);
    if (!diffs.empty())
      return Status::error("data parallel: rank " + std::to_string(r) +
                           " runs a different plan from rank 0's: " + diffs +
                           "; every rank must run the same plan (same model, "
                           "options and budget)");
  }
  return Status::success();
}
} // namespace

Expected<std::unique_ptr<Session>>
Session::create(std::shared_ptr<const Plan> plan, const std::string &backend,
                const SessionOptions &options,
                std::shared_ptr<ParameterStore> store) {
  if (!plan)
    return Status::error("Session::create: null plan");
  auto made = makeDevice(backend);
  if (!made)
    return made.status();
  auto ex = std::make_unique<Executor>(made.take());
  if (!std::isfinite(options.emulatedLinkBytesPerSecond) ||
      options.emulatedLinkBytesPerSecond < 0)
    return Status::error(
        "SessionOptions::emulatedLinkBytesPerSecond must be a finite number "
        ">= 0 (bytes per second, 0 = off), got " +
        std::to_string(options.emulatedLinkBytesPerSecond));
  if (options.emulatedLinkBytesPerSecond > 0 &&
      std::string(ex->name()) != "host")
    return Status::error("an emulated link (SessionOptions::"
                         "emulatedLinkBytesPerSecond) is a host backend "
                         "option; the " +
                         std::string(ex->name()) + " backend has a real one");
  if (options.checkRaces)
    if (Status s = checkPlanRaces(plan->data()); !s.ok())
      return s;
  // A ZeRO-1 plan (offload.reduce_scatter / offload.all_gather) was built
  // for one world size: its shards are 1/W of each bucket.
  {
    int ranks = options.communicator ? options.communicator->worldSize() : 1;
    const PlanData &d = plan->data();
    for (size_t i = 0; i < d.instructions.size(); ++i) {
      const InstructionDesc &in = d.instructions[i];
      if (in.op != kOpReduceScatter && in.op != kOpAllGather)
        continue;
      int64_t w = in.attrs.getInt("world_size", 0);
      if (w != ranks)
        return Status::error(
            "data parallel: this plan shards optimizer state (ZeRO-1, " +
            instructionName(d, int(i)) + ") for world size " + std::to_string(w) +
            ", but the job has " + std::to_string(ranks) + " rank" + (ranks == 1 ? "" : "s") +
            "; rebuild it with --offload-data-parallel=\"zero=1 world-size=" +
            std::to_string(ranks) + "\" or run it with " + std::to_string(w) + " ranks");
    }
  }
  registerAllHostKernels();
  if (Status s = ex->init(plan, options); !s.ok())
    return s.withContext(std::string(ex->name()) + " backend: ");
  if (options.communicator && options.communicator->worldSize() > 1)
    if (Status s = checkSamePlan(plan->data(), *options.communicator); !s.ok())
      return s;
  std::unique_ptr<Session> session(new Session());
  session->plan_ = std::move(plan);
  session->store_ =
      store ? std::move(store) : std::make_shared<ParameterStore>();
  session->executor_ = std::move(ex);
  session->options_ = options;
  return session;
}

Session::~Session() = default;

const char *Session::backendName() const { return executor_->name(); }

uint64_t Session::sliceBytesOut(const std::string &whole) const {
  uint64_t total = 0;
  for (const BindingDesc &b : plan_->data().bindings)
    if (b.direction == BindingDirection::Out && b.sliceOf == whole)
      total += plan_->data().buffers[size_t(b.buffer)].dataBytes();
  return total;
}

int Session::findInput(const std::string &name) const {
  const PlanData &d = plan_->data();
  for (size_t k = 0; k < d.bindings.size(); ++k)
    if (d.bindings[k].direction == BindingDirection::In &&
        boundName(d.bindings[k]) == name)
      return int(k);
  return -1;
}

Status Session::inputType(const std::string &name, DType &dtype,
                          std::vector<int64_t> &shape) const {
  int k = findInput(name);
  if (k < 0) {
    std::string names;
    for (const auto &b : inputBindings())
      names += (names.empty() ? "" : ", ") + b.first;
    return Status::error("no input binding named '" + name +
                         "' (the plan binds: " + names + ")");
  }
  const BindingDesc &bd = plan_->data().bindings[size_t(k)];
  dtype = plan_->data().buffers[size_t(bd.buffer)].dtype;
  shape = boundShape(plan_->data(), bd);
  return Status::success();
}

Status Session::bindZeros(const std::string &name) {
  DType dt;
  std::vector<int64_t> shape;
  if (Status s = inputType(name, dt, shape); !s.ok())
    return s;
  return bind(name, Tensor(dt, shape));
}

Status Session::bind(const std::string &name, Tensor value) {
  DType dt;
  std::vector<int64_t> shape;
  if (Status s = inputType(name, dt, shape); !s.ok())
    return s;
  const BindingDesc &bd = plan_->data().bindings[size_t(findInput(name))];
  if (!value.sameTypeAndShape(dt, shape))
    return Status::error("binding '" + name + "' expects " +
                         typeString(dt, shape) + ", got " +
                         typeString(value.dtype(), value.shape()));
  if (isStoreRole(bd.role)) {
    // The store owns its values (a commit may write them in place).
    if (value.borrowed())
      value = Tensor(static_cast<const Tensor &>(value));
    store_->set(name, std::move(value));
  } else {
    inputs_[name] = std::move(value);
  }
  return Status::success();
}

std::vector<std::pair<std::string, BufferRole>> Session::inputBindings() const {
  std::vector<std::pair<std::string, BufferRole>> out;
  std::set<std::string> seen;
  for (const BindingDesc &b : plan_->data().bindings)
    if (b.direction == BindingDirection::In && seen.insert(boundName(b)).second)
      out.push_back({boundName(b), b.role});
  return out;
}

std::vector<std::string> Session::missingBindings() const {
  std::vector<std::string> out;
  for (const auto &[name, role] : inputBindings()) {
    bool have = isStoreRole(role) ? store_->has(name) : inputs_.count(name) != 0;
    if (!have)
      out.push_back(name);
  }
  return out;
}

Status Session::beginStep() {
  if (active_)
    return Status::error("a step is already active");
  std::vector<std::string> missing = missingBindings();
  if (!missing.empty()) {
    std::string list;
    for (const std::string &m : missing)
      list += (list.empty() ? "" : ", ") + m;
    return Status::error("missing bindings: " + list);
  }
  const PlanData &d = plan_->data();
  // Check store values (the store may be shared and set directly).
  for (const BindingDesc &bd : d.bindings) {
    if (bd.direction != BindingDirection::In)
      continue;
    const std::string &name = boundName(bd);
    const Tensor *t =
        isStoreRole(bd.role) ? store_->get(name) : &inputs_.at(name);
    const BufferDesc &b = d.buffers[size_t(bd.buffer)];
    if (!t->sameTypeAndShape(b.dtype, boundShape(d, bd)))
      return Status::error("binding '" + name + "' expects " +
                           typeString(b.dtype, boundShape(d, bd)) +
                           ", the store has " +
                           typeString(t->dtype(), t->shape()));
  }
  stepStart_ = steadySeconds();
  runSeconds_ = 0;
  // Outputs left in the arena by the last step are overwritten from here.
  inArena_.clear();
  if (Status s = executor_->beginStep(); !s.ok())
    return s;
  active_ = true;
  next_ = 0;
  auto fail = [&](Status s) {
    abortStep();
    return s;
  };
  for (const ConstantDesc &c : d.constants)
    if (Status s = executor_->write(c.buffer, c.data.data(), c.data.size());
        !s.ok())
      return fail(s);
  for (size_t k = 0; k < d.bindings.size(); ++k) {
    const BindingDesc &bd = d.bindings[k];
    if (bd.direction != BindingDirection::In)
      continue;
    const std::string &name = boundName(bd);
    // Already in the arena (committed in place by the previous step)?
    auto res = resident_.find(int(k));
    if (res != resident_.end() && res->second == store_->version(name) &&
        executor_->keepsBuffersBetweenSteps())
      continue;
    const Tensor *t =
        isStoreRole(bd.role) ? store_->get(name) : &inputs_.at(name);
    // A slice binding takes its bytes of the whole tensor.
    const uint8_t *src =
        static_cast<const uint8_t *>(t->data()) + bd.sliceOffset;
    size_t bytes = bd.sliceOf.empty()
                       ? t->byteSize()
                       : d.buffers[size_t(bd.buffer)].dataBytes();
    if (Status s = executor_->write(bd.buffer, src, bytes); !s.ok())
      return fail(s.withContext("binding '" + bd.name + "': "));
  }
  return Status::success();
}

Status Session::runTo(int end) {
  if (end <= next_)
    return Status::success();
  double t0 = steadySeconds();
  Status s = executor_->run(next_, end);
  runSeconds_ += steadySeconds() - t0;
  if (!s.ok()) {
    abortStep();
    return s.withContext("step failed, parameters and state unchanged: ");
  }
  next_ = end;
  return Status::success();
}

Status Session::runPhase(const std::string &name) {
  int p = plan_->findPhase(name);
  if (p < 0) {
    std::string names;
    for (const PhaseDesc &ph : plan_->data().phases)
      names += (names.empty() ? "" : ", ") + ph.name;
    return Status::error("plan has no phase '" + name + "' (phases: " +
                         (names.empty() ? "none" : names) + ")");
  }
  if (!active_)
    if (Status s = beginStep(); !s.ok())
      return s;
  const PhaseDesc &ph = plan_->data().phases[size_t(p)];
  if (ph.last <= next_ && ph.last > ph.first)
    return Status::error("phase '" + name +
                         "' already ran in this step (phases run in plan "
                         "order)");
  return runTo(ph.last);
}

Status Session::finishStep() {
  if (!active_)
    return Status::error("no active step");
  const PlanData &d = plan_->data();
  if (Status s = runTo(int(d.instructions.size())); !s.ok())
    return s;
  auto failRead = [&](const Status &s, const BindingDesc &bd) {
    abortStep();
    return s.withContext("reading output '" + bd.name + "': ");
  };
  // Outputs that are not store values: copied into tensors of the session
  // when retained, else left in the arena (readOutput reads them there).
  std::map<std::string, Tensor> outs;
  std::set<std::string> inArena;
  for (const BindingDesc &bd : d.bindings) {
    if (bd.direction != BindingDirection::Out || isStoreRole(bd.role))
      continue;
    const std::string &name = boundName(bd);
    if (!options_.retainOutputs && name != "loss") {
      inArena.insert(name);
      continue;
    }
    const BufferDesc &b = d.buffers[size_t(bd.buffer)];
    auto it = outs.find(name);
    if (it == outs.end())
      it = outs.emplace(name, Tensor(b.dtype, boundShape(d, bd))).first;
    if (Status s = executor_->read(
            bd.buffer, static_cast<uint8_t *>(it->second.data()) + bd.sliceOffset,
            b.dataBytes());
        !s.ok())
      return failRead(s, bd);
  }
  // New parameters, state and optimizer state.
  std::set<std::string> committed;
  if (executor_->outputReadsCannotFail()) {
    // Straight into the store's tensors: check every read first, so that
    // none of them can fail once the first byte of the store is written.
    for (const BindingDesc &bd : d.bindings)
      if (bd.direction == BindingDirection::Out && isStoreRole(bd.role))
        if (Status s = executor_->read(bd.buffer, nullptr, 0); !s.ok())
          return failRead(s, bd);
    executor_->endStep();
    active_ = false;
    spare_.clear();
    std::string internal;
    for (const BindingDesc &bd : d.bindings) {
      if (bd.direction != BindingDirection::Out || !isStoreRole(bd.role))
        continue;
      const std::string &name = boundName(bd);
      const BufferDesc &b = d.buffers[size_t(bd.buffer)];
      Tensor *t = store_->mutableValue(name);
      if (!t || !t->sameTypeAndShape(b.dtype, boundShape(d, bd))) {
        // Another session rebound the name since this step began: the new
        // value replaces it.
        store_->set(name, Tensor(b.dtype, boundShape(d, bd)));
        t = store_->mutableValue(name);
      }
      if (Status s = executor_->readAfterStep(
              bd.buffer, 0, static_cast<uint8_t *>(t->data()) + bd.sliceOffset,
              b.dataBytes());
          !s.ok() && internal.empty())
        internal = "reading output '" + bd.name + "': " + s.message();
      committed.insert(name);
    }
    for (const std::string &name : committed)
      store_->touch(name);
    if (!internal.empty())
      return Status::error("internal error after the step's reads were "
                           "checked, the parameter store may be partly "
                           "updated: " +
                           internal);
  } else {
    // Backends whose reads may fail (CUDA): into spare tensors (those the
    // last commit replaced), then swapped into the store.
    std::map<std::string, Tensor> fresh;
    for (const BindingDesc &bd : d.bindings) {
      if (bd.direction != BindingDirection::Out || !isStoreRole(bd.role))
        continue;
      const std::string &name = boundName(bd);
      const BufferDesc &b = d.buffers[size_t(bd.buffer)];
      auto it = fresh.find(name);
      if (it == fresh.end()) {
        // Slices are assembled into the whole tensor: the one the last
        // commit replaced when the plan's slices cover all of it, else
        // zeros.
        Tensor t;
        auto sp = spare_.find(name);
        if (sp != spare_.end() &&
            sp->second.sameTypeAndShape(b.dtype, boundShape(d, bd)) &&
            (bd.sliceOf.empty() ||
             sliceBytesOut(name) == sp->second.byteSize()) &&
            executor_->isHostTensor(sp->second))
          t = std::move(sp->second);
        else
          t = executor_->hostTensor(b.dtype, boundShape(d, bd));
        it = fresh.emplace(name, std::move(t)).first;
      }
      if (Status s = executor_->read(
              bd.buffer,
              static_cast<uint8_t *>(it->second.data()) + bd.sliceOffset,
              b.dataBytes());
          !s.ok())
        return failRead(s, bd);
    }
    executor_->endStep();
    active_ = false;
    // Commit: nothing below can fail. New values move into the store (no
    // copy); output() reads them from there.
    spare_.clear();
    for (auto &e : fresh) {
      spare_[e.first] = store_->exchange(e.first, std::move(e.second));
      committed.insert(e.first);
    }
  }
  committed_ = std::move(committed);
  resident_.clear();
  // Values (and slices) updated in place: their input buffer now holds what
  // was committed.
  for (const BindingDesc &bd : d.bindings) {
    if (bd.direction != BindingDirection::Out || !committed_.count(boundName(bd)))
      continue;
    int in = plan_->findBinding(bd.name, BindingDirection::In);
    if (in >= 0 && d.bindings[size_t(in)].buffer == bd.buffer &&
        d.bindings[size_t(in)].sliceOffset == bd.sliceOffset &&
        d.bindings[size_t(in)].sliceOf == bd.sliceOf)
      resident_[in] = store_->version(boundName(bd));
  }
  outputs_ = std::move(outs);
  inArena_ = std::move(inArena);
  succeeded_ = true;
  lastStepSeconds_ = steadySeconds() - stepStart_;
  lastRunSeconds_ = runSeconds_;
  return Status::success();
}

void Session::abortStep() {
  // The arena's bytes are no longer known.
  resident_.clear();
  if (!active_)
    return;
  executor_->endStep();
  active_ = false;
}

Status Session::step() {
  if (Status s = beginStep(); !s.ok())
    return s;
  return finishStep();
}

Expected<Tensor> Session::output(const std::string &name) const {
  auto it = outputs_.find(name);
  if (it != outputs_.end())
    return it->second;
  if (committed_.count(name) && store_->get(name))
    return *store_->get(name);
  DType dt;
  std::vector<int64_t> shape;
  if (Status s = outputType(name, dt, shape); !s.ok())
    return s;
  Tensor t(dt, shape);
  if (Status s = readOutput(name, 0, t.data(), t.byteSize()); !s.ok())
    return s;
  return t;
}

Status Session::outputType(const std::string &name, DType &dtype,
                           std::vector<int64_t> &shape) const {
  const PlanData &d = plan_->data();
  for (const BindingDesc &b : d.bindings)
    if (b.direction == BindingDirection::Out && boundName(b) == name) {
      dtype = d.buffers[size_t(b.buffer)].dtype;
      shape = boundShape(d, b);
      return Status::success();
    }
  return Status::error("no output binding named '" + name + "'");
}

Status Session::readOutput(const std::string &name, uint64_t offset,
                           void *dst, size_t bytes) const {
  DType dt;
  std::vector<int64_t> shape;
  if (Status s = outputType(name, dt, shape); !s.ok())
    return s;
  uint64_t total = 1;
  for (int64_t n : shape)
    total *= uint64_t(n);
  total *= dtypeSize(dt);
  if (offset > total || bytes > total - offset)
    return Status::error("output '" + name + "' has " + std::to_string(total) +
                         " bytes; bytes [" + std::to_string(offset) + ", " +
                         std::to_string(offset + bytes) +
                         ") are outside it");
  const Tensor *held = nullptr;
  auto it = outputs_.find(name);
  if (it != outputs_.end())
    held = &it->second;
  else if (committed_.count(name))
    held = store_->get(name);
  if (held) {
    if (bytes)
      std::memcpy(dst, static_cast<const uint8_t *>(held->data()) + offset,
                  bytes);
    return Status::success();
  }
  if (!inArena_.count(name)) {
    if (!options_.retainOutputs && succeeded_)
      return Status::error(
          "output '" + name +
          "' of the last successful step is no longer available: the "
          "session does not retain outputs (SessionOptions::retainOutputs "
          "is false) and a step has started since");
    return Status::error("output '" + name +
                         "' has no value: no step has succeeded yet");
  }
  // Where the step left it: the bytes of each binding (the whole tensor,
  // or its slices) that overlap the range.
  const PlanData &d = plan_->data();
  uint8_t *out = static_cast<uint8_t *>(dst);
  for (const BindingDesc &b : d.bindings) {
    if (b.direction != BindingDirection::Out || boundName(b) != name)
      continue;
    uint64_t first = b.sliceOffset,
             last = first + d.buffers[size_t(b.buffer)].dataBytes();
    uint64_t lo = std::max(first, offset), hi = std::min(last, offset + bytes);
    if (lo >= hi)
      continue;
    if (Status s = executor_->readAfterStep(b.buffer, lo - first,
                                           out + (lo - offset), size_t(hi - lo));
        !s.ok())
      return s.withContext("reading output '" + name + "': ");
  }
  return Status::success();
}

const Tensor *Session::outputTensor(const std::string &name) const {
  auto it = outputs_.find(name);
  if (it != outputs_.end())
    return &it->second;
  return committed_.count(name) ? store_->get(name) : nullptr;
}

const Tensor *Session::input(const std::string &name) const {
  auto it = inputs_.find(name);
  return it == inputs_.end() ? nullptr : &it->second;
}

uint64_t Session::heldTensorBytes() const {
  uint64_t n = 0;
  for (const auto &e : inputs_)
    n += e.second.borrowed() ? 0 : e.second.byteSize();
  for (const auto &e : outputs_)
    n += e.second.byteSize();
  return n;
}

std::vector<std::string> Session::outputNames() const {
  std::vector<std::string> out;
  std::set<std::string> seen;
  for (const BindingDesc &b : plan_->data().bindings)
    if (b.direction == BindingDirection::Out && seen.insert(boundName(b)).second)
      out.push_back(boundName(b));
  return out;
}

Expected<double> Session::loss() const {
  Expected<Tensor> t = output("loss");
  if (!t)
    return t.status();
  if (t->numel() != 1)
    return Status::error("output 'loss' has " + std::to_string(t->numel()) +
                         " elements, expected 1");
  return t->at(0);
}

uint64_t Session::measuredPeakDeviceBytes() const {
  return executor_->peakDeviceBytes();
}

std::array<double, NumStreams> Session::streamBusySeconds() const {
  return executor_->busySeconds();
}

const std::vector<double> &Session::instructionSeconds() const {
  return executor_->instructionSeconds();
}

double Session::commComputeOverlapSeconds() const {
  return executor_->commComputeOverlapSeconds();
}

double Session::copyComputeOverlapSeconds() const {
  return executor_->copyComputeOverlapSeconds();
}
