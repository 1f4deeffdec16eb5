/* round: a float rounded to the nearest integer, ties to even, as nearbyintf in the default
 * rounding mode but without its library call (about thirty instructions on a Cortex-M4 without
 * VRINT), where the compiler evaluates float arithmetic in float and keeps its order: below 2^23
 * in magnitude, adding and taking back 2^23 leaves no fraction bits, so the FPU rounds (a result
 * of zero may lose its sign). From 2^23 up every float is an integer already. */
#include <float.h>

static inline float kiln_round_even_f32(float v) {
#if defined(FLT_EVAL_METHOD) && FLT_EVAL_METHOD == 0 && !defined(__FAST_MATH__)
  if (v >= 0.0f && v < 8388608.0f) return (v + 8388608.0f) - 8388608.0f;
  if (v < 0.0f && v > -8388608.0f) return (v - 8388608.0f) + 8388608.0f;
  return v;
#else
  return nearbyintf(v);
#endif
}
