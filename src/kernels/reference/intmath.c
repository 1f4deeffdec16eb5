/* intmath: integer division, modulo and power with ONNX's (numpy's) semantics and without C's
 * undefined cases: a zero divisor gives 0, MIN / -1 wraps, powers wrap. */
#define KILN_INTMATH_SIGNED(S, T, U)                                               \
  static inline T kiln_intmath_div_##S(T a, T b) {                                 \
    if (b == 0) return 0;                                                          \
    if (b == -1) return (T)(0u - (U)a);                                            \
    return (T)(a / b);                                                             \
  }                                                                                \
  static inline T kiln_intmath_mod_##S(T a, T b) {                                 \
    T m;                                                                           \
    if (b == 0 || b == -1) return 0;                                               \
    m = (T)(a % b);                                                                \
    if (m != 0 && ((m < 0) != (b < 0))) m = (T)(m + b);                            \
    return m;                                                                      \
  }                                                                                \
  static inline T kiln_intmath_fmod_##S(T a, T b) {                                \
    if (b == 0 || b == -1) return 0;                                               \
    return (T)(a % b);                                                             \
  }                                                                                \
  static inline T kiln_intmath_pow_##S(T base, int64_t e) {                        \
    U r = 1u, b = (U)base;                                                         \
    if (e < 0) return base == 1 ? 1 : (base == -1 ? ((e & 1) ? (T)-1 : (T)1) : 0); \
    while (e > 0) {                                                                \
      if (e & 1) r = (U)(r * b);                                                   \
      b = (U)(b * b);                                                              \
      e >>= 1;                                                                     \
    }                                                                              \
    return (T)r;                                                                   \
  }
#define KILN_INTMATH_UNSIGNED(S, T)                                                   \
  static inline T kiln_intmath_div_##S(T a, T b) { return b == 0 ? 0 : (T)(a / b); }  \
  static inline T kiln_intmath_mod_##S(T a, T b) { return b == 0 ? 0 : (T)(a % b); }  \
  static inline T kiln_intmath_fmod_##S(T a, T b) { return b == 0 ? 0 : (T)(a % b); } \
  static inline T kiln_intmath_pow_##S(T base, int64_t e) {                           \
    uint64_t r = 1u, b = base;                                                        \
    if (e < 0) return base == 1 ? 1 : 0;                                              \
    while (e > 0) {                                                                   \
      if (e & 1) r *= b;                                                              \
      b *= b;                                                                         \
      e >>= 1;                                                                        \
    }                                                                                 \
    return (T)r;                                                                      \
  }
KILN_INTMATH_SIGNED(i8, int8_t, uint32_t)
KILN_INTMATH_SIGNED(i16, int16_t, uint32_t)
KILN_INTMATH_SIGNED(i32, int32_t, uint32_t)
KILN_INTMATH_SIGNED(i64, int64_t, uint64_t)
KILN_INTMATH_UNSIGNED(u8, uint8_t)
KILN_INTMATH_UNSIGNED(u16, uint16_t)
KILN_INTMATH_UNSIGNED(u32, uint32_t)
KILN_INTMATH_UNSIGNED(u64, uint64_t)

/* Float to integer without undefined behaviour, as the host converts: truncates toward zero,
 * wraps inside the int64 range, saturates beyond it, NaN -> 0. */
static inline int64_t kiln_intmath_from_double(double d) {
  if (!(d == d)) return 0;
  if (d >= 9223372036854775808.0) return INT64_MAX;
  if (d < -9223372036854775808.0) return INT64_MIN;
  return (int64_t)d;
}
