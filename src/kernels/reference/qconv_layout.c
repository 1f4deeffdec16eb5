/* needs: conv_shape */
/* qconv_layout: where qconv_packed.c finds its weights and columns, one definition for the
 * kernel and for the C backend, which rearranges the weights at compile time (see qconv_packed.c
 * for the layouts). */

/* Where value k of row (or pixel) j of a pair lies in a packed block of 2 * K values; `order`
 * applies the weights' k0 k2 k1 k3 order within each four. */
static inline ptrdiff_t kiln_qconv_packed_slot(ptrdiff_t k, ptrdiff_t j, ptrdiff_t K, int order) {
  const ptrdiff_t k4 = K & ~(ptrdiff_t)3, r = k & 3;
  if (k >= k4) return k4 * 2 + (k - k4) * 2 + j;
  return (k - r) * 2 + j * 4 + (order && (r == 1 || r == 2) ? 3 - r : r);
}

/* The bytes from one pair of channels' weights to the next: 2 * K, rounded up to a multiple of
 * four so that every pair starts word-aligned (the DSP path loads two words at once). */
static inline ptrdiff_t kiln_qconv_packed_pair_bytes(ptrdiff_t K) {
  return (2 * K + 3) & ~(ptrdiff_t)3;
}

/* The depthwise path's padded plane of one channel: the rows and columns its windows cover, and
 * one more column that the last pair of a row of an odd number of taps reads (times a zero). */
static inline ptrdiff_t kiln_qconv_packed_plane_w(const kiln_conv_shape* s) {
  return (ptrdiff_t)(s->out[2] - 1) * s->s[2] + (ptrdiff_t)(s->k[2] - 1) * s->d[2] + 2;
}
static inline ptrdiff_t kiln_qconv_packed_plane_h(const kiln_conv_shape* s) {
  return (ptrdiff_t)(s->out[1] - 1) * s->s[1] + (ptrdiff_t)(s->k[1] - 1) * s->d[1] + 1;
}
/* The depthwise path's scratch, in int16: a channel's weights, rows padded to an even count,
 * then the plane. */
static inline ptrdiff_t kiln_qconv_packed_depthwise_scratch(const kiln_conv_shape* s) {
  return (ptrdiff_t)s->k[1] * ((s->k[2] + 1) & ~1) +
         kiln_qconv_packed_plane_w(s) * kiln_qconv_packed_plane_h(s);
}
