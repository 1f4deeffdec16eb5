/* needs: qpacked qpacked_layout */
/* qmatmul_packed: fuse-qdq's QLinearMatMul (com.kiln) for a microcontroller's fully connected
 * layers: rows of 8-bit x [rows, K] times constant int8 weights [K, N] with zero point 0, which
 * the C backend rearranged at compile time, requantized as in requant.c. Four outputs at a time:
 * with KILN_ARM_DSP, a word of four x values unpacks once (SXTB16 / UXTB16: x0 x2, then rotated by
 * 8, x1 x3) for the four outputs' weight words, which unpack alike, two SMLADs each; otherwise the
 * same sums in portable C. Integer sums are exact in any order, so both equal the host's.
 *
 * x's zero point leaves the loop: `bias` holds bias - x_zero * sum(w) per output.
 * Weights, per four outputs n .. n + 3 (N rounded up to a multiple of four with zero weights),
 * kiln_qmatmul_packed_slot: for each four k below K rounded down to a multiple of four, the four
 * outputs' four weights in k order; then for each k of the rest, the four outputs' weight. */
typedef struct kiln_qmatmul_packed_params {
  const int8_t* w;            /* rearranged as above */
  ptrdiff_t K, N;             /* x's row and y's */
  const int32_t* bias;        /* bias - x_zero * sum(w), per output (N rounded up to four) */
  const int32_t* mult;        /* fixed-point multipliers per output */
  const int8_t* shift;        /* and their exponents (requant.c) */
  int32_t x_signed;           /* 1: x is int8, 0: uint8 */
  int32_t y_zero, y_lo, y_hi; /* the output's zero point and range */
  int32_t right_shifts;       /* 1: every output's shift is <= -2 (kiln_requant_right) */
} kiln_qmatmul_packed_params;

#if KILN_QP_DSP
/* Two outputs' four weights (words wa, wb) against four x values (x02, x13): four SMLADs. */
#define KILN_QM_PAIR(wa, wb, x02, x13, sa, sb)                                  \
  do {                                                                          \
    sa = __smlad(kiln_qp_sxtb16_ror8(wa), x13, __smlad(__sxtb16(wa), x02, sa)); \
    sb = __smlad(kiln_qp_sxtb16_ror8(wb), x13, __smlad(__sxtb16(wb), x02, sb)); \
  } while (0)
#endif

/* s[0..3] += the sums of x[0, K) with four outputs' weights at *w, which moves past them; `sign`
 * (x is int8) a constant where it is inlined. */
KILN_QP_INLINE void kiln_qmatmul_packed_dot4(const uint8_t* x, const int8_t** wp, ptrdiff_t K,
                                             int sign, int32_t* s) {
  const ptrdiff_t k4 = K & ~(ptrdiff_t)3;
  const int8_t* w = *wp;
  ptrdiff_t k = 0, j;
#if KILN_QP_DSP
  int32_t s0 = s[0], s1 = s[1], s2 = s[2], s3 = s[3];
  KILN_QP_UNROLL2
  for (; k < k4; k += 4) { /* w is word-aligned */
    const int32_t v = kiln_qp_load32(x + k);
    const int32_t x02 = sign ? __sxtb16(v) : (int32_t)__uxtb16((uint32_t)v);
    const int32_t x13 = sign ? kiln_qp_sxtb16_ror8(v) : kiln_qp_uxtb16_ror8(v);
    int32_t wa, wb;
    KILN_QP_LDRD(wa, wb, w);
    KILN_QM_PAIR(wa, wb, x02, x13, s0, s1);
    KILN_QP_LDRD(wa, wb, w);
    KILN_QM_PAIR(wa, wb, x02, x13, s2, s3);
  }
  s[0] = s0;
  s[1] = s1;
  s[2] = s2;
  s[3] = s3;
#else
  for (; k < k4; k += 4, w += 16)
    for (j = 0; j < 4; ++j)
      s[j] += w[4 * j] * KILN_QP_X(x, k, sign) + w[4 * j + 1] * KILN_QP_X(x, k + 1, sign) +
              w[4 * j + 2] * KILN_QP_X(x, k + 2, sign) + w[4 * j + 3] * KILN_QP_X(x, k + 3, sign);
#endif
  for (; k < K; ++k, w += 4)
    for (j = 0; j < 4; ++j) s[j] += w[j] * KILN_QP_X(x, k, sign);
  *wp = w;
}

/* y [rows, N] = requantized x [rows, K] times the weights, plus the bias: one function that the
 * nodes share (flash), with the loop specialized for int8 and for uint8 x. */
static void kiln_qmatmul_packed_run(const uint8_t* x, ptrdiff_t rows,
                                    const kiln_qmatmul_packed_params* q, uint8_t* y) {
  const ptrdiff_t K = q->K, N = q->N;
  ptrdiff_t r, n, j;
  for (r = 0; r < rows; ++r, x += K, y += N) {
    const int8_t* w = q->w;
    for (n = 0; n < N; n += 4) {
      int32_t s[4];
      for (j = 0; j < 4; ++j) s[j] = q->bias[n + j];
      if (q->x_signed)
        kiln_qmatmul_packed_dot4(x, &w, K, 1, s);
      else
        kiln_qmatmul_packed_dot4(x, &w, K, 0, s);
      for (j = 0; j < 4 && n + j < N; ++j)
        y[n + j] = KILN_QP_REQUANT(s[j], q->mult[n + j], q->shift[n + j], q);
    }
  }
}
