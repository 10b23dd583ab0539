//===- GlooCommunicator.cpp - Collectives over gloo's TCP transport -------===//
//
// Part of offload. Communicator.h over Debian's libgloo (0.0~git20220518,
// the gloo of PyTorch's gloo backend): rendezvous through gloo's FileStore, a full mesh of TCP pairs, and gloo's ring all-reduce and
// all-gather with its timeouts. gloo reports errors by exceptions
// (gloo::Exception and its IoException, TimeoutException); they are caught
// here and become Status errors.
//
//===----------------------------------------------------------------------===//

#include "offload/Runtime/Communicator.h"
#include "Device.h"

#include <gloo/allgather.h>
#include <gloo/allreduce.h>
#include <gloo/math.h>
#include <gloo/rendezvous/context.h>
#include <gloo/rendezvous/file_store.h>
#include <gloo/transport/tcp/device.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <csignal>
#include <dirent.h>
#include <sys/stat.h>
#include <thread>
#include <unistd.h>

using namespace offload::rt;

namespace {

std::chrono::milliseconds millis(double seconds) {
  return std::chrono::milliseconds(int64_t(seconds * 1000.0));
}

class GlooCommunicator final : public Communicator {
public:
  /// `probeBase`: the path prefix, in the rendezvous directory, of the
  /// directories in which the ranks that saw a collective fail meet to name
  /// those that did not (failure()).
  GlooCommunicator(std::shared_ptr<gloo::Context> ctx, double timeout,
                   std::string probeBase)
      : ctx_(std::move(ctx)), timeout_(timeout),
        probeBase_(std::move(probeBase)) {}
  int rank() const override { return ctx_->rank; }
  int worldSize() const override { return ctx_->size; }
  const char *engine() const override { return "gloo"; }
  double timeoutSeconds() const override { return timeout_; }

  Status allReduceMean(const std::vector<TensorView> &in,
                       const std::vector<TensorView> &out,
                       const std::string &what) override {
    if (in.size() != out.size())
      return Status::error(what + ": " + std::to_string(in.size()) +
                           " inputs for " + std::to_string(out.size()) +
                           " outputs");
    for (size_t i = 0; i < in.size(); ++i) {
      const TensorView &a = in[i], &b = out[i];
      if (a.dtype != b.dtype || a.numel() != b.numel() ||
          (a.dtype != DType::F32 && a.dtype != DType::F64))
        return Status::error(what + ": gradient " + std::to_string(i) +
                             " is " + dtypeName(a.dtype) +
                             "; the mean across ranks takes f32 or f64 "
                             "inputs and outputs of one size");
    }
    return collective(what, [&] {
      // One all-reduce per dtype over the bucket packed end to end (what
      // DDP's bucket is): each collective costs a few messages' latency.
      reduceBucket<float>(DType::F32, in, out);
      reduceBucket<double>(DType::F64, in, out);
    });
  }

  Status reduceScatterMean(const std::vector<TensorView> &in, const TensorView &shard,
                           const std::string &what) override {
    if (Status s = checkBucket(in, shard, what); !s.ok())
      return s;
    return collective(what, [&] {
      if (shard.dtype == DType::F32)
        reduceScatter<float>(in, shard);
      else
        reduceScatter<double>(in, shard);
    });
  }

  Status allGatherShards(const TensorView &shard, const std::vector<TensorView> &out,
                         const std::string &what) override {
    if (Status s = checkBucket(out, shard, what); !s.ok())
      return s;
    return collective(what, [&] {
      if (shard.dtype == DType::F32)
        gatherShards<float>(shard, out);
      else
        gatherShards<double>(shard, out);
    });
  }

