// GCC 12's AVX-512 intrinsics start from _mm512_undefined_ps(), which its -Wmaybe-uninitialized
// flags wherever they are inlined (GCC PR 105593, fixed in GCC 13).
#if defined(__GNUC__) && !defined(__clang__) && __GNUC__ < 13
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#include "kernels/x86/vector_math.h"

#include <cmath>
#include <cstring>
#include <limits>

#include "ir/half.h"
#include "kernels/x86/cpu_isa.h"
#if KILN_X86_DISPATCH
#include <immintrin.h>
#endif

namespace kiln::ops {
namespace {

#define KILN_AI __attribute__((always_inline)) inline

// Vectors of VB bytes through compiler vector extensions: inlined into a function with a target
// attribute, the same body becomes zmm / ymm / xmm code. Selects are bitwise blends (no vector ?:,
// which clang 14 lacks for these types); integer work is unsigned (wrap-around, no UB).
template <int VB>
struct VM {
  typedef float F __attribute__((vector_size(VB)));
  typedef uint32_t U __attribute__((vector_size(VB)));
  typedef int32_t I __attribute__((vector_size(VB)));
  static constexpr int L = VB / 4;

  static KILN_AI F Splat(float s) {  // one broadcast (s - F{} becomes lane-by-lane inserts)
    float a[L];
    for (int l = 0; l < L; ++l) a[l] = s;
    return Load(a);
  }
  static KILN_AI U SplatU(uint32_t s) { return U{} + s; }
  static KILN_AI U Bits(F x) { return (U)x; }
  static KILN_AI F FromBits(U u) { return (F)u; }
  template <class M>
  static KILN_AI F Sel(M m, F a, F b) {
    const U mu = (U)m;
    return FromBits((Bits(a) & mu) | (Bits(b) & ~mu));
  }
  static KILN_AI F Abs(F x) { return FromBits(Bits(x) & 0x7fffffffu); }
  static KILN_AI F CopySign(F mag, F sgn) {
    return FromBits((Bits(mag) & 0x7fffffffu) | (Bits(sgn) & 0x80000000u));
  }
  static KILN_AI F Load(const float* p) {
    F v;
    std::memcpy(&v, p, sizeof(F));
    return v;
  }
  static KILN_AI void Store(float* p, F v) { std::memcpy(p, &v, sizeof(F)); }

  // exp: n = round(x / ln 2) by the 1.5 * 2^23 trick (its low mantissa bits hold n), r = x - n ln 2
  // in two parts (n * C1 exact), e^r by Cephes expf's polynomial, 2^n applied as 2^(n/2) 2^(n-n/2)
  // so that a denormal result is rounded once and overflow gives inf.
  static KILN_AI F Exp(F x) { return ExpOf<false>(x, F{}); }
  // e^x, or 0 where it is below FLT_MIN (x < -87.34), with no denormal made on the way (each
  // costs a microcode assist on Intel cores): softmax's exp(x - max), where probabilities that
  // small are zeros whatever the row's sum and an attention mask's -10000 fills half the row.
  static KILN_AI F ExpOrZero(F x) {
    const I tiny = x < -87.3365f;  // false for a NaN, which stays NaN
    return Sel(tiny, F{}, Exp(Sel(tiny, F{}, x)));
  }
  // e^(x + lo) for a small lo carrying the bits x lost (GeluTail's -x^2 / 2): lo joins the reduced
  // argument, so it is not rounded away against x first.
  template <bool kLo>
  static KILN_AI F ExpOf(F x, F lo) {
    x = Sel(x > 89.0f, Splat(89.0f), x);
    x = Sel(x < -104.0f, Splat(-104.0f), x);  // NaN passes both
    const F magic = Splat(12582912.0f);
    const F t = x * 1.44269504088896341f + magic;
    const F n = t - magic;
    const U nu = Bits(t) - Bits(magic);
    F r = x - n * 0.693359375f;
    r = r - n * -2.12194440e-4f;
    if constexpr (kLo) r = r + lo;
    const F p = ExpReduced(r);
    const I ni = (I)nu;
    const I n1 = ni >> 1;
    const U s1 = (U)n1 + 127u, s2 = (nu - (U)n1) + 127u;
    return p * FromBits(s1 << 23) * FromBits(s2 << 23);
  }

  // e^r - 1 for |r| <= ln(2) / 2: Cephes expf's polynomial without its 1 (no cancellation).
  static KILN_AI F ExpReducedM1(F r) {
    F p = Splat(1.9875691500e-4f);
    p = p * r + 1.3981999507e-3f;
    p = p * r + 8.3334519073e-3f;
    p = p * r + 4.1665795894e-2f;
    p = p * r + 1.6666665459e-1f;
    p = p * r + 5.0000001201e-1f;
    return p * (r * r) + r;
  }
  // e^r for |r| <= ln(2) / 2.
  static KILN_AI F ExpReduced(F r) { return ExpReducedM1(r) + 1.0f; }
  // e^x - 1: the reduced polynomial near 0, where e^x - 1 would cancel; e^x - 1 beyond (|x| above
  // ln(2) / 2, so the subtraction loses nothing).
  static KILN_AI F Expm1(F x) { return Sel(Abs(x) <= 0.34657359f, ExpReducedM1(x), Exp(x) - 1.0f); }

  // log: Cephes logf (mantissa in [sqrt(1/2), sqrt(2)), degree-9 polynomial), denormals scaled by
  // 2^23 first; 0 -> -inf, x < 0 -> NaN, inf -> inf, NaN -> NaN.
  static KILN_AI F Log(F x0) {
    const I tiny = x0 < 1.17549435e-38f;
    const F x = Sel(tiny, x0 * 8388608.0f, x0);
    const U b = Bits(x);
    // The exponent as a float: e + 1.5 * 2^23 built from its bits, then the bias taken off.
    F ef = FromBits(((b >> 23) & 0xffu) + 0x4b400000u) - (12582912.0f + 126.0f);
    ef = ef - Sel(tiny, Splat(23.0f), F{});
    F m = FromBits((b & 0x007fffffu) | 0x3f000000u);
    const I lo = m < 0.707106781186547524f;
    ef = Sel(lo, ef - 1.0f, ef);
    m = Sel(lo, m + m - 1.0f, m - 1.0f);
    const F z = m * m;
    F y = Splat(7.0376836292e-2f);
    y = y * m - 1.1514610310e-1f;
    y = y * m + 1.1676998740e-1f;
    y = y * m - 1.2420140846e-1f;
    y = y * m + 1.4249322787e-1f;
    y = y * m - 1.6668057665e-1f;
    y = y * m + 2.0000714765e-1f;
    y = y * m - 2.4999993993e-1f;
    y = y * m + 3.3333331174e-1f;
    y = y * m * z;
    y = y + ef * -2.12194440e-4f;
    y = y - 0.5f * z;
    F r = m + y;
    r = r + ef * 0.693359375f;
    r = Sel(x0 == INFINITY, Splat(INFINITY), r);
    r = Sel(x0 == 0.0f, Splat(-INFINITY), r);
    r = Sel(x0 < 0.0f, Splat(NAN), r);
    return Sel(x0 != x0, x0, r);
  }

  // sigmoid through exp(-|x|) (never overflows): 1 / (1 + e) for x >= 0, e / (1 + e) below.
  static KILN_AI F Sigmoid(F x) {
    const F e = Exp(-Abs(x));
    const F d = 1.0f / (e + 1.0f);
    return Sel(x >= 0.0f, d, e * d);
  }

