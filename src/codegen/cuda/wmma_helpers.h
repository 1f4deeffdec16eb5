// The WMMA tensor-core path's device helpers, embedded into every generated .cu that takes the
// path (codegen/cuda/cuda_tensor_core.cc): a warp evaluates 32 samples, one per lane; under a host
// C++ compiler a warp is a loop over its 32 lanes and WMMA an emulation. Reads kiln_f4,
// KILN_UNROLL and kiln_h2f from the generated file's prelude. Not compiled into kiln.
#ifndef KILN_CUDA_TC_
#define KILN_CUDA_TC_
/* The tensor-core path: a warp evaluates 32 samples, one per lane; matrix products of the warp's
 * 32-sample tile run on WMMA 16x16x16 (half inputs, float accumulate). */
#ifdef __CUDACC__
#include <mma.h>
#define KILN_TC __device__
#define KILN_LANE_COUNT 1                           /* this thread is one lane ... */
#define KILN_LANE_ROW(L) ((int)(threadIdx.x & 31u)) /* ... and its sample's row in the tile */
#define KILN_SYNCWARP() __syncwarp()
typedef __half kiln_half;
namespace kiln_wmma = nvcuda::wmma;
KILN_TC static inline void kiln_tc_put8(kiln_half* p, float a0, float a1, float a2, float a3,
                                        float a4, float a5, float a6, float a7) {
  __half2 h0 = __floats2half2_rn(a0, a1), h1 = __floats2half2_rn(a2, a3);
  __half2 h2 = __floats2half2_rn(a4, a5), h3 = __floats2half2_rn(a6, a7);
  uint4 v;
  v.x = *reinterpret_cast<unsigned*>(&h0);
  v.y = *reinterpret_cast<unsigned*>(&h1);
  v.z = *reinterpret_cast<unsigned*>(&h2);
  v.w = *reinterpret_cast<unsigned*>(&h3);
  *reinterpret_cast<uint4*>(p) = v;
}
KILN_TC static inline kiln_f4 kiln_tc_get4(const float* p) {
  const float4 v = *reinterpret_cast<const float4*>(p);
  kiln_f4 r = {v.x, v.y, v.z, v.w};
  return r;
}
KILN_TC static inline void kiln_tc_stage(const unsigned char* src, kiln_half* dst, int64_t bytes,
                                         int first, int step) {
  const uint4* s = reinterpret_cast<const uint4*>(src);
  uint4* d = reinterpret_cast<uint4*>(dst);
  for (int64_t j = first; j < bytes / 16; j += step) d[j] = __ldg(s + j);
}
#else /* a host C++ compiler: a warp is a loop over its 32 lanes, WMMA an emulation */
#include <stdio.h>
#include <stdlib.h>
#define KILN_TC
#define KILN_LANE_COUNT 32
#define KILN_LANE_ROW(L) (L)
#define KILN_SYNCWARP() ((void)0)
typedef unsigned short kiln_half;
static inline void kiln_tc_check(const void* p, unsigned align, unsigned ldm, unsigned multiple,
                                 const char* what) {
  if ((uintptr_t)p % align != 0 || ldm % multiple != 0) {
    fprintf(stderr, "%s: pointer %p or leading dimension %u breaks the WMMA alignment rules\n",
            what, p, ldm);
    abort();
  }
}
static inline unsigned short kiln_f2h(float f) { /* round to nearest even, as __float2half_rn */
  unsigned x;
  memcpy(&x, &f, 4);
  const unsigned sign = (x >> 16) & 0x8000u, ax = x & 0x7fffffffu;
  if (ax >= 0x7f800000u) return (unsigned short)(sign | 0x7c00u | (ax > 0x7f800000u ? 0x200u : 0u));
  if (ax >= 0x477ff000u) return (unsigned short)(sign | 0x7c00u);
  if (ax < 0x38800000u) {
    float a;
    memcpy(&a, &ax, 4);
    return (unsigned short)(sign | (unsigned)lrintf(a * 16777216.0f));
  }
  return (unsigned short)(sign | ((ax - 0x38000000u + 0xfffu + ((ax >> 13) & 1u)) >> 13));
}
namespace kiln_wmma {
struct matrix_a {};
struct matrix_b {};
struct accumulator {};
struct row_major {};
enum layout_t { mem_row_major, mem_col_major };
template <class Use, int M, int N, int K, class T, class Layout = void>
struct fragment {
  float x[256];
};
template <class Use>
inline void load_matrix_sync(fragment<Use, 16, 16, 16, kiln_half, row_major>& f, const kiln_half* p,
                             unsigned ldm) {
  kiln_tc_check(p, 32, ldm, 8, "load_matrix_sync");
  for (int r = 0; r < 16; ++r)
    for (int c = 0; c < 16; ++c) f.x[r * 16 + c] = kiln_h2f(p[r * ldm + c]);
}
inline void fill_fragment(fragment<accumulator, 16, 16, 16, float>& f, float v) {
  for (int e = 0; e < 256; ++e) f.x[e] = v;
}
inline void mma_sync(fragment<accumulator, 16, 16, 16, float>& d,
                     const fragment<matrix_a, 16, 16, 16, kiln_half, row_major>& a,
                     const fragment<matrix_b, 16, 16, 16, kiln_half, row_major>& b,
                     const fragment<accumulator, 16, 16, 16, float>& c) {
  float t[256];
  for (int r = 0; r < 16; ++r)
    for (int col = 0; col < 16; ++col) {
      float acc = c.x[r * 16 + col];
      for (int k = 0; k < 16; ++k) acc += a.x[r * 16 + k] * b.x[k * 16 + col];
      t[r * 16 + col] = acc;
    }
  memcpy(d.x, t, sizeof(t));
}
inline void store_matrix_sync(float* p, const fragment<accumulator, 16, 16, 16, float>& f,
                              unsigned ldm, layout_t layout) {
  kiln_tc_check(p, 32, ldm, 4, "store_matrix_sync");
  if (layout != mem_row_major) abort();
  for (int r = 0; r < 16; ++r)
    for (int c = 0; c < 16; ++c) p[r * ldm + c] = f.x[r * 16 + c];
}
}  // namespace kiln_wmma
static inline void kiln_tc_put8(kiln_half* p, float a0, float a1, float a2, float a3, float a4,
                                float a5, float a6, float a7) {
  kiln_tc_check(p, 16, 8, 8, "kiln_tc_put8");
  const float a[8] = {a0, a1, a2, a3, a4, a5, a6, a7};
  for (int j = 0; j < 8; ++j) p[j] = kiln_f2h(a[j]);
}
static inline kiln_f4 kiln_tc_get4(const float* p) {
  kiln_tc_check(p, 16, 4, 4, "kiln_tc_get4");
  kiln_f4 r = {p[0], p[1], p[2], p[3]};
  return r;
}
static inline void kiln_tc_stage(const unsigned char* src, kiln_half* dst, int64_t bytes, int first,
                                 int step) {
  (void)first;
  (void)step;
  memcpy(dst, src, (size_t)bytes);
}
#endif
/* c[32 * RT / 2 rows][16 NT] = a[..][16 KT] * b[16 KT][16 NT], every tile in shared memory; the
 * whole warp calls it. With few k steps a row tile's A fragments stay in registers. */
