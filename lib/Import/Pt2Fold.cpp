//===- Pt2Fold.cpp - ATen ops evaluated at import time ---------------------===//
//
// Part of offload. torch.export writes the integer and boolean tensor
// arithmetic of a model's Python code into the graph: HuggingFace decoders
// build position ids with arange + add, causal masks with comparisons of
// indexed position tensors, `&`, `~` and where, T5 its relative-position
// buckets with abs, log, min and lt. When such a computation depends on no
// input of the step (only on arange/ones/full, on tensors torch.export
// lifted as constants, and on non-persistent buffers the step never
// updates), it is evaluated here, once, and the step holds its result as an
// `offload.constant`: the step then has no integer ops to run and its masks
// cost nothing per step.
//
// Values are held as doubles rounded to their element type after every op
// (an f32 op computes in float, as PyTorch's CPU kernels do; integers are
// exact up to 2^53); dtype promotion follows PyTorch's result_type
// (dimensioned tensors, then 0-dim tensors, then Python numbers). A result
// over 2^24 elements is not folded (the op is then converted as usual).
//
//===----------------------------------------------------------------------===//
#include "Pt2.h"
#include "offload/Runtime/Float16.h"

#include "llvm/ADT/StringSet.h"

#include <cmath>
#include <cstring>
#include <limits>

using namespace mlir;
using namespace ::offload::import;
using namespace ::offload::import::ts;

namespace {

constexpr int64_t kMaxFoldElems = int64_t(1) << 24;

using Shape = std::vector<int64_t>;

int category(Type t) { // 0 bool, 1 integer, 2 float
  if (t.isInteger(1))
    return 0;
  return isa<IntegerType>(t) ? 1 : 2;
}

/// `v` rounded to element type `t`.
double roundTo(Type t, double v) {
  if (t.isInteger(1))
    return v != 0 ? 1 : 0;
  if (t.isInteger(32))
    return double(int32_t(int64_t(v)));
  if (t.isInteger(64))
    return std::isfinite(v) ? std::trunc(v) : v;
  if (t.isF32())
    return double(float(v));
  return v;
}

int64_t numelOf(const Shape &s) {
  int64_t n = 1;
  for (int64_t d : s)
    n *= d;
  return n;
}

Shape stridesOf(const Shape &s) {
  Shape st(s.size(), 1);
  for (size_t d = s.size(); d-- > 1;)
    st[d - 1] = st[d] * s[d];
  return st;
}

/// Calls f(index, flat) for every element of `shape` in row-major order.
template <typename F>
void forEachIndex(const Shape &shape, F f) {
  int64_t n = numelOf(shape);
  Shape idx(shape.size(), 0);
  for (int64_t k = 0; k < n; ++k) {
    f(idx, k);
    for (size_t d = idx.size(); d-- > 0;) {
      if (++idx[d] < shape[d])
        break;
      idx[d] = 0;
    }
  }
}

/// One operand of an elementwise op: a constant tensor or a Python number.
struct Operand {
  ConstPtr t;
  double v = 0;
  Type type;        // element type (a number's: f64/i64/i1 by its kind)
  int priority = 0; // 2 dimensioned tensor, 1 0-dim tensor, 0 number
  double at(int64_t off) const { return t ? t->data[size_t(off)] : v; }
  Shape shape() const { return t ? t->shape : Shape(); }
};

class Folder {
public:
  Folder(StepBuilder &sb, Call &call, const ConstLookup &lookup)
      : sb(sb), call(call), lookup(lookup), b(sb.b) {}

