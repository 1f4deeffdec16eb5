#include "kernels/x86/quantize_kernels.h"

#include <algorithm>
#include <cstring>
#include <limits>

#include "kernels/reference/reference_kernels.h"
#include "kernels/x86/cpu_isa.h"
#include "kernels/x86/simd.h"

// This file is compiled with -ffp-contract=off (CMakeLists.txt): acc * mul + zp must round twice,
// as the reference does, not once in a fused multiply-add.

namespace kiln::ops {
namespace {

// Adding and subtracting 1.5 * 2^23 (2^52 for double) rounds a value below 2^22 (2^51) in
// magnitude to an integer, half to even, in the default rounding mode: a vector round that GCC
// emits for the loops below, where it leaves std::nearbyint scalar.
constexpr float kRoundF = 12582912.0f;
constexpr double kRoundD = 6755399441055744.0;

template <class Q>
struct QuantizeBody {
  // lo / hi: the type's range less the zero point, so the clamp comes before the rounding (the
  // same result: both bounds are integers).
  static KILN_AI void Run(const float* x, int64_t n, float s, float z, float lo, float hi, Q* y) {
    for (int64_t i = 0; i < n; ++i) {
      float v = x[i] / s;
      v = v == v ? v : 0.0f;
      v = v < lo ? lo : v;
      v = v > hi ? hi : v;
      v = (v + kRoundF) - kRoundF;
      y[i] = static_cast<Q>(static_cast<int32_t>(v + z));
    }
  }
};

struct MinMaxBody {
  // Lane-wise in one 16-float vector of each, as GCC's vector extension (plain arrays stayed in
  // memory, a store and a load per element, at about 2 GB/s).
  static constexpr int kLanes = 16;
  using Floats = float __attribute__((vector_size(4 * kLanes)));
  using Ints = int32_t __attribute__((vector_size(4 * kLanes)));
  static KILN_AI void Run(const float* x, int64_t n, float* lo, float* hi, bool* has_nan) {
    Floats mn = {}, mx = {};
    Ints nan = {};
    int64_t i = 0;
    for (; i + kLanes <= n; i += kLanes) {
      Floats v;
      std::memcpy(&v, x + i, sizeof(v));
      mn = v < mn ? v : mn;
      mx = v > mx ? v : mx;
      nan |= v != v;
    }
    *lo = 0;
    *hi = 0;
    *has_nan = false;
    for (int j = 0; j < kLanes; ++j) {
      *lo = mn[j] < *lo ? mn[j] : *lo;
      *hi = mx[j] > *hi ? mx[j] : *hi;
      *has_nan = *has_nan || nan[j] != 0;
    }
    for (; i < n; ++i) {
      *lo = x[i] < *lo ? x[i] : *lo;
      *hi = x[i] > *hi ? x[i] : *hi;
      *has_nan = *has_nan || x[i] != x[i];
    }
  }
};

template <class X>
struct DequantizeBody {
  static KILN_AI void Run(const X* x, int64_t n, float z, float s, float* y) {
    for (int64_t i = 0; i < n; ++i) y[i] = (static_cast<float>(x[i]) - z) * s;
  }
};

// kPerElement: mul[i], else mul[0] for every element. The clamp comes after the rounding, in
// int32 (lo and hi are integers, so the result is the same), where it vectorizes cleanly.
template <class Q, bool kWrap, bool kPerElement>
struct RequantizeBody {
  static KILN_AI void Run(const int32_t* a, int64_t n, const double* mul, double z, Q* y) {
    const double m0 = mul[0];
    constexpr int32_t lo = std::numeric_limits<Q>::min(), hi = std::numeric_limits<Q>::max();
    for (int64_t i = 0; i < n; ++i) {
      const double v = static_cast<double>(a[i]) * (kPerElement ? mul[i] : m0) + z;
      int32_t r = static_cast<int32_t>((v + kRoundD) - kRoundD);
      if (!kWrap) r = std::min(hi, std::max(lo, r));
      y[i] = static_cast<Q>(r);
    }
  }
};

// The fixed-point requantization of kernels/reference/requant.c (the generated C's), lane by
// lane: kPerElement takes mult[i] and shift[i], else mult[0] and shift[0] for every element.
// kRight: every shift is <= -2 (kiln_requant_right, the same result in fewer operations).
template <class Q, bool kPerElement, bool kRight>
struct RequantizeFixedBody {
  static KILN_AI void Run(const int32_t* a, int64_t n, const int32_t* mult, const int32_t* shift,
                          int32_t zp, Q* y) {
    constexpr int32_t lo = std::numeric_limits<Q>::min(), hi = std::numeric_limits<Q>::max();
    const int32_t m0 = mult[0], s0 = shift[0];
    for (int64_t i = 0; i < n; ++i) {
      const int32_t m = kPerElement ? mult[i] : m0, s = kPerElement ? shift[i] : s0;
      y[i] = static_cast<Q>(kRight ? kiln_requant_right(a[i], m, s, zp, lo, hi)
                                   : kiln_requant_fixed(a[i], m, s, zp, lo, hi));
    }
  }
};

// requant.c's kiln_requant_scale(acc, mult, -e) for e >= 0, without a branch, so that loops of
// it vectorize: the high product, then TFLite's RoundingDivideByPOT in its masked form (equal to
// kiln_requant_divide_pot; for e = 0 it adds nothing).
KILN_AI int32_t ScaleRight(int32_t acc, int32_t mult, int32_t e) {
  const auto v = static_cast<int32_t>((static_cast<int64_t>(acc) * mult + (1 << 30)) >> 31);
  const int32_t mask = static_cast<int32_t>((int64_t{1} << e) - 1);
  const int32_t threshold = (mask >> 1) + (v < 0 ? 1 : 0);
  return (v >> e) + ((v & mask) > threshold ? 1 : 0);
}

// TFLite's integer Add of kernels/reference/qadd.c, lane by lane, where no shift of p is a left
// shift (qadd.c's inputs never are); A and B of type T.
template <class T>
struct QAddBody {
  static KILN_AI void Run(const T* a, const T* b, int64_t n, const kiln_qadd_params* p,
                          uint8_t* y) {
    const kiln_qadd_params q = *p;
    const int32_t ea = -q.a_shift, eb = -q.b_shift, ey = -q.y_shift;
    const int32_t lo = q.lo - q.y_zero, hi = q.hi - q.y_zero;
    for (int64_t i = 0; i < n; ++i) {
      const int32_t x = ScaleRight((a[i] - q.a_zero) * (1 << 20), q.a_mult, ea);
      const int32_t z = ScaleRight((b[i] - q.b_zero) * (1 << 20), q.b_mult, eb);
      const int32_t v = std::min(hi, std::max(lo, ScaleRight(x + z, q.y_mult, ey)));
      y[i] = static_cast<uint8_t>(v + q.y_zero);
    }
  }
};

template <class T>
struct RowSumsBody {
  static KILN_AI void Run(const T* a, int64_t rows, int64_t k, int64_t lda, int32_t* sums) {
    for (int64_t r = 0; r < rows; ++r) {
      const T* row = a + r * lda;
      int32_t s = 0;
      for (int64_t i = 0; i < k; ++i) s += row[i];
      sums[r] = s;
    }
  }
};

struct ZeroPointBody {
  static KILN_AI void Run(int32_t* acc, int64_t rows, int64_t n, const int32_t* row_u,
                          const int32_t* row_zp, const int32_t* col_zp, const int32_t* col_sum,
                          const int32_t* bias) {
    // Unsigned: the terms wrap modulo 2^32 as the reference's int32 arithmetic does.
    const auto* cz = reinterpret_cast<const uint32_t*>(col_zp);
    const auto* cs = reinterpret_cast<const uint32_t*>(col_sum);
    const auto* b = reinterpret_cast<const uint32_t*>(bias);
    for (int64_t r = 0; r < rows; ++r) {
      auto* row = reinterpret_cast<uint32_t*>(acc + r * n);
      const uint32_t u = static_cast<uint32_t>(row_u[r]), za = static_cast<uint32_t>(row_zp[r]);
      if (b) {
        for (int64_t j = 0; j < n; ++j) row[j] += b[j] - cz[j] * u - za * cs[j];
      } else {
        for (int64_t j = 0; j < n; ++j) row[j] -= cz[j] * u + za * cs[j];
      }
    }
  }
};

// Runs Body::Run compiled for the best instruction set this CPU has.
template <class Body, class... A>
void RunBaseline(A... a) {
  Body::Run(a...);
}
#if KILN_X86_DISPATCH
template <class Body, class... A>
__attribute__((target("avx2"))) void RunAvx2(A... a) {
  Body::Run(a...);
}
template <class Body, class... A>
__attribute__((target("avx512f,avx512bw,avx512vl,avx512dq"))) void RunAvx512(A... a) {
  Body::Run(a...);
}
bool HasAvx512Bw() {
  static const bool has = IsaSupported(Isa::kAvx512) && __builtin_cpu_supports("avx512bw") &&
                          __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq");
  return has;
}
#endif

template <class Body, class... A>
void Run(A... a) {
#if KILN_X86_DISPATCH
  if (HasAvx512Bw()) return RunAvx512<Body>(a...);
  if (IsaSupported(Isa::kAvx2)) return RunAvx2<Body>(a...);
#endif
  RunBaseline<Body>(a...);
}

// Calls fn.template operator()<T>() with T the C++ type of a small quantized type.
template <class F>
void BySmallQuantType(DType t, F&& fn) {
  switch (t) {
    case DType::kInt8:
      return fn.template operator()<int8_t>();
    case DType::kUInt8:
      return fn.template operator()<uint8_t>();
    case DType::kInt16:
      return fn.template operator()<int16_t>();
    case DType::kUInt16:
      return fn.template operator()<uint16_t>();
    default:
      return;
  }
}

template <class Q>
constexpr float Lowest() {
  return static_cast<float>(std::numeric_limits<Q>::min());
}
template <class Q>
constexpr float Highest() {
  return static_cast<float>(std::numeric_limits<Q>::max());
}

}  // namespace

bool IsSmallQuantType(DType t) {
  return t == DType::kInt8 || t == DType::kUInt8 || t == DType::kInt16 || t == DType::kUInt16;
}

void QuantizeF32(const float* x, int64_t n, float scale, int32_t zp, DType y_type, void* y) {
  BySmallQuantType(y_type, [&]<class Q>() {
    const float z = static_cast<float>(zp);
    Run<QuantizeBody<Q>>(x, n, scale, z, Lowest<Q>() - z, Highest<Q>() - z, static_cast<Q*>(y));
  });
}

void MinMaxF32(const float* x, int64_t n, float* lo, float* hi, bool* has_nan) {
  Run<MinMaxBody>(x, n, lo, hi, has_nan);
}

void DequantizeToF32(const void* x, DType x_type, int64_t n, int32_t zp, float scale, float* y) {
  BySmallQuantType(x_type, [&]<class X>() {
    Run<DequantizeBody<X>>(static_cast<const X*>(x), n, static_cast<float>(zp), scale, y);
  });
}

bool RequantizeInt32(const int32_t* acc, int64_t n, const double* mul, int64_t mul_count,
                     int32_t zp, bool wrap, DType y_type, void* y) {
  for (int64_t i = 0; i < mul_count; ++i)
    if (!(mul[i] > -0.5 && mul[i] < 0.5)) return false;
  if (y_type != DType::kUInt8 && y_type != DType::kInt8) return false;
  const bool per = mul_count > 1;
  auto run = [&]<class Q>() {
    Q* q = static_cast<Q*>(y);
    const double z = zp;
    if (wrap)
      per ? Run<RequantizeBody<Q, true, true>>(acc, n, mul, z, q)
          : Run<RequantizeBody<Q, true, false>>(acc, n, mul, z, q);
    else
      per ? Run<RequantizeBody<Q, false, true>>(acc, n, mul, z, q)
          : Run<RequantizeBody<Q, false, false>>(acc, n, mul, z, q);
  };
  if (y_type == DType::kUInt8)
    run.template operator()<uint8_t>();
  else
    run.template operator()<int8_t>();
  return true;
}

void RequantizeFixed(const int32_t* acc, int64_t n, const int32_t* mult, const int32_t* shift,
                     bool per_element, int32_t zp, DType y_type, void* y) {
  const int64_t count = per_element ? n : 1;
  const bool right = std::all_of(shift, shift + count, [](int32_t s) { return s <= -2; });
  auto run = [&]<class Q, bool kPer>() {
    Q* q = static_cast<Q*>(y);
    right ? Run<RequantizeFixedBody<Q, kPer, true>>(acc, n, mult, shift, zp, q)
          : Run<RequantizeFixedBody<Q, kPer, false>>(acc, n, mult, shift, zp, q);
  };
  if (y_type == DType::kUInt8)
    per_element ? run.template operator()<uint8_t, true>()
                : run.template operator()<uint8_t, false>();
  else
    per_element ? run.template operator()<int8_t, true>()
                : run.template operator()<int8_t, false>();
}

void QAdd(const void* a, const void* b, bool is_signed, int64_t n, const kiln_qadd_params& p,
          void* y) {
  auto* out = static_cast<uint8_t*>(y);
  if (p.a_shift > 0 || p.b_shift > 0 || p.y_shift > 0) {  // a left shift: the scalar function
    for (int64_t i = 0; i < n; ++i) {
      const int32_t va =
          is_signed ? static_cast<const int8_t*>(a)[i] : static_cast<const uint8_t*>(a)[i];
      const int32_t vb =
          is_signed ? static_cast<const int8_t*>(b)[i] : static_cast<const uint8_t*>(b)[i];
      out[i] = static_cast<uint8_t>(kiln_qadd(va, vb, &p));
    }
    return;
  }
  if (is_signed)
    Run<QAddBody<int8_t>>(static_cast<const int8_t*>(a), static_cast<const int8_t*>(b), n, &p, out);
  else
    Run<QAddBody<uint8_t>>(static_cast<const uint8_t*>(a), static_cast<const uint8_t*>(b), n, &p,
                           out);
}

void RowSums8(const void* a, bool is_signed, int64_t rows, int64_t k, int64_t lda, int32_t* sums) {
  if (is_signed)
    Run<RowSumsBody<int8_t>>(static_cast<const int8_t*>(a), rows, k, lda, sums);
  else
    Run<RowSumsBody<uint8_t>>(static_cast<const uint8_t*>(a), rows, k, lda, sums);
}

void AddZeroPointTerms(int32_t* acc, int64_t rows, int64_t n, const int32_t* row_u,
                       const int32_t* row_zp, const int32_t* col_zp, const int32_t* col_sum,
                       const int32_t* bias) {
  Run<ZeroPointBody>(acc, rows, n, row_u, row_zp, col_zp, col_sum, bias);
}

}  // namespace kiln::ops
