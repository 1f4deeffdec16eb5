// MatMul / Gemm / Einsum / Attention GEMMs: the packed GEMM of gemm_kernels.h (run-time ISA
// dispatch), and for one row times a matrix (M == 1) a GEMV that reads B in place.
// GCC 12's AVX-512 intrinsics start from _mm512_undefined_ps(), which its -Wmaybe-uninitialized
// flags wherever they are inlined (GCC PR 105593, fixed in GCC 13).
#if defined(__GNUC__) && !defined(__clang__) && __GNUC__ < 13
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("O3")
#endif

#include "kernels/x86/gemm.h"

#include <algorithm>
#include <cstring>
#include <type_traits>
#include <vector>

#include "kernels/x86/gemm_kernels.h"
#include "kernels/x86/thread_pool.h"

#if KILN_X86_DISPATCH
#include <immintrin.h>
#endif

namespace kiln::ops {
namespace {

// One row times a matrix (M == 1, the batch-1 fully connected layer): packing B would cost as
// much as the product, so read it in place. Columns [n_begin, n_end) of c.
template <class T>
__attribute__((always_inline)) inline void GemvKernel(bool tb, int64_t N, int64_t K, T alpha,
                                                      const T* __restrict a, const T* __restrict B,
                                                      T* __restrict c, int64_t n_begin,
                                                      int64_t n_end) {
  if (!tb) {  // c += alpha * sum_k a[k] * B[k, :], an axpy per k
    for (int64_t k = 0; k < K; ++k) {
      const T ak = alpha * a[k];
      const T* b = B + k * N;
      for (int64_t j = n_begin; j < n_end; ++j) c[j] += ak * b[j];
    }
    return;
  }
  // c[j] += alpha * dot(a, B[j, :]), B rows contiguous; several partial sums so the dot
  // vectorizes without reassociating a single accumulator.
  constexpr int kP = 16;
  for (int64_t j = n_begin; j < n_end; ++j) {
    const T* b = B + j * K;
    T part[kP] = {};
    int64_t k = 0;
    for (; k + kP <= K; k += kP)
      for (int p = 0; p < kP; ++p) part[p] += a[k + p] * b[k + p];
    T sum = 0;
    for (int p = 0; p < kP; ++p) sum += part[p];
    for (; k < K; ++k) sum += a[k] * b[k];
    c[j] += alpha * sum;
  }
}

template <class T>
void GemvBase(bool tb, int64_t N, int64_t K, T alpha, const T* a, const T* B, T* c, int64_t n0,
              int64_t n1) {
  GemvKernel<T>(tb, N, K, alpha, a, B, c, n0, n1);
}
#if KILN_X86_DISPATCH
template <class T>
__attribute__((target("avx2,fma"))) void GemvAvx2(bool tb, int64_t N, int64_t K, T alpha,
                                                  const T* a, const T* B, T* c, int64_t n0,
                                                  int64_t n1) {
  GemvKernel<T>(tb, N, K, alpha, a, B, c, n0, n1);
}
// c[j] += alpha * dot(a, B[j, :]) for rows [j0, j1) of a transposed B: the batch-1 fully
// connected layer, which streams B from memory once (VGG's 411 MB fc6). Four rows at a time
// share each load of a and keep four streams in flight; every row is summed in the same order
// (two accumulators, then a masked tail) whether it falls in a group of four or not.
// The end of one row's dot: the 16 columns past the last 32 and the masked rest, then c[j].
__attribute__((target("avx512f,fma"))) inline void FinishDotRow(__m512 s, __m512 t, const float* a,
                                                                const float* b, int64_t K,
                                                                float alpha, float* cj) {
  const int64_t k32 = K / 32 * 32, k16 = K / 16 * 16;
  const __mmask16 tail = static_cast<__mmask16>((1u << (K - k16)) - 1);
  if (k16 > k32) s = _mm512_fmadd_ps(_mm512_loadu_ps(a + k32), _mm512_loadu_ps(b + k32), s);
  if (tail)
    t = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(tail, a + k16), _mm512_maskz_loadu_ps(tail, b + k16),
                        t);
  *cj += alpha * _mm512_reduce_add_ps(_mm512_add_ps(s, t));
}

__attribute__((target("avx512f,fma"))) void DotRowsAvx512(int64_t K, float alpha, const float* a,
                                                          const float* B, float* c, int64_t j0,
                                                          int64_t j1) {
  const int64_t k32 = K / 32 * 32;
  int64_t j = j0;
  for (; j + 4 <= j1; j += 4) {
    const float* b0 = B + j * K;
    const float *b1 = b0 + K, *b2 = b1 + K, *b3 = b2 + K;
    __m512 s0 = _mm512_setzero_ps(), s1 = s0, s2 = s0, s3 = s0, t0 = s0, t1 = s0, t2 = s0, t3 = s0;
    for (int64_t k = 0; k < k32; k += 32) {
      const __m512 x = _mm512_loadu_ps(a + k), y = _mm512_loadu_ps(a + k + 16);
      s0 = _mm512_fmadd_ps(x, _mm512_loadu_ps(b0 + k), s0);
      t0 = _mm512_fmadd_ps(y, _mm512_loadu_ps(b0 + k + 16), t0);
      s1 = _mm512_fmadd_ps(x, _mm512_loadu_ps(b1 + k), s1);
      t1 = _mm512_fmadd_ps(y, _mm512_loadu_ps(b1 + k + 16), t1);
      s2 = _mm512_fmadd_ps(x, _mm512_loadu_ps(b2 + k), s2);
      t2 = _mm512_fmadd_ps(y, _mm512_loadu_ps(b2 + k + 16), t2);
      s3 = _mm512_fmadd_ps(x, _mm512_loadu_ps(b3 + k), s3);
      t3 = _mm512_fmadd_ps(y, _mm512_loadu_ps(b3 + k + 16), t3);
    }
    FinishDotRow(s0, t0, a, b0, K, alpha, c + j);
    FinishDotRow(s1, t1, a, b1, K, alpha, c + j + 1);
    FinishDotRow(s2, t2, a, b2, K, alpha, c + j + 2);
    FinishDotRow(s3, t3, a, b3, K, alpha, c + j + 3);
  }
  for (; j < j1; ++j) {
    const float* b = B + j * K;
    __m512 s = _mm512_setzero_ps(), t = s;
    for (int64_t k = 0; k < k32; k += 32) {
      s = _mm512_fmadd_ps(_mm512_loadu_ps(a + k), _mm512_loadu_ps(b + k), s);
      t = _mm512_fmadd_ps(_mm512_loadu_ps(a + k + 16), _mm512_loadu_ps(b + k + 16), t);
    }
    FinishDotRow(s, t, a, b, K, alpha, c + j);
  }
}

// c[j] += alpha * a[k] * B[k, j] for columns [n0, n1) of B [K, N], k in order (GemvKernel's
// arithmetic, one FMA per k): four rows of B per pass over c, so that c is loaded and stored
// once per four rows instead of once per row (which bounded the axpy loop by L1 traffic, not by
// the stream of B), and the next four rows fetched ahead.
__attribute__((target("avx512f,fma"))) void AxpyRowsAvx512(int64_t N, int64_t K, float alpha,
                                                           const float* a, const float* B, float* c,
                                                           int64_t n0, int64_t n1) {
  const int64_t n = n1 - n0;
  const __mmask16 tail = static_cast<__mmask16>((1u << (n % 16)) - 1);
  int64_t k = 0;
  for (; k + 4 <= K; k += 4) {
    const __m512 a0 = _mm512_set1_ps(alpha * a[k]), a1 = _mm512_set1_ps(alpha * a[k + 1]),
                 a2 = _mm512_set1_ps(alpha * a[k + 2]), a3 = _mm512_set1_ps(alpha * a[k + 3]);
    const float* b0 = B + k * N + n0;
    const float *b1 = b0 + N, *b2 = b1 + N, *b3 = b2 + N;
    float* cj = c + n0;
    int64_t j = 0;
    for (; j + 16 <= n; j += 16) {
      _mm_prefetch(reinterpret_cast<const char*>(b0 + j + 4 * N), _MM_HINT_T0);
      _mm_prefetch(reinterpret_cast<const char*>(b1 + j + 4 * N), _MM_HINT_T0);
      _mm_prefetch(reinterpret_cast<const char*>(b2 + j + 4 * N), _MM_HINT_T0);
      _mm_prefetch(reinterpret_cast<const char*>(b3 + j + 4 * N), _MM_HINT_T0);
      __m512 v = _mm512_loadu_ps(cj + j);
      v = _mm512_fmadd_ps(a0, _mm512_loadu_ps(b0 + j), v);
      v = _mm512_fmadd_ps(a1, _mm512_loadu_ps(b1 + j), v);
      v = _mm512_fmadd_ps(a2, _mm512_loadu_ps(b2 + j), v);
      v = _mm512_fmadd_ps(a3, _mm512_loadu_ps(b3 + j), v);
      _mm512_storeu_ps(cj + j, v);
    }
    if (tail) {
      __m512 v = _mm512_maskz_loadu_ps(tail, cj + j);
      v = _mm512_fmadd_ps(a0, _mm512_maskz_loadu_ps(tail, b0 + j), v);
      v = _mm512_fmadd_ps(a1, _mm512_maskz_loadu_ps(tail, b1 + j), v);
      v = _mm512_fmadd_ps(a2, _mm512_maskz_loadu_ps(tail, b2 + j), v);
      v = _mm512_fmadd_ps(a3, _mm512_maskz_loadu_ps(tail, b3 + j), v);
      _mm512_mask_storeu_ps(cj + j, tail, v);
    }
  }
  for (; k < K; ++k) {
    const __m512 ak = _mm512_set1_ps(alpha * a[k]);
    const float* b = B + k * N + n0;
    float* cj = c + n0;
    int64_t j = 0;
    for (; j + 16 <= n; j += 16)
      _mm512_storeu_ps(cj + j,
                       _mm512_fmadd_ps(ak, _mm512_loadu_ps(b + j), _mm512_loadu_ps(cj + j)));
    if (tail)
      _mm512_mask_storeu_ps(cj + j, tail,
                            _mm512_fmadd_ps(ak, _mm512_maskz_loadu_ps(tail, b + j),
                                            _mm512_maskz_loadu_ps(tail, cj + j)));
  }
}

template <class T>
__attribute__((target("avx512f,fma"))) void GemvAvx512(bool tb, int64_t N, int64_t K, T alpha,
                                                       const T* a, const T* B, T* c, int64_t n0,
                                                       int64_t n1) {
  if constexpr (std::is_same_v<T, float>) {
    if (tb) return DotRowsAvx512(K, alpha, a, B, c, n0, n1);
    return AxpyRowsAvx512(N, K, alpha, a, B, c, n0, n1);
  }
  GemvKernel<T>(tb, N, K, alpha, a, B, c, n0, n1);
}
#endif

// The vectorized loops of GemvKernel compiled for the ISA the packed GEMM picks on this CPU.
template <class T>
void Gemv(bool tb, int64_t N, int64_t K, T alpha, const T* a, const T* B, T* c, int64_t n0,
          int64_t n1) {
#if KILN_X86_DISPATCH
  switch (BestIsa()) {
    case Isa::kAvx512:
      return GemvAvx512<T>(tb, N, K, alpha, a, B, c, n0, n1);
    case Isa::kAvx2:
      return GemvAvx2<T>(tb, N, K, alpha, a, B, c, n0, n1);
    default:
      break;
  }
#endif
  GemvBase<T>(tb, N, K, alpha, a, B, c, n0, n1);
}

}  // namespace

