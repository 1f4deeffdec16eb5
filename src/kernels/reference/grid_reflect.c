/* grid_reflect: GridSample's reflection padding: x reflected by the nearer border of [lo, hi]
 * until it lies inside (the host's Reflect, in float; quotients from 2^24 up are even integers,
 * so no float-to-integer conversion can overflow). */
static float kiln_grid_reflect(float x, float lo, float hi) {
  const float rng = hi - lo;
  float dx, q, r;
  int odd = 0;
  if (!(rng > 0.0f)) return lo;
  if (x < lo)
    dx = lo - x;
  else if (x > hi)
    dx = x - hi;
  else
    return x;
  q = dx / rng;
  if (q < 16777216.0f) {
    const int32_t n = (int32_t)q;
    odd = (int)(n & 1);
    q = (float)n;
  }
  r = dx - q * rng;
  if (x < lo) return odd ? hi - r : lo + r;
  return odd ? lo + r : hi - r;
}

/* The index i reflected into [lo, hi], truncated and clamped to [0, size) (the host's
 * pixel_index for reflection padding). */
static int32_t kiln_grid_reflect_index(int32_t i, float lo, float hi, int32_t size) {
  const int32_t j = (int32_t)kiln_grid_reflect((float)i, lo, hi);
  return j < 0 ? 0 : (j > size - 1 ? size - 1 : j);
}
