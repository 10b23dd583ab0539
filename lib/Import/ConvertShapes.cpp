//===- ConvertShapes.cpp - Shape and data-movement ATen ops ---------------===//
//
// Part of offload. Views (view/reshape/flatten/squeeze/unsqueeze/expand)
// become offload.reshape or offload.broadcast_to, transposes and permutes
// offload.transpose, slicing/select/chunk/split offload.slice, then cat and
// the sum/mean reductions. Every shape is static, known at import time.
//
//===----------------------------------------------------------------------===//
#include "OpBuilder.h"

#include <set>

using namespace mlir;
using namespace mlir::offload;
using namespace ::offload::import;
using namespace ::offload::import::ts;

int64_t ts::normDim(StepBuilder &im, Call &n, int64_t d, int64_t rank) {
  int64_t r = std::max<int64_t>(rank, 1);
  if (d < -r || d >= r)
    im.fail(n, "dimension " + std::to_string(d) + " out of range for rank " +
                   std::to_string(rank));
  return d < 0 ? d + r : d;
}

mlir::Value ts::emitSlice(StepBuilder &im, Call &n, mlir::Value x, int64_t dim,
                      int64_t start, int64_t end, int64_t step) {
  auto t = im.tt(x);
  int64_t size = t.getDimSize(dim);
  if (start < 0)
    start += size;
  if (end < 0)
    end += size;
  start = std::clamp<int64_t>(start, 0, size);
  end = std::clamp<int64_t>(end, start, size);
  if (step <= 0)
    im.fail(n, "slice step must be positive");
  if (start == 0 && end == size && step == 1)
    return x;
  return im.emit1<SliceOp>(n, {x},
                           {im.i64("dim", dim), im.i64("start", start), im.i64("end", end),
                            im.i64("step", step)});
}

mlir::Value ts::permuted(StepBuilder &im, Call &n, mlir::Value x, std::vector<int64_t> perm) {
  bool identity = true;
  for (size_t i = 0; i < perm.size(); ++i)
    identity &= perm[i] == static_cast<int64_t>(i);
  if (identity)
    return x;
  return im.emit1<TransposeOp>(n, {x}, {im.i64s("perm", perm)});
}

void ts::emitPermute(StepBuilder &im, Call &n, mlir::Value x, std::vector<int64_t> perm) {
  im.setOut(n, permuted(im, n, x, std::move(perm)));
}

namespace {


/// view/reshape with one -1 inferred.
void convertView(StepBuilder &im, Call &n) {
  mlir::Value x = im.tensorIn(n, 0);
  auto t = im.tt(x);
  std::vector<int64_t> shape = im.getInts(n, 1);
  int64_t known = 1, infer = -1;
  for (size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] == -1) {
      if (infer >= 0)
        im.fail(n, "only one dimension can be -1");
      infer = i;
    } else if (shape[i] < 0) {
      im.fail(n, "negative dimension " + std::to_string(shape[i]));
    } else {
      known *= shape[i];
    }
  }
  if (infer >= 0) {
    if (known == 0 || t.getNumElements() % known != 0)
      im.fail(n, "cannot reshape a tensor of " + std::to_string(t.getNumElements()) +
                     " elements");
    shape[infer] = t.getNumElements() / known;
  }
  int64_t total = 1;
  for (int64_t d : shape)
    total *= d;
  if (total != t.getNumElements())
    im.fail(n, "cannot reshape a tensor of " + std::to_string(t.getNumElements()) +
                   " elements into " + std::to_string(total));
  im.setOut(n, im.reshape(n, x, shape));
}

