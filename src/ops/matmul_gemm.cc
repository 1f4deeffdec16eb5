// MatMul / Gemm / Einsum / Attention GEMMs: the packed GEMM of gemm_kernels.h (run-time ISA
// dispatch), and for one row times a matrix (M == 1) a GEMV that reads B in place.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("O3")
#endif

#include <algorithm>
#include <cstring>
#include <vector>

#include "ops/matmul_gemm.h"

#include "ops/gemm_kernels.h"
#include "ops/thread_pool.h"

namespace kiln::ops {
namespace {

// One row times a matrix (M == 1, the batch-1 fully connected layer): packing B would cost as
// much as the product, so read it in place. Columns [n_begin, n_end) of c.
template <class T>
__attribute__((always_inline)) inline void GemvKernel(bool tb, int64_t N, int64_t K, T alpha,
                                                      const T* __restrict a,
                                                      const T* __restrict B, T* __restrict c,
                                                      int64_t n_begin, int64_t n_end) {
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
template <class T>
__attribute__((target("avx512f,fma"))) void GemvAvx512(bool tb, int64_t N, int64_t K, T alpha,
                                                       const T* a, const T* B, T* c, int64_t n0,
                                                       int64_t n1) {
  GemvKernel<T>(tb, N, K, alpha, a, B, c, n0, n1);
}
#endif

// The vectorized loops of GemvKernel compiled for the ISA the packed GEMM picks on this CPU.
template <class T>
void Gemv(bool tb, int64_t N, int64_t K, T alpha, const T* a, const T* B, T* c, int64_t n0,
          int64_t n1) {
#if KILN_X86_DISPATCH
  switch (BestIsa()) {
    case Isa::kAvx512: return GemvAvx512<T>(tb, N, K, alpha, a, B, c, n0, n1);
    case Isa::kAvx2: return GemvAvx2<T>(tb, N, K, alpha, a, B, c, n0, n1);
    default: break;
  }
#endif
  GemvBase<T>(tb, N, K, alpha, a, B, c, n0, n1);
}

template <class T>
void Gemm(bool ta, bool tb, int64_t M, int64_t N, int64_t K, T alpha, const T* A, const T* B,
          T* C, int threads) {
  if (M <= 0 || N <= 0 || K <= 0) return;
  int64_t work = M * N * K;
  if (M == 1 && !ta) {  // threads split the columns
    int nt = static_cast<int>(std::min<int64_t>({threads, N / 64 + 1, work / (1 << 18) + 1}));
    // Whole 16-column groups per thread (every column is summed the same way whatever the split).
    ParallelFor(nt, (N + 15) / 16, [&](int64_t g0, int64_t g1) {
      Gemv<T>(tb, N, K, alpha, A, B, C, g0 * 16, std::min(N, g1 * 16));
    });
    return;
  }
  // op(A)(i, k) = A[i * K + k] or A[k * M + i]; op(B)(k, j) = B[k * N + j] or B[j * K + k].
  PackedGemm<T>(M, N, K, alpha, A, ta ? 1 : K, ta ? M : 1, B, tb ? 1 : N, tb ? K : 1, C, N,
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