  // tanh: Cephes tanhf's odd polynomial below |x| 0.625, 1 - 2 / (e^2|x| + 1) above, where 2|x|
  // is at most 40 (tanh rounds to 1 from 9.02), so that 2^n fits one scale.
  static KILN_AI F Tanh(F x) {
    const F a = Abs(x);
    const F z = x * x;
    F p = Splat(-5.70498872745e-3f);
    p = p * z + 2.06390887954e-2f;
    p = p * z - 5.37397155531e-2f;
    p = p * z + 1.33314422036e-1f;
    p = p * z - 3.33332819422e-1f;
    const F small = p * z * x + x;
    F t = a + a;
    t = Sel(t > 40.0f, Splat(40.0f), t);  // NaN passes
    const F magic = Splat(12582912.0f);
    const F k = t * 1.44269504088896341f + magic;
    const F n = k - magic;
    const F r = t - n * 0.693359375f - n * -2.12194440e-4f;
    const F e = ExpReduced(r) * FromBits((Bits(k) - Bits(magic) + 127u) << 23);
    const F big = CopySign(1.0f - 2.0f / (e + 1.0f), x);
    return Sel(a < 0.625f, small, big);
  }

  // erf: an odd rational x P(x^2) / Q(x^2) on [-4, 4] (Eigen's generic_fast_erf_float), +-1 beyond.
  static KILN_AI F Erf(F x) {
    x = Sel(x > 4.0f, Splat(4.0f), x);
    x = Sel(x < -4.0f, Splat(-4.0f), x);
    const F x2 = x * x;
    F p = Splat(-2.72614225801306e-10f);
    p = p * x2 + 2.77068142495902e-08f;
    p = p * x2 - 2.10102402082508e-06f;
    p = p * x2 - 5.69250639462346e-05f;
    p = p * x2 - 7.34990630326855e-04f;
    p = p * x2 - 2.95459980854025e-03f;
    p = p * x2 - 1.60960333262415e-02f;
    F q = Splat(-1.45660718464996e-05f);
    q = q * x2 - 2.13374055278905e-04f;
    q = q * x2 - 1.68282697438203e-03f;
    q = q * x2 - 7.37332916720468e-03f;
    q = q * x2 - 1.42647390514189e-02f;
    return x * (p / q);  // x last: a denormal x is rounded once
  }

  // The correctly rounded square root: lane by lane, which GCC turns into the ISA's vector
  // instruction (this file is built with -fno-math-errno, so sqrt has no errno side; clang 14
  // keeps the lanes' scalar square roots).
  static KILN_AI F Sqrt(F x) {
    float a[L];
    Store(a, x);
    for (int l = 0; l < L; ++l) a[l] = __builtin_sqrtf(a[l]);
    return Load(a);
  }

  // Round half to even, lane by lane like Sqrt (the ISA's vector rounding where it has one).
  static KILN_AI F Nearbyint(F x) {
    float a[L];
    Store(a, x);
    for (int l = 0; l < L; ++l) a[l] = __builtin_nearbyintf(a[l]);
    return Load(a);
  }
  // floor and ceil from the nearest integer, one step back where it overshot (exact; -0 and NaN
  // pass, -0.5 floors to -1 and ceils to -0).
  static KILN_AI F Floor(F x) {
    const F r = Nearbyint(x);
    return Sel(r > x, r - 1.0f, r);
  }
  static KILN_AI F Ceil(F x) {
    const F r = Nearbyint(x);
    return Sel(r < x, r + 1.0f, r);
  }

  // atan: Cephes atanf. |x| above tan(3 pi / 8) is reduced by atan(x) = pi/2 - atan(1/x), above
  // tan(pi / 8) by atan(x) = pi/4 + atan((x - 1) / (x + 1)); an odd polynomial on the rest; the
  // sign restored. inf gives pi/2, NaN passes.
  static KILN_AI F Atan(F x) {
    const F a = Abs(x);
    const I big = a > 2.414213562373095f, mid = a > 0.4142135623730950f;
    const F base = Sel(big, Splat(1.5707963267948966f), Sel(mid, Splat(0.7853981633974483f), F{}));
    const F t = Sel(big, -1.0f / a, Sel(mid, (a - 1.0f) / (a + 1.0f), a));
    const F z = t * t;
    F p = Splat(8.05374449538e-2f);
    p = p * z - 1.38776856032e-1f;
    p = p * z + 1.99777106478e-1f;
    p = p * z - 3.33329491539e-1f;
    return CopySign(base + (p * z * t + t), x);
  }

  // asin(t) for |t| <= 1/2 (z = t^2): Cephes asinf's odd polynomial.
  static KILN_AI F AsinCore(F t, F z) {
    F p = Splat(4.2163199048e-2f);
    p = p * z + 2.4181311049e-2f;
    p = p * z + 4.5470025998e-2f;
    p = p * z + 7.4953002686e-2f;
    p = p * z + 1.6666752422e-1f;
    return p * z * t + t;
  }

  // asin: Cephes asinf. Above |x| 1/2, asin(x) = pi/2 - 2 asin(sqrt((1 - |x|) / 2)); the sign
  // restored; |x| > 1 gives NaN, NaN passes.
  static KILN_AI F Asin(F x) {
    const F a = Abs(x);
    const I high = a > 0.5f;
    const F z = Sel(high, (1.0f - a) * 0.5f, a * a);
    const F p = AsinCore(Sel(high, Sqrt(z), a), z);
    const F r = Sel(high, 1.5707963267948966f - (p + p), p);
    return Sel(a > 1.0f, Splat(NAN), CopySign(r, x));
  }

  // acos: Cephes acosf. Above |x| 1/2, with s = asin(sqrt((1 - |x|) / 2)): 2 s for x > 0, pi - 2 s
  // below; pi/2 - asin(x) between. |x| > 1 gives NaN (the square root's), NaN passes.
  static KILN_AI F Acos(F x) {
    const F a = Abs(x);
    const I high = a > 0.5f;
    const F z = Sel(high, (1.0f - a) * 0.5f, x * x);
    const F p = AsinCore(Sel(high, Sqrt(z), x), z);
    const F twice = p + p;
    const F far = Sel(x < 0.0f, 3.14159265358979f - twice, twice);
    return Sel(high, far, 1.5707963267948966f - p);
  }

