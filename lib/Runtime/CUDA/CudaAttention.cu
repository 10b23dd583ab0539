//===- CudaAttention.cu - Fused attention on CUDA -------------------------===//
//
// Part of offload. offload.attention and offload.attention_backward (the
// ops' description in OffloadComputeOps.td; the host kernels in
// Kernels/Attention.cpp): softmax(scale * q k^T + mask) v with causal and
// boolean or additive masks, grouped-query heads and Philox dropout, saving
// only the row log-sum-exp, after FlashAttention (Dao et al., 2022):
// online softmax over tiles of keys in shared memory, and a backward that
// recomputes the probabilities from the log-sum-exp.
//
// Layout of the work. A block of kWarps warps owns kWarps rows of one head;
// each warp owns one row (a query row in the forward and in the query
// gradient, a key row in the key/value gradients) and each lane one column
// of a tile of kTile keys (or queries) staged in shared memory; a lane also
// owns every 32nd element of the row's accumulators (out, dq, dk, dv).
// Scores and sums are in the accumulator type: float for f32, double for
// f64, as the GEMMs of cuBLAS compute in the operands' type.
//
// Determinism without atomics: every sum runs in a fixed order (keys or
// queries tile by tile in index order, a warp's 32 lanes by a fixed
// butterfly), and the key/value gradients of grouped heads add the query
// heads in order; the query gradient and the key/value gradients are two
// kernels, so no two blocks write one element. Results are bit-identical
// run to run on one GPU model, and within rounding of the host's (which sums
// in double).
//
// Speed: fp32 with head sizes E = Ev of 64 or 128 (GPT-2, Llama, most
// models) runs the register-tiled kernels below (64 x 64 score tiles, a
// 4 x 4 block of them per thread, float4 shared-memory reads); measured on
// an H200 (docs/gpu.md): GPT-2 small's [8, 12, 1024, 64] causal in 0.69 ms
// forward and 2.67 ms backward, Llama-3-8B's [1, 32/8, 4096, 128] in 6.1 and
// 23.4 ms, against 1.86 and 27.0 ms for PyTorch 2.11's fp32 SDPA forward
// and backward together. Other head sizes and f64 run the warp-per-row
// kernels, which read both operands of every product from shared memory
// (about 1.7 TFLOP/s). The products and sums are explicit fma() calls: the
// build's --fmad=false (which keeps the elementwise kernels bit-identical
// to the host) does not apply to them, and these kernels are not
// bit-identical to the host's anyway. Head sizes up to 256.
//
//===----------------------------------------------------------------------===//

#include "CudaCommon.cuh"
#include "Kernels/AttentionOperands.h"

#include <algorithm>
#include <climits>
#include <cmath>

