/* needs: conv_shape */
/* conv_transpose: direct float transposed convolution, no col2im buffer. Each output image
 * element gathers the input grid positions whose window covers it (image = grid * stride - pad +
 * tap * dilation), accumulating in a local. W is [C, M / group, k...]. */
static void kiln_conv_transpose_f32(const float* x, const float* w, const float* b, float* y,
                                    const kiln_conv_shape* s) {
  const ptrdiff_t cg = s->c / s->group, mg = s->m / s->group;
  const ptrdiff_t g_d = s->in[0], g_h = s->in[1], g_w = s->in[2];
  const ptrdiff_t k_d = s->k[0], k_h = s->k[1], k_w = s->k[2];
  const ptrdiff_t s_d = s->s[0], s_h = s->s[1], s_w = s->s[2];
  const ptrdiff_t d_d = s->d[0], d_h = s->d[1], d_w = s->d[2];
  const ptrdiff_t out_d = s->out[0], out_h = s->out[1], out_w = s->out[2];
  const ptrdiff_t grid_size = g_d * g_h * g_w, ksize = k_d * k_h * k_w, wstride = mg * ksize;
  ptrdiff_t n, m, c, od, oh, ow, kd, kh, kw;
  for (n = 0; n < s->n; ++n) {
    for (m = 0; m < s->m; ++m) {
      const ptrdiff_t gi = m / mg;
      const float* xg = x + (n * s->c + gi * cg) * grid_size;
      const float* wm = w + (gi * cg * mg + m % mg) * ksize;
      const float bias = b ? b[m] : 0.0f;
      for (od = 0; od < out_d; ++od) {
        for (oh = 0; oh < out_h; ++oh) {
          for (ow = 0; ow < out_w; ++ow) {
            float acc = bias;
            for (kd = 0; kd < k_d; ++kd) {
              const ptrdiff_t td = od + s->p[0] - kd * d_d, id = td / s_d;
              if (td < 0 || td % s_d != 0 || id >= g_d) continue;
              for (kh = 0; kh < k_h; ++kh) {
                const ptrdiff_t th = oh + s->p[1] - kh * d_h, ih = th / s_h;
                if (th < 0 || th % s_h != 0 || ih >= g_h) continue;
                for (kw = 0; kw < k_w; ++kw) {
                  const ptrdiff_t tw = ow + s->p[2] - kw * d_w, iw = tw / s_w;
                  const float *xp, *wp;
                  if (tw < 0 || tw % s_w != 0 || iw >= g_w) continue;
                  xp = xg + (id * g_h + ih) * g_w + iw;
                  wp = wm + (kd * k_h + kh) * k_w + kw;
                  for (c = 0; c < cg; ++c) acc += xp[c * grid_size] * wp[c * wstride];
                }
              }
            }
            *y++ = acc;
          }
        }
      }
    }
  }
}
