//===- Loss.cpp - Loss functions and their gradients -----------------------===//
//
// Part of offload. cross_entropy, nll_loss and mse_loss with their backward
// ops, as PyTorch 1.13 (docs/op-semantics.md, "Embedding, dropout, losses").
//
// cross_entropy(logits[N,C], target[N]) with label smoothing ls follows ATen's
// cross_entropy_loss_label_smoothing (no class weights):
//   lp = log_softmax(logits, 1)
//   nll = nll_loss(lp, target, reduction, ignore_index)
//   smooth_i = -sum_c lp[i,c], zero where target_i == ignore_index
//   S = sum_i smooth_i  (reduction "sum"), or that sum divided by the
//       number of non-ignored rows ("mean", as nll)
//   loss = (1 - ls) * nll + (ls / C) * S
// nll "mean" divides by the number of non-ignored rows (0/0 -> nan as ATen).
// Its gradient, with p = softmax(logits):
//   dlogits[i,k] = dloss * valid_i * ((1-ls)/Dn * (p_k - [k == t_i])
//                                     + (ls/C)/Ds * (C p_k - 1))
// where Dn = Ds = number of non-ignored rows ("mean") or 1 ("sum").
// Row sums accumulate in double; rows are independent, so results do not
// depend on the thread count.
//
//===----------------------------------------------------------------------===//

#include "ElementMath.h"
#include "KernelSupport.h"

#include <cmath>
#include <limits>

