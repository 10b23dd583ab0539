//===- CudaData.cu - Reductions, shape ops and embedding on CUDA ----------===//
//
// Part of offload. reduce_sum / reduce_mean, broadcast_to, reshape,
// transpose, cat, slice, slice_backward, embedding and embedding_backward,
// and the integer cumsum and gather of ids and masks, as the host kernels of
// Reduction.cpp, Shape.cpp and Embedding.cpp.
//
// Determinism without atomics: a reduction's output element is summed in
// double in a fixed order: by one thread in the host's order (row-major
// over the reduced index space) when the sum is short; by one block (each
// thread a strided partial sum, then a fixed tree) along the contiguous
// innermost dim; by 32 lanes of a tile of 32 outputs (each lane every 32nd
// reduced index, then a fixed tree) across rows. The embedding gradient
// gives each thread one column of a vocabulary chunk and adds the rows in
// index order, exactly as the host kernel: it is bit-identical to the host.
// Data movement kernels move element words of 1, 4 or 8 bytes (any dtype).
//
//===----------------------------------------------------------------------===//

#include "CudaCommon.cuh"
#include "Kernels/Geometry.h"

#include <algorithm>
#include <climits>

namespace offload {
namespace rt {
namespace cuda {
namespace {

inline bool normDim(int64_t &d, int64_t rank) {
  if (d < 0)
    d += rank;
  return d >= 0 && d < rank;
}

inline int64_t prodRange(const std::vector<int64_t> &s, size_t b, size_t e) {
  int64_t p = 1;
  for (size_t i = b; i < e && i < s.size(); ++i)
    p *= s[i];
  return p;
}

//===----------------------------------------------------------------------===//
// reduce_sum / reduce_mean
//===----------------------------------------------------------------------===//

/// The kept and reduced dims of a reduction, with their element strides in x.
struct ReduceDesc {
  int nKept = 0, nRed = 0;
  int64_t keptShape[kMaxRank] = {}, keptStr[kMaxRank] = {};
  int64_t redShape[kMaxRank] = {}, redStr[kMaxRank] = {};
  __device__ int64_t base(int64_t o) const {
    int64_t b = 0;
    for (int d = nKept - 1; d >= 0; --d) {
      b += (o % keptShape[d]) * keptStr[d];
      o /= keptShape[d];
    }
    return b;
  }
  __device__ int64_t redOffset(int64_t r) const {
    if (nRed == 1)
      return r * redStr[0];
    int64_t off = 0;
    for (int d = nRed - 1; d >= 0; --d) {
      off += (r % redShape[d]) * redStr[d];
      r /= redShape[d];
    }
    return off;
  }
};

/// The mean's finish: s / count, or s * (1/0) for an empty reduction (NaN
/// for s == 0, as the host kernel and ATen).
template <typename T>
__device__ T finishReduce(double s, int64_t nRed, int mean) {
  if (!mean)
    return T(s);
  return T(nRed ? s / double(nRed) : s * (1.0 / double(nRed)));
}

/// One thread per output, summing in the host kernel's order: row-major
/// over the reduced index space (innermost reduced dim fastest).
template <typename T>
__global__ void reduceThreadKernel(const T *x, T *y, int64_t nOut,
                                   int64_t nRed, ReduceDesc rd, int mean) {
  OFFLOAD_GRID_LOOP(o, nOut) {
    const T *p = x + rd.base(o);
    double s = 0;
    if (rd.nRed == 0) {
      s = double(ld(p[0]));
    } else {
      int64_t idx[kMaxRank] = {};
      int64_t off = 0;
      int last = rd.nRed - 1;
      for (int64_t k = 0; k < nRed; ++k) {
        s += double(ld(p[off]));
        // Advance the reduced index (odometer).
        int d = last;
        ++idx[d];
        off += rd.redStr[d];
        while (d > 0 && idx[d] == rd.redShape[d]) {
          off -= idx[d] * rd.redStr[d];
          idx[d] = 0;
          --d;
          ++idx[d];
          off += rd.redStr[d];
        }
      }
    }
    y[o] = st<T>(finishReduce<Acc<T>>(s, nRed, mean));
  }
}

/// One block per output (grid-stride over outputs), for sums along the
/// contiguous innermost dim: each thread a strided partial sum (coalesced
/// reads), then a fixed tree.
template <typename T>
__global__ void reduceBlockKernel(const T *x, T *y, int64_t nOut,
                                  int64_t nRed, ReduceDesc rd, int mean) {
  __shared__ double shm[kThreads];
  for (int64_t o = blockIdx.x; o < nOut; o += gridDim.x) {
    const T *p = x + rd.base(o);
    double s = 0;
    for (int64_t r = threadIdx.x; r < nRed; r += kThreads)
      s += double(ld(p[rd.redOffset(r)]));
    s = blockSum(s, shm);
    if (threadIdx.x == 0)
      y[o] = st<T>(finishReduce<Acc<T>>(s, nRed, mean));
  }
}

/// Tiles of kTile consecutive outputs, for sums across rows when the
/// innermost dim is kept (a bias gradient: [rows, C] -> [C]): a block of
/// kTile x kLanes threads, thread (c, l) adds reduced indices l, l + kLanes,
/// ... of output c in order (a warp reads kTile consecutive elements), then
/// the kLanes partial sums of each output add in a fixed tree. A fixed
/// order, so the same bits every run; not the host's order.
constexpr int kTile = 32, kLanes = 32;
template <typename T>
__global__ void reduceTileKernel(const T *x, T *y, int64_t nOut, int64_t nRed,
                                 ReduceDesc rd, int mean) {
  __shared__ double shm[kLanes][kTile + 1];
  int c = threadIdx.x, l = threadIdx.y;
  for (int64_t t0 = int64_t(blockIdx.x) * kTile; t0 < nOut;
       t0 += int64_t(gridDim.x) * kTile) {
    int64_t o = t0 + c;
    double s = 0;
    if (o < nOut) {
      const T *p = x + rd.base(o);
      for (int64_t r = l; r < nRed; r += kLanes)
        s += double(ld(p[rd.redOffset(r)]));
    }
    shm[l][c] = s;
    __syncthreads();
    for (int h = kLanes / 2; h > 0; h >>= 1) {
      if (l < h)
        shm[l][c] += shm[l + h][c];
      __syncthreads();
    }
    if (l == 0 && o < nOut)
      y[o] = st<T>(finishReduce<Acc<T>>(shm[0][c], nRed, mean));
    __syncthreads();
  }
}

/// Merges neighbouring dims of one kind (kept or reduced) that are adjacent
/// in x (stride[k] == shape[k+1] * stride[k+1]): the row-major order over
/// that index space is unchanged, and the kernels index fewer dims.
void collapseDims(int &n, int64_t *shape, int64_t *str) {
  int out = 0;
  for (int k = 0; k < n; ++k) {
    if (out > 0 && str[out - 1] == shape[k] * str[k]) {
      shape[out - 1] *= shape[k];
      str[out - 1] = str[k];
    } else {
      shape[out] = shape[k];
      str[out] = str[k];
      ++out;
    }
  }
  n = out;
}

int gridFor(int64_t n) {
  return int(std::max<int64_t>(1, std::min<int64_t>(n, 1 << 20)));
}

std::string reduce(const CudaKernelArgs &a, const char *op, bool mean) {
  const TensorView &x = a.inputs[0], &y = a.outputs[0];
  if (auto e = needAnyFloat(x, op, "x"); !e.empty())
    return e;
  if (auto e = needDType(y, x.dtype, op, "y"); !e.empty())
    return e;
  int64_t rank = x.rank();
  if (rank > kMaxRank)
    return std::string(op) + ": rank above 8 is not supported";
  bool keepdim = a.attrs.getInt("keepdim", 0) != 0;
  std::vector<int64_t> dims = a.attrs.getInts("dims");
  std::vector<char> red(size_t(rank), dims.empty() ? 1 : 0);
  for (int64_t d : dims) {
    if (!normDim(d, rank))
      return std::string(op) + ": dim " + std::to_string(d) +
             " out of range for rank " + std::to_string(rank);
    if (red[size_t(d)])
      return std::string(op) + ": dim " + std::to_string(d) + " repeated";
    red[size_t(d)] = 1;
  }
  ReduceDesc rd;
  std::vector<int64_t> expect, xs(size_t(rank), 0);
  int64_t stride = 1, nRed = 1;
  for (int64_t d = rank - 1; d >= 0; --d) {
    xs[size_t(d)] = stride;
    stride *= x.shape[size_t(d)];
  }
  for (int64_t d = 0; d < rank; ++d) {
    if (red[size_t(d)]) {
      if (keepdim)
        expect.push_back(1);
      rd.redShape[rd.nRed] = x.shape[size_t(d)];
      rd.redStr[rd.nRed++] = xs[size_t(d)];
      nRed *= x.shape[size_t(d)];
    } else {
      expect.push_back(x.shape[size_t(d)]);
      rd.keptShape[rd.nKept] = x.shape[size_t(d)];
      rd.keptStr[rd.nKept++] = xs[size_t(d)];
    }
  }
  if (y.shape != expect)
    return std::string(op) + ": y has shape " + shapeStr(y.shape) +
           ", expected " + shapeStr(expect);
  int64_t nOut = y.numel();
  if (nOut == 0)
    return "";
  collapseDims(rd.nKept, rd.keptShape, rd.keptStr);
  collapseDims(rd.nRed, rd.redShape, rd.redStr);
  // Along the contiguous innermost dim: a block per output. Across rows
  // (innermost dim kept) with long sums: tiles of outputs. Short sums: a
  // thread per output (coalesced when the innermost dim is kept).
  bool innermostReduced = rd.nRed > 0 && rd.redStr[rd.nRed - 1] == 1;
  enum { Thread, Block, Tile } kind =
      nRed >= 64 ? (innermostReduced ? Block : Tile) : Thread;
  auto run = [&](auto tag) {
    using T = decltype(tag);
    const T *xp = x.as<T>();
    T *yp = y.as<T>();
    if (kind == Block)
      reduceBlockKernel<T><<<gridFor(nOut), kThreads, 0, a.ctx.stream>>>(
          xp, yp, nOut, nRed, rd, mean);
    else if (kind == Tile)
      reduceTileKernel<T>
          <<<gridFor((nOut + kTile - 1) / kTile), dim3(kTile, kLanes), 0,
             a.ctx.stream>>>(xp, yp, nOut, nRed, rd, mean);
    else
      reduceThreadKernel<T><<<blocksFor(nOut), kThreads, 0, a.ctx.stream>>>(
          xp, yp, nOut, nRed, rd, mean);
  };
  // bf16/f16: summed in double from the exact f32 values, the result (the
  // f32 kernel's, rounded to f32) rounded once more to the type: the host's
  // emulation up to the order of the sum.
  dispatchFloat(x.dtype, run);
  return launched(op);
}

std::string kReduceSum(const CudaKernelArgs &a) {
  return reduce(a, "reduce_sum", false);
}
std::string kReduceMean(const CudaKernelArgs &a) {
  return reduce(a, "reduce_mean", true);
}

//===----------------------------------------------------------------------===//
// Strided gathers: broadcast_to, transpose
//===----------------------------------------------------------------------===//

template <typename W>
__global__ void gatherKernel(const W *x, W *y, int64_t n, Strided s) {
  OFFLOAD_GRID_LOOP(i, n) {
    int64_t off[1];
    s.offsets(i, off, 1);
    y[i] = x[off[0]];
  }
}

/// y[i] = x[offset of i under s], element size es.
std::string gather(const CudaKernelArgs &a, const char *op, const Strided &s,
                   size_t es) {
  const TensorView &x = a.inputs[0], &y = a.outputs[0];
  int64_t n = y.numel();
  if (n == 0)
    return "";
  switch (es) {
  case 1:
    gatherKernel<uint8_t><<<blocksFor(n), kThreads, 0, a.ctx.stream>>>(
        x.as<uint8_t>(), y.as<uint8_t>(), n, s);
    break;
  case 2:
    gatherKernel<uint16_t><<<blocksFor(n), kThreads, 0, a.ctx.stream>>>(
        x.as<uint16_t>(), y.as<uint16_t>(), n, s);
    break;
  case 4:
    gatherKernel<uint32_t><<<blocksFor(n), kThreads, 0, a.ctx.stream>>>(
        x.as<uint32_t>(), y.as<uint32_t>(), n, s);
    break;
  default:
    gatherKernel<uint64_t><<<blocksFor(n), kThreads, 0, a.ctx.stream>>>(
        x.as<uint64_t>(), y.as<uint64_t>(), n, s);
    break;
  }
  return launched(op);
}

std::string kBroadcastTo(const CudaKernelArgs &a) {
  const char *op = "broadcast_to";
  const TensorView &x = a.inputs[0], &y = a.outputs[0];
  if (auto e = needDType(y, x.dtype, op, "y"); !e.empty())
    return e;
  Strided s;
  if (auto e = stridedOver(y, op, s); !e.empty())
    return e;
  if (!broadcastStrides(x.shape, y.shape, s.st[0]))
    return std::string(op) + ": " + shapeStr(x.shape) +
           " does not broadcast to " + shapeStr(y.shape);
  return gather(a, op, s, dtypeSize(x.dtype));
}

std::string kTranspose(const CudaKernelArgs &a) {
  const char *op = "transpose";
  const TensorView &x = a.inputs[0], &y = a.outputs[0];
  if (auto e = needDType(y, x.dtype, op, "y"); !e.empty())
    return e;
  int64_t rank = x.rank();
  if (rank > kMaxRank)
    return std::string(op) + ": rank above 8 is not supported";
  std::vector<int64_t> ps;
  if (auto e = geom::permutation(op, a.attrs.getInts("perm"), x.shape, y.shape, ps);
      !e.empty())
    return e;
  Strided s;
  s.rank = int(rank);
  for (int d = 0; d < s.rank; ++d) {
    s.shape[d] = y.shape[size_t(d)];
    s.st[0][d] = ps[size_t(d)];
  }
  return gather(a, op, s, dtypeSize(x.dtype));
}

std::string kReshape(const CudaKernelArgs &a) {
  // The backend runs offload.reshape itself (an alias or one copy); this
  // entry serves a direct call.
  const char *op = "reshape";
  const TensorView &x = a.inputs[0], &y = a.outputs[0];
  if (auto e = needDType(y, x.dtype, op, "y"); !e.empty())
    return e;
  if (x.numel() != y.numel())
    return std::string(op) + ": cannot reshape " + shapeStr(x.shape) + " to " +
           shapeStr(y.shape);
  if (x.data == y.data || x.bytes() == 0)
    return "";
  cudaError_t e = cudaMemcpyAsync(y.data, x.data, x.bytes(),
                                  cudaMemcpyDeviceToDevice, a.ctx.stream);
  return e == cudaSuccess ? "" : cudaErrorText("cudaMemcpyAsync", e);
}

//===----------------------------------------------------------------------===//
// cat, slice, slice_backward
//===----------------------------------------------------------------------===//

std::string kCat(const CudaKernelArgs &a) {
  const char *op = "cat";
  // The table allows a variadic operand with no values; cat needs one.
  if (a.inputs.empty())
    return "cat: expected at least one input and one output";
  const TensorView &y = a.outputs[0];
  int64_t rank = y.rank();
  int64_t dim = a.attrs.getInt("dim", 0);
  if (auto e = geom::catGeometry(op, a.inputs, y, dim); !e.empty())
    return e;
  size_t es = dtypeSize(y.dtype);
  int64_t outer = prodRange(y.shape, 0, size_t(dim));
  int64_t inner = prodRange(y.shape, size_t(dim) + 1, size_t(rank));
  size_t yRow = size_t(y.shape[size_t(dim)] * inner) * es;
  size_t col = 0;
  if (outer == 0)
    return "";
  // Input k fills bytes [col, col + width) of every one of the `outer` rows.
  for (const TensorView &x : a.inputs) {
    size_t width = size_t(x.shape[size_t(dim)] * inner) * es;
    if (width) {
      cudaError_t e = cudaMemcpy2DAsync(
          static_cast<uint8_t *>(y.data) + col, yRow, x.data, width, width,
          size_t(outer), cudaMemcpyDeviceToDevice, a.ctx.stream);
      if (e != cudaSuccess)
        return cudaErrorText("cudaMemcpy2DAsync", e);
    }
    col += width;
  }
  return "";
}

using geom::SliceSpec;

/// Element e of the slice (rows of `inner` elements, `len` rows per outer
/// index) <-> element of the full tensor; toFull scatters.
template <typename W>
__global__ void sliceKernel(W *full, W *part, int64_t n, int64_t inner,
                            int64_t len, int64_t fullDim, int64_t start,
                            int64_t step, int toFull) {
  OFFLOAD_GRID_LOOP(i, n) {
    int64_t r = i / inner, k = i % inner;
    int64_t o = r / len, j = r % len;
    int64_t f = ((o * fullDim) + start + j * step) * inner + k;
    if (toFull)
      full[f] = part[i];
    else
      part[i] = full[f];
  }
}

std::string sliceCopy(const CudaKernelArgs &a, const char *op,
                      const TensorView &full, const TensorView &part,
                      const SliceSpec &s, bool toFull) {
  int64_t n = part.numel();
  if (n == 0)
    return "";
  int64_t inner = prodRange(full.shape, size_t(s.dim) + 1, full.shape.size());
  int64_t fullDim = full.shape[size_t(s.dim)];
  switch (dtypeSize(full.dtype)) {
  case 1:
    sliceKernel<uint8_t><<<blocksFor(n), kThreads, 0, a.ctx.stream>>>(
        full.as<uint8_t>(), part.as<uint8_t>(), n, inner, s.len, fullDim,
        s.start, s.step, toFull);
    break;
  case 2:
    sliceKernel<uint16_t><<<blocksFor(n), kThreads, 0, a.ctx.stream>>>(
        full.as<uint16_t>(), part.as<uint16_t>(), n, inner, s.len, fullDim,
        s.start, s.step, toFull);
    break;
  case 4:
    sliceKernel<uint32_t><<<blocksFor(n), kThreads, 0, a.ctx.stream>>>(
        full.as<uint32_t>(), part.as<uint32_t>(), n, inner, s.len, fullDim,
        s.start, s.step, toFull);
    break;
  default:
    sliceKernel<uint64_t><<<blocksFor(n), kThreads, 0, a.ctx.stream>>>(
        full.as<uint64_t>(), part.as<uint64_t>(), n, inner, s.len, fullDim,
        s.start, s.step, toFull);
    break;
  }
  return launched(op);
}

std::vector<int64_t> slicedShape(std::vector<int64_t> s, const SliceSpec &sp) {
  s[size_t(sp.dim)] = sp.len;
  return s;
}

std::string kSlice(const CudaKernelArgs &a) {
  const char *op = "slice";
  const TensorView &x = a.inputs[0], &y = a.outputs[0];
  if (auto e = needDType(y, x.dtype, op, "y"); !e.empty())
    return e;
  SliceSpec s;
  if (auto e = geom::sliceSpec(op, a.attrs, x.shape, s); !e.empty())
    return e;
  if (y.shape != slicedShape(x.shape, s))
    return std::string(op) + ": y has shape " + shapeStr(y.shape) +
           ", expected " + shapeStr(slicedShape(x.shape, s));
  return sliceCopy(a, op, x, y, s, false);
}

std::string kSliceBackward(const CudaKernelArgs &a) {
  const char *op = "slice_backward";
  const TensorView &dy = a.inputs[0], &dx = a.outputs[0];
  if (auto e = needDType(dx, dy.dtype, op, "dx"); !e.empty())
    return e;
  SliceSpec s;
  if (auto e = geom::sliceSpec(op, a.attrs, dx.shape, s); !e.empty())
    return e;
  if (dy.shape != slicedShape(dx.shape, s))
    return std::string(op) + ": dy has shape " + shapeStr(dy.shape) +
           ", expected " + shapeStr(slicedShape(dx.shape, s));
  if (dx.bytes()) {
    cudaError_t e = cudaMemsetAsync(dx.data, 0, dx.bytes(), a.ctx.stream);
    if (e != cudaSuccess)
      return cudaErrorText("cudaMemsetAsync", e);
  }
  return sliceCopy(a, op, dx, dy, s, true);
}

//===----------------------------------------------------------------------===//
// embedding, embedding_backward
//===----------------------------------------------------------------------===//

template <typename T>
__global__ void embeddingKernel(const T *w, const int64_t *idx, T *y,
                                int64_t n, int64_t d, int64_t v, int *flag,
                                int instr) {
  OFFLOAD_GRID_LOOP(i, n) {
    int64_t row = i / d, col = i % d;
    int64_t k = idx[row];
    if (k < 0 || k >= v) {
      reportDeviceError(flag, instr, kDeviceErrorIndexRange);
      y[i] = T(0); // +0 for every float type (a uint16_t 0 for bf16/f16)
    } else {
      y[i] = w[k * d + col];
    }
  }
}

/// Thread (j, b) owns column j of the dweight rows in vocabulary chunk b
/// ([b * rowsPerChunk, (b+1) * rowsPerChunk)) and adds the rows of dy whose
/// index falls there, in index order: each dweight element gets the host
/// kernel's sum in the host's order, bit for bit, while vocabulary chunks
/// run in parallel. Every thread reads all n indices (one broadcast load
/// per warp); only chunk 0 reports an index out of range.
template <typename T>
__global__ void embeddingBackwardKernel(const T *dy, const int64_t *idx,
                                        T *dw, int64_t n, int64_t d,
                                        int64_t v, int64_t rowsPerChunk,
                                        int64_t chunks, int64_t pad,
                                        int *flag, int instr) {
  OFFLOAD_GRID_LOOP(t, d * chunks) {
    int64_t j = t % d, b = t / d;
    int64_t lo = b * rowsPerChunk, hi = lo + rowsPerChunk;
    for (int64_t i = 0; i < n; ++i) {
      int64_t k = idx[i];
      if (k < 0 || k >= v) {
        if (t == 0)
          reportDeviceError(flag, instr, kDeviceErrorIndexRange);
        continue;
      }
      if (k >= lo && k < hi && k != pad)
        dw[k * d + j] += dy[i * d + j];
    }
  }
}

/// bf16/f16 dweight: the host's f32 sums (rows of dy in index order into a
/// zeroed row), rounded once. Thread (j, b) owns column j of the
/// kLowRows vocabulary rows of chunk b and keeps their sums in f32
/// registers; it reads all n indices, as the f32 kernel's threads do.
constexpr int kLowRows = 16;
template <typename T>
__global__ void embeddingBackwardLowKernel(const T *dy, const int64_t *idx,
                                           T *dw, int64_t n, int64_t d,
                                           int64_t v, int64_t chunks,
                                           int64_t pad, int *flag, int instr) {
  OFFLOAD_GRID_LOOP(t, d * chunks) {
    int64_t j = t % d, b = t / d;
    int64_t lo = b * kLowRows, hi = em::minOf<int64_t>(lo + kLowRows, v);
    float acc[kLowRows];
    for (int r = 0; r < kLowRows; ++r)
      acc[r] = 0.f;
    for (int64_t i = 0; i < n; ++i) {
      int64_t k = idx[i];
      if (k < 0 || k >= v) {
        if (t == 0)
          reportDeviceError(flag, instr, kDeviceErrorIndexRange);
        continue;
      }
      if (k >= lo && k < hi && k != pad) {
        // A switch over the row keeps acc in registers (no local memory).
        float g = ld(dy[i * d + j]);
#pragma unroll
        for (int r = 0; r < kLowRows; ++r)
          if (k - lo == r)
            acc[r] += g;
      }
    }
#pragma unroll
    for (int r = 0; r < kLowRows; ++r)
      if (lo + r < hi)
        dw[(lo + r) * d + j] = st<T>(acc[r]);
  }
}

std::vector<int64_t> withRow(std::vector<int64_t> s, int64_t d) {
  s.push_back(d);
  return s;
}

std::string kEmbedding(const CudaKernelArgs &a) {
  const char *op = "embedding";
  const TensorView &w = a.inputs[0], &idx = a.inputs[1], &y = a.outputs[0];
  if (auto e = needAnyFloat(w, op, "weight"); !e.empty())
    return e;
  if (w.rank() != 2)
    return std::string(op) + ": weight must be [V,D], got " +
           shapeStr(w.shape);
  if (auto e = needDType(y, w.dtype, op, "y"); !e.empty())
    return e;
  if (auto e = needDType(idx, DType::I64, op, "indices"); !e.empty())
    return e;
  int64_t d = w.shape[1], v = w.shape[0];
  if (y.shape != withRow(idx.shape, d))
    return std::string(op) + ": y has shape " + shapeStr(y.shape) +
           ", expected " + shapeStr(withRow(idx.shape, d));
  int64_t n = y.numel();
  if (n == 0)
    return "";
  if (isLowFloat(w.dtype)) // rows copied: the bits
    embeddingKernel<uint16_t><<<blocksFor(n), kThreads, 0, a.ctx.stream>>>(
        w.as<uint16_t>(), idx.as<int64_t>(), y.as<uint16_t>(), n, d, v,
        a.ctx.errorFlag, a.instruction);
  else if (w.dtype == DType::F32)
    embeddingKernel<float><<<blocksFor(n), kThreads, 0, a.ctx.stream>>>(
        w.as<float>(), idx.as<int64_t>(), y.as<float>(), n, d, v,
        a.ctx.errorFlag, a.instruction);
  else
    embeddingKernel<double><<<blocksFor(n), kThreads, 0, a.ctx.stream>>>(
        w.as<double>(), idx.as<int64_t>(), y.as<double>(), n, d, v,
        a.ctx.errorFlag, a.instruction);
  return launched(op);
}

std::string kEmbeddingBackward(const CudaKernelArgs &a) {
  const char *op = "embedding_backward";
  const TensorView &dy = a.inputs[0], &idx = a.inputs[1], &dw = a.outputs[0];
  if (auto e = needAnyFloat(dw, op, "dweight"); !e.empty())
    return e;
  if (dw.rank() != 2)
    return std::string(op) + ": dweight must be [V,D], got " +
           shapeStr(dw.shape);
  if (auto e = needDType(dy, dw.dtype, op, "dy"); !e.empty())
    return e;
  if (auto e = needDType(idx, DType::I64, op, "indices"); !e.empty())
    return e;
  int64_t d = dw.shape[1], v = dw.shape[0], n = idx.numel();
  if (dy.shape != withRow(idx.shape, d))
    return std::string(op) + ": dy has shape " + shapeStr(dy.shape) +
           ", expected " + shapeStr(withRow(idx.shape, d));
  if (dw.bytes()) {
    cudaError_t e = cudaMemsetAsync(dw.data, 0, dw.bytes(), a.ctx.stream);
    if (e != cudaSuccess)
      return cudaErrorText("cudaMemsetAsync", e);
  }
  if (d == 0 || n == 0)
    return "";
  if (isLowFloat(dw.dtype)) {
    int64_t lowChunks = (v + kLowRows - 1) / kLowRows;
    auto runLow = [&](auto tag) {
      using T = decltype(tag);
      embeddingBackwardLowKernel<T><<<blocksFor(d * lowChunks), kThreads, 0,
                                      a.ctx.stream>>>(
          dy.as<T>(), idx.as<int64_t>(), dw.as<T>(), n, d, v, lowChunks,
          a.attrs.getInt("padding_idx", -1), a.ctx.errorFlag, a.instruction);
    };
    if (dw.dtype == DType::BF16)
      runLow(__nv_bfloat16());
    else
      runLow(__half());
    return launched(op);
  }
  // About 2^18 threads: enough vocabulary chunks to fill the GPU.
  int64_t chunks = std::max<int64_t>(
      1, std::min<int64_t>(v, ((int64_t(1) << 18) + d - 1) / d));
  int64_t rowsPerChunk = std::max<int64_t>(1, (v + chunks - 1) / chunks);
  chunks = std::max<int64_t>(1, (v + rowsPerChunk - 1) / rowsPerChunk);
  auto run = [&](auto tag) {
    using T = decltype(tag);
    embeddingBackwardKernel<T><<<blocksFor(d * chunks), kThreads, 0,
                                 a.ctx.stream>>>(
        dy.as<T>(), idx.as<int64_t>(), dw.as<T>(), n, d, v, rowsPerChunk,
        chunks, a.attrs.getInt("padding_idx", -1), a.ctx.errorFlag, a.instruction);
  };
  if (dw.dtype == DType::F32)
    run(float());
  else
    run(double());
  return launched(op);
}

//===----------------------------------------------------------------------===//
// cumsum, gather (integer and bool values: ids, masks)
//===----------------------------------------------------------------------===//

/// One thread per line along the scanned dim, summing in index order
/// (wrapping, as the host kernel).
template <typename T>
__global__ void cumsumKernel(const T *x, T *y, int64_t lines, int64_t n,
                             int64_t inner) {
  OFFLOAD_GRID_LOOP(line, lines) {
    int64_t base = (line / inner) * n * inner + line % inner;
    T acc = 0;
    for (int64_t k = 0; k < n; ++k) {
      acc = em::wrapAdd<T>(acc, x[base + k * inner]);
      y[base + k * inner] = acc;
    }
  }
}

std::string kCumsum(const CudaKernelArgs &a) {
  const char *op = "cumsum";
  const TensorView &x = a.inputs[0], &y = a.outputs[0];
  if (x.dtype != DType::I64 && x.dtype != DType::I32)
    return std::string(op) + ": x must be i64 or i32, got " + dtypeName(x.dtype);
  if (auto e = needSame(x, y, op, "x", "y"); !e.empty())
    return e;
  int64_t d = a.attrs.getInt("dim", 0), r = int64_t(x.rank());
  if (d < 0)
    d += std::max<int64_t>(r, 1);
  if (d < 0 || d >= std::max<int64_t>(r, 1))
    return std::string(op) + ": dim " + std::to_string(a.attrs.getInt("dim", 0)) +
           " out of range for shape " + shapeStr(x.shape);
  int64_t n = r ? x.shape[size_t(d)] : 1, inner = 1, total = x.numel();
  for (int64_t k = d + 1; k < r; ++k)
    inner *= x.shape[size_t(k)];
  if (total == 0)
    return "";
  int64_t lines = total / n;
  if (x.dtype == DType::I64)
    cumsumKernel<int64_t><<<blocksFor(lines), kThreads, 0, a.ctx.stream>>>(
        x.as<int64_t>(), y.as<int64_t>(), lines, n, inner);
  else
    cumsumKernel<int32_t><<<blocksFor(lines), kThreads, 0, a.ctx.stream>>>(
        x.as<int32_t>(), y.as<int32_t>(), lines, n, inner);
  return launched(op);
}

/// y[i] = x at i's coordinates (in the index's shape) with coordinate `dim`
/// replaced by index[i]; an index out of [0, size) is reported and gives 0.
template <typename W>
__global__ void torchGatherKernel(const W *x, const int64_t *idx, W *y, int64_t n,
                             Strided s, int dim, int64_t size, int *flag,
                             int instr) {
  OFFLOAD_GRID_LOOP(i, n) {
    // s.shape: the index's shape; s.st[0]: the input's strides.
    int64_t rem = i, off = 0;
    int64_t k = idx[i];
    bool bad = k < 0 || k >= size;
    for (int d = s.rank - 1; d >= 0; --d) {
      int64_t c = rem % s.shape[d];
      rem /= s.shape[d];
      off += (d == dim ? k : c) * s.st[0][d];
    }
    if (bad) {
      reportDeviceError(flag, instr, kDeviceErrorIndexRange);
      y[i] = W(0);
    } else {
      y[i] = x[off];
    }
  }
}

std::string kGather(const CudaKernelArgs &a) {
  const char *op = "gather";
  const TensorView &x = a.inputs[0], &idx = a.inputs[1], &y = a.outputs[0];
  if (x.dtype == DType::F32 || x.dtype == DType::F64)
    return std::string(op) + ": input must be i64, i32 or bool, got " + dtypeName(x.dtype);
  if (auto e = needDType(idx, DType::I64, op, "index"); !e.empty())
    return e;
  if (auto e = needDType(y, x.dtype, op, "y"); !e.empty())
    return e;
  if (y.shape != idx.shape)
    return std::string(op) + ": y has shape " + shapeStr(y.shape) +
           ", expected the index's " + shapeStr(idx.shape);
  int64_t r = int64_t(x.rank()), d = a.attrs.getInt("dim", 0);
  if (int64_t(idx.rank()) != r)
    return std::string(op) + ": index rank differs from the input's";
  if (d < 0)
    d += std::max<int64_t>(r, 1);
  if (d < 0 || d >= std::max<int64_t>(r, 1))
    return std::string(op) + ": dim out of range for shape " + shapeStr(x.shape);
  for (int64_t k = 0; k < r; ++k)
    if (k != d && idx.shape[size_t(k)] > x.shape[size_t(k)])
      return std::string(op) + ": index " + shapeStr(idx.shape) +
             " exceeds the input " + shapeStr(x.shape);
  Strided s;
  if (auto e = stridedOver(y, op, s); !e.empty())
    return e;
  int64_t stride = 1;
  for (int64_t k = r - 1; k >= 0; --k) {
    s.st[0][k] = stride;
    stride *= x.shape[size_t(k)];
  }
  int64_t n = y.numel(), size = r ? x.shape[size_t(d)] : 1;
  if (n == 0)
    return "";
  switch (dtypeSize(x.dtype)) {
  case 1:
    torchGatherKernel<uint8_t><<<blocksFor(n), kThreads, 0, a.ctx.stream>>>(
        x.as<uint8_t>(), idx.as<int64_t>(), y.as<uint8_t>(), n, s, int(d), size,
        a.ctx.errorFlag, a.instruction);
    break;
  case 4:
    torchGatherKernel<uint32_t><<<blocksFor(n), kThreads, 0, a.ctx.stream>>>(
        x.as<uint32_t>(), idx.as<int64_t>(), y.as<uint32_t>(), n, s, int(d), size,
        a.ctx.errorFlag, a.instruction);
    break;
  default:
    torchGatherKernel<uint64_t><<<blocksFor(n), kThreads, 0, a.ctx.stream>>>(
        x.as<uint64_t>(), idx.as<int64_t>(), y.as<uint64_t>(), n, s, int(d), size,
        a.ctx.errorFlag, a.instruction);
    break;
  }
  return launched(op);
}

} // namespace

const std::vector<Entry> &dataEntries() {
  static const std::vector<Entry> e = {
      {"offload.reduce_sum", kReduceSum, true},
      {"offload.reduce_mean", kReduceMean, true},
      {"offload.broadcast_to", kBroadcastTo, true},
      {"offload.reshape", kReshape, true},
      {"offload.transpose", kTranspose, true},
      {"offload.cat", kCat, true},
      {"offload.slice", kSlice, true},
      {"offload.slice_backward", kSliceBackward, true},
      {"offload.embedding", kEmbedding, true},
      {"offload.embedding_backward", kEmbeddingBackward, true},
      {"offload.cumsum", kCumsum},
      {"offload.gather", kGather},
  };
  return e;
}

} // namespace cuda
} // namespace rt
} // namespace offload
