// Variadic broadcasting ops (Sum, Mean, Max, Min), Where, Clip, Cast and CastLike.
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <string>

#include "ir/small_float.h"
#include "ir/subbyte.h"
#include "kernels/x86/thread_pool.h"
#include "kernels/x86/vector_math.h"
#include "ops/elementwise_kernels.h"

namespace kiln::ops {
namespace {

// Copies `x` broadcast to `od` into `o`. Works on raw element bytes, so one instantiation per
// element size serves every dtype.
void CopyBroadcast(const Tensor& x, void* o, const Dims& od) {
  const int64_t n = NumElements(od);
  const size_t es = DTypeSize(x.dtype());
  if (x.size() == n) {
    if (n > 0) std::memcpy(o, x.raw(), static_cast<size_t>(n) * es);
    return;
  }
  auto run = [&]<class U>() {
    const U* s = static_cast<const U*>(x.raw());
    U* d = static_cast<U*>(o);
    std::array<Dims, 1> st{BroadcastStrides(x.dims(), od)};
    ForEachBroadcast<1>(od, st,
                        [&](int64_t i, const std::array<int64_t, 1>& off) { d[i] = s[off[0]]; });
  };
  switch (es) {
    case 1:
      run.template operator()<uint8_t>();
      break;
    case 2:
      run.template operator()<uint16_t>();
      break;
    case 4:
      run.template operator()<uint32_t>();
      break;
    default:
      run.template operator()<uint64_t>();
      break;
  }
}

Status InferVariadic(InferContext& ctx, unsigned groups) {
  if (ctx.num_inputs() < 1) return ctx.error("expects at least one input");
  for (int i = 0; i < ctx.num_inputs(); ++i)
    if (!ctx.has_input(i)) return ctx.error("input " + std::to_string(i) + " is missing");
  DType t = ctx.input_dtype(0);
  if (!TypeIn(t, groups)) return UnsupportedType(ctx, t);
  Dims d = ctx.input_dims(0);
  for (int i = 1; i < ctx.num_inputs(); ++i) {
    if (ctx.input_dtype(i) != t)
      return ctx.error("input " + std::to_string(i) + " has element type " +
                       TypeName(ctx.input_dtype(i)) + ", expected " + TypeName(t));
    Dims next;
    if (!BroadcastDims(d, ctx.input_dims(i), &next))
      return ctx.error("input " + std::to_string(i) + " of shape " +
                       DimsToString(ctx.input_dims(i)) + " does not broadcast to " +
                       DimsToString(d));
    d = std::move(next);
  }
  ctx.set_output(0, t, std::move(d));
  return OkStatus();
}

// out = f(...f(f(x0, x1), x2)..., xn), all broadcast to out's dims; kMean divides at the end.
template <unsigned Groups, bool kMean, class F>
void RegVariadic(OpRegistry& r, const char* name, F f) {
  r.Register(
      name, [](InferContext& ctx) { return InferVariadic(ctx, Groups); },
      [f](ComputeContext& ctx) -> Status {
        Tensor& out = ctx.output(0);
        // The planner may run this op in place on any same-shaped input: start from that
        // input (already in the output's bytes) so nothing is overwritten before it is read.
        // The ops are commutative, so the order only changes float rounding.
        int first = 0;
        for (int k = 0; k < ctx.num_inputs(); ++k)
          if (ctx.input(k).raw() == out.raw() && out.size() > 0) first = k;
        if (ctx.input(first).raw() != out.raw())
          CopyBroadcast(ctx.input(first), out.raw(), out.dims());
        Dispatch<Groups>(out.dtype(), [&]<class T>() {
          T* o = out.data<T>();
          for (int k = 0; k < ctx.num_inputs(); ++k) {
            if (k == first) continue;
            const Tensor& x = ctx.input(k);
            BinaryLoop<T, T, T>(o, out.dims(), x.data<T>(), x.dims(), o, out.dims(), f);
          }
          if constexpr (kMean) {
            const Acc<T> inv = Acc<T>(1) / static_cast<Acc<T>>(ctx.num_inputs());
            for (int64_t i = 0; i < out.size(); ++i)
              o[i] = static_cast<T>(static_cast<Acc<T>>(o[i]) * inv);
          }
        });
        return OkStatus();
      });
}

// Max/Min propagate NaN like numpy.maximum / numpy.minimum.
template <class V>
V MaxOf(V a, V b) {
  if constexpr (std::is_floating_point_v<V>) {
    if (a != a || b != b) return a != a ? a : b;
  }
  return a > b ? a : b;
}
template <class V>
V MinOf(V a, V b) {
  if constexpr (std::is_floating_point_v<V>) {
    if (a != a || b != b) return a != a ? a : b;
  }
  return a < b ? a : b;
}

void RegisterVariadic(OpRegistry& r) {
  RegVariadic<kNumericTypes, false>(r, "Sum", []<class V>(V a, V b) -> V {
    if constexpr (std::is_integral_v<V>)
      return WrapAdd(a, b);
    else
      return a + b;
  });
  RegVariadic<kFloatTypes, true>(r, "Mean", []<class V>(V a, V b) -> V { return a + b; });
  RegVariadic<kNumericTypes, false>(r, "Max", []<class V>(V a, V b) -> V { return MaxOf(a, b); });
  RegVariadic<kNumericTypes, false>(r, "Min", []<class V>(V a, V b) -> V { return MinOf(a, b); });
}

// o[j] = c[j * sc] ? x[j * sx] : y[j * sy] for j < n, each stride 0 or 1, selected through a
// mask of the condition's bit rather than a branch (a random mask mispredicted every other
// element: 3 ns an element), in a loop the compiler vectorizes.
template <class U, bool kC, bool kX, bool kY>
void SelectLoop(const bool* __restrict c, const U* __restrict x, const U* __restrict y,
                U* __restrict o, int64_t n) {
  const auto* cb = reinterpret_cast<const uint8_t*>(c);
  for (int64_t j = 0; j < n; ++j) {
    const U m = static_cast<U>(U{0} - static_cast<U>(cb[kC ? j : 0] != 0));
    o[j] = static_cast<U>((x[kX ? j : 0] & m) | (y[kY ? j : 0] & static_cast<U>(~m)));
  }
}

// One row of Where: c, x and y read with strides step[0..2] (ForEachBroadcastRow's).
template <class U>
void SelectRow(const bool* c, const U* x, const U* y, U* o, int64_t n,
               const std::array<int64_t, 3>& step) {
  if ((step[0] | step[1] | step[2]) > 1) {  // a strided operand
    for (int64_t j = 0; j < n; ++j) o[j] = c[j * step[0]] ? x[j * step[1]] : y[j * step[2]];
    return;
  }
  using Loop = void (*)(const bool*, const U*, const U*, U*, int64_t);
  static constexpr Loop loops[8] = {
      SelectLoop<U, false, false, false>, SelectLoop<U, false, false, true>,
      SelectLoop<U, false, true, false>,  SelectLoop<U, false, true, true>,
      SelectLoop<U, true, false, false>,  SelectLoop<U, true, false, true>,
      SelectLoop<U, true, true, false>,   SelectLoop<U, true, true, true>};
  loops[step[0] * 4 + step[1] * 2 + step[2]](c, x, y, o, n);
}

void RegisterWhere(OpRegistry& r) {
  r.Register(
      "Where",
      [](InferContext& ctx) -> Status {
        if (ctx.num_inputs() != 3 || !ctx.has_input(0) || !ctx.has_input(1) || !ctx.has_input(2))
          return ctx.error("expects three inputs");
        if (ctx.input_dtype(0) != DType::kBool)
          return ctx.error("condition must be BOOL, got " + TypeName(ctx.input_dtype(0)));
        DType t = ctx.input_dtype(1);
        if (!TypeIn(t, kAllTypes)) return UnsupportedType(ctx, t, 1);
        if (ctx.input_dtype(2) != t)
          return ctx.error("X and Y have different element types " + TypeName(t) + " and " +
                           TypeName(ctx.input_dtype(2)));
        Dims d, d2;
        if (!BroadcastDims(ctx.input_dims(0), ctx.input_dims(1), &d) ||
            !BroadcastDims(d, ctx.input_dims(2), &d2))
          return ctx.error("shapes " + DimsToString(ctx.input_dims(0)) + ", " +
                           DimsToString(ctx.input_dims(1)) + " and " +
                           DimsToString(ctx.input_dims(2)) + " do not broadcast");
        ctx.set_output(0, t, std::move(d2));
        return OkStatus();
      },
      [](ComputeContext& ctx) -> Status {
        const Tensor& c = ctx.input(0);
        const Tensor& x = ctx.input(1);
        const Tensor& y = ctx.input(2);
        Tensor& out = ctx.output(0);
        const Dims& od = out.dims();
        const int64_t n = out.size();
        auto run = [&]<class U>() {
          const bool* pc = c.data<bool>();
          const U* px = static_cast<const U*>(x.raw());
          const U* py = static_cast<const U*>(y.raw());
          U* o = static_cast<U*>(out.raw());
          if (c.size() == n && x.size() == n && y.size() == n) {
            ParallelSlices(ctx.threads(), n, int64_t{1} << 16, [&](int64_t a, int64_t e) {
              SelectRow<U>(pc + a, px + a, py + a, o + a, e - a, {1, 1, 1});
            });
            return;
          }
          ForEachBroadcastRow<3>(od, {c.dims(), x.dims(), y.dims()}, ctx.threads(),
                                 [&](int64_t oo, const std::array<int64_t, 3>& off, int64_t inner,
                                     const std::array<int64_t, 3>& step) {
                                   SelectRow<U>(pc + off[0], px + off[1], py + off[2], o + oo,
                                                inner, step);
                                 });
        };
        switch (DTypeSize(x.dtype())) {
          case 1:
            run.template operator()<uint8_t>();
            break;
          case 2:
            run.template operator()<uint16_t>();
            break;
          case 4:
            run.template operator()<uint32_t>();
            break;
          default:
            run.template operator()<uint64_t>();
            break;
        }
        return OkStatus();
      });
  r.MarkWritesWholeOutputs("Where", /*types_only=*/true);
}

// Clip: bounds are the min/max attributes before opset 11, optional scalar inputs after.
void RegisterClip(OpRegistry& r) {
  r.Register(
      "Clip",
      [](InferContext& ctx) -> Status {
        if (ctx.num_inputs() < 1 || !ctx.has_input(0)) return ctx.error("expects an input");
        DType t = ctx.input_dtype(0);
        if (!TypeIn(t, kNumericTypes)) return UnsupportedType(ctx, t);
        if (ctx.opset() >= 11) {
          if (ctx.num_inputs() > 3) return ctx.error("expects at most three inputs");
          for (int i = 1; i < ctx.num_inputs(); ++i) {
            if (!ctx.has_input(i)) continue;
            if (ctx.input_dtype(i) != t)
              return ctx.error(std::string(i == 1 ? "min" : "max") + " has element type " +
                               TypeName(ctx.input_dtype(i)) + ", expected " + TypeName(t));
            if (NumElements(ctx.input_dims(i)) > 1)
              return ctx.error(std::string(i == 1 ? "min" : "max") +
                               " must be a scalar, got shape " + DimsToString(ctx.input_dims(i)));
          }
        }
        ctx.set_output(0, t, ctx.input_dims(0));
        return OkStatus();
      },
      [](ComputeContext& ctx) -> Status {
        const Tensor& x = ctx.input(0);
        Tensor& out = ctx.output(0);
        Dispatch<kNumericTypes>(x.dtype(), [&]<class T>() {
          using V = Acc<T>;
          V lo, hi;
          if constexpr (std::is_floating_point_v<V>) {
            lo = -std::numeric_limits<V>::infinity();
            hi = std::numeric_limits<V>::infinity();
          } else {
            lo = std::numeric_limits<V>::lowest();
            hi = std::numeric_limits<V>::max();
          }
          if (ctx.opset() < 11) {
            if (ctx.node().attr("min")) lo = static_cast<V>(ctx.node().attr_float("min", 0));
            if (ctx.node().attr("max")) hi = static_cast<V>(ctx.node().attr_float("max", 0));
          } else {
            if (ctx.has_input(1) && ctx.input(1).size() == 1)
              lo = static_cast<V>(ctx.input(1).data<T>()[0]);
            if (ctx.has_input(2) && ctx.input(2).size() == 1)
              hi = static_cast<V>(ctx.input(2).data<T>()[0]);
          }
          // Compare-and-replace keeps NaN; min > max yields max everywhere, as numpy.clip does.
          if constexpr (std::is_same_v<T, float>) {
            ClipF32(x.data<float>(), out.data<float>(), x.size(), lo, hi);
            return;
          }
          UnaryLoop<T, T>(x.data<T>(), out.data<T>(), x.size(), [lo, hi](V v) {
            if (v < lo) v = lo;
            if (v > hi) v = hi;
            return v;
          });
        });
        return OkStatus();
      });
}

// Cast's attributes: `saturate` (Cast-19), how values beyond a narrow float's range land, and
// `round_mode` (Cast-24), how FLOAT8E8M0 rounds (ir/small_float.h).
struct CastMode {
  bool saturate = true;
  E8M0Rounding e8m0 = E8M0Rounding::kUp;
};

// The node's CastMode; false for a round_mode that is none of up, down, nearest.
bool ReadCastMode(const ir::Node& node, CastMode* mode) {
  mode->saturate = node.attr_int("saturate", 1) != 0;
  const std::string round = node.attr_string("round_mode", "up");
  mode->e8m0 = round == "down"      ? E8M0Rounding::kDown
               : round == "nearest" ? E8M0Rounding::kNearest
                                    : E8M0Rounding::kUp;
  return round == "up" || round == "down" || round == "nearest";
}

// Casts to or from a narrow float (ir/small_float.h): a source goes through double, exact for all
// but the largest 64-bit integers, so the value is rounded once, into the target.
void CastSmallFloat(const Tensor& x, Tensor& y, const CastMode& mode, int threads) {
  const bool saturate = mode.saturate;
  const DType from = x.dtype(), to = y.dtype();
  auto slices = [&](auto&& body) { ParallelSlices(threads, x.size(), 32 << 10, body); };
  if (IsSmallFloatDType(from) && IsSmallFloatDType(to)) {
    const uint8_t* s = x.data<uint8_t>();
    uint8_t* d = y.data<uint8_t>();
    slices([&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i)
        d[i] = FloatToSmallFloat(to, SmallFloatToFloat(from, s[i]), saturate, mode.e8m0);
    });
  } else if (IsSmallFloatDType(to)) {
    uint8_t* d = y.data<uint8_t>();
    Dispatch<kAllTypes>(from, [&]<class From>() {
      const From* s = x.data<From>();
      slices([&](int64_t b, int64_t e) {
        for (int64_t i = b; i < e; ++i)
          d[i] = FloatToSmallFloat(to, CastValue<double>(s[i]), saturate, mode.e8m0);
      });
    });
  } else {
    const uint8_t* s = x.data<uint8_t>();
    Dispatch<kAllTypes>(to, [&]<class To>() {
      To* d = y.data<To>();
      slices([&](int64_t b, int64_t e) {
        for (int64_t i = b; i < e; ++i) d[i] = CastValue<To>(SmallFloatToFloat(from, s[i]));
      });
    });
  }
}

void CastTensor(const Tensor& x, Tensor& y, int threads, const CastMode& mode = {});

// A number as Cast writes it into a string: NumPy's str of the value (floats as the shortest text
// that reads back to them, booleans as True / False).
std::string NumberText(const Tensor& x, int64_t i) {
  char buf[64];
  std::to_chars_result r;
  const DType t = x.dtype();
  if (t == DType::kBool) return x.data<bool>()[i] ? "True" : "False";
  if (IsSignedIntDType(t) || IsUnsignedIntDType(t) || IsSubByteIntDType(t)) {
    if (t == DType::kUInt64) return std::to_string(x.data<uint64_t>()[i]);
    return std::to_string(x.GetInt(i));
  }
  const double v = x.GetDouble(i);
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  if (t == DType::kFloat64)
    r = std::to_chars(buf, buf + sizeof(buf), v);
  else
    r = std::to_chars(buf, buf + sizeof(buf), static_cast<float>(v));
  return std::string(buf, r.ptr);
}

// True when s holds one number that strto* read whole (surrounding whitespace allowed).
template <class T, class Parse>
bool ParseWhole(const std::string& s, Parse parse, T* v) {
  const char* begin = s.c_str();
  char* end = nullptr;
  errno = 0;
  *v = parse(begin, &end);
  return end != begin && errno != ERANGE &&
         s.find_first_not_of(" \t\n\r\f\v", static_cast<size_t>(end - begin)) == std::string::npos;
}

// Casts to or from strings: numbers parse as Python's float() reads them ("3.5", "1e-5", " inf",
// "NaN"; integer targets read integers exactly first), then convert as from int64 or double;
// every number prints as NumberText. A string that is no number is an error.
Status CastStrings(const Tensor& x, Tensor& y, const CastMode& mode) {
  if (x.is_string() && y.is_string()) {
    std::copy_n(x.strings(), x.size(), y.strings());
    return OkStatus();
  }
  if (y.is_string()) {
    for (int64_t i = 0; i < x.size(); ++i) y.strings()[i] = NumberText(x, i);
    return OkStatus();
  }
  const bool integer = IsSignedIntDType(y.dtype()) || IsUnsignedIntDType(y.dtype());
  Tensor parsed(integer ? DType::kInt64 : DType::kFloat64, x.dims());
  for (int64_t i = 0; i < x.size(); ++i) {
    const std::string& s = x.strings()[i];
    long long n;
    double d;
    auto strtoll10 = [](const char* b, char** e) { return std::strtoll(b, e, 10); };
    if (integer && ParseWhole(s, strtoll10, &n)) {
      parsed.data<int64_t>()[i] = n;
      continue;
    }
    // (strtod's ERANGE also flags underflow to a subnormal: only overflow to inf is refused.)
    if (!ParseWhole(
            s, [](const char* b, char** e) { return std::strtod(b, e); }, &d) &&
        !(errno == ERANGE && std::isfinite(d)))
      return Error("string \"" + s + "\" is not a number");
    if (integer)
      parsed.data<int64_t>()[i] = CastValue<int64_t>(d);
    else
      parsed.data<double>()[i] = d;
  }
  CastTensor(parsed, y, 1, mode);
  return OkStatus();
}

void CastTensor(const Tensor& x, Tensor& y, int threads, const CastMode& mode) {
  if (x.dtype() == y.dtype()) {
    if (x.nbytes() > 0) std::memcpy(y.raw(), x.raw(), x.nbytes());
    return;
  }
  if (IsSubByteIntDType(x.dtype())) {  // its values, held one per byte (ir/subbyte.h)
    const Tensor v = Tensor::View(SubByteStorage(x.dtype()), x.dims(), const_cast<void*>(x.raw()));
    return CastTensor(v, y, threads, mode);
  }
  if (IsSubByteIntDType(y.dtype())) {  // wrapped into the type's bits, as Cast does
    Tensor wide(DType::kInt64, x.dims());
    CastTensor(x, wide, threads, mode);
    for (int64_t i = 0; i < x.size(); ++i)
      y.data<uint8_t>()[i] =
          static_cast<uint8_t>(WrapToSubByte(y.dtype(), wide.data<int64_t>()[i]));
    return;
  }
  if (IsSmallFloatDType(x.dtype()) || IsSmallFloatDType(y.dtype()))
    return CastSmallFloat(x, y, mode, threads);
  const bool to_half = x.dtype() == DType::kFloat32 && y.dtype() == DType::kFloat16;
  if (to_half || (x.dtype() == DType::kFloat16 && y.dtype() == DType::kFloat32)) {
    ParallelSlices(threads, x.size(), 32 << 10, [&](int64_t b, int64_t e) {
      if (to_half)
        FloatsToHalves(x.data<float>() + b, static_cast<uint16_t*>(y.raw()) + b, e - b);
      else
        HalvesToFloats(static_cast<const uint16_t*>(x.raw()) + b, y.data<float>() + b, e - b);
    });
    return;
  }
  Dispatch<kAllTypes>(x.dtype(), [&]<class From>() {
    Dispatch<kAllTypes>(y.dtype(), [&]<class To>() {
      const From* s = x.data<From>();
      To* d = y.data<To>();
      ParallelSlices(threads, x.size(), 32 << 10, [&](int64_t b, int64_t e) {
        for (int64_t i = b; i < e; ++i) d[i] = CastValue<To>(s[i]);
      });
    });
  });
}

Status InferCastTo(InferContext& ctx, DType to) {
  if (ctx.num_inputs() < 1 || !ctx.has_input(0)) return ctx.error("expects an input");
  const DType from = ctx.input_dtype(0);
  auto castable = [](DType t) {
    return TypeIn(t, kAllTypes) || IsSmallFloatDType(t) || IsSubByteDType(t) || t == DType::kString;
  };
  if (!castable(from)) return UnsupportedType(ctx, from);
  if (!castable(to))
    return ctx.error("casting to element type " + TypeName(to) + " is not supported");
  ctx.set_output(0, to, ctx.input_dims(0));
  return OkStatus();
}

// The target of Cast: an int enum, or a type name string in Cast-1.
DType CastTarget(const ir::Node& node) {
  const ir::Attribute* a = node.attr("to");
  if (!a) return DType::kUndefined;
  if (a->kind == ir::Attribute::Kind::kString) return DTypeFromName(a->s);
  return static_cast<DType>(a->i);
}

Status RunCast(ComputeContext& ctx) {
  CastMode mode;
  ReadCastMode(ctx.node(), &mode);
  const Tensor& x = ctx.input(0);
  Tensor& y = ctx.output(0);
  if (x.is_string() || y.is_string()) {
    Status st = CastStrings(x, y, mode);
    return st.ok() ? st : ctx.error(st.message());
  }
  CastTensor(x, y, ctx.threads(), mode);
  return OkStatus();
}

void RegisterCast(OpRegistry& r) {
  r.Register(
      "Cast",
      [](InferContext& ctx) -> Status {
        if (!ctx.node().attr("to")) return ctx.error("missing attribute 'to'");
        CastMode mode;
        if (!ReadCastMode(ctx.node(), &mode))
          return ctx.error("round_mode must be up, down or nearest");
        return InferCastTo(ctx, CastTarget(ctx.node()));
      },
      RunCast);
  r.Register(
      "CastLike",
      [](InferContext& ctx) -> Status {
        if (ctx.num_inputs() != 2 || !ctx.has_input(1)) return ctx.error("expects two inputs");
        return InferCastTo(ctx, ctx.input_dtype(1));
      },
      RunCast);
}

}  // namespace

void RegisterElementwiseVariadicOps(OpRegistry& r) {
  RegisterVariadic(r);
  RegisterWhere(r);
  RegisterClip(r);
  RegisterCast(r);
}

}  // namespace kiln::ops
