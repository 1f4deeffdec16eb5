#include "kernels/x86/layout_kernels.h"

#include <algorithm>
#include <vector>

#include "kernels/x86/scratch.h"
#include "kernels/x86/strided_copy.h"
#include "kernels/x86/vector_math.h"

#if KILN_X86_DISPATCH
#include <immintrin.h>
#endif

namespace kiln::ops {

void ChannelsLastScale(const float* x, const float* s, float* y, int64_t N, int64_t C, int64_t HW) {
  for (int64_t i = 0; i < N * HW; ++i) BinaryF32(VecBinOp::kMul, x + i * C, s, y + i * C, C);
}

#if KILN_X86_DISPATCH
namespace {

// Channel sums kept in registers, 64 channels at a time, each summed over the pixels in order,
// as the loop below does (the same bits).
__attribute__((target("avx512f"))) void GlobalAverageAvx512(const float* x, float* y, int64_t C,
                                                            int64_t HW) {
  const __m512 count = _mm512_set1_ps(static_cast<float>(HW));
  int64_t c = 0;
  for (; c + 64 <= C; c += 64) {
    __m512 a0 = _mm512_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
    for (const float *p = x + c, *end = x + c + HW * C; p != end; p += C) {
      a0 = _mm512_add_ps(a0, _mm512_loadu_ps(p));
      a1 = _mm512_add_ps(a1, _mm512_loadu_ps(p + 16));
      a2 = _mm512_add_ps(a2, _mm512_loadu_ps(p + 32));
      a3 = _mm512_add_ps(a3, _mm512_loadu_ps(p + 48));
    }
    _mm512_storeu_ps(y + c, _mm512_div_ps(a0, count));
    _mm512_storeu_ps(y + c + 16, _mm512_div_ps(a1, count));
    _mm512_storeu_ps(y + c + 32, _mm512_div_ps(a2, count));
    _mm512_storeu_ps(y + c + 48, _mm512_div_ps(a3, count));
  }
  for (; c < C; c += 16) {
    const __mmask16 m =
        C - c >= 16 ? static_cast<__mmask16>(0xffff) : static_cast<__mmask16>((1u << (C - c)) - 1);
    __m512 a = _mm512_setzero_ps();
    for (int64_t i = 0; i < HW; ++i) a = _mm512_add_ps(a, _mm512_maskz_loadu_ps(m, x + i * C + c));
    _mm512_mask_storeu_ps(y + c, m, _mm512_div_ps(a, count));
  }
}

// The same in 8-channel vectors, 32 channels at a time.
__attribute__((target("avx2,fma"))) void GlobalAverageAvx2(const float* x, float* y, int64_t C,
                                                           int64_t HW) {
  const __m256 count = _mm256_set1_ps(static_cast<float>(HW));
  int64_t c = 0;
  for (; c + 32 <= C; c += 32) {
    __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
    for (const float *p = x + c, *end = x + c + HW * C; p != end; p += C) {
      a0 = _mm256_add_ps(a0, _mm256_loadu_ps(p));
      a1 = _mm256_add_ps(a1, _mm256_loadu_ps(p + 8));
      a2 = _mm256_add_ps(a2, _mm256_loadu_ps(p + 16));
      a3 = _mm256_add_ps(a3, _mm256_loadu_ps(p + 24));
    }
    _mm256_storeu_ps(y + c, _mm256_div_ps(a0, count));
    _mm256_storeu_ps(y + c + 8, _mm256_div_ps(a1, count));
    _mm256_storeu_ps(y + c + 16, _mm256_div_ps(a2, count));
    _mm256_storeu_ps(y + c + 24, _mm256_div_ps(a3, count));
  }
  const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  for (; c < C; c += 8) {
    const __m256i m =
        _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int>(std::min<int64_t>(C - c, 8))), lane);
    __m256 a = _mm256_setzero_ps();
    for (int64_t i = 0; i < HW; ++i) a = _mm256_add_ps(a, _mm256_maskload_ps(x + i * C + c, m));
    _mm256_maskstore_ps(y + c, m, _mm256_div_ps(a, count));
  }
}

}  // namespace
#endif

