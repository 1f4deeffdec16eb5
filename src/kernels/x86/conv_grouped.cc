#include "kernels/x86/conv_grouped.h"

#include <algorithm>
#include <cstring>

#include "kernels/x86/conv_epilogue_avx2.h"
#include "kernels/x86/cpu_isa.h"
#include "kernels/x86/gemm_kernels.h"
#include "kernels/x86/scratch.h"
#include "kernels/x86/thread_pool.h"
#include "kernels/x86/vector_math.h"

#if KILN_X86_DISPATCH
#include <immintrin.h>
#endif

namespace kiln::ops {
namespace {

using Act = PostOps::Act;

void Activate(const PostOps& post, float* v, int64_t len) {
  if (post.act == Act::kRelu) ReluF32(v, v, len);
  if (post.act == Act::kLeakyRelu) LeakyReluF32(v, v, len, post.alpha);
  if (post.act == Act::kClip) ClipF32(v, v, len, post.alpha, post.beta);
  if (post.act == Act::kSwish) SwishF32(v, v, len, 1.0f);
  if (post.act == Act::kHardSwish) HardSwishF32(v, v, len);
}

// In chunks of pixels whose y stays in the cache while every group adds to it: y starts as
// z + b (z may be y's own bytes; in another layout, it is gathered), each group's GEMM adds its
// slice, then the activation runs. A channels-last y (pixels l.y_channels or M floats apart) is
// the GEMM's [pixels x channels] result, an NCHW one its transpose [channels x pixels].
void GemmPerGroup(const Conv2DParams& p, const float* x, const float* w, const float* b, float* y,
                  const ConvLayouts& l, const PostOps& post, int threads) {
  const int64_t HW = p.H * p.W, Cg = p.C / p.group, Mg = p.M / p.group;
  const int64_t ldc = l.y ? (l.y_channels ? l.y_channels : p.M) : HW;
  const int64_t chunk = std::max<int64_t>(48, (int64_t{128} << 10) / (p.M * 4) / 6 * 6);
  // x's channel c of pixel i at x[i * xp + c * xc]
  const int64_t xp = l.x ? p.C : 1, xc = l.x ? 1 : HW;
  for (int64_t n = 0; n < p.N; ++n)
    for (int64_t i0 = 0; i0 < HW; i0 += chunk) {
      const int64_t rows = std::min(chunk, HW - i0);
      const float* zn = post.z ? post.z + n * HW * p.M : nullptr;
      float* yn = y + n * HW * (l.y ? ldc : p.M);
      // Rows of y's chunk: pixels (channels-last) or channels (NCHW), each `len` long.
      const int64_t count = l.y ? rows : p.M, len = l.y ? p.M : rows;
      for (int64_t r = 0; r < count; ++r) {
        float* row = l.y ? yn + (i0 + r) * ldc : yn + r * HW + i0;
        if (zn && l.z != l.y) {  // z's element j of this row sits `step` floats apart
          const float* zr = l.y ? zn + i0 + r : zn + (i0 * p.M) + r;
          const int64_t step = l.y ? HW : p.M;
          for (int64_t j = 0; j < len; ++j) row[j] = zr[j * step] + (!b ? 0.0f : l.y ? b[j] : b[r]);
          continue;
        }
        const float* zr = !zn ? nullptr : l.y ? zn + (i0 + r) * p.M : zn + r * HW + i0;
        if (l.y && zr && b)
          BinaryF32(VecBinOp::kAdd, zr, b, row, len);
        else if (zr && b)
          BinaryScalarF32(VecBinOp::kAdd, b[r], zr, row, len, false);
        else if (zr && zr != row)
          std::memcpy(row, zr, static_cast<size_t>(len) * sizeof(float));
        else if (!zr && b && l.y)
          std::memcpy(row, b, static_cast<size_t>(len) * sizeof(float));
        else if (!zr)
          std::fill(row, row + len, b && !l.y ? b[r] : 0.0f);
      }
      for (int64_t gi = 0; gi < p.group; ++gi) {
        const float* xg = x + n * HW * p.C + gi * Cg * xc + i0 * xp;
        const float* wg = w + gi * Mg * Cg;
        if (l.y)
          PackedGemm<float>(rows, Mg, Cg, 1.0f, xg, xp, xc, wg, 1, Cg, yn + i0 * ldc + gi * Mg, ldc,
                            true, threads);
        else
          PackedGemm<float>(Mg, rows, Cg, 1.0f, wg, Cg, 1, xg, xc, xp, yn + gi * Mg * HW + i0, ldc,
                            true, threads);
      }
      if (post.act == Act::kNone) continue;
      if (l.y && ldc == p.M)
        Activate(post, yn + i0 * ldc, rows * p.M);  // one pass over the chunk
      else if (!l.y && rows == HW)
        Activate(post, yn, HW * p.M);
      else
        for (int64_t r = 0; r < count; ++r)
          Activate(post, l.y ? yn + (i0 + r) * ldc : yn + r * HW + i0, len);
    }
}

#if KILN_X86_DISPATCH
#define KILN_GP_TARGET __attribute__((target("avx2,fma")))

// One image's operands for the direct kernel: X and Y (and Z) channels-last.
struct Direct {
  const float* x;  // pixels C floats apart
  const float* panels;
  const float* b;                           // may be null
  const float* z;                           // may be null; pixels M floats apart
  float* y;                                 // pixels ldc floats apart
  int64_t C, M, groups, Cg, Mg, vecs, ldc;  // vecs: 8-channel panels per group
  PostOps post;
};

// y for pixels [px, px + R) and channels [8 v0, 8 (v0 + NV)) of group g: R x NV ymm sums over
// the group's input channels (fused multiply-adds in channel order, from zero), then
// (z + b) + sum (the GEMM path's order), the activation but Swish, and the store; the group's
// last panel is loaded and stored under a mask.
KILN_GP_TARGET inline __m256 Load(bool masked, __m256i mask, const float* q) {
  return masked ? _mm256_maskload_ps(q, mask) : _mm256_loadu_ps(q);
}

template <int R, int NV>
KILN_GP_TARGET void Tile(const Direct& d, int64_t px, int64_t g, int64_t v0) {
  const float* xa = d.x + px * d.C + g * d.Cg;
  const float* wp = d.panels + (g * d.vecs + v0) * d.Cg * 8;
  __m256 acc[R][NV];
#pragma GCC unroll 12
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 12
    for (int v = 0; v < NV; ++v) acc[r][v] = _mm256_setzero_ps();
  for (int64_t k = 0; k < d.Cg; ++k) {
    __m256 bv[NV];
#pragma GCC unroll 12
    for (int v = 0; v < NV; ++v) bv[v] = _mm256_loadu_ps(wp + (v * d.Cg + k) * 8);
#pragma GCC unroll 12
    for (int r = 0; r < R; ++r) {
      const __m256 a = _mm256_broadcast_ss(xa + r * d.C + k);
#pragma GCC unroll 12
      for (int v = 0; v < NV; ++v) acc[r][v] = _mm256_fmadd_ps(a, bv[v], acc[r][v]);
    }
  }
  const int64_t c0 = g * d.Mg + v0 * 8;
  const int tail = static_cast<int>(std::min<int64_t>(8, d.Mg - (v0 + NV - 1) * 8));
  const __m256i mask =
      _mm256_cmpgt_epi32(_mm256_set1_epi32(tail), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
  // A group's last panel may be stored whole when the next group's tiles, run later, overwrite
  // the lanes past it, except over a residual in Y's own bytes that they read.
  const bool spill = g + 1 < d.groups && d.z != d.y;
#pragma GCC unroll 12
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 12
    for (int v = 0; v < NV; ++v) {
      const bool masked = v == NV - 1 && tail < 8 && !spill;
      const int64_t c = c0 + v * 8;
      __m256 s = acc[r][v];
      if (d.z || d.b) {
        __m256 init =
            d.z ? Load(masked, mask, d.z + (px + r) * d.M + c) : Load(masked, mask, d.b + c);
        if (d.z && d.b) init = _mm256_add_ps(init, Load(masked, mask, d.b + c));
        s = _mm256_add_ps(init, s);
      }
      s = Activate8(s, d.post.act, d.post.alpha, d.post.beta);
      float* out = d.y + (px + r) * d.ldc + c;
      if (masked)
        _mm256_maskstore_ps(out, mask, s);
      else
        _mm256_storeu_ps(out, s);
    }
}

using TileFn = void (*)(const Direct&, int64_t, int64_t, int64_t);
template <int NV, int... R>
constexpr TileFn kRowsOf[] = {Tile<R + 1, NV>...};

// A group's panels in blocks of three (4 x 3 tiles), with the rest as one or two pairs (6 x 2)
// or a single panel (12 x 1): 12 accumulators each, enough independent sums for both FMA pipes
// (a 6 x 1 tile for a group's odd last panel left C=96 / 4 groups at 51 GFLOP/s, 62 without).
// Rows per tile for a block of `nv` panels:
constexpr int RowsFor(int nv) { return nv == 3 ? 4 : nv == 2 ? 6 : 12; }

TileFn TileFor(int nv, int64_t rows) {
  switch (nv) {
    case 3:
      return kRowsOf<3, 0, 1, 2, 3>[rows - 1];
    case 2:
      return kRowsOf<2, 0, 1, 2, 3, 4, 5>[rows - 1];
    default:
      return kRowsOf<1, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11>[rows - 1];
  }
}

// Pixels [p0, p1): per group and block of panels, the pixels in tiles (the block's weights stay
// in L1 across them).
void DirectPixels(const Direct& d, int64_t p0, int64_t p1) {
  for (int64_t g = 0; g < d.groups; ++g)
    for (int64_t v0 = 0; v0 < d.vecs;) {
      const int64_t left = d.vecs - v0;
      const int nv = left == 1 ? 1 : left == 2 || left == 4 ? 2 : 3;
      const int R = RowsFor(nv);
      for (int64_t px = p0; px < p1; px += R)
        TileFor(nv, std::min<int64_t>(R, p1 - px))(d, px, g, v0);
      v0 += nv;
    }
  if (d.post.act == Act::kSwish) SwishPixelsF32(d.y + p0 * d.ldc, p1 - p0, d.ldc, 0, d.M);
}

// The same into an NCHW y (HW pixels per channel plane): channels-last in a scratch buffer,
// then transposed.
void DirectPixelsToPlanes(const Direct& d, int64_t HW, int64_t p0, int64_t p1) {
  Direct part = d;
  part.x = d.x + p0 * d.C;
  part.z = d.z ? d.z + p0 * d.M : nullptr;
  part.y = Scratch<float>(ScratchSlot::kConvColumns, static_cast<size_t>((p1 - p0) * d.M));
  part.ldc = d.M;
  DirectPixels(part, 0, p1 - p0);
  for (int64_t c = 0; c < d.M; ++c)
    for (int64_t i = 0; i < p1 - p0; ++i) d.y[c * HW + p0 + i] = part.y[i * d.M + c];
}
#endif

}  // namespace

bool GroupedPointwiseFits(const Conv2DParams& p, const ConvLayouts& l, const PostOps& post) {
  (void)post;
  return BestIsa() != Isa::kAvx512 && p.group > 1 && p.group < p.C && p.KH == 1 && p.KW == 1 &&
         p.sh == 1 && p.sw == 1 && p.ph == 0 && p.pw == 0 && p.peh == 0 && p.pew == 0 &&
         (l.y || l.y_channels == 0);
}

void GroupedPointwise(const Conv2DParams& p, const float* x, const float* w, bool w_constant,
                      const float* b, float* y, const ConvLayouts& l, const PostOps& post,
                      int threads, std::unique_ptr<NodeState>* state) {
  std::unique_ptr<NodeState> local;
  if (!state) state = &local;
  auto* st = dynamic_cast<GroupedPointwiseState*>(state->get());
  if (!st) {
    *state = std::make_unique<GroupedPointwiseState>();
    st = static_cast<GroupedPointwiseState*>(state->get());
  }
#if KILN_X86_DISPATCH
  if (IsaSupported(Isa::kAvx2) && l.x && (!post.z || l.z)) {
    const int64_t HW = p.H * p.W, Cg = p.C / p.group, Mg = p.M / p.group, vecs = (Mg + 7) / 8;
    const size_t size = static_cast<size_t>(p.group * vecs * Cg * 8);
    if (!st->direct || st->panels.size() != size || !w_constant || st->w != w) {
      st->panels.assign(size, 0.0f);
      for (int64_t g = 0; g < p.group; ++g)
        for (int64_t m = 0; m < Mg; ++m)
          for (int64_t k = 0; k < Cg; ++k)
            st->panels[static_cast<size_t>(((g * vecs + m / 8) * Cg + k) * 8 + m % 8)] =
                w[(g * Mg + m) * Cg + k];
      st->w = w_constant ? w : nullptr;
      st->direct = true;
    }
    const int64_t ldc = !l.y ? 0 : l.y_channels ? l.y_channels : p.M;
    // Pixels per part: a multiple of the tiles' rows whose slice of a group's input is about
    // 8 KiB (it is read once per block of panels).
    const int64_t part = std::max<int64_t>(12, (int64_t{8} << 10) / (Cg * 4) / 12 * 12);
    for (int64_t n = 0; n < p.N; ++n) {
      const Direct d{x + n * HW * p.C,
                     st->panels.data(),
                     b,
                     post.z ? post.z + n * HW * p.M : nullptr,
                     y + n * HW * (l.y ? ldc : p.M),
                     p.C,
                     p.M,
                     p.group,
                     Cg,
                     Mg,
                     vecs,
                     ldc,
                     post};
      ParallelFor(threads, (HW + part - 1) / part, [&](int64_t c0, int64_t c1) {
        for (int64_t c = c0; c < c1; ++c) {
          const int64_t q0 = c * part, q1 = std::min(HW, q0 + part);
          if (l.y)
            DirectPixels(d, q0, q1);
          else
            DirectPixelsToPlanes(d, HW, q0, q1);
        }
      });
    }
    return;
  }
#endif
  st->direct = false;
  GemmPerGroup(p, x, w, b, y, l, post, threads);
}

}  // namespace kiln::ops
