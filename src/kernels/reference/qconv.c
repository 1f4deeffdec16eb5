/* needs: conv_shape requant */
/* qconv: direct 8-bit integer convolution for ConvInteger (int32 output) and QLinearConv (8-bit
 * output, requantized), one output channel per call. x and w are read as bytes: an int8 value v
 * is stored as the byte b = v + 128 (mod 256), so with flip = 0x80 the value is (b ^ flip) - 128,
 * and zero points are given in that flipped domain. Padding contributes zero in the
 * zero-point-shifted domain. The requantization is the host's: for ONNX's QLinearConv
 * nearbyint(acc * mul + y_zero), for fuse-qdq's (com.kiln) the fixed-point one of requant.c with
 * the channel's mult and shift; saturated to [y_lo, y_hi]. */
typedef struct kiln_qconv_params {
  int32_t x_flip, w_flip;      /* 0x80 for int8 data, 0 for uint8 */
  int32_t y_lo, y_hi;          /* QLinearConv: the output's range */
  const int32_t *mult, *shift; /* fixed-point multipliers per output channel, or NULL */
} kiln_qconv_params;

/* One output: y32[o] = acc (ConvInteger) or y8[o] = requantized acc (QLinearConv), channel m. */
static inline void kiln_qconv_store(int32_t acc, int32_t* y32, uint8_t* y8, ptrdiff_t o, double mul,
                                    double y_zero, const kiln_qconv_params* q, ptrdiff_t m) {
  double v;
  if (!y8) {
    y32[o] = acc;
    return;
  }
  if (q->mult) {
    y8[o] = (uint8_t)kiln_requant_fixed(acc, q->mult[m], q->shift[m], (int32_t)y_zero, q->y_lo,
                                        q->y_hi);
    return;
  }
  v = (double)acc * mul + y_zero;
  if (v != v) v = 0;
  v = nearbyint(v);
  if (v < q->y_lo) v = q->y_lo;
  if (v > q->y_hi) v = q->y_hi;
  y8[o] = (uint8_t)(int32_t)v;
}

/* A 1x1 convolution of stride 1 without padding, output channel m: per image a product over the
 * channels, four pixels at a time. x's zero point leaves the loop as x_zero * (the sum of the
 * channel's weights): the same integer sums, fewer instructions per multiply-add. */
static void kiln_qconv_pointwise(const uint8_t* x, const uint8_t* w, int32_t* y32, uint8_t* y8,
                                 const kiln_conv_shape* s, const kiln_qconv_params* q, ptrdiff_t m,
                                 int32_t x_zero, int32_t w_zero, int32_t bias, double mul,
                                 double y_zero) {
  const ptrdiff_t cg = s->c / s->group, mg = s->m / s->group;
  const ptrdiff_t size = (ptrdiff_t)s->in[0] * s->in[1] * s->in[2];
  const int32_t xf = q->x_flip, wf = q->w_flip;
  const uint8_t* wm = w + m * cg;
  int32_t wsum = 0, base;
  ptrdiff_t n, c, p;
  for (c = 0; c < cg; ++c) wsum += (int32_t)(wm[c] ^ wf) - w_zero;
  base = bias - x_zero * wsum;
  for (n = 0; n < s->n; ++n) {
    const uint8_t* xg = x + (n * s->c + m / mg * cg) * size;
    const ptrdiff_t o = (n * s->m + m) * size;
    for (p = 0; p + 4 <= size; p += 4) {
      const uint8_t* xc = xg + p;
      int32_t a0 = base, a1 = base, a2 = base, a3 = base;
      for (c = 0; c < cg; ++c, xc += size) {
        const int32_t wv = (int32_t)(wm[c] ^ wf) - w_zero;
        a0 += (int32_t)(xc[0] ^ xf) * wv;
        a1 += (int32_t)(xc[1] ^ xf) * wv;
        a2 += (int32_t)(xc[2] ^ xf) * wv;
        a3 += (int32_t)(xc[3] ^ xf) * wv;
      }
      kiln_qconv_store(a0, y32, y8, o + p, mul, y_zero, q, m);
      kiln_qconv_store(a1, y32, y8, o + p + 1, mul, y_zero, q, m);
      kiln_qconv_store(a2, y32, y8, o + p + 2, mul, y_zero, q, m);
      kiln_qconv_store(a3, y32, y8, o + p + 3, mul, y_zero, q, m);
    }
    for (; p < size; ++p) {
      int32_t acc = base;
      for (c = 0; c < cg; ++c)
        acc += (int32_t)(xg[c * size + p] ^ xf) * ((int32_t)(wm[c] ^ wf) - w_zero);
      kiln_qconv_store(acc, y32, y8, o + p, mul, y_zero, q, m);
    }
  }
}

/* Output channel m of every image: y32 (ConvInteger) or y8 (QLinearConv), the other NULL. As in
 * kernels/conv.c, four adjacent outputs whose windows lie inside the image on the w axis are
 * accumulated together, tap by tap and over the input channels within a tap. */