namespace offload {
namespace rt {
namespace kernels {
namespace {

enum class Red { Mean, Sum };

std::string reduction(const KernelArgs &args, const char *op, Red &r) {
  std::string s = args.attrs.getString("reduction", "mean");
  if (s == "mean") r = Red::Mean;
  else if (s == "sum") r = Red::Sum;
  else return std::string(op) + ": reduction must be mean or sum, got " + s;
  return "";
}

/// Validates logits/logp [N,C] float, target [N] i64 in range (or
/// ignore_index), and a scalar loss-like tensor `scalar` of the same dtype.
std::string checkClassification(const char *op, const TensorView &in,
                                const TensorView &target,
                                const TensorView &scalar, int64_t ignoreIndex) {
  if (auto e = checkFloat(in, op, "input"); !e.empty()) return e;
  if (in.rank() != 2)
    return std::string(op) + ": input must be [N,C], got " + shapeStr(in.shape);
  if (auto e = checkDType(target, DType::I64, op, "target"); !e.empty()) return e;
  if (target.rank() != 1 || target.shape[0] != in.shape[0])
    return std::string(op) + ": target has shape " + shapeStr(target.shape) +
           ", expected [" + std::to_string(in.shape[0]) + "]";
  if (auto e = checkDType(scalar, in.dtype, op, "loss"); !e.empty()) return e;
  if (scalar.numel() != 1 || scalar.rank() != 0)
    return std::string(op) + ": loss must be a rank-0 tensor, got " +
           shapeStr(scalar.shape);
  const int64_t *t = target.as<int64_t>();
  int64_t c = in.shape[1];
  for (int64_t i = 0; i < target.numel(); ++i)
    if (t[i] != ignoreIndex && (t[i] < 0 || t[i] >= c))
      return std::string(op) + ": target " + std::to_string(t[i]) +
             " out of range [0, " + std::to_string(c) + ")";
  return "";
}

/// Log-sum-exp of one row, in double.
template <typename T> double rowLogSumExp(const T *row, int64_t c) {
  double m = -std::numeric_limits<double>::infinity();
  for (int64_t k = 0; k < c; ++k) m = std::max(m, double(row[k]));
  if (std::isinf(m)) return m;
  double s = 0;
  for (int64_t k = 0; k < c; ++k) s += std::exp(double(row[k]) - m);
  return m + std::log(s);
}

struct CEParams {
  Red red;
  int64_t ignore;
  double ls;
};

std::string ceParams(const KernelArgs &args, const char *op, CEParams &p) {
  if (auto e = reduction(args, op, p.red); !e.empty()) return e;
  p.ignore = args.attrs.getInt("ignore_index", -100);
  p.ls = args.attrs.getFloat("label_smoothing", 0.0);
  if (p.ls < 0.0 || p.ls > 1.0)
    return std::string(op) + ": label_smoothing must be in [0, 1]";
  return "";
}

std::string crossEntropy(const KernelArgs &args) {
  const char *op = "cross_entropy";
  CEParams p;
  if (auto e = ceParams(args, op, p); !e.empty()) return e;
  const TensorView &x = args.inputs[0], &t = args.inputs[1], &y = args.outputs[0];
  if (auto e = checkClassification(op, x, t, y, p.ignore); !e.empty()) return e;
  int64_t n = x.shape[0], c = x.shape[1];
  auto run = [&](auto tag) {
    using T = decltype(tag);
    const T *xp = x.as<T>();
    const int64_t *tp = t.as<int64_t>();
    std::vector<double> nllRow(static_cast<size_t>(n), 0.0), smRow(size_t(n), 0.0);
    std::vector<char> valid(static_cast<size_t>(n), 0);
    parallelFor(n, args.numThreads, std::max<int64_t>(1, kGrain / std::max<int64_t>(1, c)),
                [&](int64_t b, int64_t e) {
                  for (int64_t i = b; i < e; ++i) {
                    if (tp[i] == p.ignore) continue;
                    valid[size_t(i)] = 1;
                    const T *row = xp + i * c;
                    double lse = rowLogSumExp(row, c);
                    nllRow[size_t(i)] = lse - double(row[tp[i]]);
                    if (p.ls > 0) {
                      double s = 0;
                      for (int64_t k = 0; k < c; ++k) s += lse - double(row[k]);
                      smRow[size_t(i)] = s;
                    }
                  }
                });
    double nll = 0, sm = 0;
    int64_t count = 0;
    for (int64_t i = 0; i < n; ++i) {
      nll += nllRow[size_t(i)];
      sm += smRow[size_t(i)];
      count += valid[size_t(i)];
    }
    double loss = em::CrossEntropyLoss{p.ls, c, p.red == Red::Mean}(nll, sm, count);
    y.as<T>()[0] = T(loss);
  };
  if (x.dtype == DType::F32) run(float());
  else run(double());
  return "";
}

std::string crossEntropyBackward(const KernelArgs &args) {
  const char *op = "cross_entropy_backward";
  CEParams p;
  if (auto e = ceParams(args, op, p); !e.empty()) return e;
  const TensorView &dl = args.inputs[0], &x = args.inputs[1],
                   &t = args.inputs[2], &dx = args.outputs[0];
  if (auto e = checkClassification(op, x, t, dl, p.ignore); !e.empty()) return e;
  if (auto e = checkSame(x, dx, op, "logits", "dlogits"); !e.empty()) return e;
  int64_t n = x.shape[0], c = x.shape[1];
  const int64_t *tp = t.as<int64_t>();
  int64_t count = 0;
  for (int64_t i = 0; i < n; ++i) count += tp[i] != p.ignore;
  auto run = [&](auto tag) {
    using T = decltype(tag);
    const T *xp = x.as<T>();
    T *dp = dx.as<T>();
    em::CrossEntropyGrad grad = em::CrossEntropyGrad::make(
        double(dl.as<T>()[0]), p.ls, c, p.red == Red::Mean, count);
    parallelFor(n, args.numThreads, std::max<int64_t>(1, kGrain / std::max<int64_t>(1, c)),
                [&](int64_t b, int64_t e) {
                  for (int64_t i = b; i < e; ++i) {
                    const T *row = xp + i * c;
                    T *out = dp + i * c;
                    if (tp[i] == p.ignore) {
                      for (int64_t k = 0; k < c; ++k) out[k] = T(0);
                      continue;
                    }
                    double lse = rowLogSumExp(row, c);
                    for (int64_t k = 0; k < c; ++k)
                      out[k] = T(grad(double(row[k]), lse, k == tp[i]));
                  }
                });
  };
  if (x.dtype == DType::F32) run(float());
  else run(double());
  return "";
}

std::string nllLoss(const KernelArgs &args) {
  const char *op = "nll_loss";
  Red red;
  if (auto e = reduction(args, op, red); !e.empty()) return e;
  int64_t ignore = args.attrs.getInt("ignore_index", -100);
  const TensorView &x = args.inputs[0], &t = args.inputs[1], &y = args.outputs[0];
  if (auto e = checkClassification(op, x, t, y, ignore); !e.empty()) return e;
  int64_t n = x.shape[0], c = x.shape[1];
  auto run = [&](auto tag) {
    using T = decltype(tag);
    const T *xp = x.as<T>();
    const int64_t *tp = t.as<int64_t>();
    double s = 0;
    int64_t count = 0;
    for (int64_t i = 0; i < n; ++i) {
      if (tp[i] == ignore) continue;
      s -= double(xp[i * c + tp[i]]);
      ++count;
    }
    if (red == Red::Mean) s /= double(count);
    y.as<T>()[0] = T(s);
  };
  if (x.dtype == DType::F32) run(float());
  else run(double());
  return "";
}

std::string nllLossBackward(const KernelArgs &args) {
  const char *op = "nll_loss_backward";
  Red red;
  if (auto e = reduction(args, op, red); !e.empty()) return e;
  int64_t ignore = args.attrs.getInt("ignore_index", -100);
  const TensorView &dl = args.inputs[0], &x = args.inputs[1],
                   &t = args.inputs[2], &dx = args.outputs[0];
  if (auto e = checkClassification(op, x, t, dl, ignore); !e.empty()) return e;
  if (auto e = checkSame(x, dx, op, "logp", "dlogp"); !e.empty()) return e;
  int64_t n = x.shape[0], c = x.shape[1];
  const int64_t *tp = t.as<int64_t>();
  int64_t count = 0;
  for (int64_t i = 0; i < n; ++i) count += tp[i] != ignore;
  auto run = [&](auto tag) {
    using T = decltype(tag);
    T *dp = dx.as<T>();
    std::memset(dp, 0, dx.bytes());
    double g = double(dl.as<T>()[0]);
    T v = em::nllGradValue<T>(g, red == Red::Mean, count);
    for (int64_t i = 0; i < n; ++i)
      if (tp[i] != ignore) dp[i * c + tp[i]] = v;
  };
  if (x.dtype == DType::F32) run(float());
  else run(double());
  return "";
}

std::string mseLoss(const KernelArgs &args) {
  const char *op = "mse_loss";
  Red red;
  if (auto e = reduction(args, op, red); !e.empty()) return e;
  const TensorView &x = args.inputs[0], &t = args.inputs[1], &y = args.outputs[0];
  if (auto e = checkFloat(x, op, "x"); !e.empty()) return e;
  if (auto e = checkSame(x, t, op, "x", "target"); !e.empty()) return e;
  if (auto e = checkDType(y, x.dtype, op, "loss"); !e.empty()) return e;
  if (y.rank() != 0) return std::string(op) + ": loss must be rank 0";
  int64_t n = x.numel();
  auto run = [&](auto tag) {
    using T = decltype(tag);
    const T *xp = x.as<T>(), *tp = t.as<T>();
    // Fixed blocks summed in parallel, combined in order: deterministic.
    int64_t nb = (n + kGrain - 1) / kGrain;
    std::vector<double> part(static_cast<size_t>(nb), 0.0);
    parallelFor(nb, args.numThreads, 2, [&](int64_t b, int64_t e) {
      for (int64_t k = b; k < e; ++k) {
        double s = 0;
        for (int64_t i = k * kGrain, end = std::min(n, (k + 1) * kGrain); i < end; ++i)
          s += em::mseTerm(xp[i], tp[i]);
        part[size_t(k)] = s;
      }
    });
    double s = 0;
    for (double v : part) s += v;
    if (red == Red::Mean) s /= double(n);
    y.as<T>()[0] = T(s);
  };
  if (x.dtype == DType::F32) run(float());
  else run(double());
  return "";
}

std::string mseLossBackward(const KernelArgs &args) {
  const char *op = "mse_loss_backward";
  Red red;
  if (auto e = reduction(args, op, red); !e.empty()) return e;
  const TensorView &dl = args.inputs[0], &x = args.inputs[1],
                   &t = args.inputs[2], &dx = args.outputs[0];
  if (auto e = checkFloat(x, op, "x"); !e.empty()) return e;
  if (auto e = checkSame(x, t, op, "x", "target"); !e.empty()) return e;
  if (auto e = checkSame(x, dx, op, "x", "dx"); !e.empty()) return e;
  if (auto e = checkDType(dl, x.dtype, op, "dloss"); !e.empty()) return e;
  if (dl.rank() != 0) return std::string(op) + ": dloss must be rank 0";
  int64_t n = x.numel();
  auto run = [&](auto tag) {
    using T = decltype(tag);
    const T *xp = x.as<T>(), *tp = t.as<T>();
    T *dp = dx.as<T>();
    // ATen: norm = 2/N (mean) or 2; dx = norm * (x - t) * dloss.
    em::MseGrad<T> grad = em::MseGrad<T>::make(red == Red::Mean, n, dl.as<T>()[0]);
    parallelFor(n, args.numThreads, kGrain, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) dp[i] = grad(xp[i], tp[i]);
    });
  };
  if (x.dtype == DType::F32) run(float());
  else run(double());
  return "";
}

} // namespace

void registerLossKernels(KernelRegistry &r) {
  addEmulated<crossEntropy>(r, "offload.cross_entropy");
  addEmulated<crossEntropyBackward>(r, "offload.cross_entropy_backward");
  addEmulated<nllLoss>(r, "offload.nll_loss");
  addEmulated<nllLossBackward>(r, "offload.nll_loss_backward");
  addEmulated<mseLoss>(r, "offload.mse_loss");
  addEmulated<mseLossBackward>(r, "offload.mse_loss_backward");
}

} // namespace kernels
} // namespace rt
} // namespace offload
