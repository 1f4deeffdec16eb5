// The portable C99 kernels of this folder compiled into kiln itself (host.c). The C backend
// emits the same files into generated code, and the host runs them under `--kernels reference`
// (ops/cpu_isa.h), so the generated C and the host's oracle for its fast kernels are one
// implementation.
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>

#include "ops/conv_geometry.h"

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

namespace kiln::kernels::reference {

// The kernels' geometry of a Conv (`in` the image, `out` the grid) or a ConvTranspose (`in` the
// grid, `out` the image); false where it has more than 3 spatial dims or a value outside int32.
inline bool ToKilnConvShape(const ops::ConvShape& s, bool transpose, kiln_conv_shape* out) {
  if (s.geom.nd > 3) return false;
  const ops::Geom3 g(s.geom);
  const Dims in = ops::To3(transpose ? s.geom.out : s.geom.in, 1);
  const Dims result = ops::To3(transpose ? s.geom.in : s.geom.out, 1);
  bool fits = true;
  auto put = [&](int32_t* to, int64_t v) {
    fits = fits && v >= std::numeric_limits<int32_t>::min() &&
           v <= std::numeric_limits<int32_t>::max();
    *to = static_cast<int32_t>(v);
  };
  put(&out->n, s.N);
  put(&out->c, s.C);
  put(&out->m, s.M);
  put(&out->group, s.group);
  for (int j = 0; j < 3; ++j) {
    put(&out->in[j], in[j]);
    put(&out->k[j], g.k[j]);
    put(&out->s[j], g.s[j]);
    put(&out->d[j], g.d[j]);
    put(&out->p[j], g.p[j]);
    put(&out->out[j], result[j]);
  }
  return fits;
}

}  // namespace kiln::kernels::reference
