/* requant: fixed-point requantization, TFLite's and CMSIS-NN's arithmetic, for the integer ops
 * kiln's fuse-qdq makes of a QDQ model (com.kiln QLinearConv / QLinearMatMul). The real
 * multiplier x_scale * w_scale / y_scale is taken once, in double, as a Q31 mantissa `mult` in
 * [2^30, 2^31) and an exponent `shift` (real = mult * 2^(shift - 31)); then
 *   y = clamp(RoundingDivideByPOT(SaturatingRoundingDoublingHighMul(acc * 2^max(shift, 0), mult),
 *                                 max(-shift, 0)) + zero_point, lo, hi).
 * Where this differs from ONNX's QLinearConv, nearbyint(acc * real + zero_point): both steps
 * round half away from zero where ONNX rounds half to even, the mantissa keeps 31 bits of the
 * multiplier, and the high product rounds before the shift does; a result may differ by one
 * step, never more. Everything is integer arithmetic: no float on the device. */

/* Round(a * b / 2^31), half away from zero, saturated (TFLite's
 * SaturatingRoundingDoublingHighMul). */
static inline int32_t kiln_requant_high_mul(int32_t a, int32_t b) {
  int64_t ab;
  if (a == b && a == INT32_MIN) return INT32_MAX;
  ab = (int64_t)a * b;
  return (int32_t)((ab + (ab >= 0 ? (1 << 30) : 1 - (1 << 30))) / ((int64_t)1 << 31));
}

/* Round(x / 2^exponent), half away from zero; exponent in [0, 31]. */
static inline int32_t kiln_requant_divide_pot(int32_t x, int32_t exponent) {
  const int32_t mask = (int32_t)(((int64_t)1 << exponent) - 1);
  const int32_t remainder = x & mask, threshold = (mask >> 1) + (x < 0 ? 1 : 0);
  return (x >> exponent) + (remainder > threshold ? 1 : 0);
}

/* acc * mult * 2^(shift - 31) + zero_point, saturated to [lo, hi]. */
static inline int32_t kiln_requant_fixed(int32_t acc, int32_t mult, int32_t shift,
                                         int32_t zero_point, int32_t lo, int32_t hi) {
  int64_t v;
  if (shift > 0) {
    v = (int64_t)acc * ((int64_t)1 << shift);
    acc = v > INT32_MAX ? INT32_MAX : v < INT32_MIN ? INT32_MIN : (int32_t)v;
  }
  v = (int64_t)kiln_requant_divide_pot(kiln_requant_high_mul(acc, mult), shift < 0 ? -shift : 0) +
      zero_point;
  return v < lo ? lo : v > hi ? hi : (int32_t)v;
}

/* The mantissa and exponent of real (TFLite's QuantizeMultiplier); 0 for real <= 0 or below
 * 2^-32, the largest multiplier for real >= 2^30. */
static inline void kiln_requant_multiplier(double real, int32_t* mult, int32_t* shift) {
  int e = 0;
  double q;
  int64_t fixed;
  *mult = 0;
  *shift = 0;
  if (!(real > 0)) return;
  q = frexp(real, &e);
  fixed = (int64_t)floor(q * 2147483648.0 + 0.5);
  if (fixed == ((int64_t)1 << 31)) {
    fixed /= 2;
    ++e;
  }
  if (e < -31) return;
  if (e > 30) {
    e = 30;
    fixed = INT32_MAX;
  }
  *mult = (int32_t)fixed;
  *shift = e;
}