  ConstPtr run(const std::string &op, const std::string &overload);

private:
  [[noreturn]] void fail(const std::string &msg) { sb.fail(call, msg); }
  size_t nargs() const { return call.args.size(); }
  const Arg &arg(size_t i) {
    if (i >= call.args.size())
      fail("missing argument " + std::to_string(i));
    return call.args[i];
  }
  bool isNumber(const Arg &a) {
    return a.kind == Arg::Int || a.kind == Arg::Double || a.kind == Arg::Bool;
  }
  /// Argument i as a constant tensor (null: not one).
  ConstPtr cst(size_t i) {
    const Arg &a = arg(i);
    return a.kind == Arg::Const ? lookup(a) : nullptr;
  }
  /// Argument i as an elementwise operand; false when it is a tensor of the
  /// step (not foldable).
  bool operand(size_t i, Operand &o) {
    const Arg &a = arg(i);
    if (isNumber(a)) {
      o.v = sb.scalarValue(a);
      o.type = a.kind == Arg::Double ? Type(b.getF64Type())
               : a.kind == Arg::Int  ? Type(b.getI64Type())
                                     : Type(b.getI1Type());
      o.priority = 0;
      return true;
    }
    ConstPtr c = cst(i);
    if (!c)
      return false;
    o.t = c;
    o.type = c->elemType;
    o.priority = c->shape.empty() ? 1 : 2;
    return true;
  }
  /// The shape and element type of argument i, a constant or a tensor of
  /// the step (for ops that only read their operand's type).
  bool typeOf(size_t i, Shape &shape, Type &et) {
    const Arg &a = arg(i);
    if (a.kind == Arg::Tensor) {
      auto t = cast<RankedTensorType>(a.value.getType());
      shape.assign(t.getShape().begin(), t.getShape().end());
      et = t.getElementType();
      return true;
    }
    if (ConstPtr c = cst(i)) {
      shape = c->shape;
      et = c->elemType;
      return true;
    }
    return false;
  }
  int64_t getInt(size_t i) { return sb.getInt(call, i); }
  std::vector<int64_t> getInts(size_t i) { return sb.getInts(call, i); }
  /// The first dtype argument, else `dflt`.
  Type dtypeArg(Type dflt) {
    for (const Arg &a : call.args)
      if (a.kind == Arg::Dtype) {
        if (!a.type)
          fail("unsupported dtype " + a.s);
        return a.type;
      }
    return dflt;
  }
  int64_t dim(int64_t d, int64_t rank) {
    int64_t r = std::max<int64_t>(rank, 1);
    if (d < -r || d >= r)
      fail("dim " + std::to_string(d) + " out of range for rank " + std::to_string(rank));
    return d < 0 ? d + r : d;
  }
  /// PyTorch's result_type of the operands (OpBuilder.h: the one rule).
  Type promote(llvm::ArrayRef<Operand> ops) {
    std::vector<Promoted> p;
    for (const Operand &o : ops)
      p.push_back({o.type, o.priority});
    return resultType(*b.getContext(), p);
  }
  Shape broadcast(const Shape &a, const Shape &c) {
    Shape out(std::max(a.size(), c.size()), 1);
    for (size_t k = 0; k < out.size(); ++k) {
      int64_t x = k < out.size() - a.size() ? 1 : a[k - (out.size() - a.size())];
      int64_t y = k < out.size() - c.size() ? 1 : c[k - (out.size() - c.size())];
      if (x != y && x != 1 && y != 1)
        fail("shapes " + shapeStr(a) + " and " + shapeStr(c) + " do not broadcast");
      out[k] = x == 1 ? y : x;
    }
    return out;
  }
  /// Strides of `s` read as broadcast to `out` (0 along broadcast dims).
  Shape bstrides(const Shape &s, const Shape &out) {
    Shape st = stridesOf(s), r(out.size(), 0);
    size_t off = out.size() - s.size();
    for (size_t k = 0; k < s.size(); ++k)
      r[off + k] = s[k] == 1 ? 0 : st[k];
    return r;
  }
  static std::string shapeStr(const Shape &s) {
    std::string r = "[";
    for (size_t i = 0; i < s.size(); ++i)
      r += (i ? ", " : "") + std::to_string(s[i]);
    return r + "]";
  }
  ConstPtr make(Shape shape, Type et, std::vector<double> data) {
    auto c = std::make_shared<ConstTensor>();
    c->shape = std::move(shape);
    c->elemType = et;
    c->data = std::move(data);
    for (double &x : c->data)
      x = roundTo(et, x);
    return c;
  }
  bool tooLarge(const Shape &s) {
    for (int64_t d : s)
      if (d < 0)
        fail("negative size in " + shapeStr(s));
    int64_t n = 1;
    for (int64_t d : s) {
      if (d > 0 && n > kMaxFoldElems / d)
        return true;
      n *= d;
    }
    return false;
  }
  /// Elementwise over broadcast operands: out = f(values...) rounded to `et`.
  template <typename F>
  ConstPtr elementwise(llvm::ArrayRef<Operand> ops, Type et, F f) {
    Shape out;
    for (const Operand &o : ops)
      out = broadcast(out, o.shape());
    if (tooLarge(out))
      return nullptr;
    std::vector<Shape> st;
    for (const Operand &o : ops)
      st.push_back(bstrides(o.shape(), out));
    std::vector<double> data(size_t(numelOf(out)));
    std::vector<double> vals(ops.size());
    forEachIndex(out, [&](const Shape &idx, int64_t k) {
      for (size_t j = 0; j < ops.size(); ++j) {
        int64_t off = 0;
        for (size_t d = 0; d < idx.size(); ++d)
          off += idx[d] * st[j][d];
        vals[j] = ops[j].at(off);
      }
      data[size_t(k)] = f(vals);
    });
    return make(out, et, std::move(data));
  }
  /// A copy of `c`'s elements gathered through `src` (the source flat
  /// index of each element of `shape`).
  template <typename F>
  ConstPtr gatherFrom(const ConstTensor &c, const Shape &shape, Type et, F src) {
    if (tooLarge(shape))
      return nullptr;
    std::vector<double> data(size_t(numelOf(shape)));
    forEachIndex(shape, [&](const Shape &idx, int64_t k) { data[size_t(k)] = c.data[size_t(src(idx))]; });
    return make(shape, et, std::move(data));
  }

  ConstPtr creation(const std::string &op);
  ConstPtr unary(const std::string &op);
  ConstPtr binary(const std::string &op, const std::string &overload);
  ConstPtr shapeOp(const std::string &op, const std::string &overload);

