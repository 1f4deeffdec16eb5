#include "kernels/x86/gemm_kernels.h"

#include <algorithm>
#include <cstring>
#include <vector>

#include "kernels/reference/reference_kernels.h"
#include "kernels/x86/scratch.h"
#include "kernels/x86/thread_pool.h"

namespace kiln::ops {
namespace {

// The register tile: MR rows x NV vectors of VB bytes, over B panels BS elements wide (BS > the
// tile's width for the narrow kernel that serves a panel's first half at the right edge). Compiler
// vector extensions make the blocking explicit; inlined into a function with a target attribute,
// the same body becomes zmm / ymm code with FMAs (c += a * b contracts: GCC's gnu++ default
// -ffp-contract=fast, clang's -ffp-contract=on within one expression). Accumulators start at zero;
// C is added at the end.
// kDirect: A read in place, the tile's row r at a + r * lda and its k-th value a[r * lda + k],
// instead of packed (MR values per k); the same products in the same order.
template <class T, int VB, int MR, int NV, int BS, bool kDirect = false>
__attribute__((always_inline)) inline void KernelBody(int64_t kc, const T* __restrict a,
                                                      int64_t lda, const T* __restrict b,
                                                      T* __restrict c, int64_t ldc, bool acc) {
  typedef T V __attribute__((vector_size(VB)));
  constexpr int L = VB / static_cast<int>(sizeof(T));
  static_assert(BS >= NV * L);
  V s[MR][NV];
  for (int r = 0; r < MR; ++r)
    for (int v = 0; v < NV; ++v) s[r][v] = V{};
  for (int64_t k = 0; k < kc; ++k) {
    V bv[NV];
    for (int v = 0; v < NV; ++v) std::memcpy(&bv[v], b + v * L, sizeof(V));
    for (int r = 0; r < MR; ++r) {
      const T ar = kDirect ? a[r * lda] : a[r];
      for (int v = 0; v < NV; ++v) s[r][v] += ar * bv[v];
    }
    a += kDirect ? 1 : MR;
    b += BS;
  }
  for (int r = 0; r < MR; ++r) {
    for (int v = 0; v < NV; ++v) {
      T* p = c + r * ldc + v * L;
      V out = s[r][v];
      if (acc) {
        V old;
        std::memcpy(&old, p, sizeof(V));
        out = old + out;
      }
      std::memcpy(p, &out, sizeof(V));
    }
  }
}

template <class T>
using KernelFn = void (*)(int64_t, const T*, const T*, T*, int64_t, bool);
// A tile's kernel reading A in place, rows lda apart (KernelBody's kDirect).
template <class T>
using DirectKernelFn = void (*)(int64_t, const T*, int64_t, const T*, T*, int64_t, bool);

template <class T, int MR, int NV, int BS>
void KernelBase(int64_t kc, const T* a, const T* b, T* c, int64_t ldc, bool acc) {
  KernelBody<T, 16, MR, NV, BS>(kc, a, 0, b, c, ldc, acc);
}
template <class T, int MR, int NV, int BS>
void DirectBase(int64_t kc, const T* a, int64_t lda, const T* b, T* c, int64_t ldc, bool acc) {
  KernelBody<T, 16, MR, NV, BS, true>(kc, a, lda, b, c, ldc, acc);
}
#if KILN_X86_DISPATCH
template <class T, int MR, int NV, int BS>
__attribute__((target("avx2,fma"))) void KernelAvx2(int64_t kc, const T* a, const T* b, T* c,
                                                    int64_t ldc, bool acc) {
  KernelBody<T, 32, MR, NV, BS>(kc, a, 0, b, c, ldc, acc);
}
template <class T, int MR, int NV, int BS>
__attribute__((target("avx2,fma"))) void DirectAvx2(int64_t kc, const T* a, int64_t lda, const T* b,
                                                    T* c, int64_t ldc, bool acc) {
  KernelBody<T, 32, MR, NV, BS, true>(kc, a, lda, b, c, ldc, acc);
}
template <class T, int MR, int NV, int BS>
__attribute__((target("avx512f,fma"))) void KernelAvx512(int64_t kc, const T* a, const T* b, T* c,
                                                         int64_t ldc, bool acc) {
  KernelBody<T, 64, MR, NV, BS>(kc, a, 0, b, c, ldc, acc);
}
template <class T, int MR, int NV, int BS>
__attribute__((target("avx512f,fma"))) void DirectAvx512(int64_t kc, const T* a, int64_t lda,
                                                         const T* b, T* c, int64_t ldc, bool acc) {
  KernelBody<T, 64, MR, NV, BS, true>(kc, a, lda, b, c, ldc, acc);
}
#endif

// A micro-kernel and its blocking: KC x NR B panels are streamed from L2 (the packed B block,
// KC x NC, stays there) while one MR x KC A panel stays in L1 across the column panels. `half`
// computes the first NR / 2 columns of a tile only (right-edge panels at most half full: the
// 7 x 7 and 14 x 14 feature maps), with the same per-element arithmetic as `fn`.
// GemmSerial reads A in place up to this size (MatMul's A of an attention head: 128 x 128).
constexpr int64_t kDirectABytes = int64_t{64} << 10;

template <class T>
struct Spec {
  int mr, nr;
  int64_t kc, mc, nc;
  KernelFn<T> fn, half;
  DirectKernelFn<T> direct;  // fn reading A in place
};

// MR x NV vectors of VB bytes (NV even), cache blocks KC / MC / NC: 256 / 256 / 512 elements for
// float, 128 / 256 / 256 for double (a 256 x 512 float B block is 512 KiB of the 1 MiB Zen 4 L2;
// tried on the issue-7 shapes: KC 128..512 and NC 128..512 are within noise of each other).
template <class T, int MR, int NV, int VB, template <class, int, int, int> class K>
Spec<T> MakeSpec() {
  constexpr int NR = NV * VB / static_cast<int>(sizeof(T));
  constexpr bool f32 = sizeof(T) == 4;
  static_assert(NV % 2 == 0);
  return {MR,
          NR,
          f32 ? 256 : 128,
          256,
          f32 ? 512 : 256,
          K<T, MR, NV, NR>::fn,
          K<T, MR, NV / 2, NR>::fn,
          K<T, MR, NV, NR>::direct};
}

template <class T, int MR, int NV, int BS>
struct BaseK {
  static constexpr KernelFn<T> fn = KernelBase<T, MR, NV, BS>;
  static constexpr DirectKernelFn<T> direct = DirectBase<T, MR, NV, BS>;
};
#if KILN_X86_DISPATCH
template <class T, int MR, int NV, int BS>
struct Avx2K {
  static constexpr KernelFn<T> fn = KernelAvx2<T, MR, NV, BS>;
  static constexpr DirectKernelFn<T> direct = DirectAvx2<T, MR, NV, BS>;
};
template <class T, int MR, int NV, int BS>
struct Avx512K {
  static constexpr KernelFn<T> fn = KernelAvx512<T, MR, NV, BS>;
  static constexpr DirectKernelFn<T> direct = DirectAvx512<T, MR, NV, BS>;
};
#endif

template <class T>
Spec<T> SpecFor(Isa isa) {
  switch (isa) {
#if KILN_X86_DISPATCH
    case Isa::kAvx512:  // 8 x 32 floats / 8 x 16 doubles: 16 zmm accumulators
      return MakeSpec<T, 8, 2, 64, Avx512K>();
    case Isa::kAvx2:  // 6 x 16 floats / 6 x 8 doubles: 12 ymm accumulators
      return MakeSpec<T, 6, 2, 32, Avx2K>();
#endif
    default:  // 4 x 8 floats / 4 x 4 doubles: 8 xmm accumulators
      return MakeSpec<T, 4, 2, 16, BaseK>();
  }
}

// Rows [0, mc) x cols [0, kc) of A into MR-high panels, k-major, zero padded. Compile-time MR
// (and the row-major case apart) so that the copies vectorize.
template <class T, int MR>
void PackAFixed(const T* A, int64_t rsa, int64_t csa, int64_t mc, int64_t kc, T* dst) {
  for (int64_t i = 0; i < mc; i += MR, dst += MR * kc) {
    const int mr = static_cast<int>(std::min<int64_t>(MR, mc - i));
    const T* src = A + i * rsa;
    if (mr == MR && csa == 1) {
      for (int64_t k = 0; k < kc; ++k)
        for (int r = 0; r < MR; ++r) dst[k * MR + r] = src[r * rsa + k];
      continue;
    }
    for (int64_t k = 0; k < kc; ++k) {
      int r = 0;
      for (; r < mr; ++r) dst[k * MR + r] = src[r * rsa + k * csa];
      for (; r < MR; ++r) dst[k * MR + r] = T(0);
    }
  }
}

// alpha * rows [0, kc) x cols [0, nc) of B into NR-wide panels, k-major, zero padded.
template <class T, int NR>
void PackBFixed(const T* B, int64_t rsb, int64_t csb, int64_t kc, int64_t nc, T alpha, T* dst) {
  for (int64_t j = 0; j < nc; j += NR) {
    const int nr = static_cast<int>(std::min<int64_t>(NR, nc - j));
    if (nr == NR && csb == 1) {
      for (int64_t k = 0; k < kc; ++k, dst += NR) {
        const T* src = B + k * rsb + j;
        if (alpha == T(1)) {
          std::memcpy(dst, src, NR * sizeof(T));
        } else {
          for (int c = 0; c < NR; ++c) dst[c] = alpha * src[c];
        }
      }
      continue;
    }
    for (int64_t k = 0; k < kc; ++k, dst += NR) {
      const T* src = B + k * rsb + j * csb;
      int c = 0;
      for (; c < nr; ++c) dst[c] = alpha * src[c * csb];
      for (; c < NR; ++c) dst[c] = T(0);
    }
  }
}

template <class T>
void PackA(const T* A, int64_t rsa, int64_t csa, int64_t mc, int64_t kc, int MR, T* dst) {
  switch (MR) {
    case 8:
      return PackAFixed<T, 8>(A, rsa, csa, mc, kc, dst);
    case 6:
      return PackAFixed<T, 6>(A, rsa, csa, mc, kc, dst);
    default:
      return PackAFixed<T, 4>(A, rsa, csa, mc, kc, dst);
  }
}

template <class T>
void PackB(const T* B, int64_t rsb, int64_t csb, int64_t kc, int64_t nc, int NR, T alpha, T* dst) {
  switch (NR) {
    case 32:
      return PackBFixed<T, 32>(B, rsb, csb, kc, nc, alpha, dst);
    case 16:
      return PackBFixed<T, 16>(B, rsb, csb, kc, nc, alpha, dst);
    case 8:
      return PackBFixed<T, 8>(B, rsb, csb, kc, nc, alpha, dst);
    default:
      return PackBFixed<T, 4>(B, rsb, csb, kc, nc, alpha, dst);
  }
}

// The sequential blocked product of the whole (sub)problem.
// The (k, n) blocks of B in GemmSerial's order, each packed as PackB packs it: block (jc, pc)
// starts at the sum of the sizes of the blocks before it.
template <class T>
void PackAllB(const Spec<T>& sp, int64_t K, int64_t N, const T* B, int64_t rsb, int64_t csb,
              std::vector<T>* out) {
  const int NR = sp.nr;
  const int64_t KC = sp.kc, NC = (sp.nc + NR - 1) / NR * NR;
  out->assign(static_cast<size_t>((N + NR - 1) / NR * NR * K), T(0));
  T* dst = out->data();
  for (int64_t jc = 0; jc < N; jc += NC) {
    const int64_t nc = std::min(NC, N - jc);
    for (int64_t pc = 0; pc < K; pc += KC) {
      const int64_t kc = std::min(KC, K - pc);
      PackB(B + pc * rsb + jc * csb, rsb, csb, kc, nc, NR, T(1), dst);
      dst += (nc + NR - 1) / NR * NR * kc;
    }
  }
}

// All of A in GemmSerial's order: per k block, its MR-high panels of every row (the rows padded
// to m_pad, a multiple of MR), so that block (pc, ic) starts at pc * m_pad + ic * kc.
template <class T>
void PackAllA(const Spec<T>& sp, int64_t M, int64_t K, const T* A, int64_t rsa, int64_t csa,
              std::vector<T>* out) {
  const int64_t m_pad = (M + sp.mr - 1) / sp.mr * sp.mr;
  out->assign(static_cast<size_t>(m_pad * K), T(0));
  for (int64_t pc = 0; pc < K; pc += sp.kc)
    PackA(A + pc * csa, rsa, csa, M, std::min<int64_t>(sp.kc, K - pc), sp.mr,
          out->data() + pc * m_pad);
}

// `packed` (may be null): all of B, as PackAllB lays it out (alpha 1); `packed_a` (may be
// null): all of A as PackAllA lays it out (m_pad its padded rows), from its row a_row0 (a
// multiple of MR).
template <class T>
void GemmSerial(const Spec<T>& sp, int64_t M, int64_t N, int64_t K, T alpha, const T* A,
                int64_t rsa, int64_t csa, const T* B, int64_t rsb, int64_t csb, T* C, int64_t ldc,
                bool accumulate, const T* packed = nullptr, const T* packed_a = nullptr,
                int64_t m_pad = 0, int64_t a_row0 = 0) {
  const int MR = sp.mr, NR = sp.nr;
  const int64_t KC = sp.kc, MC = (sp.mc + MR - 1) / MR * MR, NC = (sp.nc + NR - 1) / NR * NR;
  T* pa = packed_a ? nullptr
                   : Scratch<T>(ScratchSlot::kGemmA,
                                static_cast<size_t>(std::min(MC, (M + MR - 1) / MR * MR) * KC));
  T* pb = packed ? nullptr
                 : Scratch<T>(ScratchSlot::kGemmB,
                              static_cast<size_t>(std::min(NC, (N + NR - 1) / NR * NR) * KC));
  alignas(64) T tile[16 * 64];  // MR x NR edge tiles
  // A small row-major A (one k block that stays in cache) is read in place: packing it cost as
  // much as a tenth of an attention head's products. A short last row panel is still packed.
  const bool direct =
      !packed_a && csa == 1 && K <= KC && M * K * static_cast<int64_t>(sizeof(T)) <= kDirectABytes;
  for (int64_t jc = 0; jc < N; jc += NC) {
    const int64_t nc = std::min(NC, N - jc);
    for (int64_t pc = 0; pc < K; pc += KC) {
      const int64_t kc = std::min(KC, K - pc);
      const bool acc = accumulate || pc > 0;
      if (packed) {
        pb = const_cast<T*>(packed);
        packed += (nc + NR - 1) / NR * NR * kc;
      } else {
        PackB(B + pc * rsb + jc * csb, rsb, csb, kc, nc, NR, alpha, pb);
      }
      for (int64_t ic = 0; ic < M; ic += MC) {
        const int64_t mc = std::min(MC, M - ic);
        const T* a_block = packed_a ? packed_a + pc * m_pad + (a_row0 + ic) * kc : pa;
        if (!packed_a && !direct) PackA(A + ic * rsa + pc * csa, rsa, csa, mc, kc, MR, pa);
        for (int64_t ir = 0; ir < mc; ir += MR) {
          const int mr = static_cast<int>(std::min<int64_t>(MR, mc - ir));
          const T* a_rows = direct ? A + (ic + ir) * rsa + pc : nullptr;
          const bool in_place = direct && mr == MR;
          if (direct && !in_place) PackA(a_rows, rsa, csa, mr, kc, MR, pa);
          const T* ap = direct ? pa : a_block + ir * kc;
          for (int64_t jr = 0; jr < nc; jr += NR) {
            const int nr = static_cast<int>(std::min<int64_t>(NR, nc - jr));
            const T* bp = pb + jr * kc;
            T* c = C + (ic + ir) * ldc + jc + jr;
            if (mr == MR && nr == NR) {
              if (in_place)
                sp.direct(kc, a_rows, rsa, bp, c, ldc, acc);
              else
                sp.fn(kc, ap, bp, c, ldc, acc);
              continue;
            }
            if (in_place) {
              sp.direct(kc, a_rows, rsa, bp, tile, NR, false);
            } else if (nr <= NR / 2) {
              sp.half(kc, ap, bp, tile, NR, false);
            } else {
              sp.fn(kc, ap, bp, tile, NR, false);
            }
            for (int r = 0; r < mr; ++r) {
              T* crow = c + r * ldc;
              const T* t = tile + r * NR;
              if (acc) {
                for (int j = 0; j < nr; ++j) crow[j] = crow[j] + t[j];
              } else {
                for (int j = 0; j < nr; ++j) crow[j] = t[j];
              }
            }
          }
        }
      }
    }
  }
  if (K == 0 && !accumulate)
    for (int64_t i = 0; i < M; ++i) std::fill(C + i * ldc, C + i * ldc + N, T(0));
}

void ReferenceGemmRows(size_t M, size_t N, size_t K, float alpha, const float* A, size_t sam,
                       size_t sak, const float* B, size_t sbk, size_t sbn, float* C) {
  kiln_reference_gemm_f32(M, N, K, alpha, A, sam, sak, B, sbk, sbn, C);
}
void ReferenceGemmRows(size_t M, size_t N, size_t K, double alpha, const double* A, size_t sam,
                       size_t sak, const double* B, size_t sbk, size_t sbn, double* C) {
  kiln_reference_gemm_f64(M, N, K, alpha, A, sam, sak, B, sbk, sbn, C);
}

// PackedGemm on the portable GEMM of kernels/reference (one thread), which writes dense rows.
template <class T>
void ReferenceGemm(int64_t M, int64_t N, int64_t K, T alpha, const T* A, int64_t rsa, int64_t csa,
                   const T* B, int64_t rsb, int64_t csb, T* C, int64_t ldc, bool accumulate) {
  for (int64_t i = 0; i < M; ++i) {
    if (!accumulate) std::fill(C + i * ldc, C + i * ldc + N, T(0));
    if (ldc != N) ReferenceGemmRows(1, N, K, alpha, A + i * rsa, 0, csa, B, rsb, csb, C + i * ldc);
  }
  if (ldc == N) ReferenceGemmRows(M, N, K, alpha, A, rsa, csa, B, rsb, csb, C);
}

// gemm(i0, rows, j0, cols) over t threads: columns in whole NR panels where N >= M, else rows
// in whole MR panels (the k blocking does not depend on the split: the same sums).
template <class T, class F>
void SplitTiles(const Spec<T>& sp, int64_t M, int64_t N, int t, F&& gemm) {
  if (N >= M) {
    ParallelFor(t, (N + sp.nr - 1) / sp.nr, [&](int64_t p0, int64_t p1) {
      const int64_t j0 = p0 * sp.nr;
      gemm(0, M, j0, std::min(N, p1 * sp.nr) - j0);
    });
    return;
  }
  ParallelFor(t, (M + sp.mr - 1) / sp.mr, [&](int64_t p0, int64_t p1) {
    const int64_t i0 = p0 * sp.mr;
    gemm(i0, std::min(M, p1 * sp.mr) - i0, 0, N);
  });
}

}  // namespace

template <class T>
void PackedGemm(int64_t M, int64_t N, int64_t K, T alpha, const T* A, int64_t rsa, int64_t csa,
                const T* B, int64_t rsb, int64_t csb, T* C, int64_t ldc, bool accumulate,
                int threads, Isa isa) {
  if (M <= 0 || N <= 0) return;
  if (ReferenceKernels() && std::min({rsa, csa, rsb, csb}) >= 0)
    return ReferenceGemm(M, N, K, alpha, A, rsa, csa, B, rsb, csb, C, ldc, accumulate);
  isa = ResolveIsa(isa);
  const Spec<T> sp = SpecFor<T>(isa);
  // Only split when each thread gets a useful amount of work.
  const int64_t work = M * N * std::max<int64_t>(K, 1);
  const int t = static_cast<int>(std::min<int64_t>({threads, work / (1 << 18) + 1, 64}));
  if (t <= 1) {
    GemmSerial(sp, M, N, K, alpha, A, rsa, csa, B, rsb, csb, C, ldc, accumulate);
    return;
  }
  SplitTiles(sp, M, N, t, [&](int64_t i0, int64_t mi, int64_t j0, int64_t nj) {
    GemmSerial(sp, mi, nj, K, alpha, A + i0 * rsa, rsa, csa, B + j0 * csb, rsb, csb,
               C + i0 * ldc + j0, ldc, accumulate);
  });
}

template <class T>
PackedB<T> PackGemmB(int64_t K, int64_t N, const T* B, int64_t rsb, int64_t csb, Isa isa) {
  PackedB<T> p;
  p.K = K;
  p.N = N;
  if (ReferenceKernels()) {
    p.reference = true;
    p.data.resize(static_cast<size_t>(K * N));
    for (int64_t k = 0; k < K; ++k)
      for (int64_t j = 0; j < N; ++j) p.data[k * N + j] = B[k * rsb + j * csb];
    return p;
  }
  p.isa = ResolveIsa(isa);
  PackAllB(SpecFor<T>(p.isa), K, N, B, rsb, csb, &p.data);
  return p;
}

template <class T>
void PackedGemm(int64_t M, const T* A, int64_t rsa, int64_t csa, const PackedB<T>& B, T* C,
                int64_t ldc, bool accumulate, int threads) {
  if (M <= 0 || B.N <= 0) return;
  if (B.reference)
    return ReferenceGemm(M, B.N, B.K, T(1), A, rsa, csa, B.data.data(), B.N, 1, C, ldc, accumulate);
  const Spec<T> sp = SpecFor<T>(B.isa);
  const int64_t work = M * B.N * std::max<int64_t>(B.K, 1);
  const int t = static_cast<int>(std::min<int64_t>({threads, work / (1 << 18) + 1, 64}));
  // Threads split rows in whole MR panels (B's panels are shared as they are).
  ParallelFor(std::max(t, 1), (M + sp.mr - 1) / sp.mr, [&](int64_t p0, int64_t p1) {
    const int64_t i0 = p0 * sp.mr, mi = std::min(M, p1 * sp.mr) - i0;
    GemmSerial<T>(sp, mi, B.N, B.K, T(1), A + i0 * rsa, rsa, csa, nullptr, 0, 0, C + i0 * ldc, ldc,
                  accumulate, B.data.data());
  });
}

template <class T>
PackedA<T> PackGemmA(int64_t M, int64_t K, const T* A, int64_t rsa, int64_t csa, Isa isa) {
  PackedA<T> p;
  p.M = M;
  p.K = K;
  if (ReferenceKernels()) {
    p.reference = true;
    p.data.resize(static_cast<size_t>(M * K));
    for (int64_t i = 0; i < M; ++i)
      for (int64_t k = 0; k < K; ++k) p.data[i * K + k] = A[i * rsa + k * csa];
    return p;
  }
  p.isa = ResolveIsa(isa);
  PackAllA(SpecFor<T>(p.isa), M, K, A, rsa, csa, &p.data);
  return p;
}

template <class T>
void PackedGemm(const PackedA<T>& A, int64_t N, const T* B, int64_t rsb, int64_t csb, T* C,
                int64_t ldc, bool accumulate, int threads) {
  if (A.M <= 0 || N <= 0) return;
  if (A.reference)
    return ReferenceGemm(A.M, N, A.K, T(1), A.data.data(), A.K, 1, B, rsb, csb, C, ldc, accumulate);
  const Spec<T> sp = SpecFor<T>(A.isa);
  const int64_t m_pad = (A.M + sp.mr - 1) / sp.mr * sp.mr;
  const int64_t work = A.M * N * std::max<int64_t>(A.K, 1);
  const int t = static_cast<int>(std::min<int64_t>({threads, work / (1 << 18) + 1, 64}));
  SplitTiles(sp, A.M, N, std::max(t, 1), [&](int64_t i0, int64_t mi, int64_t j0, int64_t nj) {
    GemmSerial<T>(sp, mi, nj, A.K, T(1), nullptr, 0, 0, B + j0 * csb, rsb, csb, C + i0 * ldc + j0,
                  ldc, accumulate, nullptr, A.data.data(), m_pad, i0);
  });
}

template <class T>
void PackedGemmRows(const PackedA<T>& A, int64_t row0, int64_t rows, const PackedB<T>& B, T* C,
                    int64_t ldc, bool accumulate) {
  if (rows <= 0 || B.N <= 0) return;
  if (A.reference)
    return ReferenceGemm(rows, B.N, A.K, T(1), A.data.data() + row0 * A.K, A.K, 1, B.data.data(),
                         B.N, 1, C, ldc, accumulate);
  const Spec<T> sp = SpecFor<T>(A.isa);
  const int64_t m_pad = (A.M + sp.mr - 1) / sp.mr * sp.mr;
  GemmSerial<T>(sp, rows, B.N, A.K, T(1), nullptr, 0, 0, nullptr, 0, 0, C, ldc, accumulate,
                B.data.data(), A.data.data(), m_pad, row0);
}

template <class T>
int64_t PackedRowsStep(const PackedA<T>& A) {
  return A.reference ? 1 : SpecFor<T>(A.isa).mr;
}

template void PackedGemmRows<float>(const PackedA<float>&, int64_t, int64_t, const PackedB<float>&,
                                    float*, int64_t, bool);
template void PackedGemmRows<double>(const PackedA<double>&, int64_t, int64_t,
                                     const PackedB<double>&, double*, int64_t, bool);
template int64_t PackedRowsStep<float>(const PackedA<float>&);
template int64_t PackedRowsStep<double>(const PackedA<double>&);
template PackedB<double> PackGemmB<double>(int64_t, int64_t, const double*, int64_t, int64_t, Isa);
template PackedA<float> PackGemmA<float>(int64_t, int64_t, const float*, int64_t, int64_t, Isa);
template PackedA<double> PackGemmA<double>(int64_t, int64_t, const double*, int64_t, int64_t, Isa);
template void PackedGemm<float>(const PackedA<float>&, int64_t, const float*, int64_t, int64_t,
                                float*, int64_t, bool, int);
template void PackedGemm<double>(const PackedA<double>&, int64_t, const double*, int64_t, int64_t,
                                 double*, int64_t, bool, int);
template PackedB<float> PackGemmB<float>(int64_t, int64_t, const float*, int64_t, int64_t, Isa);
template void PackedGemm<float>(int64_t, const float*, int64_t, int64_t, const PackedB<float>&,
                                float*, int64_t, bool, int);
template void PackedGemm<float>(int64_t, int64_t, int64_t, float, const float*, int64_t, int64_t,
                                const float*, int64_t, int64_t, float*, int64_t, bool, int, Isa);
template void PackedGemm<double>(int64_t, int64_t, int64_t, double, const double*, int64_t, int64_t,
                                 const double*, int64_t, int64_t, double*, int64_t, bool, int, Isa);

}  // namespace kiln::ops
