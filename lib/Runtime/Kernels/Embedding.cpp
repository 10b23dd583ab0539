//===- Embedding.cpp - Embedding lookup and its gradient -------------------===//
//
// Part of offload. embedding(weight[V,D], indices(i64)[*]) -> y[*,D] gathers
// rows (ATen `embedding`; padding_idx changes nothing here);
// embedding_backward(dy[*,D], indices) -> dweight[V,D] scatter-adds rows of
// dy, except into row padding_idx (attribute, -1: none), which stays zero. The backward splits the
// work by columns of D, each thread adding every row in index order, so
// results are deterministic and independent of the thread count.
// gather(input, index, dim) reads elements of an integer or bool tensor at
// i64 indices along one dim (torch.gather; ids and masks, no gradient).
//
//===----------------------------------------------------------------------===//

#include "KernelSupport.h"

namespace offload {
namespace rt {
namespace kernels {
namespace {

std::string checkIndices(const char *op, const TensorView &idx, int64_t v) {
  if (auto e = checkDType(idx, DType::I64, op, "indices"); !e.empty()) return e;
  const int64_t *ip = idx.as<int64_t>();
  for (int64_t i = 0; i < idx.numel(); ++i)
    if (ip[i] < 0 || ip[i] >= v)
      return std::string(op) + ": index " + std::to_string(ip[i]) +
             " out of range [0, " + std::to_string(v) + ")";
  return "";
}

std::vector<int64_t> withRow(std::vector<int64_t> s, int64_t d) {
  s.push_back(d);
  return s;
}

std::string embedding(const KernelArgs &args) {
  const char *op = "embedding";
  const TensorView &w = args.inputs[0], &idx = args.inputs[1],
                   &y = args.outputs[0];
  if (auto e = checkFloat(w, op, "weight"); !e.empty()) return e;
  if (w.rank() != 2)
    return std::string(op) + ": weight must be [V,D], got " + shapeStr(w.shape);
  if (auto e = checkDType(y, w.dtype, op, "y"); !e.empty()) return e;
  if (auto e = checkIndices(op, idx, w.shape[0]); !e.empty()) return e;
  int64_t d = w.shape[1];
  if (y.shape != withRow(idx.shape, d))
    return std::string(op) + ": y has shape " + shapeStr(y.shape) +
           ", expected " + shapeStr(withRow(idx.shape, d));
  size_t row = size_t(d) * dtypeSize(w.dtype);
  const char *wp = static_cast<const char *>(w.data);
  char *yp = static_cast<char *>(y.data);
  const int64_t *ip = idx.as<int64_t>();
  parallelFor(idx.numel(), args.numThreads,
              std::max<int64_t>(1, kGrain / std::max<int64_t>(1, d)),
              [&](int64_t b, int64_t e) {
                for (int64_t i = b; i < e; ++i)
                  std::memcpy(yp + i * int64_t(row), wp + ip[i] * int64_t(row), row);
              });
  return "";
}

std::string embeddingBackward(const KernelArgs &args) {
  const char *op = "embedding_backward";
  const TensorView &dy = args.inputs[0], &idx = args.inputs[1],
                   &dw = args.outputs[0];
  if (auto e = checkFloat(dw, op, "dweight"); !e.empty()) return e;
  if (dw.rank() != 2)
    return std::string(op) + ": dweight must be [V,D], got " + shapeStr(dw.shape);
  if (auto e = checkDType(dy, dw.dtype, op, "dy"); !e.empty()) return e;
  if (auto e = checkIndices(op, idx, dw.shape[0]); !e.empty()) return e;
  int64_t d = dw.shape[1], n = idx.numel();
  if (dy.shape != withRow(idx.shape, d))
    return std::string(op) + ": dy has shape " + shapeStr(dy.shape) +
           ", expected " + shapeStr(withRow(idx.shape, d));
  const int64_t *ip = idx.as<int64_t>();
  int64_t pad = args.attrs.getInt("padding_idx", -1);
  auto run = [&](auto tag) {
    using T = decltype(tag);
    const T *g = dy.as<T>();
    T *o = dw.as<T>();
    std::memset(o, 0, dw.bytes());
    parallelFor(d, args.numThreads,
                std::max<int64_t>(1, kGrain / std::max<int64_t>(1, n)),
                [&](int64_t b, int64_t e) {
                  for (int64_t i = 0; i < n; ++i) {
                    if (ip[i] == pad)
                      continue;
                    T *dst = o + ip[i] * d;
                    const T *src = g + i * d;
                    for (int64_t j = b; j < e; ++j) dst[j] += src[j];
                  }
                });
  };
  if (dw.dtype == DType::F32) run(float());
  else run(double());
  return "";
}

} // namespace

/// gather(input, index, dim) of an integer or bool input (ATen's
/// torch.gather): y[i] = input at i's coordinates with coordinate `dim`
/// replaced by index[i]. Every index is checked first.
std::string gather(const KernelArgs &args) {
  const char *op = "gather";
  const TensorView &x = args.inputs[0], &idx = args.inputs[1], &y = args.outputs[0];
  if (isFloat(x.dtype))
    return cat(op, ": input must be i64, i32 or bool, got ", dtypeName(x.dtype));
  if (auto e = checkDType(idx, DType::I64, op, "index"); !e.empty()) return e;
  if (auto e = checkDType(y, x.dtype, op, "y"); !e.empty()) return e;
  if (y.shape != idx.shape)
    return cat(op, ": y has shape ", shapeStr(y.shape), ", expected the index's ",
               shapeStr(idx.shape));
  int64_t d = args.attrs.getInt("dim", 0);
  size_t r = x.rank();
  if (idx.rank() != r)
    return cat(op, ": index of rank ", idx.rank(), " for an input of rank ", r);
  if (r == 0) {
    if (d != 0) return cat(op, ": dim ", d, " out of range for a rank-0 input");
  } else if (!normDim(d, int64_t(r))) {
    return cat(op, ": dim ", d, " out of range for shape ", shapeStr(x.shape));
  }
  for (size_t k = 0; k < r; ++k)
    if (int64_t(k) != d && idx.shape[k] > x.shape[k])
      return cat(op, ": index ", shapeStr(idx.shape), " exceeds the input ",
                 shapeStr(x.shape), " at dim ", k);
  int64_t size = r ? x.shape[size_t(d)] : 1;
  if (auto e = checkIndices(op, idx, size); !e.empty()) return e;
  std::vector<int64_t> xs(r, 1);
  for (size_t k = r; k-- > 1;) xs[k - 1] = xs[k] * x.shape[k];
  size_t es = dtypeSize(x.dtype);
  const char *xp = static_cast<const char *>(x.data);
  char *yp = static_cast<char *>(y.data);
  const int64_t *ip = idx.as<int64_t>();
  parallelFor(y.numel(), args.numThreads, kGrain, [&](int64_t lo, int64_t hi) {
    std::vector<int64_t> c(r, 0);
    for (int64_t i = lo; i < hi; ++i) {
      int64_t rem = i, off = 0;
      for (size_t k = r; k-- > 0;) {
        c[k] = rem % idx.shape[k];
        rem /= idx.shape[k];
      }
      for (size_t k = 0; k < r; ++k)
        off += (int64_t(k) == d ? ip[i] : c[k]) * xs[k];
      std::memcpy(yp + i * int64_t(es), xp + off * int64_t(es), es);
    }
  });
  return "";
}

void registerEmbeddingKernels(KernelRegistry &r) {
  addEmulated<embedding>(r, "offload.embedding");
  addEmulated<embeddingBackward>(r, "offload.embedding_backward");
  r.add("offload.gather", gather);
}

} // namespace kernels
} // namespace rt
} // namespace offload