/// unflatten(self, dim, sizes): `dim` split into `sizes` (one may be -1).
void convertUnflatten(StepBuilder &im, Call &n) {
  mlir::Value x = im.tensorIn(n, 0);
  auto t = im.tt(x);
  int64_t d = normDim(im, n, im.getInt(n, 1), t.getRank());
  std::vector<int64_t> sizes = im.getInts(n, 2);
  int64_t known = 1, infer = -1;
  for (size_t i = 0; i < sizes.size(); ++i) {
    if (sizes[i] == -1 && infer < 0)
      infer = int64_t(i);
    else if (sizes[i] <= 0)
      im.fail(n, "bad size " + std::to_string(sizes[i]) + " in unflatten");
    else
      known *= sizes[i];
  }
  if (infer >= 0 && known > 0)
    sizes[infer] = t.getDimSize(d) / known;
  int64_t total = 1;
  for (int64_t s : sizes)
    total *= s;
  if (sizes.empty() || total != t.getDimSize(d))
    im.fail(n, "unflatten sizes do not multiply to the dimension's size " +
                   std::to_string(t.getDimSize(d)));
  std::vector<int64_t> shape(t.getShape().begin(), t.getShape().begin() + d);
  shape.insert(shape.end(), sizes.begin(), sizes.end());
  shape.insert(shape.end(), t.getShape().begin() + d + 1, t.getShape().end());
  im.setOut(n, im.reshape(n, x, shape));
}

void convertFlatten(StepBuilder &im, Call &n) {
  mlir::Value x = im.tensorIn(n, 0);
  auto t = im.tt(x);
  int64_t r = t.getRank();
  if (r == 0) {
    im.setOut(n, im.reshape(n, x, {1}));
    return;
  }
  int64_t s = normDim(im, n, im.getInt(n, 1), r), e = normDim(im, n, im.getInt(n, 2), r);
  std::vector<int64_t> shape;
  for (int64_t i = 0; i < s; ++i)
    shape.push_back(t.getDimSize(i));
  int64_t p = 1;
  for (int64_t i = s; i <= e; ++i)
    p *= t.getDimSize(i);
  shape.push_back(p);
  for (int64_t i = e + 1; i < r; ++i)
    shape.push_back(t.getDimSize(i));
  im.setOut(n, im.reshape(n, x, shape));
}

void convertUnsqueeze(StepBuilder &im, Call &n) {
  mlir::Value x = im.tensorIn(n, 0);
  auto t = im.tt(x);
  int64_t d = im.getInt(n, 1);
  if (d < 0)
    d += t.getRank() + 1;
  std::vector<int64_t> shape(t.getShape().begin(), t.getShape().end());
  if (d < 0 || d > static_cast<int64_t>(shape.size()))
    im.fail(n, "dimension out of range");
  shape.insert(shape.begin() + d, 1);
  im.setOut(n, im.reshape(n, x, shape));
}

void convertSqueeze(StepBuilder &im, Call &n) {
  mlir::Value x = im.tensorIn(n, 0);
  auto t = im.tt(x);
  std::vector<int64_t> shape;
  if (n.numInputs() == 1) {
    for (int64_t d : t.getShape())
      if (d != 1)
        shape.push_back(d);
  } else {
    int64_t d = normDim(im, n, im.getInt(n, 1), t.getRank());
    for (int64_t i = 0; i < t.getRank(); ++i)
      if (i != d || t.getDimSize(i) != 1)
        shape.push_back(t.getDimSize(i));
  }
  im.setOut(n, im.reshape(n, x, shape));
}


void convertTranspose(StepBuilder &im, Call &n) {
  mlir::Value x = im.tensorIn(n, 0);
  int64_t r = im.tt(x).getRank();
  if (r < 2) {
    im.setOut(n, x);
    return;
  }
  int64_t a = normDim(im, n, im.getInt(n, 1), r), c = normDim(im, n, im.getInt(n, 2), r);
  std::vector<int64_t> perm(r);
  for (int64_t i = 0; i < r; ++i)
    perm[i] = i;
  std::swap(perm[a], perm[c]);
  emitPermute(im, n, x, perm);
}

void convertT(StepBuilder &im, Call &n) {
  mlir::Value x = im.tensorIn(n, 0);
  if (im.tt(x).getRank() < 2) {
    im.setOut(n, x);
    return;
  }
  emitPermute(im, n, x, {1, 0});
}