namespace offload {
namespace rt {
namespace cuda {
namespace {

constexpr int kWarps = 8;       ///< rows per block, one per warp
constexpr int kTile = 32;       ///< keys (queries) per tile, one per lane
constexpr int kMaxPerLane = 8;  ///< accumulator elements per lane: E <= 256
constexpr unsigned kFull = 0xffffffffu;

/// Where the backward's row term D_i comes from. dS_ij = P_ij (dP_ij - D_i)
/// with D_i = sum_j P_ij dP_ij / sum_j P_ij makes sum_j dS_ij = 0, so the
/// gradient of a bias added to every key vanishes as it should (softmax does
/// not see a shift of a row); the divisor, 1 but for lse's rounding, keeps
/// that rounding a common factor of dS. FlashAttention computes D_i as
/// dO_i . O_i; with O_i rounded to bf16/f16 that is off by the rounding, the
/// same for every key, and the key-bias gradients of a bf16-mixed GPT-2
/// step came out 10x further from PyTorch's float64 step than
/// torch.autocast's spelled-out attention (the amp part's first H200 run,
/// 27 November 2026; PyTorch's own bf16 SDPA has the same error as ours
/// did). So bf16/f16 compute D_i from P and dP in a pass of their own
/// (kComputeStash, about 2/7 more work) and stash it, f32, in the first two
/// elements of the row's grad_query, which the key/value kernel reads and
/// the query-gradient kernel reads before it writes the row (kFromStash).
/// f32/f64 keep dO . O (kFromOutput): O's rounding there is below the sums'
/// own error. The host computes the quotient for every type
/// (Kernels/Attention.cpp).
enum RowTerms : int { kFromOutput = 0, kComputeStash = 1, kFromStash = 2 };

/// The f32 row term stashed in the first two 2-byte elements of a row
/// (any alignment); in the first element for wider types (not launched:
/// they keep kFromOutput, but the launch code names every mode).
template <typename T> __device__ inline void stashRowTerm(T *row, float d) {
  if constexpr (sizeof(T) == 2) {
    const unsigned u = __float_as_uint(d);
    reinterpret_cast<uint16_t *>(row)[0] = uint16_t(u & 0xffffu);
    reinterpret_cast<uint16_t *>(row)[1] = uint16_t(u >> 16);
  } else {
    row[0] = T(d);
  }
}
template <typename T> __device__ inline float stashedRowTerm(const T *row) {
  if constexpr (sizeof(T) == 2) {
    const uint16_t *h = reinterpret_cast<const uint16_t *>(row);
    return __uint_as_float(unsigned(h[0]) | (unsigned(h[1]) << 16));
  } else {
    return float(row[0]);
  }
}

/// What the kernels need to know besides the pointers.
struct AttnGeom {
  int64_t n, hq, hkv, l, s, e, ev;
  double scale;
  int causal;
  /// 0: no mask, 1: boolean keep-mask, 2: additive mask of the query's type.
  int maskKind;
  /// Element strides of the mask over [N, Hq, L, S] (0 where broadcast).
  int64_t mstr[4];
  double p; ///< dropout probability (0: none)
  uint64_t offset;
  /// Element strides (batch, head, row) of q (and dq), k (dk), v (dv) and
  /// out (dout); the last dimension is contiguous. The head layout
  /// [N, H, L, E] has (H*L*E, L*E, E).
  int64_t qs[3], ks[3], vs[3], os[3];
};

/// Offset of row `r` of head `h` of batch `n` for strides `st`.
__host__ __device__ inline int64_t rowAt(const int64_t *st, int64_t n,
                                         int64_t h, int64_t r) {
  return n * st[0] + h * st[1] + r * st[2];
}

__device__ inline int64_t minI(int64_t a, int64_t b) { return a < b ? a : b; }

template <typename A> __device__ A warpMax(A v) {
  for (int o = 16; o > 0; o >>= 1)
    v = em::maxOf(v, __shfl_xor_sync(kFull, v, o));
  return v;
}
template <typename A> __device__ A warpSum(A v) {
  for (int o = 16; o > 0; o >>= 1)
    v += __shfl_xor_sync(kFull, v, o);
  return v;
}

/// sum_d a[d] * b[d] in four interleaved partial sums (independent FMA
/// chains: a fixed order, and four times the instruction-level
/// parallelism of one chain).
template <typename A>
__device__ A dotRow(const A *a, const A *b, int64_t n) {
  A s0 = 0, s1 = 0, s2 = 0, s3 = 0;
  int64_t d = 0;
  for (; d + 4 <= n; d += 4) {
    s0 = fma(a[d], b[d], s0);
    s1 = fma(a[d + 1], b[d + 1], s1);
    s2 = fma(a[d + 2], b[d + 2], s2);
    s3 = fma(a[d + 3], b[d + 3], s3);
  }
  for (; d < n; ++d)
    s0 = fma(a[d], b[d], s0);
  return (s0 + s1) + (s2 + s3);
}

/// The scaled, masked score of query i and key j of head h (-inf when
/// masked out): scale * dot, then the additive mask.
template <typename T, typename A>
__device__ A maskedScore(A dot, const AttnGeom &g, const void *mask, int64_t n,
                         int64_t h, int64_t i, int64_t j) {
  if (g.causal && j > i)
    return A(-INFINITY);
  A sc = dot * A(g.scale);
  if (g.maskKind) {
    int64_t off = n * g.mstr[0] + h * g.mstr[1] + i * g.mstr[2] +
                  j * g.mstr[3];
    if (g.maskKind == 1) {
      if (!static_cast<const uint8_t *>(mask)[off])
        return A(-INFINITY);
    } else {
      sc += A(ld(static_cast<const T *>(mask)[off]));
    }
  }
  return sc;
}

/// The query rows of a block of the forward or query-gradient kernels:
/// block b takes rows [i0, i0 + rows) of head h of batch n (nh = n*Hq + h),
/// whose key/value head is kvh; blocks run over (n, h) outer, rows inner.
struct QueryRows {
  int64_t n, h, nh, kvh, i0;
};
__device__ inline QueryRows queryRows(const AttnGeom &g, int64_t rows) {
  const int64_t rowBlocks = (g.l + rows - 1) / rows;
  const int64_t nh = int64_t(blockIdx.x) / rowBlocks;
  const int64_t h = nh % g.hq;
  return {nh / g.hq, h, nh, h / (g.hq / g.hkv),
          (int64_t(blockIdx.x) % rowBlocks) * rows};
}

/// Whether dropout keeps probability (n*Hq + h, i, j): the index space of
/// offload.dropout over the [N, Hq, L, S] probability matrix.
__device__ inline bool keepProb(const AttnGeom &g, uint64_t seed, int64_t nh,
                                int64_t i, int64_t j) {
  int64_t idx = (nh * g.l + i) * g.s + j;
  return em::Dropout<double>::make(g.p, seed, g.offset).keep(idx);
}

/// Stages rows [r0, r0 + cnt) of a [rows, width] matrix into shared memory
/// with a row stride of width + 1 (no bank conflicts when each lane reads
/// its own row).
template <typename T, typename A>
__device__ void stageRows(A *dst, const T *src, int64_t r0, int64_t cnt,
                          int64_t width, int64_t rowStride) {
  for (int64_t t = threadIdx.x; t < cnt * width; t += blockDim.x) {
    int64_t r = t / width, d = t % width;
    dst[r * (width + 1) + d] = A(ld(src[(r0 + r) * rowStride + d]));
  }
}

/// Forward: block (n, h, rows [rb*kWarps, +kWarps)); warp w owns query row
/// i. Online softmax over tiles of kTile keys.
template <typename T, typename A>
__global__ void attentionForwardKernel(const T *q, const T *k, const T *v,
                                       const void *mask, const int64_t *seed,
                                       T *out, A *lse, AttnGeom g) {
  extern __shared__ unsigned char smem[];
  A *sK = reinterpret_cast<A *>(smem);      // kTile x (e + 1)
  A *sV = sK + kTile * (g.e + 1);           // kTile x (ev + 1)
  A *sQ = sV + kTile * (g.ev + 1);          // kWarps x e
  const int warp = int(threadIdx.x) / 32, lane = int(threadIdx.x) % 32;
  // Accumulator chunks in use: every 32nd element of rows of e or ev.
  const int ce = int((g.e + 31) / 32), cv = int((g.ev + 31) / 32);
  const int cmax = ce > cv ? ce : cv;
  (void)ce, (void)cv, (void)cmax;
  const QueryRows qb = queryRows(g, kWarps);
  const int64_t nh = qb.nh, h = qb.h, n = qb.n, kvh = qb.kvh;
  const int64_t i = qb.i0 + warp;
  const bool active = i < g.l;
  const T *kb = k + rowAt(g.ks, n, kvh, 0);
  const T *vb = v + rowAt(g.vs, n, kvh, 0);
  A *myQ = sQ + warp * g.e;
  if (active)
    for (int64_t d = lane; d < g.e; d += 32)
      myQ[d] = A(ld(q[rowAt(g.qs, n, h, i) + d]));
  const uint64_t sd = g.p > 0 ? uint64_t(*seed) : 0;
  const A dropScale = g.p > 0 ? A(1.0 / (1.0 - g.p)) : A(1);
  A acc[kMaxPerLane];
  for (int c = 0; c < kMaxPerLane; ++c)
    acc[c] = 0;
  A m = A(-INFINITY), lsum = 0;
  const int64_t lastRow = minI(g.l - 1, qb.i0 + kWarps - 1);
  const int64_t sEnd = g.causal ? minI(g.s, lastRow + 1) : g.s;
  for (int64_t j0 = 0; j0 < sEnd; j0 += kTile) {
    const int cnt = int(minI(kTile, g.s - j0));
    __syncthreads(); // the previous tile is consumed (and sQ is written)
    stageRows(sK, kb, j0, cnt, g.e, g.ks[2]);
    stageRows(sV, vb, j0, cnt, g.ev, g.vs[2]);
    __syncthreads();
    if (!active)
      continue;
    const int64_t j = j0 + lane;
    A sc = A(-INFINITY);
    if (lane < cnt) {
      const A *kr = sK + lane * (g.e + 1);
      const A dot = dotRow(myQ, kr, g.e);
      sc = maskedScore<T, A>(dot, g, mask, n, h, i, j);
    }
    const A mNew = em::maxOf(m, warpMax(sc));
    if (mNew == A(-INFINITY))
      continue; // every key so far masked (warp-uniform)
    const A corr = m == A(-INFINITY) ? A(0) : A(exp(m - mNew));
    const A pj = sc == A(-INFINITY) ? A(0) : A(exp(sc - mNew));
    lsum = lsum * corr + warpSum(pj);
    A pd = pj;
    if (g.p > 0)
      pd = (lane < cnt && keepProb(g, sd, nh, i, j)) ? pj * dropScale : A(0);
    for (int c = 0; c < kMaxPerLane; ++c)
      acc[c] *= corr;
    for (int r = 0; r < cnt; ++r) {
      const A pr = __shfl_sync(kFull, pd, r);
      const A *vr = sV + r * (g.ev + 1);
#pragma unroll
      for (int c = 0; c < kMaxPerLane; ++c) {
        if (c >= cv)
          break;
        int64_t d = lane + 32 * c;
        if (d < g.ev)
          acc[c] = fma(pr, vr[d], acc[c]);
      }
    }
    m = mNew;
  }
  if (!active)
    return;
  const A inv = lsum > A(0) ? A(1) / lsum : A(0);
  T *orow = out + rowAt(g.os, n, h, i);
  for (int c = 0; c < kMaxPerLane; ++c) {
    int64_t d = lane + 32 * c;
    if (d < g.ev)
      orow[d] = st<T>(acc[c] * inv);
  }
  if (lane == 0)
    lse[nh * g.l + i] =
        m == A(-INFINITY) ? A(-INFINITY) : A(m + A(log(lsum)));
}

/// Query gradient: block (n, h, query rows), warp w owns query row i:
/// dq_i = scale * sum_j dS_ij k_j over key tiles in order, with
/// dS_ij = P_ij (dP_ij - D_i), P_ij = exp(score - lse_i) and D_i by kMode
/// (RowTerms; kComputeStash only stashes D_i in dq).
template <typename T, typename A, int kMode = kFromOutput>
__global__ void attentionBackwardQKernel(const T *dout, const T *q,
                                         const T *k, const T *v, const T *out,
                                         const A *lse, const void *mask,
                                         const int64_t *seed, T *dq,
                                         AttnGeom g) {
  extern __shared__ unsigned char smem[];
  A *sK = reinterpret_cast<A *>(smem);      // kTile x (e + 1)
  A *sV = sK + kTile * (g.e + 1);           // kTile x (ev + 1)
  A *sQ = sV + kTile * (g.ev + 1);          // kWarps x e
  A *sDO = sQ + kWarps * g.e;               // kWarps x ev
  const int warp = int(threadIdx.x) / 32, lane = int(threadIdx.x) % 32;
  // Accumulator chunks in use: every 32nd element of rows of e or ev.
  const int ce = int((g.e + 31) / 32), cv = int((g.ev + 31) / 32);
  const int cmax = ce > cv ? ce : cv;
  (void)ce, (void)cv, (void)cmax;
  const QueryRows qb = queryRows(g, kWarps);
  const int64_t nh = qb.nh, h = qb.h, n = qb.n, kvh = qb.kvh;
  const int64_t i = qb.i0 + warp;
  const bool active = i < g.l;
  const T *kb = k + rowAt(g.ks, n, kvh, 0);
  const T *vb = v + rowAt(g.vs, n, kvh, 0);
  A *myQ = sQ + warp * g.e, *myDO = sDO + warp * g.ev;
  A dsum = 0, rowLse = A(-INFINITY);
  if (active) {
    for (int64_t d = lane; d < g.e; d += 32)
      myQ[d] = A(ld(q[rowAt(g.qs, n, h, i) + d]));
    const int64_t o = rowAt(g.os, n, h, i);
    for (int64_t d = lane; d < g.ev; d += 32) {
      myDO[d] = A(ld(dout[o + d]));
      if constexpr (kMode == kFromOutput)
        dsum += A(ld(dout[o + d])) * A(ld(out[o + d]));
    }
    if constexpr (kMode == kFromOutput)
      dsum = warpSum(dsum);
    if constexpr (kMode == kFromStash)
      dsum = A(stashedRowTerm(dq + rowAt(g.qs, n, h, i)));
    rowLse = A(lse[nh * g.l + i]);
  }
  // kComputeStash: this lane's parts of sum_j P_ij dP_ij and sum_j P_ij.
  A rowTerm = 0, rowP = 0;
  const uint64_t sd = g.p > 0 ? uint64_t(*seed) : 0;
  const A dropScale = g.p > 0 ? A(1.0 / (1.0 - g.p)) : A(1);
  A acc[kMaxPerLane];
  for (int c = 0; c < kMaxPerLane; ++c)
    acc[c] = 0;
  const int64_t lastRow = minI(g.l - 1, qb.i0 + kWarps - 1);
  const int64_t sEnd = g.causal ? minI(g.s, lastRow + 1) : g.s;
  for (int64_t j0 = 0; j0 < sEnd; j0 += kTile) {
    const int cnt = int(minI(kTile, g.s - j0));
    __syncthreads();
    stageRows(sK, kb, j0, cnt, g.e, g.ks[2]);
    stageRows(sV, vb, j0, cnt, g.ev, g.vs[2]);
    __syncthreads();
    if (!active || rowLse == A(-INFINITY))
      continue; // a row with no key: zero gradient (warp-uniform)
    const int64_t j = j0 + lane;
    A ds = 0;
    if (lane < cnt) {
      const A *kr = sK + lane * (g.e + 1), *vr = sV + lane * (g.ev + 1);
      const A dot = dotRow(myQ, kr, g.e);
      const A sc = maskedScore<T, A>(dot, g, mask, n, h, i, j);
      const A p = sc == A(-INFINITY) ? A(0) : A(exp(sc - rowLse));
      A dp = dotRow(myDO, vr, g.ev);
      if (g.p > 0)
        dp = keepProb(g, sd, nh, i, j) ? dp * dropScale : A(0);
      ds = p * (dp - dsum);
      if constexpr (kMode == kComputeStash) {
        rowTerm = fma(p, dp, rowTerm);
        rowP += p;
      }
    }
    if constexpr (kMode != kComputeStash) {
      for (int r = 0; r < cnt; ++r) {
        const A dr = __shfl_sync(kFull, ds, r);
        const A *kr = sK + r * (g.e + 1);
#pragma unroll
        for (int c = 0; c < kMaxPerLane; ++c) {
          if (c >= ce)
            break;
          int64_t d = lane + 32 * c;
          if (d < g.e)
            acc[c] = fma(dr, kr[d], acc[c]);
        }
      }
    }
  }
  if constexpr (kMode == kComputeStash) {
    rowTerm = warpSum(rowTerm);
    rowP = warpSum(rowP);
    if (active && lane == 0)
      stashRowTerm(dq + rowAt(g.qs, n, h, i),
                   rowP > A(0) ? float(rowTerm / rowP) : 0.f);
    return;
  }
  if (!active)
    return;
  T *row = dq + rowAt(g.qs, n, h, i);
  for (int c = 0; c < kMaxPerLane; ++c) {
    int64_t d = lane + 32 * c;
    if (d < g.e)
      row[d] = st<T>(acc[c] * A(g.scale));
  }
}

/// Key and value gradients: block (n, kv head, key rows), warp w owns key
/// row j: over the query heads of the group in order and tiles of kTile
/// queries in order, dv_j += P~_ij dO_i and dk_j += scale * dS_ij q_i.
/// `stash`: grad_query holding the row terms D_i (RowTerms), or nullptr
/// for dO_i . O_i.
template <typename T, typename A>
__global__ void attentionBackwardKVKernel(const T *dout, const T *q,
                                          const T *k, const T *v,
                                          const T *out, const A *lse,
                                          const void *mask,
                                          const int64_t *seed, T *dk, T *dv,
                                          const T *stash, AttnGeom g) {
  extern __shared__ unsigned char smem[];
  A *sQ = reinterpret_cast<A *>(smem);      // kTile x (e + 1)
  A *sDO = sQ + kTile * (g.e + 1);          // kTile x (ev + 1)
  A *sD = sDO + kTile * (g.ev + 1);         // kTile
  A *sLse = sD + kTile;                     // kTile
  A *sK = sLse + kTile;                     // kWarps x e
  A *sV = sK + kWarps * g.e;                // kWarps x ev
  const int warp = int(threadIdx.x) / 32, lane = int(threadIdx.x) % 32;
  // Accumulator chunks in use: every 32nd element of rows of e or ev.
  const int ce = int((g.e + 31) / 32), cv = int((g.ev + 31) / 32);
  const int cmax = ce > cv ? ce : cv;
  (void)ce, (void)cv, (void)cmax;
  const int64_t rowBlocks = (g.s + kWarps - 1) / kWarps;
  const int64_t rb = int64_t(blockIdx.x) % rowBlocks;
  const int64_t nk = int64_t(blockIdx.x) / rowBlocks; // n * hkv + kvh
  const int64_t kvh = nk % g.hkv, n = nk / g.hkv;
  const int64_t group = g.hq / g.hkv;
  const int64_t j = rb * kWarps + warp;
  const bool active = j < g.s;
  A *myK = sK + warp * g.e, *myV = sV + warp * g.ev;
  if (active) {
    for (int64_t d = lane; d < g.e; d += 32)
      myK[d] = A(ld(k[rowAt(g.ks, n, kvh, j) + d]));
    for (int64_t d = lane; d < g.ev; d += 32)
      myV[d] = A(ld(v[rowAt(g.vs, n, kvh, j) + d]));
  }
  const uint64_t sd = g.p > 0 ? uint64_t(*seed) : 0;
  const A dropScale = g.p > 0 ? A(1.0 / (1.0 - g.p)) : A(1);
  A accK[kMaxPerLane], accV[kMaxPerLane];
  for (int c = 0; c < kMaxPerLane; ++c)
    accK[c] = accV[c] = 0;
  // Causal: query i sees key j iff j <= i, so the block's first key row
  // bounds the first query tile.
  const int64_t iStart = g.causal ? (rb * kWarps) / kTile * kTile : 0;
  for (int64_t hh = 0; hh < group; ++hh) {
    const int64_t h = kvh * group + hh, nh = n * g.hq + h;
    const T *qb = q + rowAt(g.qs, n, h, 0);
    const T *dob = dout + rowAt(g.os, n, h, 0);
    for (int64_t i0 = iStart; i0 < g.l; i0 += kTile) {
      const int cnt = int(minI(kTile, g.l - i0));
      __syncthreads();
      stageRows(sQ, qb, i0, cnt, g.e, g.qs[2]);
      stageRows(sDO, dob, i0, cnt, g.ev, g.os[2]);
      // D_i = dO_i . O_i of the tile's rows: warp w takes rows w, w + kWarps..
      for (int r = warp; r < cnt; r += kWarps) {
        const int64_t o = rowAt(g.os, n, h, i0 + r);
        A part = 0;
        if constexpr (kIsLow<T>) {
          if (stash)
            part = A(stashedRowTerm(stash + rowAt(g.qs, n, h, i0 + r)));
        }
        if (!stash) {
          for (int64_t d = lane; d < g.ev; d += 32)
            part += A(ld(dout[o + d])) * A(ld(out[o + d]));
          part = warpSum(part);
        }
        if (lane == 0) {
          sD[r] = part;
          sLse[r] = A(lse[nh * g.l + i0 + r]);
        }
      }
      __syncthreads();
      if (!active)
        continue;
      const int64_t i = i0 + lane;
      A pd = 0, ds = 0;
      if (lane < cnt && sLse[lane] != A(-INFINITY)) {
        const A *qr = sQ + lane * (g.e + 1), *dor = sDO + lane * (g.ev + 1);
        const A dot = dotRow(qr, myK, g.e);
        const A sc = maskedScore<T, A>(dot, g, mask, n, h, i, j);
        const A p = sc == A(-INFINITY) ? A(0) : A(exp(sc - sLse[lane]));
        A dp = dotRow(dor, myV, g.ev);
        pd = p;
        if (g.p > 0) {
          const bool keep = keepProb(g, sd, nh, i, j);
          pd = keep ? p * dropScale : A(0);
          dp = keep ? dp * dropScale : A(0);
        }
        ds = p * (dp - sD[lane]);
      }
      for (int r = 0; r < cnt; ++r) {
        const A pr = __shfl_sync(kFull, pd, r);
        const A dr = __shfl_sync(kFull, ds, r);
        const A *qr = sQ + r * (g.e + 1), *dor = sDO + r * (g.ev + 1);
#pragma unroll
        for (int c = 0; c < kMaxPerLane; ++c) {
          if (c >= cmax)
            break;
          int64_t d = lane + 32 * c;
          if (d < g.ev)
            accV[c] = fma(pr, dor[d], accV[c]);
          if (d < g.e)
            accK[c] = fma(dr, qr[d], accK[c]);
        }
      }
    }
  }
  if (!active)
    return;
  for (int c = 0; c < kMaxPerLane; ++c) {
    int64_t d = lane + 32 * c;
    if (d < g.e)
      dk[rowAt(g.ks, n, kvh, j) + d] = st<T>(accK[c] * A(g.scale));
    if (d < g.ev)
      dv[rowAt(g.vs, n, kvh, j) + d] = st<T>(accV[c]);
  }
}

//===----------------------------------------------------------------------===//
// Register-tiled kernels: fp32, head sizes E = Ev = 64 or 128
//===----------------------------------------------------------------------===//
//
// The same mathematics as the kernels above, on 64 x 64 tiles of the score
// matrix in a block of 256 threads (FlashAttention-2's forward, and a
// backward in two kernels, one for the query gradient and one for the
// key/value gradients, so that no element is written by two blocks and no
// atomics are needed). Thread (ty, tx) = (tid / 16, tid % 16) owns rows
// ty + 16a (a < 4) of a tile and, in the score tile, columns tx + 16b
// (b < 4); in the [rows, E] products it owns columns 4 tx + 64 c + u
// (u < 4, c < E / 64). Operands sit in shared memory in their natural
// row-major layout with a row pitch of E + 4 (or 64 + 4) floats: the
// float4 reads along a row are free of bank conflicts for the 8 lanes of
// each quarter-warp, and each float4 pair feeds 16 FMAs from registers.
//
// Sums run in a fixed order (the contraction index in order within a tile,
// tiles in order, the 16 lanes of a row by a fixed butterfly): results are
// bit-identical run to run. The row statistics of the 16 lanes that share
// a row live in one half-warp, so they combine by shuffles.

constexpr int kTM = 64;          ///< rows per block (queries or keys)
constexpr int kTN = 64;          ///< columns per tile (keys or queries)
constexpr int kTThreads = 256;   ///< 16 x 16 threads
constexpr int kSP = kTN + 4;     ///< pitch of the [64, 64] score tiles

__device__ inline float halfMax(float v) {
  for (int o = 8; o > 0; o >>= 1)
    v = fmaxf(v, __shfl_xor_sync(kFull, v, o));
  return v;
}
__device__ inline float halfSum(float v) {
  for (int o = 8; o > 0; o >>= 1)
    v += __shfl_xor_sync(kFull, v, o);
  return v;
}

/// Four consecutive elements at p (16-byte aligned for float, 8-byte for
/// bf16/f16) as f32: one float4 load, or one 8-byte load widened.
__device__ inline float4 load4(const float *p) {
  return *reinterpret_cast<const float4 *>(p);
}
template <typename T> __device__ inline float4 load4(const T *p) {
  const uint2 w = *reinterpret_cast<const uint2 *>(p);
  T e[4];
  memcpy(e, &w, sizeof w);
  return make_float4(ld(e[0]), ld(e[1]), ld(e[2]), ld(e[3]));
}

/// Stages rows [r0, r0 + 64) of a row-strided [rows, E] matrix into a
/// [64, E + 4] f32 tile, zeros past `rows`. T: float, or bf16/f16 widened
/// exactly (the tiles and all arithmetic stay f32).
template <int E, typename T>
__device__ void stageTile(float *dst, const T *src, int64_t rowStride,
                          int64_t r0, int64_t rows) {
  constexpr int kQuads = E / 4;
  for (int t = int(threadIdx.x); t < kTM * kQuads; t += kTThreads) {
    const int r = t / kQuads, d = 4 * (t % kQuads);
    float4 x = make_float4(0.f, 0.f, 0.f, 0.f);
    if (r0 + r < rows)
      x = load4(src + (r0 + r) * rowStride + d);
    *reinterpret_cast<float4 *>(dst + r * (E + 4) + d) = x;
  }
}

/// s[a][b] += sum_d A[ty + 16a][d] * B[tx + 16b][d] over d < E, for tiles
/// of pitch E + 4 (the contraction along both operands' rows).
template <int E>
__device__ inline void rowDots(float (&s)[4][4], const float *A,
                               const float *B, int ty, int tx) {
#pragma unroll 2
  for (int d = 0; d < E; d += 4) {
    float4 a[4], b[4];
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      a[i] = *reinterpret_cast<const float4 *>(A + (ty + 16 * i) * (E + 4) + d);
      b[i] = *reinterpret_cast<const float4 *>(B + (tx + 16 * i) * (E + 4) + d);
    }
#pragma unroll
    for (int i = 0; i < 4; ++i)
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        s[i][j] = fmaf(a[i].x, b[j].x, s[i][j]);
        s[i][j] = fmaf(a[i].y, b[j].y, s[i][j]);
        s[i][j] = fmaf(a[i].z, b[j].z, s[i][j]);
        s[i][j] = fmaf(a[i].w, b[j].w, s[i][j]);
      }
  }
}

/// acc[a][c][u] += sum_j P[ty + 16a][j] * V[j][4tx + 64c + u] over j < 64,
/// P a [64, 64 + 4] tile and V a [64, E + 4] tile.
template <int E>
__device__ inline void tileTimes(float (&acc)[4][E / 64][4], const float *P,
                                 const float *V, int ty, int tx) {
  for (int j = 0; j < kTN; j += 4) {
    float4 p[4];
#pragma unroll
    for (int i = 0; i < 4; ++i)
      p[i] = *reinterpret_cast<const float4 *>(P + (ty + 16 * i) * kSP + j);
#pragma unroll
    for (int jj = 0; jj < 4; ++jj) {
#pragma unroll
      for (int c = 0; c < E / 64; ++c) {
        const float4 v = *reinterpret_cast<const float4 *>(
            V + (j + jj) * (E + 4) + 4 * tx + 64 * c);
#pragma unroll
        for (int i = 0; i < 4; ++i) {
          const float pj = jj == 0 ? p[i].x
                           : jj == 1 ? p[i].y
                           : jj == 2 ? p[i].z
                                     : p[i].w;
          acc[i][c][0] = fmaf(pj, v.x, acc[i][c][0]);
          acc[i][c][1] = fmaf(pj, v.y, acc[i][c][1]);
          acc[i][c][2] = fmaf(pj, v.z, acc[i][c][2]);
          acc[i][c][3] = fmaf(pj, v.w, acc[i][c][3]);
        }
      }
    }
  }
}

/// Four f32 values to four consecutive elements at p: one float4 store, or
/// each rounded once to bf16/f16 (st) and stored as one 8-byte word.
__device__ inline void store4(float *p, float4 v) {
  *reinterpret_cast<float4 *>(p) = v;
}
template <typename T> __device__ inline void store4(T *p, float4 v) {
  T e[4] = {st<T>(v.x), st<T>(v.y), st<T>(v.z), st<T>(v.w)};
  uint2 w;
  memcpy(&w, e, sizeof w);
  *reinterpret_cast<uint2 *>(p) = w;
}

/// Writes rows ty + 16a < rows of acc * mul[a] to a row-strided matrix.
template <int E, typename T>
__device__ inline void storeRows(T *dst, int64_t rowStride, int64_t r0,
                                 int64_t rows, const float (&acc)[4][E / 64][4],
                                 const float (&mul)[4], int ty, int tx) {
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const int64_t r = r0 + ty + 16 * i;
    if (r >= rows)
      continue;
#pragma unroll
    for (int c = 0; c < E / 64; ++c)
      store4(dst + r * rowStride + 4 * tx + 64 * c,
             make_float4(acc[i][c][0] * mul[i], acc[i][c][1] * mul[i],
                         acc[i][c][2] * mul[i], acc[i][c][3] * mul[i]));
  }
}

/// Forward: block (n, h, query rows [64 rb, +64)); online softmax over
/// tiles of 64 keys.
template <int E, typename T = float>
__global__ void __launch_bounds__(kTThreads)
    attentionForwardTiled(const T *q, const T *k, const T *v,
                          const void *mask, const int64_t *seed, T *out,
                          float *lse, AttnGeom g) {
  extern __shared__ float4 smem4[];
  float *sQ = reinterpret_cast<float *>(smem4); // [64, E + 4]
  float *sK = sQ + kTM * (E + 4);               // [64, E + 4]
  float *sV = sK + kTN * (E + 4);               // [64, E + 4]
  float *sP = sV + kTN * (E + 4);               // [64, 68]
  const int ty = int(threadIdx.x) / 16, tx = int(threadIdx.x) % 16;
  const QueryRows qb = queryRows(g, kTM);
  const int64_t nh = qb.nh, h = qb.h, n = qb.n, kvh = qb.kvh, i0 = qb.i0;
  stageTile<E>(sQ, q + rowAt(g.qs, n, h, 0), g.qs[2], i0, g.l);
  const T *kb = k + rowAt(g.ks, n, kvh, 0);
  const T *vb = v + rowAt(g.vs, n, kvh, 0);
  const uint64_t sd = g.p > 0 ? uint64_t(*seed) : 0;
  const float dropScale = g.p > 0 ? float(1.0 / (1.0 - g.p)) : 1.f;
  float acc[4][E / 64][4] = {};
  float m[4], lsum[4];
#pragma unroll
  for (int i = 0; i < 4; ++i)
    m[i] = -INFINITY, lsum[i] = 0.f;
  const int64_t lastRow = minI(g.l - 1, i0 + kTM - 1);
  const int64_t sEnd = g.causal ? minI(g.s, lastRow + 1) : g.s;
  for (int64_t j0 = 0; j0 < sEnd; j0 += kTN) {
    __syncthreads(); // the previous tile is consumed
    stageTile<E>(sK, kb, g.ks[2], j0, g.s);
    stageTile<E>(sV, vb, g.vs[2], j0, g.s);
    __syncthreads();
    float s[4][4] = {};
    rowDots<E>(s, sQ, sK, ty, tx);
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const int64_t row = i0 + ty + 16 * i;
      float mt = -INFINITY;
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        const int64_t col = j0 + tx + 16 * j;
        s[i][j] = row < g.l && col < g.s
                      ? maskedScore<T, float>(s[i][j], g, mask, n, h, row,
                                                  col)
                      : -INFINITY;
        mt = fmaxf(mt, s[i][j]);
      }
      const float mNew = fmaxf(m[i], halfMax(mt));
      // mNew == -inf: every key so far masked, nothing accumulated yet.
      const float corr =
          m[i] == -INFINITY ? 0.f : expf(m[i] - mNew);
      float ps = 0.f;
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        const float p = s[i][j] == -INFINITY ? 0.f : expf(s[i][j] - mNew);
        ps += p;
        float pd = p;
        if (g.p > 0)
          pd = keepProb(g, sd, nh, row, j0 + tx + 16 * j) ? p * dropScale
                                                          : 0.f;
        sP[(ty + 16 * i) * kSP + tx + 16 * j] = pd;
      }
      lsum[i] = lsum[i] * corr + halfSum(ps);
#pragma unroll
      for (int c = 0; c < E / 64; ++c)
#pragma unroll
        for (int u = 0; u < 4; ++u)
          acc[i][c][u] *= corr;
      m[i] = mNew;
    }
    __syncthreads(); // sP is complete
    tileTimes<E>(acc, sP, sV, ty, tx);
  }
  float inv[4];
