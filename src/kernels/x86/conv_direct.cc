#include "kernels/x86/conv_direct.h"

#include <algorithm>
#include <cstring>

#include "kernels/x86/conv_epilogue_avx2.h"
#include "kernels/x86/cpu_isa.h"
#include "kernels/x86/layout_kernels.h"
#include "kernels/x86/thread_pool.h"
#include "kernels/x86/vector_math.h"

#if KILN_X86_DISPATCH
#include <immintrin.h>
#endif

namespace kiln::ops {
namespace {

using Act = PostOps::Act;

// At most this many of K (taps x channels) per chunk of a panel: a block of three panels' chunk
// is then at most 96 KiB, read from L2 by each tile (L2 serves the three loads per 12 fused
// multiply-adds; chunks of 256, which fit L1, measured no faster and reload the sums 4x as often).
constexpr int64_t kChunkK = 1024;
// Output pixels per block: the block's input rows stay in L2 while every panel passes over
// them. A multiple of every tile's rows (4, 6, 8).
constexpr int64_t kPixelBlock = 96;
// Below this many input channels a kernel row of taps is read as one run from a padded copy (a
// tap's own run is too short to pay for loading its pointers; the copy is small next to the
// products).
constexpr int64_t kRowRunChannels = 64;

int64_t Chunks(int64_t C, int64_t taps) {
  return std::max<int64_t>(1, (C * taps + kChunkK - 1) / kChunkK);
}

// Channels [c0, c1) of chunk j when C channels are cut into n near-equal chunks.
int64_t ChunkStart(int64_t C, int64_t n, int64_t j) { return C * j / n; }

// How the tiles of one call read their operands.
struct Plan {
  const Conv2DParams* p;
  const float* x;  // channels-last: x itself, or the padded copy
  int64_t Hx, Wx;  // x's dims (the copy's include the padding)
  int64_t ph, pw;  // padding still to apply when reading x (0 for the copy)
  bool row_runs;   // one pointer per kernel row: KW x C floats in a run (the copy, dw == 1)
  int64_t taps, chunks;
  int64_t Cg, Mg, vg;  // input and output channels per group, 8-channel panels per group
  const float* panels;
  int64_t panel_floats;  // from one 8-channel panel to the next
  const float* zeros;
  const float* b;
  const float* z;  // pixels M floats apart
  float* y;        // pixels ldc floats apart, or NCHW
  int64_t ldc;
  bool nchw_y;
  PostOps post;
  int64_t vecs;  // 8-channel panels: group x vg

