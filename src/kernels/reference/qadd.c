/* needs: requant */
/* qadd: fuse-qdq's QLinearAdd (com.kiln), TFLite's and CMSIS-NN's integer Add: both inputs, less
 * their zero points, shifted left by 20 bits and rescaled to twice the larger input scale, added,
 * then requantized to the output's scale (requant.c's arithmetic throughout), the zero point added
 * and saturated. The host and the generated C both run it. */
typedef struct kiln_qadd_params {
  int32_t a_zero, a_mult, a_shift; /* input A: zero point, multiplier to the common scale */
  int32_t b_zero, b_mult, b_shift; /* input B: the same */
  int32_t y_mult, y_shift;         /* the sum to the output's scale */
  int32_t y_zero, lo, hi;          /* the output's zero point and range */
} kiln_qadd_params;

/* The parameters for scales a_scale, b_scale, y_scale (positive) and the zero points; lo and hi
 * the output type's range. */
static inline kiln_qadd_params kiln_qadd_params_of(double a_scale, int32_t a_zero, double b_scale,
                                                   int32_t b_zero, double y_scale, int32_t y_zero,
                                                   int32_t lo, int32_t hi) {
  const double twice_max = 2.0 * (a_scale > b_scale ? a_scale : b_scale);
  kiln_qadd_params p;
  p.a_zero = a_zero;
  p.b_zero = b_zero;
  p.y_zero = y_zero;
  p.lo = lo;
  p.hi = hi;
  kiln_requant_multiplier(a_scale / twice_max, &p.a_mult, &p.a_shift);
  kiln_requant_multiplier(b_scale / twice_max, &p.b_mult, &p.b_shift);
  kiln_requant_multiplier(twice_max / ((double)(1 << 20) * y_scale), &p.y_mult, &p.y_shift);
  return p;
}

/* One output of stored inputs a and b (their integer values). */
static inline int32_t kiln_qadd(int32_t a, int32_t b, const kiln_qadd_params* p) {
  const int32_t x = kiln_requant_scale((a - p->a_zero) * (1 << 20), p->a_mult, p->a_shift);
  const int32_t y = kiln_requant_scale((b - p->b_zero) * (1 << 20), p->b_mult, p->b_shift);
  return kiln_requant_fixed(x + y, p->y_mult, p->y_shift, p->y_zero, p->lo, p->hi);
}