#pragma unroll
  for (int i = 0; i < 4; ++i)
    inv[i] = lsum[i] > 0.f ? 1.f / lsum[i] : 0.f;
  storeRows<E>(out + rowAt(g.os, n, h, 0), g.os[2], i0, g.l, acc, inv, ty,
               tx);
  if (tx == 0)
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const int64_t row = i0 + ty + 16 * i;
      if (row < g.l)
        lse[nh * g.l + row] =
            m[i] == -INFINITY ? -INFINITY : m[i] + logf(lsum[i]);
    }
}

/// D_r = dO_r . O_r and lse_r of rows [r0, r0 + 64) into sD and sLse
/// (lse -inf past `rows`, which makes their probabilities 0).
template <typename T>
__device__ inline void stageRowTerms(float *sD, float *sLse, const T *dout,
                                     const T *out, int64_t rowStride,
                                     int64_t ev, const float *lse,
                                     int64_t r0, int64_t rows) {
  const int warp = int(threadIdx.x) / 32, lane = int(threadIdx.x) % 32;
  for (int r = warp; r < kTM; r += kTThreads / 32) {
    float part = 0.f;
    if (r0 + r < rows)
      for (int64_t d = lane; d < ev; d += 32)
        part = fmaf(ld(dout[(r0 + r) * rowStride + d]),
                    ld(out[(r0 + r) * rowStride + d]), part);
    part = warpSum(part);
    if (lane == 0) {
      sD[r] = part;
      sLse[r] = r0 + r < rows ? lse[r0 + r] : -INFINITY;
    }
  }
}

