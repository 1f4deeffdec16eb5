#include "ops/conv_gemm.h"

#include <algorithm>
#include <cstring>
#include <thread>
#include <vector>

namespace kiln::ops {
namespace {

// Register tile: MR rows x NR columns of C stay in registers across the K loop.
template <class T> constexpr int kMR = 4;
template <class T> constexpr int kNR = 32 / sizeof(T);
constexpr int64_t kKC = 256;  // K block: a packed B panel (kKC x NR) stays in L1
constexpr int64_t kMC = 64;   // M block: the packed A block stays in L2
constexpr int64_t kNC = 512;  // N block: the packed B block stays in L2

// Packs rows [0, mc) x cols [0, kc) of A into MR-row panels, k-major, zero padded.
template <class T>
void PackA(const T* A, int64_t lda, int64_t mc, int64_t kc, T* dst) {
  constexpr int MR = kMR<T>;
  for (int64_t i = 0; i < mc; i += MR) {
    int mr = static_cast<int>(std::min<int64_t>(MR, mc - i));
    for (int64_t k = 0; k < kc; ++k) {
      for (int r = 0; r < mr; ++r) dst[r] = A[(i + r) * lda + k];
      for (int r = mr; r < MR; ++r) dst[r] = T(0);
      dst += MR;
    }
  }
}

// Packs rows [0, kc) x cols [0, nc) of B into NR-column panels, k-major, zero padded.
template <class T>
void PackB(const T* B, int64_t ldb, int64_t kc, int64_t nc, T* dst) {
  constexpr int NR = kNR<T>;
  for (int64_t j = 0; j < nc; j += NR) {
    int nr = static_cast<int>(std::min<int64_t>(NR, nc - j));
    for (int64_t k = 0; k < kc; ++k) {
      const T* src = B + k * ldb + j;
      if (nr == NR) {
        for (int c = 0; c < NR; ++c) dst[c] = src[c];
      } else {
        for (int c = 0; c < nr; ++c) dst[c] = src[c];
        for (int c = nr; c < NR; ++c) dst[c] = T(0);
      }
      dst += NR;
    }
  }
}

// GCC/Clang vector extensions: one NR-wide vector per C row, so the K loop is multiply-adds on
// registers at any optimization level (the auto-vectorizer at -O2 leaves this loop scalar).
template <class T>
void MicroKernel(int64_t kc, const T* a, const T* b, T* C, int64_t ldc, int mr, int nr, bool acc) {
  constexpr int MR = kMR<T>, NR = kNR<T>;
  constexpr int VW = 16 / sizeof(T), NV = NR / VW;  // 16-byte vectors: baseline x86-64 and NEON
  typedef T V __attribute__((vector_size(16)));
  V ab[MR][NV];
  for (int r = 0; r < MR; ++r)
    for (int v = 0; v < NV; ++v) ab[r][v] = V{};
  for (int64_t k = 0; k < kc; ++k) {
    V bv[NV];
    std::memcpy(bv, b, sizeof(bv));
    for (int r = 0; r < MR; ++r)
      for (int v = 0; v < NV; ++v) ab[r][v] += a[r] * bv[v];
    a += MR;
    b += NR;
  }
  for (int r = 0; r < mr; ++r) {
    T row[NR];
    std::memcpy(row, ab[r], sizeof(row));
    T* crow = C + r * ldc;
    if (acc) {
      for (int c = 0; c < nr; ++c) crow[c] += row[c];
    } else {
      for (int c = 0; c < nr; ++c) crow[c] = row[c];
    }
  }
}

// The sequential blocked product over columns [0, N) of B and C.
template <class T>
void GemmSerial(int64_t M, int64_t N, int64_t K, const T* A, int64_t lda, const T* B, int64_t ldb,
                T* C, int64_t ldc, bool accumulate) {
  constexpr int MR = kMR<T>, NR = kNR<T>;
  std::vector<T> pa(static_cast<size_t>(((kMC + MR - 1) / MR) * MR * kKC));
  std::vector<T> pb(static_cast<size_t>(((kNC + NR - 1) / NR) * NR * kKC));
  for (int64_t jc = 0; jc < N; jc += kNC) {
    int64_t nc = std::min(kNC, N - jc);
    for (int64_t pc = 0; pc < K; pc += kKC) {
      int64_t kc = std::min(kKC, K - pc);
      bool acc = accumulate || pc > 0;
      PackB(B + pc * ldb + jc, ldb, kc, nc, pb.data());
      for (int64_t ic = 0; ic < M; ic += kMC) {
        int64_t mc = std::min(kMC, M - ic);
        PackA(A + ic * lda + pc, lda, mc, kc, pa.data());
        for (int64_t jr = 0; jr < nc; jr += NR) {
          int nr = static_cast<int>(std::min<int64_t>(NR, nc - jr));
          const T* bp = pb.data() + (jr / NR) * NR * kc;
          for (int64_t ir = 0; ir < mc; ir += MR) {
            int mr = static_cast<int>(std::min<int64_t>(MR, mc - ir));
            MicroKernel(kc, pa.data() + (ir / MR) * MR * kc, bp, C + (ic + ir) * ldc + jc + jr, ldc,
                        mr, nr, acc);
          }
        }
      }
    }
  }
  if (K == 0 && !accumulate)
    for (int64_t i = 0; i < M; ++i) std::fill(C + i * ldc, C + i * ldc + N, T(0));
}

}  // namespace

template <class T>
void ConvGemm(int64_t M, int64_t N, int64_t K, const T* A, int64_t lda, const T* B, int64_t ldb,
              T* C, int64_t ldc, bool accumulate, int threads) {
  if (M <= 0 || N <= 0) return;
  // Only split when each thread gets a useful amount of work.
  int64_t work = M * N * std::max<int64_t>(K, 1);
  int t = static_cast<int>(std::min<int64_t>({threads, work / (1 << 18) + 1, 64}));
  if (t <= 1) {
    GemmSerial(M, N, K, A, lda, B, ldb, C, ldc, accumulate);
    return;
  }
  std::vector<std::thread> pool;
  if (N >= M) {  // split columns
    int64_t chunk = ((N + t - 1) / t + kNR<T> - 1) / kNR<T> * kNR<T>;
    for (int64_t j0 = 0; j0 < N; j0 += chunk) {
      int64_t nj = std::min(chunk, N - j0);
      pool.emplace_back([=] { GemmSerial(M, nj, K, A, lda, B + j0, ldb, C + j0, ldc, accumulate); });
    }
  } else {  // split rows
    int64_t chunk = ((M + t - 1) / t + kMR<T> - 1) / kMR<T> * kMR<T>;
    for (int64_t i0 = 0; i0 < M; i0 += chunk) {
      int64_t mi = std::min(chunk, M - i0);
      pool.emplace_back(
          [=] { GemmSerial(mi, N, K, A + i0 * lda, lda, B, ldb, C + i0 * ldc, ldc, accumulate); });
    }
  }
  for (auto& th : pool) th.join();
}

template void ConvGemm<float>(int64_t, int64_t, int64_t, const float*, int64_t, const float*,
                              int64_t, float*, int64_t, bool, int);
template void ConvGemm<double>(int64_t, int64_t, int64_t, const double*, int64_t, const double*,
                               int64_t, double*, int64_t, bool, int);

}  // namespace kiln::ops
