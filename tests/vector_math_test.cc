// The float32 vector math (kernels/x86/vector_math.h) against libm in double, on every ISA path
// this CPU runs (forced through the functions' Isa argument): a sweep over the float bit patterns
// (every sign and exponent, denormals included), dense sweeps over each function's busy range, and
// the special values (+-0, +-inf, NaN, denormals, overflow / underflow edges, large |x| for sin /
// cos). Errors are in ulps of the correctly rounded float result, with a small absolute allowance
// where the function cancels (gelu's left tail, sin / cos near their zeros). Also: tails (every n
// up to three vectors), in place (y == x), the cheap maps and binary ops bit-exact against scalar
// code, and the softmax reductions.
#include "kernels/x86/vector_math.h"

#include <gtest/gtest.h>

#include <cfloat>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "ir/half.h"

namespace kiln::ops {
namespace {

std::vector<Isa> RunnableIsas() {
  std::vector<Isa> v;
  for (Isa isa : {Isa::kBaseline, Isa::kAvx2, Isa::kAvx512})
    if (IsaSupported(isa)) v.push_back(isa);
  return v;
}

float FromBits(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}
uint32_t ToBits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}

// The inputs every function sees: a stride through all 2^32 bit patterns, dense linear sweeps
// over [lo, hi], and the special values.
std::vector<float> Inputs(double lo, double hi) {
  std::vector<float> v;
  for (uint64_t u = 0; u < (1ull << 32); u += 4093) v.push_back(FromBits(static_cast<uint32_t>(u)));
  const int kDense = 200000;
  for (int i = 0; i <= kDense; ++i) v.push_back(static_cast<float>(lo + (hi - lo) * i / kDense));
  const float inf = std::numeric_limits<float>::infinity();
  for (float s : {1.0f, -1.0f}) {
    for (float x :
         {0.0f,    inf,     FLT_MIN,     FLT_MAX,     FLT_TRUE_MIN, FLT_MIN - FLT_TRUE_MIN,
          1e-30f,  1e-7f,   0.5f,        0.625f,      1.0f,         2.0f,
          4.0f,    9.0f,    10.0f,       20.0f,       87.0f,        87.33f,
          88.0f,   88.72f,  88.7228394f, 88.73f,      89.0f,        100.0f,
          103.9f,  104.0f,  150.0f,      3.14159265f, 1.57079633f,  8191.0f,
          8192.0f, 8193.0f, 1e5f,        1e10f,       3e38f})
      v.push_back(s * x);
  }
  v.push_back(std::numeric_limits<float>::quiet_NaN());
  v.push_back(-std::numeric_limits<float>::quiet_NaN());
  return v;
}

// ulps of |y - ref| at the float nearest ref (denormal spacing below FLT_MIN).
double UlpError(float y, double ref) {
  if (std::isnan(ref)) return std::isnan(y) ? 0 : 1e30;
  if (std::isnan(y)) return 1e30;
  const float fr = static_cast<float>(ref);
  if (std::isinf(fr) || std::isinf(y)) {
    if (y == fr) return 0;
    // A result at the overflow edge may round either way.
    if (std::fabs(ref) > FLT_MAX * 0.999999 && (std::isinf(y) || std::fabs(y) == FLT_MAX)) return 1;
    return 1e30;
  }
  const double a = std::fabs(static_cast<double>(fr));
  const double ulp = a < FLT_MIN ? std::ldexp(1.0, -149) : std::ldexp(1.0, std::ilogb(a) - 23);
  return std::fabs(static_cast<double>(y) - ref) / ulp;
}

struct Case {
  const char* name;
  std::function<void(const float*, float*, int64_t, Isa)> fn;
  std::function<double(double)> ref;
  double lo, hi;   // the dense sweep
  double max_ulp;  // allowed error in ulps ...
  double abs_tol;  // ... or in absolute terms
};

std::vector<Case> Cases() {
  return {
      {"exp", [](const float* x, float* y, int64_t n, Isa i) { ExpF32(x, y, n, i); },
       [](double x) { return std::exp(x); }, -105, 90, 2, 0},
      {"log", [](const float* x, float* y, int64_t n, Isa i) { LogF32(x, y, n, i); },
       [](double x) { return std::log(x); }, 0, 10, 2, 0},
      {"sigmoid", [](const float* x, float* y, int64_t n, Isa i) { SigmoidF32(x, y, n, i); },
       [](double x) { return 1 / (1 + std::exp(-x)); }, -110, 30, 3, 0},
      {"swish", [](const float* x, float* y, int64_t n, Isa i) { SwishF32(x, y, n, 1.5f, i); },
       [](double x) {
         return x / (1 + std::exp(-static_cast<double>(1.5f * static_cast<float>(x))));
       },
       -80, 30, 4, 1e-37},
      {"tanh", [](const float* x, float* y, int64_t n, Isa i) { TanhF32(x, y, n, i); },
       [](double x) { return std::tanh(x); }, -10, 10, 3, 0},
      {"elu", [](const float* x, float* y, int64_t n, Isa i) { EluF32(x, y, n, 1.3f, i); },
       [](double x) { return x < 0 ? 1.3f * std::expm1(x) : x; }, -90, 30, 3, 0},
      {"selu",
       [](const float* x, float* y, int64_t n, Isa i) { SeluF32(x, y, n, 1.6733f, 1.0507f, i); },
       [](double x) {
         return x > 0 ? 1.0507f * x : static_cast<double>(1.6733f * 1.0507f) * std::expm1(x);
       },
       -90, 30, 3, 0},
      {"celu", [](const float* x, float* y, int64_t n, Isa i) { CeluF32(x, y, n, 0.7f, i); },
       [](double x) { return x > 0 ? x : 0.7f * std::expm1(x / 0.7f); }, -60, 30, 4, 0},
      {"erf", [](const float* x, float* y, int64_t n, Isa i) { ErfF32(x, y, n, i); },
       [](double x) { return std::erf(x); }, -5, 5, 8, 0},
      {"gelu", [](const float* x, float* y, int64_t n, Isa i) { GeluF32(x, y, n, false, i); },
       [](double x) { return 0.5 * x * std::erfc(-x / std::sqrt(2.0)); }, -12, 12, 4, 2e-7},
      {"gelu_tanh", [](const float* x, float* y, int64_t n, Isa i) { GeluF32(x, y, n, true, i); },
       [](double x) {
         return 0.5 * x *
                (1 + std::tanh(std::sqrt(2 / 3.14159265358979323846) * (x + 0.044715 * x * x * x)));
       },
       -12, 12, 4, 5e-7},
      {"softplus", [](const float* x, float* y, int64_t n, Isa i) { SoftplusF32(x, y, n, i); },
       [](double x) { return std::max(x, 0.0) + std::log1p(std::exp(-std::fabs(x))); }, -110, 40, 4,
       0},
      {"mish", [](const float* x, float* y, int64_t n, Isa i) { MishF32(x, y, n, i); },
       [](double x) {
         return x * std::tanh(std::max(x, 0.0) + std::log1p(std::exp(-std::fabs(x))));
       },
       -110, 40, 4, 1e-37},
      {"sin", [](const float* x, float* y, int64_t n, Isa i) { SinF32(x, y, n, i); },
       [](double x) { return std::sin(x); }, -100, 100, 2, 1e-9},
      {"cos", [](const float* x, float* y, int64_t n, Isa i) { CosF32(x, y, n, i); },
       [](double x) { return std::cos(x); }, -100, 100, 2, 1e-9},
      {"tan", [](const float* x, float* y, int64_t n, Isa i) { TanF32(x, y, n, i); },
       [](double x) { return std::tan(x); }, -100, 100, 4, 0},
      {"sqrt", [](const float* x, float* y, int64_t n, Isa i) { SqrtF32(x, y, n, i); },
       [](double x) { return std::sqrt(x); }, 0, 100, 0.5, 0},
      {"floor", [](const float* x, float* y, int64_t n, Isa i) { FloorF32(x, y, n, i); },
       [](double x) { return std::floor(x); }, -100, 100, 0, 0},
      {"ceil", [](const float* x, float* y, int64_t n, Isa i) { CeilF32(x, y, n, i); },
       [](double x) { return std::ceil(x); }, -100, 100, 0, 0},
      {"round", [](const float* x, float* y, int64_t n, Isa i) { RoundF32(x, y, n, i); },
       [](double x) { return std::nearbyint(x); }, -100, 100, 0, 0},
      {"asin", [](const float* x, float* y, int64_t n, Isa i) { AsinF32(x, y, n, i); },
       [](double x) { return std::asin(x); }, -1, 1, 3, 0},
      {"acos", [](const float* x, float* y, int64_t n, Isa i) { AcosF32(x, y, n, i); },
       [](double x) { return std::acos(x); }, -1, 1, 3, 0},
      {"atan", [](const float* x, float* y, int64_t n, Isa i) { AtanF32(x, y, n, i); },
       [](double x) { return std::atan(x); }, -100, 100, 3, 0},
      // Past 88 and to the overflow (about 89.4), and sinh's series below 1/2.
      {"cosh", [](const float* x, float* y, int64_t n, Isa i) { CoshF32(x, y, n, i); },
       [](double x) { return std::cosh(x); }, -92, 92, 3, 0},
      {"sinh", [](const float* x, float* y, int64_t n, Isa i) { SinhF32(x, y, n, i); },
       [](double x) { return std::sinh(x); }, -92, 92, 3, 0},
      {"sinh_small", [](const float* x, float* y, int64_t n, Isa i) { SinhF32(x, y, n, i); },
       [](double x) { return std::sinh(x); }, -1, 1, 3, 0},
  };
}

TEST(VectorMath, AgainstLibm) {
  for (const Case& c : Cases()) {
    const std::vector<float> x = Inputs(c.lo, c.hi);
    std::vector<float> y(x.size());
    for (Isa isa : RunnableIsas()) {
      c.fn(x.data(), y.data(), static_cast<int64_t>(x.size()), isa);
      double worst = 0;
      float worst_x = 0;
      int bad = 0;
      for (size_t i = 0; i < x.size(); ++i) {
        const double ref = c.ref(static_cast<double>(x[i]));
        const double e = UlpError(y[i], ref);
        const bool ok = e <= c.max_ulp || (!std::isnan(ref) &&
                                           std::fabs(static_cast<double>(y[i]) - ref) <= c.abs_tol);
        if (e > worst && (e <= c.max_ulp || !ok)) {
          worst = e;
          worst_x = x[i];
        }
        if (!ok && ++bad <= 5)
          ADD_FAILURE() << c.name << " [" << IsaName(isa) << "] x=" << x[i] << " (0x" << std::hex
                        << ToBits(x[i]) << std::dec << ") got " << y[i] << " want " << ref << " ("
                        << e << " ulp)";
      }
      std::printf("%-10s %-8s max %.2f ulp (x=%g)%s\n", c.name, IsaName(isa), worst, worst_x,
                  bad ? " FAILED" : "");
    }
  }
}

// tan near each of its zeros and poles up to |x| 128 (the lanes the vector code serves), where the
// reduction's absolute error is largest against r: the 4000 floats around each multiple of pi/2.
TEST(VectorMath, TanNearZerosAndPoles) {
  std::vector<float> x;
  for (int k = -82; k <= 82; ++k) {
    float c = static_cast<float>(k * 1.5707963267948966);
    for (int i = 0; i < 2000; ++i) c = std::nextafter(c, -INFINITY);
    for (int i = 0; i < 4000; ++i, c = std::nextafter(c, INFINITY)) x.push_back(c);
  }
  std::vector<float> y(x.size());
  for (Isa isa : RunnableIsas()) {
    TanF32(x.data(), y.data(), static_cast<int64_t>(x.size()), isa);
    double worst = 0;
    float worst_x = 0;
    for (size_t i = 0; i < x.size(); ++i) {
      const double e = UlpError(y[i], std::tan(static_cast<double>(x[i])));
      if (e > worst) {
        worst = e;
        worst_x = x[i];
      }
    }
    std::printf("tan near zeros and poles, %-8s max %.2f ulp (x=%.9g)\n", IsaName(isa), worst,
                worst_x);
    EXPECT_LE(worst, 4.0) << IsaName(isa) << " x=" << worst_x;
  }
}

// Every n up to three vectors of the widest ISA, offsets 0..3: each element's result is the same
// as in one big call (no dependence on position or n), and in place gives the same bits.
TEST(VectorMath, TailsAndInPlace) {
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> d(-20.0f, 20.0f);
  std::vector<float> x(60);
  for (float& v : x) v = d(rng);
  for (const Case& c : Cases()) {
    for (Isa isa : RunnableIsas()) {
      std::vector<float> full(x.size());
      c.fn(x.data(), full.data(), static_cast<int64_t>(x.size()), isa);
      for (int off = 0; off < 4; ++off) {
        for (int n = 0; n + off <= 52; ++n) {
          std::vector<float> y(64, -7.0f), z(x.begin(), x.end());
          c.fn(x.data() + off, y.data(), n, isa);
          c.fn(z.data() + off, z.data() + off, n, isa);
          for (int i = 0; i < n; ++i) {
            ASSERT_EQ(ToBits(y[i]), ToBits(full[off + i])) << c.name << " n=" << n << " i=" << i;
            ASSERT_EQ(ToBits(z[off + i]), ToBits(full[off + i])) << c.name << " in place";
          }
          ASSERT_EQ(y[n], -7.0f) << c.name << " wrote past n=" << n;
        }
      }
    }
  }
}

// The cheap maps and binary ops: bit-identical to the scalar formulas of the op code (HardSigmoid
// may contract alpha x + beta into an FMA: 1e-7 absolute).
TEST(VectorMath, CheapMapsAndBinary) {
  std::vector<float> x = Inputs(-8, 8);
  x.resize(x.size() - x.size() % 7 + 5);  // an odd tail
  const int64_t n = static_cast<int64_t>(x.size());
  std::vector<float> b(x.rbegin(), x.rend());
  std::vector<float> y(x.size());
  auto same = [](float a, float e) { return ToBits(a) == ToBits(e) || (a != a && e != e); };
  for (Isa isa : RunnableIsas()) {
    SCOPED_TRACE(IsaName(isa));
    ReluF32(x.data(), y.data(), n, isa);
    for (int64_t i = 0; i < n; ++i) ASSERT_TRUE(same(y[i], x[i] > 0 ? x[i] : 0.0f)) << x[i];
    LeakyReluF32(x.data(), y.data(), n, 0.1f, isa);
    for (int64_t i = 0; i < n; ++i) ASSERT_TRUE(same(y[i], x[i] < 0 ? 0.1f * x[i] : x[i])) << x[i];
    for (auto [lo, hi] : {std::pair{-1.0f, 6.0f}, std::pair{0.0f, 6.0f}, std::pair{3.0f, 1.0f}}) {
      ClipF32(x.data(), y.data(), n, lo, hi, isa);
      for (int64_t i = 0; i < n; ++i) {
        float v = x[i];
        if (v < lo) v = lo;
        if (v > hi) v = hi;
        ASSERT_TRUE(same(y[i], v)) << x[i];
      }
    }
    HardSigmoidF32(x.data(), y.data(), n, 0.2f, 0.5f, isa);
    for (int64_t i = 0; i < n; ++i) {
      const float e = std::max(0.0f, std::min(1.0f, 0.2f * x[i] + 0.5f));
      ASSERT_TRUE(same(y[i], e) || std::fabs(y[i] - e) <= 1e-7f) << x[i];
    }
    HardSwishF32(x.data(), y.data(), n, isa);
    for (int64_t i = 0; i < n; ++i) {
      const float e = x[i] * std::max(0.0f, std::min(1.0f, x[i] / 6.0f + 0.5f));
      ASSERT_TRUE(same(y[i], e) || UlpError(y[i], e) <= 1) << x[i];
    }
    for (VecBinOp op :
         {VecBinOp::kAdd, VecBinOp::kSub, VecBinOp::kMul, VecBinOp::kDiv, VecBinOp::kMaxSkipNaN}) {
      auto f = [op](float p, float q) {
        switch (op) {
          case VecBinOp::kAdd:
            return p + q;
          case VecBinOp::kSub:
            return p - q;
          case VecBinOp::kMul:
            return p * q;
          case VecBinOp::kDiv:
            return p / q;
          default:
            return q > p || p != p ? q : p;
        }
      };
      BinaryF32(op, x.data(), b.data(), y.data(), n, isa);
      for (int64_t i = 0; i < n; ++i) ASSERT_TRUE(same(y[i], f(x[i], b[i])));
      BinaryScalarF32(op, 1.7f, b.data(), y.data(), n, true, isa);
      for (int64_t i = 0; i < n; ++i) ASSERT_TRUE(same(y[i], f(1.7f, b[i])));
      BinaryScalarF32(op, 1.7f, b.data(), y.data(), n, false, isa);
      for (int64_t i = 0; i < n; ++i) ASSERT_TRUE(same(y[i], f(b[i], 1.7f)));
      std::vector<float> z = x;  // in place over the first operand
      BinaryF32(op, z.data(), b.data(), z.data(), n, isa);
      for (int64_t i = 0; i < n; ++i) ASSERT_TRUE(same(z[i], f(x[i], b[i])));
    }
  }
}

TEST(VectorMath, SoftmaxReductions) {
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> d(-30.0f, 30.0f);
  for (Isa isa : RunnableIsas()) {
    for (int n : {1, 2, 7, 15, 16, 17, 33, 100, 1000}) {
      std::vector<float> x(n), y(n);
      for (float& v : x) v = d(rng);
      float m = x[0];
      for (float v : x) m = std::max(m, v);
      ASSERT_EQ(MaxF32(x.data(), n, isa), m);
      const float s = ExpSubSumF32(x.data(), y.data(), n, m, isa);
      double ref = 0;
      for (int i = 0; i < n; ++i) {
        const double e = std::exp(static_cast<double>(x[i]) - m);
        ref += e;
        ASSERT_LE(UlpError(y[i], static_cast<double>(static_cast<float>(x[i] - m)) == x[i] - m
                                     ? std::exp(static_cast<double>(x[i] - m))
                                     : e),
                  2);
      }
      ASSERT_NEAR(s, ref, ref * 1e-6);
      double sum = 0;
      for (float v : x) sum += v;
      ASSERT_NEAR(SumF32(x.data(), n, isa), sum, 1e-5 * n * 30);
      // Whole rows: 3 rows of n, against exp(x - max) / sum in double.
      std::vector<float> rows(3 * static_cast<size_t>(n)), out(rows.size());
      for (float& v : rows) v = d(rng);
      SoftmaxRowsF32(rows.data(), out.data(), 3, n, isa);
      for (int r = 0; r < 3; ++r) {
        const float* xr = rows.data() + r * n;
        double mr = xr[0], sr = 0;
        for (int i = 0; i < n; ++i) mr = std::max<double>(mr, xr[i]);
        for (int i = 0; i < n; ++i) sr += std::exp(xr[i] - mr);
        for (int i = 0; i < n; ++i)
          ASSERT_NEAR(out[r * n + i], std::exp(xr[i] - mr) / sr, 1e-6) << n << " row " << r;
      }
      // NaN propagates through the max, and to every output of its softmax row.
      x[n / 2] = std::numeric_limits<float>::quiet_NaN();
      ASSERT_TRUE(std::isnan(MaxF32(x.data(), n, isa))) << n;
      SoftmaxRowsF32(x.data(), y.data(), 1, n, isa);
      for (int i = 0; i < n; ++i) ASSERT_TRUE(std::isnan(y[i])) << n << " at " << i;
    }
  }
}

// Masked attention rows (-10000, -inf, and x - max between -104 and -87.3, where e^(x - max) is
// a denormal): those exponentials and probabilities come out as exact zeros, never denormals
// (made one at a time by microcode assists on Intel cores), the rest as exp(x - max) / sum;
// e^(x - max) just above FLT_MIN stays (its probability, divided by the sum, may be a denormal);
// on every ISA, through ExpSubSumF32 too.
TEST(VectorMath, SoftmaxFlushesProbabilitiesBelowFloatMinToZero) {
  for (Isa isa : RunnableIsas()) {
    for (int n : {5, 16, 37, 512}) {
      std::vector<float> x(n), y(n), e(n);
      for (int i = 0; i < n; ++i) {
        const float masked[] = {-10000.0f, -std::numeric_limits<float>::infinity(), -90.0f,
                                -103.0f};
        x[i] = i % 2 ? masked[i / 2 % 4] : 0.25f * static_cast<float>(i % 7);
      }
      if (n > 8) x[8] = 1.5f - 87.0f;  // the row max is 1.5: e^-87 = 1.6e-38, normal, kept
      float m = x[0];
      for (float v : x) m = std::max(m, v);
      SoftmaxRowsF32(x.data(), y.data(), 1, n, isa);
      const float s = ExpSubSumF32(x.data(), e.data(), n, m, isa);
      double ref = 0;
      for (int i = 0; i < n; ++i) ref += std::exp(static_cast<double>(x[i]) - m);
      ASSERT_NEAR(s, ref, ref * 1e-6);
      for (int i = 0; i < n; ++i) {
        ASSERT_NE(std::fpclassify(e[i]), FP_SUBNORMAL) << n << " at " << i;
        if (static_cast<double>(x[i]) - m < -87.34) {
          ASSERT_EQ(y[i], 0.0f) << n << " at " << i;
          ASSERT_EQ(e[i], 0.0f) << n << " at " << i;
        } else {
          ASSERT_NEAR(y[i], std::exp(static_cast<double>(x[i]) - m) / ref, 1e-6) << n << " " << i;
          ASSERT_GT(e[i], 0.0f) << n << " at " << i;
        }
      }
    }
  }
}

// FloatsToHalves and HalvesToFloats are ir/half.h's conversions bit for bit on every ISA: every
// half value (NaNs with payloads, signaling ones, subnormals) both ways, and floats around each
// rounding boundary (halfway cases), the overflow threshold, the subnormal range, infinities and
// NaNs; lengths that leave tails of the eight-lane groups.
TEST(VectorMath, HalfConversionsMatchTheScalarOnesBitForBit) {
  std::vector<uint16_t> halves(65536 + 5);
  for (size_t i = 0; i < halves.size(); ++i) halves[i] = static_cast<uint16_t>(i * 40503u);
  std::vector<float> floats;
  for (uint32_t h = 0; h < 65536; h += 7) {
    const float f = HalfBitsToFloat(static_cast<uint16_t>(h));
    uint32_t bits;
    std::memcpy(&bits, &f, 4);
    for (uint32_t d : {0u, 1u, 0xfffu, 0x1000u, 0x1001u, 0x1fffu}) {  // around half's ulp
      const uint32_t b = bits + d;
      float g;
      std::memcpy(&g, &b, 4);
      floats.push_back(g);
    }
  }
  for (float f : {65504.0f, 65519.99f, 65520.0f, 1e-8f, 2.98e-8f, 5.96e-8f, 1e-45f, 1e30f,
                  std::numeric_limits<float>::infinity(), std::numeric_limits<float>::quiet_NaN(),
                  -std::numeric_limits<float>::signaling_NaN()})
    floats.push_back(f);
  for (Isa isa : RunnableIsas()) {
    std::vector<float> got(halves.size());
    HalvesToFloats(halves.data(), got.data(), static_cast<int64_t>(halves.size()), isa);
    for (size_t i = 0; i < halves.size(); ++i) {
      const float want = HalfBitsToFloat(halves[i]);
      ASSERT_EQ(0, std::memcmp(&got[i], &want, 4)) << "half " << halves[i];
    }
    std::vector<uint16_t> back(floats.size());
    FloatsToHalves(floats.data(), back.data(), static_cast<int64_t>(floats.size()), isa);
    for (size_t i = 0; i < floats.size(); ++i)
      ASSERT_EQ(back[i], FloatToHalfBits(floats[i])) << "float " << floats[i] << " at " << i;
  }
}

}  // namespace
}  // namespace kiln::ops