  StepBuilder &sb;
  Call &call;
  const ConstLookup &lookup;
  OpBuilder &b;
};

//===----------------------------------------------------------------------===//
// Tensors from shapes: arange, ones/zeros/full, *_like, new_*, triu/tril
//===----------------------------------------------------------------------===//

ConstPtr Folder::creation(const std::string &op) {
  if (op == "arange") {
    // arange(end) / arange(start, end) / arange(start, end, step): the
    // numeric arguments before the keywords.
    std::vector<double> nums;
    bool allInt = true;
    for (const Arg &a : call.args) {
      if (a.kind == Arg::Int)
        nums.push_back(double(a.i));
      else if (a.kind == Arg::Double) {
        nums.push_back(a.d);
        allInt = false;
      } else
        break;
    }
    if (nums.empty() || nums.size() > 3)
      fail("arange needs numeric bounds known at import time");
    double start = nums.size() > 1 ? nums[0] : 0, end = nums.size() > 1 ? nums[1] : nums[0],
           step = nums.size() > 2 ? nums[2] : 1;
    if (step == 0 || !std::isfinite(start) || !std::isfinite(end) || !std::isfinite(step))
      fail("bad arange bounds");
    double count = std::ceil((end - start) / step);
    if (count > double(kMaxFoldElems))
      fail("constant too large");
    std::vector<double> data;
    for (int64_t i = 0; i < int64_t(std::max(count, 0.0)); ++i)
      data.push_back(start + double(i) * step);
    Shape shape = {int64_t(data.size())};
    return make(shape, dtypeArg(allInt ? Type(b.getI64Type()) : Type(b.getF32Type())),
                std::move(data));
  }
  if (op == "triu" || op == "tril") {
    ConstPtr x = cst(0);
    if (!x)
      return nullptr;
    int64_t diag = nargs() > 1 ? getInt(1) : 0;
    if (x->shape.size() < 2)
      fail(op + " needs a tensor of rank >= 2");
    auto c = std::make_shared<ConstTensor>(*x);
    int64_t R = c->shape[c->shape.size() - 2], C = c->shape.back();
    for (size_t k = 0; k < c->data.size(); ++k) {
      int64_t j = int64_t(k) % C, i = (int64_t(k) / C) % R;
      bool keep = op == "triu" ? j - i >= diag : j - i <= diag;
      if (!keep)
        c->data[k] = 0;
    }
    return c;
  }
  if (op == "scalar_tensor") {
    const Arg &v = arg(0);
    Type dflt = v.kind == Arg::Int ? Type(b.getI64Type())
                : v.kind == Arg::Bool ? Type(b.getI1Type())
                                      : Type(b.getF32Type());
    return make({}, dtypeArg(dflt), {sb.getDouble(call, 0)});
  }
  // The shape: a size argument (ones, new_ones) or the operand's (*_like).
  bool like = llvm::StringRef(op).ends_with("_like");
  bool isNew = llvm::StringRef(op).starts_with("new_");
  Shape shape;
  Type selfType;
  if (like) {
    if (!typeOf(0, shape, selfType))
      fail("the operand's type is unknown");
  } else if (isNew) {
    Shape ignored;
    if (!typeOf(0, ignored, selfType))
      fail("the operand's type is unknown");
    shape = getInts(1);
  } else {
    shape = getInts(0);
  }
  if (tooLarge(shape))
    fail("constant too large (" + shapeStr(shape) + ")");
  std::string kind = op;
  if (like)
    kind = kind.substr(0, kind.size() - 5);
  if (isNew)
    kind = kind.substr(4);
  double v = 0;
  Type dflt = selfType ? selfType : Type(b.getF32Type());
  if (kind == "ones")
    v = 1;
  else if (kind == "full") {
    size_t vi = like ? 1 : isNew ? 2 : 1;
    const Arg &fv = arg(vi);
    v = sb.getDouble(call, vi);
    if (!selfType)
      dflt = fv.kind == Arg::Int    ? Type(b.getI64Type())
             : fv.kind == Arg::Bool ? Type(b.getI1Type())
                                    : Type(b.getF32Type());
  }
  return make(shape, dtypeArg(dflt), std::vector<double>(size_t(numelOf(shape)), v));
}

//===----------------------------------------------------------------------===//
// Unary math and casts
//===----------------------------------------------------------------------===//

ConstPtr Folder::unary(const std::string &op) {
  Operand x;
  if (!operand(0, x) || !x.t)
    return nullptr;
  Type et = x.type;
  // Identity and casts.
  static const llvm::StringSet<> same = {"clone", "contiguous", "alias", "detach",
                                         "lift_fresh_copy", "lift_fresh"};
  if (same.contains(op))
    return x.t;
  if (op == "to" || op == "_to_copy") {
    Type to = dtypeArg(et);
    if (to == et)
      return x.t;
    return make(x.t->shape, to, x.t->data);
  }
  if (op == "type_as") {
    Shape s;
    Type to;
    if (!typeOf(1, s, to))
      return nullptr;
    return make(x.t->shape, to, x.t->data);
  }
  bool isFloat = category(et) == 2;
  Type fl = isFloat ? et : Type(b.getF32Type());
  auto math = [&](Type out, auto fn) {
    return elementwise({x}, out, [&](llvm::ArrayRef<double> v) {
      if (out.isF32())
        return double(fn(float(v[0])));
      return double(fn(v[0]));
    });
  };
  if (op == "neg")
    return math(et, [](auto a) { return -a; });
  if (op == "abs")
    return math(et, [](auto a) { return std::abs(a); });
  if (op == "floor" || op == "ceil" || op == "trunc" || op == "round")
    return math(et, [&](auto a) -> decltype(a) {
      if (op == "floor") return std::floor(a);
      if (op == "ceil") return std::ceil(a);
      if (op == "trunc") return std::trunc(a);
      return std::nearbyint(a); // round half to even, as torch.round
    });
  if (op == "sign")
    return math(et, [](auto a) -> decltype(a) { return (a > 0) - (a < 0); });
  if (op == "log")
    return math(fl, [](auto a) { return std::log(a); });
  if (op == "exp")
    return math(fl, [](auto a) { return std::exp(a); });
  if (op == "sqrt")
    return math(fl, [](auto a) { return std::sqrt(a); });
  if (op == "rsqrt")
    return math(fl, [](auto a) { return decltype(a)(1) / std::sqrt(a); });
  if (op == "reciprocal")
    return math(fl, [](auto a) { return decltype(a)(1) / a; });
  if (op == "sin")
    return math(fl, [](auto a) { return std::sin(a); });
  if (op == "cos")
    return math(fl, [](auto a) { return std::cos(a); });
  if (op == "logical_not")
    return elementwise({x}, b.getI1Type(), [](llvm::ArrayRef<double> v) { return v[0] == 0; });
  if (op == "bitwise_not") {
    if (isFloat)
      fail("bitwise_not of a float tensor");
    if (et.isInteger(1))
      return elementwise({x}, et, [](llvm::ArrayRef<double> v) { return v[0] == 0; });
    return elementwise({x}, et, [](llvm::ArrayRef<double> v) { return double(~int64_t(v[0])); });
  }
  return nullptr;
}

//===----------------------------------------------------------------------===//
// Binary and ternary elementwise ops
//===----------------------------------------------------------------------===//

ConstPtr Folder::binary(const std::string &op, const std::string &overload) {
  Type i1 = b.getI1Type();
  if (op == "where") {
    Operand c, x, y;
    if (!operand(0, c) || !operand(1, x) || !operand(2, y))
      return nullptr;
    Type et = promote({x, y});
    return elementwise({c, x, y}, et, [](llvm::ArrayRef<double> v) { return v[0] ? v[1] : v[2]; });
  }
  if (op == "masked_fill") {
    Operand x, m, v;
    if (!operand(0, x) || !operand(1, m) || !operand(2, v))
      return nullptr;
    if (!x.t)
      return nullptr;
    return elementwise({x, m, v}, x.type,
                       [](llvm::ArrayRef<double> e) { return e[1] ? e[2] : e[0]; });
  }
  if (op == "clamp" || op == "clamp_min" || op == "clamp_max") {
    Operand x;
    if (!operand(0, x) || !x.t)
      return nullptr;
    std::optional<double> lo, hi;
    std::vector<Operand> all = {x};
    auto bound = [&](size_t i, std::optional<double> &out) {
      if (i >= nargs() || arg(i).isNone())
        return;
      Operand o;
      if (!operand(i, o) || o.t)
        fail("clamp bounds must be numbers");
      out = o.v;
      all.push_back(o);
    };
    if (op == "clamp") {
      bound(1, lo);
      bound(2, hi);
    } else if (op == "clamp_min") {
      bound(1, lo);
    } else {
      bound(1, hi);
    }
    Type et = promote(all);
    return elementwise({x}, et, [&](llvm::ArrayRef<double> v) {
      double r = v[0];
      if (lo && r < *lo)
        r = *lo;
      if (hi && r > *hi)
        r = *hi;
      return r;
    });
  }
  Operand x, y;
  if (op == "rsub") {
    if (!operand(1, x) || !operand(0, y))
      return nullptr;
  } else if (!operand(0, x) || !operand(1, y)) {
    return nullptr;
  }
  if (!x.t && !y.t)
    return nullptr;
  Type common = promote({x, y});
  bool isFloat = category(common) == 2;
  // In the arithmetic of `t`: float for f32, double otherwise.
  auto arith = [&](Type t, llvm::ArrayRef<Operand> ops, auto fn) {
    return elementwise(ops, t, [&](llvm::ArrayRef<double> v) {
      if (t.isF32())
        return double(fn(float(v[0]), float(v[1])));
      return double(fn(v[0], v[1]));
    });
  };
  if (op == "add" || op == "sub" || op == "rsub") {
    double alpha = 1;
    if (nargs() > 2 && !arg(2).isNone())
      alpha = sb.getDouble(call, 2);
    double sign = op == "add" ? 1 : -1;
    if (alpha == 1)
      return arith(common, {x, y}, [&](auto a, auto c) { return a + decltype(a)(sign) * c; });
    return arith(common, {x, y},
                 [&](auto a, auto c) { return a + decltype(a)(sign * alpha) * c; });
  }
  if (op == "mul")
    return arith(common, {x, y}, [](auto a, auto c) { return a * c; });
  if (op == "div" || op == "floor_divide") {
    std::string mode = op == "floor_divide" ? "floor" : "";
    if (overload == "Tensor_mode" || overload == "Scalar_mode")
      if (nargs() > 2 && arg(2).kind == Arg::String)
        mode = arg(2).s;
    if (mode.empty()) {
      Type t = isFloat ? common : Type(b.getF32Type());
      return arith(t, {x, y}, [](auto a, auto c) { return a / c; });
    }
    if (!isFloat)
      return elementwise({x, y}, common, [&](llvm::ArrayRef<double> v) {
        if (v[1] == 0)
          fail("integer division by zero");
        int64_t a = int64_t(v[0]), c = int64_t(v[1]), q = a / c;
        if (mode == "floor" && (a % c != 0) && ((a < 0) != (c < 0)))
          --q;
        return double(q);
      });
    return arith(common, {x, y}, [&](auto a, auto c) {
      auto q = a / c;
      return mode == "floor" ? std::floor(q) : std::trunc(q);
    });
  }
  if (op == "remainder") {
    if (!isFloat)
      return elementwise({x, y}, common, [&](llvm::ArrayRef<double> v) {
        if (v[1] == 0)
          fail("integer remainder by zero");
        int64_t a = int64_t(v[0]), c = int64_t(v[1]), r = a % c;
        if (r != 0 && ((r < 0) != (c < 0)))
          r += c;
        return double(r);
      });
    return arith(common, {x, y}, [](auto a, auto c) {
      auto r = std::fmod(a, c);
      if (r != 0 && ((r < 0) != (c < 0)))
        r += c;
      return r;
    });
  }
  if (op == "pow") {
    if (!isFloat)
      return elementwise({x, y}, common, [&](llvm::ArrayRef<double> v) {
        if (v[1] < 0)
          fail("integers to negative integer powers are not allowed");
        double r = 1;
        for (int64_t k = 0; k < int64_t(v[1]); ++k)
          r *= v[0];
        return r;
      });
    return arith(common, {x, y}, [](auto a, auto c) { return std::pow(a, c); });
  }
  if (op == "minimum" || op == "min" || op == "fmin")
    return arith(common, {x, y}, [](auto a, auto c) {
      return std::isnan(double(a)) || std::isnan(double(c)) ? decltype(a)(NAN) : std::min(a, c);
    });
  if (op == "maximum" || op == "max" || op == "fmax")
    return arith(common, {x, y}, [](auto a, auto c) {
      return std::isnan(double(a)) || std::isnan(double(c)) ? decltype(a)(NAN) : std::max(a, c);
    });
  // Comparisons: in the common type, a bool result.
  auto compare = [&](auto fn) {
    return elementwise({x, y}, i1, [&](llvm::ArrayRef<double> v) {
      double a = roundTo(common, v[0]), c = roundTo(common, v[1]);
      return fn(a, c) ? 1.0 : 0.0;
    });
  };
  if (op == "eq")
    return compare([](double a, double c) { return a == c; });
  if (op == "ne")
    return compare([](double a, double c) { return a != c; });
  if (op == "lt")
    return compare([](double a, double c) { return a < c; });
  if (op == "le")
    return compare([](double a, double c) { return a <= c; });
  if (op == "gt")
    return compare([](double a, double c) { return a > c; });
  if (op == "ge")
    return compare([](double a, double c) { return a >= c; });
  // Logical ops: any dtype, a bool result. Bitwise: bool or integers.
  if (op == "logical_and" || op == "logical_or" || op == "logical_xor") {
    return elementwise({x, y}, i1, [&](llvm::ArrayRef<double> v) {
      bool a = v[0] != 0, c = v[1] != 0;
      return double(op == "logical_and" ? a && c : op == "logical_or" ? a || c : a != c);
    });
  }
  std::string bw = op;
  if (bw == "__and__") bw = "bitwise_and";
  if (bw == "__or__") bw = "bitwise_or";
  if (bw == "__xor__") bw = "bitwise_xor";
  if (bw == "bitwise_and" || bw == "bitwise_or" || bw == "bitwise_xor") {
    if (isFloat)
      fail(op + " of float tensors");
    return elementwise({x, y}, common, [&](llvm::ArrayRef<double> v) {
      int64_t a = int64_t(v[0]), c = int64_t(v[1]);
      return double(bw == "bitwise_and" ? a & c : bw == "bitwise_or" ? a | c : a ^ c);
    });
  }
  return nullptr;
}

//===----------------------------------------------------------------------===//
// Shapes, indexing, scans and reductions
//===----------------------------------------------------------------------===//

ConstPtr Folder::shapeOp(const std::string &op, const std::string &overload) {
  if (op == "cat" || op == "stack") {
    const Arg &list = arg(0);
    if (list.kind != Arg::List)
      fail(op + " needs a list of tensors");
    std::vector<ConstPtr> parts;
    std::vector<Promoted> types;
    for (const Arg &e : list.elems) {
      ConstPtr c = e.kind == Arg::Const ? lookup(e) : nullptr;
      if (!c)
        return nullptr;
      // cat skips legacy empty 1-D tensors.
      if (op == "cat" && c->shape.size() == 1 && c->shape[0] == 0)
        continue;
      parts.push_back(c);
      types.push_back({c->elemType, 2});
    }
    if (parts.empty())
      return nullptr;
    Type et = resultType(*b.getContext(), types);
    Shape base = parts[0]->shape;
    int64_t d0 = nargs() > 1 ? getInt(1) : 0;
    if (op == "stack") {
      int64_t d = dim(d0, int64_t(base.size()) + 1);
      for (ConstPtr &p : parts) {
        if (p->shape != base)
          fail("stack of tensors of different shapes");
        auto c = std::make_shared<ConstTensor>(*p);
        c->shape.insert(c->shape.begin() + d, 1);
        p = c;
      }
      base.insert(base.begin() + d, 1);
      d0 = d;
    }
    int64_t d = dim(d0, int64_t(base.size()));
    Shape out = base;
    out[size_t(d)] = 0;
    for (const ConstPtr &p : parts) {
      if (p->shape.size() != base.size())
        fail(op + " of tensors of different ranks");
      for (size_t k = 0; k < base.size(); ++k)
        if (int64_t(k) != d && p->shape[k] != base[k])
          fail(op + " of tensors whose shapes differ outside dim " + std::to_string(d));
      out[size_t(d)] += p->shape[size_t(d)];
    }
    if (tooLarge(out))
      return nullptr;
    std::vector<double> data(size_t(numelOf(out)));
    forEachIndex(out, [&](const Shape &idx, int64_t k) {
      int64_t i = idx[size_t(d)];
      for (const ConstPtr &p : parts) {
        if (i < p->shape[size_t(d)]) {
          Shape st = stridesOf(p->shape);
          int64_t off = 0;
          for (size_t q = 0; q < idx.size(); ++q)
            off += (int64_t(q) == d ? i : idx[q]) * st[q];
          data[size_t(k)] = p->data[size_t(off)];
          return;
        }
        i -= p->shape[size_t(d)];
      }
    });
    return make(out, et, std::move(data));
  }

  ConstPtr x = cst(0);
  if (!x)
    return nullptr;
  const Shape &in = x->shape;
  int64_t rank = int64_t(in.size());
  Shape inSt = stridesOf(in);
  Type et = x->elemType;
  auto reshaped = [&](Shape to) -> ConstPtr {
    int64_t known = 1, infer = -1;
    for (size_t k = 0; k < to.size(); ++k) {
      if (to[k] == -1) {
        if (infer >= 0)
          fail("more than one -1 in " + shapeStr(to));
        infer = int64_t(k);
      } else {
        known *= to[k];
      }
    }
    if (infer >= 0)
      to[size_t(infer)] = known ? x->numel() / known : 0;
    if (numelOf(to) != x->numel())
      fail("cannot view " + shapeStr(in) + " as " + shapeStr(to));
    auto c = std::make_shared<ConstTensor>(*x);
    c->shape = to;
    return c;
  };
  auto permuted = [&](const Shape &perm) {
    Shape out(perm.size());
    for (size_t k = 0; k < perm.size(); ++k)
      out[k] = in[size_t(perm[k])];
    return gatherFrom(*x, out, et, [&](const Shape &idx) {
      int64_t off = 0;
      for (size_t k = 0; k < perm.size(); ++k)
        off += idx[k] * inSt[size_t(perm[k])];
      return off;
    });
  };

  if (op == "view" || op == "reshape" || op == "_unsafe_view")
    return reshaped(getInts(1));
  if (op == "unsqueeze") {
    int64_t d = dim(getInt(1), rank + 1);
    Shape to = in;
    to.insert(to.begin() + d, 1);
    return reshaped(to);
  }
  if (op == "squeeze") {
    std::vector<int64_t> dims;
    if (overload == "dim")
      dims = {getInt(1)};
    else if (overload == "dims")
      dims = getInts(1);
    else
      for (int64_t k = 0; k < rank; ++k)
        dims.push_back(k);
    std::vector<bool> drop(in.size(), false);
    for (int64_t dd : dims) {
      if (rank == 0)
        continue;
      int64_t d = dim(dd, rank);
      drop[size_t(d)] = in[size_t(d)] == 1;
    }
    Shape to;
    for (size_t k = 0; k < in.size(); ++k)
      if (!drop[k])
        to.push_back(in[k]);
    return reshaped(to);
  }
  if (op == "flatten") {
    if (rank == 0)
      return reshaped({1});
    int64_t s = dim(nargs() > 1 ? getInt(1) : 0, rank), e = dim(nargs() > 2 ? getInt(2) : -1, rank);
    Shape to(in.begin(), in.begin() + s);
    int64_t m = 1;
    for (int64_t k = s; k <= e; ++k)
      m *= in[size_t(k)];
    to.push_back(m);
    to.insert(to.end(), in.begin() + e + 1, in.end());
    return reshaped(to);
  }
  if (op == "unflatten") {
    int64_t d = dim(getInt(1), rank);
    Shape sizes = getInts(2);
    Shape to(in.begin(), in.begin() + d);
    to.insert(to.end(), sizes.begin(), sizes.end());
    to.insert(to.end(), in.begin() + d + 1, in.end());
    return reshaped(to);
  }
  if (op == "transpose") {
    if (rank == 0)
      return x;
    int64_t a = dim(getInt(1), rank), c = dim(getInt(2), rank);
    Shape perm(in.size());
    for (size_t k = 0; k < perm.size(); ++k)
      perm[k] = int64_t(k);
    std::swap(perm[size_t(a)], perm[size_t(c)]);
    return permuted(perm);
  }
  if (op == "t") {
    if (rank < 2)
      return x;
    return permuted({1, 0});
  }
  if (op == "permute") {
    Shape perm = getInts(1);
    if (int64_t(perm.size()) != rank)
      fail("permute of rank " + std::to_string(rank) + " by " + shapeStr(perm));
    for (int64_t &p : perm)
      p = dim(p, rank);
    return permuted(perm);
  }
  if (op == "expand" || op == "expand_as") {
    Shape size;
    if (op == "expand_as") {
      Type ignored;
      if (!typeOf(1, size, ignored))
        return nullptr;
    } else {
      size = getInts(1);
    }
    if (size.size() < in.size())
      fail("cannot expand " + shapeStr(in) + " to " + shapeStr(size));
    size_t off = size.size() - in.size();
    for (size_t k = 0; k < size.size(); ++k) {
      int64_t cur = k < off ? 1 : in[k - off];
      if (size[k] == -1) {
        if (k < off)
          fail("-1 in a new leading dim of expand");
        size[k] = cur;
      }
      if (cur != 1 && cur != size[k])
        fail("cannot expand " + shapeStr(in) + " to " + shapeStr(size));
    }
    Shape st = bstrides(in, size);
    return gatherFrom(*x, size, et, [&](const Shape &idx) {
      int64_t o = 0;
      for (size_t k = 0; k < idx.size(); ++k)
        o += idx[k] * st[k];
      return o;
    });
  }
  if (op == "repeat") {
    Shape reps = getInts(1);
    if (reps.size() < in.size())
      fail("repeat needs at least as many repeats as dims");
    size_t off = reps.size() - in.size();
    Shape out(reps.size());
    for (size_t k = 0; k < reps.size(); ++k)
      out[k] = reps[k] * (k < off ? 1 : in[k - off]);
    return gatherFrom(*x, out, et, [&](const Shape &idx) {
      int64_t o = 0;
      for (size_t k = off; k < idx.size(); ++k)
        o += (idx[k] % in[k - off]) * inSt[k - off];
      return o;
    });
  }
  if (op == "slice" || op == "narrow" || op == "select") {
    if (rank == 0)
      fail(op + " of a 0-dim tensor");
    int64_t d = dim(nargs() > 1 ? getInt(1) : 0, rank), n = in[size_t(d)];
    int64_t start = 0, end = n, step = 1;
    auto clampIdx = [&](int64_t v) {
      if (v < 0)
        v += n;
      return std::min(std::max<int64_t>(v, 0), n);
    };
    if (op == "slice") {
      if (nargs() > 2 && !arg(2).isNone())
        start = clampIdx(getInt(2));
      if (nargs() > 3 && !arg(3).isNone())
        end = clampIdx(getInt(3));
      if (nargs() > 4)
        step = getInt(4);
      if (step <= 0)
        fail("slice step must be positive");
    } else if (op == "narrow") {
      start = getInt(2);
      if (start < 0)
        start += n;
      end = start + getInt(3);
      if (start < 0 || end > n || end < start)
        fail("narrow out of range");
    } else {
      int64_t i = getInt(2);
      if (i < -n || i >= n)
        fail("select index " + std::to_string(i) + " out of range for size " + std::to_string(n));
      start = i < 0 ? i + n : i;
      end = start + 1;
    }
    Shape out = in;
    out[size_t(d)] = end > start ? (end - start + step - 1) / step : 0;
    ConstPtr r = gatherFrom(*x, out, et, [&](const Shape &idx) {
      int64_t o = 0;
      for (size_t k = 0; k < idx.size(); ++k)
        o += (int64_t(k) == d ? start + idx[k] * step : idx[k]) * inSt[k];
      return o;
    });
    if (op == "select" && r) {
      auto c = std::make_shared<ConstTensor>(*r);
      c->shape.erase(c->shape.begin() + d);
      return c;
    }
    return r;
  }
  if (op == "gather") {
    int64_t d = dim(getInt(1), rank);
    ConstPtr idx = cst(2);
    if (!idx)
      return nullptr;
    if (int64_t(idx->shape.size()) != rank)
      fail("gather index of rank " + std::to_string(idx->shape.size()) + " for rank " +
           std::to_string(rank));
    return gatherFrom(*x, idx->shape, et, [&](const Shape &i) {
      int64_t o = 0, flat = 0;
      Shape ist = stridesOf(idx->shape);
      for (size_t k = 0; k < i.size(); ++k)
        flat += i[k] * ist[k];
      for (size_t k = 0; k < i.size(); ++k) {
        int64_t v = int64_t(k) == d ? int64_t(idx->data[size_t(flat)]) : i[k];
        if (v < 0)
          v += in[k];
        if (v < 0 || v >= in[k])
          fail("gather index " + std::to_string(v) + " out of range for size " +
               std::to_string(in[k]));
        o += v * inSt[k];
      }
      return o;
    });
  }
  if (op == "index") {
    // Advanced indexing (OpBuilder.h's AdvancedIndex: the one rule).
    const Arg &list = arg(1);
    if (list.kind != Arg::List)
      fail("index needs a list of index tensors");
    std::vector<AdvancedIndex::Index> store(list.elems.size());
    std::vector<const AdvancedIndex::Index *> idx(list.elems.size(), nullptr);
    for (size_t k = 0; k < list.elems.size(); ++k) {
      const Arg &e = list.elems[k];
      if (e.isNone())
        continue;
      ConstPtr c = e.kind == Arg::Const ? lookup(e) : nullptr;
      if (!c)
        return nullptr;
      if (c->elemType.isInteger(1))
        fail("boolean mask indexing is not supported");
      store[k].shape = c->shape;
      store[k].values.assign(c->data.begin(), c->data.end());
      idx[k] = &store[k];
    }
    AdvancedIndex ai(in, idx);
    if (!ai.error().empty())
      fail(ai.error());
    return gatherFrom(*x, ai.shape(), et, [&](const Shape &o) {
      std::string e;
      int64_t off = ai.offset(o, e);
      if (!e.empty())
        fail(e);
      return off;
    });
  }
  if (op == "cumsum") {
    if (rank == 0)
      return x;
    int64_t d = dim(getInt(1), rank);
    Type out = category(et) == 2 ? et : Type(b.getI64Type());
    out = dtypeArg(out);
    std::vector<double> data = x->data;
    int64_t n = in[size_t(d)], st = inSt[size_t(d)];
    for (int64_t k = 0; k < x->numel(); ++k) {
      if ((k / st) % n == 0)
        continue; // the first of its line
      data[size_t(k)] = roundTo(out, data[size_t(k)]) + data[size_t(k - st)];
    }
    return make(in, out, std::move(data));
  }
  if (op == "diff") {
    // diff(self, n=1, dim=-1, prepend=None, append=None).
    int64_t times = nargs() > 1 ? getInt(1) : 1;
    int64_t d = dim(nargs() > 2 ? getInt(2) : -1, rank);
    ConstPtr cur = x;
    for (size_t side : {size_t(3), size_t(4)}) {
      if (nargs() <= side || arg(side).isNone())
        continue;
      ConstPtr e = cst(side);
      if (!e)
        return nullptr;
      Shape out = cur->shape;
      out[size_t(d)] += e->shape[size_t(d)];
      ConstPtr first = side == 3 ? e : cur, second = side == 3 ? cur : e;
      Shape s1 = stridesOf(first->shape), s2 = stridesOf(second->shape);
      std::vector<double> data(size_t(numelOf(out)));
      forEachIndex(out, [&](const Shape &idx, int64_t k) {
        int64_t i = idx[size_t(d)], n1 = first->shape[size_t(d)], off = 0;
        const ConstTensor &src = i < n1 ? *first : *second;
        const Shape &st = i < n1 ? s1 : s2;
        for (size_t q = 0; q < idx.size(); ++q)
          off += (int64_t(q) == d ? (i < n1 ? i : i - n1) : idx[q]) * st[q];
        data[size_t(k)] = src.data[size_t(off)];
      });
      cur = make(out, et, std::move(data));
    }
    bool isBool = et.isInteger(1);
    for (int64_t t = 0; t < times; ++t) {
      Shape out = cur->shape;
      if (out[size_t(d)] == 0)
        break;
      out[size_t(d)] -= 1;
      Shape st = stridesOf(cur->shape);
      std::vector<double> data(size_t(numelOf(out)));
      ConstPtr c = cur;
      forEachIndex(out, [&](const Shape &idx, int64_t k) {
        int64_t off = 0;
        for (size_t q = 0; q < idx.size(); ++q)
          off += idx[q] * st[q];
        double a = c->data[size_t(off + st[size_t(d)])], p = c->data[size_t(off)];
        data[size_t(k)] = isBool ? double(a != p) : a - p;
      });
      cur = make(out, et, std::move(data));
    }
    return cur;
  }
  if (op == "sum" || op == "any" || op == "all" || op == "amax" || op == "amin") {
    std::vector<int64_t> dims;
    bool keep = false;
    if (overload == "default" || nargs() < 2 || arg(1).isNone()) {
      for (int64_t k = 0; k < rank; ++k)
        dims.push_back(k);
    } else {
      dims = getInts(1);
      keep = nargs() > 2 && arg(2).kind == Arg::Bool && arg(2).b;
      if (dims.empty())
        for (int64_t k = 0; k < rank; ++k)
          dims.push_back(k);
    }
    std::vector<bool> red(in.size(), false);
    for (int64_t dd : dims)
      if (rank > 0)
        red[size_t(dim(dd, rank))] = true;
    Shape outKeep = in;
    Shape out;
    for (size_t k = 0; k < in.size(); ++k) {
      if (red[k])
        outKeep[k] = 1;
      if (!red[k] || keep)
        out.push_back(outKeep[k]);
    }
    Type rt = op == "sum" ? (category(et) == 2 ? et : Type(b.getI64Type()))
              : (op == "any" || op == "all") ? Type(b.getI1Type())
                                              : et;
    if (op == "sum")
      rt = dtypeArg(rt);
    std::vector<double> acc(size_t(numelOf(outKeep)),
                            op == "all"    ? 1.0
                            : op == "amax" ? -std::numeric_limits<double>::infinity()
                            : op == "amin" ? std::numeric_limits<double>::infinity()
                                           : 0.0);
    Shape ost = stridesOf(outKeep);
    forEachIndex(in, [&](const Shape &idx, int64_t k) {
      int64_t o = 0;
      for (size_t q = 0; q < idx.size(); ++q)
        o += (red[q] ? 0 : idx[q]) * ost[q];
      double v = x->data[size_t(k)];
      double &a = acc[size_t(o)];
      if (op == "sum") a += v;
      else if (op == "any") a = (a != 0 || v != 0);
      else if (op == "all") a = (a != 0 && v != 0);
      else if (op == "amax") a = std::max(a, v);
      else a = std::min(a, v);
    });
    return make(out, rt, std::move(acc));
  }
  return nullptr;
}

ConstPtr Folder::run(const std::string &op, const std::string &overload) {
  static const llvm::StringSet<> creationOps = {
      "arange", "ones", "zeros", "full", "empty", "triu", "tril", "scalar_tensor",
      "ones_like", "zeros_like", "full_like", "empty_like", "new_ones", "new_zeros",
      "new_full", "new_empty"};
  static const llvm::StringSet<> unaryOps = {
      "clone", "contiguous", "alias", "detach", "lift_fresh_copy", "lift_fresh", "to", "_to_copy",
      "type_as", "neg", "abs", "floor", "ceil", "trunc", "round", "sign", "log", "exp", "sqrt",
      "rsqrt", "reciprocal", "sin", "cos", "logical_not", "bitwise_not"};
  static const llvm::StringSet<> shapeOps = {
      "cat", "stack", "view", "reshape", "_unsafe_view", "unsqueeze", "squeeze", "flatten",
      "unflatten", "transpose", "t", "permute", "expand", "expand_as", "repeat", "slice",
      "narrow", "select", "gather", "index", "cumsum", "diff", "sum", "any", "all", "amax",
      "amin"};
  if (creationOps.contains(op))
    return creation(op);
  if (unaryOps.contains(op))
    return unary(op);
  if (shapeOps.contains(op))
    return shapeOp(op, overload);
  return binary(op, overload);
}

} // namespace