template <class T>
void GemmStrided(int64_t M, int64_t N, int64_t K, T alpha, const T* A, int64_t rsa, int64_t csa,
                 const T* B, int64_t rsb, int64_t csb, T* C, int64_t ldc, bool accumulate,
                 int threads) {
  if (M <= 0 || N <= 0) return;
  // One contiguous row of A times a dense B or B^T: the GEMV, threads splitting the columns.
  const bool dense_b = csb == 1 && rsb == N, dense_bt = rsb == 1 && csb == K;
  if (M == 1 && csa == 1 && (dense_b || dense_bt) && K > 0 && !ReferenceKernels()) {
    if (!accumulate) std::fill(C, C + N, T(0));
    const int64_t work = N * K;
    int nt = static_cast<int>(std::min<int64_t>({threads, N / 64 + 1, work / (1 << 18) + 1}));
    // Whole 16-column groups per thread (every column is summed the same way whatever the split).
    ParallelFor(nt, (N + 15) / 16, [&](int64_t g0, int64_t g1) {
      Gemv<T>(dense_bt, N, K, alpha, A, B, C, g0 * 16, std::min(N, g1 * 16));
    });
    return;
  }
  PackedGemm<T>(M, N, K, alpha, A, rsa, csa, B, rsb, csb, C, ldc, accumulate, threads);
}
template void GemmStrided<float>(int64_t, int64_t, int64_t, float, const float*, int64_t, int64_t,
                                 const float*, int64_t, int64_t, float*, int64_t, bool, int);
template void GemmStrided<double>(int64_t, int64_t, int64_t, double, const double*, int64_t,
                                  int64_t, const double*, int64_t, int64_t, double*, int64_t, bool,
                                  int);

namespace {

// op(A)(i, k) = A[i * K + k] or A[k * M + i]; op(B)(k, j) = B[k * N + j] or B[j * K + k].
template <class T>
void Gemm(bool ta, bool tb, int64_t M, int64_t N, int64_t K, T alpha, const T* A, const T* B, T* C,
          int threads) {
  if (K <= 0) return;
  GemmStrided<T>(M, N, K, alpha, A, ta ? 1 : K, ta ? M : 1, B, tb ? 1 : N, tb ? K : 1, C, N,
                 /*accumulate=*/true, threads);
}

}  // namespace

void GemmF32(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, float alpha,
             const float* A, const float* B, float* C, int threads) {
  Gemm<float>(trans_a, trans_b, M, N, K, alpha, A, B, C, threads);
}

void GemmF64(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, double alpha,
             const double* A, const double* B, double* C, int threads) {
  Gemm<double>(trans_a, trans_b, M, N, K, alpha, A, B, C, threads);
}

}  // namespace kiln::ops
