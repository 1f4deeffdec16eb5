// The one packed, cache-blocked GEMM behind Conv (im2col + GEMM), ConvTranspose, DeformConv,
// MatMul, Gemm, Einsum and Attention, for float and double (the GotoBLAS loop structure): B is
// packed per (k, n) block into NR-wide column panels, A per (m, k) block into MR-high row panels,
// and an MR x NR register tile accumulates over the k block. The micro-kernel is chosen at run
// time from what the CPU has: AVX-512F + FMA (zmm tiles), AVX2 + FMA (ymm tiles), or the baseline
// (16-byte vectors: SSE2 on x86-64, NEON elsewhere). The build has no -march flag; the fast
// kernels are compiled with function target attributes and only called after the CPU check.
//
// Summation order: every C element is  C_in + sum over k blocks (in k order) of the block's
// register sum (fused multiply-adds in k order, from zero). Threads split rows or columns of C
// in whole register tiles and the k blocking does not depend on the split, so for a given ISA the
// result is bit-identical whatever the thread count.
#pragma once

#include <cstdint>
#include <vector>

#include "kernels/x86/cpu_isa.h"

namespace kiln::ops {

// C[i * ldc + j] = (accumulate ? C[i * ldc + j] : 0) + alpha * sum_k A(i, k) * B(k, j) for
// i < M, j < N, where A(i, k) = A[i * rsa + k * csa] and B(k, j) = B[k * rsb + j * csb] (any
// strides: a transposed operand is a swap of its two strides). `isa` other than kAuto forces a
// micro-kernel (tests); it must be supported here.
template <class T>
void PackedGemm(int64_t M, int64_t N, int64_t K, T alpha, const T* A, int64_t rsa, int64_t csa,
                const T* B, int64_t rsb, int64_t csb, T* C, int64_t ldc, bool accumulate,
                int threads, Isa isa = Isa::kAuto);

// B [K x N] packed once (for constant operands multiplied many times: Winograd's transformed
// weights), then C = (accumulate ? C : 0) + A B with PackedGemm below: the same products, in the
// same order, as the unpacked PackedGemm on one thread with `isa`. Threads split the rows.
template <class T>
struct PackedB {
  int64_t K = 0, N = 0;
  Isa isa = Isa::kAuto;
  std::vector<T> data;
  bool reference = false;  // packed under ReferenceKernels(): data is B as a dense K x N
};
template <class T>
PackedB<T> PackGemmB(int64_t K, int64_t N, const T* B, int64_t rsb, int64_t csb,
                     Isa isa = Isa::kAuto);
template <class T>
void PackedGemm(int64_t M, const T* A, int64_t rsa, int64_t csa, const PackedB<T>& B, T* C,
                int64_t ldc, bool accumulate, int threads);
// A [M x K] packed once (constant weights on the left: ConvTranspose's W^T), then C =
// (accumulate ? C : 0) + A B with PackedGemm below: the same products, in the same order, as the
// unpacked PackedGemm on one thread with A's `isa`.
template <class T>
struct PackedA {
  int64_t M = 0, K = 0;
  Isa isa = Isa::kAuto;
  std::vector<T> data;
  bool reference = false;  // packed under ReferenceKernels(): data is A as a dense M x K
};
template <class T>
PackedA<T> PackGemmA(int64_t M, int64_t K, const T* A, int64_t rsa, int64_t csa,
                     Isa isa = Isa::kAuto);
template <class T>
void PackedGemm(const PackedA<T>& A, int64_t N, const T* B, int64_t rsb, int64_t csb, T* C,
                int64_t ldc, bool accumulate, int threads);
// Rows [row0, row0 + rows) of C = (accumulate ? C : 0) + A B with both packed (B with A's isa
// and reference flag; row0 a multiple of PackedRowsStep(A)), on the calling thread: the same
// products, in the same order, as PackedGemm(A, ...), for a caller that consumes C a block of
// rows at a time while the block is in its core's cache.
template <class T>
void PackedGemmRows(const PackedA<T>& A, int64_t row0, int64_t rows, const PackedB<T>& B, T* C,
                    int64_t ldc, bool accumulate);
template <class T>
int64_t PackedRowsStep(const PackedA<T>& A);
extern template PackedB<float> PackGemmB<float>(int64_t, int64_t, const float*, int64_t, int64_t,
                                                Isa);
extern template void PackedGemm<float>(int64_t, const float*, int64_t, int64_t,
                                       const PackedB<float>&, float*, int64_t, bool, int);

extern template void PackedGemm<float>(int64_t, int64_t, int64_t, float, const float*, int64_t,
                                       int64_t, const float*, int64_t, int64_t, float*, int64_t,
                                       bool, int, Isa);
extern template void PackedGemm<double>(int64_t, int64_t, int64_t, double, const double*, int64_t,
                                        int64_t, const double*, int64_t, int64_t, double*, int64_t,
                                        bool, int, Isa);

}  // namespace kiln::ops