/// The row terms D_i stashed in grad_query's rows (RowTerms) and the
/// log-sum-exp of rows [r0, r0 + 64) < rows, as stageRowTerms.
template <typename T>
__device__ inline void stageStashedTerms(float *sD, float *sLse,
                                         const T *stash, int64_t rowStride,
                                         const float *lse, int64_t r0,
                                         int64_t rows) {
  for (int r = int(threadIdx.x); r < kTM; r += kTThreads) {
    const bool in = r0 + r < rows;
    sD[r] = in ? stashedRowTerm(stash + (r0 + r) * rowStride) : 0.f;
    sLse[r] = in ? lse[r0 + r] : -INFINITY;
  }
}

/// Query gradient: block (n, h, query rows [64 rb, +64)), over key tiles
/// in order: dq = scale * sum_j dS_ij k_j, D_i by kMode (RowTerms;
/// kComputeStash only stashes D_i = sum_j P_ij dP_ij in dq).
template <int E, typename T = float, int kMode = kFromOutput>
__global__ void __launch_bounds__(kTThreads)
    attentionBackwardQTiled(const T *dout, const T *q, const T *k,
                            const T *v, const T *out, const float *lse,
                            const void *mask, const int64_t *seed, T *dq,
                            AttnGeom g) {
  extern __shared__ float4 smem4[];
  float *sQ = reinterpret_cast<float *>(smem4); // [64, E + 4]
  float *sDO = sQ + kTM * (E + 4);              // [64, E + 4]
  float *sK = sDO + kTM * (E + 4);              // [64, E + 4]
  float *sV = sK + kTN * (E + 4);               // [64, E + 4]
  float *sDS = sV + kTN * (E + 4);              // [64, 68]
  float *sD = sDS + kTM * kSP;                  // [64]
  float *sLse = sD + kTM;                       // [64]
  const int ty = int(threadIdx.x) / 16, tx = int(threadIdx.x) % 16;
  const QueryRows qb = queryRows(g, kTM);
  const int64_t nh = qb.nh, h = qb.h, n = qb.n, kvh = qb.kvh, i0 = qb.i0;
  stageTile<E>(sQ, q + rowAt(g.qs, n, h, 0), g.qs[2], i0, g.l);
  stageTile<E>(sDO, dout + rowAt(g.os, n, h, 0), g.os[2], i0, g.l);
  if constexpr (kMode == kFromStash)
    stageStashedTerms(sD, sLse, dq + rowAt(g.qs, n, h, 0), g.qs[2],
                      lse + nh * g.l, i0, g.l);
  else
    stageRowTerms(sD, sLse, dout + rowAt(g.os, n, h, 0),
                  out + rowAt(g.os, n, h, 0), g.os[2], g.ev, lse + nh * g.l,
                  i0, g.l);
  // kComputeStash: this thread's parts of each row's sum_j P_ij dP_ij and
  // sum_j P_ij.
  float rowTerm[4] = {}, rowP[4] = {};
  const T *kb = k + rowAt(g.ks, n, kvh, 0);
  const T *vb = v + rowAt(g.vs, n, kvh, 0);
  const uint64_t sd = g.p > 0 ? uint64_t(*seed) : 0;
  const float dropScale = g.p > 0 ? float(1.0 / (1.0 - g.p)) : 1.f;
  float acc[4][E / 64][4] = {};
  const int64_t lastRow = minI(g.l - 1, i0 + kTM - 1);
  const int64_t sEnd = g.causal ? minI(g.s, lastRow + 1) : g.s;
  for (int64_t j0 = 0; j0 < sEnd; j0 += kTN) {
    __syncthreads();
    stageTile<E>(sK, kb, g.ks[2], j0, g.s);
    stageTile<E>(sV, vb, g.vs[2], j0, g.s);
    __syncthreads();
    float s[4][4] = {}, dp[4][4] = {};
    rowDots<E>(s, sQ, sK, ty, tx);
    rowDots<E>(dp, sDO, sV, ty, tx);
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const int64_t row = i0 + ty + 16 * i;
      const float rowLse = sLse[ty + 16 * i], rowD = sD[ty + 16 * i];
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        const int64_t col = j0 + tx + 16 * j;
        float ds = 0.f;
        if (rowLse != -INFINITY && col < g.s) {
          const float sc =
              maskedScore<T, float>(s[i][j], g, mask, n, h, row, col);
          const float p = sc == -INFINITY ? 0.f : expf(sc - rowLse);
          float d = dp[i][j];
          if (g.p > 0)
            d = keepProb(g, sd, nh, row, col) ? d * dropScale : 0.f;
          ds = p * (d - rowD);
          if constexpr (kMode == kComputeStash) {
            rowTerm[i] = fmaf(p, d, rowTerm[i]);
            rowP[i] += p;
          }
        }
        if constexpr (kMode != kComputeStash)
          sDS[(ty + 16 * i) * kSP + tx + 16 * j] = ds;
      }
    }
    if constexpr (kMode != kComputeStash) {
      __syncthreads(); // sDS is complete
      tileTimes<E>(acc, sDS, sK, ty, tx);
    }
  }
  if constexpr (kMode == kComputeStash) {
    // Each row's 16 threads (tx) are 16 consecutive lanes of one warp.
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      float t = rowTerm[i], ps = rowP[i];
      for (int o = 8; o > 0; o >>= 1) {
        t += __shfl_xor_sync(kFull, t, o);
        ps += __shfl_xor_sync(kFull, ps, o);
      }
      const int64_t row = i0 + ty + 16 * i;
      if (tx == 0 && row < g.l)
        stashRowTerm(dq + rowAt(g.qs, n, h, row), ps > 0.f ? t / ps : 0.f);
    }
    return;
  }
  const float mul[4] = {float(g.scale), float(g.scale), float(g.scale),
                        float(g.scale)};
  // Every thread has read its rows' stashed terms (stageStashedTerms):
  // the rows may be overwritten now.
  if constexpr (kMode == kFromStash)
    __syncthreads();
  storeRows<E>(dq + rowAt(g.qs, n, h, 0), g.qs[2], i0, g.l, acc, mul, ty,
               tx);
}

