/* needs: conv_shape qpacked qpacked_layout */
/* qconv_packed: fuse-qdq's QLinearConv (com.kiln) for a microcontroller: 8-bit activations,
 * constant int8 weights with zero point 0 that the C backend rearranged at compile time, and the
 * fixed-point requantization of requant.c. Every output is an int32 dot product over its window.
 *
 * With KILN_ARM_DSP (the C backend's --cpu cortex-m4, cortex-m7 or cortex-m33) the products run
 * on the DSP extension through ACLE (arm_acle.h): SXTB16 unpacks four int8 weights of one word
 * into two pairs of int16, and SMLAD adds two products at once. Otherwise the same sums are
 * portable C. Integer sums are exact in any order, so both equal the host's bit for bit.
 *
 * x's zero point leaves the loops: `bias` holds bias - x_zero * sum(w) per output channel, and a
 * padding tap reads x_zero itself, whose product that term cancels.
 *
 * The general path gathers each output pixel's window ("im2col", K = C / group * taps values)
 * into int16 columns, two pixels at a time, and accumulates two output channels against two
 * columns at once: per four k, two weight words and four column words make eight SMLADs.
 * Layouts, per group, with K rounded up to a multiple of four (kiln_qconv_packed_k4; the padding's
 * weights are zero):
 *   weights, per pair of output channels (an odd last channel paired with itself): for each four
 *     k, the first channel's four then the second's, each four ordered k0 k2 k1 k3 (SXTB16 takes
 *     bytes 0 and 2, then, rotated by 8, bytes 1 and 3);
 *   columns of two pixels (an odd last pixel paired with itself): for each four k, the first
 *     pixel's four then the second's.
 * A 2-D depthwise convolution (one input channel per output channel) takes its own path: the
 * channel's plane, padded with x_zero, as int16, a band of output rows at a time (so that its
 * scratch stays small), and each row of taps as pairs of products. */
typedef struct kiln_qconv_packed_params {
  const int8_t* w;            /* rearranged as above (depthwise: as in the model) */
  ptrdiff_t K, out_size;      /* the general path's window (a multiple of four) and plane size */
  const int32_t* bias;        /* bias - x_zero * sum(w), per output channel */
  const int32_t* mult;        /* fixed-point multipliers per output channel */
  const int8_t* shift;        /* and their exponents (requant.c) */
  int32_t x_zero;             /* the stored value of x's zero point */
  int32_t x_signed;           /* 1: x is int8, 0: uint8 */
  int32_t y_zero, y_lo, y_hi; /* the output's zero point and range */
  int32_t right_shifts;       /* 1: every channel's shift is <= -2 (kiln_requant_right) */
} kiln_qconv_packed_params;

#if KILN_QP_DSP
/* One channel's four weights (a word, in the k0 k2 k1 k3 order) against two pixels' four column
 * values (a01 a23, b01 b23): four SMLADs into *sa and *sb. */
static inline __attribute__((always_inline)) void kiln_qp_quad(int32_t w, int32_t a01, int32_t a23,
                                                               int32_t b01, int32_t b23,
                                                               int32_t* sa, int32_t* sb) {
  const int32_t lo = __sxtb16(w), hi = kiln_qp_sxtb16_ror8(w);
  *sa = __smlad(hi, a23, __smlad(lo, a01, *sa));
  *sb = __smlad(hi, b23, __smlad(lo, b01, *sb));
}
#endif

/* One block of the general path: output channels m and m + 1 at pixels p and p + 1, written at
 * y0 (channel m's output at p). `block` holds 1 where there is a second channel (else m's sums
 * are taken twice: an odd last channel) and 2 where there is a second pixel. The sums of the
 * pair's weights w with the two columns, then their requantization and stores. The C backend
 * puts it in a function of each node's own (kiln_qconv_packed_block_fn), so that the node's
 * constants fold into it and the loop's thirteen live values get the registers. */
