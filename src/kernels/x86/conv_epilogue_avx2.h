// Activations the AVX2 convolution kernels (conv_direct, conv_grouped) apply to their sums in
// registers, with the arithmetic of vector_math's element-wise kernels, so that a fused
// activation gives the bits the separate node would.
#pragma once

#include "kernels/x86/conv_params.h"
#include "kernels/x86/cpu_isa.h"  // KILN_X86_DISPATCH
#include "kernels/x86/post_ops.h"

#if KILN_X86_DISPATCH
#include <immintrin.h>

namespace kiln::ops {

// HardSwish: x * max(0, min(1, x / 6 + 0.5)) (HardSwishF32; min(NaN, 1) is 1 there and here).
__attribute__((target("avx2,fma"), always_inline)) inline __m256 HardSwish8(__m256 x) {
  const __m256 t = _mm256_add_ps(_mm256_div_ps(x, _mm256_set1_ps(6.0f)), _mm256_set1_ps(0.5f));
  const __m256 m = _mm256_min_ps(t, _mm256_set1_ps(1.0f));  // t NaN: 1
  return _mm256_mul_ps(x, _mm256_max_ps(m, _mm256_setzero_ps()));
}

// FusedConv's activation `act` on 8 sums (alpha, beta: LeakyRelu's slope, Clip's bounds); none
// and Swish leave them (Swish runs over whole rows afterwards). Inlined with a constant `act`,
// the switch folds away.
__attribute__((target("avx2,fma"), always_inline)) inline __m256 Activate8(__m256 s,
                                                                           PostOps::Act act,
                                                                           float alpha,
                                                                           float beta) {
  using Act = PostOps::Act;
  const __m256 zero = _mm256_setzero_ps();
  switch (act) {
    case Act::kRelu:
      return _mm256_max_ps(s, zero);
    case Act::kLeakyRelu:
      return _mm256_blendv_ps(s, _mm256_mul_ps(s, _mm256_set1_ps(alpha)),
                              _mm256_cmp_ps(s, zero, _CMP_LT_OQ));
    case Act::kClip:
      return _mm256_min_ps(_mm256_max_ps(s, _mm256_set1_ps(alpha)), _mm256_set1_ps(beta));
    case Act::kHardSwish:
      return HardSwish8(s);
    default:
      return s;
  }
}

}  // namespace kiln::ops
#endif