/// Key and value gradients: block (n, kv head, key rows [64 rb, +64)),
/// over the group's query heads in order and their query tiles in order:
/// dv_j += P~_ij dO_i, dk_j += scale * dS_ij q_i. `stash`: grad_query
/// holding the row terms D_i (RowTerms), or nullptr for dO_i . O_i.
template <int E, typename T = float>
__global__ void __launch_bounds__(kTThreads)
    attentionBackwardKVTiled(const T *dout, const T *q, const T *k,
                             const T *v, const T *out, const float *lse,
                             const void *mask, const int64_t *seed, T *dk,
                             T *dv, const T *stash, AttnGeom g) {
  extern __shared__ float4 smem4[];
  float *sK = reinterpret_cast<float *>(smem4); // [64, E + 4] key rows
  float *sV = sK + kTM * (E + 4);               // [64, E + 4]
  float *sQ = sV + kTM * (E + 4);               // [64, E + 4] query rows
  float *sDO = sQ + kTN * (E + 4);              // [64, E + 4]
  float *sP = sDO + kTN * (E + 4);              // [64 keys, 68]
  float *sDS = sP + kTM * kSP;                  // [64 keys, 68]
  float *sD = sDS + kTM * kSP;                  // [64 queries]
  float *sLse = sD + kTN;                       // [64 queries]
  const int ty = int(threadIdx.x) / 16, tx = int(threadIdx.x) % 16;
  const int64_t rowBlocks = (g.s + kTM - 1) / kTM;
  const int64_t rb = int64_t(blockIdx.x) % rowBlocks;
  const int64_t nk = int64_t(blockIdx.x) / rowBlocks; // n * hkv + kvh
  const int64_t kvh = nk % g.hkv, n = nk / g.hkv;
  const int64_t group = g.hq / g.hkv;
  const int64_t j0 = rb * kTM;
  stageTile<E>(sK, k + rowAt(g.ks, n, kvh, 0), g.ks[2], j0, g.s);
  stageTile<E>(sV, v + rowAt(g.vs, n, kvh, 0), g.vs[2], j0, g.s);
  const uint64_t sd = g.p > 0 ? uint64_t(*seed) : 0;
  const float dropScale = g.p > 0 ? float(1.0 / (1.0 - g.p)) : 1.f;
  float accK[4][E / 64][4] = {}, accV[4][E / 64][4] = {};
  // Causal: query i sees key j iff j <= i, so the block's first key row
  // bounds the first query tile.
  const int64_t iStart = g.causal ? j0 / kTN * kTN : 0;
  for (int64_t hh = 0; hh < group; ++hh) {
    const int64_t h = kvh * group + hh, nh = n * g.hq + h;
    const T *qb = q + rowAt(g.qs, n, h, 0);
    const T *dob = dout + rowAt(g.os, n, h, 0);
    for (int64_t i0 = iStart; i0 < g.l; i0 += kTN) {
      __syncthreads();
      stageTile<E>(sQ, qb, g.qs[2], i0, g.l);
      stageTile<E>(sDO, dob, g.os[2], i0, g.l);
      bool stashed = false;
      if constexpr (kIsLow<T>) {
        if (stash) {
          stageStashedTerms(sD, sLse, stash + rowAt(g.qs, n, h, 0), g.qs[2],
                            lse + nh * g.l, i0, g.l);
          stashed = true;
        }
      }
      if (!stashed)
        stageRowTerms(sD, sLse, dob, out + rowAt(g.os, n, h, 0), g.os[2],
                      g.ev, lse + nh * g.l, i0, g.l);
      __syncthreads();
      float s[4][4] = {}, dp[4][4] = {};
      rowDots<E>(s, sK, sQ, ty, tx);  // [key, query]
      rowDots<E>(dp, sV, sDO, ty, tx);
#pragma unroll
      for (int a = 0; a < 4; ++a) {
        const int64_t col = j0 + ty + 16 * a; // the key
#pragma unroll
        for (int b = 0; b < 4; ++b) {
          const int qi = tx + 16 * b;
          const int64_t row = i0 + qi; // the query
          float pd = 0.f, ds = 0.f;
          if (sLse[qi] != -INFINITY && col < g.s) {
            const float sc =
                maskedScore<T, float>(s[a][b], g, mask, n, h, row, col);
            const float p = sc == -INFINITY ? 0.f : expf(sc - sLse[qi]);
            float d = dp[a][b];
            pd = p;
            if (g.p > 0) {
              const bool keep = keepProb(g, sd, nh, row, col);
              pd = keep ? p * dropScale : 0.f;
              d = keep ? d * dropScale : 0.f;
            }
            ds = p * (d - sD[qi]);
          }
          sP[(ty + 16 * a) * kSP + qi] = pd;
          sDS[(ty + 16 * a) * kSP + qi] = ds;
        }
      }
      __syncthreads(); // sP and sDS are complete
      tileTimes<E>(accV, sP, sDO, ty, tx);
      tileTimes<E>(accK, sDS, sQ, ty, tx);
    }
  }
  const float one[4] = {1.f, 1.f, 1.f, 1.f};
  const float mul[4] = {float(g.scale), float(g.scale), float(g.scale),
                        float(g.scale)};
  storeRows<E>(dk + rowAt(g.ks, n, kvh, 0), g.ks[2], j0, g.s, accK, mul, ty,
               tx);
  storeRows<E>(dv + rowAt(g.vs, n, kvh, 0), g.vs[2], j0, g.s, accV, one, ty,
               tx);
}

