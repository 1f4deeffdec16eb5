// The GEMM of the convolution kernels (im2col + GEMM, ConvTranspose, DeformConv): the shared
// packed GEMM of gemm_kernels.h with row-major operands. Threads split rows or columns of C, so
// every output element is summed in the same order whatever the thread count (deterministic).
#pragma once

#include <cstdint>

#include "kernels/x86/gemm_kernels.h"

namespace kiln::ops {

// C[M x N] = (accumulate ? C : 0) + A[M x K] * B[K x N]; row-major with leading dims lda/ldb/ldc.
template <class T>
inline void ConvGemm(int64_t M, int64_t N, int64_t K, const T* A, int64_t lda, const T* B,
                     int64_t ldb, T* C, int64_t ldc, bool accumulate, int threads) {
  PackedGemm<T>(M, N, K, T(1), A, lda, 1, B, ldb, 1, C, ldc, accumulate, threads);
}

}  // namespace kiln::ops
