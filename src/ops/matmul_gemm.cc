// Packed, cache-blocked GEMM for float and double (the GotoBLAS loop structure, in plain C++):
// B is packed per (k, n) block into NR-wide column panels, A per (m, k) block into MR-high row
// panels, and an MR x NR register tile accumulates over the k block. The micro-kernel is written
// with compiler vector extensions and cloned for AVX2/FMA; a plain-loop fallback covers others.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("O3")
#endif

#include <algorithm>
#include <cstring>
#include <thread>
#include <vector>

#include "ops/matmul_gemm.h"

namespace kiln::ops {
namespace {

constexpr int64_t kMR = 6;
constexpr int64_t kKC = 256;  // k block: an A panel (MR x KC) and a B panel (KC x NR) stay in L1
constexpr int64_t kNC = 512;  // n block: the packed B block (KC x NC) stays in L2
constexpr int64_t kMC = 72;   // m block: the packed A block (MC x KC)

// Element (r, c) of op(X), X row-major with leading dimension ld.
template <class T>
inline T At(const T* X, bool trans, int64_t ld, int64_t r, int64_t c) {
  return trans ? X[c * ld + r] : X[r * ld + c];
}

// The MR x NR tile as MR x (NR / lanes) vectors held in registers across the k loop. GCC and
// clang vector extensions make the register blocking explicit (auto-vectorization of the scalar
// form shuffles across rows instead).
template <class T, int NR>
__attribute__((always_inline)) inline void MicroKernel(int64_t kc, const T* __restrict ap,
                                                       const T* __restrict bp, T* __restrict out) {
#if defined(__GNUC__)
  typedef T V __attribute__((vector_size(32), aligned(alignof(T))));
  constexpr int kLanes = 32 / sizeof(T);
  constexpr int kVN = NR / kLanes;
  V c[kMR][kVN];
  for (int r = 0; r < kMR; ++r)
    for (int v = 0; v < kVN; ++v) c[r][v] = V{};
  for (int64_t k = 0; k < kc; ++k) {
    V b[kVN];
    for (int v = 0; v < kVN; ++v) b[v] = *reinterpret_cast<const V*>(bp + k * NR + v * kLanes);
    for (int r = 0; r < kMR; ++r) {
      const T a = ap[k * kMR + r];
      for (int v = 0; v < kVN; ++v) c[r][v] += a * b[v];
    }
  }
  for (int r = 0; r < kMR; ++r)
    for (int v = 0; v < kVN; ++v) *reinterpret_cast<V*>(out + r * NR + v * kLanes) = c[r][v];
#else
  T c[kMR][NR] = {};
  for (int64_t k = 0; k < kc; ++k)
    for (int r = 0; r < kMR; ++r)
      for (int j = 0; j < NR; ++j) c[r][j] += ap[k * kMR + r] * bp[k * NR + j];
  std::memcpy(out, c, sizeof(c));
#endif
}

// The micro-kernels, cloned for AVX2+FMA where the toolchain can dispatch at load time.
#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__) && defined(__linux__)
#define KILN_GEMM_CLONES __attribute__((target_clones("arch=x86-64-v3", "default")))
#else
#define KILN_GEMM_CLONES
#endif

KILN_GEMM_CLONES void MicroF32(int64_t kc, const float* ap, const float* bp, float* out) {
  MicroKernel<float, 16>(kc, ap, bp, out);
}
KILN_GEMM_CLONES void MicroF64(int64_t kc, const double* ap, const double* bp, double* out) {
  MicroKernel<double, 8>(kc, ap, bp, out);
}

template <class T>
void Micro(int64_t kc, const T* ap, const T* bp, T* out) {
  if constexpr (std::is_same_v<T, float>) MicroF32(kc, ap, bp, out);
  else MicroF64(kc, ap, bp, out);
}

// One row times a matrix (M == 1, the batch-1 fully connected layer): packing B would cost as
// much as the product, so read it in place. Columns [n_begin, n_end) of c.
template <class T>
__attribute__((always_inline)) inline void GemvKernel(bool tb, int64_t N, int64_t K, T alpha,
                                                      const T* __restrict a,
                                                      const T* __restrict B, T* __restrict c,
                                                      int64_t n_begin, int64_t n_end) {
  if (!tb) {  // c += alpha * sum_k a[k] * B[k, :], an axpy per k
    for (int64_t k = 0; k < K; ++k) {
      const T ak = alpha * a[k];
      const T* b = B + k * N;
      for (int64_t j = n_begin; j < n_end; ++j) c[j] += ak * b[j];
    }
    return;
  }
  // c[j] += alpha * dot(a, B[j, :]), B rows contiguous; several partial sums so the dot
  // vectorizes without reassociating a single accumulator.
  constexpr int kP = 16;
  for (int64_t j = n_begin; j < n_end; ++j) {
    const T* b = B + j * K;
    T part[kP] = {};
    int64_t k = 0;
    for (; k + kP <= K; k += kP)
      for (int p = 0; p < kP; ++p) part[p] += a[k + p] * b[k + p];
    T sum = 0;
    for (int p = 0; p < kP; ++p) sum += part[p];
    for (; k < K; ++k) sum += a[k] * b[k];
    c[j] += alpha * sum;
  }
}

KILN_GEMM_CLONES void GemvF32(bool tb, int64_t N, int64_t K, float alpha, const float* a,
                              const float* B, float* c, int64_t n0, int64_t n1) {
  GemvKernel<float>(tb, N, K, alpha, a, B, c, n0, n1);
}
KILN_GEMM_CLONES void GemvF64(bool tb, int64_t N, int64_t K, double alpha, const double* a,
                              const double* B, double* c, int64_t n0, int64_t n1) {
  GemvKernel<double>(tb, N, K, alpha, a, B, c, n0, n1);
}

template <class T>
void Gemv(bool tb, int64_t N, int64_t K, T alpha, const T* a, const T* B, T* c, int64_t n0,
          int64_t n1) {
  if constexpr (std::is_same_v<T, float>) GemvF32(tb, N, K, alpha, a, B, c, n0, n1);
  else GemvF64(tb, N, K, alpha, a, B, c, n0, n1);
}

// Rows [m_begin, m_end) of C; op(A) is M x K, op(B) is K x N.
template <class T, int NR>
void GemmImpl(bool ta, bool tb, int64_t M, int64_t N, int64_t K, T alpha, const T* A,
              const T* B, T* C, int64_t m_begin, int64_t m_end) {
  const int64_t lda = ta ? M : K;
  const int64_t ldb = tb ? K : N;
  std::vector<T> bpack(kKC * (kNC + NR));
  std::vector<T> apack(kKC * (kMC + kMR));
  alignas(64) T tile[kMR * NR];
  for (int64_t n0 = 0; n0 < N; n0 += kNC) {
    const int64_t nc = std::min(kNC, N - n0);
    const int64_t npanels = (nc + NR - 1) / NR;
    for (int64_t k0 = 0; k0 < K; k0 += kKC) {
      const int64_t kc = std::min(kKC, K - k0);
      // Pack B[k0:k0+kc, n0:n0+nc] into NR-wide panels, zero padded; alpha is folded in here.
      for (int64_t p = 0; p < npanels; ++p) {
        T* dst = bpack.data() + p * kc * NR;
        const int64_t j0 = n0 + p * NR;
        const int64_t w = std::min<int64_t>(NR, N - j0);
        for (int64_t k = 0; k < kc; ++k) {
          int64_t j = 0;
          if (!tb) {
            const T* src = B + (k0 + k) * ldb + j0;
            for (; j < w; ++j) dst[k * NR + j] = alpha * src[j];
          } else {
            for (; j < w; ++j) dst[k * NR + j] = alpha * B[(j0 + j) * ldb + k0 + k];
          }
          for (; j < NR; ++j) dst[k * NR + j] = T(0);
        }
      }
      for (int64_t mb = m_begin; mb < m_end; mb += kMC) {
        const int64_t mc = std::min(kMC, m_end - mb);
        const int64_t mpanels = (mc + kMR - 1) / kMR;
        for (int64_t p = 0; p < mpanels; ++p) {
          T* dst = apack.data() + p * kc * kMR;
          const int64_t i0 = mb + p * kMR;
          const int64_t h = std::min<int64_t>(kMR, m_end - i0);
          for (int64_t k = 0; k < kc; ++k) {
            int64_t r = 0;
            for (; r < h; ++r) dst[k * kMR + r] = At(A, ta, lda, i0 + r, k0 + k);
            for (; r < kMR; ++r) dst[k * kMR + r] = T(0);
          }
        }
        for (int64_t q = 0; q < npanels; ++q) {
          const int64_t j0 = n0 + q * NR;
          const int64_t w = std::min<int64_t>(NR, N - j0);
          for (int64_t p = 0; p < mpanels; ++p) {
            const int64_t i0 = mb + p * kMR;
            const int64_t h = std::min<int64_t>(kMR, m_end - i0);
            Micro<T>(kc, apack.data() + p * kc * kMR, bpack.data() + q * kc * NR, tile);
            for (int64_t r = 0; r < h; ++r) {
              T* c = C + (i0 + r) * N + j0;
              const T* t = tile + r * NR;
              for (int64_t j = 0; j < w; ++j) c[j] += t[j];
            }
          }
        }
      }
    }
  }
}

template <class T, int NR>
void Gemm(bool ta, bool tb, int64_t M, int64_t N, int64_t K, T alpha, const T* A, const T* B,
          T* C, int threads) {
  if (M <= 0 || N <= 0 || K <= 0) return;
  int64_t work = M * N * K;
  if (M == 1 && !ta) {  // threads split the columns
    int nt = static_cast<int>(std::min<int64_t>({threads, N / 64 + 1, work / (1 << 18) + 1}));
    int64_t cols = (N + nt - 1) / nt;
    std::vector<std::thread> pool;
    for (int t = 1; t < nt; ++t) {
      int64_t b = t * cols, e = std::min(N, b + cols);
      if (b < e) pool.emplace_back([=] { Gemv<T>(tb, N, K, alpha, A, B, C, b, e); });
    }
    Gemv<T>(tb, N, K, alpha, A, B, C, 0, std::min(N, cols));
    for (auto& th : pool) th.join();
    return;
  }
  // Threads split the rows; each packs its own copy of B, so only split big problems.
  int nt = static_cast<int>(std::min<int64_t>({threads, (M + kMR - 1) / kMR, work / (1 << 18) + 1}));
  if (nt <= 1) {
    GemmImpl<T, NR>(ta, tb, M, N, K, alpha, A, B, C, 0, M);
    return;
  }
  std::vector<std::thread> pool;
  int64_t rows = ((M + nt - 1) / nt + kMR - 1) / kMR * kMR;
  for (int t = 0; t < nt; ++t) {
    int64_t b = t * rows, e = std::min(M, b + rows);
    if (b >= e) break;
    pool.emplace_back([=] { GemmImpl<T, NR>(ta, tb, M, N, K, alpha, A, B, C, b, e); });
  }
  for (auto& th : pool) th.join();
}

}  // namespace

void GemmF32(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, float alpha,
             const float* A, const float* B, float* C, int threads) {
  Gemm<float, 16>(trans_a, trans_b, M, N, K, alpha, A, B, C, threads);
}

void GemmF64(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, double alpha,
             const double* A, const double* B, double* C, int threads) {
  Gemm<double, 8>(trans_a, trans_b, M, N, K, alpha, A, B, C, threads);
}

}  // namespace kiln::ops