void convertPermute(StepBuilder &im, Call &n) {
  mlir::Value x = im.tensorIn(n, 0);
  std::vector<int64_t> perm = im.getInts(n, 1);
  for (int64_t &p : perm)
    p = normDim(im, n, p, im.tt(x).getRank());
  emitPermute(im, n, x, perm);
}

void convertIdentity(StepBuilder &im, Call &n) {
  im.setOut(n, 0, im.in(n, 0));
}

/// reshape_as(self, other): self reshaped to other's shape.
void convertReshapeAs(StepBuilder &im, Call &n) {
  mlir::Value x = im.tensorIn(n, 0);
  auto other = im.tt(im.tensorIn(n, 1));
  auto t = im.tt(x);
  if (t.getNumElements() != other.getNumElements())
    im.fail(n, "cannot reshape " + std::to_string(t.getNumElements()) + " elements to " +
                   std::to_string(other.getNumElements()));
  im.setOut(n, im.reshape(n, x, other.getShape()));
}

/// _assert_tensor_metadata(a, size, stride, dtype, device, layout): a check
/// torch.export leaves in the graph (before `.to(dtype)`s and in
/// functionalized code). Sizes and dtype are checked here against the type
/// the importer gave the value; a mismatch is an error of this op (the
/// graph and offload disagree about a tensor). Strides, device and layout
/// are PyTorch's memory layout, which offload's values do not have. No op.
void convertAssertTensorMetadata(StepBuilder &im, Call &n) {
  const Arg &a = im.in(n, 0);
  if (a.kind != Arg::Tensor)
    return; // a constant the importer built itself from the graph
  auto t = im.tt(a.value);
  auto typeText = [](Type x) {
    std::string s;
    llvm::raw_string_ostream os(s);
    os << x;
    return s;
  };
  if (n.numInputs() > 1 && !im.in(n, 1).isNone()) {
    std::vector<int64_t> size = im.getInts(n, 1);
    if (llvm::ArrayRef<int64_t>(size) != t.getShape()) {
      std::string want;
      for (size_t i = 0; i < size.size(); ++i)
        want += (i ? ", " : "") + std::to_string(size[i]);
      im.fail(n, "the graph asserts size [" + want + "] for a value offload typed " +
                     typeText(t));
    }
  }
  if (n.numInputs() > 3 && im.in(n, 3).kind == Arg::Dtype) {
    const Arg &dt = im.in(n, 3);
    if (dt.type != t.getElementType())
      im.fail(n, "the graph asserts dtype " + dt.s + " for a value offload typed " +
                     typeText(t));
  }
}

/// clone is the identity, except when the front end reports that the clone
/// (or a view of it) is later written in place (Call::resultWrittenInPlace):
/// then it is a copy, so that the in-place functionalization updates the
/// clone and not the tensor it was cloned from (Swin v2:
/// `qkv_bias.clone()[n:2n].zero_()` on a parameter).
void convertClone(StepBuilder &im, Call &n) {
  if (!n.resultWrittenInPlace || im.in(n, 0).kind != Arg::Tensor) {
    im.setOut(n, 0, im.in(n, 0));
    return;
  }
  mlir::Value x = im.tensorIn(n, 0);
  im.setOut(n, im.emit1<CopyOp>(n, {x}, {}, {x.getType()}));
}

void convertExpand(StepBuilder &im, Call &n) {
  mlir::Value x = im.tensorIn(n, 0);
  auto t = im.tt(x);
  std::vector<int64_t> sizes = im.getInts(n, 1);
  int64_t off = sizes.size() - t.getRank();
  if (off < 0)
    im.fail(n, "expand to fewer dimensions");
  for (size_t i = 0; i < sizes.size(); ++i)
    if (sizes[i] == -1 && static_cast<int64_t>(i) >= off)
      sizes[i] = t.getDimSize(i - off);
  for (int64_t d : sizes)
    if (d < 0)
      im.fail(n, "negative size in expand");
  if (ArrayRef<int64_t>(sizes) == t.getShape()) {
    im.setOut(n, x);
    return;
  }
  im.setOut(n, im.emit1<BroadcastToOp>(
                   n, {x}, {}, {RankedTensorType::get(sizes, t.getElementType())}));
}

