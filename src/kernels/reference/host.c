/* The portable kernels compiled into kiln itself (reference_kernels.h): each file of this folder
 * is a fragment that the C backend concatenates into generated code in its `needs:` order; this
 * file does the same once and gives the host external names for the kernels it calls. */
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

/* In `needs:` order, which is not the alphabetical one. */
/* clang-format off */
#include "conv_shape.c"
#include "conv.c"
#include "conv_transpose.c"
#include "gemm.c"
#include "gemm_f32.c"
#include "gemm_f64.c"
/* clang-format on */

void kiln_reference_conv_f32(const float* x, const float* w, const float* b, float* y,
                             const kiln_conv_shape* s) {
  kiln_conv_f32(x, w, b, y, s);
}

void kiln_reference_conv_transpose_f32(const float* x, const float* w, const float* b, float* y,
                                       const kiln_conv_shape* s) {
  kiln_conv_transpose_f32(x, w, b, y, s);
}

void kiln_reference_gemm_f32(size_t M, size_t N, size_t K, float alpha, const float* A, size_t sam,
                             size_t sak, const float* B, size_t sbk, size_t sbn, float* C) {
  kiln_gemm_f32_run(M, N, K, alpha, A, sam, sak, B, sbk, sbn, C);
}

void kiln_reference_gemm_f64(size_t M, size_t N, size_t K, double alpha, const double* A,
                             size_t sam, size_t sak, const double* B, size_t sbk, size_t sbn,
                             double* C) {
  kiln_gemm_f64_run(M, N, K, alpha, A, sam, sak, B, sbk, sbn, C);
}