static void kiln_qconv_run(const uint8_t* x, const uint8_t* w, int32_t* y32, uint8_t* y8,
                           const kiln_conv_shape* s, const kiln_qconv_params* q, ptrdiff_t m,
                           int32_t x_zero, int32_t w_zero, int32_t bias, double mul,
                           double y_zero) {
  const ptrdiff_t cg = s->c / s->group, mg = s->m / s->group;
  const ptrdiff_t in_d = s->in[0], in_h = s->in[1], in_w = s->in[2];
  const ptrdiff_t k_d = s->k[0], k_h = s->k[1], k_w = s->k[2];
  const ptrdiff_t s_w = s->s[2], d_d = s->d[0], d_h = s->d[1], d_w = s->d[2];
  const ptrdiff_t in_size = in_d * in_h * in_w, ksize = k_d * k_h * k_w;
  const ptrdiff_t out_size = (ptrdiff_t)s->out[0] * s->out[1] * s->out[2];
  const ptrdiff_t last_full = in_w - 1 - (k_w - 1) * d_w;
  const int32_t xf = q->x_flip, wf = q->w_flip;
  const uint8_t* wm = w + m * cg * ksize;
  ptrdiff_t n, c, od, oh, ow, kd, kh, kw;
  if (ksize == 1 && s->s[0] == 1 && s->s[1] == 1 && s_w == 1 && s->p[0] == 0 && s->p[1] == 0 &&
      s->p[2] == 0 && s->out[0] == in_d && s->out[1] == in_h && s->out[2] == in_w) {
    kiln_qconv_pointwise(x, w, y32, y8, s, q, m, x_zero, w_zero, bias, mul, y_zero);
    return;
  }
  for (n = 0; n < s->n; ++n) {
    const uint8_t* xg = x + (n * s->c + m / mg * cg) * in_size;
    ptrdiff_t o = (n * s->m + m) * out_size;
    for (od = 0; od < s->out[0]; ++od) {
      const ptrdiff_t sd = od * s->s[0] - s->p[0];
      ptrdiff_t kd0, kd1;
      kiln_conv_shape_taps(sd, d_d, k_d, in_d, &kd0, &kd1);
      for (oh = 0; oh < s->out[1]; ++oh) {
        const ptrdiff_t sh = oh * s->s[1] - s->p[1];
        ptrdiff_t kh0, kh1;
        kiln_conv_shape_taps(sh, d_h, k_h, in_h, &kh0, &kh1);
        for (ow = 0; ow < s->out[2];) {
          const ptrdiff_t sw = ow * s_w - s->p[2];
          if (ow + 4 <= s->out[2] && sw >= 0 && sw + 3 * s_w <= last_full) {
            int32_t a0 = bias, a1 = bias, a2 = bias, a3 = bias;
            for (kd = kd0; kd < kd1; ++kd) {
              for (kh = kh0; kh < kh1; ++kh) {
                const uint8_t* xr = xg + ((sd + kd * d_d) * in_h + sh + kh * d_h) * in_w + sw;
                const uint8_t* wr = wm + (kd * k_h + kh) * k_w;
                for (kw = 0; kw < k_w; ++kw) {
                  const uint8_t *xc = xr + kw * d_w, *wc = wr + kw;
                  for (c = 0; c < cg; ++c, xc += in_size, wc += ksize) {
                    const int32_t wv = (int32_t)(*wc ^ wf) - w_zero;
                    a0 += ((int32_t)(xc[0] ^ xf) - x_zero) * wv;
                    a1 += ((int32_t)(xc[s_w] ^ xf) - x_zero) * wv;
                    a2 += ((int32_t)(xc[2 * s_w] ^ xf) - x_zero) * wv;
                    a3 += ((int32_t)(xc[3 * s_w] ^ xf) - x_zero) * wv;
                  }
                }
              }
            }
            kiln_qconv_store(a0, y32, y8, o, mul, y_zero, q, m);
            kiln_qconv_store(a1, y32, y8, o + 1, mul, y_zero, q, m);
            kiln_qconv_store(a2, y32, y8, o + 2, mul, y_zero, q, m);
            kiln_qconv_store(a3, y32, y8, o + 3, mul, y_zero, q, m);
            o += 4;
            ow += 4;
          } else {
            ptrdiff_t kw0, kw1;
            int32_t acc = bias;
            kiln_conv_shape_taps(sw, d_w, k_w, in_w, &kw0, &kw1);
            for (kd = kd0; kd < kd1; ++kd) {
              for (kh = kh0; kh < kh1; ++kh) {
                const ptrdiff_t row = ((sd + kd * d_d) * in_h + sh + kh * d_h) * in_w + sw;
                const uint8_t* wr = wm + (kd * k_h + kh) * k_w;
                if (cg == 1) { /* depthwise, or one input channel: the taps of one row */
                  const uint8_t *xc = xg + row + kw0 * d_w, *wc = wr + kw0;
                  for (kw = kw0; kw < kw1; ++kw, xc += d_w, ++wc)
                    acc += ((int32_t)(*xc ^ xf) - x_zero) * ((int32_t)(*wc ^ wf) - w_zero);
                  continue;
                }
                for (kw = kw0; kw < kw1; ++kw) {
                  const uint8_t *xc = xg + row + kw * d_w, *wc = wr + kw;
                  for (c = 0; c < cg; ++c)
                    acc += ((int32_t)(xc[c * in_size] ^ xf) - x_zero) *
                           ((int32_t)(wc[c * ksize] ^ wf) - w_zero);
                }
              }
            }
            kiln_qconv_store(acc, y32, y8, o, mul, y_zero, q, m);
            ++o;
            ++ow;
          }
        }
      }
    }
  }
}
