#include "ops/qconv_direct.h"

#include <algorithm>
#include <cstring>
#include <type_traits>
#include <vector>

#include "kernels/reference/reference_kernels.h"
#include "kernels/x86/cpu_isa.h"
#include "kernels/x86/scratch.h"
#include "kernels/x86/simd.h"
#include "kernels/x86/thread_pool.h"
#include "ops/shape_ops_util.h"

#if KILN_X86_DISPATCH
#include <immintrin.h>
#endif

namespace kiln::ops {
namespace {

// The value of stored byte b of x.
KILN_AI int32_t XValue(uint8_t b, bool is_signed) { return is_signed ? static_cast<int8_t>(b) : b; }

// Stores `count` sums s of output channel m at element `at` of the output: as int32, or
// requantized (QConvOutput). Inlined into the vector kernels, whose instruction set it takes.
KILN_AI void Emit(const QConvOutput& o, int64_t at, int64_t m, const int32_t* s, int64_t count) {
  if (!o.y) {
    std::memcpy(o.sums + at, s, static_cast<size_t>(count) * 4);
    return;
  }
  const int32_t mult = o.mult[m], shift = o.shift[m], zp = o.zp, lo = o.lo, hi = o.hi;
  // Restricted: y's bytes could alias the sums for all the compiler knows, and the loop would
  // not vectorize.
  const int32_t* __restrict from = s;
  uint8_t* __restrict to = o.y + at;
  for (int64_t i = 0; i < count; ++i)
    to[i] = static_cast<uint8_t>(kiln_requant_right(from[i], mult, shift, zp, lo, hi));
}

// ---- Depthwise

// Sixteen channels at a time, one per lane (GCC's vector extension: a zmm on AVX-512, two ymm on
// AVX2), so that a small plane costs no per-channel overhead.
constexpr int kLanes = 16;
using Lanes = int32_t __attribute__((vector_size(4 * kLanes)));

// plane [rows, cols] of Lanes holds x - x_zp of the block's channels, zero in the padding and in
// channels past the last; w [taps] of Lanes; out [oh, ow] of Lanes starts at the bias and gains
// every tap (at offsets[t] in the plane from its window's first), four output pixels of a row at
// a time so that each tap's weights are loaded once for the four.
struct DepthwiseBody {
  static KILN_AI void Run(const Lanes* plane, int64_t cols, const Lanes* w, const Lanes* bias,
                          const ConvPlane* q, const int64_t* offsets, Lanes* out) {
    const Lanes b = *bias;
    const int64_t taps = q->kh * q->kw, sw = q->sw;
    for (int64_t oy = 0; oy < q->oh; ++oy) {
      const Lanes* row = plane + oy * q->sh * cols;
      Lanes* o = out + oy * q->ow;
      int64_t ox = 0;
      for (; ox + 4 <= q->ow; ox += 4) {
        Lanes a0 = b, a1 = b, a2 = b, a3 = b;
        const Lanes* at = row + ox * sw;
        for (int64_t t = 0; t < taps; ++t) {
          const Lanes wt = w[t];
          const Lanes* p = at + offsets[t];
          a0 += wt * p[0];
          a1 += wt * p[sw];
          a2 += wt * p[2 * sw];
          a3 += wt * p[3 * sw];
        }
        o[ox] = a0;
        o[ox + 1] = a1;
        o[ox + 2] = a2;
        o[ox + 3] = a3;
      }
      for (; ox < q->ow; ++ox) {
        Lanes a = b;
        const Lanes* at = row + ox * sw;
        for (int64_t t = 0; t < taps; ++t) a += w[t] * at[offsets[t]];
        o[ox] = a;
      }
    }
  }
};

using Wide = int64_t __attribute__((vector_size(8 * kLanes)));
using Bytes = uint8_t __attribute__((vector_size(kLanes)));
using SignedBytes = int8_t __attribute__((vector_size(kLanes)));
using Halves = uint16_t __attribute__((vector_size(2 * kLanes)));
using SignedHalves = int16_t __attribute__((vector_size(2 * kLanes)));

// requant.c's kiln_requant_right lane by lane: acc times mult (as int64), rshift = -shift - 2.
KILN_AI Lanes RequantLanes(Lanes acc, Wide mult, Lanes rshift, int32_t zp, int32_t lo, int32_t hi) {
  const Wide a = __builtin_convertvector(acc, Wide);
  // a >> 63 is all ones for a negative a: the mask takes 2^31 off.
  const Wide t = a * mult + (int64_t{1} << 30) + ((a >> 63) & -(int64_t{1} << 31));
  Lanes v = ((__builtin_convertvector(t >> 32, Lanes) >> rshift) + 1) >> 1;
  v = v < lo - zp ? lo - zp : v;
  v = v > hi - zp ? hi - zp : v;
  return v + zp;
}

// The image's rows of a block into the plane: stage [pixels][kLanes] holds the block's stored
// bytes, channel l at byte l (lanes past the last channel hold x_zp); each becomes a lane of
// x - x_zp at its place in the plane.
template <class T>
struct WidenBody {
  static KILN_AI void Run(const uint8_t* stage, const ConvPlane* q, int64_t rows, int64_t cols,
                          int64_t c_lo, int64_t c_hi, int32_t zp, Lanes* plane) {
    using V = std::conditional_t<std::is_signed_v<T>, SignedBytes, Bytes>;
    // Through 16-bit lanes: GCC widens bytes straight to 32 bits one byte at a time.
    using H = std::conditional_t<std::is_signed_v<T>, SignedHalves, Halves>;
    for (int64_t iy = 0; iy < q->h && iy + q->ph < rows; ++iy) {
      Lanes* row = plane + (iy + q->ph) * cols;
      const uint8_t* in = stage + (iy * q->w - q->pw) * kLanes;  // column c at in[c * kLanes]
      for (int64_t c = c_lo; c < c_hi; ++c) {
        V b;
        std::memcpy(&b, in + c * kLanes, kLanes);
        row[c] = __builtin_convertvector(__builtin_convertvector(b, H), Lanes) - zp;
      }
    }
  }
};

// The block's channels requantized out of the lanes of acc [plane_out] (QConvOutput's y; every
// shift <= -2): each pixel's lanes at once into `stage` [plane_out][kLanes], which
// DeinterleaveChannels writes to the channels' planes of y.
struct DepthwiseRequantOut {
  static KILN_AI void Run(const Lanes* acc, int64_t plane_out, int lanes, const QConvOutput* o,
                          int64_t c0, uint8_t* stage) {
    Wide mult = {};
    Lanes rshift = {};
    for (int l = 0; l < lanes; ++l) {
      mult[l] = o->mult[c0 + l];
      rshift[l] = -o->shift[c0 + l] - 2;
    }
    for (int64_t i = 0; i < plane_out; ++i) {
      const Bytes b =
          __builtin_convertvector(RequantLanes(acc[i], mult, rshift, o->zp, o->lo, o->hi), Bytes);
      std::memcpy(stage + i * kLanes, &b, kLanes);
    }
  }
};

// The block's channels' results out of the lanes of acc [plane_out]: channel c0 + l's sums in
// order (in `sums`, scratch for one plane), stored or requantized.
struct DepthwiseOut {
  static KILN_AI void Run(const Lanes* acc, int64_t plane_out, int lanes, const QConvOutput* o,
                          int64_t image, int64_t c0, int64_t channels, int32_t* sums) {
    for (int l = 0; l < lanes; ++l) {
      for (int64_t i = 0; i < plane_out; ++i) sums[i] = acc[i][l];
      Emit(*o, (image * channels + c0 + l) * plane_out, c0 + l, sums, plane_out);
    }
  }
};

// Between sixteen channels' planes and pixels of sixteen bytes, a channel a byte: by StridedCopy's
// byte tiles for whole blocks, where a byte loop cost more than the convolution.

// stage [plane][kLanes]: byte l of pixel i is x[l * plane + i], for l < lanes; `fill` past them.
void InterleaveChannels(const uint8_t* x, int64_t plane, int lanes, uint8_t fill, uint8_t* stage) {
  if (lanes == kLanes) {
    moves::StridedCopy({plane, kLanes}, {1, plane}, 0, x, stage, 1, 1);
    return;
  }
  for (int64_t i = 0; i < plane; ++i)
    for (int l = 0; l < kLanes; ++l) stage[i * kLanes + l] = l < lanes ? x[l * plane + i] : fill;
}

// The converse: y[l * plane + i] = byte l of stage's pixel i, for l < lanes.
void DeinterleaveChannels(const uint8_t* stage, int64_t plane, int lanes, uint8_t* y) {
  if (lanes == kLanes) {
    moves::StridedCopy({kLanes, plane}, {1, kLanes}, 0, stage, y, 1, 1);
    return;
  }
  for (int64_t i = 0; i < plane; ++i)
    for (int l = 0; l < lanes; ++l) y[l * plane + i] = stage[i * kLanes + l];
}

// AVX-512 with the byte, word, 64-bit and 256-bit forms the kernels' loops compile to.
bool HasAvx512Full() {
#if KILN_X86_DISPATCH
  static const bool has = IsaSupported(Isa::kAvx512) && __builtin_cpu_supports("avx512bw") &&
                          __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq");
  return has;
#else
  return false;
#endif
}

// Runs Body::Run compiled for AVX-512 or AVX2 (isa kAvx2: AVX2 even where AVX-512 is there).
template <class Body, class... A>
void RunBest(Isa isa, A... a) {
#if KILN_X86_DISPATCH
  if (isa != Isa::kAvx2 && HasAvx512Full()) {
    [](A... b) __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq"))) { Body::Run(b...); }
    (a...);
    return;
  }
  if (IsaSupported(Isa::kAvx2)) {
    [](A... b) __attribute__((target("avx2"))) { Body::Run(b...); }
    (a...);
    return;
  }
#endif
  Body::Run(a...);
}

void Depthwise(const ConvGeom& g, const ConvPlane& q, const Tensor& x, int32_t x_zp,
               const Tensor& w, const Tensor* bias, int threads, Isa isa, const QConvOutput& out) {
  const bool x_signed = x.dtype() == DType::kInt8;
  const auto* xb = static_cast<const uint8_t*>(x.raw());
  const auto* wb = w.data<int8_t>();
  const int64_t taps = q.kh * q.kw, plane_in = q.h * q.w, plane_out = q.oh * q.ow;
  // The padded plane: the rows and columns the windows cover.
  const int64_t rows = (q.oh - 1) * q.sh + (q.kh - 1) * q.dh + 1;
  const int64_t cols = (q.ow - 1) * q.sw + (q.kw - 1) * q.dw + 1;
  const int64_t blocks = (g.c + kLanes - 1) / kLanes;
  // The plane's columns [c_lo, c_hi) hold the image's (the rest is padding).
  const int64_t c_lo = std::min(q.pw, cols), c_hi = std::max(c_lo, std::min(cols, q.pw + q.w));
  const int t = static_cast<int>(std::min<int64_t>(threads, g.n * g.c * plane_out / 4096 + 1));
  std::vector<int64_t> offsets(taps);  // of each tap from its window's first, in the plane
  for (int64_t i = 0; i < taps; ++i) offsets[i] = i / q.kw * q.dh * cols + i % q.kw * q.dw;
  ParallelFor(t, g.n * blocks, [&](int64_t j0, int64_t j1) {
    const int64_t stage_bytes = std::max(plane_in, plane_out) * kLanes;
    auto* plane = static_cast<Lanes*>(ScratchBytes(
        ScratchSlot::kQuantPlane,
        static_cast<size_t>(rows * cols + taps + 1 + 2 * plane_out) * 64 + stage_bytes));
    Lanes *wv = plane + rows * cols, *bv = wv + taps, *acc = bv + 1;
    auto* stage = reinterpret_cast<uint8_t*>(acc + 2 * plane_out);
    for (int64_t j = j0; j < j1; ++j) {
      const int64_t n = j / blocks, c0 = j % blocks * kLanes;
      const int lanes = static_cast<int>(std::min<int64_t>(kLanes, g.c - c0));
      // The padding: the image's pixels are all written below, every lane.
      for (int64_t r = 0; r < rows; ++r) {
        Lanes* row = plane + r * cols;
        if (r < q.ph || r >= q.ph + q.h) {
          std::memset(static_cast<void*>(row), 0, static_cast<size_t>(cols) * 64);
          continue;
        }
        std::memset(static_cast<void*>(row), 0, static_cast<size_t>(c_lo) * 64);
        std::memset(static_cast<void*>(row + c_hi), 0, static_cast<size_t>(cols - c_hi) * 64);
      }
      std::memset(static_cast<void*>(wv), 0, static_cast<size_t>(taps + 1) * 64);
      // The block's bytes, a channel a byte of each pixel; past the last channel the zero point,
      // which widens to 0.
      InterleaveChannels(xb + (n * g.c + c0) * plane_in, plane_in, lanes,
                         static_cast<uint8_t>(x_zp), stage);
      if (x_signed)
        RunBest<WidenBody<int8_t>>(isa, static_cast<const uint8_t*>(stage), &q, rows, cols, c_lo,
                                   c_hi, x_zp, plane);
      else
        RunBest<WidenBody<uint8_t>>(isa, static_cast<const uint8_t*>(stage), &q, rows, cols, c_lo,
                                    c_hi, x_zp, plane);
      for (int l = 0; l < lanes; ++l) {
        const int64_t ch = c0 + l;
        for (int64_t i = 0; i < taps; ++i) wv[i][l] = wb[ch * taps + i];
        bv[0][l] = bias ? bias->data<int32_t>()[ch] : 0;
      }
      RunBest<DepthwiseBody>(isa, static_cast<const Lanes*>(plane), cols,
                             static_cast<const Lanes*>(wv), static_cast<const Lanes*>(bv), &q,
                             static_cast<const int64_t*>(offsets.data()), acc);
      if (out.y) {
        RunBest<DepthwiseRequantOut>(isa, static_cast<const Lanes*>(acc), plane_out, lanes, &out,
                                     c0, stage);
        DeinterleaveChannels(stage, plane_out, lanes, out.y + (n * g.c + c0) * plane_out);
      } else
        RunBest<DepthwiseOut>(isa, static_cast<const Lanes*>(acc), plane_out, lanes, &out, n, c0,
                              g.c, reinterpret_cast<int32_t*>(acc + plane_out));
    }
  });
}

// ---- The packed product of the other convolutions

// Depth is padded to a multiple of four (VNNI: four 8-bit values a lane) or two (AVX2: two int16
// values a lane); pixels to a multiple of 16 (VNNI) or 8 (AVX2), the lanes of a vector.
enum class Path { kVnni, kAvx2 };

struct QConvDirectState : NodeState {
  const void* w_from = nullptr;  // the constant weights held rearranged (null: none)
  Dims w_dims;
  Path path = Path::kVnni;
  int64_t k_pad = 0;           // the padded depth
  std::vector<int8_t> w8;      // VNNI: [M, k_pad] int8
  std::vector<int16_t> w16;    // AVX2: [M, k_pad] int16
  std::vector<int32_t> w_sum;  // per output channel: the sum of its weights
  std::string Kernel() const override {
    return path == Path::kVnni ? "kiln int8 vnni" : "kiln int8 avx2";
  }
};

bool HasVnni() {
#if KILN_X86_DISPATCH
  static const bool has = HasAvx512Full() && __builtin_cpu_supports("avx512vnni");
  return has;
#else
  return false;
#endif
}

#if KILN_X86_DISPATCH
// Output channels [m, m + MB) over pixels [0, pixels), their first element at `at`: bias plus the
// products of w rows (k_pad int8 each) with b [k_pad / 4][p_pad][4] (unsigned bytes).
template <int MB>
__attribute__((target("avx512f,avx512bw,avx512vnni"))) void VnniRows(
    const int8_t* w, int64_t k_pad, const uint8_t* b, int64_t pixels, int64_t p_pad,
    const int32_t* bias, const QConvOutput& o, int64_t at, int64_t m) {
  for (int64_t p = 0; p < p_pad; p += 32) {
    const bool two = p + 16 < p_pad;
    __m512i acc[MB][2];
    for (int i = 0; i < MB; ++i) acc[i][0] = acc[i][1] = _mm512_set1_epi32(bias[i]);
    for (int64_t kb = 0; kb < k_pad / 4; ++kb) {
      const uint8_t* from = b + (kb * p_pad + p) * 4;
      const __m512i b0 = _mm512_loadu_si512(from);
      const __m512i b1 = two ? _mm512_loadu_si512(from + 64) : b0;
      for (int i = 0; i < MB; ++i) {
        int32_t word;
        std::memcpy(&word, w + i * k_pad + kb * 4, 4);
        const __m512i wv = _mm512_set1_epi32(word);
        acc[i][0] = _mm512_dpbusd_epi32(acc[i][0], b0, wv);
        if (two) acc[i][1] = _mm512_dpbusd_epi32(acc[i][1], b1, wv);
      }
    }
    alignas(64) int32_t sums[32];
    const int64_t count = std::min<int64_t>(two ? 32 : 16, pixels - p);
    for (int i = 0; i < MB && count > 0; ++i) {
      _mm512_store_si512(sums, acc[i][0]);
      _mm512_store_si512(sums + 16, acc[i][1]);
      Emit(o, at + i * pixels + p, m + i, sums, count);
    }
  }
}

// The same on AVX2: w rows of k_pad int16, b [k_pad / 2][p_pad][2] int16.
template <int MB>
__attribute__((target("avx2"))) void Avx2Rows(const int16_t* w, int64_t k_pad, const int16_t* b,
                                              int64_t pixels, int64_t p_pad, const int32_t* bias,
                                              const QConvOutput& o, int64_t at, int64_t m) {
  for (int64_t p = 0; p < p_pad; p += 16) {
    const bool two = p + 8 < p_pad;
    __m256i acc[MB][2];
    for (int i = 0; i < MB; ++i) acc[i][0] = acc[i][1] = _mm256_set1_epi32(bias[i]);
    for (int64_t kb = 0; kb < k_pad / 2; ++kb) {
      const int16_t* from = b + (kb * p_pad + p) * 2;
      const __m256i b0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(from));
      const __m256i b1 = two ? _mm256_loadu_si256(reinterpret_cast<const __m256i*>(from + 16)) : b0;
      for (int i = 0; i < MB; ++i) {
        int32_t pair;
        std::memcpy(&pair, w + i * k_pad + kb * 2, 4);
        const __m256i wv = _mm256_set1_epi32(pair);
        acc[i][0] = _mm256_add_epi32(acc[i][0], _mm256_madd_epi16(b0, wv));
        if (two) acc[i][1] = _mm256_add_epi32(acc[i][1], _mm256_madd_epi16(b1, wv));
      }
    }
    alignas(32) int32_t sums[16];
    const int64_t count = std::min<int64_t>(two ? 16 : 8, pixels - p);
    for (int i = 0; i < MB && count > 0; ++i) {
      _mm256_store_si256(reinterpret_cast<__m256i*>(sums), acc[i][0]);
      _mm256_store_si256(reinterpret_cast<__m256i*>(sums + 8), acc[i][1]);
      Emit(o, at + i * pixels + p, m + i, sums, count);
    }
  }
}
#endif

// Calls rows.template operator()<MB>(m) over [m0, m1) in blocks of four rows and a last of fewer.
template <class F>
void InBlocks(int64_t m0, int64_t m1, F&& rows) {
  int64_t m = m0;
  for (; m + 4 <= m1; m += 4) rows.template operator()<4>(m);
  switch (m1 - m) {
    case 3:
      return rows.template operator()<3>(m);
    case 2:
      return rows.template operator()<2>(m);
    case 1:
      return rows.template operator()<1>(m);
    default:
      return;
  }
}

// The weights rearranged into st (unless it holds these constant weights already).
void LayOutWeights(QConvDirectState* st, const Tensor& w, bool w_constant, Path path, int64_t m,
                   int64_t depth) {
  if (w_constant && st->w_from == w.raw() && st->w_dims == w.dims() && st->path == path) return;
  st->path = path;
  st->k_pad = st->path == Path::kVnni ? (depth + 3) / 4 * 4 : (depth + 1) / 2 * 2;
  const int8_t* wv = w.data<int8_t>();
  st->w8.assign(st->path == Path::kVnni ? m * st->k_pad : 0, 0);
  st->w16.assign(st->path == Path::kAvx2 ? m * st->k_pad : 0, 0);
  st->w_sum.assign(m, 0);
  for (int64_t j = 0; j < m; ++j)
    for (int64_t k = 0; k < depth; ++k) {
      const int8_t v = wv[j * depth + k];
      if (st->path == Path::kVnni)
        st->w8[j * st->k_pad + k] = v;
      else
        st->w16[j * st->k_pad + k] = v;
      st->w_sum[j] += v;
    }
  st->w_from = w_constant ? w.raw() : nullptr;
  st->w_dims = w.dims();
}

// d[p] = the four rows' bytes at p, one per byte of a lane, xor flip (VNNI's packing).
struct InterleaveBytes {
  static KILN_AI void Run(const uint8_t* r0, const uint8_t* r1, const uint8_t* r2,
                          const uint8_t* r3, int64_t n, uint32_t flip, uint32_t* d) {
    for (int64_t p = 0; p < n; ++p)
      d[p] = (r0[p] | r1[p] << 8 | r2[p] << 16 | static_cast<uint32_t>(r3[p]) << 24) ^ flip;
  }
};

// d[p] = the two rows' values at p less zp, as the int16 halves of a lane (AVX2's packing).
template <class T>
struct InterleavePairs {
  static KILN_AI void Run(const T* r0, const T* r1, int64_t n, int32_t zp, uint32_t* d) {
    for (int64_t p = 0; p < n; ++p)
      d[p] = static_cast<uint16_t>(r0[p] - zp) |
             static_cast<uint32_t>(static_cast<uint16_t>(r1[p] - zp)) << 16;
  }
};

// Fills row[p] for every output pixel p with x's stored byte under window position k (channel c
// of the image's group, tap t) or, in the padding, the stored zero point.
void WindowRow(const ConvPlane& q, const uint8_t* channel, int64_t t, uint8_t pad, uint8_t* row) {
  const int64_t kh = t / q.kw, kw = t % q.kw;
  // Output columns [lo, hi) read inside a row: ix = ox * sw + off.
  const int64_t off = kw * q.dw - q.pw;
  const int64_t lo = std::min(q.ow, off >= 0 ? 0 : (-off + q.sw - 1) / q.sw);
  const int64_t hi = std::max(lo, std::min(q.ow, q.w - off <= 0 ? 0 : (q.w - off - 1) / q.sw + 1));
  for (int64_t oy = 0; oy < q.oh; ++oy) {
    const int64_t iy = oy * q.sh - q.ph + kh * q.dh;
    uint8_t* d = row + oy * q.ow;
    if (iy < 0 || iy >= q.h) {
      std::fill_n(d, q.ow, pad);
      continue;
    }
    const uint8_t* src = channel + iy * q.w + off;
    std::fill(d, d + lo, pad);
    if (q.sw == 1) {
      std::copy(src + lo, src + hi, d + lo);
    } else {
      for (int64_t ox = lo; ox < hi; ++ox) d[ox] = src[ox * q.sw];
    }
    std::fill(d + hi, d + q.ow, pad);
  }
}

// The packed windows of one image's group: VNNI's [k_pad / 4][p_pad][4] bytes, x's stored bytes
// with int8 shifted to unsigned (flip 0x80); AVX2's [k_pad / 2][p_pad][2] int16 of x - x_zp.
// rows: scratch for four rows of `pixels` bytes.
void PackWindows(const QConvDirectState& st, const ConvPlane& q, const uint8_t* image, int64_t c0,
                 int64_t cg, bool x_signed, int32_t x_zp, int64_t p_pad, Isa isa, uint8_t* rows,
                 void* packed) {
  const int64_t taps = q.kh * q.kw, depth = cg * taps, pixels = q.oh * q.ow;
  const auto zp_byte = static_cast<uint8_t>(x_zp);
  const int lanes = st.path == Path::kVnni ? 4 : 2;
  const bool one_pixel =
      taps == 1 && q.sh == 1 && q.sw == 1 && q.ph == 0 && q.pw == 0 && q.oh == q.h && q.ow == q.w;
  for (int64_t k0 = 0; k0 < st.k_pad; k0 += lanes) {
    const uint8_t* r[4];
    for (int i = 0; i < lanes; ++i) {
      const int64_t k = k0 + i;
      if (k >= depth) {  // times zero weights: any value
        std::fill_n(rows + i * pixels, pixels, zp_byte);
        r[i] = rows + i * pixels;
      } else if (one_pixel) {
        r[i] = image + (c0 + k) * q.h * q.w;
      } else {
        WindowRow(q, image + (c0 + k / taps) * q.h * q.w, k % taps, zp_byte, rows + i * pixels);
        r[i] = rows + i * pixels;
      }
    }
    auto* d = static_cast<uint32_t*>(packed) + k0 / lanes * p_pad;
    if (st.path == Path::kVnni)
      RunBest<InterleaveBytes>(isa, r[0], r[1], r[2], r[3], pixels, x_signed ? 0x80808080u : 0u, d);
    else if (x_signed)
      RunBest<InterleavePairs<int8_t>>(isa, reinterpret_cast<const int8_t*>(r[0]),
                                       reinterpret_cast<const int8_t*>(r[1]), pixels, x_zp, d);
    else
      RunBest<InterleavePairs<uint8_t>>(isa, r[0], r[1], pixels, x_zp, d);
    std::fill(d + pixels, d + p_pad, 0u);
  }
}

// ---- Matmuls of a few rows

// Column blocks: 16 columns (VNNI) or 8 (AVX2) a vector.
struct QMatMulDirectState : NodeState {
  const void* w_from = nullptr;  // the constant weights held rearranged (null: none)
  Dims w_dims;
  Path path = Path::kVnni;
  int64_t k_pad = 0;           // the padded depth
  std::vector<int8_t> w8;      // VNNI: [N / 16][k_pad / 4][16][4] int8
  std::vector<int16_t> w16;    // AVX2: [N / 8][k_pad / 2][8][2] int16
  std::vector<int32_t> w_sum;  // per column: the sum of its weights
  std::string Kernel() const override {
    return path == Path::kVnni ? "kiln int8 gemv vnni" : "kiln int8 gemv avx2";
  }
};

// w [k, n] into st's column blocks (unless it holds these constant weights already).
void LayOutColumns(QMatMulDirectState* st, const Tensor& w, bool w_constant, Path path) {
  if (w_constant && st->w_from == w.raw() && st->w_dims == w.dims() && st->path == path) return;
  const int64_t k = w.dim(0), n = w.dim(1);
  const int64_t lanes = path == Path::kVnni ? 16 : 8, group = path == Path::kVnni ? 4 : 2;
  st->path = path;
  st->k_pad = (k + group - 1) / group * group;
  const int64_t blocks = (n + lanes - 1) / lanes, size = blocks * st->k_pad * lanes;
  st->w8.assign(path == Path::kVnni ? size : 0, 0);
  st->w16.assign(path == Path::kAvx2 ? size : 0, 0);
  st->w_sum.assign(n, 0);
  const int8_t* wv = w.data<int8_t>();
  for (int64_t p = 0; p < k; ++p)
    for (int64_t j = 0; j < n; ++j) {
      const int8_t v = wv[p * n + j];
      // Block j / lanes, depth group p / group, lane j % lanes, position p % group.
      const int64_t at =
          ((j / lanes * (st->k_pad / group) + p / group) * lanes + j % lanes) * group + p % group;
      if (path == Path::kVnni)
        st->w8[at] = v;
      else
        st->w16[at] = v;
      st->w_sum[j] += v;
    }
  st->w_from = w_constant ? w.raw() : nullptr;
  st->w_dims = w.dims();
}

#if KILN_X86_DISPATCH
// sums[j] = bias[j] + x_u . column j over column blocks [j0, j0 + B) (x_u: kb_n * 4 unsigned
// bytes, four a lane; bias and sums padded to whole blocks of 16).
template <int B>
__attribute__((target("avx512f,avx512bw,avx512vnni"))) void VnniGemvBlocks(const uint8_t* x,
                                                                           const int8_t* w,
                                                                           int64_t kb_n, int64_t j0,
                                                                           const int32_t* bias,
                                                                           int32_t* sums) {
  __m512i acc[B];
  for (int i = 0; i < B; ++i) acc[i] = _mm512_loadu_si512(bias + (j0 + i) * 16);
  for (int64_t kb = 0; kb < kb_n; ++kb) {
    int32_t word;
    std::memcpy(&word, x + kb * 4, 4);
    const __m512i xv = _mm512_set1_epi32(word);
    for (int i = 0; i < B; ++i)
      acc[i] = _mm512_dpbusd_epi32(acc[i], xv, _mm512_loadu_si512(w + ((j0 + i) * kb_n + kb) * 64));
  }
  for (int i = 0; i < B; ++i) _mm512_storeu_si512(sums + (j0 + i) * 16, acc[i]);
}

// The same on AVX2: x as kb_n * 2 int16 (x - x_zp), two a lane; blocks of 8 columns.
template <int B>
__attribute__((target("avx2"))) void Avx2GemvBlocks(const int16_t* x, const int16_t* w,
                                                    int64_t kb_n, int64_t j0, const int32_t* bias,
                                                    int32_t* sums) {
  __m256i acc[B];
  for (int i = 0; i < B; ++i)
    acc[i] = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(bias + (j0 + i) * 8));
  for (int64_t kb = 0; kb < kb_n; ++kb) {
    int32_t pair;
    std::memcpy(&pair, x + kb * 2, 4);
    const __m256i xv = _mm256_set1_epi32(pair);
    for (int i = 0; i < B; ++i)
      acc[i] = _mm256_add_epi32(
          acc[i],
          _mm256_madd_epi16(
              _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w + ((j0 + i) * kb_n + kb) * 16)),
              xv));
  }
  for (int i = 0; i < B; ++i)
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(sums + (j0 + i) * 8), acc[i]);
}

