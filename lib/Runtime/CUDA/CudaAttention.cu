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
// Speed: the dot products read both operands from shared memory (one
// broadcast, one row per lane), so the kernels are bound by shared-memory
// bandwidth at about an eighth of the fp32 FMA rate; tensor-core paths
// (bf16, cuDNN's SDPA) come with mixed precision. The products and sums are
// explicit fma() calls: the build's --fmad=false (which keeps the
// elementwise kernels bit-identical to the host) does not apply to them,
// and these kernels are not bit-identical to the host's anyway. Head sizes
// up to 256.
//
//===----------------------------------------------------------------------===//

#include "CudaCommon.cuh"

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
};

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
      sc += A(static_cast<const T *>(mask)[off]);
    }
  }
  return sc;
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
                          int64_t width) {
  for (int64_t t = threadIdx.x; t < cnt * width; t += blockDim.x) {
    int64_t r = t / width, d = t % width;
    dst[r * (width + 1) + d] = A(src[(r0 + r) * width + d]);
  }
}

/// Forward: block (n, h, rows [rb*kWarps, +kWarps)); warp w owns query row
/// i. Online softmax over tiles of kTile keys.
template <typename T, typename A>
__global__ void attentionForwardKernel(const T *q, const T *k, const T *v,
                                       const void *mask, const int64_t *seed,
                                       T *out, T *lse, AttnGeom g) {
  extern __shared__ unsigned char smem[];
  A *sK = reinterpret_cast<A *>(smem);      // kTile x (e + 1)
  A *sV = sK + kTile * (g.e + 1);           // kTile x (ev + 1)
  A *sQ = sV + kTile * (g.ev + 1);          // kWarps x e
  const int warp = int(threadIdx.x) / 32, lane = int(threadIdx.x) % 32;
  // Accumulator chunks in use: every 32nd element of rows of e or ev.
  const int ce = int((g.e + 31) / 32), cv = int((g.ev + 31) / 32);
  const int cmax = ce > cv ? ce : cv;
  (void)ce, (void)cv, (void)cmax;
  const int64_t rowBlocks = (g.l + kWarps - 1) / kWarps;
  const int64_t rb = int64_t(blockIdx.x) % rowBlocks;
  const int64_t nh = int64_t(blockIdx.x) / rowBlocks;
  const int64_t h = nh % g.hq, n = nh / g.hq;
  const int64_t kvh = h / (g.hq / g.hkv);
  const int64_t i = rb * kWarps + warp;
  const bool active = i < g.l;
  const T *kb = k + (n * g.hkv + kvh) * g.s * g.e;
  const T *vb = v + (n * g.hkv + kvh) * g.s * g.ev;
  A *myQ = sQ + warp * g.e;
  if (active)
    for (int64_t d = lane; d < g.e; d += 32)
      myQ[d] = A(q[(nh * g.l + i) * g.e + d]);
  const uint64_t sd = g.p > 0 ? uint64_t(*seed) : 0;
  const A dropScale = g.p > 0 ? A(1.0 / (1.0 - g.p)) : A(1);
  A acc[kMaxPerLane];
  for (int c = 0; c < kMaxPerLane; ++c)
    acc[c] = 0;
  A m = A(-INFINITY), lsum = 0;
  const int64_t lastRow = minI(g.l - 1, rb * kWarps + kWarps - 1);
  const int64_t sEnd = g.causal ? minI(g.s, lastRow + 1) : g.s;
  for (int64_t j0 = 0; j0 < sEnd; j0 += kTile) {
    const int cnt = int(minI(kTile, g.s - j0));
    __syncthreads(); // the previous tile is consumed (and sQ is written)
    stageRows(sK, kb, j0, cnt, g.e);
    stageRows(sV, vb, j0, cnt, g.ev);
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
  T *orow = out + (nh * g.l + i) * g.ev;
  for (int c = 0; c < kMaxPerLane; ++c) {
    int64_t d = lane + 32 * c;
    if (d < g.ev)
      orow[d] = T(acc[c] * inv);
  }
  if (lane == 0)
    lse[nh * g.l + i] =
        m == A(-INFINITY) ? T(-INFINITY) : T(m + A(log(lsum)));
}

/// Query gradient: block (n, h, query rows), warp w owns query row i:
/// dq_i = scale * sum_j dS_ij k_j over key tiles in order, with
/// dS_ij = P_ij (dP_ij - D_i), P_ij = exp(score - lse_i), D_i = dO_i . O_i.
template <typename T, typename A>
__global__ void attentionBackwardQKernel(const T *dout, const T *q,
                                         const T *k, const T *v, const T *out,
                                         const T *lse, const void *mask,
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
  const int64_t rowBlocks = (g.l + kWarps - 1) / kWarps;
  const int64_t rb = int64_t(blockIdx.x) % rowBlocks;
  const int64_t nh = int64_t(blockIdx.x) / rowBlocks;
  const int64_t h = nh % g.hq, n = nh / g.hq;
  const int64_t kvh = h / (g.hq / g.hkv);
  const int64_t i = rb * kWarps + warp;
  const bool active = i < g.l;
  const T *kb = k + (n * g.hkv + kvh) * g.s * g.e;
  const T *vb = v + (n * g.hkv + kvh) * g.s * g.ev;
  A *myQ = sQ + warp * g.e, *myDO = sDO + warp * g.ev;
  A dsum = 0, rowLse = A(-INFINITY);
  if (active) {
    for (int64_t d = lane; d < g.e; d += 32)
      myQ[d] = A(q[(nh * g.l + i) * g.e + d]);
    const int64_t o = (nh * g.l + i) * g.ev;
    for (int64_t d = lane; d < g.ev; d += 32) {
      myDO[d] = A(dout[o + d]);
      dsum += A(dout[o + d]) * A(out[o + d]);
    }
    dsum = warpSum(dsum);
    rowLse = A(lse[nh * g.l + i]);
  }
  const uint64_t sd = g.p > 0 ? uint64_t(*seed) : 0;
  const A dropScale = g.p > 0 ? A(1.0 / (1.0 - g.p)) : A(1);
  A acc[kMaxPerLane];
  for (int c = 0; c < kMaxPerLane; ++c)
    acc[c] = 0;
  const int64_t lastRow = minI(g.l - 1, rb * kWarps + kWarps - 1);
  const int64_t sEnd = g.causal ? minI(g.s, lastRow + 1) : g.s;
  for (int64_t j0 = 0; j0 < sEnd; j0 += kTile) {
    const int cnt = int(minI(kTile, g.s - j0));
    __syncthreads();
    stageRows(sK, kb, j0, cnt, g.e);
    stageRows(sV, vb, j0, cnt, g.ev);
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
    }
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
  if (!active)
    return;
  T *row = dq + (nh * g.l + i) * g.e;
  for (int c = 0; c < kMaxPerLane; ++c) {
    int64_t d = lane + 32 * c;
    if (d < g.e)
      row[d] = T(acc[c] * A(g.scale));
  }
}

/// Key and value gradients: block (n, kv head, key rows), warp w owns key
/// row j: over the query heads of the group in order and tiles of kTile
/// queries in order, dv_j += P~_ij dO_i and dk_j += scale * dS_ij q_i.
template <typename T, typename A>
__global__ void attentionBackwardKVKernel(const T *dout, const T *q,
                                          const T *k, const T *v,
                                          const T *out, const T *lse,
                                          const void *mask,
                                          const int64_t *seed, T *dk, T *dv,
                                          AttnGeom g) {
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
      myK[d] = A(k[(nk * g.s + j) * g.e + d]);
    for (int64_t d = lane; d < g.ev; d += 32)
      myV[d] = A(v[(nk * g.s + j) * g.ev + d]);
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
    const T *qb = q + nh * g.l * g.e;
    const T *dob = dout + nh * g.l * g.ev;
    for (int64_t i0 = iStart; i0 < g.l; i0 += kTile) {
      const int cnt = int(minI(kTile, g.l - i0));
      __syncthreads();
      stageRows(sQ, qb, i0, cnt, g.e);
      stageRows(sDO, dob, i0, cnt, g.ev);
      // D_i = dO_i . O_i of the tile's rows: warp w takes rows w, w + kWarps..
      for (int r = warp; r < cnt; r += kWarps) {
        const int64_t o = (nh * g.l + i0 + r) * g.ev;
        A part = 0;
        for (int64_t d = lane; d < g.ev; d += 32)
          part += A(dout[o + d]) * A(out[o + d]);
        part = warpSum(part);
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
      dk[(nk * g.s + j) * g.e + d] = T(accK[c] * A(g.scale));
    if (d < g.ev)
      dv[(nk * g.s + j) * g.ev + d] = T(accV[c]);
  }
}

//===----------------------------------------------------------------------===//
// Operand checks and launches
//===----------------------------------------------------------------------===//

/// Checks q [N,Hq,L,E], k [N,Hkv,S,E], v [N,Hkv,S,Ev], the extras (mask
/// when has_mask, seed when dropout_p > 0) and fills `g`; `mask` and `seed`
/// point at the extras' data (nullptr when absent). `first` is the index of
/// the query among the inputs.
std::string attentionGeom(const CudaKernelArgs &a, const char *op,
                          size_t first, AttnGeom &g, const void *&mask,
                          const int64_t *&seed) {
  const TensorView &q = a.inputs[first], &k = a.inputs[first + 1],
                   &v = a.inputs[first + 2];
  if (auto e = needFloat(q, op, "query"); !e.empty())
    return e;
  if (auto e = needDType(k, q.dtype, op, "key"); !e.empty())
    return e;
  if (auto e = needDType(v, q.dtype, op, "value"); !e.empty())
    return e;
  if (q.rank() != 4 || k.rank() != 4 || v.rank() != 4)
    return std::string(op) + ": query, key and value must be rank 4, got " +
           shapeStr(q.shape) + ", " + shapeStr(k.shape) + ", " +
           shapeStr(v.shape);
  g.n = q.shape[0];
  g.hq = q.shape[1];
  g.l = q.shape[2];
  g.e = q.shape[3];
  g.hkv = k.shape[1];
  g.s = k.shape[2];
  g.ev = v.shape[3];
  if (k.shape[0] != g.n || v.shape[0] != g.n || k.shape[3] != g.e ||
      v.shape[1] != g.hkv || v.shape[2] != g.s || g.hkv <= 0 ||
      g.hq % g.hkv != 0)
    return std::string(op) + ": shapes " + shapeStr(q.shape) + ", " +
           shapeStr(k.shape) + ", " + shapeStr(v.shape) +
           " are not query [N,Hq,L,E], key [N,Hkv,S,E], value [N,Hkv,S,Ev] "
           "with Hq a multiple of Hkv";
  if (g.e > 32 * kMaxPerLane || g.ev > 32 * kMaxPerLane)
    return std::string(op) + ": head sizes above " +
           std::to_string(32 * kMaxPerLane) +
           " are not supported by the CUDA kernel, got " +
           std::to_string(g.e) + " and " + std::to_string(g.ev);
  g.scale = a.attrs.getFloat("scale", 1.0);
  g.causal = a.attrs.getInt("is_causal", 0) != 0;
  bool hasMask = a.attrs.getInt("has_mask", 0) != 0;
  g.p = a.attrs.getFloat("dropout_p", 0.0);
  g.offset = uint64_t(a.attrs.getInt("offset", 0));
  if (!(g.p >= 0.0 && g.p < 1.0))
    return std::string(op) + ": dropout_p must be in [0, 1)";
  size_t want = first + 3 + (first ? 2 : 0) + (hasMask ? 1 : 0) +
                (g.p > 0 ? 1 : 0);
  if (a.inputs.size() != want)
    return std::string(op) + ": expects " + std::to_string(want) +
           " operands (the mask when has_mask, then the seed when "
           "dropout_p > 0), got " + std::to_string(a.inputs.size());
  size_t x = first + 3 + (first ? 2 : 0);
  g.maskKind = 0;
  for (int d = 0; d < 4; ++d)
    g.mstr[d] = 0;
  mask = nullptr;
  if (hasMask) {
    const TensorView &m = a.inputs[x++];
    if (m.dtype == DType::Bool)
      g.maskKind = 1;
    else if (m.dtype == q.dtype)
      g.maskKind = 2;
    else
      return std::string(op) + ": mask must be bool or the query's dtype, "
                               "got " + dtypeName(m.dtype);
    const int64_t full[4] = {g.n, g.hq, g.l, g.s};
    if (m.rank() > 4)
      return std::string(op) + ": mask " + shapeStr(m.shape) +
             " does not broadcast to [N,Hq,L,S]";
    int64_t stride = 1;
    for (int64_t r = m.rank() - 1; r >= 0; --r) {
      int64_t dim = 4 - (m.rank() - r);
      int64_t size = m.shape[size_t(r)];
      if (size != 1 && size != full[dim])
        return std::string(op) + ": mask " + shapeStr(m.shape) +
               " does not broadcast to [N,Hq,L,S]";
      g.mstr[dim] = size == 1 ? 0 : stride;
      stride *= size;
    }
    mask = m.data;
  }
  seed = nullptr;
  if (g.p > 0) {
    const TensorView &sd = a.inputs[x];
    if (sd.dtype != DType::I64 || sd.numel() != 1)
      return std::string(op) + ": the dropout seed must be one i64";
    seed = sd.as<int64_t>();
  }
  return "";
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

std::string kAttention(const CudaKernelArgs &a) {
  const char *op = "attention";
  AttnGeom g;
  const void *mask = nullptr;
  const int64_t *seed = nullptr;
  if (auto e = attentionGeom(a, op, 0, g, mask, seed); !e.empty())
    return e;
  const TensorView &out = a.outputs[0], &lse = a.outputs[1];
  const TensorView &q = a.inputs[0];
  if (out.shape != std::vector<int64_t>{g.n, g.hq, g.l, g.ev} ||
      lse.shape != std::vector<int64_t>{g.n, g.hq, g.l} ||
      out.dtype != q.dtype || lse.dtype != q.dtype)
    return std::string(op) + ": results must be out [N,Hq,L,Ev] and lse "
                             "[N,Hq,L] of the query's dtype";
  if (g.n * g.hq * g.l == 0)
    return "";
  // S == 0 runs too: every row is empty (out 0, lse -inf).
  unsigned blocks;
  if (auto e = blocksOf(g.n * g.hq * ((g.l + kWarps - 1) / kWarps), op,
                        blocks);
      !e.empty())
    return e;
  auto run = [&](auto tag) -> std::string {
    using T = decltype(tag);
    using A = T;
    size_t bytes = sizeof(A) * size_t(kTile * (g.e + 1) + kTile * (g.ev + 1) +
                                      kWarps * g.e);
    auto kernel = attentionForwardKernel<T, A>;
    if (auto e = sharedMemory(kernel, bytes, op); !e.empty())
      return e;
    kernel<<<blocks, 32 * kWarps, bytes, a.ctx.stream>>>(
        q.as<T>(), a.inputs[1].as<T>(), a.inputs[2].as<T>(), mask, seed,
        out.as<T>(), lse.as<T>(), g);
    return launched(op);
  };
  return q.dtype == DType::F32 ? run(float()) : run(double());
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
  std::vector<int64_t> oshape{g.n, g.hq, g.l, g.ev};
  if (dout.shape != oshape || out.shape != oshape ||
      lse.shape != std::vector<int64_t>{g.n, g.hq, g.l} ||
      dout.dtype != q.dtype || out.dtype != q.dtype ||
      lse.dtype != q.dtype)
    return std::string(op) + ": grad_out and out must be [N,Hq,L,Ev] and "
                             "lse [N,Hq,L], of the query's dtype";
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
    using A = T;
    size_t qBytes = sizeof(A) * size_t(kTile * (g.e + 1) + kTile * (g.ev + 1) +
                                       kWarps * (g.e + g.ev));
    size_t kvBytes = sizeof(A) * size_t(kTile * (g.e + 1) +
                                        kTile * (g.ev + 1) + 2 * kTile +
                                        kWarps * (g.e + g.ev));
    auto qk = attentionBackwardQKernel<T, A>;
    auto kvk = attentionBackwardKVKernel<T, A>;
    if (auto e = sharedMemory(qk, qBytes, op); !e.empty())
      return e;
    if (auto e = sharedMemory(kvk, kvBytes, op); !e.empty())
      return e;
    qk<<<qBlocks, 32 * kWarps, qBytes, a.ctx.stream>>>(
        dout.as<T>(), q.as<T>(), k.as<T>(), v.as<T>(), out.as<T>(),
        lse.as<T>(), mask, seed, dq.as<T>(), g);
    if (auto e = launched(op); !e.empty())
      return e;
    kvk<<<kvBlocks, 32 * kWarps, kvBytes, a.ctx.stream>>>(
        dout.as<T>(), q.as<T>(), k.as<T>(), v.as<T>(), out.as<T>(),
        lse.as<T>(), mask, seed, dk.as<T>(), dv.as<T>(), g);
    return launched(op);
  };
  return q.dtype == DType::F32 ? run(float()) : run(double());
}

} // namespace

const std::vector<Entry> &attentionEntries() {
  static const std::vector<Entry> t = {
      {"offload.attention", kAttention},
      {"offload.attention_backward", kAttentionBackward},
  };
  return t;
}

} // namespace cuda
} // namespace rt
} // namespace offload