  Expected<std::vector<std::string>>
  allGather(const std::string &mine, const std::string &what) override {
    std::vector<char> all(mine.size() * size_t(worldSize()));
    if (Status st = collective(what, [&] {
          gloo::AllgatherOptions opts(ctx_);
          opts.setTimeout(millis(timeout_));
          opts.setTag(nextTag());
          opts.setInput(const_cast<char *>(mine.data()), mine.size());
          opts.setOutput(all.data(), all.size());
          gloo::allgather(opts);
        });
        !st.ok())
      return st;
    std::vector<std::string> out;
    for (int r = 0; r < worldSize(); ++r)
      out.emplace_back(all.data() + size_t(r) * mine.size(), mine.size());
    return out;
  }

private:
  /// The mean of the bucket's tensors of `dtype`: packed into the staging
  /// buffer, summed by gloo, unpacked times 1/W.
  template <typename T>
  void reduceBucket(DType dtype, const std::vector<TensorView> &in,
                    const std::vector<TensorView> &out) {
    size_t n = 0;
    for (const TensorView &v : in)
      if (v.dtype == dtype)
        n += size_t(v.numel());
    if (n == 0)
      return;
    staging_.resize(std::max(staging_.size(), n * sizeof(T)));
    T *buf = reinterpret_cast<T *>(staging_.data());
    size_t at = 0;
    for (const TensorView &v : in)
      if (v.dtype == dtype) {
        std::memcpy(buf + at, v.data, v.bytes());
        at += size_t(v.numel());
      }
    gloo::AllreduceOptions opts(ctx_);
    opts.setTimeout(millis(timeout_));
    opts.setTag(nextTag());
    opts.setOutput(buf, n);
    opts.setReduceFunction(
        static_cast<void (*)(void *, const void *, const void *, size_t)>(
            &gloo::sum<T>));
    gloo::allreduce(opts);
    // The mean: the sum times 1/W, exact for a power-of-two world size
    // (DDP divides each rank's gradient by W before its sum, which is the
    // same bits then).
    const T scale = T(1) / T(worldSize());
    at = 0;
    for (size_t i = 0; i < in.size(); ++i)
      if (in[i].dtype == dtype) {
        T *dst = static_cast<T *>(out[i].data);
        size_t m = size_t(in[i].numel());
        for (size_t k = 0; k < m; ++k)
          dst[k] = buf[at + k] * scale;
        at += m;
      }
  }

  /// A ZeRO-1 bucket and its shard: one f32/f64 dtype, at most W * S
  /// elements in all.
  Status checkBucket(const std::vector<TensorView> &bucket, const TensorView &shard,
                     const std::string &what) const {
    int64_t n = 0;
    for (size_t i = 0; i < bucket.size(); ++i) {
      if (bucket[i].dtype != shard.dtype ||
          (shard.dtype != DType::F32 && shard.dtype != DType::F64))
        return Status::error(what + ": tensor " + std::to_string(i) + " is " +
                             dtypeName(bucket[i].dtype) + " and the shard " +
                             dtypeName(shard.dtype) + "; a sharded bucket is of one f32/f64 dtype");
      n += bucket[i].numel();
    }
    if (n > shard.numel() * worldSize())
      return Status::error(what + ": a bucket of " + std::to_string(n) + " elements does not fit " +
                           std::to_string(worldSize()) + " shards of " +
                           std::to_string(shard.numel()));
    return Status::success();
  }

