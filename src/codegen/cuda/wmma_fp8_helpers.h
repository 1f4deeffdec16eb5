// The WMMA path's fp8 weights (E4M3 bytes, widened to half times the tensor's scale when a
// block stages them), embedded after wmma_helpers.h where weights are stored as fp8.
#ifndef KILN_CUDA_TC_FP8_
#define KILN_CUDA_TC_FP8_
/* E4M3 weight bytes, widened to half times the tensor's scale when a block stages them. */
#ifdef __CUDACC__
#include <cuda_fp8.h>
KILN_TC static inline void kiln_tc_stage8(const unsigned char* src, kiln_half* dst, int64_t count,
                                          float scale, int first, int step) {
  for (int64_t j = first; j < count; j += step) {
    const __half h = __half(__nv_cvt_fp8_to_halfraw((__nv_fp8_storage_t)__ldg(src + j), __NV_E4M3));
    dst[j] = __float2half_rn(__half2float(h) * scale);
  }
}
#else
static inline float kiln_e4m3_to_float(unsigned char c) {
  const int e = (c >> 3) & 15, m = c & 7;
  const float v = (e == 15 && m == 7) ? NAN
                  : e == 0            ? ldexpf((float)m, -9)
                                      : ldexpf((float)(8 + m), e - 10);
  return (c & 0x80) ? -v : v;
}
static inline void kiln_tc_stage8(const unsigned char* src, kiln_half* dst, int64_t count,
                                  float scale, int first, int step) {
  for (int64_t j = first; j < count; j += step)
    dst[j] = kiln_f2h(kiln_e4m3_to_float(src[j]) * scale);
}
#endif
#endif /* KILN_CUDA_TC_FP8_ */
