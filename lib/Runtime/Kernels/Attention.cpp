//===- Attention.cpp - Fused scaled dot-product attention and its VJP -----===//
//
// Part of offload. offload.attention and offload.attention_backward
// (docs/op-semantics.md, "Attention"; the ops' descriptions in
// OffloadComputeOps.td). query [N, Hq, L, E], key [N, Hkv, S, E], value
// [N, Hkv, S, Ev]; query head h reads key/value head h / (Hq / Hkv). The
// operands after value are the mask (when has_mask) and the dropout seed
// (when dropout_p > 0).
//
// Layout (attribute `layout`): bhld, the above; blhd, the token layout,
// stores query, key, value, out and (backward) grad_out and the three
// gradients with the length and heads dims swapped: query [N, L, Hq, E],
// key [N, S, Hkv, E], value [N, S, Hkv, Ev], out [N, L, Hq, Ev]. The
// kernels read and write rows of one head through its row stride (E in
// bhld, H·E in blhd), gathering them into the same packed double buffers,
// so both layouts run the same GEMMs on the same values and give bit-
// identical results. lse is [N, Hq, L] and the mask and dropout index the
// logical [N, Hq, L, S] in either layout.
//
// Forward, per block of query rows of one (n, h), never the whole L x S
// matrix:
//   s[i, j] = scale * q_i . k_j  (+ additive mask; -inf where the boolean
//             mask is false or, is_causal, j > i)
//   lse_i   = m_i + log(sum_j exp(s_ij - m_i)),  m_i = max_j s_ij
//   p_ij    = exp(s_ij - m_i) / sum_j exp(s_ij - m_i)
//   out_i   = sum_j p~_ij v_j,  p~ = p * keep / (1 - p_drop)
// A row with no key left (m_i = -inf) has out 0 and lse -inf.
//
// Backward (FlashAttention's Algorithm 2 without the online softmax), per
// (n, key/value head): for each query head of the group in order, for each
// block of its query rows in order,
//   p = exp(s - lse), dP = (dO v^T) * keep / (1 - p_drop),
//   D_i = sum_j p_ij dP_ij / sum_j p_ij,  dS = p * (dP - D),
// so that sum_j dS_ij = 0 as in exact arithmetic (the gradient of a bias
// added to every key is exactly 0: softmax does not see a shift of a row).
// FlashAttention's D_i = dO_i . out_i is off by out's rounding when out is
// bf16/f16, the same for every key of the row: sum_j dS_ij misses 0, and
// the key-bias gradients of a bf16-mixed GPT-2 step came out 10x further
// from PyTorch's float64 step than torch.autocast's spelled-out attention.
// The division by sum_j p_ij (1 but for the rounding of lse) keeps that
// rounding a common factor of dS instead of a term of its own (sharp rows,
// Attention.Scale). The CUDA kernels compute this D for bf16/f16 too:
// CudaAttention.cu, RowTerms.
//   dQ = scale dS k,  dK += scale dS^T q,  dV += p~^T dO.
// dK and dV of a key/value head are therefore summed over its query heads
// and their row blocks in one fixed order.
//
// Precision: q, k, v (and dO) are widened to double, every product is a
// double GEMM (OpenBLAS dgemm: products of f32 values are exact in double,
// sums in double), the softmax statistics are double, and each result is
// rounded once to the output type. Temporary memory per task is
// O(block x S + S x E): two block x S double tiles and the widened key and
// value of one head (plus, backward, their double gradients).
//
// Threading: forward tasks are (n, h, row block), backward tasks (n,
// key/value head); when there are fewer tasks than threads, tasks run one
// after another and each GEMM is split over the threads (gemmParallel keeps
// every element's dot product the same). Results do not depend on the
// thread count.
//
// Dropout keeps probability element ((n Hq + h) L + i) S + j iff
// philox_uniform(seed, offset + that index) >= dropout_p: em::Dropout, the
// functor of offload.dropout, so host and CUDA masks agree bit for bit.
//
//===----------------------------------------------------------------------===//

