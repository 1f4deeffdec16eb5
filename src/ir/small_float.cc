#include "ir/small_float.h"

#include <cmath>
#include <cstring>
#include <limits>

namespace kiln {
namespace {

struct Format {
  int exp_bits, man_bits, bias;
  bool ieee;     // infinities and NaNs at the top exponent (E5M2)
  bool uz;       // no -0: the sign bit alone is the one NaN
  bool has_nan;  // E2M1 has none
  uint8_t SignBit() const { return static_cast<uint8_t>(1 << (exp_bits + man_bits)); }
  uint8_t Ones() const { return static_cast<uint8_t>(SignBit() - 1); }
};

Format FormatOf(DType t) {
  switch (t) {
    case DType::kFloat8E4M3FN:
      return {4, 3, 7, false, false, true};
    case DType::kFloat8E4M3FNUZ:
      return {4, 3, 8, false, true, true};
    case DType::kFloat8E5M2:
      return {5, 2, 15, true, false, true};
    case DType::kFloat8E5M2FNUZ:
      return {5, 2, 16, false, true, true};
    default:
      return {2, 1, 1, false, false, false};
  }
}

// The largest finite code without its sign.
uint8_t MaxBits(const Format& f) {
  if (f.ieee) return static_cast<uint8_t>(f.Ones() - (1 << f.man_bits));  // S.11110.11
  if (f.uz || !f.has_nan) return f.Ones();
  return static_cast<uint8_t>(f.Ones() - 1);  // S.1111.110: S.1111.111 is NaN
}

uint8_t NaNBits(const Format& f, bool negative) {
  if (!f.has_nan) return f.SignBit();  // E2M1: -0, as the ONNX reference (ml_dtypes) gives
  if (f.uz) return f.SignBit();
  return static_cast<uint8_t>((negative ? f.SignBit() : 0) | f.Ones());
}

uint8_t FloatToE8M0(float x, bool saturate, E8M0Rounding mode) {
  if (std::isnan(x)) return 0xFF;
  if (std::isinf(x)) return saturate ? 0xFE : 0xFF;
  uint32_t bits;
  std::memcpy(&bits, &x, sizeof(bits));
  uint32_t e = (bits >> 23) & 0xFF;
  const uint32_t man = bits & 0x7FFFFF;
  bool up = false;
  if (mode == E8M0Rounding::kUp)
    up = man != 0;
  else if (mode == E8M0Rounding::kNearest)
    up = man > 0x400000 || (man == 0x400000 && (e & 1));
  if (up && ++e == 0xFF) return saturate ? 0xFE : 0xFF;
  return static_cast<uint8_t>(e);
}

}  // namespace

float SmallFloatToFloat(DType t, uint8_t bits) {
  if (t == DType::kFloat8E8M0)
    return bits == 0xFF ? std::numeric_limits<float>::quiet_NaN() : std::ldexp(1.0f, bits - 127);
  const Format f = FormatOf(t);
  if (f.uz && bits == f.SignBit()) return std::numeric_limits<float>::quiet_NaN();
  const bool negative = bits & f.SignBit();
  const int exp_field = (bits & f.Ones()) >> f.man_bits;
  const int man = bits & ((1 << f.man_bits) - 1);
  const int top = (1 << f.exp_bits) - 1;
  float v;
  if (f.ieee && exp_field == top) {
    v = man == 0 ? std::numeric_limits<float>::infinity() : std::numeric_limits<float>::quiet_NaN();
  } else if (f.has_nan && !f.ieee && !f.uz && exp_field == top && man == (1 << f.man_bits) - 1) {
    v = std::numeric_limits<float>::quiet_NaN();
  } else if (exp_field == 0) {
    v = std::ldexp(static_cast<float>(man), 1 - f.bias - f.man_bits);
  } else {
    v = std::ldexp(static_cast<float>(man + (1 << f.man_bits)), exp_field - f.bias - f.man_bits);
  }
  return negative ? -v : v;
}

float SmallFloatMax(DType t) {
  return t == DType::kFloat8E8M0 ? SmallFloatToFloat(t, 0xFE)
                                 : SmallFloatToFloat(t, MaxBits(FormatOf(t)));
}

Tensor SmallFloatToFloat32(const Tensor& t) {
  Tensor wide(DType::kFloat32, t.dims());
  for (int64_t i = 0; i < t.size(); ++i)
    wide.data<float>()[i] = SmallFloatToFloat(t.dtype(), t.data<uint8_t>()[i]);
  return wide;
}

uint8_t FloatToSmallFloat(DType t, double x, bool saturate, E8M0Rounding e8m0) {
  if (t == DType::kFloat8E8M0) return FloatToE8M0(static_cast<float>(x), saturate, e8m0);
  const Format f = FormatOf(t);
  const bool negative = std::signbit(x);
  const uint8_t sign = negative ? f.SignBit() : 0;
  if (std::isnan(x)) return NaNBits(f, negative);
  const double max = SmallFloatToFloat(t, MaxBits(f));
  auto overflow = [&]() -> uint8_t {
    if (saturate || !f.has_nan) return static_cast<uint8_t>(sign | MaxBits(f));
    if (f.ieee) return static_cast<uint8_t>(sign | (MaxBits(f) + 1));  // +-inf
    return NaNBits(f, negative);
  };
  if (std::isinf(x)) return overflow();
  double a = std::fabs(x);
  // Round to the grid of the binade a lies in (the subnormal grid below the smallest normal);
  // dividing and multiplying by powers of two is exact, nearbyint rounds ties to even.
  const int min_exp = 1 - f.bias;
  int e;
  std::frexp(a, &e);  // a = m * 2^e, m in [0.5, 1)
  const int quantum_exp = std::max(e - 1, min_exp) - f.man_bits;
  const double r = std::ldexp(std::nearbyint(std::ldexp(a, -quantum_exp)), quantum_exp);
  if (r > max) return overflow();
  if (r == 0) return f.uz ? 0 : sign;
  std::frexp(r, &e);
  const int exp_field = e - 1 + f.bias;
  if (exp_field <= 0) {  // subnormal
    const int man = static_cast<int>(std::ldexp(r, f.bias - 1 + f.man_bits));
    return static_cast<uint8_t>(sign | man);
  }
  const int man = static_cast<int>(std::ldexp(r, -(e - 1) + f.man_bits)) - (1 << f.man_bits);
  return static_cast<uint8_t>(sign | (exp_field << f.man_bits) | man);
}

}  // namespace kiln