KILN_QP_INLINE void kiln_qconv_packed_block(const int8_t* w, const int16_t* col,
                                            const kiln_qconv_packed_params* q, uint8_t* y0,
                                            ptrdiff_t m, int block) {
  const ptrdiff_t K = q->K, m1 = block & 1 ? m + 1 : m;
  int32_t s00 = q->bias[m], s01 = s00, s10 = q->bias[m1], s11 = s10;
  ptrdiff_t i;
#if KILN_QP_DSP
  for (i = K >> 2; i > 0; --i) { /* w and col are word-aligned, K a multiple of four */
    int32_t a01, a23, b01, b23, wa, wb;
    KILN_QP_LDRD(a01, a23, col);
    KILN_QP_LDRD(b01, b23, col);
    KILN_QP_LDRD(wa, wb, w);
    kiln_qp_quad(wa, a01, a23, b01, b23, &s00, &s01);
    kiln_qp_quad(wb, a01, a23, b01, b23, &s10, &s11);
  }
#else
  for (i = K >> 2; i > 0; --i, w += 8, col += 8) {
    s00 += w[0] * col[0] + w[2] * col[1] + w[1] * col[2] + w[3] * col[3];
    s01 += w[0] * col[4] + w[2] * col[5] + w[1] * col[6] + w[3] * col[7];
    s10 += w[4] * col[0] + w[6] * col[1] + w[5] * col[2] + w[7] * col[3];
    s11 += w[4] * col[4] + w[6] * col[5] + w[5] * col[6] + w[7] * col[7];
  }
#endif
  { /* a channel at a time: fewer values live */
    uint8_t* y1 = y0 + (m1 - m) * q->out_size;
    int32_t mult = q->mult[m], shift = q->shift[m];
    y0[0] = KILN_QP_REQUANT(s00, mult, shift, q);
    if (block & 2) y0[1] = KILN_QP_REQUANT(s01, mult, shift, q);
    mult = q->mult[m1];
    shift = q->shift[m1];
    y1[0] = KILN_QP_REQUANT(s10, mult, shift, q);
    if (block & 2) y1[1] = KILN_QP_REQUANT(s11, mult, shift, q);
  }
}

/* A node's kiln_qconv_packed_block with its parameters (the C backend writes one per node). */
typedef void (*kiln_qconv_packed_block_fn)(const int8_t* w, const int16_t* col, uint8_t* y0,
                                           ptrdiff_t m, int block);

/* The columns of pixels p and p1 (p + 1, or p again for an odd last pixel) of image group xg,
 * interleaved into col (2 * k4 int16, the padding zero). */
