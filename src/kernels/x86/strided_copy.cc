// moves::StridedCopy (ops/shape_ops_util.h): one loop for every op that only moves elements,
// split over threads; a transpose inside it goes by tiles, 8 x 8 floats in AVX2 registers or
// 16 x 16 bytes in SSE2 ones, and one of few channels between planes and pixels by AVX-512
// permutes. The executor's layout changes (ops/channels_last.h) are such transposes too.
#include "kernels/x86/strided_copy.h"

#include <algorithm>
#include <cstring>
#include <vector>

#include "kernels/x86/cpu_isa.h"
#include "kernels/x86/thread_pool.h"

#if KILN_X86_DISPATCH
#include <immintrin.h>
#endif

namespace kiln::ops::moves {
namespace {

// Below this many bytes a copy runs on the calling thread: waking the pool costs more.
constexpr int64_t kBytesPerThread = 256 << 10;

int ThreadsFor(int threads, int64_t bytes, int64_t jobs) {
  return static_cast<int>(
      std::max<int64_t>(1, std::min<int64_t>({threads, jobs, bytes / kBytesPerThread + 1})));
}

// The position of the first element of outer index `b` (row-major over `dims`) in a layout with
// `strides`.
int64_t OffsetOf(int64_t b, const Dims& dims, const Dims& strides) {
  int64_t off = 0;
  for (int k = static_cast<int>(dims.size()) - 1; k >= 0; --k) {
    off += (b % dims[k]) * strides[k];
    b /= dims[k];
  }
  return off;
}

constexpr int64_t kTile = 16;

// o[i * out_row + j] = in[i + j * in_col] for i < ni, j < nj (one tile of a transpose).
template <class U>
void TileScalar(const U* in, int64_t in_col, U* o, int64_t out_row, int64_t ni, int64_t nj) {
  for (int64_t i = 0; i < ni; ++i)
    for (int64_t j = 0; j < nj; ++j) o[i * out_row + j] = in[i + j * in_col];
}

#if KILN_X86_DISPATCH
// The same for 16 x 16 four-byte elements, as four 8 x 8 register transposes.
__attribute__((target("avx2"))) void Tile16x16Avx2(const uint32_t* in, int64_t in_col, uint32_t* o,
                                                   int64_t out_row) {
  for (int64_t bi = 0; bi < 16; bi += 8)
    for (int64_t bj = 0; bj < 16; bj += 8) {
      __m256 r[8], t[8];
      for (int j = 0; j < 8; ++j)
        r[j] = _mm256_loadu_ps(reinterpret_cast<const float*>(in + bi + (bj + j) * in_col));
      for (int j = 0; j < 8; j += 2) {
        t[j] = _mm256_unpacklo_ps(r[j], r[j + 1]);
        t[j + 1] = _mm256_unpackhi_ps(r[j], r[j + 1]);
      }
      for (int j = 0; j < 8; j += 4) {
        r[j] = _mm256_shuffle_ps(t[j], t[j + 2], 0x44);
        r[j + 1] = _mm256_shuffle_ps(t[j], t[j + 2], 0xEE);
        r[j + 2] = _mm256_shuffle_ps(t[j + 1], t[j + 3], 0x44);
        r[j + 3] = _mm256_shuffle_ps(t[j + 1], t[j + 3], 0xEE);
      }
      // r[q]: elements q (low half) and q + 4 (high half) of loaded rows 0-3; r[4 + q]: of rows
      // 4-7. Element q of every loaded row is output row q.
      for (int q = 0; q < 4; ++q) {
        const __m256 lo = _mm256_permute2f128_ps(r[q], r[4 + q], 0x20);
        const __m256 hi = _mm256_permute2f128_ps(r[q], r[4 + q], 0x31);
        _mm256_storeu_ps(reinterpret_cast<float*>(o + (bi + q) * out_row + bj), lo);
        _mm256_storeu_ps(reinterpret_cast<float*>(o + (bi + 4 + q) * out_row + bj), hi);
      }
    }
}

// The same for 16 x 16 bytes in SSE2 registers (every x86-64 has them): four rounds of one
// perfect shuffle, each rotating an element's (row, column) bits by one.
void Tile16x16Bytes(const uint8_t* in, int64_t in_col, uint8_t* o, int64_t out_row) {
  __m128i r[16], t[16];
  for (int j = 0; j < 16; ++j)
    r[j] = _mm_loadu_si128(reinterpret_cast<const __m128i*>(in + j * in_col));
  for (int round = 0; round < 4; ++round) {
    for (int i = 0; i < 8; ++i) {
      t[2 * i] = _mm_unpacklo_epi8(r[i], r[i + 8]);
      t[2 * i + 1] = _mm_unpackhi_epi8(r[i], r[i + 8]);
    }
    std::memcpy(static_cast<void*>(r), t, sizeof(t));
  }
  for (int i = 0; i < 16; ++i) _mm_storeu_si128(reinterpret_cast<__m128i*>(o + i * out_row), r[i]);
}
#endif

// Few channels between planes and pixels (an RGB image to channels-last and back): C <= 8
// four-byte channels of 16 pixels at a time in AVX-512 registers, each output vector gathered
// from the C input vectors by a chain of C - 1 two-source permutes.
constexpr int kMaxInterleave = 8;

// Permute indices: [C][output vector][step][lane]. Interleaving, output vector k holds output
// elements 16k.. (pixel p / C, channel p % C); deinterleaving, vector k is channel k's 16 pixels.
// Step 0 takes from inputs 0 and 1; step s > 0 from the chain so far and input s + 1.
struct InterleaveTables {
  int32_t idx[2][kMaxInterleave + 1][kMaxInterleave][kMaxInterleave - 1][16];
  InterleaveTables() {
    for (int deinterleave = 0; deinterleave < 2; ++deinterleave)
      for (int C = 2; C <= kMaxInterleave; ++C)
        for (int k = 0; k < C; ++k)
          for (int m = 0; m < 16; ++m) {
            // The input vector and lane output lane m reads.
            const int p = deinterleave ? m * C + k : 16 * k + m;
            const int from = deinterleave ? p / 16 : p % C, lane = deinterleave ? p % 16 : p / C;
            for (int step = 0; step < C - 1; ++step) {
              int32_t& e = idx[deinterleave][C][k][step][m];
              if (step == 0)
                e = from == 1 ? 16 + lane : lane;
              else
                e = from == step + 1 ? 16 + lane : m;
            }
          }
  }
};

const InterleaveTables& Tables() {
  static const InterleaveTables kTables;
  return kTables;
}

#if KILN_X86_DISPATCH
// Pixels [0, n) of C planes (plane c at in + c * plane) into out[pixel * C + c], or (deinterleave)
// back; n a multiple of 16.
__attribute__((target("avx512f"))) void Interleave16(const uint32_t* in, uint32_t* out, int64_t n,
                                                     int C, int64_t plane, bool deinterleave) {
  const auto& t = Tables().idx[deinterleave][C];
  __m512i idx[kMaxInterleave][kMaxInterleave - 1];
  for (int k = 0; k < C; ++k)
    for (int step = 0; step < C - 1; ++step) idx[k][step] = _mm512_loadu_si512(t[k][step]);
  __m512 v[kMaxInterleave];
  for (int64_t i = 0; i < n; i += 16) {
    for (int c = 0; c < C; ++c)
      v[c] = _mm512_loadu_ps(deinterleave ? in + i * C + 16 * c : in + c * plane + i);
    for (int k = 0; k < C; ++k) {
      __m512 acc = _mm512_permutex2var_ps(v[0], idx[k][0], v[1]);
      for (int step = 1; step < C - 1; ++step)
        acc = _mm512_permutex2var_ps(acc, idx[k][step], v[step + 1]);
      _mm512_storeu_ps(deinterleave ? out + k * plane + i : out + i * C + 16 * k, acc);
    }
  }
}
#endif

// The same for any n and element size, the tail and other CPUs scalar.
template <class U>
void Interleave(const U* in, U* out, int64_t n, int C, int64_t plane, bool deinterleave) {
  int64_t done = 0;
#if KILN_X86_DISPATCH
  if constexpr (sizeof(U) == 4) {
    if (IsaSupported(Isa::kAvx512)) {
      done = n / 16 * 16;
      Interleave16(in, out, done, C, plane, deinterleave);
    }
  }
#endif
  for (int64_t i = done; i < n; ++i)
    for (int c = 0; c < C; ++c) {
      if (deinterleave)
        out[c * plane + i] = in[i * C + c];
      else
        out[i * C + c] = in[c * plane + i];
    }
}

}  // namespace

void StridedCopy(const Dims& out, const Dims& strides, int64_t base, const void* src, void* dst,
                 size_t elem_size, int threads) {
  const int64_t total = NumElements(out);
  if (total == 0) return;
  // Drop size-1 axes and merge axes that are contiguous with their inner neighbour, so the
  // inner loop runs long (a plain reshape becomes a single memcpy).
  Dims d, s;
  for (size_t i = 0; i < out.size(); ++i) {
    if (out[i] == 1) continue;
    if (!d.empty() && s.back() == strides[i] * out[i]) {
      d.back() *= out[i];
      s.back() = strides[i];
    } else {
      d.push_back(out[i]);
      s.push_back(strides[i]);
    }
  }
  if (d.empty()) {
    d.push_back(1);
    s.push_back(1);
  }
  const int rank = static_cast<int>(d.size());
  const int64_t inner = d[rank - 1], istride = s[rank - 1];
  const int64_t bytes = total * static_cast<int64_t>(elem_size);
  // A transpose inside: an outer axis t reads consecutive source elements while the inner one
  // strides. Copy it in 16 x 16 tiles of (t, inner), so that each source line brought in serves
  // 16 outputs rather than one (vit_tiny's [197, 3, 64] -> [3, 64, 197]: 3x faster).
  int t = -1;
  for (int k = 0; k + 1 < rank; ++k)
    if (s[k] == 1) t = k;
  // Few channels between planes and pixels, axis t the one before the inner one: planes to pixels
  // (the inner axis holds the C channels, a plane apart in the source; t the pixels) or back (t
  // holds the channels, the inner axis the pixels, C apart in the source).
  const bool to_pixels = istride != 1 && inner >= 2 && inner <= kMaxInterleave;
  const bool to_planes =
      t >= 0 && d[t] >= 2 && d[t] <= kMaxInterleave && istride == d[t] && inner >= 16;
  if (t >= 0 && t == rank - 2 && (to_pixels || to_planes)) {
    const int C = static_cast<int>(to_pixels ? inner : d[t]);
    const int64_t pixels = to_pixels ? d[t] : inner, plane = to_pixels ? istride : inner;
    constexpr int64_t kChunk = 4096;
    const int64_t chunks = (pixels + kChunk - 1) / kChunk, jobs = total / (pixels * C) * chunks;
    const Dims od(d.begin(), d.end() - 2), os(s.begin(), s.end() - 2);
    BySize(elem_size, [&]<class U>() {
      const U* in = static_cast<const U*>(src) + base;
      U* o = static_cast<U*>(dst);
      ParallelFor(ThreadsFor(threads, bytes, jobs), jobs, [&](int64_t j0, int64_t j1) {
        for (int64_t job = j0; job < j1; ++job) {
          const int64_t b = job / chunks, p0 = job % chunks * kChunk;
          const int64_t n = std::min(kChunk, pixels - p0), at = to_pixels ? p0 : p0 * C;
          Interleave(in + OffsetOf(b, od, os) + at, o + b * pixels * C + (to_pixels ? p0 * C : p0),
                     n, C, plane, /*deinterleave=*/!to_pixels);
        }
      });
    });
    return;
  }
  if (istride != 1 && t >= 0 && inner >= 8 && d[t] >= 8) {
    Dims ostride(rank, 1);
    for (int k = rank - 2; k >= 0; --k) ostride[k] = ostride[k + 1] * d[k + 1];
    Dims od, os, oo;  // the other axes: sizes, source and output strides
    for (int k = 0; k + 1 < rank; ++k)
      if (k != t) {
        od.push_back(d[k]);
        os.push_back(s[k]);
        oo.push_back(ostride[k]);
      }
    const int64_t rows = d[t], out_row = ostride[t], row_tiles = (rows + kTile - 1) / kTile;
    const int64_t jobs = total / (rows * inner) * row_tiles;
#if KILN_X86_DISPATCH
    const bool avx2 = elem_size == 4 && IsaSupported(Isa::kAvx2);
#endif
    BySize(elem_size, [&]<class U>() {
      const U* in = static_cast<const U*>(src) + base;
      U* o = static_cast<U*>(dst);
      ParallelFor(ThreadsFor(threads, bytes, jobs), jobs, [&](int64_t j0, int64_t j1) {
        for (int64_t job = j0; job < j1; ++job) {
          const int64_t b = job / row_tiles, i0 = job % row_tiles * kTile;
          const int64_t ni = std::min(kTile, rows - i0);
          const U* from = in + OffsetOf(b, od, os) + i0;
          U* to = o + OffsetOf(b, od, oo) + i0 * out_row;
          for (int64_t c0 = 0; c0 < inner; c0 += kTile) {
            const int64_t nj = std::min(kTile, inner - c0);
#if KILN_X86_DISPATCH
            if constexpr (sizeof(U) == 4) {
              if (avx2 && ni == kTile && nj == kTile) {
                Tile16x16Avx2(from + c0 * istride, istride, to + c0, out_row);
                continue;
              }
            }
            if constexpr (sizeof(U) == 1) {
              if (ni == kTile && nj == kTile) {
                Tile16x16Bytes(from + c0 * istride, istride, to + c0, out_row);
                continue;
              }
            }
#endif
            TileScalar(from + c0 * istride, istride, to + c0, out_row, ni, nj);
          }
        }
      });
    });
    return;
  }
  const int64_t lines = total / inner;
  Dims od(d.begin(), d.end() - 1), os(s.begin(), s.end() - 1);
  BySize(elem_size, [&]<class U>() {
    const U* in = static_cast<const U*>(src) + base;
    U* o = static_cast<U*>(dst);
    ParallelFor(ThreadsFor(threads, bytes, lines), lines, [&](int64_t l0, int64_t l1) {
      std::vector<int64_t> idx(od.size(), 0);
      for (int64_t l = l0, k = static_cast<int64_t>(od.size()) - 1; k >= 0; --k) {
        idx[k] = l % od[k];
        l /= od[k];
      }
      int64_t off = OffsetOf(l0, od, os);
      for (int64_t l = l0; l < l1; ++l) {
        U* line = o + l * inner;
        if (istride == 1) {
          std::memcpy(line, in + off, static_cast<size_t>(inner) * sizeof(U));
        } else {
          const U* p = in + off;
          for (int64_t j = 0; j < inner; ++j) line[j] = p[j * istride];
        }
        for (int k = static_cast<int>(od.size()) - 1; k >= 0; --k) {
          off += os[k];
          if (++idx[k] < od[k]) break;
          off -= os[k] * od[k];
          idx[k] = 0;
        }
      }
    });
  });
}

}  // namespace kiln::ops::moves