/// The tensors of list argument 0 of `n` (cat, stack): tensors as they
/// are, constants materialized in the list's element type; an import error
/// naming `what` for a list not built in the model, an element that is not
/// a tensor, or an empty list.
static std::vector<mlir::Value> tensorListOperands(StepBuilder &im, Call &n, StringRef what) {
  Arg &l = im.in(n, 0);
  std::vector<mlir::Value> ins;
  if (l.kind != Arg::List)
    im.fail(n, "the tensor list must be built in the model");
  Type hint;
  for (Arg &e : l.elems)
    if (e.kind == Arg::Tensor)
      hint = im.tt(e.value).getElementType();
  for (Arg &e : l.elems) {
    if (e.kind == Arg::Tensor)
      ins.push_back(e.value);
    else if (e.kind == Arg::Const)
      ins.push_back(im.materialize(n, e, hint));
    else
      im.fail(n, "list element is not a tensor");
  }
  if (ins.empty())
    im.fail(n, what.str() + " of an empty list");
  return ins;
}

void convertCat(StepBuilder &im, Call &n) {
  std::vector<mlir::Value> ins = tensorListOperands(im, n, "cat");
  int64_t dim = normDim(im, n, im.getInt(n, 1), im.tt(ins[0]).getRank());
  if (ins.size() == 1) {
    im.setOut(n, ins[0]);
    return;
  }
  im.setOut(n, im.emit1<CatOp>(n, ins, {im.i64("dim", dim)}));
}

/// stack(tensors, dim): each tensor given a size-1 dim at `dim` (a
/// reshape), then cat along it.
void convertStack(StepBuilder &im, Call &n) {
  std::vector<mlir::Value> ins = tensorListOperands(im, n, "stack");
  auto t = im.tt(ins[0]);
  int64_t dim = normDim(im, n, im.getInt(n, 1), t.getRank() + 1);
  std::vector<int64_t> shape(t.getShape().begin(), t.getShape().end());
  shape.insert(shape.begin() + dim, 1);
  for (mlir::Value &v : ins) {
    if (im.tt(v).getShape() != t.getShape())
      im.fail(n, "stack of tensors of different shapes");
    v = im.reshape(n, v, shape);
  }
  if (ins.size() == 1) {
    im.setOut(n, ins[0]);
    return;
  }
  im.setOut(n, im.emit1<CatOp>(n, ins, {im.i64("dim", dim)}));
}

void convertSlice(StepBuilder &im, Call &n) {
  // slice(self, dim, start, end, step); start/end may be None.
  mlir::Value x = im.tensorIn(n, 0);
  int64_t dim = normDim(im, n, im.getInt(n, 1), im.tt(x).getRank());
  int64_t start = im.in(n, 2).isNone() ? 0 : im.getInt(n, 2);
  int64_t end = im.in(n, 3).isNone() ? INT64_MAX : im.getInt(n, 3);
  int64_t step = im.getInt(n, 4);
  im.setOut(n, emitSlice(im, n, x, dim, start, end, step));
}

void convertSelect(StepBuilder &im, Call &n) {
  mlir::Value x = im.tensorIn(n, 0);
  auto t = im.tt(x);
  int64_t dim = normDim(im, n, im.getInt(n, 1), t.getRank());
  int64_t idx = im.getInt(n, 2);
  if (idx < 0)
    idx += t.getDimSize(dim);
  mlir::Value s = emitSlice(im, n, x, dim, idx, idx + 1, 1);
  std::vector<int64_t> shape(t.getShape().begin(), t.getShape().end());
  shape.erase(shape.begin() + dim);
  im.setOut(n, im.reshape(n, s, shape));
}

