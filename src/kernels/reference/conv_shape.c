/* conv_shape: the geometry of a convolution, shared by conv and conv_transpose. Spatial dims are
 * normalized to three (a 1-D or 2-D problem has leading unit dims). For Conv, `in` is the input
 * image and `out` the output grid; for ConvTranspose, `in` is the input grid and `out` the output
 * image. `p` is the padding at the start of each spatial axis. */
typedef struct kiln_conv_shape {
  int32_t n, c, m, group; /* batch, input channels, output channels, groups */
  int32_t in[3], k[3], s[3], d[3], p[3], out[3];
} kiln_conv_shape;

/* The taps [*lo, *hi) of a window starting at `start` (dilation d, k taps) inside [0, size). */
static inline void kiln_conv_shape_taps(ptrdiff_t start, ptrdiff_t d, ptrdiff_t k, ptrdiff_t size,
                                        ptrdiff_t* lo, ptrdiff_t* hi) {
  ptrdiff_t l = start >= 0 ? 0 : (d - 1 - start) / d;
  ptrdiff_t h = start > size - 1 ? 0 : (size - 1 - start) / d + 1;
  if (h > k) h = k;
  if (h < l) h = l;
  *lo = l;
  *hi = h;
}