void ChannelsLastGlobalAverage(const float* x, float* y, int64_t N, int64_t C, int64_t HW,
                               Isa isa) {
  isa = ResolveIsa(isa);
#if KILN_X86_DISPATCH
  if ((isa == Isa::kAvx512 || isa == Isa::kAvx2) && HW > 0) {
    for (int64_t n = 0; n < N; ++n)
      (isa == Isa::kAvx512 ? GlobalAverageAvx512 : GlobalAverageAvx2)(x + n * HW * C, y + n * C, C,
                                                                      HW);
    return;
  }
#endif
  for (int64_t n = 0; n < N; ++n) {
    float* yn = y + n * C;
    std::fill(yn, yn + C, 0.0f);
    for (int64_t i = 0; i < HW; ++i) {
      const float* xr = x + (n * HW + i) * C;
      for (int64_t c = 0; c < C; ++c) yn[c] += xr[c];
    }
    for (int64_t c = 0; c < C; ++c) yn[c] /= static_cast<float>(HW);
  }
}

namespace {

// One pixel's channels: y walks forward (i, then the group j), x's g rows are read in step.
template <int kGroup>
void ShufflePixels(const float* x, float* y, int64_t C, int64_t group, int64_t HW) {
  const int64_t g = kGroup > 0 ? kGroup : group, per_group = C / g;
  for (int64_t p = 0; p < HW; ++p) {
    const float* xr = x + p * C;
    float* yr = y + p * C;
    for (int64_t i = 0; i < per_group; ++i)
      for (int64_t j = 0; j < g; ++j) yr[i * g + j] = xr[j * per_group + i];
  }
}

}  // namespace

void ChannelsLastFromNchw(const float* x, float* y, int64_t C, int64_t HW, int threads) {
  moves::StridedCopy({HW, C}, {1, HW}, 0, x, y, sizeof(float), threads);
}

void NchwFromChannelsLast(const float* x, float* y, int64_t C, int64_t HW, int threads) {
  moves::StridedCopy({C, HW}, {1, C}, 0, x, y, sizeof(float), threads);
}

void ChannelsLastShuffle(const float* x, float* y, int64_t C, int64_t group, int64_t HW) {
  switch (group) {  // the groups ShuffleNets use, unrolled
    case 2:
      return ShufflePixels<2>(x, y, C, group, HW);
    case 3:
      return ShufflePixels<3>(x, y, C, group, HW);
    case 4:
      return ShufflePixels<4>(x, y, C, group, HW);
    case 8:
      return ShufflePixels<8>(x, y, C, group, HW);
    default:
      return ShufflePixels<0>(x, y, C, group, HW);
  }
}

void ChannelsLastConcat(const std::vector<const float*>& inputs,
                        const std::vector<int64_t>& channels, float* y, int64_t HW) {
  int64_t C = 0;
  for (int64_t c : channels) C += c;
  std::vector<const float*> src = inputs;
  float* copy = nullptr;
  for (size_t k = 0; k < inputs.size(); ++k) {
    const float* in = inputs[k];
    if (in < y + C * HW && y < in + channels[k] * HW) {
      if (!copy) copy = Scratch<float>(ScratchSlot::kPadded, static_cast<size_t>(C * HW));
      float* dst = copy;
      for (size_t j = 0; j < k; ++j) dst += channels[j] * HW;
      std::copy(in, in + channels[k] * HW, dst);
      src[k] = dst;
    }
  }
  for (int64_t i = 0; i < HW; ++i) {
    float* yr = y + i * C;
    for (size_t k = 0; k < src.size(); ++k) {
      std::copy(src[k] + i * channels[k], src[k] + (i + 1) * channels[k], yr);
      yr += channels[k];
    }
  }
}

}  // namespace kiln::ops
