// The GEMM entry points of MatMul, Gemm, Einsum and Attention (on gemm_kernels.h).
//   C[M,N] += alpha * op(A) * op(B), op = identity or transpose, all matrices row-major and dense.
// float and double use a packed, cache-blocked kernel; other element types a plain triple loop.
#pragma once

#include <cstdint>
#include <type_traits>
#include <vector>

#include "ir/half.h"

namespace kiln::ops {

void GemmF32(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, float alpha,
             const float* A, const float* B, float* C, int threads = 1);
void GemmF64(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, double alpha,
             const double* A, const double* B, double* C, int threads = 1);

// C[M,N] (rows ldc apart) = (accumulate ? C : 0) + alpha * A B, with element (i, k) of A at
// A[i * rsa + k * csa] and (k, j) of B at B[k * rsb + j * csb]: products read in place from
// strided views (one head of a [batch, seq, heads * size] tensor). float and double.
template <class T>
void GemmStrided(int64_t M, int64_t N, int64_t K, T alpha, const T* A, int64_t rsa, int64_t csa,
                 const T* B, int64_t rsb, int64_t csb, T* C, int64_t ldc, bool accumulate,
                 int threads = 1);

// Any numeric T: half types compute in float (converted on the way in and out), integers wrap
// around like unsigned arithmetic instead of overflowing.
template <class T>
void GemmAny(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, double alpha, const T* A,
             const T* B, T* C, int threads = 1) {
  if constexpr (std::is_same_v<T, float>) {
    GemmF32(trans_a, trans_b, M, N, K, static_cast<float>(alpha), A, B, C, threads);
  } else if constexpr (std::is_same_v<T, double>) {
    GemmF64(trans_a, trans_b, M, N, K, alpha, A, B, C, threads);
  } else if constexpr (std::is_same_v<T, Float16> || std::is_same_v<T, BFloat16>) {
    std::vector<float> a(M * K), b(K * N), c(M * N);
    for (int64_t i = 0; i < M * K; ++i) a[i] = static_cast<float>(A[i]);
    for (int64_t i = 0; i < K * N; ++i) b[i] = static_cast<float>(B[i]);
    for (int64_t i = 0; i < M * N; ++i) c[i] = static_cast<float>(C[i]);
    GemmF32(trans_a, trans_b, M, N, K, static_cast<float>(alpha), a.data(), b.data(), c.data(),
            threads);
    for (int64_t i = 0; i < M * N; ++i) C[i] = T(c[i]);
  } else {
    using U = std::conditional_t<(sizeof(T) > 4), uint64_t, uint32_t>;
    const int64_t sam = trans_a ? 1 : K, sak = trans_a ? M : 1;
    const int64_t sbk = trans_b ? 1 : N, sbn = trans_b ? K : 1;
    for (int64_t i = 0; i < M; ++i) {
      for (int64_t j = 0; j < N; ++j) {
        U acc = 0;
        for (int64_t k = 0; k < K; ++k)
          acc += static_cast<U>(A[i * sam + k * sak]) * static_cast<U>(B[k * sbk + j * sbn]);
        if (alpha != 1.0) acc = static_cast<U>(static_cast<int64_t>(alpha * static_cast<T>(acc)));
        C[i * N + j] = static_cast<T>(static_cast<U>(C[i * N + j]) + acc);
      }
    }
  }
}

}  // namespace kiln::ops