void convertChunk(StepBuilder &im, Call &n) {
  mlir::Value x = im.tensorIn(n, 0);
  int64_t chunks = im.getInt(n, 1);
  if (chunks <= 0)
    im.fail(n, "chunk count must be positive");
  int64_t dim = normDim(im, n, im.getInt(n, 2), im.tt(x).getRank());
  int64_t size = im.tt(x).getDimSize(dim);
  int64_t each = (size + chunks - 1) / chunks;
  Arg list;
  list.kind = Arg::List;
  for (int64_t s = 0; s < size; s += each)
    list.elems.push_back(Arg::tensor(emitSlice(im, n, x, dim, s, s + each, 1)));
  im.setOut(n, 0, list);
}

/// repeat(x, repeats): x reshaped to [1, s0, 1, s1, ...] (leading size-1
/// dims for extra repeats), broadcast to [r0, s0, r1, s1, ...] and reshaped
/// to [r0·s0, r1·s1, ...] (XCiT's `pos.repeat(B, 1, 1, 1)`); the gradient
/// sums the copies through broadcast_to's VJP.
void convertRepeat(StepBuilder &im, Call &n) {
  mlir::Value x = im.tensorIn(n, 0);
  auto t = im.tt(x);
  std::vector<int64_t> reps = im.getInts(n, 1);
  if (reps.size() < size_t(t.getRank()))
    im.fail(n, "repeat needs at least as many repeats as the tensor has dims");
  size_t off = reps.size() - size_t(t.getRank());
  std::vector<int64_t> pairs, wide, out;
  for (size_t k = 0; k < reps.size(); ++k) {
    int64_t s = k < off ? 1 : t.getDimSize(int64_t(k - off));
    if (reps[k] < 0)
      im.fail(n, "negative repeat count");
    pairs.push_back(1);
    pairs.push_back(s);
    wide.push_back(reps[k]);
    wide.push_back(s);
    out.push_back(reps[k] * s);
  }
  if (ArrayRef<int64_t>(out) == t.getShape()) {
    im.setOut(n, x);
    return;
  }
  mlir::Value r = im.reshape(n, x, pairs);
  r = im.emit1<BroadcastToOp>(n, {r}, {}, {RankedTensorType::get(wide, t.getElementType())});
  im.setOut(n, im.reshape(n, r, out));
}

/// broadcast_tensors(tensors): each expanded to their common shape (what
/// F.mse_loss calls before the loss); a tensor of that shape as it is.
void convertBroadcastTensors(StepBuilder &im, Call &n) {
  std::vector<mlir::Value> xs = tensorListOperands(im, n, "broadcast_tensors");
  std::vector<int64_t> shape;
  for (mlir::Value x : xs) {
    ArrayRef<int64_t> s = im.tt(x).getShape();
    std::vector<int64_t> out(std::max(shape.size(), s.size()), 1);
    for (size_t k = 0; k < out.size(); ++k) {
      int64_t a = k < out.size() - shape.size() ? 1 : shape[k - (out.size() - shape.size())];
      int64_t c = k < out.size() - s.size() ? 1 : s[k - (out.size() - s.size())];
      if (a != c && a != 1 && c != 1)
        im.fail(n, "the tensors do not broadcast together");
      out[k] = a == 1 ? c : a;
    }
    shape = out;
  }
  Arg list;
  list.kind = Arg::List;
  for (mlir::Value x : xs) {
    auto t = im.tt(x);
    if (t.getShape() != ArrayRef<int64_t>(shape))
      x = im.emit1<BroadcastToOp>(n, {x}, {},
                                   {RankedTensorType::get(shape, t.getElementType())});
    list.elems.push_back(Arg::tensor(x));
  }
  im.setOut(n, 0, list);
}

/// unbind(x, dim): the list of x.select(dim, i) for every i.
void convertUnbind(StepBuilder &im, Call &n) {
  mlir::Value x = im.tensorIn(n, 0);
  auto t = im.tt(x);
  int64_t dim = normDim(im, n, n.numInputs() > 1 ? im.getInt(n, 1) : 0, t.getRank());
  std::vector<int64_t> shape(t.getShape().begin(), t.getShape().end());
  shape.erase(shape.begin() + dim);
  Arg list;
  list.kind = Arg::List;
  for (int64_t i = 0; i < t.getDimSize(dim); ++i)
    list.elems.push_back(
        Arg::tensor(im.reshape(n, emitSlice(im, n, x, dim, i, i + 1, 1), shape)));
  im.setOut(n, 0, list);
}

