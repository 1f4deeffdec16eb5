// Quantization ops: QuantizeLinear, DequantizeLinear and DynamicQuantizeLinear (the integer
// matmul / conv family is ops/quantize_integer.cc).
// Rounding follows the ONNX reference: round half to even (std::nearbyint), then saturate.
// The narrow floats quantize by a cast (ir/small_float.h: round to nearest even, Cast's
// saturation); the sub-byte integers as the others, held a byte each (ir/subbyte.h).
#include "ops/quantize.h"

#include <algorithm>
#include <limits>
#include <string>
#include <vector>

#include "ir/small_float.h"
#include "ir/subbyte.h"
#include "kernels/x86/quantize_kernels.h"
#include "kernels/x86/thread_pool.h"
#include "ops/common.h"

namespace kiln::ops {

void QuantRange(DType t, double* lo, double* hi) {
  switch (t) {
    case DType::kInt8:
      *lo = -128;
      *hi = 127;
      break;
    case DType::kUInt8:
      *lo = 0;
      *hi = 255;
      break;
    case DType::kInt16:
      *lo = -32768;
      *hi = 32767;
      break;
    case DType::kUInt16:
      *lo = 0;
      *hi = 65535;
      break;
    case DType::kInt32:
      *lo = -2147483648.0;
      *hi = 2147483647.0;
      break;
    default:
      *lo = 0;
      *hi = 0;
      if (IsSubByteIntDType(t)) {
        int64_t l, h;
        SubByteIntRange(t, &l, &h);
        *lo = static_cast<double>(l);
        *hi = static_cast<double>(h);
      }
  }
}

double RoundSaturate(double v, double lo, double hi) {
  if (std::isnan(v)) v = 0;
  v = std::nearbyint(v);
  return v < lo ? lo : (v > hi ? hi : v);
}

double RequantMultiplier(const Tensor& as, int64_t ai, const Tensor& bs, int64_t bi,
                         const Tensor& ys) {
  double a = as.GetDouble(ai), b = bs.GetDouble(bi), y = ys.GetDouble(0);
  switch (as.dtype()) {
    case DType::kFloat16:
      return Float16(static_cast<float>(Float16(float(a * b))) / float(y));
    case DType::kBFloat16:
      return BFloat16(static_cast<float>(BFloat16(float(a * b))) / float(y));
    case DType::kFloat32:
      return static_cast<float>(static_cast<float>(a * b) / float(y));
    default:
      return a * b / y;
  }
}

int32_t ZeroPointAt(const Tensor* zp, int64_t i) {
  return zp ? static_cast<int32_t>(zp->GetInt(zp->size() == 1 ? 0 : i)) : 0;
}

namespace {

bool IsQuantType(DType t) {
  return t == DType::kInt8 || t == DType::kUInt8 || t == DType::kInt16 || t == DType::kUInt16 ||
         IsSubByteIntDType(t);
}

// The type an integer tensor's elements are held in (a sub-byte type's byte).
DType HeldAs(DType t) { return IsSubByteIntDType(t) ? SubByteStorage(t) : t; }

std::string TypeName(DType t) { return std::string(DTypeName(t)); }

// Where the scale / zero-point element of each x element lives: per-tensor, per-axis or
// blocked along `axis`. x is viewed as [outer, n_axis, inner].
struct QuantLayout {
  int64_t outer = 1, n_axis = 1, inner = 1;
  int kind = 0;  // 0 per-tensor, 1 per-axis, 2 blocked
  int64_t block = 1, n_blocks = 1;
  int64_t Index(int64_t o, int64_t a, int64_t i) const {
    if (kind == 0) return 0;
    if (kind == 1) return a;
    return (o * n_blocks + a / block) * inner + i;
  }
};

// Returns "" or the reason the scale shape does not fit x.
std::string MakeLayout(const Dims& x, const Dims& scale, int64_t axis, int64_t block_size,
                       QuantLayout* l) {
  const int64_t rank = static_cast<int64_t>(x.size());
  if (NumElements(scale) == 1 && (block_size <= 0 || scale.size() <= 1)) {
    l->kind = 0;
    l->outer = NumElements(x);
    return "";
  }
  if (!NormalizeAxis(axis, rank)) return "axis " + std::to_string(axis) + " is out of range";
  l->outer = 1;
  l->inner = 1;
  for (int64_t d = 0; d < axis; ++d) l->outer *= x[d];
  for (int64_t d = axis + 1; d < rank; ++d) l->inner *= x[d];
  l->n_axis = x[axis];
  if (block_size <= 0) {
    if (scale.size() != 1 || scale[0] != x[axis])
      return "per-axis scale must be 1-D with " + std::to_string(x[axis]) + " elements, got " +
             DimsToString(scale);
    l->kind = 1;
    return "";
  }
  if (static_cast<int64_t>(scale.size()) != rank) return "blocked scale must have the rank of x";
  int64_t nb = (x[axis] + block_size - 1) / block_size;
  for (int64_t d = 0; d < rank; ++d) {
    int64_t want = d == axis ? nb : x[d];
    if (scale[d] != want)
      return "blocked scale shape " + DimsToString(scale) + " does not match x " + DimsToString(x) +
             " with block_size " + std::to_string(block_size);
  }
  l->kind = 2;
  l->block = block_size;
  l->n_blocks = nb;
  return "";
}

// Reads element i of a numeric tensor as double.
template <class T>
inline double D(const T* p, int64_t i) {
  return static_cast<double>(static_cast<Acc<T>>(p[i]));
}

// ---------------------------------------------------------------- QuantizeLinear

Status QuantizeOutType(const ir::Node& node, bool has_zp, DType zp_type, int64_t opset, DType* out,
                       const std::function<Status(const std::string&)>& err) {
  int64_t od = opset >= 21 ? node.attr_int("output_dtype", 0) : 0;
  DType t = DType::kUInt8;
  if (has_zp) {
    t = zp_type;
    if (od != 0 && static_cast<DType>(od) != zp_type)
      return err("output_dtype " + std::to_string(od) + " differs from the zero point type");
  } else if (od != 0) {
    t = static_cast<DType>(od);
  }
  if (!IsQuantType(t) && !IsSmallFloatDType(t))
    return err("quantized type " + TypeName(t) + " is not supported");
  *out = t;
  return OkStatus();
}

// QuantizeLinear's and DequantizeLinear's scale (and zero point) against x: per tensor, per axis
// or in blocks along it (opset 21).
Status CheckScaleLayout(InferContext& ctx) {
  QuantLayout l;
  int64_t bs = ctx.opset() >= 21 ? ctx.node().attr_int("block_size", 0) : 0;
  if (bs < 0) return ctx.error("block_size must be >= 0");
  std::string m =
      MakeLayout(ctx.input_dims(0), ctx.input_dims(1), ctx.node().attr_int("axis", 1), bs, &l);
  if (!m.empty()) return ctx.error(m);
  if (ctx.has_input(2) && ctx.input_dims(2) != ctx.input_dims(1) &&
      !(NumElements(ctx.input_dims(2)) == 1 && NumElements(ctx.input_dims(1)) == 1))
    return ctx.error("zero point shape differs from scale shape");
  return OkStatus();
}

Status QuantizeInfer(InferContext& ctx) {
  if (ctx.num_inputs() < 2 || !ctx.has_input(0) || !ctx.has_input(1))
    return ctx.error("needs x and y_scale");
  DType xt = ctx.input_dtype(0);
  if (!IsFloatingDType(xt) && xt != DType::kInt32)
    return ctx.error("x must be float or int32, got " + TypeName(xt));
  DType out = DType::kUndefined;
  auto err = [&](const std::string& m) { return ctx.error(m); };
  KILN_RETURN_IF_ERROR(QuantizeOutType(ctx.node(), ctx.has_input(2),
                                       ctx.has_input(2) ? ctx.input_dtype(2) : DType::kUndefined,
                                       ctx.opset(), &out, err));
  KILN_RETURN_IF_ERROR(CheckScaleLayout(ctx));
  ctx.set_output(0, out, ctx.input_dims(0));
  return OkStatus();
}

// Divides in the precision numpy would use: x's type for float inputs (rounded to it), double
// for int32 inputs.
template <class X, class S>
double QuantDivide(X x, S s) {
  if constexpr (std::is_integral_v<X>) {
    return static_cast<double>(x) / static_cast<double>(static_cast<Acc<S>>(s));
  } else if constexpr (std::is_same_v<X, double> || std::is_same_v<S, double>) {
    return static_cast<double>(static_cast<Acc<X>>(x)) /
           static_cast<double>(static_cast<Acc<S>>(s));
  } else if constexpr (std::is_same_v<X, S>) {
    return static_cast<double>(
        static_cast<Acc<X>>(X(static_cast<float>(x) / static_cast<float>(s))));
  } else {
    return static_cast<double>(static_cast<float>(x) / static_cast<float>(s));
  }
}

// Runs fn(e0, e1, si) over [0, size) of x in runs that share scale element si (per-tensor or
// per-axis layouts), over up to `threads` threads for large tensors.
template <class F>
void ForEachScaleRun(const QuantLayout& l, int64_t size, int threads, F&& fn) {
  const int t = static_cast<int>(std::min<int64_t>(threads, size / (64 << 10) + 1));
  if (l.kind == 0) {
    ParallelFor(t, t, [&](int64_t c0, int64_t c1) { fn(c0 * size / t, c1 * size / t, 0); });
    return;
  }
  ParallelFor(t, l.outer * l.n_axis, [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) fn(r * l.inner, (r + 1) * l.inner, r % l.n_axis);
  });
}

// float32 x and scale, default precision, an 8- or 16-bit y, one scale per tensor or per axis:
// the vectorized kernel (kernels/x86/quantize_kernels.h). False: not this case.
bool QuantizeFast(ComputeContext& ctx, const QuantLayout& l, int64_t precision) {
  const Tensor& x = ctx.input(0);
  const Tensor& s = ctx.input(1);
  const Tensor* zp = ctx.has_input(2) ? &ctx.input(2) : nullptr;
  Tensor& y = ctx.output(0);
  if (x.dtype() != DType::kFloat32 || s.dtype() != DType::kFloat32 || l.kind == 2 ||
      (precision != 0 && precision != static_cast<int64_t>(DType::kFloat32)) ||
      !IsSmallQuantType(y.dtype()))
    return false;
  const size_t bytes = DTypeSize(y.dtype());
  ForEachScaleRun(l, x.size(), ctx.threads(), [&](int64_t e0, int64_t e1, int64_t si) {
    QuantizeF32(x.data<float>() + e0, e1 - e0, s.data<float>()[si], ZeroPointAt(zp, si), y.dtype(),
                static_cast<char*>(y.raw()) + e0 * bytes);
  });
  return true;
}

Status QuantizeCompute(ComputeContext& ctx) {
  const Tensor& x = ctx.input(0);
  const Tensor& s = ctx.input(1);
  const Tensor* zp = ctx.has_input(2) ? &ctx.input(2) : nullptr;
  Tensor& y = ctx.output(0);
  QuantLayout l;
  int64_t bs = ctx.opset() >= 21 ? ctx.node().attr_int("block_size", 0) : 0;
  std::string m = MakeLayout(x.dims(), s.dims(), ctx.node().attr_int("axis", 1), bs, &l);
  if (!m.empty()) return ctx.error(m);
  int64_t precision = ctx.opset() >= 23 ? ctx.node().attr_int("precision", 0) : 0;
  if (QuantizeFast(ctx, l, precision)) return OkStatus();
  double lo, hi;
  QuantRange(y.dtype(), &lo, &hi);
  std::vector<double> q(x.size());
  bool ok = Dispatch<kFloatTypes | kSignedIntTypes>(x.dtype(), [&]<class X>() {
    Dispatch<kFloatTypes>(s.dtype(), [&]<class S>() {
      const X* xp = x.data<X>();
      const S* sp = s.data<S>();
      for (int64_t o = 0, e = 0; o < l.outer; ++o)
        for (int64_t a = 0; a < l.n_axis; ++a)
          for (int64_t i = 0; i < l.inner; ++i, ++e) {
            int64_t si = l.Index(o, a, i);
            double v;
            if (precision == static_cast<int64_t>(DType::kFloat32))
              v = static_cast<float>(D(xp, e)) / static_cast<float>(D(sp, si));
            else if (precision == static_cast<int64_t>(DType::kFloat64))
              v = D(xp, e) / D(sp, si);
            else if (precision == static_cast<int64_t>(DType::kFloat16))
              v = static_cast<float>(
                  Float16(static_cast<float>(Float16(static_cast<float>(D(xp, e)))) /
                          static_cast<float>(Float16(static_cast<float>(D(sp, si))))));
            else if (precision == static_cast<int64_t>(DType::kBFloat16))
              v = static_cast<float>(
                  BFloat16(static_cast<float>(BFloat16(static_cast<float>(D(xp, e)))) /
                           static_cast<float>(BFloat16(static_cast<float>(D(sp, si))))));
            else
              v = QuantDivide(xp[e], sp[si]);
            q[e] = v;
          }
    });
  });
  if (!ok || !IsFloatingDType(s.dtype())) return ctx.error("unsupported input types");
  auto zero = [&](int64_t si) { return zp ? zp->GetDouble(zp->size() == 1 ? 0 : si) : 0.0; };
  if (IsSmallFloatDType(y.dtype())) {  // a cast of x / scale + zero point, no integer rounding
    const bool saturate = ctx.node().attr_int("saturate", 1) != 0;
    uint8_t* yp = y.data<uint8_t>();
    for (int64_t o = 0, e = 0; o < l.outer; ++o)
      for (int64_t a = 0; a < l.n_axis; ++a)
        for (int64_t i = 0; i < l.inner; ++i, ++e)
          yp[e] = FloatToSmallFloat(y.dtype(), static_cast<float>(q[e] + zero(l.Index(o, a, i))),
                                    saturate);
    return OkStatus();
  }
  Dispatch<kIntTypes>(HeldAs(y.dtype()), [&]<class Q>() {
    Q* yp = y.data<Q>();
    for (int64_t o = 0, e = 0; o < l.outer; ++o)
      for (int64_t a = 0; a < l.n_axis; ++a)
        for (int64_t i = 0; i < l.inner; ++i, ++e) {
          double v = std::isnan(q[e]) ? 0 : std::nearbyint(q[e]);
          yp[e] = static_cast<Q>(RoundSaturate(v + zero(l.Index(o, a, i)), lo, hi));
        }
  });
  return OkStatus();
}

// ---------------------------------------------------------------- DequantizeLinear

Status DequantizeInfer(InferContext& ctx) {
  if (ctx.num_inputs() < 2 || !ctx.has_input(0) || !ctx.has_input(1))
    return ctx.error("needs x and x_scale");
  DType xt = ctx.input_dtype(0);
  if (!IsQuantType(xt) && xt != DType::kInt32 && !IsSmallFloatDType(xt))
    return ctx.error("x type " + TypeName(xt) + " is not supported");
  if (ctx.has_input(2) && ctx.input_dtype(2) != xt)
    return ctx.error("zero point type differs from x type");
  DType st = ctx.input_dtype(1);
  if (!IsFloatingDType(st)) return ctx.error("x_scale must be a float tensor");
  int64_t od = ctx.opset() >= 23 ? ctx.node().attr_int("output_dtype", 0) : 0;
  DType out = od ? static_cast<DType>(od) : st;
  if (!IsFloatingDType(out)) return ctx.error("output_dtype must be a float type");
  KILN_RETURN_IF_ERROR(CheckScaleLayout(ctx));
  ctx.set_output(0, out, ctx.input_dims(0));
  return OkStatus();
}

Status DequantizeCompute(ComputeContext& ctx) {
  const Tensor& x = ctx.input(0);
  const Tensor& s = ctx.input(1);
  const Tensor* zp = ctx.has_input(2) ? &ctx.input(2) : nullptr;
  Tensor& y = ctx.output(0);
  QuantLayout l;
  int64_t bs = ctx.opset() >= 21 ? ctx.node().attr_int("block_size", 0) : 0;
  std::string m = MakeLayout(x.dims(), s.dims(), ctx.node().attr_int("axis", 1), bs, &l);
  if (!m.empty()) return ctx.error(m);
  if (IsSmallQuantType(x.dtype()) && s.dtype() == DType::kFloat32 && y.dtype() == DType::kFloat32 &&
      l.kind != 2) {
    const size_t bytes = DTypeSize(x.dtype());
    ForEachScaleRun(l, x.size(), ctx.threads(), [&](int64_t e0, int64_t e1, int64_t si) {
      DequantizeToF32(static_cast<const char*>(x.raw()) + e0 * bytes, x.dtype(), e1 - e0,
                      ZeroPointAt(zp, si), s.data<float>()[si], y.data<float>() + e0);
    });
    return OkStatus();
  }
  const bool dbl = s.dtype() == DType::kFloat64;
  if (IsSmallFloatDType(x.dtype())) {
    const uint8_t* xp = x.data<uint8_t>();
    Dispatch<kFloatTypes>(y.dtype(), [&]<class Y>() {
      Y* yp = y.data<Y>();
      for (int64_t o = 0, e = 0; o < l.outer; ++o)
        for (int64_t a = 0; a < l.n_axis; ++a)
          for (int64_t i = 0; i < l.inner; ++i, ++e) {
            int64_t si = l.Index(o, a, i);
            const float z = zp ? static_cast<float>(zp->GetDouble(zp->size() == 1 ? 0 : si)) : 0;
            const float sc = static_cast<float>(s.GetDouble(s.size() == 1 ? 0 : si));
            yp[e] = ConvertValue<Y>((SmallFloatToFloat(x.dtype(), xp[e]) - z) * sc);
          }
    });
    return OkStatus();
  }
  Dispatch<kIntTypes>(HeldAs(x.dtype()), [&]<class X>() {
    Dispatch<kFloatTypes>(y.dtype(), [&]<class Y>() {
      const X* xp = x.data<X>();
      Y* yp = y.data<Y>();
      for (int64_t o = 0, e = 0; o < l.outer; ++o)
        for (int64_t a = 0; a < l.n_axis; ++a)
          for (int64_t i = 0; i < l.inner; ++i, ++e) {
            int64_t si = l.Index(o, a, i);
            double z = zp ? zp->GetDouble(zp->size() == 1 ? 0 : si) : 0.0;
            double sc = s.GetDouble(s.size() == 1 ? 0 : si);
            // The reference computes in float32 (double only for double scales).
            double v =
                dbl ? (static_cast<double>(xp[e]) - z) * sc
                    : static_cast<double>((static_cast<float>(xp[e]) - static_cast<float>(z)) *
                                          static_cast<float>(sc));
            yp[e] = ConvertValue<Y>(v);
          }
    });
  });
  return OkStatus();
}

// ---------------------------------------------------------------- DynamicQuantizeLinear

Status DynQuantInfer(InferContext& ctx) {
  if (!ctx.has_input(0) || ctx.input_dtype(0) != DType::kFloat32)
    return ctx.error("x must be float32");
  ctx.set_output(0, DType::kUInt8, ctx.input_dims(0));
  if (ctx.num_outputs() > 1) ctx.set_output(1, DType::kFloat32, {});
  if (ctx.num_outputs() > 2) ctx.set_output(2, DType::kUInt8, {});
  return OkStatus();
}

// The smallest and largest of 0 and x's n values, and whether x holds a NaN, over up to
// `threads` slices.
void ParallelMinMax(const float* x, int64_t n, int threads, float* lo, float* hi, bool* nan) {
  const int t = static_cast<int>(std::clamp<int64_t>(n / (32 << 10), 1, threads));
  std::vector<float> los(t, 0.0f), his(t, 0.0f);
  std::vector<char> nans(t, 0);
  ParallelFor(t, t, [&](int64_t p0, int64_t p1) {
    for (int64_t p = p0; p < p1; ++p) {
      bool has_nan = false;
      const int64_t b = p * n / t, e = (p + 1) * n / t;
      MinMaxF32(x + b, e - b, &los[p], &his[p], &has_nan);
      nans[p] = has_nan;
    }
  });
  *lo = *std::min_element(los.begin(), los.end());
  *hi = *std::max_element(his.begin(), his.end());
  *nan = std::any_of(nans.begin(), nans.end(), [](char c) { return c != 0; });
}

Status DynQuantCompute(ComputeContext& ctx) {
  const Tensor& x = ctx.input(0);
  const float* xp = x.data<float>();
  float mx = 0, mn = 0;
  bool nan = false;
  ParallelMinMax(xp, x.size(), ctx.threads(), &mn, &mx, &nan);
  float scale = mx == mn ? 1.0f : (mx - mn) / 255.0f;
  float zp0 = 0.0f - mn / scale;
  float zp = std::nearbyint(std::max(0.0f, std::min(255.0f, zp0)));
  uint8_t* yp = ctx.output(0).data<uint8_t>();
  // The reference's NaN becomes 0, where QuantizeF32 gives the zero point.
  if (!nan)
    ParallelSlices(ctx.threads(), x.size(), 32 << 10, [&](int64_t b, int64_t e) {
      QuantizeF32(xp + b, e - b, scale, static_cast<int32_t>(zp), DType::kUInt8, yp + b);
    });
  for (int64_t i = 0; nan && i < x.size(); ++i) {
    float v = std::nearbyint(xp[i] / scale) + zp;
    if (std::isnan(v)) v = 0;
    yp[i] = static_cast<uint8_t>(std::max(0.0f, std::min(255.0f, v)));
  }
  if (ctx.num_outputs() > 1) ctx.output(1).data<float>()[0] = scale;
  if (ctx.num_outputs() > 2) ctx.output(2).data<uint8_t>()[0] = static_cast<uint8_t>(zp);
  return OkStatus();
}

}  // namespace

void RegisterQuantizeOps(OpRegistry& r) {
  r.Register("QuantizeLinear", QuantizeInfer, QuantizeCompute);
  r.Register("DequantizeLinear", DequantizeInfer, DequantizeCompute);
  r.Register("DynamicQuantizeLinear", DynQuantInfer, DynQuantCompute);
}

}  // namespace kiln::ops
