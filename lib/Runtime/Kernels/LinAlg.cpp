//===- LinAlg.cpp - Host kernels: linear and batched matmul ---------------===//
//
// Part of offload. offload.linear and offload.matmul on f32/f64 through
// OpenBLAS (cblas_sgemm / cblas_dgemm). Semantics: docs/op-semantics.md
// (ATen `linear` and `matmul` with explicit transpose flags).
//
// Threading: a single large product runs one GEMM with OpenBLAS using
// args.numThreads threads; many small batched products (attention heads)
// run one single-threaded GEMM per batch element, batch elements split over
// args.numThreads threads. OpenBLAS splits only the M/N dimensions among its
// threads, so every output element is a fixed-order dot product: results are
// deterministic run to run.
//
//===----------------------------------------------------------------------===//

#include "KernelSupport.h"

#include <algorithm>
#include <cstring>

using namespace offload::rt;
using namespace offload::rt::kernels;

namespace {

/// Below this many multiply-adds per product, batched products are spread over
/// threads one product each instead of threading inside OpenBLAS.
constexpr int64_t kSmallGemmMacs = int64_t(1) << 21;

/// linear: x[*,K], w[M,K], b[M]? -> y[*,M]; y = x w^T + b.
template <typename T> std::string linearImpl(const KernelArgs &a) {
  const TensorView &x = a.inputs[0], &w = a.inputs[1], &y = a.outputs[0];
  int64_t k = x.shape.back(), m = w.shape[0];
  int64_t rows = 1;
  for (size_t i = 0; i + 1 < x.shape.size(); ++i)
    rows *= x.shape[i];
  T *yp = y.as<T>();
  bool hasBias = present(a.inputs, 2);
  if (rows == 0 || m == 0)
    return "";
  if (hasBias) {
    const T *bp = a.inputs[2].as<T>();
    for (int64_t r = 0; r < rows; ++r)
      std::memcpy(yp + r * m, bp, size_t(m) * sizeof(T));
  }
  if (k == 0) {
    if (!hasBias)
      std::fill(yp, yp + rows * m, T(0));
    return "";
  }
  if (rows > kMaxBlasDim || m > kMaxBlasDim || k > kMaxBlasDim)
    return "offload.linear: dimensions exceed the BLAS 32-bit limit";
  gemmParallel(false, true, rows, m, k, T(1), x.as<T>(), k, w.as<T>(), k,
               T(hasBias ? 1 : 0), yp, m, a.numThreads);
  return "";
}

std::string linearKernel(const KernelArgs &a) {
  const char *op = "offload.linear";
  const TensorView &x = a.inputs[0], &w = a.inputs[1], &y = a.outputs[0];
  if (!isFloat(x.dtype))
    return cat(op, ": unsupported dtype ", dtypeName(x.dtype));
  DType dt = x.dtype;
  if (auto e = checkTensor(op, "x", x, dt); !e.empty())
    return e;
  if (auto e = checkTensor(op, "w", w, dt); !e.empty())
    return e;
  if (auto e = checkTensor(op, "y", y, dt); !e.empty())
    return e;
  if (x.rank() < 1 || w.rank() != 2)
    return cat(op, ": expected x[*,K] and w[M,K], got x ", shapeStr(x.shape),
               " and w ", shapeStr(w.shape));
  if (w.shape[1] != x.shape.back())
    return cat(op, ": x ", shapeStr(x.shape), " and w ", shapeStr(w.shape),
               " disagree on K");
  if (present(a.inputs, 2)) {
    if (auto e = checkTensor(op, "b", a.inputs[2], dt); !e.empty())
      return e;
    if (auto e = checkShape(op, "b", a.inputs[2], {w.shape[0]}); !e.empty())
      return e;
  }
  std::vector<int64_t> ys(x.shape.begin(), x.shape.end() - 1);
  ys.push_back(w.shape[0]);
  if (auto e = checkShape(op, "y", y, ys); !e.empty())
    return e;
  return dt == DType::F32 ? linearImpl<float>(a) : linearImpl<double>(a);
}

/// Resolved geometry of a matmul.
struct MatmulPlan {
  int64_t m = 0, n = 0, k = 0;
  bool ta = false, tb = false;
  std::vector<int64_t> batch;    // broadcast batch shape
  std::vector<int64_t> aStride;  // per batch dim, in matrices (0 = broadcast)
  std::vector<int64_t> bStride;
  int64_t aBatch = 1, bBatch = 1; // batch numel of a and b
};

std::string planMatmul(const KernelArgs &a, MatmulPlan &p) {
  const char *op = "offload.matmul";
  const TensorView &A = a.inputs[0], &B = a.inputs[1], &C = a.outputs[0];
  if (A.rank() < 1 || B.rank() < 1)
    return cat(op, ": operands must have rank >= 1, got ", shapeStr(A.shape),
               " and ", shapeStr(B.shape));
  p.ta = a.attrs.getInt("transpose_a", 0) != 0 && A.rank() >= 2;
  p.tb = a.attrs.getInt("transpose_b", 0) != 0 && B.rank() >= 2;
  std::vector<int64_t> as = A.shape, bs = B.shape;
  bool dropM = false, dropN = false;
  if (as.size() == 1) {
    as.insert(as.begin(), 1);
    dropM = true;
  }
  if (bs.size() == 1) {
    bs.push_back(1);
    dropN = true;
  }
  int64_t ar = int64_t(as.size()), br = int64_t(bs.size());
  p.m = p.ta ? as[ar - 1] : as[ar - 2];
  int64_t ka = p.ta ? as[ar - 2] : as[ar - 1];
  int64_t kb = p.tb ? bs[br - 1] : bs[br - 2];
  p.n = p.tb ? bs[br - 2] : bs[br - 1];
  if (ka != kb)
    return cat(op, ": contraction sizes differ: a ", shapeStr(A.shape),
               " (transpose_a=", p.ta, ") and b ", shapeStr(B.shape),
               " (transpose_b=", p.tb, ")");
  p.k = ka;
  std::vector<int64_t> ab(as.begin(), as.end() - 2), bb(bs.begin(), bs.end() - 2);
  size_t nb = std::max(ab.size(), bb.size());
  p.batch.assign(nb, 1);
  p.aStride.assign(nb, 0);
  p.bStride.assign(nb, 0);
  int64_t sa = 1, sb = 1;
  for (size_t i = 0; i < nb; ++i) {
    size_t d = nb - 1 - i; // output dim, from the right
    int64_t da = i < ab.size() ? ab[ab.size() - 1 - i] : 1;
    int64_t db = i < bb.size() ? bb[bb.size() - 1 - i] : 1;
    if (da != db && da != 1 && db != 1)
      return cat(op, ": batch dims of a ", shapeStr(A.shape), " and b ",
                 shapeStr(B.shape), " do not broadcast");
    p.batch[d] = std::max(da, db);
    if (da == 0 || db == 0)
      p.batch[d] = 0;
    p.aStride[d] = da == 1 ? 0 : sa;
    p.bStride[d] = db == 1 ? 0 : sb;
    sa *= da;
    sb *= db;
  }
  p.aBatch = sa;
  p.bBatch = sb;
  std::vector<int64_t> cs = p.batch;
  if (!dropM)
    cs.push_back(p.m);
  if (!dropN)
    cs.push_back(p.n);
  return checkShape(op, "c", C, cs);
}

template <typename T>
std::string matmulImpl(const KernelArgs &a, const MatmulPlan &p) {
  const T *ap = a.inputs[0].as<T>(), *bp = a.inputs[1].as<T>();
  T *cp = a.outputs[0].as<T>();
  int64_t nbatch = 1;
  for (int64_t d : p.batch)
    nbatch *= d;
  int64_t m = p.m, n = p.n, k = p.k;
  if (nbatch == 0 || m == 0 || n == 0)
    return "";
  if (k == 0) {
    std::fill(cp, cp + nbatch * m * n, T(0));
    return "";
  }
  if (m > kMaxBlasDim || n > kMaxBlasDim || k > kMaxBlasDim)
    return "offload.matmul: dimensions exceed the BLAS 32-bit limit";
  int64_t lda = p.ta ? m : k, ldb = p.tb ? k : n;
  // Fold a's batch into M when b is shared and a's matrices are row blocks.
  if (p.bBatch == 1 && !p.ta && p.aBatch == nbatch &&
      nbatch * m <= kMaxBlasDim) {
    gemmParallel(false, p.tb, nbatch * m, n, k, T(1), ap, lda, bp, ldb, T(0), cp, n,
                 a.numThreads);
    return "";
  }
  // Offsets of each batch element's matrices.
  std::vector<int64_t> aOff(static_cast<size_t>(nbatch)),
      bOff(static_cast<size_t>(nbatch));
  {
    size_t nd = p.batch.size();
    std::vector<int64_t> idx(nd, 0);
    for (int64_t i = 0; i < nbatch; ++i) {
      int64_t oa = 0, ob = 0;
      for (size_t d = 0; d < nd; ++d) {
        oa += idx[d] * p.aStride[d];
        ob += idx[d] * p.bStride[d];
      }
      aOff[size_t(i)] = oa * m * k;
      bOff[size_t(i)] = ob * k * n;
      for (size_t d = nd; d-- > 0;) {
        if (++idx[d] < p.batch[d])
          break;
        idx[d] = 0;
      }
    }
  }
  auto one = [&](int64_t i) {
    gemm(p.ta, p.tb, m, n, k, T(1), ap + aOff[size_t(i)], lda,
         bp + bOff[size_t(i)], ldb, T(0), cp + i * m * n, n);
  };
  if (nbatch > 1 && a.numThreads > 1 && m * n * k <= kSmallGemmMacs) {
    setBlasThreads(1);
    parallelFor(nbatch, a.numThreads, 1, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i)
        one(i);
    });
    return "";
  }
  for (int64_t i = 0; i < nbatch; ++i)
    gemmParallel(p.ta, p.tb, m, n, k, T(1), ap + aOff[size_t(i)], lda,
                 bp + bOff[size_t(i)], ldb, T(0), cp + i * m * n, n, a.numThreads);
  return "";
}

std::string matmulKernel(const KernelArgs &a) {
  const char *op = "offload.matmul";
  DType dt = a.inputs[0].dtype;
  if (!isFloat(dt))
    return cat(op, ": unsupported dtype ", dtypeName(dt));
  if (auto e = checkTensor(op, "a", a.inputs[0], dt); !e.empty())
    return e;
  if (auto e = checkTensor(op, "b", a.inputs[1], dt); !e.empty())
    return e;
  if (auto e = checkTensor(op, "c", a.outputs[0], dt); !e.empty())
    return e;
  MatmulPlan p;
  if (auto e = planMatmul(a, p); !e.empty())
    return e;
  return dt == DType::F32 ? matmulImpl<float>(a, p) : matmulImpl<double>(a, p);
}

} // namespace

void offload::rt::kernels::registerLinAlgKernels(KernelRegistry &r) {
  addEmulated<linearKernel>(r, "offload.linear", Absent::Allowed);
  addEmulated<matmulKernel>(r, "offload.matmul", Absent::Allowed);
}