  // The first output channel of panel v, and one past its last.
  int64_t ChannelOf(int64_t v) const { return v / vg * Mg + v % vg * 8; }
  int64_t ChannelEnd(int64_t v) const { return std::min(ChannelOf(v) + 8, (v / vg + 1) * Mg); }
};

// The row pointer of output pixel q (flattened over images and rows) for every tap, into
// table[tap * kPixelBlock + i] for q = q0 + i; rows of a last partial tile read zeros.
void BuildRows(const Plan& pl, int64_t q0, int64_t q1, const float** table) {
  const Conv2DParams& p = *pl.p;
  const int64_t opix = p.OH * p.OW;
  // (n, oh, ow) of q, stepped along (a division per pixel cost as much as a first layer's taps)
  int64_t n = q0 / opix, oh = q0 % opix / p.OW, ow = q0 % p.OW;
  for (int64_t q = q0; q < q1; ++q, ++ow) {
    if (ow == p.OW) {
      ow = 0;
      if (++oh == p.OH) oh = 0, ++n;
    }
    const int64_t h0 = oh * p.sh - pl.ph, w0 = ow * p.sw - pl.pw;
    const float** t = table + (q - q0);
    const float* img = pl.x + n * pl.Hx * pl.Wx * p.C;
    if (pl.row_runs) {
      for (int64_t kh = 0; kh < p.KH; ++kh)
        t[kh * kPixelBlock] = img + ((h0 + kh * p.dh) * pl.Wx + w0) * p.C;
      continue;
    }
    for (int64_t kh = 0; kh < p.KH; ++kh) {
      const int64_t ih = h0 + kh * p.dh;
      for (int64_t kw = 0; kw < p.KW; ++kw) {
        const int64_t iw = w0 + kw * p.dw;
        const bool inside = ih >= 0 && ih < pl.Hx && iw >= 0 && iw < pl.Wx;
        t[(kh * p.KW + kw) * kPixelBlock] = inside ? img + (ih * pl.Wx + iw) * p.C : pl.zeros;
      }
    }
  }
  const int64_t padded = (q1 - q0 + 7) / 8 * 8 + 8;  // past any tile's last row
  for (int64_t i = q1 - q0; i < std::min(padded, kPixelBlock); ++i)
    for (int64_t t = 0; t < pl.taps; ++t) table[t * kPixelBlock + i] = pl.zeros;
}

#if KILN_X86_DISPATCH
#define KILN_DC_TARGET __attribute__((target("avx2,fma")))

// One call's tiles: the block's pixels, panels [v0, v0 + NV), chunk j.
struct TileArgs {
  const float* const* rows;  // the block's table
  const float* zeros;        // the row every tap outside the input points at
  int64_t taps, run, c0;     // pointers per row, floats a tap reads, where in each row it starts
  const float* w;            // panel v0 at chunk j
  int64_t wstride;           // floats between panels
  float* y;                  // the block's first pixel's output at channel 8 v0
  const float* z;            // its residual (null: none)
  const float* b;            // the bias at channel 8 v0 (null: none)
  int64_t ldc, zc;
  int tail;  // lanes of the last panel that are channels (8: all)
  bool first;
};

KILN_DC_TARGET inline __m256 Load(bool masked, __m256i mask, const float* q) {
  return masked ? _mm256_maskload_ps(q, mask) : _mm256_loadu_ps(q);
}

// What a tile does after its sums: store them as partial sums (a chunk before the last), or
// apply the activation first (the last chunk; Swish runs over whole rows afterwards). A template
// argument, so that the twelve stores carry no per-vector switch.
enum class Epilogue { kPartial, kNone, kRelu, kLeakyRelu, kClip, kHardSwish };
constexpr Act ActOf(Epilogue e) {
  return e == Epilogue::kRelu        ? Act::kRelu
         : e == Epilogue::kLeakyRelu ? Act::kLeakyRelu
         : e == Epilogue::kClip      ? Act::kClip
         : e == Epilogue::kHardSwish ? Act::kHardSwish
                                     : Act::kNone;
}

// Input channel k of the tile's R pixels times its NV panels' weights, into the sums.
template <int R, int NV>
KILN_DC_TARGET __attribute__((always_inline)) inline void Step(const float* w, int64_t wstride,
                                                               const float* const* a, int64_t k,
                                                               __m256 (&acc)[R][NV]) {
  __m256 bv[NV];
#pragma GCC unroll 3
  for (int v = 0; v < NV; ++v) bv[v] = _mm256_loadu_ps(w + v * wstride + k * 8);
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r) {
    const __m256 av = _mm256_broadcast_ss(a[r] + k);
#pragma GCC unroll 3
    for (int v = 0; v < NV; ++v) acc[r][v] = _mm256_fmadd_ps(av, bv[v], acc[r][v]);
  }
}

// R pixels x NV panels of 8 channels in registers, for the tile at rows `px` of the block: the
// first chunk starts from z + b, later ones from the partial sums in y; the taps' runs are
// multiplied in order. kFull: all R rows are pixels (else `valid` are).
template <int R, int NV, Epilogue E, bool kFull>
KILN_DC_TARGET __attribute__((always_inline)) inline void TileAt(const TileArgs& t, int64_t px,
                                                                 int valid, __m256i mask,
                                                                 const PostOps& post) {
  const bool masked = t.tail < 8;  // the last panel's vectors
  float* y = t.y + px * t.ldc;
  __m256 acc[R][NV];
  if (t.first && !t.z) {
    __m256 bias[NV];
#pragma GCC unroll 3
    for (int v = 0; v < NV; ++v)
      bias[v] = t.b ? Load(v == NV - 1 && masked, mask, t.b + v * 8) : _mm256_setzero_ps();
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r)
#pragma GCC unroll 3
      for (int v = 0; v < NV; ++v) acc[r][v] = bias[v];
  } else {
    const float* z = t.first ? t.z + px * t.zc : nullptr;
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r)
#pragma GCC unroll 3
      for (int v = 0; v < NV; ++v) {
        const bool m = v == NV - 1 && masked;
        __m256 s = _mm256_setzero_ps();
        if (kFull || r < valid) {
          if (!t.first) {
            s = Load(m, mask, y + r * t.ldc + v * 8);
          } else {
            s = Load(m, mask, z + r * t.zc + v * 8);
            if (t.b) s = _mm256_add_ps(s, Load(m, mask, t.b + v * 8));
          }
        }
        acc[r][v] = s;
      }
  }
  // The next tile's outputs (and residual), which its first loads or stores would otherwise wait
  // for: a row's part of them is not a stream the hardware prefetcher follows.
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r) {
    __builtin_prefetch(y + (R + r) * t.ldc, 1);
    __builtin_prefetch(y + (R + r) * t.ldc + NV * 8 - 1, 1);
    if (t.first && t.z) {
      __builtin_prefetch(t.z + (px + R + r) * t.zc);
      __builtin_prefetch(t.z + (px + R + r) * t.zc + NV * 8 - 1);
    }
  }
  const float* w = t.w;
  const float* const* rows = t.rows + px;
  for (int64_t tap = 0; tap < t.taps; ++tap) {
    const float* a[R];
    bool inside = false;  // a tap in the padding for every pixel of the tile adds nothing
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
      a[r] = rows[tap * kPixelBlock + r];
      inside |= a[r] != t.zeros;
      a[r] += t.c0;
    }
    if (!inside) {
      w += t.run * 8;
      continue;
    }
    if constexpr (NV == 1) {
      // One panel: a step's 8 fused multiply-adds would issue beside 8 pointer increments
      // (grouped convs' 8-channel groups 5% slower); unrolled, the steps share them.
#pragma GCC unroll 4
      for (int64_t k = 0; k < t.run; ++k) Step<R, NV>(w, t.wstride, a, k, acc);
    } else {
      for (int64_t k = 0; k < t.run; ++k) Step<R, NV>(w, t.wstride, a, k, acc);
    }
    w += t.run * 8;
  }
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r) {
    if (!kFull && r >= valid) break;
#pragma GCC unroll 3
    for (int v = 0; v < NV; ++v) {
      const __m256 s = Activate8(acc[r][v], ActOf(E), post.alpha, post.beta);
      float* out = y + r * t.ldc + v * 8;
      if (v == NV - 1 && masked)
        _mm256_maskstore_ps(out, mask, s);
      else
        _mm256_storeu_ps(out, s);
    }
  }
}

