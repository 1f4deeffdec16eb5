#include "kernels/x86/conv_few_outputs.h"

#include <algorithm>
#include <cstring>

#include "kernels/x86/conv_epilogue_avx2.h"
#include "kernels/x86/cpu_isa.h"
#include "kernels/x86/layout_kernels.h"
#include "kernels/x86/scratch.h"
#include "kernels/x86/thread_pool.h"
#include "kernels/x86/vector_math.h"

#if KILN_X86_DISPATCH
#include <immintrin.h>
#endif

namespace kiln::ops {
namespace {

constexpr int64_t kTileVectors = 4;  // vectors of 8 pixels per tile row
constexpr int64_t kTilePixels = 8 * kTileVectors;
constexpr int64_t kTileChannels = 3;  // output channels per tile

// What every tile of one call reads.
struct Args {
  const Conv2DParams* p;
  const float* xp;  // the padded NCHW copy, [N][C][Hp][Wp]
  int64_t Hp, Wp;
  const float* w;  // [M][C][KH][KW]
  const float* b;  // [M] or null
  const float* z;  // NCHW like y, or null
  float* y;        // NCHW
  PostOps post;
};

// x as an NCHW copy with the padding made explicit and rows wide enough for every tile's last
// vector (zeros past the input), each row written once, over `threads`.
float* PaddedCopy(const Conv2DParams& p, const float* x, bool x_channels_last, int64_t Hp,
                  int64_t Wp, int threads) {
  const int64_t HW = p.H * p.W;
  float* out = Scratch<float>(ScratchSlot::kPadded, static_cast<size_t>(p.N * p.C * Hp * Wp));
  for (int64_t n = 0; n < p.N; ++n) {
    const float* img = x + n * p.C * HW;
    if (x_channels_last) {
      float* nchw = Scratch<float>(ScratchSlot::kConvColumns, static_cast<size_t>(p.C * HW));
      NchwFromChannelsLast(img, nchw, p.C, HW, threads);
      img = nchw;
    }
    ParallelFor(threads, p.C * Hp, [&](int64_t r0, int64_t r1) {
      for (int64_t r = r0; r < r1; ++r) {
        const int64_t c = r / Hp, h = r % Hp - p.ph;
        float* row = out + (n * p.C * Hp + r) * Wp;
        if (h < 0 || h >= p.H) {
          std::fill_n(row, Wp, 0.0f);
          continue;
        }
        std::fill_n(row, p.pw, 0.0f);
        std::memcpy(row + p.pw, img + (c * p.H + h) * p.W,
                    static_cast<size_t>(p.W) * sizeof(float));
        std::fill(row + p.pw + p.W, row + Wp, 0.0f);
      }
    });
  }
  return out;
}

#if KILN_X86_DISPATCH
#define KILN_FO_TARGET __attribute__((target("avx2,fma")))

// Output row oy of image n, channels [m0, m0 + MB), every tile along it. The sums stay in
// registers: every loop over them is unrolled and the shape is read into locals first.
template <int MB>
KILN_FO_TARGET void RowTiles(const Args& a, int64_t n, int64_t m0, int64_t oy) {
  const Conv2DParams& p = *a.p;
  const int64_t C = p.C, KH = p.KH, KW = p.KW, dh = p.dh, dw = p.dw, Wp = a.Wp, OW = p.OW;
  const int64_t taps = KH * KW, wm = C * taps;  // floats from one channel's weights to the next
  const int64_t plane_floats = a.Hp * Wp, opix = p.OH * OW;
  const float* img = a.xp + n * C * plane_floats + oy * p.sh * Wp;
  for (int64_t x0 = 0; x0 < OW; x0 += kTilePixels) {
    __m256 acc[MB][kTileVectors];
#pragma GCC unroll 3
    for (int m = 0; m < MB; ++m)
#pragma GCC unroll 4
      for (int v = 0; v < kTileVectors; ++v) acc[m][v] = _mm256_setzero_ps();
    for (int64_t c = 0; c < C; ++c) {
      const float* plane = img + c * plane_floats + x0;
      const float* wc = a.w + (m0 * C + c) * taps;
      for (int64_t kh = 0; kh < KH; ++kh) {
        const float* row = plane + kh * dh * Wp;
        const float* wk = wc + kh * KW;
        for (int64_t kw = 0; kw < KW; ++kw) {
          const float* q = row + kw * dw;
          __m256 in[kTileVectors];
#pragma GCC unroll 4
          for (int v = 0; v < kTileVectors; ++v) in[v] = _mm256_loadu_ps(q + 8 * v);
#pragma GCC unroll 3
          for (int m = 0; m < MB; ++m) {
            const __m256 wv = _mm256_broadcast_ss(wk + m * wm + kw);
#pragma GCC unroll 4
            for (int v = 0; v < kTileVectors; ++v)
              acc[m][v] = _mm256_fmadd_ps(wv, in[v], acc[m][v]);
          }
        }
      }
    }
#pragma GCC unroll 3
    for (int m = 0; m < MB; ++m) {
      const int64_t at = (n * p.M + m0 + m) * opix + oy * OW;
      const __m256 bias = _mm256_set1_ps(a.b ? a.b[m0 + m] : 0.0f);
#pragma GCC unroll 4
      for (int v = 0; v < kTileVectors; ++v) {
        const int64_t px = x0 + 8 * v;
        const int lanes = static_cast<int>(std::clamp<int64_t>(OW - px, 0, 8));
        const __m256i mask =
            _mm256_cmpgt_epi32(_mm256_set1_epi32(lanes), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
        __m256 s = _mm256_add_ps(acc[m][v], bias);
        if (a.z) s = _mm256_add_ps(s, _mm256_maskload_ps(a.z + at + px, mask));
        s = Activate8(s, a.post.act, a.post.alpha, a.post.beta);
        _mm256_maskstore_ps(a.y + at + px, mask, s);
      }
    }
  }
}
#endif

}  // namespace

bool FewOutputsConvFits(const Conv2DParams& p, const ConvLayouts& l, const PostOps& post) {
  return KILN_X86_DISPATCH && IsaSupported(Isa::kAvx2) && p.group == 1 && p.sw == 1 && p.M <= 12 &&
         !l.y && l.y_channels == 0 && !(post.z && l.z);
}

bool FewOutputsConvPays(const Conv2DParams& p) { return p.M <= 9 && p.KH * p.KW >= 25; }

void FewOutputsConv(const Conv2DParams& p, const float* x, const float* w, const float* b, float* y,
                    const ConvLayouts& l, const PostOps& post, int threads) {
#if KILN_X86_DISPATCH
  const int64_t tiles_width = (p.OW + kTilePixels - 1) / kTilePixels * kTilePixels;
  Args a{};
  a.p = &p;
  a.Hp = p.H + p.ph + p.peh;
  a.Wp = std::max(p.W + p.pw + p.pew, tiles_width + (p.KW - 1) * p.dw);
  a.xp = PaddedCopy(p, x, l.x, a.Hp, a.Wp, threads);
  a.w = w;
  a.b = b;
  a.z = post.z;
  a.y = y;
  a.post = post;
  const int64_t blocks = (p.M + kTileChannels - 1) / kTileChannels;
  ParallelFor(threads, p.N * blocks * p.OH, [&](int64_t i0, int64_t i1) {
    for (int64_t i = i0; i < i1; ++i) {
      const int64_t oy = i % p.OH, blk = i / p.OH % blocks, n = i / p.OH / blocks;
      const int64_t m0 = blk * kTileChannels, mb = std::min(kTileChannels, p.M - m0);
      if (mb == 3) {
        RowTiles<3>(a, n, m0, oy);
      } else if (mb == 2) {
        RowTiles<2>(a, n, m0, oy);
      } else {
        RowTiles<1>(a, n, m0, oy);
      }
    }
  });
  if (post.act == PostOps::Act::kSwish) SwishF32(y, y, p.N * p.M * p.OH * p.OW, 1.0f);
#else
  (void)p, (void)x, (void)w, (void)b, (void)y, (void)l, (void)post, (void)threads;
#endif
}

}  // namespace kiln::ops