  // sin / cos / tan: n = round(|x| 2 / pi), r = |x| - n pi/2 in three parts (Cephes' split: exact
  // products for |x| <= 8192), Cephes sinf / cosf polynomials on [-pi/4, pi/4], quadrant from n.
  // Lanes with !(|x| <= 8192) (large, inf, NaN) are redone by libm in the caller.
  struct Quadrant {
    F sin_r, cos_r;
    U q;  // n's low bits
  };
  // r = a - n pi/2 (q: n's low bits).
  static KILN_AI F ReduceArg(F a, U* q) {
    const F magic = Splat(12582912.0f);
    const F t = a * 0.636619772367581343f + magic;
    const F n = t - magic;
    *q = Bits(t) - Bits(magic);
    F r = a - n * 1.5703125f;
    r = r - n * 4.837512969970703125e-4f;
    return r - n * 7.54978995489188216e-8f;
  }
  static KILN_AI Quadrant Reduce(F a) {
    U q;
    const F r = ReduceArg(a, &q);
    const F z = r * r;
    F s = Splat(-1.9515295891e-4f);
    s = s * z + 8.3321608736e-3f;
    s = s * z - 1.6666654611e-1f;
    s = s * z * r + r;
    F c = Splat(2.443315711809948e-5f);
    c = c * z - 1.388731625493765e-3f;
    c = c * z + 4.166664568298827e-2f;
    c = c * z * z - 0.5f * z + 1.0f;
    return {s, c, q};
  }
  template <bool kCos>
  static KILN_AI F SinCos(F x) {
    const Quadrant r = Reduce(Abs(x));
    U q = r.q;
    if constexpr (kCos) q = q + 1u;
    F y = Sel((q & 1u) != 0u, r.cos_r, r.sin_r);
    U sign = (q & 2u) << 30;
    if constexpr (!kCos) sign = sign ^ (Bits(x) & 0x80000000u);
    return FromBits(Bits(y) ^ sign);
  }
  // tan(|x|) = sin r / cos r for even n, -cos r / sin r for odd n (period pi); odd in x.
  static KILN_AI F Tan(F x) {
    const Quadrant r = Reduce(Abs(x));
    const I odd = (r.q & 1u) != 0u;
    const F t = Sel(odd, -r.cos_r, r.sin_r) / Sel(odd, r.sin_r, r.cos_r);
    return FromBits(Bits(t) ^ (Bits(x) & 0x80000000u));
  }
};

// Map ops: Apply<VB>(x, params) on one vector; kFix ops also say which lanes libm redoes.
struct Par {
  float a = 0, b = 0;
  bool flag = false;
};

template <int VB>
KILN_AI typename VM<VB>::F HardClamp(typename VM<VB>::F t) {
  using M = VM<VB>;
  // std::max(0, std::min(1, t)) exactly: min(1, NaN) is 1.
  const typename M::F m = M::Sel(t < 1.0f, t, M::Splat(1.0f));
  return M::Sel(m > 0.0f, m, typename M::F{});
}

// Compare-and-replace: NaN kept, lo > hi gives hi.
template <int VB>
KILN_AI typename VM<VB>::F ClipV(typename VM<VB>::F x, float lo, float hi) {
  using M = VM<VB>;
  x = M::Sel(x < lo, M::Splat(lo), x);
  return M::Sel(x > hi, M::Splat(hi), x);
}

// log(1 + exp(x)) as max(x, 0) + log1p(exp(-|x|)), nothing overflowing; log1p(e) as
// log(u) e / (u - 1) with u = 1 + e (e itself where u rounds to 1), which keeps its relative
// accuracy where e is tiny (softplus of a very negative x).
template <int VB>
KILN_AI typename VM<VB>::F SoftplusV(typename VM<VB>::F x) {
  using M = VM<VB>;
  const typename M::F e = M::Exp(-M::Abs(x));
  const typename M::F u = 1.0f + e;
  const typename M::F l = M::Sel(u == 1.0f, e, M::Log(u) * e / (u - 1.0f));
  return M::Sel(x > 0.0f, x, typename M::F{}) + l;
}

// cosh(x) = h + 1 / (4 h) with h = e^|x| / 2, no cancellation (both terms positive); from |x|
// = 88, where e^|x| overflows before cosh does, h = e^(|x| - 1) (e / 2) (|x| - 1 is exact there).
template <int VB>
KILN_AI typename VM<VB>::F CoshV(typename VM<VB>::F x) {
  using M = VM<VB>;
  const typename M::F a = M::Abs(x);
  const typename M::F h =
      M::Sel(a < 88.0f, M::Exp(a) * 0.5f, M::Exp(a - 1.0f) * 1.35914091422952261768f);
  return h + 0.25f / h;
}

// sinh(x): below |x| = 1/2 its Taylor series to x^11 (the next term under 1e-12 relative), else
// sign(x) (h - 1 / (4 h)) as in CoshV (at 1/2 the difference loses under 2 bits).
template <int VB>
KILN_AI typename VM<VB>::F SinhV(typename VM<VB>::F x) {
  using M = VM<VB>;
  const typename M::F a = M::Abs(x), x2 = x * x;
  const typename M::F series =
      x + x * x2 *
              (1.0f / 6 + x2 * (1.0f / 120 + x2 * (1.0f / 5040 +
                                                   x2 * (1.0f / 362880 + x2 * (1.0f / 39916800)))));
  const typename M::F h =
      M::Sel(a < 88.0f, M::Exp(a) * 0.5f, M::Exp(a - 1.0f) * 1.35914091422952261768f);
  return M::Sel(a < 0.5f, series, M::CopySign(h - 0.25f / h, x));
}

#define KILN_VM_OP(NAME, EXPR)                                                    \
  struct NAME {                                                                   \
    static constexpr bool kFix = false;                                           \
    template <int VB>                                                             \
    static KILN_AI typename VM<VB>::F Apply(typename VM<VB>::F x, const Par& p) { \
      using M [[maybe_unused]] = VM<VB>;                                          \
      (void)p;                                                                    \
      return EXPR;                                                                \
    }                                                                             \
    template <int VB>                                                             \
    static KILN_AI typename VM<VB>::U Served(typename VM<VB>::F) {                \
      return {};                                                                  \
    }                                                                             \
    static float Scalar(float x) { return x; }                                    \
  };

KILN_VM_OP(ExpOp, M::Exp(x))
KILN_VM_OP(LogOp, M::Log(x))
KILN_VM_OP(SigmoidOp, M::Sigmoid(x))
KILN_VM_OP(SwishOp, x* M::Sigmoid(x* p.a))
KILN_VM_OP(TanhOp, M::Tanh(x))
KILN_VM_OP(ErfOp, M::Erf(x))
KILN_VM_OP(GeluTanhOp,
           0.5f * x * (1.0f + M::Tanh(0.79788456080286535588f * (x + 0.044715f * x * x * x))))
KILN_VM_OP(SoftplusOp, SoftplusV<VB>(x))
KILN_VM_OP(MishOp, x* M::Tanh(SoftplusV<VB>(x)))
KILN_VM_OP(ReluOp, M::Sel(x > 0.0f, x, typename M::F{}))
KILN_VM_OP(EluOp, M::Sel(x < 0.0f, M::Expm1(x) * p.a, x))
KILN_VM_OP(SeluOp, M::Sel(x > 0.0f, x* p.b, M::Expm1(x) * (p.a * p.b)))
KILN_VM_OP(CeluOp, M::Sel(x > 0.0f, x, M::Expm1(x / p.a) * p.a))
KILN_VM_OP(LeakyReluOp, M::Sel(x < 0.0f, x* p.a, x))
KILN_VM_OP(ClipOp, ClipV<VB>(x, p.a, p.b))
KILN_VM_OP(HardSwishOp, x* HardClamp<VB>(x / 6.0f + 0.5f))
KILN_VM_OP(SqrtOp, M::Sqrt(x))
KILN_VM_OP(FloorOp, M::Floor(x))
KILN_VM_OP(CeilOp, M::Ceil(x))
KILN_VM_OP(RoundOp, M::Nearbyint(x))
KILN_VM_OP(AtanOp, M::Atan(x))
KILN_VM_OP(AsinOp, M::Asin(x))
KILN_VM_OP(AcosOp, M::Acos(x))
KILN_VM_OP(CoshOp, CoshV<VB>(x))
KILN_VM_OP(SinhOp, SinhV<VB>(x))
#undef KILN_VM_OP

// kFix ops: Served(x) is all-ones on the lanes the vector path is accurate for; libm redoes the
// others (Scalar).
template <bool kCos>
struct SinCosOp {
  static constexpr bool kFix = true;
  template <int VB>
  static KILN_AI typename VM<VB>::F Apply(typename VM<VB>::F x, const Par&) {
    return VM<VB>::template SinCos<kCos>(x);
  }
  template <int VB>
  static KILN_AI typename VM<VB>::U Served(typename VM<VB>::F x) {
    return (typename VM<VB>::U)(VM<VB>::Abs(x) <= 8192.0f);
  }
  static float Scalar(float x) { return kCos ? std::cos(x) : std::sin(x); }
};

struct TanOp {
  static constexpr bool kFix = true;
  template <int VB>
  static KILN_AI typename VM<VB>::F Apply(typename VM<VB>::F x, const Par&) {
    return VM<VB>::Tan(x);
  }
  // Near a zero or a pole of tan (r small), its relative error is the reduction's absolute error
  // (up to about 3e-13 for |x| <= 128) over r: libm takes |r| < 1e-4 (one random lane in 8000)
  // and |x| beyond 128.
  template <int VB>
  static KILN_AI typename VM<VB>::U Served(typename VM<VB>::F x) {
    using M = VM<VB>;
    typename M::U q;
    const typename M::F a = M::Abs(x);
    const typename M::F r = M::ReduceArg(a, &q);
    return (typename M::U)(a <= 128.0f) & (typename M::U)(M::Abs(r) >= 1e-4f);
  }
  static float Scalar(float x) { return std::tan(x); }
};

// GELU below x = -2, where 1 + erf(x / sqrt 2) cancels (the vector erf is a few ulp near -1):
// with z = -x / sqrt 2, x erfc(z) / 2 = -e^(-z^2) G(z) / sqrt 2, G(z) = z e^(z^2) erfc(z) smooth
// and near 1 / sqrt(pi); Q(u) = G / sqrt 2 is a degree-10 polynomial in u = 1 / z^2 = 2 / x^2
// around u = 0.2554 (fitted for z in [sqrt 2, 9.6], relative error 1.3e-8). z^2 = x^2 / 2 is
// kept exact: x^2 = xh^2 + (x - xh)(x + xh) with xh x's top 12 bits, so xh^2 is exact and the
// rest goes into exp's reduced argument (ExpOf). Below -20 the result is -0 (underflow).
template <int VB>
KILN_AI typename VM<VB>::F GeluTail(typename VM<VB>::F x) {
  using M = VM<VB>;
  const typename M::F xh = M::FromBits(M::Bits(x) & 0xfffff000u);
  const typename M::F e = M::template ExpOf<true>(xh * xh * -0.5f, (x - xh) * (x + xh) * -0.5f);
  const typename M::F w = 2.0f / (x * x) - 0.25542533f;
  typename M::F q = M::Splat(1.039446163e+01f);
  q = q * w - 4.230229855e+00f;
  q = q * w + 3.699679375e-01f;
  q = q * w - 3.560959101e-01f;
  q = q * w + 3.260130584e-01f;
  q = q * w - 1.926323920e-01f;
  q = q * w + 1.268057078e-01f;
  q = q * w - 9.767346084e-02f;
  q = q * w + 9.072120488e-02f;
  q = q * w - 1.172431409e-01f;
  q = q * w + 3.605452478e-01f;
  return M::Sel(x < -20.0f, x * 0.0f, -(e * q));  // -inf: NaN, as -inf * erfc(inf)
}

struct GeluErfOp {
  static constexpr bool kFix = false;
  template <int VB>
  static KILN_AI typename VM<VB>::F Apply(typename VM<VB>::F x, const Par&) {
    using M = VM<VB>;
    typename M::F y = 0.5f * x * (1.0f + M::Erf(x * 0.70710678118654752440f));
    const typename M::I tail = x < -2.0f;
    uint32_t any = 0;
    for (int l = 0; l < M::L; ++l) any |= static_cast<uint32_t>(tail[l]);
    if (any) y = M::Sel(tail, GeluTail<VB>(x), y);
    return y;
  }
  static float Scalar(float x) { return x; }
};

struct HardSigmoidOp {
  static constexpr bool kFix = false;
  template <int VB>
  static KILN_AI typename VM<VB>::F Apply(typename VM<VB>::F x, const Par& p) {
    return HardClamp<VB>(x * p.a + p.b);
  }
  static float Scalar(float x) { return x; }
};

template <int VB, class Op>
KILN_AI void MapBlock(const float* x, float* y, const Par& p) {
  using M = VM<VB>;
  const typename M::F v = M::Load(x);
  typename M::F r = Op::template Apply<VB>(v, p);
  if constexpr (Op::kFix) {
    const typename M::U ok = Op::template Served<VB>(v);
    uint32_t any = 0;
    for (int l = 0; l < M::L; ++l) any |= ~ok[l];
    if (any) {
      float xs[M::L], ys[M::L];
      M::Store(xs, v);
      M::Store(ys, r);
      for (int l = 0; l < M::L; ++l)
        if (!ok[l]) ys[l] = Op::Scalar(xs[l]);
      r = M::Load(ys);
    }
  }
  M::Store(y, r);
}

template <int VB, class Op>
KILN_AI void MapBlock2(const float* x, float* y, const Par& p) {
  using M = VM<VB>;
  if constexpr (Op::kFix) {
    MapBlock<VB, Op>(x, y, p);
    MapBlock<VB, Op>(x + M::L, y + M::L, p);
  } else {
    const typename M::F v0 = M::Load(x), v1 = M::Load(x + M::L);
    const typename M::F r0 = Op::template Apply<VB>(v0, p), r1 = Op::template Apply<VB>(v1, p);
    M::Store(y, r0);
    M::Store(y + M::L, r1);
  }
}

template <int VB, class Op>
KILN_AI void MapBody(const float* x, float* y, int64_t n, const Par& par) {
  constexpr int L = VM<VB>::L;
  const Par p = par;  // a local copy: stores to y cannot change it, so its splats leave the loop
  int64_t i = 0;
  for (; i + 2 * L <= n; i += 2 * L) MapBlock2<VB, Op>(x + i, y + i, p);
  for (; i + L <= n; i += L) MapBlock<VB, Op>(x + i, y + i, p);
  if (i < n) {
    float in[L] = {}, out[L];
    const size_t rem = static_cast<size_t>(n - i) * sizeof(float);
    std::memcpy(in, x + i, rem);
    MapBlock<VB, Op>(in, out, p);
    std::memcpy(y + i, out, rem);
  }
}

template <class Op>
void MapBase(const float* x, float* y, int64_t n, const Par& p) {
  MapBody<16, Op>(x, y, n, p);
}
#if KILN_X86_DISPATCH
template <class Op>
__attribute__((target("avx2,fma"))) void MapAvx2(const float* x, float* y, int64_t n,
                                                 const Par& p) {
  MapBody<32, Op>(x, y, n, p);
}
template <class Op>
__attribute__((target("avx512f,fma"))) void MapAvx512(const float* x, float* y, int64_t n,
                                                      const Par& p) {
  MapBody<64, Op>(x, y, n, p);
}
#endif

template <class Op>
void Map(const float* x, float* y, int64_t n, const Par& p, Isa isa) {
  if (n <= 0) return;
  switch (ResolveIsa(isa)) {
#if KILN_X86_DISPATCH
    case Isa::kAvx512:
      return MapAvx512<Op>(x, y, n, p);
    case Isa::kAvx2:
      return MapAvx2<Op>(x, y, n, p);
#endif
    default:
      return MapBase<Op>(x, y, n, p);
  }
}

// Binary ops: op is a template argument so each loop is one straight vector body.
// M: the VM type of vector T (for kMaxSkipNaN's selects).
template <VecBinOp kOp, class M = void, class T>
KILN_AI T BinOp(T a, T b) {
  if constexpr (kOp == VecBinOp::kAdd)
    return a + b;
  else if constexpr (kOp == VecBinOp::kSub)
    return a - b;
  else if constexpr (kOp == VecBinOp::kMul)
    return a * b;
  else if constexpr (kOp == VecBinOp::kDiv)
    return a / b;
  else if constexpr (std::is_same_v<T, float>)
    return b > a || a != a ? b : a;
  else
    return M::Sel(b > a, b, M::Sel(a != a, b, a));
}

// mode 0: a[i] op b[i]; 1: s op b[i]; 2: b[i] op s.
template <int VB, VecBinOp kOp, int kMode>
KILN_AI void BinBody(const float* a, float s, const float* b, float* o, int64_t n) {
  using M = VM<VB>;
  constexpr int L = M::L;
  const typename M::F sv = M::Splat(s);
  int64_t i = 0;
  for (; i + L <= n; i += L) {
    const typename M::F vb = M::Load(b + i);
    typename M::F r;
    if constexpr (kMode == 0)
      r = BinOp<kOp, M>(M::Load(a + i), vb);
    else if constexpr (kMode == 1)
      r = BinOp<kOp, M>(sv, vb);
    else
      r = BinOp<kOp, M>(vb, sv);
    M::Store(o + i, r);
  }
  for (; i < n; ++i) {
    if constexpr (kMode == 0)
      o[i] = BinOp<kOp>(a[i], b[i]);
    else if constexpr (kMode == 1)
      o[i] = BinOp<kOp>(s, b[i]);
    else
      o[i] = BinOp<kOp>(b[i], s);
  }
}

template <int VB, int kMode>
KILN_AI void BinSwitch(VecBinOp op, const float* a, float s, const float* b, float* o, int64_t n) {
  switch (op) {
    case VecBinOp::kAdd:
      return BinBody<VB, VecBinOp::kAdd, kMode>(a, s, b, o, n);
    case VecBinOp::kSub:
      return BinBody<VB, VecBinOp::kSub, kMode>(a, s, b, o, n);
    case VecBinOp::kMul:
      return BinBody<VB, VecBinOp::kMul, kMode>(a, s, b, o, n);
    case VecBinOp::kDiv:
      return BinBody<VB, VecBinOp::kDiv, kMode>(a, s, b, o, n);
    case VecBinOp::kMaxSkipNaN:
      return BinBody<VB, VecBinOp::kMaxSkipNaN, kMode>(a, s, b, o, n);
  }
}

template <int kMode>
void BinBase(VecBinOp op, const float* a, float s, const float* b, float* o, int64_t n) {
  BinSwitch<16, kMode>(op, a, s, b, o, n);
}
#if KILN_X86_DISPATCH
template <int kMode>
__attribute__((target("avx2,fma"))) void BinAvx2(VecBinOp op, const float* a, float s,
                                                 const float* b, float* o, int64_t n) {
  BinSwitch<32, kMode>(op, a, s, b, o, n);
}
template <int kMode>
__attribute__((target("avx512f,fma"))) void BinAvx512(VecBinOp op, const float* a, float s,
                                                      const float* b, float* o, int64_t n) {
  BinSwitch<64, kMode>(op, a, s, b, o, n);
}
#endif

template <int kMode>
void Bin(VecBinOp op, const float* a, float s, const float* b, float* o, int64_t n, Isa isa) {
  if (n <= 0) return;
  switch (ResolveIsa(isa)) {
#if KILN_X86_DISPATCH
    case Isa::kAvx512:
      return BinAvx512<kMode>(op, a, s, b, o, n);
    case Isa::kAvx2:
      return BinAvx2<kMode>(op, a, s, b, o, n);
#endif
    default:
      return BinBase<kMode>(op, a, s, b, o, n);
  }
}

// Reductions: lane-wise accumulators, then the lanes in index order (deterministic per ISA).
template <int VB>
KILN_AI float MaxBody(const float* x, int64_t n) {
  using M = VM<VB>;
  constexpr int L = M::L;
  float m = x[0];
  int64_t i = 0;
  if (n >= L) {
    typename M::F acc = M::Load(x);
    for (i = L; i + L <= n; i += L) {
      const typename M::F v = M::Load(x + i);
      acc = M::Sel(acc < v, v, M::Sel(acc != acc, acc, M::Sel(v != v, v, acc)));
    }
    m = acc[0];
    for (int l = 1; l < L; ++l) m = (m < acc[l] || acc[l] != acc[l]) ? acc[l] : m;
  }
  for (; i < n; ++i) m = (m < x[i] || x[i] != x[i]) ? x[i] : m;
  return m;
}

template <int VB>
KILN_AI float ExpSubSumBody(const float* x, float* y, int64_t n, float mx) {
  using M = VM<VB>;
  constexpr int L = M::L;
  typename M::F acc{};
  int64_t i = 0;
  for (; i + L <= n; i += L) {
    const typename M::F e = M::ExpOrZero(M::Load(x + i) - mx);
    acc += e;
    M::Store(y + i, e);
  }
  if (i < n) {
    float in[L] = {}, out[L];
    const int rem = static_cast<int>(n - i);
    std::memcpy(in, x + i, static_cast<size_t>(rem) * sizeof(float));
    typename M::F e = M::ExpOrZero(M::Load(in) - mx);
    M::Store(out, e);
    for (int l = rem; l < L; ++l) out[l] = 0.0f;
    acc += M::Load(out);
    std::memcpy(y + i, out, static_cast<size_t>(rem) * sizeof(float));
  }
  float s = 0.0f;
  for (int l = 0; l < L; ++l) s += acc[l];
  return s;
}

template <int VB>
KILN_AI float SumBody(const float* x, int64_t n) {
  using M = VM<VB>;
  constexpr int L = M::L;
  typename M::F acc{};
  int64_t i = 0;
  for (; i + L <= n; i += L) acc += M::Load(x + i);
  float s = 0.0f;
  for (int l = 0; l < L; ++l) s += acc[l];
  for (; i < n; ++i) s += x[i];
  return s;
}

float SumBase(const float* x, int64_t n) { return SumBody<16>(x, n); }
#if KILN_X86_DISPATCH
__attribute__((target("avx2,fma"))) float SumAvx2(const float* x, int64_t n) {
  return SumBody<32>(x, n);
}
__attribute__((target("avx512f,fma"))) float SumAvx512(const float* x, int64_t n) {
  return SumBody<64>(x, n);
}
#endif

// Softmax over rows of len floats, one function per ISA: max (two chains; a NaN needs no care:
// it makes the sum, and so every output of its row, NaN), exp(x - max) and its sum, a scale.
template <int VB>
KILN_AI void SoftmaxRowsBody(const float* x, float* y, int64_t rows, int64_t len) {
  using M = VM<VB>;
  constexpr int L = M::L;
  for (int64_t r = 0; r < rows; ++r, x += len, y += len) {
    float m = x[0];
    int64_t i = 0;
    if (len >= 2 * L) {
      typename M::F a = M::Load(x), b = M::Load(x + L);
      for (i = 2 * L; i + 2 * L <= len; i += 2 * L) {
        const typename M::F v = M::Load(x + i), w = M::Load(x + i + L);
        a = M::Sel(a < v, v, a);
        b = M::Sel(b < w, w, b);
      }
      a = M::Sel(a < b, b, a);
      m = a[0];
      for (int l = 1; l < L; ++l) m = m < a[l] ? a[l] : m;
    }
    for (; i < len; ++i) m = m < x[i] ? x[i] : m;
    const float scale = 1.0f / ExpSubSumBody<VB>(x, y, len, m);
    const typename M::F s = M::Splat(scale);
    int64_t k = 0;
    for (; k + L <= len; k += L) M::Store(y + k, M::Load(y + k) * s);
    for (; k < len; ++k) y[k] *= scale;
  }
}

void SoftmaxRowsBase(const float* x, float* y, int64_t rows, int64_t len) {
  SoftmaxRowsBody<16>(x, y, rows, len);
}
#if KILN_X86_DISPATCH
// e^a for a <= 0 (softmax's x - max, the sigmoids' -|t|): the Cephes polynomial of VM::Exp with
// vscalefps applying 2^n, denormals included; a is clamped where e^a underflows to 0 (vmaxps
// keeps a NaN: it returns its second operand).
__attribute__((target("avx512f,fma"), always_inline)) inline __m512 ExpNonPositive16(__m512 a) {
  a = _mm512_max_ps(_mm512_set1_ps(-104.0f), a);
  const __m512 k = _mm512_roundscale_ps(_mm512_mul_ps(a, _mm512_set1_ps(1.44269504088896341f)),
                                        _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m512 r = _mm512_fnmadd_ps(k, _mm512_set1_ps(0.693359375f), a);
  r = _mm512_fnmadd_ps(k, _mm512_set1_ps(-2.12194440e-4f), r);
  __m512 p = _mm512_set1_ps(1.9875691500e-4f);
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.3981999507e-3f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(8.3334519073e-3f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(4.1665795894e-2f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.6666665459e-1f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(5.0000001201e-1f));
  p = _mm512_add_ps(_mm512_fmadd_ps(p, _mm512_mul_ps(r, r), r), _mm512_set1_ps(1.0f));
  return _mm512_scalef_ps(p, k);
}

// e^a for a <= 0, where e^a is below FLT_MIN (a < -87.34) as 0: softmax probabilities that
// small are zeros whatever the row's sum, and making them as denormals costs a microcode assist
// per vector on Intel cores (an attention mask's -10000 filled half of every row with them: 3M
// elements took 8 ms). A NaN stays NaN (vcmpps NLT_UQ is true for it, vmaxps returns it).
__attribute__((target("avx512f,fma"), always_inline)) inline __m512 ExpNonPositiveOrZero16(
    __m512 a) {
  const __m512 lowest = _mm512_set1_ps(-87.3365f);
  const __mmask16 normal = _mm512_cmp_ps_mask(a, lowest, _CMP_NLT_UQ);
  return _mm512_maskz_mov_ps(normal, ExpNonPositive16(_mm512_max_ps(lowest, a)));
}

// Softmax rows with AVX-512 instructions the vector extensions cannot spell: exp(x - max) by
// ExpNonPositiveOrZero16, and masked loads for the tail of a row instead of copies. A NaN makes
// its row NaN.
__attribute__((target("avx512f,fma"))) void SoftmaxRowsAvx512(const float* x, float* y,
                                                              int64_t rows, int64_t len) {
  const int64_t full = len / 16 * 16;
  const __mmask16 tail = static_cast<__mmask16>((1u << (len - full)) - 1);
  const __m512 lowest = _mm512_set1_ps(-std::numeric_limits<float>::infinity());
  for (int64_t row = 0; row < rows; ++row, x += len, y += len) {
    __m512 mx = _mm512_mask_loadu_ps(lowest, tail, x + full);
    for (int64_t i = 0; i < full; i += 16) mx = _mm512_max_ps(mx, _mm512_loadu_ps(x + i));
    const __m512 m = _mm512_set1_ps(_mm512_reduce_max_ps(mx));
    __m512 sum = _mm512_setzero_ps();
    for (int64_t i = 0; i < full; i += 16) {
      const __m512 e = ExpNonPositiveOrZero16(_mm512_sub_ps(_mm512_loadu_ps(x + i), m));
      _mm512_storeu_ps(y + i, e);
      sum = _mm512_add_ps(sum, e);
    }
    if (tail) {
      const __m512 e =
          ExpNonPositiveOrZero16(_mm512_sub_ps(_mm512_maskz_loadu_ps(tail, x + full), m));
      _mm512_mask_storeu_ps(y + full, tail, e);
      sum = _mm512_mask_add_ps(sum, tail, sum, e);
    }
    const __m512 scale = _mm512_set1_ps(1.0f / _mm512_reduce_add_ps(sum));
    for (int64_t i = 0; i < full; i += 16)
      _mm512_storeu_ps(y + i, _mm512_mul_ps(_mm512_loadu_ps(y + i), scale));
    if (tail)
      _mm512_mask_storeu_ps(y + full, tail,
                            _mm512_mul_ps(_mm512_maskz_loadu_ps(tail, y + full), scale));
  }
}
#endif

float MaxBase(const float* x, int64_t n) { return MaxBody<16>(x, n); }
float ExpSubSumBase(const float* x, float* y, int64_t n, float m) {
  return ExpSubSumBody<16>(x, y, n, m);
}
#if KILN_X86_DISPATCH
__attribute__((target("avx2,fma"))) float MaxAvx2(const float* x, int64_t n) {
  return MaxBody<32>(x, n);
}
__attribute__((target("avx512f,fma"))) float MaxAvx512(const float* x, int64_t n) {
  return MaxBody<64>(x, n);
}
__attribute__((target("avx512f,fma"))) float ExpSubSumAvx512(const float* x, float* y, int64_t n,
                                                             float m) {
  return ExpSubSumBody<64>(x, y, n, m);
}
#endif

#if KILN_X86_DISPATCH
// sigmoid(a x) (kSwish: x sigmoid(a x)) with AVX-512 instructions the vector extensions cannot
// spell: exp(-|t|) by the Cephes polynomial of VM::Exp with vscalefps applying 2^n (denormals
// included), and 1 / (1 + e) by rcp14 and one Newton step instead of a division; compares go to
// mask registers. About twice the throughput of Map<SigmoidOp>.
template <bool kSwish>
__attribute__((target("avx512f,fma"), always_inline)) inline __m512 SigmoidFamily16(__m512 v,
                                                                                    float alpha) {
  const __m512 t = kSwish ? _mm512_mul_ps(v, _mm512_set1_ps(alpha)) : v;
  const __m512 e = ExpNonPositive16(_mm512_castsi512_ps(_mm512_or_epi32(
      _mm512_castps_si512(t), _mm512_set1_epi32(static_cast<int>(0x80000000u)))));  // e^-|t|
  const __m512 one = _mm512_set1_ps(1.0f);
  const __m512 den = _mm512_add_ps(e, one);
  __m512 q = _mm512_rcp14_ps(den);
  q = _mm512_mul_ps(q, _mm512_fnmadd_ps(den, q, _mm512_set1_ps(2.0f)));
  const __m512 sg = _mm512_mask_blend_ps(_mm512_cmp_ps_mask(t, _mm512_setzero_ps(), _CMP_GE_OQ),
                                         _mm512_mul_ps(e, q), q);
  return kSwish ? _mm512_mul_ps(v, sg) : sg;
}

template <bool kSwish>
__attribute__((target("avx512f,fma"))) void SigmoidFamilyAvx512(const float* x, float* y, int64_t n,
                                                                float alpha) {
  int64_t i = 0;
  for (; i + 16 <= n; i += 16)
    _mm512_storeu_ps(y + i, SigmoidFamily16<kSwish>(_mm512_loadu_ps(x + i), alpha));
  if (i < n) {
    const __mmask16 m = static_cast<__mmask16>((1u << (n - i)) - 1);
    _mm512_mask_storeu_ps(y + i, m,
                          SigmoidFamily16<kSwish>(_mm512_maskz_loadu_ps(m, x + i), alpha));
  }
}

// The same with AVX2: 2^n as two power-of-two factors (each a normal float for n >= -150, so
// their product is 2^n exactly, a denormal below -126, and p 2^n rounds once, as vscalefps
// does), made beside the polynomial, which is evaluated Estrin-style (three dependent FMAs
// instead of six), and a division. The FMA pipes bound it: 0.69 -> 0.60 ns an element on Zen 3.
__attribute__((target("avx2,fma"), always_inline)) inline __m256 PowerOfTwo8(__m256i e) {
  return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(e, _mm256_set1_epi32(127)), 23));
}

__attribute__((target("avx2,fma"), always_inline)) inline __m256 ExpNonPositive8(__m256 a) {
  a = _mm256_max_ps(_mm256_set1_ps(-104.0f), a);
  const __m256 k = _mm256_round_ps(_mm256_mul_ps(a, _mm256_set1_ps(1.44269504088896341f)),
                                   _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m256 r = _mm256_fnmadd_ps(k, _mm256_set1_ps(0.693359375f), a);
  r = _mm256_fnmadd_ps(k, _mm256_set1_ps(-2.12194440e-4f), r);
  const __m256i n = _mm256_cvtps_epi32(k), half = _mm256_srai_epi32(n, 1);
  const __m256 scale = _mm256_mul_ps(PowerOfTwo8(half), PowerOfTwo8(_mm256_sub_epi32(n, half)));
  const __m256 r2 = _mm256_mul_ps(r, r);
  const __m256 c54 =
      _mm256_fmadd_ps(_mm256_set1_ps(1.9875691500e-4f), r, _mm256_set1_ps(1.3981999507e-3f));
  const __m256 c32 =
      _mm256_fmadd_ps(_mm256_set1_ps(8.3334519073e-3f), r, _mm256_set1_ps(4.1665795894e-2f));
  const __m256 c10 =
      _mm256_fmadd_ps(_mm256_set1_ps(1.6666665459e-1f), r, _mm256_set1_ps(5.0000001201e-1f));
  __m256 p = _mm256_fmadd_ps(_mm256_fmadd_ps(c54, r2, c32), r2, c10);
  p = _mm256_fmadd_ps(p, r2, _mm256_add_ps(r, _mm256_set1_ps(1.0f)));
  return _mm256_mul_ps(p, scale);
}

// sigmoid: q = 1 / (1 + e) for t >= 0, e q below; Swish multiplies v in before q.
template <bool kSwish>
__attribute__((target("avx2,fma"), always_inline)) inline __m256 SigmoidFamily8(__m256 v,
                                                                                float alpha) {
  const __m256 t = kSwish ? _mm256_mul_ps(v, _mm256_set1_ps(alpha)) : v;
  const __m256 e = ExpNonPositive8(_mm256_or_ps(t, _mm256_set1_ps(-0.0f)));  // e^-|t|
  const __m256 q = _mm256_div_ps(_mm256_set1_ps(1.0f), _mm256_add_ps(e, _mm256_set1_ps(1.0f)));
  const __m256 u = kSwish ? v : _mm256_set1_ps(1.0f);
  const __m256 num = _mm256_blendv_ps(u, _mm256_mul_ps(u, e), t);  // by t's sign (-0: e is 1)
  return _mm256_mul_ps(num, q);
}

// ExpNonPositive8 with e^a below FLT_MIN as 0, made without a denormal (ExpNonPositiveOrZero16).
__attribute__((target("avx2,fma"), always_inline)) inline __m256 ExpNonPositiveOrZero8(__m256 a) {
  const __m256 lowest = _mm256_set1_ps(-87.3365f);
  return _mm256_and_ps(ExpNonPositive8(_mm256_max_ps(lowest, a)),
                       _mm256_cmp_ps(a, lowest, _CMP_NLT_UQ));
}

// exp(x - m) into y and its sum, and softmax rows, as the AVX-512 ones do, with
// ExpNonPositiveOrZero8 and masked loads for the tails: vit_tiny's Softmax 0.81 -> 0.4 ms a run on
// Zen 3 (the generic exp took 1.2 ns an element).
__attribute__((target("avx2,fma"))) __m256 ExpSubSum8(const float* x, float* y, int64_t n,
                                                      __m256 m) {
  const int64_t full = n / 8 * 8;
  __m256 sum = _mm256_setzero_ps();
  for (int64_t i = 0; i < full; i += 8) {
    const __m256 e = ExpNonPositiveOrZero8(_mm256_sub_ps(_mm256_loadu_ps(x + i), m));
    _mm256_storeu_ps(y + i, e);
    sum = _mm256_add_ps(sum, e);
  }
  if (full < n) {
    const __m256i tail = _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int>(n - full)),
                                            _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
    const __m256 e =
        _mm256_and_ps(ExpNonPositiveOrZero8(_mm256_sub_ps(_mm256_maskload_ps(x + full, tail), m)),
                      _mm256_castsi256_ps(tail));
    _mm256_maskstore_ps(y + full, tail, e);
    sum = _mm256_add_ps(sum, e);
  }
  return sum;
}

__attribute__((target("avx2,fma"))) float HorizontalSum8(__m256 v) {
  __m128 a = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  a = _mm_add_ps(a, _mm_movehl_ps(a, a));
  return _mm_cvtss_f32(_mm_add_ss(a, _mm_shuffle_ps(a, a, 1)));
}

__attribute__((target("avx2,fma"))) float ExpSubSumAvx2(const float* x, float* y, int64_t n,
                                                        float m) {
  return HorizontalSum8(ExpSubSum8(x, y, n, _mm256_set1_ps(m)));
}

__attribute__((target("avx2,fma"))) void SoftmaxRowsAvx2(const float* x, float* y, int64_t rows,
                                                         int64_t len) {
  const int64_t full = len / 8 * 8;
  const __m256i tail = _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int>(len - full)),
                                          _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
  const __m256 lowest = _mm256_set1_ps(-std::numeric_limits<float>::infinity());
  for (int64_t row = 0; row < rows; ++row, x += len, y += len) {
    // The max in two chains (a NaN needs no care: it makes the sum, and its row, NaN).
    __m256 a =
        _mm256_blendv_ps(lowest, _mm256_maskload_ps(x + full, tail), _mm256_castsi256_ps(tail));
    __m256 b = lowest;
    int64_t i = 0;
    for (; i + 16 <= full; i += 16) {
      a = _mm256_max_ps(a, _mm256_loadu_ps(x + i));
      b = _mm256_max_ps(b, _mm256_loadu_ps(x + i + 8));
    }
    if (i < full) a = _mm256_max_ps(a, _mm256_loadu_ps(x + i));
    a = _mm256_max_ps(a, b);
    __m128 h = _mm_max_ps(_mm256_castps256_ps128(a), _mm256_extractf128_ps(a, 1));
    h = _mm_max_ps(h, _mm_movehl_ps(h, h));
    const float m = _mm_cvtss_f32(_mm_max_ss(h, _mm_shuffle_ps(h, h, 1)));
    const __m256 scale =
        _mm256_set1_ps(1.0f / HorizontalSum8(ExpSubSum8(x, y, len, _mm256_set1_ps(m))));
    for (int64_t i = 0; i < full; i += 8)
      _mm256_storeu_ps(y + i, _mm256_mul_ps(_mm256_loadu_ps(y + i), scale));
    for (int64_t i = full; i < len; ++i) y[i] *= scale[0];
  }
}

template <bool kSwish>
__attribute__((target("avx2,fma"))) void SigmoidFamilyAvx2(const float* x, float* y, int64_t n,
                                                           float alpha) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm256_storeu_ps(y + i, SigmoidFamily8<kSwish>(_mm256_loadu_ps(x + i), alpha));
  if (i < n) {
    const __m256i m = _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int>(n - i)),
                                         _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
    _mm256_maskstore_ps(y + i, m, SigmoidFamily8<kSwish>(_mm256_maskload_ps(x + i, m), alpha));
  }
}
#endif

}  // namespace