// Every tile of `count` pixels from the table's first row, in one call (a call per tile cost
// as much as a first layer's 27 multiply-adds per output).
template <int R, int NV, Epilogue E>
KILN_DC_TARGET void Tiles(const TileArgs& t, int64_t count, const PostOps& post) {
  const __m256i mask =
      _mm256_cmpgt_epi32(_mm256_set1_epi32(t.tail), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
  int64_t px = 0;
  for (; px + R <= count; px += R) TileAt<R, NV, E, true>(t, px, R, mask, post);
  if (px < count) TileAt<R, NV, E, false>(t, px, static_cast<int>(count - px), mask, post);
}

// Three panels a block where they can (4 x 3 tiles: 7 loads per 12 fused multiply-adds), the
// rest in pairs (6 x 2) or one (8 x 1).
int PanelsAt(int64_t left) { return left == 1 ? 1 : left == 2 || left == 4 ? 2 : 3; }

using TileFn = void (*)(const TileArgs&, int64_t, const PostOps&);
template <Epilogue E>
TileFn TileOf(int nv) {
  return nv == 3 ? Tiles<4, 3, E> : nv == 2 ? Tiles<6, 2, E> : Tiles<8, 1, E>;
}
TileFn TileFor(int nv, bool last, Act act) {
  if (!last) return TileOf<Epilogue::kPartial>(nv);
  switch (act) {
    case Act::kRelu:
      return TileOf<Epilogue::kRelu>(nv);
    case Act::kLeakyRelu:
      return TileOf<Epilogue::kLeakyRelu>(nv);
    case Act::kClip:
      return TileOf<Epilogue::kClip>(nv);
    case Act::kHardSwish:
      return TileOf<Epilogue::kHardSwish>(nv);
    default:
      return TileOf<Epilogue::kNone>(nv);
  }
}

// Pixels [q0, q1) (at most one block) x panels [v_begin, v_end): per block of panels and chunk,
// every tile of the pixels, so that the panels' chunk stays in L1 across them.
void Pixels(const Plan& pl, int64_t q0, int64_t q1, int64_t v_begin, int64_t v_end) {
  const Conv2DParams& p = *pl.p;
  auto** table =
      Scratch<const float*>(ScratchSlot::kConvRows, static_cast<size_t>(pl.taps * kPixelBlock));
  BuildRows(pl, q0, q1, table);
  // Where pixel q0's outputs go: y, or with an NCHW y a channels-last block transposed at the end.
  const int64_t ldc = pl.nchw_y ? p.M : pl.ldc;
  float* yq0 =
      pl.nchw_y ? Scratch<float>(ScratchSlot::kConvColumns, static_cast<size_t>(kPixelBlock * p.M))
                : pl.y + q0 * ldc;
  const int tail_group = static_cast<int>(pl.Mg - (pl.vg - 1) * 8);
  for (int64_t v0 = v_begin; v0 < v_end;) {
    // A block of panels stays in one group: its tiles read one run of input channels.
    const int64_t group_end = std::min(v_end, (v0 / pl.vg + 1) * pl.vg);
    const int nv = PanelsAt(group_end - v0);
    const int64_t m = pl.ChannelOf(v0), cg0 = v0 / pl.vg * pl.Cg;
    TileArgs t{};
    t.wstride = pl.panel_floats;
    t.ldc = ldc;
    t.zc = p.M;
    t.b = pl.b ? pl.b + m : nullptr;
    t.tail = (v0 + nv) % pl.vg == 0 ? tail_group : 8;
    t.rows = table;
    t.zeros = pl.zeros;
    t.y = yq0 + m;
    t.z = pl.z ? pl.z + q0 * p.M + m : nullptr;
    int64_t wofs = 0;
    for (int64_t j = 0; j < pl.chunks; ++j) {
      const int64_t c0 = pl.row_runs ? 0 : cg0 + ChunkStart(pl.Cg, pl.chunks, j);
      const int64_t c1 = pl.row_runs ? 0 : cg0 + ChunkStart(pl.Cg, pl.chunks, j + 1);
      t.taps = pl.taps;
      t.run = pl.row_runs ? p.KW * p.C : c1 - c0;
      t.c0 = c0;
      t.w = pl.panels + v0 * pl.panel_floats + wofs;
      t.first = j == 0;
      wofs += t.taps * t.run * 8;
      TileFor(nv, j + 1 == pl.chunks, pl.post.act)(t, q1 - q0, pl.post);
    }
    v0 += nv;
  }
  const int64_t m0 = pl.ChannelOf(v_begin), m1 = pl.ChannelEnd(v_end - 1);
  if (pl.post.act == Act::kSwish) SwishPixelsF32(yq0, q1 - q0, ldc, m0, m1);
  if (!pl.nchw_y) return;
  // Channel by channel, each image's run of pixels: the stores stay contiguous (pixel by pixel
  // they strode a plane apart, which with power-of-two planes thrashed the L1 sets).
  const int64_t opix = p.OH * p.OW;
  for (int64_t q = q0; q < q1;) {
    const int64_t n = q / opix, end = std::min(q1, (n + 1) * opix);
    for (int64_t m = m0; m < m1; ++m) {
      const float* src = yq0 + (q - q0) * p.M + m;
      float* dst = pl.y + (n * p.M + m) * opix;
      for (int64_t i = q; i < end; ++i) dst[i - n * opix] = src[(i - q) * p.M];
    }
    q = end;
  }
}
#endif

// The packed panels: for each group's 8 output channels, chunk by chunk, every tap's run of the
// chunk's input channels (of the group), 8 floats (one per output channel) per input channel;
// zero past the group's last channel.
void PackPanels(const Conv2DParams& p, const float* w, int64_t chunks, float* out) {
  const int64_t Cg = p.C / p.group, Mg = p.M / p.group, vg = (Mg + 7) / 8;
  const int64_t K = Cg * p.KH * p.KW;
  std::memset(out, 0, static_cast<size_t>(p.group * vg * K * 8) * sizeof(float));
  for (int64_t v = 0; v < p.group * vg; ++v) {
    float* dst = out + v * K * 8;
    const int64_t m0 = v / vg * Mg + v % vg * 8, m1 = std::min(m0 + 8, (v / vg + 1) * Mg);
    for (int64_t j = 0; j < chunks; ++j) {
      const int64_t c0 = ChunkStart(Cg, chunks, j), c1 = ChunkStart(Cg, chunks, j + 1);
      for (int64_t kh = 0; kh < p.KH; ++kh)
        for (int64_t kw = 0; kw < p.KW; ++kw)
          for (int64_t c = c0; c < c1; ++c, dst += 8)
            for (int64_t m = m0; m < m1; ++m)
              dst[m - m0] = w[((m * Cg + c) * p.KH + kh) * p.KW + kw];
    }
  }
}

// x (NCHW or channels-last) as channels-last images, with the padding made explicit where
// `padded` (else the copy is x's own size), over `threads` (the copy of a long 1-D NCHW input
// had been a serial tenth of the convolution).
float* ChannelsLastCopy(const Conv2DParams& p, const float* x, bool x_channels_last, bool padded,
                        int threads) {
  const int64_t Hp = padded ? p.H + p.ph + p.peh : p.H, Wp = padded ? p.W + p.pw + p.pew : p.W;
  const int64_t ph = padded ? p.ph : 0, pw = padded ? p.pw : 0;
  float* out = Scratch<float>(ScratchSlot::kPadded, static_cast<size_t>(p.N * Hp * Wp * p.C));
  if (!padded && !x_channels_last) {
    for (int64_t n = 0; n < p.N; ++n)
      ChannelsLastFromNchw(x + n * p.C * p.H * p.W, out + n * p.H * p.W * p.C, p.C, p.H * p.W,
                           threads);
    return out;
  }
  if (padded) std::memset(out, 0, static_cast<size_t>(p.N * Hp * Wp * p.C) * sizeof(float));
  ParallelFor(threads, p.N * p.H, [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      const int64_t n = r / p.H, h = r % p.H;
      float* row = out + ((n * Hp + h + ph) * Wp + pw) * p.C;
      if (x_channels_last) {
        std::memcpy(row, x + r * p.W * p.C, static_cast<size_t>(p.W * p.C) * sizeof(float));
        continue;
      }
      for (int64_t c = 0; c < p.C; ++c) {
        const float* src = x + ((n * p.C + c) * p.H + h) * p.W;
        for (int64_t w = 0; w < p.W; ++w) row[w * p.C + c] = src[w];
      }
    }
  });
  return out;
}

