/* mt19937: the Mersenne Twister (std::mt19937, numpy's legacy RandomState), for seeded random
 * ops that must reproduce the reference stream. The state (624 words) lives in caller memory. */
typedef struct kiln_mt19937 {
  uint32_t mt[624];
  size_t index;
} kiln_mt19937;

static void kiln_mt19937_seed(kiln_mt19937* s, uint32_t seed) {
  size_t i;
  s->mt[0] = seed;
  for (i = 1; i < 624; ++i)
    s->mt[i] = 1812433253u * (s->mt[i - 1] ^ (s->mt[i - 1] >> 30)) + (uint32_t)i;
  s->index = 624;
}

static uint32_t kiln_mt19937_next(kiln_mt19937* s) {
  uint32_t y;
  if (s->index >= 624) {
    size_t i;
    for (i = 0; i < 624; ++i) {
      uint32_t x = (s->mt[i] & 0x80000000u) | (s->mt[(i + 1) % 624] & 0x7fffffffu);
      s->mt[i] = s->mt[(i + 397) % 624] ^ (x >> 1) ^ ((x & 1u) ? 0x9908b0dfu : 0u);
    }
    s->index = 0;
  }
  y = s->mt[s->index++];
  y ^= y >> 11;
  y ^= (y << 7) & 0x9d2c5680u;
  y ^= (y << 15) & 0xefc60000u;
  return y ^ (y >> 18);
}

/* A double in [0, 1) from 53 random bits, as numpy's random_sample. */
static double kiln_mt19937_uniform(kiln_mt19937* s) {
  uint32_t a = kiln_mt19937_next(s) >> 5, b = kiln_mt19937_next(s) >> 6;
  return (a * 67108864.0 + b) / 9007199254740992.0;
}