bool ::offload::import::pt2Foldable(const std::string &op) {
  static const llvm::StringSet<> ops = {
      // creation
      "arange", "ones", "zeros", "full", "empty", "triu", "tril", "scalar_tensor", "ones_like",
      "zeros_like", "full_like", "empty_like", "new_ones", "new_zeros", "new_full", "new_empty",
      // unary and casts
      "clone", "contiguous", "alias", "detach", "lift_fresh_copy", "lift_fresh", "to",
      "_to_copy", "type_as", "neg", "abs", "floor", "ceil", "trunc", "round", "sign", "log",
      "exp", "sqrt", "rsqrt", "reciprocal", "sin", "cos", "logical_not", "bitwise_not",
      // binary and ternary
      "add", "sub", "rsub", "mul", "div", "floor_divide", "remainder", "pow", "minimum",
      "maximum", "min", "max", "fmin", "fmax", "eq", "ne", "lt", "le", "gt", "ge",
      "logical_and", "logical_or", "logical_xor", "bitwise_and", "bitwise_or", "bitwise_xor",
      "__and__", "__or__", "__xor__", "where", "masked_fill", "clamp", "clamp_min", "clamp_max",
      // shapes, indexing, scans, reductions
      "cat", "stack", "view", "reshape", "_unsafe_view", "unsqueeze", "squeeze", "flatten",
      "unflatten", "transpose", "t", "permute", "expand", "expand_as", "repeat", "slice",
      "narrow", "select", "gather", "index", "cumsum", "diff", "sum", "any", "all", "amax",
      "amin"};
  return ops.contains(op);
}

