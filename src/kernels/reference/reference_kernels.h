// The portable C99 kernels of this folder compiled into kiln itself (host.c). The C backend
// emits the same files into generated code, and the host runs them under `--kernels reference`
// (kernels/x86/cpu_isa.h), so the generated C and the host's oracle for its fast kernels are one
// implementation.
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>

extern "C" {
#include "kernels/reference/conv_shape.c"
#include "kernels/reference/qpacked_layout.c"
#include "kernels/reference/requant.c"
// After requant.c, which it uses.
#include "kernels/reference/qadd.c"

void kiln_reference_conv_f32(const float* x, const float* w, const float* b, float* y,
                             const kiln_conv_shape* s);
void kiln_reference_conv_transpose_f32(const float* x, const float* w, const float* b, float* y,
                                       const kiln_conv_shape* s);
// C[M, N] (dense, row-major) += alpha * op(A) * op(B), where op(A)(i, k) = A[i * sam + k * sak]
// and op(B)(k, j) = B[k * sbk + j * sbn] (gemm.c).
void kiln_reference_gemm_f32(size_t M, size_t N, size_t K, float alpha, const float* A, size_t sam,
                             size_t sak, const float* B, size_t sbk, size_t sbn, float* C);
void kiln_reference_gemm_f64(size_t M, size_t N, size_t K, double alpha, const double* A,
                             size_t sam, size_t sak, const double* B, size_t sbk, size_t sbn,
                             double* C);
}