KILN_QP_INLINE void kiln_qconv_packed_gather(const uint8_t* xg, const kiln_conv_shape* s,
                                             const kiln_qconv_packed_params* q, ptrdiff_t p,
                                             ptrdiff_t p1, int16_t* col) {
  const ptrdiff_t cg = s->c / s->group, in_h = s->in[1], in_w = s->in[2];
  const ptrdiff_t in_size = (ptrdiff_t)s->in[0] * in_h * in_w, k_w = s->k[2], d_w = s->d[2];
  const ptrdiff_t K = cg * s->k[0] * s->k[1] * k_w, k4 = kiln_qconv_packed_k4(K);
  const int sign = q->x_signed;
  const int16_t zero = (int16_t)q->x_zero;
  ptrdiff_t j, c, kd, kh, kw;
  for (j = 0; j < 2; ++j) {
    const ptrdiff_t pix = j ? p1 : p, ow = pix % s->out[2], oh = pix / s->out[2] % s->out[1];
    const ptrdiff_t od = pix / s->out[2] / s->out[1];
    const ptrdiff_t sd = od * s->s[0] - s->p[0], sh = oh * s->s[1] - s->p[1];
    const ptrdiff_t sw = ow * s->s[2] - s->p[2];
    const int w_in = sw >= 0 && sw + (k_w - 1) * d_w < in_w; /* every tap of a row inside */
    int16_t* d = col + 4 * j;
    ptrdiff_t left = 4; /* values until the other pixel's four */
#define KILN_QP_PUT(v) \
  do {                 \
    *d++ = (v);        \
    if (--left == 0) { \
      d += 4;          \
      left = 4;        \
    }                  \
  } while (0)
    for (c = 0; c < cg; ++c)
      for (kd = 0; kd < s->k[0]; ++kd) {
        const ptrdiff_t id = sd + kd * s->d[0];
        for (kh = 0; kh < s->k[1]; ++kh) {
          const ptrdiff_t ih = sh + kh * s->d[1];
          const ptrdiff_t row = c * in_size + (id * in_h + ih) * in_w;
          if (id < 0 || id >= s->in[0] || ih < 0 || ih >= in_h) {
            for (kw = 0; kw < k_w; ++kw) KILN_QP_PUT(zero);
          } else if (w_in) {
            const uint8_t* xr = xg + row + sw;
            for (kw = 0; kw < k_w; ++kw) KILN_QP_PUT(KILN_QP_X(xr, kw * d_w, sign));
          } else {
            for (kw = 0; kw < k_w; ++kw) {
              const ptrdiff_t iw = sw + kw * d_w;
              KILN_QP_PUT(iw >= 0 && iw < in_w ? KILN_QP_X(xg, row + iw, sign) : zero);
            }
          }
        }
      }
    for (c = K; c < k4; ++c) KILN_QP_PUT(0); /* times zero weights */
#undef KILN_QP_PUT
  }
}

/* The columns of pixels p and p1 of a 1x1 convolution without padding: the channels' values at
 * the two pixels, four at a time. */
KILN_QP_INLINE void kiln_qconv_packed_gather_1x1(const uint8_t* xg, const kiln_conv_shape* s,
                                                 const kiln_qconv_packed_params* q, ptrdiff_t p,
                                                 ptrdiff_t p1, int16_t* col) {
  const ptrdiff_t cg = s->c / s->group, in_h = s->in[1], in_w = s->in[2];
  const ptrdiff_t in_size = (ptrdiff_t)s->in[0] * in_h * in_w;
  const int sign = q->x_signed;
  const uint8_t *a, *b;
  int16_t* d = col;
  ptrdiff_t c, j;
  for (j = 0; j < 2; ++j) {
    const ptrdiff_t pix = j ? p1 : p, ow = pix % s->out[2], oh = pix / s->out[2] % s->out[1];
    const ptrdiff_t od = pix / s->out[2] / s->out[1];
    const uint8_t* at = xg + ((od * s->s[0]) * in_h + oh * s->s[1]) * in_w + ow * s->s[2];
    if (j)
      b = at;
    else
      a = at;
  }
  for (c = 0; c + 4 <= cg; c += 4, d += 8, a += 4 * in_size, b += 4 * in_size) {
    d[0] = KILN_QP_X(a, 0, sign);
    d[1] = KILN_QP_X(a, in_size, sign);
    d[2] = KILN_QP_X(a, 2 * in_size, sign);
    d[3] = KILN_QP_X(a, 3 * in_size, sign);
    d[4] = KILN_QP_X(b, 0, sign);
    d[5] = KILN_QP_X(b, in_size, sign);
    d[6] = KILN_QP_X(b, 2 * in_size, sign);
    d[7] = KILN_QP_X(b, 3 * in_size, sign);
  }
  if (c < cg) { /* the last four, padded with zeros */
    for (j = 0; j < 4; ++j, ++c) {
      d[j] = c < cg ? KILN_QP_X(a, (c & 3) * in_size, sign) : 0;
      d[4 + j] = c < cg ? KILN_QP_X(b, (c & 3) * in_size, sign) : 0;
    }
  }
}

