// Shape and data-movement ops: Constant, Shape, Size, Identity, Reshape, Flatten, Squeeze,
// Unsqueeze, Transpose, Concat, Split, Expand, Tile, DepthToSpace, SpaceToDepth,
// ConstantOfShape, Range, EyeLike, Trilu. Slice, Pad and CenterCropPad live in
// shape_ops_slice_pad.cc. Kernels move elements by size (see shape_ops_util.h).
#include <cmath>
#include <limits>

#include "kernels/x86/layout_kernels.h"
#include "ops/channels_last.h"
#include "ops/common.h"
#include "ops/shape_ops_util.h"

namespace kiln::ops {

void RegisterSlicePadOps(OpRegistry& r);  // shape_ops_slice_pad.cc

namespace {

using moves::Str;

Status CheckMovable(const InferContext& ctx, DType t, const char* what = "input") {
  if (DTypeSize(t) == 0 && t != DType::kString)
    return ctx.error(std::string(what) + " has unsupported dtype " + std::string(DTypeName(t)));
  return OkStatus();
}

// Copies the elements of `in` into *out (strings by value), which is made anew, keeping its dims,
// unless it has in's type and element count.
void CopyElements(const Tensor& in, Tensor* out) {
  if (!out->defined() || out->size() != in.size() || out->dtype() != in.dtype())
    *out = Tensor(in.dtype(), out->defined() && out->size() == in.size() ? out->dims() : in.dims());
  if (in.is_string())
    std::copy_n(in.strings(), in.size(), out->strings());
  else if (in.nbytes() > 0 && out->raw() != in.raw())
    std::memcpy(out->raw(), in.raw(), in.nbytes());
}

// Copies input 0's elements into output 0 (the ops that only change the dims).
Status CopyBytes(ComputeContext& ctx) {
  CopyElements(ctx.input(0), &ctx.output(0));
  return OkStatus();
}

// Reads an int list attribute that later opsets turned into input `input`: from the input when
// the opset is at least `since`, else from the attribute. `*present` tells whether either was
// given; `*known` is false when the input exists but its value is not known yet.
std::vector<int64_t> IntsAttrOrInput(const InferContext& ctx, const char* attr, int input,
                                     int64_t since, bool* present, bool* known) {
  *known = true;
  if (ctx.opset() >= since || ctx.has_input(input)) {
    *present = ctx.has_input(input);
    if (!*present) return {};
    const Tensor* t = ctx.input_value(input);
    if (!t) {
      *known = false;
      return {};
    }
    return t->ToInt64Vector();
  }
  const ir::Attribute* a = ctx.node().attr(attr);
  *present = a != nullptr;
  return a ? a->ints : std::vector<int64_t>{};
}

// ---- Constant -------------------------------------------------------------------------------

// Constant's value from whichever attribute holds it; "" in *error when none fits.
Tensor ConstantTensor(const ir::Node& n, std::string* error) {
  auto row = [](const auto& v) { return Dims{static_cast<int64_t>(v.size())}; };
  if (const ir::Attribute* a = n.attr("value")) {
    if (a->kind != ir::Attribute::Kind::kTensor) {
      *error = "attribute 'value' is not a tensor";
      return {};
    }
    if (DTypeSize(a->t.dtype()) == 0 && !a->t.is_string()) {
      *error = "constant of dtype " + std::string(DTypeName(a->t.dtype())) + " is not supported";
      return {};
    }
    return a->t;
  }
  if (const ir::Attribute* a = n.attr("value_float"))
    return Tensor::FromVector(DType::kFloat32, {}, std::vector<float>{a->f});
  if (const ir::Attribute* a = n.attr("value_floats"))
    return Tensor::FromVector(DType::kFloat32, row(a->floats), a->floats);
  if (const ir::Attribute* a = n.attr("value_int"))
    return Tensor::FromVector(DType::kInt64, {}, std::vector<int64_t>{a->i});
  if (const ir::Attribute* a = n.attr("value_ints"))
    return Tensor::FromVector(DType::kInt64, row(a->ints), a->ints);
  if (const ir::Attribute* a = n.attr("value_string"))
    return Tensor::FromVector(DType::kString, {}, std::vector<std::string>{a->s});
  if (const ir::Attribute* a = n.attr("value_strings"))
    return Tensor::FromVector(DType::kString, row(a->strings), a->strings);
  *error = n.attr("sparse_value") ? "sparse_value constants are not supported"
                                  : "Constant has no value attribute";
  return {};
}

Status InferConstant(InferContext& ctx) {
  std::string error;
  Tensor t = ConstantTensor(ctx.node(), &error);
  if (!error.empty()) return ctx.error(error);
  ctx.set_output(0, t.dtype(), t.dims());
  return OkStatus();
}

Status ComputeConstant(ComputeContext& ctx) {
  std::string error;
  Tensor t = ConstantTensor(ctx.node(), &error);
  if (!error.empty()) return ctx.error(error);
  CopyElements(t, &ctx.output(0));
  return OkStatus();
}

// ---- Shape, Size, Identity ------------------------------------------------------------------

// The [start, end) range of dims that Shape reports (attributes from opset 15).
void ShapeRange(const ir::Node& n, int64_t rank, int64_t* start, int64_t* end) {
  int64_t s = n.attr_int("start", 0), e = n.attr_int("end", rank);
  if (s < 0) s += rank;
  if (e < 0) e += rank;
  s = std::clamp<int64_t>(s, 0, rank);
  e = std::clamp<int64_t>(e, 0, rank);
  *start = s;
  *end = std::max(s, e);
}

Status InferShape(InferContext& ctx) {
  if (ctx.input_type(0).kind != ir::TypeInfo::Kind::kTensor)
    return ctx.error("input is not a tensor");
  int64_t s, e;
  ShapeRange(ctx.node(), ctx.input_rank(0), &s, &e);
  ctx.set_output(0, DType::kInt64, {e - s});
  return OkStatus();
}

// The input may be a dims-only stand-in (no data) during constant folding: read only dims.
Status ComputeShape(ComputeContext& ctx) {
  const Dims& d = ctx.input(0).dims();
  int64_t s, e;
  ShapeRange(ctx.node(), static_cast<int64_t>(d.size()), &s, &e);
  int64_t* o = ctx.output(0).data<int64_t>();
  for (int64_t i = s; i < e; ++i) o[i - s] = d[i];
  return OkStatus();
}

Status InferSize(InferContext& ctx) {
  if (ctx.input_type(0).kind != ir::TypeInfo::Kind::kTensor)
    return ctx.error("input is not a tensor");
  ctx.set_output(0, DType::kInt64, {});
  return OkStatus();
}

Status ComputeSize(ComputeContext& ctx) {
  ctx.output(0).data<int64_t>()[0] = NumElements(ctx.input(0).dims());
  return OkStatus();
}

Status InferIdentity(InferContext& ctx) {
  if (ctx.input_type(0).kind != ir::TypeInfo::Kind::kTensor) {
    ctx.set_output_type(0, ctx.input_type(0));
    return OkStatus();
  }
  return SameAsInput(ctx);
}

Status ComputeIdentity(ComputeContext& ctx) {
  const Tensor& in = ctx.input(0);
  if (in.kind() != Tensor::Kind::kTensor) {
    ctx.output(0) = in;  // sequences and empty optionals own their items
    return OkStatus();
  }
  return CopyBytes(ctx);
}

// ---- Reshape, Flatten, Squeeze, Unsqueeze ---------------------------------------------------

Status InferReshape(InferContext& ctx) {
  DType dt = ctx.input_dtype(0);
  KILN_RETURN_IF_ERROR(CheckMovable(ctx, dt));
  std::vector<int64_t> shape;
  if (ctx.opset() < 5) {
    shape = ctx.node().attr_ints("shape");
  } else {
    if (!ctx.has_input(1)) return ctx.error("missing shape input");
    const Tensor* t = ctx.input_value(1);
    if (!t) {
      ctx.set_output_dynamic(0, dt);
      return OkStatus();
    }
    if (t->rank() != 1) return ctx.error("shape must be 1-D");
    shape = t->ToInt64Vector();
  }
  const Dims& in = ctx.input_dims(0);
  bool allowzero = ctx.opset() >= 14 && ctx.node().attr_int("allowzero", 0) != 0;
  Dims out(shape.size());
  int infer_at = -1;
  int64_t known = 1;
  bool has_zero = false;
  for (size_t i = 0; i < shape.size(); ++i) {
    int64_t v = shape[i];
    if (v == -1) {
      if (infer_at >= 0) return ctx.error("shape has more than one -1");
      infer_at = static_cast<int>(i);
      continue;
    }
    if (v < -1) return ctx.error("shape has invalid value " + Str(v));
    if (v == 0 && !allowzero) {
      if (i >= in.size()) return ctx.error("shape copies dim " + Str(i) + " that the input lacks");
      v = in[i];
    }
    if (v == 0) has_zero = true;
    out[i] = v;
    if (__builtin_mul_overflow(known, v, &known)) return ctx.error("shape is too large");
  }
  int64_t total = NumElements(in);
  if (infer_at >= 0) {
    if (has_zero && allowzero) return ctx.error("shape has both -1 and 0 with allowzero=1");
    if (known == 0 || total % known != 0)
      return ctx.error("cannot reshape " + DimsToString(in) + " to " + DimsToString(shape));
    out[infer_at] = total / known;
  } else if (known != total) {
    return ctx.error("cannot reshape " + DimsToString(in) + " to " + DimsToString(shape));
  }
  ctx.set_output(0, dt, out);
  return OkStatus();
}

Status InferFlatten(InferContext& ctx) {
  KILN_RETURN_IF_ERROR(CheckMovable(ctx, ctx.input_dtype(0)));
  const Dims& in = ctx.input_dims(0);
  int64_t rank = static_cast<int64_t>(in.size());
  int64_t axis = ctx.node().attr_int("axis", 1);
  if (axis < -rank || axis > rank) return ctx.error("axis " + Str(axis) + " out of range");
  if (axis < 0) axis += rank;
  int64_t a = 1, b = 1;
  for (int64_t i = 0; i < rank; ++i) (i < axis ? a : b) *= in[i];
  ctx.set_output(0, ctx.input_dtype(0), {a, b});
  return OkStatus();
}

Status InferSqueeze(InferContext& ctx) {
  DType dt = ctx.input_dtype(0);
  KILN_RETURN_IF_ERROR(CheckMovable(ctx, dt));
  bool present, known;
  std::vector<int64_t> axes = IntsAttrOrInput(ctx, "axes", 1, 13, &present, &known);
  if (!known) {
    ctx.set_output_dynamic(0, dt);
    return OkStatus();
  }
  const Dims& in = ctx.input_dims(0);
  int64_t rank = static_cast<int64_t>(in.size());
  std::vector<char> drop(rank, 0);
  if (!present) {
    for (int64_t i = 0; i < rank; ++i) drop[i] = in[i] == 1;
  } else {
    for (int64_t a : axes) {
      if (!NormalizeAxis(a, rank)) return ctx.error("axis " + Str(a) + " out of range");
      if (in[a] != 1) return ctx.error("cannot squeeze axis " + Str(a) + " of size " + Str(in[a]));
      drop[a] = 1;
    }
  }
  Dims out;
  for (int64_t i = 0; i < rank; ++i)
    if (!drop[i]) out.push_back(in[i]);
  ctx.set_output(0, dt, out);
  return OkStatus();
}

Status InferUnsqueeze(InferContext& ctx) {
  DType dt = ctx.input_dtype(0);
  KILN_RETURN_IF_ERROR(CheckMovable(ctx, dt));
  bool present, known;
  std::vector<int64_t> axes = IntsAttrOrInput(ctx, "axes", 1, 13, &present, &known);
  if (!known) {
    ctx.set_output_dynamic(0, dt);
    return OkStatus();
  }
  if (!present) return ctx.error("missing axes");
  const Dims& in = ctx.input_dims(0);
  int64_t rank = static_cast<int64_t>(in.size() + axes.size());
  std::vector<char> add(rank, 0);
  for (int64_t a : axes) {
    if (!NormalizeAxis(a, rank)) return ctx.error("axis " + Str(a) + " out of range");
    if (add[a]) return ctx.error("axis " + Str(a) + " repeated");
    add[a] = 1;
  }
  Dims out;
  size_t k = 0;
  for (int64_t i = 0; i < rank; ++i) out.push_back(add[i] ? 1 : in[k++]);
  ctx.set_output(0, dt, out);
  return OkStatus();
}

// ---- Transpose ------------------------------------------------------------------------------

Status TransposePerm(const ir::Node& n, int64_t rank, std::vector<int64_t>* perm) {
  *perm = n.attr_ints("perm");
  if (!n.attr("perm")) {
    perm->resize(rank);
    for (int64_t i = 0; i < rank; ++i) (*perm)[i] = rank - 1 - i;
  }
  if (static_cast<int64_t>(perm->size()) != rank)
    return Error("perm has " + Str(perm->size()) + " entries for rank " + Str(rank));
  std::vector<char> seen(rank, 0);
  for (int64_t& p : *perm) {
    if (!NormalizeAxis(p, rank) || seen[p]) return Error("perm is not a permutation");
    seen[p] = 1;
  }
  return OkStatus();
}

Status InferTranspose(InferContext& ctx) {
  KILN_RETURN_IF_ERROR(CheckMovable(ctx, ctx.input_dtype(0)));
  const Dims& in = ctx.input_dims(0);
  std::vector<int64_t> perm;
  Status st = TransposePerm(ctx.node(), static_cast<int64_t>(in.size()), &perm);
  if (!st.ok()) return ctx.error(st.message());
  Dims out;
  for (int64_t p : perm) out.push_back(in[p]);
  ctx.set_output(0, ctx.input_dtype(0), out);
  return OkStatus();
}

// Copies `in` viewed with dims `view` into `out`, with the view's axes permuted by `perm`.
void PermutedCopy(const Tensor& in, const Dims& view, const std::vector<int64_t>& perm, Tensor& out,
                  int threads) {
  Dims vs = Strides(view), od, os;
  for (int64_t p : perm) {
    od.push_back(view[p]);
    os.push_back(vs[p]);
  }
  moves::StridedCopy(od, os, 0, in.raw(), out.raw(), DTypeSize(in.dtype()), threads);
}

Status ComputeTranspose(ComputeContext& ctx) {
  const Tensor& in = ctx.input(0);
  std::vector<int64_t> perm;
  Status st = TransposePerm(ctx.node(), in.rank(), &perm);
  if (!st.ok()) return ctx.error(st.message());
  PermutedCopy(in, in.dims(), perm, ctx.output(0), ctx.threads());
  return OkStatus();
}

// ---- Concat, Split --------------------------------------------------------------------------

Status InferConcat(InferContext& ctx) {
  if (ctx.num_inputs() == 0 || !ctx.has_input(0)) return ctx.error("needs at least one input");
  DType dt = ctx.input_dtype(0);
  KILN_RETURN_IF_ERROR(CheckMovable(ctx, dt));
  Dims out = ctx.input_dims(0);
  int64_t rank = static_cast<int64_t>(out.size());
  if (rank == 0) return ctx.error("cannot concatenate scalars");
  const ir::Attribute* a = ctx.node().attr("axis");
  if (!a && ctx.opset() >= 4) return ctx.error("missing attribute 'axis'");
  int64_t axis = a ? a->i : 1;
  if (!NormalizeAxis(axis, rank)) return ctx.error("axis " + Str(axis) + " out of range");
  for (int i = 1; i < ctx.num_inputs(); ++i) {
    if (!ctx.has_input(i)) return ctx.error("input " + Str(i) + " is missing");
    if (ctx.input_dtype(i) != dt) return ctx.error("inputs have different dtypes");
    const Dims& d = ctx.input_dims(i);
    if (static_cast<int64_t>(d.size()) != rank) return ctx.error("inputs have different ranks");
    for (int64_t k = 0; k < rank; ++k) {
      if (k == axis) continue;
      if (d[k] != out[k])
        return ctx.error("input " + Str(i) + " has shape " + DimsToString(d) +
                         ", incompatible with " + DimsToString(ctx.input_dims(0)));
    }
    out[axis] += d[axis];
  }
  ctx.set_output(0, dt, out);
  return OkStatus();
}

Status ComputeConcat(ComputeContext& ctx) {
  Tensor& out = ctx.output(0);
  if (ctx.output_channels_last(0)) {  // ops/channels_last.h: float32 channels, N = 1
    std::vector<const float*> ins;
    std::vector<int64_t> channels;
    for (int i = 0; i < ctx.num_inputs(); ++i) {
      ins.push_back(ctx.input(i).data<float>());
      channels.push_back(ctx.input(i).dim(1));
    }
    ChannelsLastConcat(ins, channels, out.data<float>(), out.dim(2) * out.dim(3));
    return OkStatus();
  }
  int64_t rank = out.rank();
  int64_t axis = ctx.node().attr_int("axis", 1);
  NormalizeAxis(axis, rank);
  size_t es = DTypeSize(out.dtype());
  int64_t outer = 1;
  for (int64_t k = 0; k < axis; ++k) outer *= out.dim(static_cast<int>(k));
  size_t out_row = out.size() == 0 ? 0 : out.nbytes() / outer;
  size_t pos = 0;
  for (int i = 0; i < ctx.num_inputs(); ++i) {
    const Tensor& in = ctx.input(i);
    if (in.size() == 0) continue;
    size_t row = in.nbytes() / outer;
    const uint8_t* src = static_cast<const uint8_t*>(in.raw());
    uint8_t* dst = static_cast<uint8_t*>(out.raw()) + pos;
    for (int64_t o = 0; o < outer; ++o) std::memcpy(dst + o * out_row, src + o * row, row);
    pos += row;
  }
  (void)es;
  return OkStatus();
}

Status InferSplit(InferContext& ctx) {
  DType dt = ctx.input_dtype(0);
  KILN_RETURN_IF_ERROR(CheckMovable(ctx, dt));
  const Dims& in = ctx.input_dims(0);
  int64_t rank = static_cast<int64_t>(in.size());
  int64_t axis = ctx.node().attr_int("axis", 0);
  if (!NormalizeAxis(axis, rank)) return ctx.error("axis " + Str(axis) + " out of range");
  int n = ctx.num_outputs();
  bool present, known;
  std::vector<int64_t> sizes = IntsAttrOrInput(ctx, "split", 1, 13, &present, &known);
  if (!known) {
    for (int i = 0; i < n; ++i) ctx.set_output_dynamic(i, dt);
    return OkStatus();
  }
  int64_t dim = in[axis];
  if (const ir::Attribute* a = ctx.node().attr("num_outputs")) {
    if (present) return ctx.error("both split and num_outputs are given");
    if (a->i != n)
      return ctx.error("num_outputs is " + Str(a->i) + " but the node has " + Str(n) + " outputs");
  }
  if (!present || sizes.empty()) {
    if (n <= 0) return ctx.error("no outputs");
    int64_t chunk = (dim + n - 1) / n;
    if (dim % n != 0 && ctx.opset() < 18)
      return ctx.error("axis of size " + Str(dim) + " does not split evenly into " + Str(n));
    sizes.assign(n, chunk);
    sizes.back() = dim - chunk * (n - 1);
    if (sizes.back() < 0) {
      // Shape inference also visits If branches that never run (AffineGrid's function body
      // splits a 3-D size into 4 in its 2-D branch), so leave the outputs dynamic and let
      // compute report it if this node really executes.
      for (int i = 0; i < n; ++i) ctx.set_output_dynamic(i, dt);
      return OkStatus();
    }
  }
  if (static_cast<int>(sizes.size()) != n)
    return ctx.error("split has " + Str(sizes.size()) + " entries for " + Str(n) + " outputs");
  int64_t sum = 0;
  for (int64_t s : sizes) {
    if (s < 0) return ctx.error("split has negative size " + Str(s));
    sum += s;
  }
  if (sum != dim)
    return ctx.error("split sizes sum to " + Str(sum) + " but the axis has size " + Str(dim));
  for (int i = 0; i < n; ++i) {
    Dims d = in;
    d[axis] = sizes[i];
    ctx.set_output(i, dt, d);
  }
  return OkStatus();
}

Status ComputeSplit(ComputeContext& ctx) {
  const Tensor& in = ctx.input(0);
  int64_t axis = ctx.node().attr_int("axis", 0);
  NormalizeAxis(axis, in.rank());
  for (int i = 0; i < ctx.num_outputs(); ++i)
    if (!ctx.output(i).defined())
      return ctx.error("axis of size " + Str(in.dim(static_cast<int>(axis))) +
                       " cannot split into " + Str(ctx.num_outputs()) + " parts");
  int64_t outer = 1;
  for (int64_t k = 0; k < axis; ++k) outer *= in.dim(static_cast<int>(k));
  if (in.size() == 0) return OkStatus();
  size_t in_row = in.nbytes() / outer;
  size_t pos = 0;
  for (int i = 0; i < ctx.num_outputs(); ++i) {
    Tensor& out = ctx.output(i);
    if (out.size() == 0) continue;
    size_t row = out.nbytes() / outer;
    const uint8_t* src = static_cast<const uint8_t*>(in.raw()) + pos;
    uint8_t* dst = static_cast<uint8_t*>(out.raw());
    for (int64_t o = 0; o < outer; ++o) std::memcpy(dst + o * row, src + o * in_row, row);
    pos += row;
  }
  return OkStatus();
}

// ---- Expand, Tile ---------------------------------------------------------------------------

Status InferExpand(InferContext& ctx) {
  DType dt = ctx.input_dtype(0);
  KILN_RETURN_IF_ERROR(CheckMovable(ctx, dt));
  if (!ctx.has_input(1)) return ctx.error("missing shape input");
  const Tensor* t = ctx.input_value(1);
  if (!t) {
    ctx.set_output_dynamic(0, dt);
    return OkStatus();
  }
  if (t->rank() != 1) return ctx.error("shape must be 1-D");
  Dims shape = t->ToInt64Vector(), out;
  for (int64_t v : shape)
    if (v < 0) return ctx.error("shape has negative dim " + Str(v));
  if (!BroadcastDims(ctx.input_dims(0), shape, &out))
    return ctx.error("cannot expand " + DimsToString(ctx.input_dims(0)) + " to " +
                     DimsToString(shape));
  ctx.set_output(0, dt, out);
  return OkStatus();
}

Status ComputeExpand(ComputeContext& ctx) {
  const Tensor& in = ctx.input(0);
  Tensor& out = ctx.output(0);
  moves::StridedCopy(out.dims(), BroadcastStrides(in.dims(), out.dims()), 0, in.raw(), out.raw(),
                     DTypeSize(in.dtype()), ctx.threads());
  return OkStatus();
}

// Tile repeats per axis: from the `repeats` input (opset 6+), or `tiles` along `axis` (opset 1).
Status TileRepeats(const InferContext& ctx, std::vector<int64_t>* reps, bool* known) {
  int64_t rank = ctx.input_rank(0);
  *known = true;
  if (!ctx.has_input(1)) return ctx.error("missing repeats input");
  const Tensor* t = ctx.input_value(1);
  if (!t) {
    *known = false;
    return OkStatus();
  }
  if (ctx.opset() < 6) {
    const Tensor* ax = ctx.has_input(2) ? ctx.input_value(2) : nullptr;
    if (ctx.has_input(2) && !ax) {
      *known = false;
      return OkStatus();
    }
    if (t->size() != 1 || (ax && ax->size() != 1))
      return ctx.error("tiles and axis must be scalars");
    int64_t axis = ax ? ax->GetInt(0) : 0;
    if (!NormalizeAxis(axis, rank)) return ctx.error("axis out of range");
    reps->assign(rank, 1);
    (*reps)[axis] = t->GetInt(0);
  } else {
    if (t->rank() != 1 || t->size() != rank)
      return ctx.error("repeats must be 1-D with one entry per input axis");
    *reps = t->ToInt64Vector();
  }
  for (int64_t r : *reps)
    if (r < 0) return ctx.error("repeats has negative value " + Str(r));
  return OkStatus();
}

Status InferTile(InferContext& ctx) {
  DType dt = ctx.input_dtype(0);
  KILN_RETURN_IF_ERROR(CheckMovable(ctx, dt));
  std::vector<int64_t> reps;
  bool known;
  KILN_RETURN_IF_ERROR(TileRepeats(ctx, &reps, &known));
  if (!known) {
    ctx.set_output_dynamic(0, dt);
    return OkStatus();
  }
  Dims out = ctx.input_dims(0);
  for (size_t i = 0; i < out.size(); ++i) out[i] *= reps[i];
  ctx.set_output(0, dt, out);
  return OkStatus();
}

// The output of Tile laid out as [r0, d0, r1, d1, ...] is row-major identical to
// [r0*d0, r1*d1, ...]: a strided copy with zero strides on the repeat axes.
Status ComputeTile(ComputeContext& ctx) {
  const Tensor& in = ctx.input(0);
  const Tensor& out = ctx.output(0);
  Dims is = Strides(in.dims()), d, s;
  for (int i = 0; i < in.rank(); ++i) {
    int64_t reps = in.dim(i) == 0 ? 0 : out.dims()[i] / in.dim(i);
    d.push_back(reps);
    s.push_back(0);
    d.push_back(in.dim(i));
    s.push_back(is[i]);
  }
  moves::StridedCopy(d, s, 0, in.raw(), ctx.output(0).raw(), DTypeSize(in.dtype()), ctx.threads());
  return OkStatus();
}

// ---- DepthToSpace, SpaceToDepth -------------------------------------------------------------

Status InferDepthSpace(InferContext& ctx, bool to_space) {
  DType dt = ctx.input_dtype(0);
  KILN_RETURN_IF_ERROR(CheckMovable(ctx, dt));
  const Dims& in = ctx.input_dims(0);
  if (in.size() != 4) return ctx.error("input must be 4-D (N, C, H, W)");
  int64_t b = ctx.node().attr_int("blocksize", 0);
  if (b <= 0) return ctx.error("blocksize must be positive");
  if (to_space) {
    std::string mode = ctx.node().attr_string("mode", "DCR");
    if (mode != "DCR" && mode != "CRD") return ctx.error("unknown mode '" + mode + "'");
    if (in[1] % (b * b) != 0) return ctx.error("channels not divisible by blocksize^2");
    ctx.set_output(0, dt, {in[0], in[1] / (b * b), in[2] * b, in[3] * b});
  } else {
    if (in[2] % b != 0 || in[3] % b != 0)
      return ctx.error("height and width must be divisible by blocksize");
    ctx.set_output(0, dt, {in[0], in[1] * b * b, in[2] / b, in[3] / b});
  }
  return OkStatus();
}

Status ComputeDepthToSpace(ComputeContext& ctx) {
  const Tensor& in = ctx.input(0);
  int64_t b = ctx.node().attr_int("blocksize", 1);
  int64_t n = in.dim(0), c = in.dim(1) / (b * b), h = in.dim(2), w = in.dim(3);
  if (ctx.node().attr_string("mode", "DCR") == "CRD")
    PermutedCopy(in, {n, c, b, b, h, w}, {0, 1, 4, 2, 5, 3}, ctx.output(0), ctx.threads());
  else
    PermutedCopy(in, {n, b, b, c, h, w}, {0, 3, 4, 1, 5, 2}, ctx.output(0), ctx.threads());
  return OkStatus();
}

Status ComputeSpaceToDepth(ComputeContext& ctx) {
  const Tensor& in = ctx.input(0);
  int64_t b = ctx.node().attr_int("blocksize", 1);
  int64_t n = in.dim(0), c = in.dim(1), h = in.dim(2) / b, w = in.dim(3) / b;
  PermutedCopy(in, {n, c, h, b, w, b}, {0, 3, 5, 1, 2, 4}, ctx.output(0), ctx.threads());
  return OkStatus();
}

// ---- ChannelShuffle (com.kiln) ---------------------------------------------------------------
// ShuffleNet's channel shuffle, which exporters write as Reshape [N, g, C/g, ...] -> Transpose
// (swap those two) -> Reshape back and passes/fuse_channel_shuffle makes one node of:
// y[n, i * g + j, ...] = x[n, j * (C / g) + i, ...]  for i < C / g, j < g (attribute `group`).
// One node so that the host keeps the tensor channels-last through it (a per-pixel permutation).

Status InferChannelShuffle(InferContext& ctx) {
  DType dt = ctx.input_dtype(0);
  KILN_RETURN_IF_ERROR(CheckMovable(ctx, dt));
  const Dims& in = ctx.input_dims(0);
  if (in.size() < 2) return ctx.error("input must have at least 2 dims (N, C, ...)");
  const int64_t g = ctx.node().attr_int("group", 0);
  if (g <= 0 || in[1] < 0 || in[1] % g != 0)
    return ctx.error("group must be positive and divide the channels");
  ctx.set_output(0, dt, in);
  return OkStatus();
}

Status ComputeChannelShuffle(ComputeContext& ctx) {
  const Tensor& in = ctx.input(0);
  const int64_t g = ctx.node().attr_int("group", 1), channels = in.dim(1);
  if (ctx.input_channels_last(0)) {  // [N, H, W, C] (ops/channels_last.h): float32, N = 1
    ChannelsLastShuffle(in.data<float>(), ctx.output(0).data<float>(), channels, g,
                        in.size() / channels);
    return OkStatus();
  }
  Dims view = {in.dim(0), g, channels / g}, perm = {0, 2, 1};
  for (int64_t k = 2; k < in.rank(); ++k) {
    view.push_back(in.dim(k));
    perm.push_back(k + 1);
  }
  PermutedCopy(in, view, perm, ctx.output(0), ctx.threads());
  return OkStatus();
}

// ---- ConstantOfShape, Range, EyeLike, Trilu -------------------------------------------------

Status InferConstantOfShape(InferContext& ctx) {
  DType dt = DType::kFloat32;
  if (const ir::Attribute* a = ctx.node().attr("value")) {
    if (a->kind != ir::Attribute::Kind::kTensor || a->t.size() != 1)
      return ctx.error("value must be a one-element tensor");
    dt = a->t.dtype();
    KILN_RETURN_IF_ERROR(CheckMovable(ctx, dt, "value"));
  }
  const Tensor* t = ctx.input_value(0);
  if (!t) {
    ctx.set_output_dynamic(0, dt);
    return OkStatus();
  }
  if (t->rank() != 1) return ctx.error("shape must be 1-D");
  Dims out = t->ToInt64Vector();
  for (int64_t v : out)
    if (v < 0) return ctx.error("shape has negative dim " + Str(v));
  ctx.set_output(0, dt, out);
  return OkStatus();
}

Status ComputeConstantOfShape(ComputeContext& ctx) {
  Tensor& out = ctx.output(0);
  const ir::Attribute* a = ctx.node().attr("value");
  size_t es = DTypeSize(out.dtype());
  uint8_t* dst = static_cast<uint8_t*>(out.raw());
  if (!a) {
    std::memset(dst, 0, out.nbytes());
    return OkStatus();
  }
  const uint8_t* v = static_cast<const uint8_t*>(a->t.raw());
  for (int64_t i = 0; i < out.size(); ++i) std::memcpy(dst + i * es, v, es);
  return OkStatus();
}

Status InferRange(InferContext& ctx) {
  DType dt = ctx.input_dtype(0);
  for (int i = 0; i < 3; ++i) {
    if (!ctx.has_input(i)) return ctx.error("needs start, limit and delta");
    if (ctx.input_dtype(i) != dt) return ctx.error("start, limit and delta differ in dtype");
    if (NumElements(ctx.input_dims(i)) != 1)
      return ctx.error("start, limit and delta must be scalars");
  }
  if (!IsFloatingDType(dt) && !IsSignedIntDType(dt) && !IsUnsignedIntDType(dt))
    return ctx.error("unsupported dtype " + std::string(DTypeName(dt)));
  const Tensor *s = ctx.input_value(0), *l = ctx.input_value(1), *d = ctx.input_value(2);
  if (!s || !l || !d) {
    ctx.set_output_dynamic(0, dt);
    return OkStatus();
  }
  int64_t n = 0;
  if (IsFloatingDType(dt)) {
    double start = s->GetDouble(0), limit = l->GetDouble(0), delta = d->GetDouble(0);
    if (delta == 0) return ctx.error("delta is zero");
    double c = std::ceil((limit - start) / delta);
    if (!(c < 1e10)) {
      if (c > 0 || std::isnan(c)) return ctx.error("range is too long");
    }
    n = c > 0 ? static_cast<int64_t>(c) : 0;
  } else {
    int64_t start = s->GetInt(0), limit = l->GetInt(0), delta = d->GetInt(0);
    if (delta == 0) return ctx.error("delta is zero");
    // ceil((limit - start) / delta) in exact integer arithmetic.
    __int128 diff = static_cast<__int128>(limit) - start;
    __int128 q = diff / delta;
    if (q * delta != diff && ((diff > 0) == (delta > 0))) ++q;
    if (q > 10000000000LL) return ctx.error("range is too long");
    n = q > 0 ? static_cast<int64_t>(q) : 0;
  }
  ctx.set_output(0, dt, {n});
  return OkStatus();
}

Status ComputeRange(ComputeContext& ctx) {
  Tensor& out = ctx.output(0);
  bool ok = Dispatch<kNumericTypes>(out.dtype(), [&]<class T>() {
    using A = Acc<T>;
    A start = static_cast<A>(ctx.input(0).data<T>()[0]);
    A delta = static_cast<A>(ctx.input(2).data<T>()[0]);
    T* o = out.data<T>();
    for (int64_t i = 0; i < out.size(); ++i)
      o[i] = static_cast<T>(static_cast<A>(start + static_cast<A>(i) * delta));
  });
  return ok ? OkStatus() : ctx.error("unsupported dtype");
}

Status InferEyeLike(InferContext& ctx) {
  if (ctx.input_rank(0) != 2) return ctx.error("input must be 2-D");
  DType dt = ctx.input_dtype(0);
  if (const ir::Attribute* a = ctx.node().attr("dtype")) dt = static_cast<DType>(a->i);
  if (!IsSupportedDType(dt) || DTypeSize(dt) == 0)
    return ctx.error("unsupported dtype " + std::string(DTypeName(dt)));
  ctx.set_output(0, dt, ctx.input_dims(0));
  return OkStatus();
}

Status ComputeEyeLike(ComputeContext& ctx) {
  Tensor& out = ctx.output(0);
  std::memset(out.raw(), 0, out.nbytes());
  int64_t rows = out.dim(0), cols = out.dim(1), k = ctx.node().attr_int("k", 0);
  bool ok = Dispatch<kAllTypes>(out.dtype(), [&]<class T>() {
    T one = ConvertValue<T>(1);
    T* o = out.data<T>();
    for (int64_t i = 0; i < rows; ++i) {
      // Compare without forming i + k, which could overflow for extreme k.
      if (k >= cols || (k < 0 && -k > rows)) break;
      int64_t j = i + k;
      if (j >= 0 && j < cols) o[i * cols + j] = one;
    }
  });
  return ok ? OkStatus() : ctx.error("unsupported dtype");
}

Status InferTrilu(InferContext& ctx) {
  KILN_RETURN_IF_ERROR(CheckMovable(ctx, ctx.input_dtype(0)));
  if (ctx.input_rank(0) < 2) return ctx.error("input must have rank >= 2");
  if (ctx.has_input(1)) {
    if (NumElements(ctx.input_dims(1)) != 1) return ctx.error("k must be a scalar");
    if (IsFloatingDType(ctx.input_dtype(1))) return ctx.error("k must be an integer");
  }
  return SameAsInput(ctx);
}

Status ComputeTrilu(ComputeContext& ctx) {
  const Tensor& in = ctx.input(0);
  Tensor& out = ctx.output(0);
  int64_t k = ctx.has_input(1) ? ctx.input(1).GetInt(0) : 0;
  bool upper = ctx.node().attr_int("upper", 1) != 0;
  int r = in.rank();
  int64_t m = in.dim(r - 2), n = in.dim(r - 1);
  k = std::clamp<int64_t>(k, -(m + 1), n + 1);
  size_t es = DTypeSize(in.dtype());
  int64_t mats = m * n == 0 ? 0 : in.size() / (m * n);
  const uint8_t* src = static_cast<const uint8_t*>(in.raw());
  uint8_t* dst = static_cast<uint8_t*>(out.raw());
  std::memset(dst, 0, out.nbytes());
  for (int64_t b = 0; b < mats; ++b) {
    for (int64_t i = 0; i < m; ++i) {
      // upper keeps j >= i + k; lower keeps j <= i + k
      int64_t lo = upper ? std::clamp<int64_t>(i + k, 0, n) : 0;
      int64_t hi = upper ? n : std::clamp<int64_t>(i + k + 1, 0, n);
      if (hi <= lo) continue;
      size_t row = static_cast<size_t>((b * m + i) * n);
      std::memcpy(dst + (row + lo) * es, src + (row + lo) * es, (hi - lo) * es);
    }
  }
  return OkStatus();
}

}  // namespace

void RegisterShapeOps(OpRegistry& r) {
  r.Register("Constant", InferConstant, ComputeConstant);
  r.Register("Shape", InferShape, ComputeShape);
  r.Register("Size", InferSize, ComputeSize);
  r.Register("Identity", InferIdentity, ComputeIdentity);
  r.Register("Reshape", InferReshape, CopyBytes);
  r.Register("Flatten", InferFlatten, CopyBytes);
  r.Register("Squeeze", InferSqueeze, CopyBytes);
  r.Register("Unsqueeze", InferUnsqueeze, CopyBytes);
  r.Register("Transpose", InferTranspose, ComputeTranspose);
  r.Register("Concat", InferConcat, ComputeConcat);
  r.Register("Split", InferSplit, ComputeSplit);
  r.Register("Expand", InferExpand, ComputeExpand);
  r.Register("Tile", InferTile, ComputeTile);
  r.Register(
      "DepthToSpace", [](InferContext& c) { return InferDepthSpace(c, true); },
      ComputeDepthToSpace);
  r.Register(
      "SpaceToDepth", [](InferContext& c) { return InferDepthSpace(c, false); },
      ComputeSpaceToDepth);
  r.Register("ChannelShuffle", InferChannelShuffle, ComputeChannelShuffle, kKilnDomain);
  r.Register("ConstantOfShape", InferConstantOfShape, ComputeConstantOfShape);
  r.Register("Range", InferRange, ComputeRange);
  r.Register("EyeLike", InferEyeLike, ComputeEyeLike);
  r.Register("Trilu", InferTrilu, ComputeTrilu);
  RegisterSlicePadOps(r);
}

}  // namespace kiln::ops