#include "ElementMath.h"
#include "AttentionOperands.h"
#include "KernelSupport.h"

#include <cmath>
#include <limits>
#include <type_traits>

namespace offload {
namespace rt {
namespace kernels {
namespace {

/// Query rows per forward/backward block.
constexpr int64_t kBlockRows = 64;

constexpr double kNegInf = -std::numeric_limits<double>::infinity();

/// The operands of one attention call on the host: the shared checks
/// (AttentionOperands.h) and the dropout seed's value.
struct Attn : AttentionOperands {
  uint64_t seedValue = 0;
};

std::string resolve(const KernelArgs &args, const char *op, size_t first,
                    size_t numExtrasAt, Attn &a) {
  if (auto e = resolveAttention(args.inputs, args.attrs, op, first, numExtrasAt, a); !e.empty())
    return e;
  if (a.seed)
    a.seedValue = uint64_t(a.seed->as<int64_t>()[0]);
  return "";
}

/// The rows of one head of an operand with `heads` heads of `len` rows of
/// `d` values: the element offset of row `i` of head (n, h) and the stride
/// from one row to the next (d in bhld, heads · d in blhd).
struct Rows {
  int64_t at, stride;
};
inline Rows rowsOf(const Attn &a, int64_t n, int64_t h, int64_t i, int64_t heads, int64_t len,
                   int64_t d) {
  if (a.tokens)
    return {((n * len + i) * heads + h) * d, heads * d};
  return {((n * heads + h) * len + i) * d, d};
}

/// `rows` rows of `d` values, `stride` apart from `src`, as packed doubles
/// ([rows, d]): `src` itself when T is double and the rows are packed,
/// else gathered (and widened) into `buf`.
template <typename T>
const double *widenRows(const T *src, int64_t rows, int64_t d, int64_t stride,
                        std::vector<double> &buf) {
  if constexpr (std::is_same_v<T, double>) {
    if (stride == d || rows <= 1)
      return src;
  }
  buf.resize(size_t(rows * d));
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < d; ++c)
      buf[size_t(r * d + c)] = double(src[r * stride + c]);
  return buf.data();
}

/// Columns of the score rows [i0, i1) that can take part: with is_causal, key
/// j > i1 - 1 is masked for every row of the block.
int64_t blockCols(const Attn &a, int64_t i1) {
  return a.causal ? std::min(a.s, i1) : a.s;
}

/// Runs task(t, gemmThreads) for t in [0, tasks): in parallel with
/// single-threaded GEMMs when there are at least as many tasks as threads,
/// else one after another with each GEMM split over the threads.
template <typename Fn> void forTasks(int64_t tasks, int threads, Fn &&task) {
  setBlasThreads(1);
  if (tasks >= threads || threads <= 1) {
    parallelFor(tasks, threads, 1, [&](int64_t b, int64_t e) {
      for (int64_t t = b; t < e; ++t)
        task(t, 1);
    });
  } else {
    for (int64_t t = 0; t < tasks; ++t)
      task(t, threads);
  }
}

/// Score tile: sc[r, j] (row stride a.s) for rows [i0, i0 + rows) of (n, h),
/// columns [0, cols): scale * q k^T, masked. `qd` holds the block's query
/// rows ([rows, E]), `kd` the head's keys ([>= cols, E]).
void scores(const Attn &a, int64_t n, int64_t h, int64_t i0, int64_t rows, int64_t cols,
            const double *qd, const double *kd, double *sc, int gemmThreads,
            const void *maskData) {
  if (cols == 0)
    return;
  if (a.e == 0)
    for (int64_t r = 0; r < rows; ++r)
      std::fill(sc + r * a.s, sc + r * a.s + cols, 0.0);
  else
    gemmParallel(false, true, rows, cols, a.e, a.scale, qd, a.e, kd, a.e, 0.0, sc, a.s,
                 gemmThreads);
  for (int64_t r = 0; r < rows; ++r) {
    int64_t i = i0 + r;
    double *row = sc + r * a.s;
    if (a.causal)
      for (int64_t j = i + 1; j < cols; ++j)
        row[j] = kNegInf;
    if (!a.mask)
      continue;
    int64_t base = n * a.mstride[0] + h * a.mstride[1] + i * a.mstride[2];
    int64_t js = a.mstride[3];
    int64_t jEnd = a.causal ? std::min(cols, i + 1) : cols;
    if (a.boolMask) {
      const uint8_t *m = static_cast<const uint8_t *>(maskData) + base;
      for (int64_t j = 0; j < jEnd; ++j)
        if (!m[j * js])
          row[j] = kNegInf;
    } else if (a.mask->dtype == DType::F32) {
      const float *m = static_cast<const float *>(maskData) + base;
      for (int64_t j = 0; j < jEnd; ++j)
        row[j] += double(m[j * js]);
    } else {
      const double *m = static_cast<const double *>(maskData) + base;
      for (int64_t j = 0; j < jEnd; ++j)
        row[j] += m[j * js];
    }
  }
}

/// The linear index of probability (n, h, i, 0).
inline int64_t probIndex(const Attn &a, int64_t n, int64_t h, int64_t i) {
  return ((n * a.hq + h) * a.l + i) * a.s;
}

template <typename T> std::string forwardImpl(const KernelArgs &args, const Attn &a) {
  const T *qp = args.inputs[0].as<T>(), *kp = args.inputs[1].as<T>(),
          *vp = args.inputs[2].as<T>();
  T *op = args.outputs[0].as<T>(), *lp = args.outputs[1].as<T>();
  const void *maskData = a.mask ? a.mask->data : nullptr;
  em::Dropout<T> drop = em::Dropout<T>::make(a.p, a.seedValue, a.offset);
  const double dscale = double(drop.scale);
  int64_t blocks = (a.l + kBlockRows - 1) / kBlockRows;
  int64_t tasks = a.n * a.hq * blocks;
  forTasks(tasks, args.numThreads, [&](int64_t t, int gemmThreads) {
    int64_t blk = t % blocks, nh = t / blocks, h = nh % a.hq, n = nh / a.hq;
    int64_t g = h / a.group;
    int64_t i0 = blk * kBlockRows, rows = std::min(kBlockRows, a.l - i0);
    int64_t cols = blockCols(a, i0 + rows);
    std::vector<double> qbuf, kbuf, vbuf, sc(size_t(rows * a.s)),
        ob(size_t(rows * a.ev));
    Rows qr = rowsOf(a, n, h, i0, a.hq, a.l, a.e), kr = rowsOf(a, n, g, 0, a.hkv, a.s, a.e),
         vr = rowsOf(a, n, g, 0, a.hkv, a.s, a.ev), orow = rowsOf(a, n, h, i0, a.hq, a.l, a.ev);
    const double *qd = widenRows(qp + qr.at, rows, a.e, qr.stride, qbuf);
    const double *kd = widenRows(kp + kr.at, cols, a.e, kr.stride, kbuf);
    const double *vd = widenRows(vp + vr.at, cols, a.ev, vr.stride, vbuf);
    scores(a, n, h, i0, rows, cols, qd, kd, sc.data(), gemmThreads, maskData);
    std::vector<char> dead(size_t(rows), 0);
    for (int64_t r = 0; r < rows; ++r) {
      double *row = sc.data() + r * a.s;
      double m = kNegInf;
      for (int64_t j = 0; j < cols; ++j)
        if (row[j] > m)
          m = row[j];
      T *lse = lp + (n * a.hq + h) * a.l + i0 + r;
      if (m == kNegInf) {
        // No key left: out 0, lse -inf (PyTorch's safe softmax).
        std::fill(row, row + cols, 0.0);
        *lse = T(kNegInf);
        dead[size_t(r)] = 1;
        continue;
      }
      double sum = 0;
      for (int64_t j = 0; j < cols; ++j) {
        row[j] = std::exp(row[j] - m);
        sum += row[j];
      }
      double inv = 1.0 / sum;
      *lse = T(m + std::log(sum));
      if (a.p > 0) {
        int64_t base = probIndex(a, n, h, i0 + r);
        for (int64_t j = 0; j < cols; ++j)
          row[j] = drop.keep(base + j) ? row[j] * inv * dscale : 0.0;
      } else {
        for (int64_t j = 0; j < cols; ++j)
          row[j] *= inv;
      }
    }
    if (cols > 0 && a.ev > 0)
      gemmParallel(false, false, rows, a.ev, cols, 1.0, sc.data(), a.s, vd, a.ev, 0.0,
                   ob.data(), a.ev, gemmThreads);
    else
      std::fill(ob.begin(), ob.end(), 0.0);
    T *o = op + orow.at;
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t c = 0; c < a.ev; ++c)
        o[r * orow.stride + c] = dead[size_t(r)] ? T(0) : T(ob[size_t(r * a.ev + c)]);
  });
  return "";
}

template <typename T> std::string backwardImpl(const KernelArgs &args, const Attn &a) {
  const T *dop = args.inputs[0].as<T>(), *qp = args.inputs[1].as<T>(),
          *kp = args.inputs[2].as<T>(), *vp = args.inputs[3].as<T>(),
          *lp = args.inputs[5].as<T>(); // out (inputs[4]) is not read: D from p, dP
  T *dqp = args.outputs[0].as<T>(), *dkp = args.outputs[1].as<T>(),
    *dvp = args.outputs[2].as<T>();
  const void *maskData = a.mask ? a.mask->data : nullptr;
  em::Dropout<T> drop = em::Dropout<T>::make(a.p, a.seedValue, a.offset);
  const double dscale = double(drop.scale);
  int64_t blocks = (a.l + kBlockRows - 1) / kBlockRows;
  int64_t tasks = a.n * a.hkv;
  forTasks(tasks, args.numThreads, [&](int64_t t, int gemmThreads) {
    int64_t n = t / a.hkv, g = t % a.hkv;
    std::vector<double> kbuf, vbuf, qbuf, dobuf;
    Rows kr = rowsOf(a, n, g, 0, a.hkv, a.s, a.e), vr = rowsOf(a, n, g, 0, a.hkv, a.s, a.ev);
    const double *kd = widenRows(kp + kr.at, a.s, a.e, kr.stride, kbuf);
    const double *vd = widenRows(vp + vr.at, a.s, a.ev, vr.stride, vbuf);
    std::vector<double> dk(size_t(a.s * a.e), 0.0), dv(size_t(a.s * a.ev), 0.0);
    int64_t tileRows = std::min(kBlockRows, a.l);
    std::vector<double> p(size_t(tileRows * a.s)), dp(size_t(tileRows * a.s)),
        pt(a.p > 0 ? size_t(tileRows * a.s) : 0), dq(size_t(tileRows * a.e));
    for (int64_t h = g * a.group; h < (g + 1) * a.group; ++h) {
      for (int64_t blk = 0; blk < blocks; ++blk) {
        int64_t i0 = blk * kBlockRows, rows = std::min(kBlockRows, a.l - i0);
        int64_t cols = blockCols(a, i0 + rows);
        int64_t rowOff = (n * a.hq + h) * a.l + i0; // of lse
        Rows qr = rowsOf(a, n, h, i0, a.hq, a.l, a.e), orow = rowsOf(a, n, h, i0, a.hq, a.l, a.ev);
        const double *qd = widenRows(qp + qr.at, rows, a.e, qr.stride, qbuf);
        const double *dod = widenRows(dop + orow.at, rows, a.ev, orow.stride, dobuf);
        T *dqOut = dqp + qr.at;
        if (cols == 0) {
          for (int64_t r = 0; r < rows; ++r)
            std::fill(dqOut + r * qr.stride, dqOut + r * qr.stride + a.e, T(0));
          continue;
        }
        // P from the saved statistics.
        scores(a, n, h, i0, rows, cols, qd, kd, p.data(), gemmThreads, maskData);
        for (int64_t r = 0; r < rows; ++r) {
          double *row = p.data() + r * a.s;
          double lse = double(lp[rowOff + r]);
          if (lse == kNegInf) {
            std::fill(row, row + cols, 0.0);
          } else {
            for (int64_t j = 0; j < cols; ++j)
              row[j] = std::exp(row[j] - lse);
          }
        }
        // dP~ = dO v^T.
        if (a.ev > 0)
          gemmParallel(false, true, rows, cols, a.ev, 1.0, dod, a.ev, vd, a.ev, 0.0,
                       dp.data(), a.s, gemmThreads);
        else
          for (int64_t r = 0; r < rows; ++r)
            std::fill(dp.data() + r * a.s, dp.data() + r * a.s + cols, 0.0);
        // With dropout, p~ = p * keep / (1 - p_drop) feeds dV and
        // dP = dP~ * keep / (1 - p_drop); one Philox draw per element.
        if (a.p > 0) {
          for (int64_t r = 0; r < rows; ++r) {
            int64_t base = probIndex(a, n, h, i0 + r);
            const double *pr = p.data() + r * a.s;
            double *ptr = pt.data() + r * a.s, *dpr = dp.data() + r * a.s;
            for (int64_t j = 0; j < cols; ++j) {
              bool keep = drop.keep(base + j);
              ptr[j] = keep ? pr[j] * dscale : 0.0;
              dpr[j] = keep ? dpr[j] * dscale : 0.0;
            }
          }
        }
        // dV += p~^T dO.
        if (a.ev > 0)
          gemmParallel(true, false, cols, a.ev, rows, 1.0, a.p > 0 ? pt.data() : p.data(), a.s,
                       dod, a.ev, 1.0, dv.data(), a.ev, gemmThreads);
        // D = rowsum(p * dP) / rowsum(p); dS = p * (dP - D), in place of p.
        for (int64_t r = 0; r < rows; ++r) {
          double *pr = p.data() + r * a.s;
          const double *dpr = dp.data() + r * a.s;
          double pdp = 0, psum = 0;
          for (int64_t j = 0; j < cols; ++j) {
            pdp += pr[j] * dpr[j];
            psum += pr[j];
          }
          double d = psum > 0 ? pdp / psum : 0.0;
          for (int64_t j = 0; j < cols; ++j)
            pr[j] = pr[j] * (dpr[j] - d);
        }
        // dQ = scale dS k; dK += scale dS^T q.
        if (a.e > 0) {
          gemmParallel(false, false, rows, a.e, cols, a.scale, p.data(), a.s, kd, a.e, 0.0,
                       dq.data(), a.e, gemmThreads);
          for (int64_t r = 0; r < rows; ++r)
            for (int64_t c = 0; c < a.e; ++c)
              dqOut[r * qr.stride + c] = T(dq[size_t(r * a.e + c)]);
          gemmParallel(true, false, cols, a.e, rows, a.scale, p.data(), a.s, qd, a.e, 1.0,
                       dk.data(), a.e, gemmThreads);
        }
      }
    }
    T *dkOut = dkp + kr.at, *dvOut = dvp + vr.at;
    for (int64_t j = 0; j < a.s; ++j) {
      for (int64_t c = 0; c < a.e; ++c)
        dkOut[j * kr.stride + c] = T(dk[size_t(j * a.e + c)]);
      for (int64_t c = 0; c < a.ev; ++c)
        dvOut[j * vr.stride + c] = T(dv[size_t(j * a.ev + c)]);
    }
  });
  return "";
}

/// out's (and grad_out's) shape: [N, Hq, L, Ev], or [N, L, Hq, Ev] in blhd.
std::vector<int64_t> outShape(const Attn &a) {
  if (a.tokens)
    return {a.n, a.l, a.hq, a.ev};
  return {a.n, a.hq, a.l, a.ev};
}

std::string attention(const KernelArgs &args) {
  const char *op = "offload.attention";
  Attn a;
  if (auto e = resolve(args, op, 0, 3, a); !e.empty()) return e;
  const TensorView &q = args.inputs[0];
  if (auto e = checkTensor(op, "out", args.outputs[0], q.dtype); !e.empty()) return e;
  if (auto e = checkShape(op, "out", args.outputs[0], outShape(a)); !e.empty())
    return e;
  if (auto e = checkTensor(op, "lse", args.outputs[1], q.dtype); !e.empty()) return e;
  if (auto e = checkShape(op, "lse", args.outputs[1], {a.n, a.hq, a.l}); !e.empty())
    return e;
  return q.dtype == DType::F32 ? forwardImpl<float>(args, a) : forwardImpl<double>(args, a);
}

std::string attentionBackward(const KernelArgs &args) {
  const char *op = "offload.attention_backward";
  Attn a;
  if (args.inputs.size() < 6)
    return cat(op, ": expects grad_out, query, key, value, out, lse and the extras");
  if (auto e = resolve(args, op, 1, 6, a); !e.empty()) return e;
  DType dt = args.inputs[1].dtype;
  std::vector<int64_t> oshape = outShape(a);
  const char *names[] = {"grad_out", "out"};
  size_t at[] = {0, 4};
  for (int i = 0; i < 2; ++i) {
    if (auto e = checkTensor(op, names[i], args.inputs[at[i]], dt); !e.empty()) return e;
    if (auto e = checkShape(op, names[i], args.inputs[at[i]], oshape); !e.empty()) return e;
  }
  if (auto e = checkTensor(op, "lse", args.inputs[5], dt); !e.empty()) return e;
  if (auto e = checkShape(op, "lse", args.inputs[5], {a.n, a.hq, a.l}); !e.empty()) return e;
  const char *gnames[] = {"grad_query", "grad_key", "grad_value"};
  for (int i = 0; i < 3; ++i) {
    if (auto e = checkTensor(op, gnames[i], args.outputs[size_t(i)], dt); !e.empty())
      return e;
    if (auto e = checkShape(op, gnames[i], args.outputs[size_t(i)],
                            args.inputs[size_t(i) + 1].shape);
        !e.empty())
      return e;
  }
  return dt == DType::F32 ? backwardImpl<float>(args, a) : backwardImpl<double>(args, a);
}

} // namespace

void registerAttentionKernels(KernelRegistry &r) {
  addEmulated<attention>(r, "offload.attention");
  addEmulated<attentionBackward>(r, "offload.attention_backward");
}

} // namespace kernels