auto ::offload::import::pt2Fold(StepBuilder &sb, Call &call, const std::string &op,
                                  const std::string &overload, const ConstLookup &lookup)
    -> ConstPtr {
  // min/max without `other` are reductions with indices: not folded.
  if ((op == "min" || op == "max") && overload != "other")
    return nullptr;
  Folder f(sb, call, lookup);
  return f.run(op, overload);
}

auto ::offload::import::pt2ConstOf(MLIRContext &ctx, const Pt2Weight &w) -> ConstPtr {
  auto c = std::make_shared<ConstTensor>();
  c->shape = w.shape;
  Builder b(&ctx);
  size_t n = size_t(c->numel());
  if (pt2DtypeSize(w.dtype) == 0 || w.bytes.size() < n * pt2DtypeSize(w.dtype))
    return nullptr;
  c->data.resize(n);
  auto read = [&](auto tag) {
    using T = decltype(tag);
    for (size_t i = 0; i < n; ++i) {
      T v;
      std::memcpy(&v, w.bytes.data() + i * sizeof(T), sizeof(T));
      c->data[i] = double(v);
    }
  };
  switch (w.dtype) {
  case kPt2Float: c->elemType = b.getF32Type(); read(float()); break;
  case kPt2Double: c->elemType = b.getF64Type(); read(double()); break;
  case kPt2BFloat16:
  case kPt2Half: { // the bits, widened exactly (Float16.h)
    c->elemType = w.dtype == kPt2BFloat16 ? Type(b.getBF16Type()) : Type(b.getF16Type());
    for (size_t i = 0; i < n; ++i) {
      uint16_t h;
      std::memcpy(&h, w.bytes.data() + i * 2, 2);
      c->data[i] = w.dtype == kPt2BFloat16 ? ::offload::rt::bf16ToFloat(h) : ::offload::rt::f16ToFloat(h);
    }
    break;
  }
  case kPt2Long: c->elemType = b.getI64Type(); read(int64_t()); break;
  case kPt2Int: c->elemType = b.getI32Type(); read(int32_t()); break;
  case kPt2Bool: c->elemType = b.getI1Type(); read(uint8_t()); break;
  default: return nullptr;
  }
  return c;
}