/* The general path: every output of every image; `cols` holds 2 * q->K int16. */
KILN_QP_INLINE void kiln_qconv_packed_run(const uint8_t* x, const kiln_conv_shape* s,
                                          const kiln_qconv_packed_params* q, int16_t* cols,
                                          uint8_t* y, kiln_qconv_packed_block_fn block_fn) {
  const ptrdiff_t cg = s->c / s->group, mg = s->m / s->group;
  const ptrdiff_t in_size = (ptrdiff_t)s->in[0] * s->in[1] * s->in[2];
  const ptrdiff_t out_size = (ptrdiff_t)s->out[0] * s->out[1] * s->out[2];
  const ptrdiff_t pair_bytes = 2 * q->K; /* q->K: the window, a multiple of four */
  /* A 1x1 window without padding is one pixel of the image. */
  const int one_pixel =
      s->k[0] * s->k[1] * s->k[2] == 1 && s->p[0] == 0 && s->p[1] == 0 && s->p[2] == 0;
  ptrdiff_t n, g, p, mm;
  for (n = 0; n < s->n; ++n)
    for (g = 0; g < s->group; ++g) {
      const uint8_t* xg = x + (n * s->c + g * cg) * in_size;
      const int8_t* wg = q->w + g * ((mg + 1) / 2) * pair_bytes;
      for (p = 0; p < out_size; p += 2) {
        const int two = p + 1 < out_size;
        if (one_pixel)
          kiln_qconv_packed_gather_1x1(xg, s, q, p, two ? p + 1 : p, cols);
        else
          kiln_qconv_packed_gather(xg, s, q, p, two ? p + 1 : p, cols);
        for (mm = 0; mm < mg; mm += 2) /* an odd last channel or pixel is taken twice */
          block_fn(wg + mm / 2 * pair_bytes, cols, y + (n * s->m + g * mg + mm) * out_size + p,
                   g * mg + mm, (mm + 1 < mg) | (two << 1));
      }
    }
}

/* The taps of one output: rows of k_w taps, pairs of adjacent taps at a time when d_w is 1 (the
 * weights of a row padded to an even count, so that each row starts word-aligned). */
KILN_QP_INLINE int32_t kiln_qconv_packed_window(const int16_t* at, const int16_t* wv, ptrdiff_t k_h,
                                                ptrdiff_t k_w, ptrdiff_t d_h, ptrdiff_t d_w,
                                                ptrdiff_t plane_w, int32_t acc) {
  const ptrdiff_t kw2 = (k_w + 1) & ~(ptrdiff_t)1;
  ptrdiff_t kh, kw;
  KILN_QP_UNROLL
  for (kh = 0; kh < k_h; ++kh, at += d_h * plane_w, wv += kw2) {
    if (d_w == 1) {
      KILN_QP_UNROLL
      for (kw = 0; kw + 1 < k_w; kw += 2) {
#if KILN_QP_DSP
        acc = __smlad(kiln_qp_load32(at + kw), kiln_qp_load32(wv + kw), acc);
#else
        acc += at[kw] * wv[kw] + at[kw + 1] * wv[kw + 1];
#endif
      }
      if (k_w & 1) acc += at[k_w - 1] * wv[k_w - 1]; /* the last of an odd row, alone */
    } else {
      for (kw = 0; kw < k_w; ++kw) acc += at[kw * d_w] * wv[kw];
    }
  }
  return acc;
}

/* dst[i] = src[i] as int16 for i < n: the bytes read as int8 where `sign`, else as uint8. */
KILN_QP_INLINE void kiln_qconv_packed_widen(const uint8_t* src, int16_t* dst, ptrdiff_t n,
                                            int sign) {
  ptrdiff_t i = 0;
#if KILN_QP_DSP
  for (; i + 4 <= n; i += 4) { /* a word's four bytes: SXTB16 / UXTB16, then pair them back */
    const int32_t v = kiln_qp_load32(src + i);
    const uint32_t even = sign ? (uint32_t)__sxtb16(v) : (uint32_t)__uxtb16((uint32_t)v);
    const uint32_t odd = sign ? (uint32_t)kiln_qp_sxtb16_ror8(v) : (uint32_t)kiln_qp_uxtb16_ror8(v);
    const uint32_t lo = (even & 0xFFFFu) | (odd << 16), hi = (even >> 16) | (odd & 0xFFFF0000u);
    memcpy(dst + i, &lo, 4);
    memcpy(dst + i + 2, &hi, 4);
  }
#endif
  for (; i < n; ++i) dst[i] = KILN_QP_X(src, i, sign);
}