  /// The reduce-scatter: a ring over gloo's point-to-point buffers (gloo
  /// 0.0~git20220518 has no reduce-scatter with a timeout in its
  /// collective API; its ReduceScatterHalvingDoubling class waits with the
  /// context's timeout). The padded bucket is cut into W chunks of S; in
  /// step t (0 <= t < W-1) rank r sends chunk (r-t-1) mod W to rank r+1
  /// and adds the chunk (r-t-2) mod W it receives from rank r-1 to its own,
  /// so after W-1 steps chunk r holds the sum over every rank: (W-1)/W of
  /// the bucket over each link, half an all-reduce (Patarasuk & Yuan,
  /// 2009). Then times 1/W, as allReduceMean. With two ranks each sum is
  /// a + b, the bits of the all-reduce.
  template <typename T>
  void reduceScatter(const std::vector<TensorView> &in, const TensorView &shard) {
    const int w = worldSize(), r = rank();
    size_t s = size_t(shard.numel()), total = s * size_t(w);
    staging_.resize(std::max(staging_.size(), (total + s) * sizeof(T)));
    T *buf = reinterpret_cast<T *>(staging_.data());
    T *incoming = buf + total;
    gatherRange(in, 0, int64_t(total), buf);
    if (w > 1 && s > 0) {
      auto out = ctx_->createUnboundBuffer(buf, total * sizeof(T));
      auto inb = ctx_->createUnboundBuffer(incoming, s * sizeof(T));
      const int right = (r + 1) % w, left = (r + w - 1) % w;
      for (int t = 0; t < w - 1; ++t) {
        // One slot per step, the same sequence on every rank.
        uint64_t slot = gloo::Slot::build(kReduceScatterSlotPrefix, nextTag());
        size_t sendChunk = size_t(((r - t - 1) % w + w) % w);
        size_t recvChunk = size_t(((r - t - 2) % w + w) % w);
        out->send(right, slot, sendChunk * s * sizeof(T), s * sizeof(T));
        inb->recv(left, slot, 0, s * sizeof(T));
        inb->waitRecv(millis(timeout_));
        out->waitSend(millis(timeout_));
        T *acc = buf + recvChunk * s;
        for (size_t k = 0; k < s; ++k)
          acc[k] = acc[k] + incoming[k];
      }
    }
    const T scale = T(1) / T(w);
    T *dst = static_cast<T *>(shard.data);
    const T *mine = buf + size_t(r) * s;
    for (size_t k = 0; k < s; ++k)
      dst[k] = mine[k] * scale;
  }
  /// A slot prefix of our own for the ring's messages, apart from gloo's
  /// collectives' (gloo/types.h: 0x01 to 0x08).
  static constexpr uint8_t kReduceScatterSlotPrefix = 0x40;

  template <typename T>
  void gatherShards(const TensorView &shard, const std::vector<TensorView> &out) {
    size_t s = size_t(shard.numel()), total = s * size_t(worldSize());
    staging_.resize(std::max(staging_.size(), total * sizeof(T)));
    T *buf = reinterpret_cast<T *>(staging_.data());
    gloo::AllgatherOptions opts(ctx_);
    opts.setTimeout(millis(timeout_));
    opts.setTag(nextTag());
    opts.setInput(static_cast<T *>(shard.data), s);
    opts.setOutput(buf, total);
    gloo::allgather(opts);
    scatterRange(buf, 0, int64_t(total), out);
  }

  /// Runs `body` (gloo calls that throw on failure) as one collective:
  /// its first tag recorded for the failure's probe, a throw turned into
  /// failure()'s status naming `what`.
  template <typename Body> Status collective(const std::string &what, Body body) {
    double t0 = now();
    opStart_ = tag_; // the collective's first tag, the same on every rank
    try {
      body();
    } catch (const std::exception &e) {
      return failure(what, e.what(), now() - t0);
    }
    return Status::success();
  }

