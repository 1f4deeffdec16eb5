#include "kernels/x86/conv_winograd.h"

#include <algorithm>
#include <cstring>

#include "kernels/x86/cpu_isa.h"
#include "kernels/x86/gemm_kernels.h"
#include "kernels/x86/scratch.h"
#include "kernels/x86/thread_pool.h"
#include "kernels/x86/vector_math.h"

namespace kiln::ops {
namespace {

#if KILN_X86_DISPATCH
#define KILN_WINO_TARGET __attribute__((target("avx2,fma")))
#else
#define KILN_WINO_TARGET
#endif

typedef float V8 __attribute__((vector_size(32)));

// Eight channels (kLanes 8) or one (the tail) of a tile, as a vector or a float.
template <int kLanes>
struct Lanes;
template <>
struct Lanes<8> {
  using T = V8;
  static KILN_WINO_TARGET inline T Load(const float* p) {
    T v;
    __builtin_memcpy(&v, p, sizeof(v));
    return v;
  }
  static KILN_WINO_TARGET inline void Store(float* p, T v) { __builtin_memcpy(p, &v, sizeof(v)); }
  static KILN_WINO_TARGET inline T Splat(float f) { return T{f, f, f, f, f, f, f, f}; }
};
template <>
struct Lanes<1> {
  using T = float;
  static inline T Load(const float* p) { return *p; }
  static inline void Store(float* p, T v) { *p = v; }
  static inline T Splat(float f) { return f; }
};

struct Geometry {
  int64_t H, W, C, M, OH, OW, ph, pw, TW, tiles;
};

// V[xi][t - t0][c] = (B^T d B)[xi] for the 4 x 4 patch d of tile t, channels [c, c + kLanes).
template <int kLanes>
KILN_WINO_TARGET inline void InputTile(const Geometry& g, const float* x, int64_t t, int64_t c,
                                       float* v, int64_t stride) {
  using L = Lanes<kLanes>;
  using T = typename L::T;
  const int64_t h0 = (t / g.TW) * 2 - g.ph, w0 = (t % g.TW) * 2 - g.pw;
  T d[4][4];
  for (int r = 0; r < 4; ++r)
    for (int s = 0; s < 4; ++s) {
      const int64_t h = h0 + r, w = w0 + s;
      d[r][s] = h >= 0 && h < g.H && w >= 0 && w < g.W ? L::Load(x + (h * g.W + w) * g.C + c)
                                                       : L::Splat(0.0f);
    }
  T e[4][4];
  for (int s = 0; s < 4; ++s) {  // B^T d: rows
    e[0][s] = d[0][s] - d[2][s];
    e[1][s] = d[1][s] + d[2][s];
    e[2][s] = d[2][s] - d[1][s];
    e[3][s] = d[1][s] - d[3][s];
  }
  for (int r = 0; r < 4; ++r) {  // (B^T d) B: columns
    L::Store(v + (4 * r + 0) * stride, e[r][0] - e[r][2]);
    L::Store(v + (4 * r + 1) * stride, e[r][1] + e[r][2]);
    L::Store(v + (4 * r + 2) * stride, e[r][2] - e[r][1]);
    L::Store(v + (4 * r + 3) * stride, e[r][1] - e[r][3]);
  }
}

// The 2 x 2 outputs of tile t, channels [m, m + kLanes): A^T m A + b + z, then the activation
// (not Swish, which runs after).
template <int kLanes>
KILN_WINO_TARGET inline void OutputTile(const Geometry& g, const float* mo, int64_t stride,
                                        int64_t t, int64_t m, const float* b, const float* z,
                                        float* y, int64_t ldc, const PostOps& post) {
  using L = Lanes<kLanes>;
  using T = typename L::T;
  T q[4][4];
  for (int i = 0; i < 16; ++i) q[i / 4][i % 4] = L::Load(mo + i * stride);
  T u[2][4];
  for (int s = 0; s < 4; ++s) {
    u[0][s] = q[0][s] + q[1][s] + q[2][s];
    u[1][s] = q[1][s] - q[2][s] - q[3][s];
  }
  const T bias = b ? L::Load(b + m) : L::Splat(0.0f);
  const int64_t oh0 = (t / g.TW) * 2, ow0 = (t % g.TW) * 2;
  using Act = PostOps::Act;
  const T zero = L::Splat(0.0f), alpha = L::Splat(post.alpha), beta = L::Splat(post.beta);
  for (int a = 0; a < 2; ++a)
    for (int c = 0; c < 2; ++c) {
      const int64_t oh = oh0 + a, ow = ow0 + c;
      if (oh >= g.OH || ow >= g.OW) continue;
      T r = (c == 0 ? u[a][0] + u[a][1] + u[a][2] : u[a][1] - u[a][2] - u[a][3]) + bias;
      const int64_t pixel = oh * g.OW + ow;
      if (z) r += L::Load(z + pixel * g.M + m);
      if (post.act == Act::kRelu) r = r < zero ? zero : r;
      if (post.act == Act::kLeakyRelu) r = r < zero ? r * alpha : r;
      if (post.act == Act::kClip) r = r < alpha ? alpha : r > beta ? beta : r;
      if (post.act == Act::kHardSwish) {
        T g = r / L::Splat(6.0f) + L::Splat(0.5f);  // HardSwishF32's arithmetic
        g = g < L::Splat(1.0f) ? g : L::Splat(1.0f);
        r = r * (g > zero ? g : zero);
      }
      L::Store(y + pixel * ldc + m, r);
    }
}

KILN_WINO_TARGET void InputBlock(const Geometry& g, const float* x, int64_t t0, int64_t t1,
                                 float* v, int64_t stride) {
  for (int64_t t = t0; t < t1; ++t) {
    float* vt = v + (t - t0) * g.C;
    int64_t c = 0;
    for (; c + 8 <= g.C; c += 8) InputTile<8>(g, x, t, c, vt + c, stride);
    for (; c < g.C; ++c) InputTile<1>(g, x, t, c, vt + c, stride);
  }
}

KILN_WINO_TARGET void OutputBlock(const Geometry& g, const float* mo, int64_t stride, int64_t t0,
                                  int64_t t1, const float* b, const float* z, float* y, int64_t ldc,
                                  const PostOps& post) {
  for (int64_t t = t0; t < t1; ++t) {
    const float* mt = mo + (t - t0) * g.M;
    int64_t m = 0;
    for (; m + 8 <= g.M; m += 8) OutputTile<8>(g, mt + m, stride, t, m, b, z, y, ldc, post);
    for (; m < g.M; ++m) OutputTile<1>(g, mt + m, stride, t, m, b, z, y, ldc, post);
  }
}

// U[xi][c][m] = (G g G^T)[xi] for g = w[m, c] (3 x 3).
void TransformWeights(const float* w, int64_t C, int64_t M, float* u) {
  for (int64_t m = 0; m < M; ++m)
    for (int64_t c = 0; c < C; ++c) {
      const float* k = w + (m * C + c) * 9;
      float gk[4][3];
      for (int j = 0; j < 3; ++j) {
        gk[0][j] = k[j];
        gk[1][j] = 0.5f * (k[j] + k[3 + j] + k[6 + j]);
        gk[2][j] = 0.5f * (k[j] - k[3 + j] + k[6 + j]);
        gk[3][j] = k[6 + j];
      }
      for (int i = 0; i < 4; ++i) {
        const float row[4] = {gk[i][0], 0.5f * (gk[i][0] + gk[i][1] + gk[i][2]),
                              0.5f * (gk[i][0] - gk[i][1] + gk[i][2]), gk[i][2]};
        for (int j = 0; j < 4; ++j) u[((4 * i + j) * C + c) * M + m] = row[j];
      }
    }
}

// 2 x 2 output tiles of the image.
int64_t Tiles(const Conv2DParams& p) { return (p.OH + 1) / 2 * ((p.OW + 1) / 2); }

// Tiles per block: the 16 transformed inputs and products of a block in about 96 KiB (48-384
// tried: 96 was best on 64-256 channels).
int64_t TilesPerBlock(const Conv2DParams& p) {
  const int64_t block = std::clamp<int64_t>((int64_t{96} << 10) / (16 * (p.C + p.M) * 4), 12, 512);
  return std::min(block, Tiles(p));
}

int64_t Blocks(const Conv2DParams& p) {
  return (Tiles(p) + TilesPerBlock(p) - 1) / TilesPerBlock(p);
}

}  // namespace

bool WinogradFits(const Conv2DParams& p, const ConvLayouts& l, const PostOps& post) {
  return p.N == 1 && p.group == 1 && p.KH == 3 && p.KW == 3 && p.sh == 1 && p.sw == 1 &&
         p.dh == 1 && p.dw == 1 && l.x && l.y && (!post.z || l.z) && p.OH > 0 && p.OW > 0;
}

bool WinogradPays(const Conv2DParams& p, int threads) {
  return BestIsa() == Isa::kAvx2 && p.C >= 32 && p.M >= 32 && p.OH * p.OW >= 144 &&
         (threads == 1 || Blocks(p) >= 2 * threads);
}

void WinogradChannelsLast(const Conv2DParams& p, const float* x, const float* w, bool w_constant,
                          const float* b, float* y, const ConvLayouts& l, const PostOps& post,
                          int threads, std::unique_ptr<NodeState>* state) {
  std::unique_ptr<NodeState> local;
  if (!state) state = &local;
  auto* st = dynamic_cast<WinogradState*>(state->get());
  if (!st || st->C != p.C || st->M != p.M || !w_constant || st->w != w) {
    auto fresh = std::make_unique<WinogradState>();
    fresh->C = p.C;
    fresh->M = p.M;
    fresh->w = w_constant ? w : nullptr;
    std::vector<float> u(static_cast<size_t>(16 * p.C * p.M));
    TransformWeights(w, p.C, p.M, u.data());
    for (int xi = 0; xi < 16; ++xi)
      fresh->u.push_back(PackGemmB<float>(p.C, p.M, u.data() + xi * p.C * p.M, p.M, 1));
    st = fresh.get();
    *state = std::move(fresh);
  }
  Geometry g{p.H, p.W, p.C, p.M, p.OH, p.OW, p.ph, p.pw, (p.OW + 1) / 2, Tiles(p)};
  const int64_t ldc = l.y_channels ? l.y_channels : p.M;
  const int64_t tb = TilesPerBlock(p), blocks = Blocks(p);
  // Blocks [b0, b1) on this thread alone, in its own scratch: the same products, in the same
  // order, as any other split.
  auto run_blocks = [&](int64_t b0, int64_t b1, int gemm_threads) {
    float* v = Scratch<float>(ScratchSlot::kConvColumns, static_cast<size_t>(16 * tb * p.C));
    float* mo = Scratch<float>(ScratchSlot::kPadded, static_cast<size_t>(16 * tb * p.M));
    for (int64_t t0 = b0 * tb; t0 < std::min(g.tiles, b1 * tb); t0 += tb) {
      const int64_t n = std::min(tb, g.tiles - t0);
      ParallelFor(gemm_threads, n, [&](int64_t a, int64_t e) {
        InputBlock(g, x, t0 + a, t0 + e, v + a * p.C, tb * p.C);
      });
      for (int xi = 0; xi < 16; ++xi)
        PackedGemm<float>(n, v + xi * tb * p.C, p.C, 1, st->u[xi], mo + xi * tb * p.M, p.M, false,
                          gemm_threads);
      ParallelFor(gemm_threads, n, [&](int64_t a, int64_t e) {
        OutputBlock(g, mo + a * p.M, tb * p.M, t0 + a, t0 + e, b, post.z, y, ldc, post);
      });
    }
  };
  // Threads take whole blocks where there are enough to go round (splitting each block's 16
  // small GEMMs instead made resnet18 1.4x slower at two threads than at one).
  if (threads > 1 && blocks >= 2 * threads)
    ParallelFor(threads, blocks, [&](int64_t b0, int64_t b1) { run_blocks(b0, b1, 1); });
  else
    run_blocks(0, blocks, threads);
  if (post.act == PostOps::Act::kSwish)
    ParallelFor(threads, p.OH * p.OW, [&](int64_t i0, int64_t i1) {
      SwishPixelsF32(y + i0 * ldc, i1 - i0, ldc, 0, p.M);
    });
}

}  // namespace kiln::ops
