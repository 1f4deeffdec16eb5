// A cache-blocked GEMM for the convolution kernels (im2col + GEMM). Plain C++ written so that the
// compiler vectorizes the register-blocked micro kernel; threads split the columns, so every
// output element is summed in the same order whatever the thread count (deterministic).
#pragma once

#include <cstdint>

namespace kiln::ops {

// C[M x N] = (accumulate ? C : 0) + A[M x K] * B[K x N]; row-major with leading dims lda/ldb/ldc.
template <class T>
void ConvGemm(int64_t M, int64_t N, int64_t K, const T* A, int64_t lda, const T* B, int64_t ldb,
              T* C, int64_t ldc, bool accumulate, int threads);

extern template void ConvGemm<float>(int64_t, int64_t, int64_t, const float*, int64_t,
                                     const float*, int64_t, float*, int64_t, bool, int);
extern template void ConvGemm<double>(int64_t, int64_t, int64_t, const double*, int64_t,
                                      const double*, int64_t, double*, int64_t, bool, int);

}  // namespace kiln::ops