//===----------------------------------------------------------------------===//
// Operand checks and launches
//===----------------------------------------------------------------------===//

/// Checks q [N,Hq,L,E], k [N,Hkv,S,E], v [N,Hkv,S,Ev] (layout bhld) or
/// q [N,L,Hq,E], k [N,S,Hkv,E], v [N,S,Hkv,Ev] (layout blhd, the token
/// layout: out, grad_out and the gradients likewise), the extras (mask
/// when has_mask, seed when dropout_p > 0) and fills `g`, whose strides
/// then address either layout; `mask` and `seed` point at the extras' data
/// (nullptr when absent). `first` is the index of the query among the
/// inputs.
std::string attentionGeom(const CudaKernelArgs &a, const char *op,
                          size_t first, AttnGeom &g, const void *&mask,
                          const int64_t *&seed) {
  // The operand rules are the host's (Kernels/AttentionOperands.h); the
  // extras follow query, key, value (and grad_out, out, lse backward).
  AttentionOperands o;
  if (auto e = resolveAttention(a.inputs, a.attrs, op, first,
                                first + 3 + (first ? 2 : 0), o,
                                /*lowFloats=*/true);
      !e.empty())
    return e;
  if (o.e > 32 * kMaxPerLane || o.ev > 32 * kMaxPerLane)
    return std::string(op) + ": head sizes above " +
           std::to_string(32 * kMaxPerLane) +
           " are not supported by the CUDA kernel, got " +
           std::to_string(o.e) + " and " + std::to_string(o.ev);
  g.n = o.n;
  g.hq = o.hq;
  g.hkv = o.hkv;
  g.l = o.l;
  g.s = o.s;
  g.e = o.e;
  g.ev = o.ev;
  g.scale = o.scale;
  g.causal = o.causal;
  g.p = o.p;
  g.offset = o.offset;
  g.maskKind = !o.mask ? 0 : o.boolMask ? 1 : 2;
  for (int d = 0; d < 4; ++d)
    g.mstr[d] = o.mstride[d];
  mask = o.mask ? o.mask->data : nullptr;
  seed = o.seed ? o.seed->as<int64_t>() : nullptr;
  // Strides (batch, head, row): [N, H, L, E] in bhld, [N, L, H, E] in blhd.
  auto strides = [&o](int64_t *st, int64_t h, int64_t rows, int64_t width) {
    st[0] = h * rows * width;
    st[1] = o.tokens ? width : rows * width;
    st[2] = o.tokens ? h * width : width;
  };
  strides(g.qs, g.hq, g.l, g.e);
  strides(g.ks, g.hkv, g.s, g.e);
  strides(g.vs, g.hkv, g.s, g.ev);
  strides(g.os, g.hq, g.l, g.ev);
  return "";
}