// Whether the input is read from a channels-last copy: an NCHW input, or so few channels that a
// tap's run is too short to pay for its pointer. The copy holds the padding where a kernel row is
// read as one run (dw == 1); elsewhere taps in the padding read zeros, which tiles skip.
bool UsesCopy(const Conv2DParams& p, const ConvLayouts& l) {
  return !l.x || (p.group == 1 && p.C < kRowRunChannels && p.dw == 1 && p.KW > 1);
}

}  // namespace

bool DirectConvFits(const Conv2DParams& p, const ConvLayouts& l, const PostOps& post) {
  return KILN_X86_DISPATCH && IsaSupported(Isa::kAvx2) && BestIsa() != Isa::kAvx512 &&
         (!post.z || (l.z && l.y && l.y_channels == 0));
}

bool DirectConvPays(const Conv2DParams& p, const ConvLayouts& l) {
  if (p.group > 1) return p.KH * p.KW > 1 && p.C / p.group >= 2 && l.x && l.y;
  if (p.KH * p.KW == 1) return (l.y_channels != 0 && p.C <= 64) || (l.any() && p.OH * p.OW <= 3136);
  return p.C >= 64;
}

void DirectConv(const Conv2DParams& p, const float* x, const float* w, bool w_constant,
                const float* b, float* y, const ConvLayouts& l, const PostOps& post, int threads,
                std::unique_ptr<NodeState>* state) {
#if KILN_X86_DISPATCH
  std::unique_ptr<NodeState> local;
  if (!state) state = &local;
  auto* st = dynamic_cast<DirectConvState*>(state->get());
  if (!st) {
    *state = std::make_unique<DirectConvState>();
    st = static_cast<DirectConvState*>(state->get());
  }
  const bool copy = UsesCopy(p, l);
  // A kernel row's run of a group's channels is not contiguous in the copy.
  const bool row_runs = copy && p.dw == 1 && p.group == 1;
  const int64_t taps = row_runs ? p.KH : p.KH * p.KW;
  const int64_t Cg = p.C / p.group, Mg = p.M / p.group, vg = (Mg + 7) / 8;
  const int64_t chunks = row_runs ? 1 : Chunks(Cg, taps);
  const int64_t vecs = p.group * vg, K = Cg * p.KH * p.KW;
  if (!st->panels || !w_constant || st->w != w || st->C != p.C || st->M != p.M || st->KH != p.KH ||
      st->KW != p.KW || st->group != p.group || st->chunks != chunks) {
    st->panels = AllocateLarge(static_cast<size_t>(vecs * K * 8) * sizeof(float));
    PackPanels(p, w, chunks, static_cast<float*>(st->panels.get()));
    st->w = w_constant ? w : nullptr;
    st->C = p.C;
    st->M = p.M;
    st->KH = p.KH;
    st->KW = p.KW;
    st->group = p.group;
    st->chunks = chunks;
    st->zeros.assign(static_cast<size_t>(p.KW * p.C), 0.0f);  // any tap's run
  }
  Plan pl{};
  pl.p = &p;
  pl.x = copy ? ChannelsLastCopy(p, x, l.x, row_runs, threads) : x;
  pl.Hx = row_runs ? p.H + p.ph + p.peh : p.H;
  pl.Wx = row_runs ? p.W + p.pw + p.pew : p.W;
  pl.ph = row_runs ? 0 : p.ph;
  pl.pw = row_runs ? 0 : p.pw;
  pl.row_runs = row_runs;
  pl.taps = taps;
  pl.chunks = chunks;
  pl.Cg = Cg;
  pl.Mg = Mg;
  pl.vg = vg;
  pl.panels = static_cast<const float*>(st->panels.get());
  pl.panel_floats = K * 8;
  pl.zeros = st->zeros.data();
  pl.b = b;
  pl.z = post.z;
  pl.y = y;
  pl.ldc = l.y_channels ? l.y_channels : p.M;
  pl.nchw_y = !l.y;
  pl.post = post;
  pl.vecs = vecs;
  const int64_t P = p.N * p.OH * p.OW, blocks = (P + kPixelBlock - 1) / kPixelBlock;
  if (threads <= 1 || blocks >= 2 * threads) {
    ParallelFor(threads, blocks, [&](int64_t b0, int64_t b1) {
      for (int64_t i = b0; i < b1; ++i)
        Pixels(pl, i * kPixelBlock, std::min(P, (i + 1) * kPixelBlock), 0, vecs);
    });
    return;
  }
  // Few pixels: the threads split the panels, in blocks of three.
  ParallelFor(threads, (vecs + 2) / 3, [&](int64_t g0, int64_t g1) {
    for (int64_t i = 0; i < blocks; ++i)
      Pixels(pl, i * kPixelBlock, std::min(P, (i + 1) * kPixelBlock), g0 * 3,
             std::min(vecs, g1 * 3));
  });
#else
  (void)p, (void)x, (void)w, (void)w_constant, (void)b, (void)y, (void)l, (void)post;
  (void)threads, (void)state;
#endif
}

}  // namespace kiln::ops