void ExpF32(const float* x, float* y, int64_t n, Isa isa) { Map<ExpOp>(x, y, n, {}, isa); }
void LogF32(const float* x, float* y, int64_t n, Isa isa) { Map<LogOp>(x, y, n, {}, isa); }
void SigmoidF32(const float* x, float* y, int64_t n, Isa isa) {
#if KILN_X86_DISPATCH
  if (n > 0 && ResolveIsa(isa) == Isa::kAvx512) return SigmoidFamilyAvx512<false>(x, y, n, 1.0f);
  if (n > 0 && ResolveIsa(isa) == Isa::kAvx2) return SigmoidFamilyAvx2<false>(x, y, n, 1.0f);
#endif
  Map<SigmoidOp>(x, y, n, {}, isa);
}
void SwishF32(const float* x, float* y, int64_t n, float alpha, Isa isa) {
#if KILN_X86_DISPATCH
  if (n > 0 && ResolveIsa(isa) == Isa::kAvx512) return SigmoidFamilyAvx512<true>(x, y, n, alpha);
  if (n > 0 && ResolveIsa(isa) == Isa::kAvx2) return SigmoidFamilyAvx2<true>(x, y, n, alpha);
#endif
  Map<SwishOp>(x, y, n, {alpha, 0, false}, isa);
}