/// The shape of out (and grad_out): [N,Hq,L,Ev], or [N,L,Hq,Ev] in the
/// token layout.
std::vector<int64_t> outShape(const CudaKernelArgs &a, const AttnGeom &g) {
  if (a.attrs.getString("layout", "bhld") == "blhd")
    return {g.n, g.l, g.hq, g.ev};
  return {g.n, g.hq, g.l, g.ev};
}

/// Shared memory of a launch; raises the kernel's dynamic limit above
/// 48 KiB when needed (Hopper: up to 227 KiB), or says it cannot.
template <typename K>
std::string sharedMemory(K kernel, size_t bytes, const char *op) {
  if (bytes <= 48 * 1024)
    return "";
  cudaError_t e = cudaFuncSetAttribute(
      kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(bytes));
  if (e != cudaSuccess)
    return std::string(op) + ": the head sizes need " +
           std::to_string(bytes) + " bytes of shared memory per block: " +
           cudaErrorText("cudaFuncSetAttribute", e);
  return "";
}

std::string blocksOf(int64_t blocks, const char *op, unsigned &out) {
  if (blocks > INT_MAX)
    return std::string(op) + ": too many rows for one launch";
  out = unsigned(std::max<int64_t>(1, blocks));
  return "";
}

/// Whether the register-tiled kernels take a launch: fp32, bf16 or f16
/// (loaded to f32 tiles), E = Ev of 64 or 128, rows that start on 16-byte
/// boundaries for f32 (the float4 reads) and 8-byte ones for bf16/f16
/// (strides of a multiple of 4 elements, pointers 16-byte aligned).
bool tiledFits(const AttnGeom &g, DType dt,
               std::initializer_list<const void *> ptrs) {
  if ((dt != DType::F32 && !isLowFloat(dt)) || g.e != g.ev ||
      (g.e != 64 && g.e != 128))
    return false;
  for (const int64_t *st : {g.qs, g.ks, g.vs, g.os})
    for (int d = 0; d < 3; ++d)
      if (st[d] % 4)
        return false;
  for (const void *p : ptrs)
    if (reinterpret_cast<uintptr_t>(p) % 16)
      return false;
  return true;
}

/// Shared memory of the tiled kernels, in bytes: `tiles` [64, E + 4]
/// operand tiles, `scores` [64, 68] score tiles and `rows` row terms.
size_t tiledBytes(int64_t e, int tiles, int scores, int rows) {
  return sizeof(float) *
         size_t(tiles * kTM * (e + 4) + scores * kTM * kSP + rows * kTM);
}

std::string kAttention(const CudaKernelArgs &a) {
  const char *op = "attention";
  AttnGeom g;
  const void *mask = nullptr;
  const int64_t *seed = nullptr;
  if (auto e = attentionGeom(a, op, 0, g, mask, seed); !e.empty())
    return e;
  const TensorView &out = a.outputs[0], &lse = a.outputs[1];
  const TensorView &q = a.inputs[0];
  // bf16/f16: out of the query's type, the log-sum-exp f32 (the dialect's
  // statistics type); computed in f32 and rounded once.
  DType statType = isLowFloat(q.dtype) ? DType::F32 : q.dtype;
  if (out.shape != outShape(a, g) ||
      lse.shape != std::vector<int64_t>{g.n, g.hq, g.l} ||
      out.dtype != q.dtype || lse.dtype != statType)
    return std::string(op) + ": results must be out [N,Hq,L,Ev] ([N,L,Hq,Ev] "
                             "in layout blhd) of the query's dtype and lse "
                             "[N,Hq,L] of its statistics type (f32 for "
                             "bf16/f16)";
  if (g.n * g.hq * g.l == 0)
    return "";
  // S == 0 runs too: every row is empty (out 0, lse -inf).
  unsigned blocks;
  if (auto e = blocksOf(g.n * g.hq * ((g.l + kWarps - 1) / kWarps), op,
                        blocks);
      !e.empty())
    return e;
  if (tiledFits(g, q.dtype, {q.data, a.inputs[1].data, a.inputs[2].data,
                             out.data})) {
    unsigned tb;
    if (auto e = blocksOf(g.n * g.hq * ((g.l + kTM - 1) / kTM), op, tb);
        !e.empty())
      return e;
    auto launch = [&](auto kernel, auto tag) -> std::string {
      using T = decltype(tag);
      size_t bytes = tiledBytes(g.e, 3, 1, 0);
      if (auto e = sharedMemory(kernel, bytes, op); !e.empty())
        return e;
      kernel<<<tb, kTThreads, bytes, a.ctx.stream>>>(
          q.as<T>(), a.inputs[1].as<T>(), a.inputs[2].as<T>(), mask, seed,
          out.as<T>(), lse.as<float>(), g);
      return launched(op);
    };
    switch (q.dtype) {
    case DType::BF16:
      return g.e == 64
                 ? launch(attentionForwardTiled<64, __nv_bfloat16>,
                          __nv_bfloat16())
                 : launch(attentionForwardTiled<128, __nv_bfloat16>,
                          __nv_bfloat16());
    case DType::F16:
      return g.e == 64 ? launch(attentionForwardTiled<64, __half>, __half())
                       : launch(attentionForwardTiled<128, __half>, __half());
    default:
      return g.e == 64 ? launch(attentionForwardTiled<64>, float())
                       : launch(attentionForwardTiled<128>, float());
    }
  }
  auto run = [&](auto tag) -> std::string {
    using T = decltype(tag);
    using A = Acc<T>; // T for f32/f64, f32 for bf16/f16
    size_t bytes = sizeof(A) * size_t(kTile * (g.e + 1) + kTile * (g.ev + 1) +
                                      kWarps * g.e);
    auto kernel = attentionForwardKernel<T, A>;
    if (auto e = sharedMemory(kernel, bytes, op); !e.empty())
      return e;
    kernel<<<blocks, 32 * kWarps, bytes, a.ctx.stream>>>(
        q.as<T>(), a.inputs[1].as<T>(), a.inputs[2].as<T>(), mask, seed,
        out.as<T>(), lse.as<A>(), g);
    return launched(op);
  };
  std::string err = "attention: unsupported dtype";
  dispatchFloat(q.dtype, [&](auto tag) { err = run(tag); });
  return err;
}

