// Gemm with constant weights through oneDNN's matmul (its brgemm kernels, the weights packed once
// per node into the primitive's layout and kept in the NodeState): an MLP's 1024 x 64 x 64 layer
// runs at about twice the speed of our packed GEMM, which repacks B on every call. Y = A op(B) +
// bias (then options.post), A [M, K] row-major, B [K, N] or (trans_b) [N, K], bias [N] or null.
// With T > 1 threads the rows split into up to T parts of at least 4 rows on kiln's pool, one
// matmul each, sharing the packed B.
#pragma once

#include <array>
#include <cstdint>
#include <memory>

#include "kernels/x86/node_state.h"
#include "kernels/x86/post_ops.h"

namespace kiln::ops {

// How DnnlGemm reads A and finishes Y; the defaults: A row-major [M, K], nothing after the bias.
struct GemmOptions {
  bool trans_a = false;       // A is stored [K, M] (an NCHW image read as pixels by channels)
  int64_t lda = 0;            // A's row stride in elements (0: K, or M when trans_a)
  bool bias_per_row = false;  // the bias holds M values, one per row of Y (else N)
  PostOps post;               // post.z: [M, N] row-major, as Y (it may be Y)
};

// False (nothing written) when oneDNN is not built in or refuses. `b_constant`: B's bytes at this
// address never change while `state` lives (they are packed once); otherwise B is read where it
// is, in its own layout.
bool DnnlGemm(int64_t M, int64_t N, int64_t K, const float* A, const float* B, bool trans_b,
              bool b_constant, const float* bias, float* Y, int threads,
              std::unique_ptr<NodeState>* state, const GemmOptions& options = {});

// The same with 8-bit A (uint8, or int8 when `a_signed`) and int8 B into int32 Y, exact: false
// also where the CPU has no instruction that sums 8-bit products exactly (VNNI, AMX).
bool DnnlGemmInt8(int64_t M, int64_t N, int64_t K, const void* A, bool a_signed, const int8_t* B,
                  bool trans_b, bool b_constant, int32_t* Y, int threads,
                  std::unique_ptr<NodeState>* state);

// Y[b] = A[b] B[b] for b < batch: A [batch, M, K], B [batch, K, N], Y [batch, M, N], all
// row-major (attention's products of activations); false when oneDNN is not built in or only
// its reference loops take the shape. With T > 1 threads, runs of the batch on kiln's pool, or
// each batch's rows where the batch does not divide evenly.
bool DnnlBatchedMatMul(int64_t batch, int64_t M, int64_t N, int64_t K, const float* A,
                       const float* B, float* Y, int threads, std::unique_ptr<NodeState>* state);

// The same with each operand read by its strides: element (b, i, j) of A at
// A + b * as[0] + i * as[1] + j * as[2], of B ([batch, K, N]) and Y ([batch, M, N]) likewise
// (attention's Q K^T reads K transposed in place: bs = {.., 1, d}).
using Strides3 = std::array<int64_t, 3>;
bool DnnlStridedBatchedMatMul(int64_t batch, int64_t M, int64_t N, int64_t K, const float* A,
                              const Strides3& as, const float* B, const Strides3& bs, float* Y,
                              const Strides3& ys, int threads, std::unique_ptr<NodeState>* state);

}  // namespace kiln::ops