void SwishPixelsF32(float* y, int64_t pixels, int64_t stride, int64_t c0, int64_t c1) {
  if (c0 == 0 && c1 == stride) return SwishF32(y, y, pixels * stride, 1.0f);
  for (int64_t i = 0; i < pixels; ++i)
    SwishF32(y + i * stride + c0, y + i * stride + c0, c1 - c0, 1.0f);
}
void TanhF32(const float* x, float* y, int64_t n, Isa isa) { Map<TanhOp>(x, y, n, {}, isa); }
void SoftplusF32(const float* x, float* y, int64_t n, Isa isa) {
  Map<SoftplusOp>(x, y, n, {}, isa);
}
void MishF32(const float* x, float* y, int64_t n, Isa isa) { Map<MishOp>(x, y, n, {}, isa); }
void ErfF32(const float* x, float* y, int64_t n, Isa isa) { Map<ErfOp>(x, y, n, {}, isa); }
void GeluF32(const float* x, float* y, int64_t n, bool tanh_approx, Isa isa) {
  if (tanh_approx)
    Map<GeluTanhOp>(x, y, n, {}, isa);
  else
    Map<GeluErfOp>(x, y, n, {}, isa);
}
void SinF32(const float* x, float* y, int64_t n, Isa isa) {
  Map<SinCosOp<false>>(x, y, n, {}, isa);
}
void CosF32(const float* x, float* y, int64_t n, Isa isa) { Map<SinCosOp<true>>(x, y, n, {}, isa); }
void TanF32(const float* x, float* y, int64_t n, Isa isa) { Map<TanOp>(x, y, n, {}, isa); }
void CoshF32(const float* x, float* y, int64_t n, Isa isa) { Map<CoshOp>(x, y, n, {}, isa); }
void SinhF32(const float* x, float* y, int64_t n, Isa isa) { Map<SinhOp>(x, y, n, {}, isa); }
void SqrtF32(const float* x, float* y, int64_t n, Isa isa) { Map<SqrtOp>(x, y, n, {}, isa); }
void FloorF32(const float* x, float* y, int64_t n, Isa isa) { Map<FloorOp>(x, y, n, {}, isa); }
void CeilF32(const float* x, float* y, int64_t n, Isa isa) { Map<CeilOp>(x, y, n, {}, isa); }
void RoundF32(const float* x, float* y, int64_t n, Isa isa) { Map<RoundOp>(x, y, n, {}, isa); }
void AtanF32(const float* x, float* y, int64_t n, Isa isa) { Map<AtanOp>(x, y, n, {}, isa); }
void AsinF32(const float* x, float* y, int64_t n, Isa isa) { Map<AsinOp>(x, y, n, {}, isa); }
void AcosF32(const float* x, float* y, int64_t n, Isa isa) { Map<AcosOp>(x, y, n, {}, isa); }
void ReluF32(const float* x, float* y, int64_t n, Isa isa) { Map<ReluOp>(x, y, n, {}, isa); }
void LeakyReluF32(const float* x, float* y, int64_t n, float alpha, Isa isa) {
  Map<LeakyReluOp>(x, y, n, {alpha, 0, false}, isa);
}
void EluF32(const float* x, float* y, int64_t n, float alpha, Isa isa) {
  Map<EluOp>(x, y, n, {alpha, 0, false}, isa);
}
void SeluF32(const float* x, float* y, int64_t n, float alpha, float gamma, Isa isa) {
  Map<SeluOp>(x, y, n, {alpha, gamma, false}, isa);
}
void CeluF32(const float* x, float* y, int64_t n, float alpha, Isa isa) {
  Map<CeluOp>(x, y, n, {alpha, 0, false}, isa);
}
void ClipF32(const float* x, float* y, int64_t n, float lo, float hi, Isa isa) {
  Map<ClipOp>(x, y, n, {lo, hi, false}, isa);
}
void HardSigmoidF32(const float* x, float* y, int64_t n, float alpha, float beta, Isa isa) {
  Map<HardSigmoidOp>(x, y, n, {alpha, beta, false}, isa);
}
void HardSwishF32(const float* x, float* y, int64_t n, Isa isa) {
  Map<HardSwishOp>(x, y, n, {}, isa);
}