// The operand rules of both backends (AttentionOperands.h).
std::string resolveAttention(const std::vector<TensorView> &inputs, const AttrMap &attrs,
                             const char *op, size_t first, size_t numExtrasAt,
                             AttentionOperands &a, bool lowFloats) {
  using namespace kernels;
  const TensorView &q = inputs[first], &k = inputs[first + 1], &v = inputs[first + 2];
  if (!lowFloats || !isLowFloat(q.dtype))
    if (auto e = checkFloat(q, op, "query"); !e.empty())
      return lowFloats ? cat(op, ": query must be f32, f64, bf16 or f16, got ", dtypeName(q.dtype))
                       : e;
  if (auto e = checkDType(k, q.dtype, op, "key"); !e.empty()) return e;
  if (auto e = checkDType(v, q.dtype, op, "value"); !e.empty()) return e;
  std::string layout = attrs.getString("layout", "bhld");
  if (layout != "bhld" && layout != "blhd")
    return cat(op, ": layout must be bhld or blhd, got ", layout);
  a.tokens = layout == "blhd";
  const char *fit = a.tokens ? "[N, L, Hq, E], [N, S, Hkv, E], [N, S, Hkv, Ev] (layout blhd)"
                              : "[N, Hq, L, E], [N, Hkv, S, E], [N, Hkv, S, Ev]";
  if (q.rank() != 4 || k.rank() != 4 || v.rank() != 4)
    return cat(op, ": expects query, key and value ", fit, ", got ", shapeStr(q.shape), ", ",
               shapeStr(k.shape), ", ", shapeStr(v.shape));
  // The heads and length dims of the layout.
  size_t hd = a.tokens ? 2 : 1, ld = a.tokens ? 1 : 2;
  a.n = q.shape[0];
  a.hq = q.shape[hd];
  a.l = q.shape[ld];
  a.e = q.shape[3];
  a.hkv = k.shape[hd];
  a.s = k.shape[ld];
  a.ev = v.shape[3];
  if (k.shape[0] != a.n || v.shape[0] != a.n || k.shape[3] != a.e ||
      v.shape[hd] != a.hkv || v.shape[ld] != a.s)
    return cat(op, ": query ", shapeStr(q.shape), ", key ", shapeStr(k.shape),
               " and value ", shapeStr(v.shape), " do not fit ", fit);
  if (a.hkv <= 0 ? a.hq != 0 : a.hq % a.hkv != 0)
    return cat(op, ": query heads (", a.hq, ") must be a multiple of key/value heads (",
               a.hkv, ")");
  a.group = a.hkv > 0 ? a.hq / a.hkv : 1;
  if (!attrs.has("scale"))
    return cat(op, ": missing attribute scale");
  a.scale = attrs.getFloat("scale", 1.0);
  if (!std::isfinite(a.scale))
    return cat(op, ": scale must be finite");
  a.causal = attrs.getInt("is_causal", 0) != 0;
  bool hasMask = attrs.getInt("has_mask", 0) != 0;
  a.p = attrs.getFloat("dropout_p", 0.0);
  if (!(a.p >= 0 && a.p < 1))
    return cat(op, ": dropout_p ", a.p, " must be in [0, 1)");
  a.offset = uint64_t(attrs.getInt("offset", 0));
  size_t want = numExtrasAt + (hasMask ? 1 : 0) + (a.p > 0 ? 1 : 0);
  if (inputs.size() != want)
    return cat(op, ": expects ", want - numExtrasAt,
               " extra operand(s) (the mask when has_mask, then the seed when "
               "dropout_p > 0), got ",
               inputs.size() < numExtrasAt ? 0 : inputs.size() - numExtrasAt);
  if (hasMask) {
    const TensorView &m = inputs[numExtrasAt];
    if (m.dtype == DType::Bool)
      a.boolMask = true;
    else if (m.dtype != q.dtype)
      return cat(op, ": mask must be i1 or the query's element type, got ",
                 dtypeName(m.dtype));
    std::vector<int64_t> strides;
    if (m.rank() > 4 || !broadcastStrides(m.shape, {a.n, a.hq, a.l, a.s}, strides))
      return cat(op, ": mask ", shapeStr(m.shape), " does not broadcast to [N, Hq, L, S] = ",
                 shapeStr({a.n, a.hq, a.l, a.s}));
    for (int d = 0; d < 4; ++d)
      a.mstride[d] = strides[size_t(d)];
    a.mask = &m;
  }
  if (a.p > 0) {
    const TensorView &sd = inputs.back();
    if (auto e = checkDType(sd, DType::I64, op, "seed"); !e.empty()) return e;
    if (sd.numel() != 1)
      return cat(op, ": seed must hold one element, got ", shapeStr(sd.shape));
    a.seed = &sd;
  }
  return "";
}

} // namespace rt
} // namespace offload