/* A 2-D depthwise convolution (group = C = M, a leading spatial axis of size 1); `scratch` holds
 * kiln_qconv_packed_depthwise_scratch(s) int16: the weights of a channel, then its plane. */
KILN_QP_INLINE void kiln_qconv_packed_depthwise(const uint8_t* x, const kiln_conv_shape* s,
                                                const kiln_qconv_packed_params* q, int16_t* scratch,
                                                uint8_t* y) {
  const ptrdiff_t in_h = s->in[1], in_w = s->in[2], k_h = s->k[1], k_w = s->k[2];
  const ptrdiff_t s_h = s->s[1], s_w = s->s[2], d_h = s->d[1], d_w = s->d[2];
  const ptrdiff_t out_h = s->out[1], out_w = s->out[2], kw2 = (k_w + 1) & ~(ptrdiff_t)1;
  const ptrdiff_t plane_w = kiln_qconv_packed_plane_w(s), rows = kiln_qconv_packed_plane_rows(s);
  const ptrdiff_t band = kiln_qconv_packed_band(s);
  const int sign = q->x_signed;
  const int16_t zero = (int16_t)q->x_zero;
  int16_t *wv = scratch, *plane = scratch + k_h * kw2;
  /* The plane's columns [c0, c1) are the image's; the rest is padding. */
  const ptrdiff_t c0 = s->p[2] < plane_w ? s->p[2] : plane_w;
  const ptrdiff_t c1 = c0 + in_w < plane_w ? c0 + in_w : plane_w;
  ptrdiff_t n, m, r, c, oh0, oh, ow;
  /* The padding columns of every row, once: the bands write only columns [c0, c1). */
  for (r = 0; r < ((band - 1) * s_h + rows) * plane_w; ++r) plane[r] = zero;
  for (n = 0; n < s->n; ++n)
    for (m = 0; m < s->m; ++m) {
      const uint8_t* xm = x + (n * s->c + m) * in_h * in_w;
      uint8_t* ym = y + (n * s->m + m) * out_h * out_w;
      const int32_t bias = q->bias[m], mult = q->mult[m], shift = q->shift[m];
      for (r = 0; r < k_h; ++r)
        for (c = 0; c < kw2; ++c) wv[r * kw2 + c] = c < k_w ? q->w[(m * k_h + r) * k_w + c] : 0;
      for (oh0 = 0; oh0 < out_h; oh0 += band) { /* a band of output rows over its plane rows */
        const ptrdiff_t oh1 = oh0 + band < out_h ? oh0 + band : out_h;
        for (r = 0; r < (oh1 - oh0 - 1) * s_h + rows; ++r) { /* columns [c0, c1) */
          const ptrdiff_t ih = oh0 * s_h + r - s->p[1], row = ih * in_w - s->p[2];
          int16_t* pr = plane + r * plane_w;
          if (ih >= 0 && ih < in_h)
            kiln_qconv_packed_widen(xm + row + c0, pr + c0, c1 - c0, sign);
          else
            for (c = c0; c < c1; ++c) pr[c] = zero;
        }
        for (oh = oh0; oh < oh1; ++oh) {
          const int16_t* at = plane + (oh - oh0) * s_h * plane_w;
          for (ow = 0; ow < out_w; ++ow, at += s_w, ++ym) {
            const int32_t acc = kiln_qconv_packed_window(at, wv, k_h, k_w, d_h, d_w, plane_w, bias);
            *ym = KILN_QP_REQUANT(acc, mult, shift, q);
          }
        }
      }
    }
}
