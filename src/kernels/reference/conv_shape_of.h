// The reference convolution kernels' geometry (conv_shape.c's kiln_conv_shape) of a Conv or
// ConvTranspose plan (ops/conv_geometry.h), for the host's reference kernels and the C emitters.
#pragma once

#include <cstdint>
#include <limits>

#include "kernels/reference/reference_kernels.h"
#include "ops/conv_geometry.h"

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