// Every column block, four at a time, then one.
template <class F>
void ColumnBlocks(int64_t blocks, F&& run) {
  int64_t j = 0;
  for (; j + 4 <= blocks; j += 4) run.template operator()<4>(j);
  for (; j < blocks; ++j) run.template operator()<1>(j);
}
#endif

}  // namespace

bool QConvDirect(const ConvGeom& g, const Tensor& x, int32_t x_zp, const Tensor& w, bool w_constant,
                 const Tensor* bias, int threads, std::unique_ptr<NodeState>* state,
                 const QConvOutput& out, Isa isa) {
  if (ReferenceKernels() || g.in.empty() || g.in.size() > 2 || w.dtype() != DType::kInt8 ||
      (bias && bias->dtype() != DType::kInt32) || g.n * g.m == 0)
    return false;
  if (out.y && !std::all_of(out.shift, out.shift + g.m, [](int32_t s) { return s <= -2; }))
    return false;
  const ConvPlane q = PlaneOf(g);
  const int64_t cg = g.c / g.group, mg = g.m / g.group, pixels = q.oh * q.ow;
  if (pixels == 0) return false;
  if (cg == 1 && mg == 1) {
#if KILN_X86_DISPATCH
    if (!IsaSupported(Isa::kAvx2)) return false;
    Depthwise(g, q, x, x_zp, w, bias, threads, isa, out);
    return true;
#else
    return false;
#endif
  }
  const int64_t depth = cg * q.kh * q.kw;
  const bool vnni_path = isa != Isa::kAvx2 && HasVnni();
  if (!vnni_path && !IsaSupported(Isa::kAvx2)) return false;
  auto* st = dynamic_cast<QConvDirectState*>(state->get());
  if (!st) {
    auto fresh = std::make_unique<QConvDirectState>();
    st = fresh.get();
    *state = std::move(fresh);
  }
  LayOutWeights(st, w, w_constant, vnni_path ? Path::kVnni : Path::kAvx2, g.m, depth);
  const bool vnni = st->path == Path::kVnni, x_signed = x.dtype() == DType::kInt8;
  const int64_t p_pad = (pixels + 15) / 16 * 16;
  // VNNI multiplies x's bytes as unsigned: x + 128 for int8, whose zero point moves alike; the
  // bias takes that zero point's products, which the padding's bytes cancel.
  const int64_t zp_unsigned = x_zp + (x_signed ? 128 : 0);
  std::vector<int32_t> folded(g.m);
  for (int64_t j = 0; j < g.m; ++j)
    folded[j] = static_cast<int32_t>((bias ? bias->data<int32_t>()[j] : 0) -
                                     (vnni ? zp_unsigned * st->w_sum[j] : 0));
  auto* rows = Scratch<uint8_t>(ScratchSlot::kConvColumns, static_cast<size_t>(4 * pixels));
  void* packed = Scratch<uint32_t>(ScratchSlot::kQuantPacked,
                                   static_cast<size_t>(st->k_pad / (vnni ? 4 : 2) * p_pad));
  const auto* xb = static_cast<const uint8_t*>(x.raw());
  const int t = static_cast<int>(std::min<int64_t>(threads, mg * pixels * depth / (1 << 18) + 1));
  for (int64_t n = 0; n < g.n; ++n)
    for (int64_t gr = 0; gr < g.group; ++gr) {
      PackWindows(*st, q, xb + n * g.c * q.h * q.w, gr * cg, cg, x_signed, x_zp, p_pad, isa, rows,
                  packed);
      ParallelFor(t, (mg + 3) / 4, [&](int64_t b0, int64_t b1) {
        InBlocks(gr * mg + b0 * 4, gr * mg + std::min(mg, b1 * 4), [&]<int MB>(int64_t m) {
#if KILN_X86_DISPATCH
          const int64_t at = (n * g.m + m) * pixels;
          if (vnni)
            VnniRows<MB>(st->w8.data() + m * st->k_pad, st->k_pad,
                         static_cast<const uint8_t*>(packed), pixels, p_pad, folded.data() + m, out,
                         at, m);
          else
            Avx2Rows<MB>(st->w16.data() + m * st->k_pad, st->k_pad,
                         static_cast<const int16_t*>(packed), pixels, p_pad, folded.data() + m, out,
                         at, m);
#endif
        });
      });
    }
  return true;
}

