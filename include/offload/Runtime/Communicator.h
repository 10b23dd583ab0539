//===- Communicator.h - Collectives across data-parallel ranks --*- C++ -*-===//
//
// Part of offload. The runtime's seam to an existing collective engine
// (docs/data_parallel.md): a Communicator joins the processes of one
// data-parallel job and averages gradient buckets across them
// (offload.all_reduce). The host backend's engine is gloo (Debian's
// libgloo, the library PyTorch's gloo backend uses) over TCP, rendezvous
// through a gloo store; processes come from a standard launcher (torchrun
// --no-python, or anything that sets RANK and WORLD_SIZE).
//
//===----------------------------------------------------------------------===//
#ifndef OFFLOAD_RUNTIME_COMMUNICATOR_H
#define OFFLOAD_RUNTIME_COMMUNICATOR_H

#include "offload/Runtime/Status.h"
#include "offload/Runtime/Kernel.h"

#include <memory>
#include <string>
#include <vector>

namespace offload {
namespace rt {

class Communicator {
public:
  virtual ~Communicator() = default;
  /// This process's rank in [0, worldSize()).
  virtual int rank() const = 0;
  virtual int worldSize() const = 0;
  /// "gloo": the engine, for messages.
  virtual const char *engine() const = 0;
  /// Seconds a collective may wait for a peer before it fails.
  virtual double timeoutSeconds() const = 0;
  /// For each i, out[i] = (sum over ranks of in[i]) / worldSize(),
  /// elementwise; in[i] and out[i] are host memory of the same dtype (f32
  /// or f64) and element count; they may be the same bytes. Every rank
  /// calls it with the same shapes in the same order and gets the same
  /// bits. `what` names the collective in errors ("offload.all_reduce of
  /// bucket 2 (instruction 57)"). Errors: a peer that died or left (the
  /// engine's connection error), a peer that did not answer within
  /// timeoutSeconds(), an unsupported dtype; the message names this rank,
  /// `what`, the engine's words and, with two ranks, the other rank.
  virtual Status allReduceMean(const std::vector<TensorView> &in,
                               const std::vector<TensorView> &out,
                               const std::string &what) = 0;
  /// ZeRO-1's reduce-scatter (offload.reduce_scatter): `in` (one dtype,
  /// f32 or f64) concatenated end to end and zero-padded to worldSize() *
  /// S elements, S = shard.numel(); `shard` gets elements [rank() * S,
  /// (rank() + 1) * S) of its mean across ranks (sum times 1/W, as
  /// allReduceMean). Errors as allReduceMean's, and a dtype mix or a
  /// bucket larger than worldSize() * S.
  virtual Status reduceScatterMean(const std::vector<TensorView> &in,
                                   const TensorView &shard,
                                   const std::string &what) = 0;
  /// ZeRO-1's all-gather (offload.all_gather): every rank's `shard` (S
  /// elements of one f32/f64 dtype) end to end, in rank order, is cut into
  /// `out` (the padding past their total dropped). Every rank gets the
  /// same bits. Errors as allReduceMean's.
  virtual Status allGatherShards(const TensorView &shard,
                                 const std::vector<TensorView> &out,
                                 const std::string &what) = 0;
  /// Every rank's `mine` (all of one size, in bytes) in rank order.
  virtual Expected<std::vector<std::string>>
  allGather(const std::string &mine, const std::string &what) = 0;
};

/// Where a job's processes find each other and who this one is.
struct CommunicatorOptions {
  int rank = 0;
  int worldSize = 1;
  /// A gloo store: "file:DIR" (gloo::rendezvous::FileStore: a directory
  /// that every rank sees, fresh for each job: a local one on one machine,
  /// a shared file system across machines). gloo's RedisStore would need
  /// libhiredis-dev; not built.
  std::string rendezvous;
  /// The job's key directory within the rendezvous directory (a job id, no
  /// '/'), so that jobs may share one; rank 0 removes it once every rank
  /// has joined.
  std::string prefix = "offload";
  /// Address of this rank's TCP endpoint (gloo's tcp transport): the
  /// interface other ranks reach it at. Default 127.0.0.1 (loopback).
  std::string hostname = "127.0.0.1";
  /// Seconds the rendezvous and each collective wait before failing.
  double timeoutSeconds = 60;
};

/// Joins the job (blocking until every rank has joined, or
/// timeoutSeconds). Errors: rank outside [0, worldSize), worldSize < 1,
/// a rendezvous string not of that form, a store or connection failure
/// (gloo's words), a missing peer at the timeout.
Expected<std::shared_ptr<Communicator>>
createGlooCommunicator(const CommunicatorOptions &options);

/// The options a standard launcher gives in the environment: RANK and
/// WORLD_SIZE (torchrun, and OMPI_COMM_WORLD_RANK/OMPI_COMM_WORLD_SIZE of
/// mpirun as a fallback); the rendezvous from OFFLOAD_RENDEZVOUS, else
/// file:$TMPDIR/offload-rdzv-MASTER_ADDR-MASTER_PORT (torchrun's master
/// address and port: unique per job on one machine); the prefix from
/// TORCHELASTIC_RUN_ID; the timeout from OFFLOAD_COLLECTIVE_TIMEOUT
/// (seconds). `found` is false when no rank variable is set (not under a
/// launcher). Errors: a malformed number.
Expected<CommunicatorOptions> communicatorOptionsFromEnvironment(bool &found);

} // namespace rt
} // namespace offload

#endif
