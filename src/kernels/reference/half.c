/* half: IEEE float16 and bfloat16 bit patterns <-> float (round to nearest even). */
static inline float kiln_half_f16_to_f32(uint16_t h) {
  uint32_t sign = (uint32_t)(h & 0x8000u) << 16, exp = (h >> 10) & 0x1fu, man = h & 0x3ffu, bits;
  float f;
  if (exp == 0x1fu) {
    bits = sign | 0x7f800000u | (man << 13);
  } else if (exp != 0) {
    bits = sign | ((exp + 112u) << 23) | (man << 13);
  } else if (man == 0) {
    bits = sign;
  } else { /* subnormal: normalize */
    exp = 113u;
    while ((man & 0x400u) == 0) {
      man <<= 1;
      --exp;
    }
    bits = sign | (exp << 23) | ((man & 0x3ffu) << 13);
  }
  memcpy(&f, &bits, 4);
  return f;
}

static inline uint16_t kiln_half_f32_to_f16(float f) {
  uint32_t x, sign, exp, man, half;
  memcpy(&x, &f, 4);
  sign = (x >> 16) & 0x8000u;
  exp = (x >> 23) & 0xffu;
  man = x & 0x7fffffu;
  if (exp == 0xffu) return (uint16_t)(sign | 0x7c00u | (man ? 0x200u : 0u));
  if (exp > 142u) return (uint16_t)(sign | 0x7c00u); /* overflow */
  if (exp < 113u) {                                  /* subnormal or zero */
    uint32_t shift, rounded;
    if (exp < 102u) return (uint16_t)sign;
    man |= 0x800000u;
    shift = 126u - exp;
    rounded = man >> shift;
    if ((man & ((1u << shift) - 1u)) > (1u << (shift - 1u)) ||
        ((man & ((1u << shift) - 1u)) == (1u << (shift - 1u)) && (rounded & 1u)))
      ++rounded;
    return (uint16_t)(sign | rounded);
  }
  half = ((exp - 112u) << 10) | (man >> 13);
  if ((man & 0x1fffu) > 0x1000u || ((man & 0x1fffu) == 0x1000u && (half & 1u))) ++half;
  return (uint16_t)(sign | half);
}

static inline float kiln_half_bf16_to_f32(uint16_t h) {
  uint32_t bits = (uint32_t)h << 16;
  float f;
  memcpy(&f, &bits, 4);
  return f;
}

static inline uint16_t kiln_half_f32_to_bf16(float f) {
  uint32_t x;
  memcpy(&x, &f, 4);
  if ((x & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((x >> 16) | 0x40u); /* quiet NaN */
  x += 0x7fffu + ((x >> 16) & 1u);
  return (uint16_t)(x >> 16);
}
