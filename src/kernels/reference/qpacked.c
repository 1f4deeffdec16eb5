/* needs: requant */
/* qpacked: what the packed int8 kernels (qconv_packed.c, qmatmul_packed.c) share: the DSP
 * extension's primitives through ACLE (arm_acle.h) where the C backend's --cpu asks for them
 * (KILN_ARM_DSP), the requantization of one sum, and the widening of a stored 8-bit value. */
#if defined(KILN_ARM_DSP) && KILN_ARM_DSP
#if !defined(__ARM_FEATURE_DSP) || defined(__ARM_BIG_ENDIAN)
#error \
    "kiln: this code was generated for a little-endian Cortex-M with the DSP extension (--cpu); compile it with -mcpu=cortex-m4, cortex-m7 or cortex-m33 (with DSP), or generate it with --cpu generic"
#endif
#include <arm_acle.h>
#define KILN_QP_DSP 1
#else
#define KILN_QP_DSP 0
#endif

#if defined(__GNUC__) || defined(__clang__)
#define KILN_QP_INLINE static inline __attribute__((always_inline))
#define KILN_QP_UNROLL _Pragma("GCC unroll 8")
#define KILN_QP_UNROLL2 _Pragma("GCC unroll 2")
#else
#define KILN_QP_INLINE static inline
#define KILN_QP_UNROLL
#define KILN_QP_UNROLL2
#endif

/* Requantizes acc by a channel's mult and shift (requant.c): kiln_requant_right where the node's
 * constant parameters say that every channel takes it. */
#define KILN_QP_REQUANT(acc, mult, shift, q)                                               \
  ((uint8_t)((q)->right_shifts                                                             \
                 ? kiln_requant_right(acc, mult, shift, (q)->y_zero, (q)->y_lo, (q)->y_hi) \
                 : kiln_requant_fixed(acc, mult, shift, (q)->y_zero, (q)->y_lo, (q)->y_hi)))

#if KILN_QP_DSP
static inline int32_t kiln_qp_load32(const void* p) {
  int32_t v;
  memcpy(&v, p, 4);
  return v;
}
/* SXTB16 of the word rotated by 8 (ACLE has no rotation), and LDRD with a post-increment of 8
 * (two words in one instruction; p must be word-aligned). */
static inline int32_t kiln_qp_sxtb16_ror8(int32_t v) {
  int32_t r;
  __asm__("sxtb16 %0, %1, ror #8" : "=r"(r) : "r"(v));
  return r;
}
static inline int32_t kiln_qp_uxtb16_ror8(int32_t v) {
  int32_t r;
  __asm__("uxtb16 %0, %1, ror #8" : "=r"(r) : "r"(v));
  return r;
}
#define KILN_QP_LDRD(lo, hi, p) \
  __asm__ volatile("ldrd %0, %1, [%2], #8" : "=r"(lo), "=r"(hi), "+r"(p))
#endif

/* x[i] as an int16 column value: the stored byte, read as int8 where x is (`sign`). */
#define KILN_QP_X(x, i, sign) ((int16_t)((sign) ? ((const int8_t*)(x))[i] : (x)[i]))
