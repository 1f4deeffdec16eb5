/* needs: conv_shape */
/* conv: direct float convolution (groups, strides, dilations, padding), no im2col buffer. Each
 * output element is accumulated in a local, tap by tap and, within a tap, over the group's input
 * channels (one weight feeds a block of four adjacent outputs whose windows lie inside the
 * image on the w axis; the outputs at the borders go one at a time). The taps of an axis inside
 * the image are computed once per window, so the inner loops have no bounds checks. */
static void kiln_conv_f32(const float* x, const float* w, const float* b, float* y,
                          const kiln_conv_shape* s) {
  const ptrdiff_t cg = s->c / s->group, mg = s->m / s->group;
  const ptrdiff_t in_d = s->in[0], in_h = s->in[1], in_w = s->in[2];
  const ptrdiff_t k_d = s->k[0], k_h = s->k[1], k_w = s->k[2];
  const ptrdiff_t s_d = s->s[0], s_h = s->s[1], s_w = s->s[2];
  const ptrdiff_t d_d = s->d[0], d_h = s->d[1], d_w = s->d[2];
  const ptrdiff_t out_d = s->out[0], out_h = s->out[1], out_w = s->out[2];
  const ptrdiff_t in_size = in_d * in_h * in_w, ksize = k_d * k_h * k_w;
  /* the last window start on the w axis whose taps all lie inside the image */
  const ptrdiff_t last_full = in_w - 1 - (k_w - 1) * d_w;
  ptrdiff_t n, m, c, od, oh, ow, kd, kh, kw;
  for (n = 0; n < s->n; ++n) {
    for (m = 0; m < s->m; ++m) {
      const float* xg = x + (n * s->c + m / mg * cg) * in_size;
      const float* wm = w + m * cg * ksize;
      const float bias = b ? b[m] : 0.0f;
      for (od = 0; od < out_d; ++od) {
        const ptrdiff_t sd = od * s_d - s->p[0];
        ptrdiff_t kd0, kd1;
        kiln_conv_shape_taps(sd, d_d, k_d, in_d, &kd0, &kd1);
        for (oh = 0; oh < out_h; ++oh) {
          const ptrdiff_t sh = oh * s_h - s->p[1];
          ptrdiff_t kh0, kh1;
          kiln_conv_shape_taps(sh, d_h, k_h, in_h, &kh0, &kh1);
          for (ow = 0; ow < out_w;) {
            const ptrdiff_t sw = ow * s_w - s->p[2];
            if (ow + 4 <= out_w && sw >= 0 && sw + 3 * s_w <= last_full) {
              /* four outputs whose windows are inside the image on the w axis */
              float a0 = bias, a1 = bias, a2 = bias, a3 = bias;
              for (kd = kd0; kd < kd1; ++kd) {
                for (kh = kh0; kh < kh1; ++kh) {
                  const float* xr = xg + ((sd + kd * d_d) * in_h + sh + kh * d_h) * in_w + sw;
                  const float* wr = wm + (kd * k_h + kh) * k_w;
                  for (kw = 0; kw < k_w; ++kw) {
                    const float *xc = xr + kw * d_w, *wc = wr + kw;
                    for (c = 0; c < cg; ++c, xc += in_size, wc += ksize) {
                      const float wv = *wc;
                      a0 += xc[0] * wv;
                      a1 += xc[s_w] * wv;
                      a2 += xc[2 * s_w] * wv;
                      a3 += xc[3 * s_w] * wv;
                    }
                  }
                }
              }
              y[0] = a0;
              y[1] = a1;
              y[2] = a2;
              y[3] = a3;
              y += 4;
              ow += 4;
            } else {
              ptrdiff_t kw0, kw1;
              float acc = bias;
              kiln_conv_shape_taps(sw, d_w, k_w, in_w, &kw0, &kw1);
              for (kd = kd0; kd < kd1; ++kd) {
                for (kh = kh0; kh < kh1; ++kh) {
                  const ptrdiff_t row = ((sd + kd * d_d) * in_h + sh + kh * d_h) * in_w + sw;
                  const float* wr = wm + (kd * k_h + kh) * k_w;
                  for (kw = kw0; kw < kw1; ++kw) {
                    const float *xc = xg + row + kw * d_w, *wc = wr + kw;
                    for (c = 0; c < cg; ++c) acc += xc[c * in_size] * wc[c * ksize];
                  }
                }
              }
              *y++ = acc;
              ++ow;
            }
          }
        }
      }
    }
  }
}