/// split(x, split_size, dim) and split_with_sizes(x, sizes, dim).
void convertSplit(StepBuilder &im, Call &n) {
  mlir::Value x = im.tensorIn(n, 0);
  int64_t dim = normDim(im, n, im.getInt(n, 2), im.tt(x).getRank());
  int64_t size = im.tt(x).getDimSize(dim);
  std::vector<int64_t> sizes;
  if (n.kind == std::string("aten::split_with_sizes")) {
    sizes = im.getInts(n, 1);
  } else {
    int64_t each = im.getInt(n, 1);
    if (each <= 0)
      im.fail(n, "split size must be positive");
    for (int64_t s = 0; s < size; s += each)
      sizes.push_back(std::min(each, size - s));
  }
  Arg list;
  list.kind = Arg::List;
  int64_t s = 0;
  for (int64_t len : sizes) {
    list.elems.push_back(Arg::tensor(emitSlice(im, n, x, dim, s, s + len, 1)));
    s += len;
  }
  if (s != size)
    im.fail(n, "split sizes do not add up to the dimension's size");
  im.setOut(n, 0, list);
}

template <bool Mean>
void convertReduce(StepBuilder &im, Call &n) {
  // mean(self, dim, keepdim, dtype) / mean(self, dtype); same for sum.
  mlir::Value x = im.tensorIn(n, 0);
  std::vector<int64_t> dims;
  bool keep = false;
  size_t nIn = n.numInputs();
  if (nIn >= 3) {
    if (!im.in(n, 1).isNone())
      dims = im.getInts(n, 1);
    keep = im.getBool(n, 2);
    if (nIn > 3 && !im.in(n, 3).isNone())
      im.fail(n, "reduction with a dtype argument is not supported");
  } else if (nIn == 2 && !im.in(n, 1).isNone()) {
    im.fail(n, "reduction with a dtype argument is not supported");
  }
  for (int64_t &d : dims)
    d = normDim(im, n, d, im.tt(x).getRank());
  SmallVector<NamedAttribute> attrs = {im.i64s("dims", dims)};
  if (keep)
    attrs.push_back(im.attr("keepdim", im.b.getBoolAttr(true)));
  if (Mean)
    im.setOut(n, im.emit1<ReduceMeanOp>(n, {x}, attrs));
  else
    im.setOut(n, im.emit1<ReduceSumOp>(n, {x}, attrs));
}

} // namespace

void ts::registerShapeConversions(OpTable &t) {
  t["aten::view"] = convertView;
  t["aten::reshape"] = convertView;
  t["aten::flatten"] = convertFlatten;
  t["aten::unflatten"] = convertUnflatten;
  t["aten::unsqueeze"] = convertUnsqueeze;
  t["aten::squeeze"] = convertSqueeze;
  t["aten::transpose"] = convertTranspose;
  t["aten::t"] = convertT;
  t["aten::permute"] = convertPermute;
  t["aten::contiguous"] = convertIdentity;
  t["aten::alias"] = convertIdentity;
  t["aten::reshape_as"] = convertReshapeAs;
  t["aten::_assert_tensor_metadata"] = convertAssertTensorMetadata;
  t["aten::clone"] = convertClone;
  t["aten::expand"] = convertExpand;
  t["aten::broadcast_tensors"] = convertBroadcastTensors;
  t["aten::repeat"] = convertRepeat;
  t["aten::cat"] = convertCat;
  t["aten::stack"] = convertStack;
  t["aten::slice"] = convertSlice;
  t["aten::select"] = convertSelect;
  t["aten::chunk"] = convertChunk;
  t["aten::unbind"] = convertUnbind;
  t["aten::split"] = convertSplit;
  t["aten::split_with_sizes"] = convertSplit;
  t["aten::mean"] = convertReduce<true>;
  t["aten::sum"] = convertReduce<false>;
}