template <int RT, int KT, int NT, int LDA, int LDB, int LDC>
KILN_TC static inline void kiln_tc_matmul(const kiln_half* a, const kiln_half* b, float* c) {
  KILN_UNROLL
  for (int r = 0; r < RT; ++r) {
    kiln_wmma::fragment<kiln_wmma::matrix_a, 16, 16, 16, kiln_half, kiln_wmma::row_major>
        fa[KT <= 8 ? KT : 1];
    if (KT <= 8) {
      KILN_UNROLL
      for (int k = 0; k < KT; ++k)
        kiln_wmma::load_matrix_sync(fa[k], a + r * 16 * LDA + k * 16, LDA);
    }
    KILN_UNROLL
    for (int t = 0; t < NT; ++t) {
      kiln_wmma::fragment<kiln_wmma::accumulator, 16, 16, 16, float> acc;
      kiln_wmma::fill_fragment(acc, 0.0f);
      KILN_UNROLL
      for (int k = 0; k < KT; ++k) {
        kiln_wmma::fragment<kiln_wmma::matrix_b, 16, 16, 16, kiln_half, kiln_wmma::row_major> fb;
        kiln_wmma::load_matrix_sync(fb, b + k * 16 * LDB + t * 16, LDB);
        if (KT > 8) kiln_wmma::load_matrix_sync(fa[0], a + r * 16 * LDA + k * 16, LDA);
        kiln_wmma::mma_sync(acc, fa[KT <= 8 ? k : 0], fb, acc);
      }
      kiln_wmma::store_matrix_sync(c + r * 16 * LDC + t * 16, acc, LDC, kiln_wmma::mem_row_major);
    }
  }
}
#endif /* KILN_CUDA_TC_ */
