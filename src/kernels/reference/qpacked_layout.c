/* needs: conv_shape */
/* qpacked_layout: where the packed int8 kernels (qconv_packed.c, qmatmul_packed.c) find their
 * weights and columns, one definition for the kernels and for the C backend, which rearranges the
 * weights at compile time (the kernels' files describe the layouts). */

/* K rounded up to a multiple of four: the packed blocks' length, zero weights in the padding. */
static inline ptrdiff_t kiln_qconv_packed_k4(ptrdiff_t K) { return (K + 3) & ~(ptrdiff_t)3; }

/* Where value k of row (or pixel) j of a pair lies in a packed block of 2 * k4 values; `order`
 * applies the weights' k0 k2 k1 k3 order within each four. */
static inline ptrdiff_t kiln_qconv_packed_slot(ptrdiff_t k, ptrdiff_t j, int order) {
  const ptrdiff_t r = k & 3;
  return (k - r) * 2 + j * 4 + (order && (r == 1 || r == 2) ? 3 - r : r);
}

/* The depthwise path's padded plane of one channel: the columns its windows cover; the rows one
 * window spans; and the output rows it computes from one fill of the plane, a band. */
static inline ptrdiff_t kiln_qconv_packed_plane_w(const kiln_conv_shape* s) {
  return (ptrdiff_t)(s->out[2] - 1) * s->s[2] + (ptrdiff_t)(s->k[2] - 1) * s->d[2] + 1;
}
static inline ptrdiff_t kiln_qconv_packed_plane_rows(const kiln_conv_shape* s) {
  return (ptrdiff_t)(s->k[1] - 1) * s->d[1] + 1;
}
static inline ptrdiff_t kiln_qconv_packed_band(const kiln_conv_shape* s) {
  const ptrdiff_t band = s->s[1] < 8 ? 8 / s->s[1] : 1; /* about ten plane rows */
  return s->out[1] < band ? s->out[1] : band;
}
/* The depthwise path's scratch, in int16: a channel's weights, rows padded to an even count,
 * then a band's plane rows. */
static inline ptrdiff_t kiln_qconv_packed_depthwise_scratch(const kiln_conv_shape* s) {
  return (ptrdiff_t)s->k[1] * ((s->k[2] + 1) & ~1) +
         kiln_qconv_packed_plane_w(s) *
             ((kiln_qconv_packed_band(s) - 1) * s->s[1] + kiln_qconv_packed_plane_rows(s));
}

/* qmatmul_packed.c: where weight k of output j (of its four) lies in the four outputs' 4 * K
 * bytes. */
static inline ptrdiff_t kiln_qmatmul_packed_slot(ptrdiff_t k, ptrdiff_t j, ptrdiff_t K) {
  return k < (K & ~(ptrdiff_t)3) ? (k & ~(ptrdiff_t)3) * 4 + j * 4 + (k & 3) : k * 4 + j;
}