std::string kAttentionBackward(const CudaKernelArgs &a) {
  const char *op = "attention_backward";
  AttnGeom g;
  const void *mask = nullptr;
  const int64_t *seed = nullptr;
  if (auto e = attentionGeom(a, op, 1, g, mask, seed); !e.empty())
    return e;
  const TensorView &dout = a.inputs[0], &q = a.inputs[1], &k = a.inputs[2],
                   &v = a.inputs[3], &out = a.inputs[4], &lse = a.inputs[5];
  const TensorView &dq = a.outputs[0], &dk = a.outputs[1],
                   &dv = a.outputs[2];
  std::vector<int64_t> oshape = outShape(a, g);
  DType statType = isLowFloat(q.dtype) ? DType::F32 : q.dtype;
  if (dout.shape != oshape || out.shape != oshape ||
      lse.shape != std::vector<int64_t>{g.n, g.hq, g.l} ||
      dout.dtype != q.dtype || out.dtype != q.dtype ||
      lse.dtype != statType)
    return std::string(op) + ": grad_out and out must be [N,Hq,L,Ev] "
                             "([N,L,Hq,Ev] in layout blhd) of the query's "
                             "dtype and lse [N,Hq,L] of its statistics type "
                             "(f32 for bf16/f16)";
  if (auto e = needSame(q, dq, op, "query", "grad_query"); !e.empty())
    return e;
  if (auto e = needSame(k, dk, op, "key", "grad_key"); !e.empty())
    return e;
  if (auto e = needSame(v, dv, op, "value", "grad_value"); !e.empty())
    return e;
  // Empty index spaces: the gradients that have elements are zero.
  if (g.n * g.hq * g.l == 0 || g.s == 0) {
    for (const TensorView *t : {&dq, &dk, &dv})
      if (t->bytes())
        if (cudaError_t e = cudaMemsetAsync(t->data, 0, t->bytes(),
                                            a.ctx.stream);
            e != cudaSuccess)
          return cudaErrorText("cudaMemsetAsync", e);
    return "";
  }
  if (tiledFits(g, q.dtype, {dout.data, q.data, k.data, v.data, out.data,
                             dq.data, dk.data, dv.data})) {
    unsigned qb, kvb;
    if (auto e = blocksOf(g.n * g.hq * ((g.l + kTM - 1) / kTM), op, qb);
        !e.empty())
      return e;
    if (auto e = blocksOf(g.n * g.hkv * ((g.s + kTM - 1) / kTM), op, kvb);
        !e.empty())
      return e;
    // f32: the query gradient, then the key/value gradients. bf16/f16
    // (RowTerms): the row terms into grad_query, the key/value gradients
    // reading them, then the query gradient over them.
    auto launch = [&](auto stashK, auto qk, auto kvk, auto tag) -> std::string {
      using T = decltype(tag);
      constexpr bool low = kIsLow<T>;
      size_t qBytes = tiledBytes(g.e, 4, 1, 2),
             kvBytes = tiledBytes(g.e, 4, 2, 2);
      if (auto e = sharedMemory(qk, qBytes, op); !e.empty())
        return e;
      if (auto e = sharedMemory(kvk, kvBytes, op); !e.empty())
        return e;
      if (low) {
        if (auto e = sharedMemory(stashK, qBytes, op); !e.empty())
          return e;
        stashK<<<qb, kTThreads, qBytes, a.ctx.stream>>>(
            dout.as<T>(), q.as<T>(), k.as<T>(), v.as<T>(), out.as<T>(),
            lse.as<float>(), mask, seed, dq.as<T>(), g);
        if (auto e = launched(op); !e.empty())
          return e;
        kvk<<<kvb, kTThreads, kvBytes, a.ctx.stream>>>(
            dout.as<T>(), q.as<T>(), k.as<T>(), v.as<T>(), out.as<T>(),
            lse.as<float>(), mask, seed, dk.as<T>(), dv.as<T>(), dq.as<T>(),
            g);
        if (auto e = launched(op); !e.empty())
          return e;
      }
      qk<<<qb, kTThreads, qBytes, a.ctx.stream>>>(
          dout.as<T>(), q.as<T>(), k.as<T>(), v.as<T>(), out.as<T>(),
          lse.as<float>(), mask, seed, dq.as<T>(), g);
      if (auto e = launched(op); !e.empty())
        return e;
      if (low)
        return "";
      kvk<<<kvb, kTThreads, kvBytes, a.ctx.stream>>>(
          dout.as<T>(), q.as<T>(), k.as<T>(), v.as<T>(), out.as<T>(),
          lse.as<float>(), mask, seed, dk.as<T>(), dv.as<T>(), nullptr, g);
      return launched(op);
    };
    auto byHead = [&](auto tag) -> std::string {
      using T = decltype(tag);
      constexpr int kQ = kIsLow<T> ? kFromStash : kFromOutput;
      return g.e == 64
                 ? launch(attentionBackwardQTiled<64, T, kComputeStash>,
                          attentionBackwardQTiled<64, T, kQ>,
                          attentionBackwardKVTiled<64, T>, tag)
                 : launch(attentionBackwardQTiled<128, T, kComputeStash>,
                          attentionBackwardQTiled<128, T, kQ>,
                          attentionBackwardKVTiled<128, T>, tag);
    };
    switch (q.dtype) {
    case DType::BF16: return byHead(__nv_bfloat16());
    case DType::F16: return byHead(__half());
    default: return byHead(float());
    }
  }
  unsigned qBlocks, kvBlocks;
  if (auto e = blocksOf(g.n * g.hq * ((g.l + kWarps - 1) / kWarps), op,
                        qBlocks);
      !e.empty())
    return e;
  if (auto e = blocksOf(g.n * g.hkv * ((g.s + kWarps - 1) / kWarps), op,
                        kvBlocks);
      !e.empty())
    return e;
  auto run = [&](auto tag) -> std::string {
    using T = decltype(tag);
    using A = Acc<T>; // T for f32/f64, f32 for bf16/f16
    size_t qBytes = sizeof(A) * size_t(kTile * (g.e + 1) + kTile * (g.ev + 1) +
                                       kWarps * (g.e + g.ev));
    size_t kvBytes = sizeof(A) * size_t(kTile * (g.e + 1) +
                                        kTile * (g.ev + 1) + 2 * kTile +
                                        kWarps * (g.e + g.ev));
    // bf16/f16 stash the row terms (RowTerms) in the first two elements
    // of each grad_query row: rows of one element keep dO . O.
    const bool stash = kIsLow<T> && g.e >= 2;
    auto qk = stash ? attentionBackwardQKernel<T, A, kFromStash>
                    : attentionBackwardQKernel<T, A, kFromOutput>;
    auto stashK = attentionBackwardQKernel<T, A, kComputeStash>;
    auto kvk = attentionBackwardKVKernel<T, A>;
    if (auto e = sharedMemory(qk, qBytes, op); !e.empty())
      return e;
    if (auto e = sharedMemory(kvk, kvBytes, op); !e.empty())
      return e;
    if (stash) {
      if (auto e = sharedMemory(stashK, qBytes, op); !e.empty())
        return e;
      stashK<<<qBlocks, 32 * kWarps, qBytes, a.ctx.stream>>>(
          dout.as<T>(), q.as<T>(), k.as<T>(), v.as<T>(), out.as<T>(),
          lse.as<A>(), mask, seed, dq.as<T>(), g);
      if (auto e = launched(op); !e.empty())
        return e;
    }
    kvk<<<kvBlocks, 32 * kWarps, kvBytes, a.ctx.stream>>>(
        dout.as<T>(), q.as<T>(), k.as<T>(), v.as<T>(), out.as<T>(),
        lse.as<A>(), mask, seed, dk.as<T>(), dv.as<T>(),
        stash ? dq.as<T>() : nullptr, g);
    if (auto e = launched(op); !e.empty())
      return e;
    qk<<<qBlocks, 32 * kWarps, qBytes, a.ctx.stream>>>(
        dout.as<T>(), q.as<T>(), k.as<T>(), v.as<T>(), out.as<T>(),
        lse.as<A>(), mask, seed, dq.as<T>(), g);
    return launched(op);
  };
  std::string err = "attention_backward: unsupported dtype";
  dispatchFloat(q.dtype, [&](auto tag) { err = run(tag); });
  return err;
}

} // namespace

const std::vector<Entry> &attentionEntries() {
  static const std::vector<Entry> t = {
      {"offload.attention", kAttention, true},
      {"offload.attention_backward", kAttentionBackward, true},
  };
  return t;
}

} // namespace cuda
} // namespace rt
} // namespace offload