  uint32_t nextTag() { return tag_++; }
  static double now() {
    return std::chrono::duration<double>(
               std::chrono::steady_clock::now().time_since_epoch())
        .count();
  }
  /// The ranks other than this one that did not reach this failure within
  /// the collective timeout: each rank that saw the collective fail leaves
  /// a file named by its rank in the directory of this collective (its
  /// first tag, the same on every rank) and waits for the others' until
  /// every other rank's is there or twice the timeout has passed; a rank
  /// that died, left or hangs elsewhere leaves none. gloo's error names a
  /// peer's address, not its rank, so with more than two ranks this is how
  /// the survivors name it; it adds at most two timeouts to the failure.
  std::vector<int> ranksThatDidNotFail() {
    std::string dir = probeBase_ + ".failed-" + std::to_string(opStart_);
    if (::mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST)
      return {};
    std::string mine = dir + "/" + std::to_string(rank());
    if (FILE *f = std::fopen(mine.c_str(), "w"))
      std::fclose(f);
    std::vector<int> missing;
    // A rank seen once counts (it removes its file when its own wait ends).
    std::vector<char> seen(size_t(worldSize()), 0);
    seen[size_t(rank())] = 1;
    // A survivor whose peer closed its socket fails at once, another that
    // waits for data from that survivor only at the timeout: wait twice it.
    double deadline = now() + 2 * timeout_;
    while (true) {
      missing.clear();
      for (int r = 0; r < worldSize(); ++r)
        if (!seen[size_t(r)] &&
            !(seen[size_t(r)] =
                  ::access((dir + "/" + std::to_string(r)).c_str(), F_OK) == 0))
          missing.push_back(r);
      if (missing.empty() || now() >= deadline)
        break;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    ::unlink(mine.c_str());
    ::rmdir(dir.c_str()); // the last one out removes it
    return missing;
  }

  Status failure(const std::string &what, const char *engineWords,
                 double seconds) {
    std::string who;
    if (worldSize() == 2) {
      who = "rank " + std::to_string(1 - rank()) +
            " did not complete it (it died, left or hung)";
    } else {
      std::vector<int> missing = ranksThatDidNotFail();
      if (missing.empty()) {
        who = "a peer rank did not complete it (every rank reached the "
              "failure)";
      } else {
        who = missing.size() == 1 ? "rank " : "ranks ";
        for (size_t i = 0; i < missing.size(); ++i)
          who += (i ? ", " : "") + std::to_string(missing[i]);
        who += " did not complete it (died, left or hung)";
      }
    }
    char secs[32];
    std::snprintf(secs, sizeof(secs), "%.1f", seconds);
    char limit[32];
    std::snprintf(limit, sizeof(limit), "%g", timeout_);
    return Status::error(what + " failed on rank " + std::to_string(rank()) +
                         " of " + std::to_string(worldSize()) + " after " +
                         secs + " s (timeout " + limit + " s): " + who +
                         "; gloo: " + engineWords);
  }

  std::shared_ptr<gloo::Context> ctx_;
  double timeout_;
  std::string probeBase_;
  /// The packed bucket (host memory, the largest bucket's bytes; outside
  /// the plan's arenas, like gloo's own buffers).
  std::vector<uint8_t> staging_;
  uint32_t tag_ = 1;
  /// tag_ when the current collective began (ranksThatDidNotFail's key: a
  /// ring's steps take tags of their own, so ranks that fail at different
  /// steps differ in tag_).
  uint32_t opStart_ = 0;
};

/// Removes the regular files of directory `dir` (gloo FileStore's keys),
/// then the directory; best effort.
void removeKeys(const std::string &dir) {
  if (DIR *d = ::opendir(dir.c_str())) {
    while (struct dirent *e = ::readdir(d)) {
      std::string name = e->d_name;
      if (name != "." && name != "..")
        ::unlink((dir + "/" + name).c_str());
    }
    ::closedir(d);
  }
  ::rmdir(dir.c_str());
}

} // namespace

Expected<std::shared_ptr<Communicator>>
offload::rt::createGlooCommunicator(const CommunicatorOptions &o) {
  if (o.worldSize < 1 || o.rank < 0 || o.rank >= o.worldSize)
    return Status::error("data parallel: rank " + std::to_string(o.rank) +
                         " is outside a world of size " +
                         std::to_string(o.worldSize));
  if (!(o.timeoutSeconds > 0) || o.timeoutSeconds > 86400)
    return Status::error("data parallel: a collective timeout of " +
                         std::to_string(o.timeoutSeconds) +
                         " s; give one in (0, 86400]");
  std::unique_ptr<gloo::rendezvous::Store> store;
  const std::string &r = o.rendezvous;
  std::string keys; // the job's key directory, removed once all have met
  try {
    if (r.rfind("file:", 0) == 0 && r.size() > 5 &&
        o.prefix.find('/') == std::string::npos && !o.prefix.empty()) {
      std::string dir = r.substr(5);
      keys = dir + "/" + o.prefix;
      // FileStore writes into an existing directory: DIR/PREFIX, this
      // job's own, so that removing it touches nothing else of DIR.
      for (const std::string &d : {dir, keys})
        if (::mkdir(d.c_str(), 0700) != 0 && errno != EEXIST)
          return Status::error("data parallel: cannot create the rendezvous "
                               "directory '" + d + "': " +
                               std::strerror(errno));
      store = std::make_unique<gloo::rendezvous::FileStore>(keys);
    } else {
      return Status::error("data parallel: rendezvous '" + r +
                           "' is not file:DIR (or the job prefix '" + o.prefix +
                           "' is empty or holds a '/')");
    }
    // A peer that dies closes its sockets, and gloo's next write to one
    // (writev, which takes no MSG_NOSIGNAL) raises SIGPIPE, whose default
    // action kills this process instead of failing the collective with a
    // message (seen: DataParallelTest.ThreeRanksNameTheRankThatLeft exited
    // 141 about once in 30 runs). So SIGPIPE is ignored, where the program
    // has not set its own handler: a write to a closed socket then fails
    // with EPIPE, which gloo turns into the error the step reports.
    struct sigaction current;
    if (::sigaction(SIGPIPE, nullptr, &current) == 0 && current.sa_handler == SIG_DFL)
      ::signal(SIGPIPE, SIG_IGN);
    gloo::transport::tcp::attr attr(o.hostname.c_str());
    std::shared_ptr<gloo::transport::Device> dev =
        gloo::transport::tcp::CreateDevice(attr);
    auto ctx =
        std::make_shared<gloo::rendezvous::Context>(o.rank, o.worldSize);
    ctx->setTimeout(millis(o.timeoutSeconds));
    ctx->connectFullMesh(*store, dev);
    auto comm = std::make_shared<GlooCommunicator>(ctx, o.timeoutSeconds, keys);
    // Once every rank has met (an all-gather as the barrier), rank 0 removes
    // the job's keys: a later job in the same directory (torchrun's default
    // port again) must not read this job's addresses.
    auto met = comm->allGather(std::string(1, '\0'), "the rendezvous barrier");
    if (!met)
      return met.status();
    if (o.rank == 0)
      removeKeys(keys);
    return std::shared_ptr<Communicator>(comm);
  } catch (const std::exception &e) {
    return Status::error("data parallel: rank " + std::to_string(o.rank) +
                         " of " + std::to_string(o.worldSize) +
                         " could not join the job through '" + r +
                         "' within " + std::to_string(int(o.timeoutSeconds)) +
                         " s; gloo: " + e.what());
  }
}

Expected<CommunicatorOptions>
offload::rt::communicatorOptionsFromEnvironment(bool &found) {
  CommunicatorOptions o;
  auto env = [](const char *name) -> std::string {
    const char *v = std::getenv(name);
    return v ? v : "";
  };
  auto integer = [](const std::string &name, const std::string &text,
                    int &out) -> Status {
    char *end = nullptr;
    long v = std::strtol(text.c_str(), &end, 10);
    if (text.empty() || !end || *end || v < 0 || v > (1 << 24))
      return Status::error("data parallel: " + name + "='" + text +
                           "' is not a non-negative integer");
    out = int(v);
    return Status::success();
  };
  std::string rank = env("RANK"), world = env("WORLD_SIZE");
  std::string rankVar = "RANK", worldVar = "WORLD_SIZE";
  if (rank.empty()) {
    rank = env("OMPI_COMM_WORLD_RANK");
    world = env("OMPI_COMM_WORLD_SIZE");
    rankVar = "OMPI_COMM_WORLD_RANK";
    worldVar = "OMPI_COMM_WORLD_SIZE";
  }
  found = !rank.empty();
  if (!found)
    return o;
  if (Status s = integer(rankVar, rank, o.rank); !s.ok())
    return s;
  if (Status s = integer(worldVar, world, o.worldSize); !s.ok())
    return s;
  o.rendezvous = env("OFFLOAD_RENDEZVOUS");
  if (o.rendezvous.empty()) {
    std::string tmp = env("TMPDIR");
    o.rendezvous = "file:" + (tmp.empty() ? std::string("/tmp") : tmp) +
                   "/offload-rdzv-" +
                   (env("MASTER_ADDR").empty() ? "local" : env("MASTER_ADDR")) +
                   "-" + (env("MASTER_PORT").empty() ? "0" : env("MASTER_PORT"));
  }
  if (!env("TORCHELASTIC_RUN_ID").empty())
    o.prefix = "offload-" + env("TORCHELASTIC_RUN_ID");
  if (std::string t = env("OFFLOAD_COLLECTIVE_TIMEOUT"); !t.empty()) {
    char *end = nullptr;
    o.timeoutSeconds = std::strtod(t.c_str(), &end);
    if (!end || *end || !(o.timeoutSeconds > 0))
      return Status::error("data parallel: OFFLOAD_COLLECTIVE_TIMEOUT='" + t +
                           "' is not a positive number of seconds");
  }
  return o;
}
