/* requant: fixed-point requantization, TFLite's and CMSIS-NN's arithmetic, for the integer ops
 * kiln's fuse-qdq makes of a QDQ model (com.kiln QLinearConv / QLinearMatMul). The real
 * multiplier x_scale * w_scale / y_scale is taken once, in double, as a Q31 mantissa `mult` in
 * [2^30, 2^31) and an exponent `shift` (real = mult * 2^(shift - 31)); then
 *   y = clamp(RoundingDivideByPOT(SaturatingRoundingDoublingHighMul(acc * 2^max(shift, 0), mult),
 *                                 max(-shift, 0)) + zero_point, lo, hi).
 * Where this differs from ONNX's QLinearConv, nearbyint(acc * real + zero_point): the high
 * product rounds half up and the shift rounds half away from zero, where ONNX rounds half to
 * even; the mantissa keeps 31 bits of the multiplier; and the high product rounds before the
 * shift does. A result may differ by one step, never more. Everything is integer arithmetic: no
 * float on the device. Right shifts of negative values are arithmetic, as on every compiler kiln
 * supports. */

/* Round(a * b / 2^31), half up, saturated (TFLite's SaturatingRoundingDoublingHighMul: its
 * sign-dependent nudge and truncating division are one floor). Never INT32_MIN. */
static inline int32_t kiln_requant_high_mul(int32_t a, int32_t b) {
  if (a == b && a == INT32_MIN) return INT32_MAX;
  return (int32_t)(((int64_t)a * b + (1 << 30)) >> 31);
}

/* Round(x / 2^exponent), half away from zero (TFLite's RoundingDivideByPOT); exponent in
 * [0, 31], x > INT32_MIN. Taking one from a negative x makes ties round down; the bit shifted
 * out last then rounds up, without the overflow of adding half first. */
static inline int32_t kiln_requant_divide_pot(int32_t x, int32_t exponent) {
  int32_t r;
  if (exponent == 0) return x;
  r = (x + (x >> 31)) >> (exponent - 1);
  return (r >> 1) + (r & 1);
}

/* acc * mult * 2^(shift - 31), rounded as below (TFLite's MultiplyByQuantizedMultiplier); mult in
 * [0, 2^31) as kiln_requant_multiplier gives it. */
static inline int32_t kiln_requant_scale(int32_t acc, int32_t mult, int32_t shift) {
  int32_t v;
  if (shift > 0) {
    const int64_t wide = (int64_t)acc * ((int64_t)1 << shift);
    acc = wide > INT32_MAX ? INT32_MAX : wide < INT32_MIN ? INT32_MIN : (int32_t)wide;
  }
  v = (int32_t)(((int64_t)acc * mult + (1 << 30)) >> 31);
  return shift < 0 ? kiln_requant_divide_pot(v, -shift) : v;
}

/* acc * mult * 2^(shift - 31) + zero_point, saturated to [lo, hi]; mult in [0, 2^31) as
 * kiln_requant_multiplier gives it. */
static inline int32_t kiln_requant_fixed(int32_t acc, int32_t mult, int32_t shift,
                                         int32_t zero_point, int32_t lo, int32_t hi) {
  int32_t v = kiln_requant_scale(acc, mult, shift);
  /* lo and hi are 8-bit values, so the clamp before the zero point cannot overflow. */
  if (v < lo - zero_point) v = lo - zero_point;
  if (v > hi - zero_point) v = hi - zero_point;
  return v + zero_point;
}

/* kiln_requant_fixed where the shift is a right shift by e = -shift >= 2 (nearly every channel
 * of a quantized model), in fewer operations. With P = acc * mult and h = floor((P + 2^30) /
 * 2^31) (the high product), RoundingDivideByPOT(h, e) = floor((h + 2^(e-1) - [h < 0]) / 2^e)
 *   = floor((T + 2^(30+e)) / 2^(31+e)), T = P + 2^30 - [h < 0] * 2^31,
 * as floor(floor(a) / n) = floor(a / n); that is ((T >> (30 + e)) + 1) >> 1, and T >> (30 + e)
 * is the high word of T shifted by e - 2. [acc < 0] may stand for [h < 0]: they differ only
 * where h = 0, where both give 0. On a Cortex-M4: an SMLAL onto (acc >> 31, 2^30 | the sign
 * bit) and three shifts and adds. */
static inline int32_t kiln_requant_right(int32_t acc, int32_t mult, int32_t shift,
                                         int32_t zero_point, int32_t lo, int32_t hi) {
  const int64_t t = (int64_t)acc * mult + ((int64_t)1 << 30) - (acc < 0 ? (int64_t)1 << 31 : 0);
  int32_t v = (((int32_t)(t >> 32) >> (-shift - 2)) + 1) >> 1;
  if (v < lo - zero_point) v = lo - zero_point;
  if (v > hi - zero_point) v = hi - zero_point;
  return v + zero_point;
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