void BinaryF32(VecBinOp op, const float* a, const float* b, float* o, int64_t n, Isa isa) {
  Bin<0>(op, a, 0.0f, b, o, n, isa);
}
void BinaryScalarF32(VecBinOp op, float s, const float* b, float* o, int64_t n, bool scalar_first,
                     Isa isa) {
  if (scalar_first)
    Bin<1>(op, nullptr, s, b, o, n, isa);
  else
    Bin<2>(op, nullptr, s, b, o, n, isa);
}

float MaxF32(const float* x, int64_t n, Isa isa) {
  switch (ResolveIsa(isa)) {
#if KILN_X86_DISPATCH
    case Isa::kAvx512:
      return MaxAvx512(x, n);
    case Isa::kAvx2:
      return MaxAvx2(x, n);
#endif
    default:
      return MaxBase(x, n);
  }
}

float SumF32(const float* x, int64_t n, Isa isa) {
  switch (ResolveIsa(isa)) {
#if KILN_X86_DISPATCH
    case Isa::kAvx512:
      return SumAvx512(x, n);
    case Isa::kAvx2:
      return SumAvx2(x, n);
#endif
    default:
      return SumBase(x, n);
  }
}

float ExpSubSumF32(const float* x, float* y, int64_t n, float m, Isa isa) {
  if (n <= 0) return 0.0f;
  switch (ResolveIsa(isa)) {
#if KILN_X86_DISPATCH
    case Isa::kAvx512:
      return ExpSubSumAvx512(x, y, n, m);
    case Isa::kAvx2:
      return ExpSubSumAvx2(x, y, n, m);
#endif
    default:
      return ExpSubSumBase(x, y, n, m);
  }
}

