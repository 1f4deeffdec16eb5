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

/* acc * mult * 2^(shift - 31) + zero_point, saturated to [lo, hi]; mult in [0, 2^31) as
 * kiln_requant_multiplier gives it. */
static inline int32_t kiln_requant_fixed(int32_t acc, int32_t mult, int32_t shift,
                                         int32_t zero_point, int32_t lo, int32_t hi) {
  int32_t v;
  if (shift > 0) {
    const int64_t wide = (int64_t)acc * ((int64_t)1 << shift);
    acc = wide > INT32_MAX ? INT32_MAX : wide < INT32_MIN ? INT32_MIN : (int32_t)wide;
  }
  v = (int32_t)(((int64_t)acc * mult + (1 << 30)) >> 31);
  if (shift < 0) v = kiln_requant_divide_pot(v, -shift);
  /* lo and hi are 8-bit values, so the clamp before the zero point cannot overflow. */
  if (v < lo - zero_point) v = lo - zero_point;
  if (v > hi - zero_point) v = hi - zero_point;
  return v + zero_point;
}

/* kiln_requant_fixed for one channel with its constants taken once: where the shift is a right
 * shift (shift <= -1, e = -shift), both roundings and the shift are one 64-bit sum and an
 * arithmetic shift: with P = acc * mult and h = floor((P + 2^30) / 2^31) (the high product),
 * RoundingDivideByPOT(h, e) = floor((h + 2^(e-1) - [h < 0]) / 2^e)
 *                           = floor((P + 2^30 + 2^(30+e) - [h < 0] * 2^31) / 2^(31+e)),
 * as floor(floor(a) / n) = floor(a / n); and [acc < 0] may stand for [h < 0], since they differ
 * only where h = 0, where both give 0. The high word of the sum, shifted by e - 1, is that
 * floor: on a Cortex-M4 an SMLAL and an ASR. Other shifts take kiln_requant_fixed. */
typedef struct kiln_requant_channel {
  int32_t mult, shift;          /* as kiln_requant_fixed takes them */
  int32_t down;                 /* e - 1, or -1 where this channel takes kiln_requant_fixed */
  int64_t round_pos, round_neg; /* 2^30 + 2^(30+e), less 2^31 for a negative acc */
} kiln_requant_channel;

static inline kiln_requant_channel kiln_requant_channel_of(int32_t mult, int32_t shift) {
  /* Word by word, as kernels take this once per channel: 2^30 + 2^(30+e) is (0, 3 * 2^30) for
   * e = 1 and (2^(e-2), 2^30) above; less 2^31, (0, 2^30) and (2^(e-2) - 1, 3 * 2^30). */
  kiln_requant_channel c;
  const int32_t e = -shift;
  const uint32_t hi = e >= 2 ? (uint32_t)1 << (e - 2) : 0;
  c.mult = mult;
  c.shift = shift;
  c.down = e >= 1 ? e - 1 : -1;
  c.round_pos = (int64_t)(((uint64_t)hi << 32) | (e == 1 ? 0xC0000000u : 0x40000000u));
  c.round_neg =
      (int64_t)((((uint64_t)(hi - (e >= 2)) << 32) | (e == 1 ? 0x40000000u : 0xC0000000u)));
  return c;
}

/* kiln_requant_fixed(acc, c->mult, c->shift, zero_point, lo, hi), the same value. */
static inline int32_t kiln_requant_channel_right(int32_t acc, const kiln_requant_channel* c,
                                                 int32_t zero_point, int32_t lo, int32_t hi) {
  /* The same where c->down >= 0 (a right shift), without the test. */
  int32_t v = (int32_t)(((int64_t)acc * c->mult + (acc < 0 ? c->round_neg : c->round_pos)) >> 32) >>
              c->down;
  if (v < lo - zero_point) v = lo - zero_point;
  if (v > hi - zero_point) v = hi - zero_point;
  return v + zero_point;
}
static inline int32_t kiln_requant_channel_apply(int32_t acc, const kiln_requant_channel* c,
                                                 int32_t zero_point, int32_t lo, int32_t hi) {
  if (c->down < 0) return kiln_requant_fixed(acc, c->mult, c->shift, zero_point, lo, hi);
  return kiln_requant_channel_right(acc, c, zero_point, lo, hi);
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