bool QMatMulDirect(const Tensor& x, int32_t x_zp, const Tensor& w, bool w_constant,
                   std::unique_ptr<NodeState>* state, int32_t* sums, Isa isa) {
#if KILN_X86_DISPATCH
  if (ReferenceKernels() || w.dtype() != DType::kInt8 || w.rank() != 2 || x.rank() < 1)
    return false;
  const int64_t k = w.dim(0), n = w.dim(1);
  if (k == 0 || n == 0 || x.dims().back() != k) return false;
  const int64_t rows = x.size() / k;
  if (rows == 0 || rows > kMatMulDirectRows) return false;
  const bool vnni = isa != Isa::kAvx2 && HasVnni();
  if (!vnni && !IsaSupported(Isa::kAvx2)) return false;
  auto* st = dynamic_cast<QMatMulDirectState*>(state->get());
  if (!st) {
    auto fresh = std::make_unique<QMatMulDirectState>();
    st = fresh.get();
    *state = std::move(fresh);
  }
  LayOutColumns(st, w, w_constant, vnni ? Path::kVnni : Path::kAvx2);
  const int64_t lanes = vnni ? 16 : 8, blocks = (n + lanes - 1) / lanes;
  const bool x_signed = x.dtype() == DType::kInt8;
  // VNNI multiplies x's bytes as unsigned (x + 128 for int8): the bias takes the zero point's
  // products; AVX2 multiplies x - x_zp.
  const int64_t zp_unsigned = x_zp + (x_signed ? 128 : 0);
  std::vector<int32_t> bias(blocks * lanes, 0), row_sums(blocks * lanes);
  if (vnni)
    for (int64_t j = 0; j < n; ++j) bias[j] = static_cast<int32_t>(-zp_unsigned * st->w_sum[j]);
  std::vector<uint8_t> xu(vnni ? st->k_pad : 0, 0);
  std::vector<int16_t> x16(vnni ? 0 : st->k_pad, 0);
  const auto* xb = static_cast<const uint8_t*>(x.raw());
  for (int64_t r = 0; r < rows; ++r) {
    const uint8_t* row = xb + r * k;
    if (vnni) {
      for (int64_t p = 0; p < k; ++p) xu[p] = static_cast<uint8_t>(row[p] ^ (x_signed ? 0x80 : 0));
      ColumnBlocks(blocks, [&]<int B>(int64_t j) {
        VnniGemvBlocks<B>(xu.data(), st->w8.data(), st->k_pad / 4, j, bias.data(), row_sums.data());
      });
    } else {
      for (int64_t p = 0; p < k; ++p)
        x16[p] = static_cast<int16_t>(XValue(row[p], x_signed) - x_zp);
      ColumnBlocks(blocks, [&]<int B>(int64_t j) {
        Avx2GemvBlocks<B>(x16.data(), st->w16.data(), st->k_pad / 2, j, bias.data(),
                          row_sums.data());
      });
    }
    std::memcpy(sums + r * n, row_sums.data(), static_cast<size_t>(n) * 4);
  }
  return true;
#else
  return false;
#endif
}

}  // namespace kiln::ops
