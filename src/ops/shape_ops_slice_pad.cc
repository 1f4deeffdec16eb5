// Slice, Pad and CenterCropPad: the ops whose output window is computed per axis.
#include <limits>

#include "ops/common.h"
#include "ops/shape_ops_util.h"

namespace kiln::ops {
namespace {

using moves::Str;

const Tensor* ValueOf(const InferContext& c, int i) {
  return c.has_input(i) ? c.input_value(i) : nullptr;
}
const Tensor* ValueOf(const ComputeContext& c, int i) {
  return c.has_input(i) ? &c.input(i) : nullptr;
}

// ---- Slice ----------------------------------------------------------------------------------

struct SliceSpec {
  Dims out;
  Dims strides;  // in input elements, per output axis
  int64_t base = 0;
};

// Works for both contexts; `*known` is false when a parameter input has no value yet.
template <class Ctx>
Status SliceParams(const Ctx& ctx, const Dims& in, SliceSpec* spec, bool* known) {
  const int64_t rank = static_cast<int64_t>(in.size());
  std::vector<int64_t> starts, ends, axes, steps;
  *known = true;
  if (ctx.opset() < 10) {
    starts = ctx.node().attr_ints("starts");
    ends = ctx.node().attr_ints("ends");
    axes = ctx.node().attr_ints("axes");
  } else {
    if (!ctx.has_input(1) || !ctx.has_input(2)) return ctx.error("missing starts or ends");
    const Tensor *s = ValueOf(ctx, 1), *e = ValueOf(ctx, 2);
    const Tensor *a = ValueOf(ctx, 3), *st = ValueOf(ctx, 4);
    if (!s || !e || (ctx.has_input(3) && !a) || (ctx.has_input(4) && !st)) {
      *known = false;
      return OkStatus();
    }
    for (const Tensor* t : {s, e, a, st})
      if (t && (t->rank() != 1 || !moves::IsIndexDType(t->dtype())))
        return ctx.error("starts, ends, axes and steps must be 1-D int32 or int64");
    starts = s->ToInt64Vector();
    ends = e->ToInt64Vector();
    if (a) axes = a->ToInt64Vector();
    if (st) steps = st->ToInt64Vector();
  }
  if (starts.size() != ends.size()) return ctx.error("starts and ends differ in length");
  if (axes.empty()) {
    for (size_t i = 0; i < starts.size(); ++i) axes.push_back(static_cast<int64_t>(i));
  }
  if (steps.empty()) steps.assign(starts.size(), 1);
  if (axes.size() != starts.size() || steps.size() != starts.size())
    return ctx.error("starts, ends, axes and steps differ in length");
  Dims is = Strides(in);
  spec->out = in;
  spec->strides = is;
  spec->base = 0;
  std::vector<char> seen(rank, 0);
  for (size_t i = 0; i < starts.size(); ++i) {
    int64_t ax = axes[i];
    if (!NormalizeAxis(ax, rank)) return ctx.error("axis " + Str(axes[i]) + " out of range");
    if (seen[ax]) return ctx.error("axis " + Str(axes[i]) + " repeated");
    seen[ax] = 1;
    int64_t dim = in[ax], step = steps[i], s = starts[i], e = ends[i];
    if (step == 0) return ctx.error("step is zero");
    if (s < 0) s += dim;
    if (e < 0) e += dim;
    int64_t len;
    if (step > 0) {
      s = std::clamp<int64_t>(s, 0, dim);
      e = std::clamp<int64_t>(e, 0, dim);
      len = e > s ? (e - s + step - 1) / step : 0;
    } else {
      s = std::clamp<int64_t>(s, 0, dim - 1);
      e = std::clamp<int64_t>(e, -1, dim - 1);
      // step may be INT64_MIN: compare before negating.
      len = s > e ? (step == std::numeric_limits<int64_t>::min() ? 1 : (s - e - step - 1) / -step)
                  : 0;
    }
    spec->out[ax] = len;
    if (len > 0) spec->base += s * is[ax];
    spec->strides[ax] = len > 1 ? is[ax] * step : is[ax];
  }
  return OkStatus();
}

Status InferSlice(InferContext& ctx) {
  DType dt = ctx.input_dtype(0);
  if (DTypeSize(dt) == 0) return ctx.error("unsupported dtype " + std::string(DTypeName(dt)));
  SliceSpec spec;
  bool known;
  KILN_RETURN_IF_ERROR(SliceParams(ctx, ctx.input_dims(0), &spec, &known));
  if (!known)
    ctx.set_output_dynamic(0, dt);
  else
    ctx.set_output(0, dt, spec.out);
  return OkStatus();
}

Status ComputeSlice(ComputeContext& ctx) {
  const Tensor& in = ctx.input(0);
  SliceSpec spec;
  bool known;
  KILN_RETURN_IF_ERROR(SliceParams(ctx, in.dims(), &spec, &known));
  if (!known) return ctx.error("slice parameters unknown");
  Tensor& out = ctx.output(0);
  if (!out.defined() || out.dims() != spec.out) out = Tensor(in.dtype(), spec.out);
  if (out.size() == 0) return OkStatus();
  moves::StridedCopy(spec.out, spec.strides, spec.base, in.raw(), out.raw(), DTypeSize(in.dtype()),
                     ctx.threads());
  return OkStatus();
}

// ---- Pad kernel (also CenterCropPad) --------------------------------------------------------

enum class PadMode { kConstant, kReflect, kEdge, kWrap };

// Maps output coordinate c (already shifted by the begin pad) to an input coordinate, or -1
// for the constant fill.
inline int64_t MapCoord(int64_t c, int64_t d, PadMode m) {
  if (c >= 0 && c < d) return c;
  switch (m) {
    case PadMode::kConstant:
      return -1;
    case PadMode::kEdge:
      return c < 0 ? 0 : d - 1;
    case PadMode::kWrap:
      return ((c % d) + d) % d;
    case PadMode::kReflect: {
      if (d == 1) return 0;
      int64_t p = 2 * (d - 1);
      c = ((c % p) + p) % p;
      return c >= d ? p - c : c;
    }
  }
  return -1;
}

// out[o] = in[map(o - pb)] per axis, `fill` (one element's bytes) where the constant applies.
void PadKernel(const Tensor& in, Tensor& out, const Dims& pb, PadMode mode, const uint8_t* fill) {
  const int rank = in.rank();
  const size_t es = DTypeSize(in.dtype());
  const int64_t total = out.size();
  if (total == 0) return;
  const uint8_t* src = static_cast<const uint8_t*>(in.raw());
  uint8_t* dst = static_cast<uint8_t*>(out.raw());
  if (rank == 0) {
    std::memcpy(dst, src, es);
    return;
  }
  const Dims& od = out.dims();
  const Dims& id = in.dims();
  Dims is = Strides(id);
  const int64_t inner = od[rank - 1], din = id[rank - 1], pl = pb[rank - 1];
  // Column map of the innermost axis, shared by every row, cut into runs of consecutive
  // source columns (one memcpy each) and single fill or mirrored elements.
  struct Run {
    int64_t j, len, col;  // col -1: fill
  };
  std::vector<Run> runs;
  for (int64_t j = 0; j < inner; ++j) {
    int64_t c = din == 0 ? -1 : MapCoord(j - pl, din, mode);
    if (!runs.empty() && c >= 0 && runs.back().col >= 0 && runs.back().col + runs.back().len == c)
      ++runs.back().len;
    else
      runs.push_back({j, 1, c});
  }
  std::vector<int64_t> idx(rank, 0);
  for (int64_t o = 0; o < total; o += inner) {
    int64_t off = 0;
    bool filled = false;
    for (int k = 0; k < rank - 1; ++k) {
      int64_t c = id[k] == 0 ? -1 : MapCoord(idx[k] - pb[k], id[k], mode);
      if (c < 0) {
        filled = true;
        break;
      }
      off += c * is[k];
    }
    uint8_t* row = dst + o * es;
    if (filled) {
      for (int64_t j = 0; j < inner; ++j) std::memcpy(row + j * es, fill, es);
    } else {
      for (const Run& r : runs) {
        if (r.col >= 0) {
          std::memcpy(row + r.j * es, src + (off + r.col) * es, r.len * es);
        } else {
          for (int64_t j = r.j; j < r.j + r.len; ++j) std::memcpy(row + j * es, fill, es);
        }
      }
    }
    for (int k = rank - 2; k >= 0; --k) {
      if (++idx[k] < od[k]) break;
      idx[k] = 0;
    }
  }
}

// ---- Pad ------------------------------------------------------------------------------------

struct PadSpec {
  Dims begin, end;
  PadMode mode = PadMode::kConstant;
  std::vector<uint8_t> fill;  // one element
};

template <class Ctx>
Status PadParams(const Ctx& ctx, const Dims& in, DType dt, PadSpec* spec, bool* known) {
  const int64_t rank = static_cast<int64_t>(in.size());
  *known = true;
  std::string mode = ctx.node().attr_string("mode", "constant");
  if (mode == "constant")
    spec->mode = PadMode::kConstant;
  else if (mode == "reflect")
    spec->mode = PadMode::kReflect;
  else if (mode == "edge")
    spec->mode = PadMode::kEdge;
  else if (mode == "wrap")
    spec->mode = PadMode::kWrap;
  else
    return ctx.error("unknown mode '" + mode + "'");
  size_t es = DTypeSize(dt);
  spec->fill.assign(es, 0);
  std::vector<int64_t> pads, axes;
  if (ctx.opset() < 11) {
    pads = ctx.node().attr_ints(ctx.node().attr("pads") ? "pads" : "paddings");
    float value = ctx.node().attr_float("value", 0.0f);
    Dispatch<kAllTypes>(dt, [&]<class T>() {
      T v = ConvertValue<T>(value);
      std::memcpy(spec->fill.data(), &v, es);
    });
  } else {
    if (!ctx.has_input(1)) return ctx.error("missing pads input");
    const Tensor *p = ValueOf(ctx, 1), *cv = ValueOf(ctx, 2), *ax = ValueOf(ctx, 3);
    if (!p || (ctx.has_input(3) && !ax)) {
      *known = false;
      return OkStatus();
    }
    if (p->rank() != 1) return ctx.error("pads must be 1-D");
    pads = p->ToInt64Vector();
    if (ax) {
      if (ax->rank() != 1) return ctx.error("axes must be 1-D");
      axes = ax->ToInt64Vector();
    }
    if (cv && spec->mode == PadMode::kConstant) {
      if (cv->size() > 1) return ctx.error("constant_value must be a scalar");
      if (cv->dtype() != dt) return ctx.error("constant_value dtype differs from data");
      if (cv->size() == 1 && cv->raw()) std::memcpy(spec->fill.data(), cv->raw(), es);
    }
  }
  if (axes.empty())
    for (int64_t i = 0; i < rank; ++i) axes.push_back(i);
  if (pads.size() != 2 * axes.size())
    return ctx.error("pads has " + Str(pads.size()) + " values, expected " + Str(2 * axes.size()));
  spec->begin.assign(rank, 0);
  spec->end.assign(rank, 0);
  std::vector<char> seen(rank, 0);
  const size_t n = axes.size();
  for (size_t i = 0; i < n; ++i) {
    int64_t a = axes[i];
    if (!NormalizeAxis(a, rank)) return ctx.error("axis " + Str(axes[i]) + " out of range");
    if (seen[a]) return ctx.error("axis " + Str(axes[i]) + " repeated");
    seen[a] = 1;
    spec->begin[a] = pads[i];
    spec->end[a] = pads[n + i];
  }
  for (int64_t a = 0; a < rank; ++a) {
    if (in[a] + spec->begin[a] + spec->end[a] < 0)
      return ctx.error("pads shrink axis " + Str(a) + " below zero");
    if (spec->mode != PadMode::kConstant && in[a] == 0 && spec->begin[a] + spec->end[a] > 0)
      return ctx.error("cannot " + mode + "-pad an empty axis");
  }
  return OkStatus();
}

Status InferPad(InferContext& ctx) {
  DType dt = ctx.input_dtype(0);
  if (DTypeSize(dt) == 0) return ctx.error("unsupported dtype " + std::string(DTypeName(dt)));
  PadSpec spec;
  bool known;
  KILN_RETURN_IF_ERROR(PadParams(ctx, ctx.input_dims(0), dt, &spec, &known));
  if (!known) {
    ctx.set_output_dynamic(0, dt);
    return OkStatus();
  }
  Dims out = ctx.input_dims(0);
  for (size_t a = 0; a < out.size(); ++a) out[a] += spec.begin[a] + spec.end[a];
  ctx.set_output(0, dt, out);
  return OkStatus();
}

Status ComputePad(ComputeContext& ctx) {
  const Tensor& in = ctx.input(0);
  PadSpec spec;
  bool known;
  KILN_RETURN_IF_ERROR(PadParams(ctx, in.dims(), in.dtype(), &spec, &known));
  if (!known) return ctx.error("pads unknown");
  PadKernel(in, ctx.output(0), spec.begin, spec.mode, spec.fill.data());
  return OkStatus();
}

// ---- CenterCropPad --------------------------------------------------------------------------

// Target dims of the output and the begin pad per axis (negative when cropping).
template <class Ctx>
Status CropPadParams(const Ctx& ctx, const Dims& in, Dims* out, Dims* begin, bool* known) {
  const int64_t rank = static_cast<int64_t>(in.size());
  *known = true;
  if (!ctx.has_input(1)) return ctx.error("missing shape input");
  const Tensor* s = ValueOf(ctx, 1);
  if (!s) {
    *known = false;
    return OkStatus();
  }
  std::vector<int64_t> shape = s->ToInt64Vector();
  std::vector<int64_t> axes = ctx.node().attr_ints("axes");
  if (!ctx.node().attr("axes"))
    for (int64_t i = 0; i < rank; ++i) axes.push_back(i);
  if (shape.size() != axes.size())
    return ctx.error("shape has " + Str(shape.size()) + " values for " + Str(axes.size()) +
                     " axes");
  *out = in;
  begin->assign(rank, 0);
  std::vector<char> seen(rank, 0);
  for (size_t i = 0; i < axes.size(); ++i) {
    int64_t a = axes[i];
    if (!NormalizeAxis(a, rank)) return ctx.error("axis " + Str(axes[i]) + " out of range");
    if (seen[a]) return ctx.error("axis " + Str(axes[i]) + " repeated");
    seen[a] = 1;
    int64_t t = shape[i], d = in[a];
    if (t < 0) return ctx.error("shape has negative dim " + Str(t));
    (*out)[a] = t;
    (*begin)[a] = t >= d ? (t - d) / 2 : -((d - t) / 2);
  }
  return OkStatus();
}

Status InferCenterCropPad(InferContext& ctx) {
  DType dt = ctx.input_dtype(0);
  if (DTypeSize(dt) == 0) return ctx.error("unsupported dtype " + std::string(DTypeName(dt)));
  Dims out, begin;
  bool known;
  KILN_RETURN_IF_ERROR(CropPadParams(ctx, ctx.input_dims(0), &out, &begin, &known));
  if (!known)
    ctx.set_output_dynamic(0, dt);
  else
    ctx.set_output(0, dt, out);
  return OkStatus();
}

Status ComputeCenterCropPad(ComputeContext& ctx) {
  const Tensor& in = ctx.input(0);
  Dims out, begin;
  bool known;
  KILN_RETURN_IF_ERROR(CropPadParams(ctx, in.dims(), &out, &begin, &known));
  if (!known) return ctx.error("shape unknown");
  std::vector<uint8_t> zero(DTypeSize(in.dtype()), 0);
  PadKernel(in, ctx.output(0), begin, PadMode::kConstant, zero.data());
  return OkStatus();
}

}  // namespace

void RegisterSlicePadOps(OpRegistry& r) {
  r.Register("Slice", InferSlice, ComputeSlice);
  r.Register("Pad", InferPad, ComputePad);
  r.Register("CenterCropPad", InferCenterCropPad, ComputeCenterCropPad);
}

}  // namespace kiln::ops