void SoftmaxRowsF32(const float* x, float* y, int64_t rows, int64_t len, Isa isa) {
  if (rows <= 0 || len <= 0) return;
  switch (ResolveIsa(isa)) {
#if KILN_X86_DISPATCH
    case Isa::kAvx512:
      return SoftmaxRowsAvx512(x, y, rows, len);
    case Isa::kAvx2:
      return SoftmaxRowsAvx2(x, y, rows, len);
#endif
    default:
      return SoftmaxRowsBase(x, y, rows, len);
  }
}

namespace {

#if KILN_X86_DISPATCH
// Eight lanes at a time through F16C (round to nearest even, as FloatToHalfBits); a group with a
// NaN goes through the scalar functions, whose NaN bits F16C's do not keep.
__attribute__((target("avx2,f16c"))) void FloatsToHalvesF16c(const float* x, uint16_t* y,
                                                             int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 v = _mm256_loadu_ps(x + i);
    if (_mm256_movemask_ps(_mm256_cmp_ps(v, v, _CMP_UNORD_Q)) != 0) {
      for (int k = 0; k < 8; ++k) y[i + k] = FloatToHalfBits(x[i + k]);
      continue;
    }
    _mm_storeu_si128(reinterpret_cast<__m128i*>(y + i),
                     _mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT));
  }
  for (; i < n; ++i) y[i] = FloatToHalfBits(x[i]);
}

