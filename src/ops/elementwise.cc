// Element-wise unary math, broadcasting binary arithmetic, comparisons, logical and bitwise ops.
// Variadic ops, Where, Clip and Cast live in elementwise_variadic.cc.
#include <cmath>

#include "kernels/x86/layout_kernels.h"
#include "kernels/x86/thread_pool.h"
#include "kernels/x86/vector_math.h"
#include "ops/channels_last.h"
#include "ops/elementwise_kernels.h"

namespace kiln::ops {
namespace {

constexpr unsigned kFloatAndSigned = kFloatTypes | kSignedIntTypes;

// Registers a same-dtype unary op: y = f(x) computed in Acc<T>.
template <unsigned Groups, class F>
void RegUnary(OpRegistry& r, const char* name, F f) {
  r.Register(
      name, [](InferContext& ctx) { return InferUnary(ctx, Groups); },
      [f](ComputeContext& ctx) -> Status {
        const Tensor& x = ctx.input(0);
        Dispatch<Groups>(x.dtype(), [&]<class T>() {
          const T* in = x.data<T>();
          T* out = ctx.output(0).data<T>();
          ParallelSlices(ctx.threads(), x.size(), kElementsPerThread,
                         [&](int64_t s, int64_t e) { UnaryLoop<T, T>(in + s, out + s, e - s, f); });
        });
        return OkStatus();
      });
  r.MarkWritesWholeOutputs(name, /*types_only=*/true);
}

// Float32 rows of Add / Sub / Mul / Div through the vector kernels (the same IEEE operations),
// long rows split over the node's threads.
struct VecRows {
  VecBinOp op;
  int threads = 1;
  void same(const float* a, const float* b, float* o, int64_t n) const {
    ParallelSlices(threads, n, kElementsPerThread,
                   [&](int64_t s, int64_t e) { BinaryF32(op, a + s, b + s, o + s, e - s); });
  }
  void scalar_a(float c, const float* b, float* o, int64_t n) const {
    ParallelSlices(threads, n, kElementsPerThread, [&](int64_t s, int64_t e) {
      BinaryScalarF32(op, c, b + s, o + s, e - s, true);
    });
  }
  void scalar_b(float c, const float* a, float* o, int64_t n) const {
    ParallelSlices(threads, n, kElementsPerThread, [&](int64_t s, int64_t e) {
      BinaryScalarF32(op, c, a + s, o + s, e - s, false);
    });
  }
};

// Registers a broadcasting binary op over one dtype; the output is that dtype or bool.
template <unsigned Groups, bool kBoolOut, class F>
void RegBinary(OpRegistry& r, const char* name, F f, const VecBinOp* vop = nullptr) {
  r.Register(
      name,
      [](InferContext& ctx) {
        return InferBinary(ctx, Groups, kBoolOut ? DType::kBool : DType::kUndefined);
      },
      [f, vop](ComputeContext& ctx) -> Status {
        const Tensor& a = ctx.input(0);
        const Tensor& b = ctx.input(1);
        // Channels-last with both operands of the output's dims, or one a single element, is
        // layout-agnostic; otherwise it is a channel scale (ops/channels_last.h).
        if (ctx.output_channels_last(0) && a.dims() != b.dims() && a.size() != 1 && b.size() != 1) {
          const bool a_big = ctx.input_channels_last(0);
          const Tensor& x = a_big ? a : b;
          const Tensor& s = a_big ? b : a;
          Tensor& o = ctx.output(0);
          if (!vop || *vop != VecBinOp::kMul || x.dtype() != DType::kFloat32 || x.rank() != 4)
            return ctx.error("channels-last element-wise node it cannot run (a kiln bug)");
          ChannelsLastScale(x.data<float>(), s.data<float>(), o.data<float>(), x.dim(0), x.dim(1),
                            x.dim(2) * x.dim(3));
          return OkStatus();
        }
        const Dims bd = LegacyBroadcastDims(ctx.node(), ctx.opset(), a.dims(), b.dims());
        if constexpr ((Groups & kStringType) != 0 && kBoolOut) {
          if (a.is_string()) {  // compared by value, element by element
            Tensor& o = ctx.output(0);
            const std::string *sa = a.strings(), *sb = b.strings();
            ForEachBroadcast<2>(
                o.dims(), {BroadcastStrides(a.dims(), o.dims()), BroadcastStrides(bd, o.dims())},
                [&](int64_t i, const std::array<int64_t, 2>& off) {
                  o.data<bool>()[i] = f(sa[off[0]], sb[off[1]]);
                });
            return OkStatus();
          }
        }
        Dispatch<Groups>(a.dtype(), [&]<class T>() {
          using R = std::conditional_t<kBoolOut, bool, T>;
          if constexpr (std::is_same_v<T, float> && !kBoolOut) {
            if (vop) {
              Tensor& o = ctx.output(0);
              BinaryLoopRows<float, float, float>(a.data<float>(), a.dims(), b.data<float>(), bd,
                                                  o.data<float>(), o.dims(), f,
                                                  VecRows{*vop, ctx.threads()}, ctx.threads());
              return;
            }
          }
          BinaryLoop<T, T, R>(a, b, ctx.output(0), f, &bd, ctx.threads());
        });
        return OkStatus();
      });
  r.MarkWritesWholeOutputs(name, /*types_only=*/true);
}

template <class V>
V IntAbs(V x) {
  if constexpr (std::is_signed_v<V>)
    return x < 0 ? WrapSub<V>(0, x) : x;
  else
    return x;
}

void RegisterUnaryMath(OpRegistry& r) {
  RegUnary<kNumericTypes>(r, "Abs", []<class V>(V x) -> V {
    if constexpr (std::is_integral_v<V>)
      return IntAbs(x);
    else
      return std::fabs(x);
  });
  RegUnary<kFloatAndSigned>(r, "Neg", []<class V>(V x) -> V {
    if constexpr (std::is_integral_v<V>)
      return WrapSub<V>(0, x);
    else
      return -x;
  });
  RegUnary<kNumericTypes>(r, "Sign", []<class V>(V x) -> V {
    if constexpr (std::is_unsigned_v<V>)
      return x > 0 ? 1 : 0;
    else
      return x > 0 ? V(1) : (x < 0 ? V(-1) : x);  // keeps NaN and zero
  });
  // Reciprocal, Floor, Exp, Sin & co: ops/unary_ops.h, registered in ops/activation.cc.
  RegUnary<kBoolType>(r, "Not", [](bool x) { return !x; });
  RegUnary<kIntTypes>(r, "BitwiseNot", []<class V>(V x) -> V { return static_cast<V>(~x); });

  r.Register(
      "IsNaN", [](InferContext& ctx) { return InferUnary(ctx, kFloatTypes, DType::kBool); },
      [](ComputeContext& ctx) -> Status {
        const Tensor& x = ctx.input(0);
        Dispatch<kFloatTypes>(x.dtype(), [&]<class T>() {
          UnaryLoop<T, bool>(x.data<T>(), ctx.output(0).data<bool>(), x.size(),
                             [](auto v) { return v != v; });
        });
        return OkStatus();
      });
  r.Register(
      "IsInf", [](InferContext& ctx) { return InferUnary(ctx, kFloatTypes, DType::kBool); },
      [](ComputeContext& ctx) -> Status {
        const Tensor& x = ctx.input(0);
        const bool neg = ctx.node().attr_int("detect_negative", 1) != 0;
        const bool pos = ctx.node().attr_int("detect_positive", 1) != 0;
        Dispatch<kFloatTypes>(x.dtype(), [&]<class T>() {
          UnaryLoop<T, bool>(x.data<T>(), ctx.output(0).data<bool>(), x.size(), [&](auto v) {
            return std::isinf(v) && ((v > 0 && pos) || (v < 0 && neg));
          });
        });
        return OkStatus();
      });
}

// Integer division truncating toward zero (the reference casts the true quotient back);
// division by zero gives 0 and MIN / -1 wraps instead of trapping.
template <class V>
V IntDiv(V a, V b) {
  if (b == 0) return 0;
  if constexpr (std::is_signed_v<V>) {
    if (b == -1) return WrapSub<V>(0, a);
  }
  return static_cast<V>(a / b);
}

// Remainder with the sign of the divisor (numpy.mod); 0 for a zero divisor.
template <class V>
V IntMod(V a, V b) {
  if (b == 0) return 0;
  if constexpr (std::is_signed_v<V>) {
    if (b == -1) return 0;
    V m = static_cast<V>(a % b);
    if (m != 0 && ((m < 0) != (b < 0))) m = static_cast<V>(m + b);
    return m;
  } else {
    return static_cast<V>(a % b);
  }
}

// Remainder with the sign of the dividend (C fmod); 0 for a zero divisor.
template <class V>
V IntFmod(V a, V b) {
  if (b == 0) return 0;
  if constexpr (std::is_signed_v<V>) {
    if (b == -1) return 0;
  }
  return static_cast<V>(a % b);
}

constexpr VecBinOp kVecAdd = VecBinOp::kAdd, kVecSub = VecBinOp::kSub, kVecMul = VecBinOp::kMul,
                   kVecDiv = VecBinOp::kDiv;

void RegisterArithmetic(OpRegistry& r) {
  RegBinary<kNumericTypes, false>(
      r, "Add",
      []<class V>(V a, V b) -> V {
        if constexpr (std::is_integral_v<V>)
          return WrapAdd(a, b);
        else
          return a + b;
      },
      &kVecAdd);
  RegBinary<kNumericTypes, false>(
      r, "Sub",
      []<class V>(V a, V b) -> V {
        if constexpr (std::is_integral_v<V>)
          return WrapSub(a, b);
        else
          return a - b;
      },
      &kVecSub);
  RegBinary<kNumericTypes, false>(
      r, "Mul",
      []<class V>(V a, V b) -> V {
        if constexpr (std::is_integral_v<V>)
          return WrapMul(a, b);
        else
          return a * b;
      },
      &kVecMul);
  RegBinary<kNumericTypes, false>(
      r, "Div",
      []<class V>(V a, V b) -> V {
        if constexpr (std::is_integral_v<V>)
          return IntDiv(a, b);
        else
          return a / b;
      },
      &kVecDiv);

  r.Register(
      "Mod",
      [](InferContext& ctx) -> Status {
        int64_t fmod = ctx.node().attr_int("fmod", 0);
        if (fmod != 0 && fmod != 1) return ctx.error("fmod must be 0 or 1");
        return InferBinary(ctx, kNumericTypes);
      },
      [](ComputeContext& ctx) -> Status {
        const Tensor& a = ctx.input(0);
        const Tensor& b = ctx.input(1);
        const bool fmod = ctx.node().attr_int("fmod", 0) == 1;
        Dispatch<kNumericTypes>(a.dtype(), [&]<class T>() {
          if constexpr (kIsFloat<T>) {
            // The reference maps NaN results to 0 unless fmod=1 was asked for explicitly.
            BinaryLoop<T, T, T>(a, b, ctx.output(0), [fmod](auto x, auto y) {
              decltype(x) m;
              if constexpr (std::is_same_v<decltype(x), float>)
                m = FmodF32(x, y);
              else
                m = std::fmod(x, y);
              return (!fmod && m != m) ? decltype(m)(0) : m;
            });
          } else if (fmod) {
            BinaryLoop<T, T, T>(a, b, ctx.output(0), [](T x, T y) { return IntFmod(x, y); });
          } else {
            BinaryLoop<T, T, T>(a, b, ctx.output(0), [](T x, T y) { return IntMod(x, y); });
          }
        });
        return OkStatus();
      });

  r.Register(
      "BitShift",
      [](InferContext& ctx) -> Status {
        std::string dir = ctx.node().attr_string("direction", "");
        if (dir != "LEFT" && dir != "RIGHT")
          return ctx.error("direction must be \"LEFT\" or \"RIGHT\", got \"" + dir + "\"");
        return InferBinary(ctx, kUnsignedIntTypes);
      },
      [](ComputeContext& ctx) -> Status {
        const Tensor& a = ctx.input(0);
        const Tensor& b = ctx.input(1);
        const bool left = ctx.node().attr_string("direction", "") == "LEFT";
        Dispatch<kUnsignedIntTypes>(a.dtype(), [&]<class T>() {
          constexpr T kBits = sizeof(T) * 8;
          // Shifting by the width or more is undefined in C++; the bits are all gone: 0.
          if (left)
            BinaryLoop<T, T, T>(a, b, ctx.output(0),
                                [](T x, T s) { return s >= kBits ? T(0) : T(x << s); });
          else
            BinaryLoop<T, T, T>(a, b, ctx.output(0),
                                [](T x, T s) { return s >= kBits ? T(0) : T(x >> s); });
        });
        return OkStatus();
      });

  RegBinary<kIntTypes, false>(r, "BitwiseAnd", []<class V>(V a, V b) -> V { return a & b; });
  RegBinary<kIntTypes, false>(r, "BitwiseOr", []<class V>(V a, V b) -> V { return a | b; });
  RegBinary<kIntTypes, false>(r, "BitwiseXor", []<class V>(V a, V b) -> V { return a ^ b; });
  RegBinary<kBoolType, false>(r, "And", [](bool a, bool b) { return a && b; });
  RegBinary<kBoolType, false>(r, "Or", [](bool a, bool b) { return a || b; });
  RegBinary<kBoolType, false>(r, "Xor", [](bool a, bool b) { return a != b; });

  RegBinary<kAllTypes | kStringType, true>(r, "Equal", [](auto a, auto b) { return a == b; });
  RegBinary<kNumericTypes, true>(r, "Less", [](auto a, auto b) { return a < b; });
  RegBinary<kNumericTypes, true>(r, "LessOrEqual", [](auto a, auto b) { return a <= b; });
  RegBinary<kNumericTypes, true>(r, "Greater", [](auto a, auto b) { return a > b; });
  RegBinary<kNumericTypes, true>(r, "GreaterOrEqual", [](auto a, auto b) { return a >= b; });
}

// Integer power by squaring; negative exponents give the integer part of 1/a^-e.
template <class V>
V IntPow(V base, int64_t e) {
  if (e < 0) {
    if (base == 1) return 1;
    if constexpr (std::is_signed_v<V>) {
      if (base == -1) return (e & 1) ? V(-1) : V(1);
    }
    return 0;
  }
  V result = 1;
  while (e > 0) {
    if (e & 1) result = WrapMul(result, base);
    base = WrapMul(base, base);
    e >>= 1;
  }
  return result;
}

// Pow: the output has the base's dtype; the exponent may be any numeric dtype. The exponent is
// widened once (int64 for integer powers, double otherwise) so only the base is dispatched.
void RegisterPow(OpRegistry& r) {
  r.Register(
      "Pow",
      [](InferContext& ctx) -> Status {
        if (ctx.num_inputs() != 2 || !ctx.has_input(0) || !ctx.has_input(1))
          return ctx.error("expects two inputs");
        if (!TypeIn(ctx.input_dtype(0), kNumericTypes))
          return UnsupportedType(ctx, ctx.input_dtype(0));
        if (!TypeIn(ctx.input_dtype(1), kNumericTypes))
          return UnsupportedType(ctx, ctx.input_dtype(1), 1);
        Dims d;
        const Dims bd =
            LegacyBroadcastDims(ctx.node(), ctx.opset(), ctx.input_dims(0), ctx.input_dims(1));
        if (!BroadcastDims(ctx.input_dims(0), bd, &d))
          return ctx.error("shapes " + DimsToString(ctx.input_dims(0)) + " and " +
                           DimsToString(ctx.input_dims(1)) + " do not broadcast");
        ctx.set_output(0, ctx.input_dtype(0), std::move(d));
        return OkStatus();
      },
      [](ComputeContext& ctx) -> Status {
        const Tensor& a = ctx.input(0);
        const Tensor& b = ctx.input(1);
        Tensor& out = ctx.output(0);
        const bool int_pow = !IsFloatingDType(a.dtype()) && !IsFloatingDType(b.dtype());
        Tensor e(int_pow ? DType::kInt64 : DType::kFloat64,
                 LegacyBroadcastDims(ctx.node(), ctx.opset(), a.dims(), b.dims()));
        Dispatch<kNumericTypes>(b.dtype(), [&]<class E>() {
          const E* src = b.data<E>();
          if (int_pow) {
            int64_t* dst = e.data<int64_t>();
            for (int64_t i = 0; i < b.size(); ++i) dst[i] = static_cast<int64_t>(src[i]);
          } else {
            double* dst = e.data<double>();
            for (int64_t i = 0; i < b.size(); ++i)
              dst[i] = static_cast<double>(static_cast<Acc<E>>(src[i]));
          }
        });
        Dispatch<kNumericTypes>(a.dtype(), [&]<class T>() {
          if constexpr (std::is_integral_v<T>) {
            if (int_pow) {
              BinaryLoop<T, int64_t, T>(a, e, out, [](T x, int64_t y) { return IntPow(x, y); });
              return;
            }
            BinaryLoop<T, double, T>(a, e, out, [](T x, double y) {
              return FloatToInt<T>(std::pow(static_cast<double>(x), y));
            });
          } else {
            using V = Acc<T>;
            const double p = e.size() == 1 ? e.data<double>()[0] : 0.0;
            if (e.size() == 1 && p == 2.0) {  // the common square
              UnaryLoop<T, T>(a.data<T>(), out.data<T>(), a.size(), [](V x) { return x * x; });
            } else if (e.size() == 1 && p == 3.0) {  // the cube of GELU's tanh form
              UnaryLoop<T, T>(a.data<T>(), out.data<T>(), a.size(), [](V x) { return x * x * x; });
            } else if (e.size() == 1 && p == 1.0) {
              UnaryLoop<T, T>(a.data<T>(), out.data<T>(), a.size(), [](V x) { return x; });
            } else if (e.size() == 1 && p == 0.5) {
              UnaryLoop<T, T>(a.data<T>(), out.data<T>(), a.size(),
                              [](V x) { return std::sqrt(x); });
            } else {
              BinaryLoop<T, double, T>(a, e, out, [](V x, double y) {
                return static_cast<V>(std::pow(static_cast<double>(x), y));
              });
            }
          }
        });
        return OkStatus();
      });
}

}  // namespace

void RegisterElementwiseOps(OpRegistry& r) {
  RegisterUnaryMath(r);
  RegisterArithmetic(r);
  RegisterPow(r);
  RegisterElementwiseVariadicOps(r);
}

}  // namespace kiln::ops
