// Loops shared by the element-wise and activation families: unary maps, broadcasting binary maps,
// and the infer helpers they register with. Element values are computed in Acc<T> (float for the
// 16-bit floats) and converted back on store.
#pragma once

#include <array>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "kernels/x86/thread_pool.h"
#include "ops/common.h"

namespace kiln::ops {

// std::fmod of float32 values, exact, without libm's loop where |x / y| < 2^24 (glibc's fmodf
// took 13 ns an element): there the double quotient cannot round across an integer (x - k y is
// a multiple of the smaller ulp, at least 2^-24 y from each integer k, and the division errs by
// under 2^-29), so its truncation is the true one, q y is exact in double (24 + 24 bits), and so
// is x - q y, which fmod's result is. The result keeps x's sign, zero included; y zero, infinite
// or NaN and x infinite or NaN take std::fmod.
inline float FmodF32(float x, float y) {
  const double xd = x, yd = y;
  if (!(std::fabs(xd) < 16777216.0 * std::fabs(yd)) || !std::isfinite(yd)) return std::fmod(x, y);
  const double q = static_cast<double>(static_cast<int64_t>(xd / yd));
  return std::copysign(static_cast<float>(xd - q * yd), x);
}

// True when `t` belongs to one of the dispatch groups.
inline bool TypeIn(DType t, unsigned groups) {
  if (IsFloatingDType(t)) return (groups & kFloatTypes) != 0;
  if (IsSignedIntDType(t)) return (groups & kSignedIntTypes) != 0;
  if (IsUnsignedIntDType(t)) return (groups & kUnsignedIntTypes) != 0;
  if (t == DType::kBool) return (groups & kBoolType) != 0;
  if (t == DType::kString) return (groups & kStringType) != 0;
  return false;
}

inline std::string TypeName(DType t) { return std::string(DTypeName(t)); }

inline Status UnsupportedType(const InferContext& ctx, DType t, int input = 0) {
  return ctx.error("input " + std::to_string(input) + " has unsupported element type " +
                   TypeName(t));
}

// Infer for an op whose output has the input's dims and either its dtype or `out` (bool ops).
inline Status InferUnary(InferContext& ctx, unsigned groups, DType out = DType::kUndefined) {
  if (ctx.num_inputs() < 1 || !ctx.has_input(0)) return ctx.error("expects one input");
  if (!TypeIn(ctx.input_dtype(0), groups)) return UnsupportedType(ctx, ctx.input_dtype(0));
  ctx.set_output(0, out == DType::kUndefined ? ctx.input_dtype(0) : out, ctx.input_dims(0));
  return OkStatus();
}

// Before opset 7, binary ops broadcast B onto A only with broadcast=1, and `axis` says where B's
// dims line up in A. Returns B's dims padded with trailing 1s so numpy rules give that alignment.
inline Dims LegacyBroadcastDims(const ir::Node& node, int64_t opset, const Dims& a, const Dims& b) {
  if (opset >= 7 || node.attr_int("broadcast", 0) == 0 || !node.attr("axis")) return b;
  int64_t axis = node.attr_int("axis", 0);
  const int64_t ra = static_cast<int64_t>(a.size()), rb = static_cast<int64_t>(b.size());
  if (axis < 0) axis += ra;
  if (axis < 0 || axis + rb > ra) return b;  // left for the broadcast check to reject
  Dims d = b;
  d.resize(static_cast<size_t>(ra - axis), 1);
  return d;
}

// Infer for a broadcasting binary op whose inputs share one dtype in `groups`.
inline Status InferBinary(InferContext& ctx, unsigned groups, DType out = DType::kUndefined) {
  if (ctx.num_inputs() != 2 || !ctx.has_input(0) || !ctx.has_input(1))
    return ctx.error("expects two inputs");
  DType t = ctx.input_dtype(0);
  if (!TypeIn(t, groups)) return UnsupportedType(ctx, t);
  if (ctx.input_dtype(1) != t)
    return ctx.error("inputs have different element types " + TypeName(t) + " and " +
                     TypeName(ctx.input_dtype(1)));
  Dims d;
  const Dims bd =
      LegacyBroadcastDims(ctx.node(), ctx.opset(), ctx.input_dims(0), ctx.input_dims(1));
  if (!BroadcastDims(ctx.input_dims(0), bd, &d))
    return ctx.error("shapes " + DimsToString(ctx.input_dims(0)) + " and " +
                     DimsToString(ctx.input_dims(1)) + " do not broadcast");
  ctx.set_output(0, out == DType::kUndefined ? t : out, std::move(d));
  return OkStatus();
}

// Contiguous loops are written as fixed-size blocks plus a tail, on __restrict pointers: at -O2
// GCC's "very cheap" vectorizer only vectorizes loops whose trip count it knows and whose
// operands cannot overlap. In-place use (output == input, same index) stays correct: every
// element is read before it is written.
constexpr int64_t kBlock = 8;

// y[i] = f(x[i]) over n contiguous elements.
template <class T, class R, class F>
inline void UnaryLoop(const T* __restrict x, R* __restrict y, int64_t n, F&& f) {
  int64_t i = 0;
  for (; i + kBlock <= n; i += kBlock)
    for (int64_t j = 0; j < kBlock; ++j)
      y[i + j] = static_cast<R>(f(static_cast<Acc<T>>(x[i + j])));
  for (; i < n; ++i) y[i] = static_cast<R>(f(static_cast<Acc<T>>(x[i])));
}

// o[i] = f(a[i], b[i]) over n contiguous elements.
template <class TA, class TB, class R, class F>
inline void BinarySame(const TA* __restrict a, const TB* __restrict b, R* __restrict o, int64_t n,
                       F&& f) {
  int64_t i = 0;
  for (; i + kBlock <= n; i += kBlock)
    for (int64_t j = 0; j < kBlock; ++j)
      o[i + j] = static_cast<R>(f(static_cast<Acc<TA>>(a[i + j]), static_cast<Acc<TB>>(b[i + j])));
  for (; i < n; ++i)
    o[i] = static_cast<R>(f(static_cast<Acc<TA>>(a[i]), static_cast<Acc<TB>>(b[i])));
}

// o[i] = f(s, b[i]) (kScalarFirst) or f(b[i], s).
template <bool kScalarFirst, class TS, class TB, class R, class F>
inline void BinaryScalar(Acc<TS> s, const TB* __restrict b, R* __restrict o, int64_t n, F&& f) {
  auto g = [&](Acc<TB> v) {
    if constexpr (kScalarFirst)
      return f(s, v);
    else
      return f(v, s);
  };
  int64_t i = 0;
  for (; i + kBlock <= n; i += kBlock)
    for (int64_t j = 0; j < kBlock; ++j)
      o[i + j] = static_cast<R>(g(static_cast<Acc<TB>>(b[i + j])));
  for (; i < n; ++i) o[i] = static_cast<R>(g(static_cast<Acc<TB>>(b[i])));
}

// Below this many elements per thread an element-wise loop runs on the caller alone (waking a
// worker costs microseconds).
constexpr int64_t kElementsPerThread = 1 << 15;

// The contiguous row loops BinaryLoop runs: same(a, b, o, n), scalar_a(s, b, o, n) for
// o = f(s, b[i]) and scalar_b(s, a, o, n) for o = f(a[i], s), each split over up to `threads`
// threads (inside a broadcast loop's parts they run inline). The default ones are the scalar loops
// above; ops with vector kernels (kernels/x86/vector_math.h) pass their own.
template <class TA, class TB, class R, class F>
struct ScalarRows {
  F& f;
  int threads = 1;
  void same(const TA* a, const TB* b, R* o, int64_t n) const {
    ParallelSlices(threads, n, kElementsPerThread, [&](int64_t s, int64_t e) {
      BinarySame<TA, TB, R>(a + s, b + s, o + s, e - s, f);
    });
  }
  void scalar_a(Acc<TA> c, const TB* b, R* o, int64_t n) const {
    ParallelSlices(threads, n, kElementsPerThread, [&](int64_t s, int64_t e) {
      BinaryScalar<true, TA, TB, R>(c, b + s, o + s, e - s, f);
    });
  }
  void scalar_b(Acc<TB> c, const TA* a, R* o, int64_t n) const {
    ParallelSlices(threads, n, kElementsPerThread, [&](int64_t s, int64_t e) {
      BinaryScalar<false, TB, TA, R>(c, a + s, o + s, e - s, f);
    });
  }
};

// Walks `od` (the broadcast of operands of dims in_dims[k]) as rows of its innermost axis once
// adjacent axes that every operand walks contiguously (or broadcasts) are merged, so that e.g. a
// per-channel bias over NCHW becomes rows of H*W with a scalar operand: fn(o, off, inner, step)
// per row, o its first output element, off[k] operand k's offset there and step[k] its stride
// along the row. Rows split over up to `threads` threads (one below kElementsPerThread
// elements a thread).
template <size_t N, class F>
inline void ForEachBroadcastRow(const Dims& od, const std::array<Dims, N>& in_dims, int threads,
                                F&& fn) {
  const int64_t n = NumElements(od);
  if (n == 0) return;
  std::array<Dims, N> s, m;
  for (size_t k = 0; k < N; ++k) s[k] = BroadcastStrides(in_dims[k], od);
  Dims d;
  for (size_t a = 0; a < od.size(); ++a) {
    if (od[a] == 1) continue;
    bool merge = !d.empty();
    for (size_t k = 0; k < N && merge; ++k) merge = m[k].back() == s[k][a] * od[a];
    if (!merge) d.push_back(od[a]);
    if (merge) d.back() *= od[a];
    for (size_t k = 0; k < N; ++k) {
      if (!merge) m[k].push_back(0);
      m[k].back() = s[k][a];
    }
  }
  if (d.empty()) {
    d.push_back(1);
    for (size_t k = 0; k < N; ++k) m[k].push_back(0);
  }
  const int rank = static_cast<int>(d.size());
  const int64_t inner = d[rank - 1];
  std::array<int64_t, N> step;
  for (size_t k = 0; k < N; ++k) step[k] = m[k][rank - 1];
  const int t = static_cast<int>(std::min<int64_t>(threads, n / kElementsPerThread + 1));
  ParallelFor(t, n / inner, [&](int64_t r0, int64_t r1) {
    // The outer index of row r0, and the operands' offsets there.
    std::vector<int64_t> idx(rank, 0);
    std::array<int64_t, N> off{};
    int64_t rest = r0;
    for (int a = rank - 2; a >= 0; --a) {
      idx[a] = rest % d[a];
      rest /= d[a];
      for (size_t k = 0; k < N; ++k) off[k] += idx[a] * m[k][a];
    }
    for (int64_t r = r0; r < r1; ++r) {
      fn(r * inner, off, inner, step);
      for (int a = rank - 2; a >= 0; --a) {
        for (size_t k = 0; k < N; ++k) off[k] += m[k][a];
        if (++idx[a] < d[a]) break;
        for (size_t k = 0; k < N; ++k) off[k] -= m[k][a] * d[a];
        idx[a] = 0;
      }
    }
  });
}

// out = f(a, b) with numpy broadcasting of a and b to `od`. Same-shape and scalar operands get
// contiguous row loops (`rows`); anything else walks the broadcast strides with f, its rows split
// over up to `threads` threads.
template <class TA, class TB, class R, class F, class Rows>
inline void BinaryLoopRows(const TA* a, const Dims& ad, const TB* b, const Dims& bd, R* o,
                           const Dims& od, F&& f, const Rows& rows, int threads = 1) {
  const int64_t n = NumElements(od);
  const int64_t na = NumElements(ad), nb = NumElements(bd);
  // Equal element counts imply equal layouts: broadcasting can only grow size-1 axes.
  if (na == n && nb == n) {
    rows.same(a, b, o, n);
    return;
  }
  if (na == 1 && nb == n) {
    rows.scalar_a(static_cast<Acc<TA>>(a[0]), b, o, n);
    return;
  }
  if (nb == 1 && na == n) {
    rows.scalar_b(static_cast<Acc<TB>>(b[0]), a, o, n);
    return;
  }
  ForEachBroadcastRow<2>(od, {ad, bd}, threads,
                         [&](int64_t oo, const std::array<int64_t, 2>& off, int64_t inner,
                             const std::array<int64_t, 2>& step) {
                           R* row = o + oo;
                           const TA* ar = a + off[0];
                           const TB* br = b + off[1];
                           if (step[0] == 1 && step[1] == 1) {
                             rows.same(ar, br, row, inner);
                           } else if (step[0] == 0 && step[1] == 1) {
                             rows.scalar_a(static_cast<Acc<TA>>(ar[0]), br, row, inner);
                           } else if (step[0] == 1 && step[1] == 0) {
                             rows.scalar_b(static_cast<Acc<TB>>(br[0]), ar, row, inner);
                           } else {
                             for (int64_t j = 0; j < inner; ++j)
                               row[j] = static_cast<R>(f(static_cast<Acc<TA>>(ar[j * step[0]]),
                                                         static_cast<Acc<TB>>(br[j * step[1]])));
                           }
                         });
}

template <class TA, class TB, class R, class F>
inline void BinaryLoop(const TA* a, const Dims& ad, const TB* b, const Dims& bd, R* o,
                       const Dims& od, F&& f, int threads = 1) {
  BinaryLoopRows<TA, TB, R>(a, ad, b, bd, o, od, f, ScalarRows<TA, TB, R, F>{f, threads}, threads);
}

// The tensor form; `bd` overrides b's dims (legacy axis broadcasting) when given.
template <class TA, class TB, class R, class F>
inline void BinaryLoop(const Tensor& a, const Tensor& b, Tensor& out, F&& f,
                       const Dims* bd = nullptr, int threads = 1) {
  BinaryLoop<TA, TB, R>(a.data<TA>(), a.dims(), b.data<TB>(), bd ? *bd : b.dims(), out.data<R>(),
                        out.dims(), f, threads);
}

// Integer wrap-around arithmetic without signed-overflow undefined behaviour.
template <class T>
inline T WrapAdd(T a, T b) {
  using U = std::make_unsigned_t<T>;
  return static_cast<T>(static_cast<U>(static_cast<U>(a) + static_cast<U>(b)));
}
template <class T>
inline T WrapSub(T a, T b) {
  using U = std::make_unsigned_t<T>;
  return static_cast<T>(static_cast<U>(static_cast<U>(a) - static_cast<U>(b)));
}
template <class T>
inline T WrapMul(T a, T b) {
  using U = std::make_unsigned_t<T>;
  // Promote small unsigned types to unsigned int so the product cannot overflow a signed int.
  using W = std::conditional_t<(sizeof(U) < sizeof(unsigned)), unsigned, U>;
  return static_cast<T>(
      static_cast<U>(static_cast<W>(static_cast<U>(a)) * static_cast<W>(static_cast<U>(b))));
}

// Float to integer conversion without undefined behaviour: truncates toward zero, wraps values
// inside the int64 range like numpy does, saturates beyond it, and maps NaN to 0.
template <class To>
inline To FloatToInt(double d) {
  if (!(d == d)) return To{0};
  if constexpr (std::is_same_v<To, uint64_t>) {
    if (d >= 9223372036854775808.0) {
      return d < 18446744073709551616.0 ? static_cast<uint64_t>(d)
                                        : std::numeric_limits<uint64_t>::max();
    }
  }
  if (d >= 9223372036854775808.0) return static_cast<To>(std::numeric_limits<int64_t>::max());
  if (d < -9223372036854775808.0) return static_cast<To>(std::numeric_limits<int64_t>::min());
  return static_cast<To>(static_cast<int64_t>(d));
}

// double -> float rounded to odd, so that a second rounding to a 16-bit float is correct (no
// double-rounding error on halfway cases).
inline float DoubleToFloatRoundOdd(double d) {
  float f = static_cast<float>(d);
  if (static_cast<double>(f) == d || !(d == d) || std::isinf(f)) return f;
  uint32_t bits;
  std::memcpy(&bits, &f, 4);
  if ((bits & 1u) == 0) f = std::nextafter(f, static_cast<float>(d > f ? INFINITY : -INFINITY));
  return f;
}

// ONNX Cast of one value.
template <class To, class From>
inline To CastValue(From v) {
  if constexpr (std::is_integral_v<To> && !std::is_same_v<To, bool> && kIsFloat<From>) {
    return FloatToInt<To>(static_cast<double>(static_cast<Acc<From>>(v)));
  } else if constexpr (kIsHalfLike<To> && std::is_same_v<From, double>) {
    return To(DoubleToFloatRoundOdd(v));
  } else if constexpr (std::is_same_v<From, bool>) {
    return static_cast<To>(static_cast<float>(v ? 1 : 0));
  } else {
    return ConvertValue<To>(v);
  }
}

void RegisterElementwiseVariadicOps(OpRegistry& r);

}  // namespace kiln::ops
