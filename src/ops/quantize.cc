// Quantization ops: QuantizeLinear, DequantizeLinear, DynamicQuantizeLinear, and the integer
// matmul/conv family (MatMulInteger, ConvInteger, QLinearMatMul, QLinearConv).
// Rounding follows the ONNX reference: round half to even (std::nearbyint), then saturate.
// float8 / int4 / int2 / float4 are not representable in kiln's Tensor and are rejected.
#include <limits>
#include <string>

#include "ops/common.h"

namespace kiln::ops {
namespace {

bool IsQuantType(DType t) {
  return t == DType::kInt8 || t == DType::kUInt8 || t == DType::kInt16 || t == DType::kUInt16;
}

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
  }
}

// Round half to even, then saturate into [lo, hi]. NaN maps to 0 (before the zero point).
double RoundSaturate(double v, double lo, double hi) {
  if (std::isnan(v)) v = 0;
  v = std::nearbyint(v);
  return v < lo ? lo : (v > hi ? hi : v);
}

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
  if (!IsQuantType(t)) return err("quantized type " + TypeName(t) + " is not supported");
  *out = t;
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
  QuantLayout l;
  int64_t bs = ctx.opset() >= 21 ? ctx.node().attr_int("block_size", 0) : 0;
  if (bs < 0) return ctx.error("block_size must be >= 0");
  std::string m =
      MakeLayout(ctx.input_dims(0), ctx.input_dims(1), ctx.node().attr_int("axis", 1), bs, &l);
  if (!m.empty()) return ctx.error(m);
  if (ctx.has_input(2) && ctx.input_dims(2) != ctx.input_dims(1) &&
      !(NumElements(ctx.input_dims(2)) == 1 && NumElements(ctx.input_dims(1)) == 1))
    return ctx.error("zero point shape differs from scale shape");
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
  Dispatch<kIntTypes>(y.dtype(), [&]<class Q>() {
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
  if (!IsQuantType(xt) && xt != DType::kInt32)
    return ctx.error("x type " + TypeName(xt) + " is not supported");
  if (ctx.has_input(2) && ctx.input_dtype(2) != xt)
    return ctx.error("zero point type differs from x type");
  DType st = ctx.input_dtype(1);
  if (!IsFloatingDType(st)) return ctx.error("x_scale must be a float tensor");
  int64_t od = ctx.opset() >= 23 ? ctx.node().attr_int("output_dtype", 0) : 0;
  DType out = od ? static_cast<DType>(od) : st;
  if (!IsFloatingDType(out)) return ctx.error("output_dtype must be a float type");
  QuantLayout l;
  int64_t bs = ctx.opset() >= 21 ? ctx.node().attr_int("block_size", 0) : 0;
  if (bs < 0) return ctx.error("block_size must be >= 0");
  std::string m =
      MakeLayout(ctx.input_dims(0), ctx.input_dims(1), ctx.node().attr_int("axis", 1), bs, &l);
  if (!m.empty()) return ctx.error(m);
  if (ctx.has_input(2) && ctx.input_dims(2) != ctx.input_dims(1) &&
      !(NumElements(ctx.input_dims(2)) == 1 && NumElements(ctx.input_dims(1)) == 1))
    return ctx.error("zero point shape differs from scale shape");
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
  const bool dbl = s.dtype() == DType::kFloat64;
  Dispatch<kIntTypes>(x.dtype(), [&]<class X>() {
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

Status DynQuantCompute(ComputeContext& ctx) {
  const Tensor& x = ctx.input(0);
  const float* xp = x.data<float>();
  float mx = 0, mn = 0;
  for (int64_t i = 0; i < x.size(); ++i) {
    mx = std::max(mx, xp[i]);
    mn = std::min(mn, xp[i]);
  }
  float scale = mx == mn ? 1.0f : (mx - mn) / 255.0f;
  float zp0 = 0.0f - mn / scale;
  float zp = std::nearbyint(std::max(0.0f, std::min(255.0f, zp0)));
  uint8_t* yp = ctx.output(0).data<uint8_t>();
  for (int64_t i = 0; i < x.size(); ++i) {
    float v = std::nearbyint(xp[i] / scale) + zp;
    if (std::isnan(v)) v = 0;
    yp[i] = static_cast<uint8_t>(std::max(0.0f, std::min(255.0f, v)));
  }
  if (ctx.num_outputs() > 1) ctx.output(1).data<float>()[0] = scale;
  if (ctx.num_outputs() > 2) ctx.output(2).data<uint8_t>()[0] = static_cast<uint8_t>(zp);
  return OkStatus();
}

// ---------------------------------------------------------------- integer matmul

// Batched matmul geometry with numpy broadcasting and 1-D promotion.
struct MatMulShape {
  int64_t m = 1, k = 1, n = 1;
  Dims batch, out;
  Dims a_batch_strides, b_batch_strides;  // in matrices, per batch dim
};

std::string MakeMatMulShape(const Dims& a, const Dims& b, MatMulShape* s) {
  if (a.empty() || b.empty()) return "matmul inputs must have rank >= 1";
  Dims a2 = a, b2 = b;
  if (a2.size() == 1) a2.insert(a2.begin(), 1);
  if (b2.size() == 1) b2.push_back(1);
  s->m = a2[a2.size() - 2];
  s->k = a2.back();
  s->n = b2.back();
  if (b2[b2.size() - 2] != s->k)
    return "inner dimensions differ: " + DimsToString(a) + " x " + DimsToString(b);
  Dims ab(a2.begin(), a2.end() - 2), bb(b2.begin(), b2.end() - 2);
  if (!BroadcastDims(ab, bb, &s->batch))
    return "batch dimensions do not broadcast: " + DimsToString(a) + " x " + DimsToString(b);
  s->a_batch_strides = BroadcastStrides(ab, s->batch);
  s->b_batch_strides = BroadcastStrides(bb, s->batch);
  s->out = s->batch;
  if (a.size() > 1) s->out.push_back(s->m);
  if (b.size() > 1) s->out.push_back(s->n);
  return "";
}

// C[m,n] (int32, accumulated) += A[m,k] * B[k,n]; i-k-j order so the inner loop vectorizes.
void GemmInt32(const int32_t* a, const int32_t* b, int32_t* c, int64_t m, int64_t k, int64_t n) {
  for (int64_t i = 0; i < m; ++i) {
    int32_t* crow = c + i * n;
    for (int64_t p = 0; p < k; ++p) {
      const int32_t av = a[i * k + p];
      if (av == 0) continue;
      const int32_t* brow = b + p * n;
      for (int64_t j = 0; j < n; ++j) crow[j] += av * brow[j];
    }
  }
}

// Per-row (A) or per-column (B) zero points: size 1, or the matching dimension's size.
std::string ZeroPoints(const Tensor* zp, int64_t count, const char* what,
                       std::vector<int32_t>* out) {
  out->assign(count, 0);
  if (!zp) return "";
  if (zp->size() == 1) {
    std::fill(out->begin(), out->end(), static_cast<int32_t>(zp->GetInt(0)));
  } else if (zp->size() == count) {
    for (int64_t i = 0; i < count; ++i) (*out)[i] = static_cast<int32_t>(zp->GetInt(i));
  } else {
    return std::string(what) + " zero point must have 1 or " + std::to_string(count) +
           " elements, got " + DimsToString(zp->dims());
  }
  return "";
}

// Computes int32 (A - a_zp) x (B - b_zp) for all batches into `out` (size batch*m*n).
Status IntMatMul(ComputeContext& ctx, const Tensor& a, const Tensor* azp, const Tensor& b,
                 const Tensor* bzp, const MatMulShape& s, std::vector<int32_t>* out) {
  std::vector<int32_t> za, zb;
  std::string m = ZeroPoints(azp, s.m, "a", &za);
  if (m.empty()) m = ZeroPoints(bzp, s.n, "b", &zb);
  if (!m.empty()) return ctx.error(m);
  const int64_t nb = NumElements(s.batch);
  out->assign(nb * s.m * s.n, 0);
  std::vector<int32_t> am(s.m * s.k), bm(s.k * s.n);
  std::vector<int64_t> idx(s.batch.size(), 0);
  for (int64_t bi = 0; bi < nb; ++bi) {
    int64_t ao = 0, bo = 0;
    for (size_t d = 0; d < idx.size(); ++d) {
      ao += idx[d] * s.a_batch_strides[d];
      bo += idx[d] * s.b_batch_strides[d];
    }
    for (int64_t i = 0; i < s.m * s.k; ++i)
      am[i] = static_cast<int32_t>(a.GetInt(ao * s.m * s.k + i)) - za[i / s.k];
    for (int64_t i = 0; i < s.k * s.n; ++i)
      bm[i] = static_cast<int32_t>(b.GetInt(bo * s.k * s.n + i)) - zb[i % s.n];
    GemmInt32(am.data(), bm.data(), out->data() + bi * s.m * s.n, s.m, s.k, s.n);
    for (int d = static_cast<int>(idx.size()) - 1; d >= 0; --d) {
      if (++idx[d] < s.batch[d]) break;
      idx[d] = 0;
    }
  }
  return OkStatus();
}

bool Is8Bit(DType t) { return t == DType::kInt8 || t == DType::kUInt8; }

Status MatMulIntegerInfer(InferContext& ctx) {
  if (!ctx.has_input(0) || !ctx.has_input(1)) return ctx.error("needs A and B");
  if (!Is8Bit(ctx.input_dtype(0)) || !Is8Bit(ctx.input_dtype(1)))
    return ctx.error("A and B must be int8 or uint8");
  MatMulShape s;
  std::string m = MakeMatMulShape(ctx.input_dims(0), ctx.input_dims(1), &s);
  if (!m.empty()) return ctx.error(m);
  ctx.set_output(0, DType::kInt32, s.out);
  return OkStatus();
}

Status MatMulIntegerCompute(ComputeContext& ctx) {
  MatMulShape s;
  std::string m = MakeMatMulShape(ctx.input(0).dims(), ctx.input(1).dims(), &s);
  if (!m.empty()) return ctx.error(m);
  std::vector<int32_t> r;
  KILN_RETURN_IF_ERROR(IntMatMul(ctx, ctx.input(0), ctx.has_input(2) ? &ctx.input(2) : nullptr,
                                 ctx.input(1), ctx.has_input(3) ? &ctx.input(3) : nullptr, s, &r));
  std::copy(r.begin(), r.end(), ctx.output(0).data<int32_t>());
  return OkStatus();
}

// The requantization multiplier a_scale*b_scale/y_scale, rounded like numpy does in the scale
// type (float16 scales round each step).
double Multiplier(const Tensor& as, int64_t ai, const Tensor& bs, int64_t bi, const Tensor& ys) {
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

Status QLinearMatMulInfer(InferContext& ctx) {
  if (ctx.num_inputs() < 8) return ctx.error("needs 8 inputs");
  for (int i : {0, 1, 3, 4, 6})
    if (!ctx.has_input(i)) return ctx.error("input " + std::to_string(i) + " is required");
  if (!Is8Bit(ctx.input_dtype(0)) || !Is8Bit(ctx.input_dtype(3)))
    return ctx.error("a and b must be int8 or uint8");
  MatMulShape s;
  std::string m = MakeMatMulShape(ctx.input_dims(0), ctx.input_dims(3), &s);
  if (!m.empty()) return ctx.error(m);
  DType yt = ctx.has_input(7) ? ctx.input_dtype(7) : ctx.input_dtype(0);
  if (!Is8Bit(yt)) return ctx.error("y_zero_point must be int8 or uint8");
  ctx.set_output(0, yt, s.out);
  return OkStatus();
}

Status QLinearMatMulCompute(ComputeContext& ctx) {
  MatMulShape s;
  const Tensor& a = ctx.input(0);
  const Tensor& b = ctx.input(3);
  std::string m = MakeMatMulShape(a.dims(), b.dims(), &s);
  if (!m.empty()) return ctx.error(m);
  std::vector<int32_t> r;
  KILN_RETURN_IF_ERROR(IntMatMul(ctx, a, ctx.has_input(2) ? &ctx.input(2) : nullptr, b,
                                 ctx.has_input(5) ? &ctx.input(5) : nullptr, s, &r));
  const Tensor& as = ctx.input(1);
  const Tensor& bs = ctx.input(4);
  const Tensor& ys = ctx.input(6);
  if (as.size() != 1 && as.size() != s.m) return ctx.error("a_scale must have 1 or M elements");
  if (bs.size() != 1 && bs.size() != s.n) return ctx.error("b_scale must have 1 or N elements");
  if (ys.size() != 1) return ctx.error("y_scale must be a scalar");
  double yz = ctx.has_input(7) ? ctx.input(7).GetDouble(0) : 0.0;
  Tensor& y = ctx.output(0);
  Dispatch<kIntTypes>(y.dtype(), [&]<class Q>() {
    Q* yp = y.data<Q>();
    for (size_t e = 0; e < r.size(); ++e) {
      int64_t row = (e / s.n) % s.m, col = e % s.n;
      double mul = Multiplier(as, as.size() == 1 ? 0 : row, bs, bs.size() == 1 ? 0 : col, ys);
      // The ONNX reference (whose outputs the conformance data holds) wraps out-of-range
      // results modulo 2^bits instead of saturating as the spec text says; match it.
      double v = std::nearbyint(static_cast<double>(r[e]) * mul + yz);
      if (!(v > -9.2e18 && v < 9.2e18)) v = 0;
      yp[e] = static_cast<Q>(static_cast<int64_t>(v));
    }
  });
  return OkStatus();
}

// ---------------------------------------------------------------- integer conv

struct ConvGeom {
  int64_t n = 0, c = 0, m = 0, group = 1;
  Dims in, kernel, out, strides, dilations, pads_begin;
};

std::string MakeConvGeom(const ir::Node& node, const Dims& x, const Dims& w, ConvGeom* g) {
  if (x.size() < 3 || w.size() != x.size()) return "x and w must have the same rank >= 3";
  const size_t sp = x.size() - 2;
  g->n = x[0];
  g->c = x[1];
  g->m = w[0];
  g->group = node.attr_int("group", 1);
  if (g->group <= 0 || g->c % g->group != 0 || g->m % g->group != 0)
    return "group " + std::to_string(g->group) + " does not divide the channels";
  if (w[1] * g->group != g->c)
    return "w has " + std::to_string(w[1]) + " input channels per group, x has " +
           std::to_string(g->c) + " channels";
  g->in.assign(x.begin() + 2, x.end());
  g->kernel = node.attr_ints("kernel_shape", Dims(w.begin() + 2, w.end()));
  if (g->kernel.size() != sp) return "kernel_shape has the wrong rank";
  for (size_t i = 0; i < sp; ++i)
    if (g->kernel[i] != w[2 + i]) return "kernel_shape does not match w";
  g->strides = node.attr_ints("strides", Dims(sp, 1));
  g->dilations = node.attr_ints("dilations", Dims(sp, 1));
  Dims pads = node.attr_ints("pads", Dims(2 * sp, 0));
  if (g->strides.size() != sp || g->dilations.size() != sp || pads.size() != 2 * sp)
    return "strides, dilations or pads have the wrong length";
  std::string auto_pad = node.attr_string("auto_pad", "NOTSET");
  g->out.resize(sp);
  g->pads_begin.resize(sp);
  for (size_t i = 0; i < sp; ++i) {
    if (g->strides[i] <= 0 || g->dilations[i] <= 0) return "strides and dilations must be positive";
    int64_t ek = (g->kernel[i] - 1) * g->dilations[i] + 1;
    if (auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER") {
      int64_t o = (g->in[i] + g->strides[i] - 1) / g->strides[i];
      int64_t total = std::max<int64_t>(0, (o - 1) * g->strides[i] + ek - g->in[i]);
      g->pads_begin[i] = auto_pad == "SAME_UPPER" ? total / 2 : total - total / 2;
      g->out[i] = o;
    } else if (auto_pad == "VALID") {
      g->pads_begin[i] = 0;
      g->out[i] = (g->in[i] - ek) / g->strides[i] + 1;
    } else if (auto_pad == "NOTSET") {
      if (pads[i] < 0 || pads[i + sp] < 0) return "pads must be non-negative";
      g->pads_begin[i] = pads[i];
      g->out[i] = (g->in[i] + pads[i] + pads[i + sp] - ek) / g->strides[i] + 1;
    } else {
      return "unknown auto_pad '" + auto_pad + "'";
    }
    if (g->out[i] < 0) g->out[i] = 0;
  }
  return "";
}

Dims ConvOutDims(const ConvGeom& g) {
  Dims d = {g.n, g.m};
  d.insert(d.end(), g.out.begin(), g.out.end());
  return d;
}

// int32 convolution of (x - x_zp) with (w - w_zp) (zero padding in the shifted domain), plus
// an optional int32 bias. im2col per (image, group), then an int32 GEMM.
Status IntConv(ComputeContext& ctx, const ConvGeom& g, const Tensor& x, int32_t xzp,
               const Tensor& w, const Tensor* wzp, const Tensor* bias, std::vector<int32_t>* out) {
  const size_t sp = g.in.size();
  const int64_t cg = g.c / g.group, mg = g.m / g.group;
  const int64_t ksz = NumElements(g.kernel), osz = NumElements(g.out), isz = NumElements(g.in);
  const int64_t rows = cg * ksz;
  if (wzp && wzp->size() != 1 && wzp->size() != g.m)
    return ctx.error("w zero point must have 1 or M elements");
  if (bias && bias->size() != g.m) return ctx.error("bias must have M elements");
  std::vector<int32_t> wm(g.m * rows);
  for (int64_t i = 0; i < g.m * rows; ++i) {
    int64_t oc = i / rows;
    int32_t z = wzp ? static_cast<int32_t>(wzp->GetInt(wzp->size() == 1 ? 0 : oc)) : 0;
    wm[i] = static_cast<int32_t>(w.GetInt(i)) - z;
  }
  std::vector<int32_t> xs(x.size());
  for (int64_t i = 0; i < x.size(); ++i) xs[i] = static_cast<int32_t>(x.GetInt(i)) - xzp;
  out->assign(g.n * g.m * osz, 0);
  std::vector<int32_t> col(rows * osz);
  Dims in_strides = Strides(g.in);
  std::vector<int64_t> kidx(sp), oidx(sp);
  for (int64_t n = 0; n < g.n; ++n) {
    for (int64_t gr = 0; gr < g.group; ++gr) {
      // im2col
      for (int64_t r = 0; r < rows; ++r) {
        int64_t c = r / ksz, kk = r % ksz;
        for (int d = static_cast<int>(sp) - 1, t = static_cast<int>(kk); d >= 0; --d) {
          kidx[d] = t % g.kernel[d];
          t /= static_cast<int>(g.kernel[d]);
        }
        const int32_t* src = xs.data() + ((n * g.c) + gr * cg + c) * isz;
        int32_t* dst = col.data() + r * osz;
        std::fill(oidx.begin(), oidx.end(), 0);
        for (int64_t o = 0; o < osz; ++o) {
          int64_t off = 0;
          bool inside = true;
          for (size_t d = 0; d < sp; ++d) {
            int64_t p = oidx[d] * g.strides[d] - g.pads_begin[d] + kidx[d] * g.dilations[d];
            if (p < 0 || p >= g.in[d]) {
              inside = false;
              break;
            }
            off += p * in_strides[d];
          }
          dst[o] = inside ? src[off] : 0;
          for (int d = static_cast<int>(sp) - 1; d >= 0; --d) {
            if (++oidx[d] < g.out[d]) break;
            oidx[d] = 0;
          }
        }
      }
      int32_t* dst = out->data() + (n * g.m + gr * mg) * osz;
      GemmInt32(wm.data() + gr * mg * rows, col.data(), dst, mg, rows, osz);
    }
    if (bias)
      for (int64_t oc = 0; oc < g.m; ++oc) {
        int32_t bv = static_cast<int32_t>(bias->GetInt(oc));
        int32_t* dst = out->data() + (n * g.m + oc) * osz;
        for (int64_t o = 0; o < osz; ++o) dst[o] += bv;
      }
  }
  return OkStatus();
}

Status ConvIntegerInfer(InferContext& ctx) {
  if (!ctx.has_input(0) || !ctx.has_input(1)) return ctx.error("needs x and w");
  if (!Is8Bit(ctx.input_dtype(0)) || !Is8Bit(ctx.input_dtype(1)))
    return ctx.error("x and w must be int8 or uint8");
  ConvGeom g;
  std::string m = MakeConvGeom(ctx.node(), ctx.input_dims(0), ctx.input_dims(1), &g);
  if (!m.empty()) return ctx.error(m);
  ctx.set_output(0, DType::kInt32, ConvOutDims(g));
  return OkStatus();
}

Status ConvIntegerCompute(ComputeContext& ctx) {
  ConvGeom g;
  std::string m = MakeConvGeom(ctx.node(), ctx.input(0).dims(), ctx.input(1).dims(), &g);
  if (!m.empty()) return ctx.error(m);
  if (ctx.has_input(2) && ctx.input(2).size() != 1)
    return ctx.error("x_zero_point must be a scalar");
  int32_t xzp = ctx.has_input(2) ? static_cast<int32_t>(ctx.input(2).GetInt(0)) : 0;
  std::vector<int32_t> r;
  KILN_RETURN_IF_ERROR(IntConv(ctx, g, ctx.input(0), xzp, ctx.input(1),
                               ctx.has_input(3) ? &ctx.input(3) : nullptr, nullptr, &r));
  std::copy(r.begin(), r.end(), ctx.output(0).data<int32_t>());
  return OkStatus();
}

Status QLinearConvInfer(InferContext& ctx) {
  if (ctx.num_inputs() < 8) return ctx.error("needs at least 8 inputs");
  for (int i : {0, 1, 3, 4, 6})
    if (!ctx.has_input(i)) return ctx.error("input " + std::to_string(i) + " is required");
  if (!Is8Bit(ctx.input_dtype(0)) || !Is8Bit(ctx.input_dtype(3)))
    return ctx.error("x and w must be int8 or uint8");
  if (ctx.has_input(8) && ctx.input_dtype(8) != DType::kInt32) return ctx.error("B must be int32");
  ConvGeom g;
  std::string m = MakeConvGeom(ctx.node(), ctx.input_dims(0), ctx.input_dims(3), &g);
  if (!m.empty()) return ctx.error(m);
  DType yt = ctx.has_input(7) ? ctx.input_dtype(7) : ctx.input_dtype(0);
  if (!Is8Bit(yt)) return ctx.error("y_zero_point must be int8 or uint8");
  ctx.set_output(0, yt, ConvOutDims(g));
  return OkStatus();
}

Status QLinearConvCompute(ComputeContext& ctx) {
  ConvGeom g;
  std::string m = MakeConvGeom(ctx.node(), ctx.input(0).dims(), ctx.input(3).dims(), &g);
  if (!m.empty()) return ctx.error(m);
  if (ctx.input(1).size() != 1) return ctx.error("x_scale must be a scalar");
  if (ctx.has_input(2) && ctx.input(2).size() != 1)
    return ctx.error("x_zero_point must be a scalar");
  const Tensor& ws = ctx.input(4);
  if (ws.size() != 1 && ws.size() != g.m) return ctx.error("w_scale must have 1 or M elements");
  if (ctx.input(6).size() != 1) return ctx.error("y_scale must be a scalar");
  int32_t xzp = ctx.has_input(2) ? static_cast<int32_t>(ctx.input(2).GetInt(0)) : 0;
  std::vector<int32_t> r;
  KILN_RETURN_IF_ERROR(IntConv(ctx, g, ctx.input(0), xzp, ctx.input(3),
                               ctx.has_input(5) ? &ctx.input(5) : nullptr,
                               ctx.has_input(8) ? &ctx.input(8) : nullptr, &r));
  double yz = ctx.has_input(7) ? ctx.input(7).GetDouble(0) : 0.0;
  Tensor& y = ctx.output(0);
  double lo, hi;
  QuantRange(y.dtype(), &lo, &hi);
  const int64_t osz = NumElements(g.out);
  std::vector<double> mul(g.m);
  for (int64_t oc = 0; oc < g.m; ++oc)
    mul[oc] = Multiplier(ctx.input(1), 0, ws, ws.size() == 1 ? 0 : oc, ctx.input(6));
  Dispatch<kIntTypes>(y.dtype(), [&]<class Q>() {
    Q* yp = y.data<Q>();
    for (size_t e = 0; e < r.size(); ++e) {
      int64_t oc = (static_cast<int64_t>(e) / osz) % g.m;
      yp[e] = static_cast<Q>(RoundSaturate(static_cast<double>(r[e]) * mul[oc] + yz, lo, hi));
    }
  });
  return OkStatus();
}

}  // namespace

void RegisterQuantizeOps(OpRegistry& r) {
  r.Register("QuantizeLinear", QuantizeInfer, QuantizeCompute);
  r.Register("DequantizeLinear", DequantizeInfer, DequantizeCompute);
  r.Register("DynamicQuantizeLinear", DynQuantInfer, DynQuantCompute);
  r.Register("MatMulInteger", MatMulIntegerInfer, MatMulIntegerCompute);
  r.Register("QLinearMatMul", QLinearMatMulInfer, QLinearMatMulCompute);
  r.Register("ConvInteger", ConvIntegerInfer, ConvIntegerCompute);
  r.Register("QLinearConv", QLinearConvInfer, QLinearConvCompute);
}

}  // namespace kiln::ops