__attribute__((target("avx2,f16c"))) void HalvesToFloatsF16c(const uint16_t* x, float* y,
                                                             int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 v = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(x + i)));
    if (_mm256_movemask_ps(_mm256_cmp_ps(v, v, _CMP_UNORD_Q)) != 0) {
      for (int k = 0; k < 8; ++k) y[i + k] = HalfBitsToFloat(x[i + k]);
      continue;
    }
    _mm256_storeu_ps(y + i, v);
  }
  for (; i < n; ++i) y[i] = HalfBitsToFloat(x[i]);
}
#endif

}  // namespace

void FloatsToHalves(const float* x, uint16_t* y, int64_t n, Isa isa) {
#if KILN_X86_DISPATCH
  if (ResolveIsa(isa) != Isa::kBaseline) return FloatsToHalvesF16c(x, y, n);
#endif
  for (int64_t i = 0; i < n; ++i) y[i] = FloatToHalfBits(x[i]);
}

void HalvesToFloats(const uint16_t* x, float* y, int64_t n, Isa isa) {
#if KILN_X86_DISPATCH
  if (ResolveIsa(isa) != Isa::kBaseline) return HalvesToFloatsF16c(x, y, n);
#endif
  for (int64_t i = 0; i < n; ++i) y[i] = HalfBitsToFloat(x[i]);
}

}  // namespace kiln::ops
