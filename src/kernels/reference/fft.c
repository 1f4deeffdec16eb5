/* fft: the complex transform of the signal ops (DFT, STFT), defined per element type by
 * KILN_FFT_DEFINE (fft_f32.c, fft_f64.c). a holds n complex values as (re, im) pairs and is
 * transformed in place: radix-2 butterflies when n is a power of two, else a direct DFT that
 * writes through tmp (2 * n values). tw holds exp(sign * 2 pi i k / n) for k < n as (cos, sin)
 * pairs (sign -1 forward, +1 inverse); the inverse also divides by n. */
#define KILN_FFT_DEFINE(S, T)                                                  \
  static void kiln_fft_##S(T* a, T* tmp, size_t n, const T* tw, int inverse) { \
    size_t i, j, k, len;                                                       \
    if (n <= 1) return;                                                        \
    if ((n & (n - 1)) == 0) {                                                  \
      for (i = 1, j = 0; i < n; ++i) {                                         \
        size_t bit = n >> 1;                                                   \
        for (; j & bit; bit >>= 1) j ^= bit;                                   \
        j ^= bit;                                                              \
        if (i < j) {                                                           \
          T re = a[2 * i], im = a[2 * i + 1];                                  \
          a[2 * i] = a[2 * j];                                                 \
          a[2 * i + 1] = a[2 * j + 1];                                         \
          a[2 * j] = re;                                                       \
          a[2 * j + 1] = im;                                                   \
        }                                                                      \
      }                                                                        \
      for (len = 2; len <= n; len <<= 1) {                                     \
        const size_t half = len / 2, step = n / len;                           \
        for (i = 0; i < n; i += len)                                           \
          for (k = 0; k < half; ++k) {                                         \
            T *u = a + 2 * (i + k), *v = a + 2 * (i + k + half);               \
            const T wr = tw[2 * k * step], wi = tw[2 * k * step + 1];          \
            const T vr = v[0] * wr - v[1] * wi, vi = v[0] * wi + v[1] * wr;    \
            v[0] = u[0] - vr;                                                  \
            v[1] = u[1] - vi;                                                  \
            u[0] = u[0] + vr;                                                  \
            u[1] = u[1] + vi;                                                  \
          }                                                                    \
      }                                                                        \
    } else {                                                                   \
      for (k = 0; k < n; ++k) {                                                \
        T re = 0, im = 0;                                                      \
        size_t idx = 0;                                                        \
        for (j = 0; j < n; ++j) {                                              \
          re += a[2 * j] * tw[2 * idx] - a[2 * j + 1] * tw[2 * idx + 1];       \
          im += a[2 * j] * tw[2 * idx + 1] + a[2 * j + 1] * tw[2 * idx];       \
          idx += k;                                                            \
          if (idx >= n) idx -= n;                                              \
        }                                                                      \
        tmp[2 * k] = re;                                                       \
        tmp[2 * k + 1] = im;                                                   \
      }                                                                        \
      memcpy(a, tmp, 2 * n * sizeof(T));                                       \
    }                                                                          \
    if (inverse)                                                               \
      for (i = 0; i < 2 * n; ++i) a[i] = a[i] / (T)n;                          \
  }
