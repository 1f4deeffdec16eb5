// The CUDA backend's tensor-core path (the seed's cooperative-vector path): one warp evaluates 32
// samples. Every lane still runs the per-sample code of the scalar path on its own sample, but a
// MatMul / Gemm with a constant B becomes a warp step: each lane writes its rows of A into the
// warp's shared-memory tile as half, the warp multiplies the 32-sample tile by B on the tensor
// cores (WMMA 16x16x16, float accumulate), and each lane reads its rows of the product back into
// its registers, where the bias, activations and everything else run per lane as before.
//
// B is packed at compile time as K_pad x (N_pad + 8) halves, row-major, zero-padded to
// multiples of 16 (the +8 skews rows across shared-memory banks) and with Gemm's alpha and transB
// folded in; each block stages every layer's B in shared memory once. With FP8 weight storage the
// weight buffer holds E4M3 bytes and a per-tensor scale (max |B| / 448), widened to half when
// staged. Tiles in shared memory: A as half with rows of K_pad + 8, the product as float with rows
// of N_pad + 4, so that lanes writing 16 and reading 16 bytes of their own rows hit distinct banks.
//
// The same generated code runs on a CPU: compiled by a host C++ compiler, a warp is a loop over
// 32 lanes per segment of per-lane code, and the WMMA calls go to an emulation (in the generated
// file) that also checks WMMA's alignment rules, so the host tests check the tile layout.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "codegen/cuda/cuda_emit.h"
#include "ir/graph.h"

namespace kiln::codegen::cuda {

struct TensorCoreLayer {
  int node = -1;     // index into graph.nodes
  int64_t rows = 1;  // rows of A per sample (M)
  int64_t k = 0, n = 0, k_pad = 0, n_pad = 0;
  int64_t lda = 0, ldb = 0, ldc = 0;  // in elements: k_pad + 8, n_pad + 8, n_pad + 4
  bool trans_a = false, trans_b = false;
  double alpha = 1, beta = 1;
  int bias_input = -1;        // Gemm's C
  int64_t staged_offset = 0;  // in halves, into the block's staged weights
  int64_t weight_byte = 0;    // where the packed B starts in the weight buffer
  float fp8_scale = 1;        // E4M3 storage: B = code * scale
  int64_t macs() const { return rows * k * n; }
};

struct TensorCorePlan {
  std::vector<TensorCoreLayer> layers;
  std::map<int, int> layer_of_node;           // node index -> index into layers
  int64_t eligible_macs = 0, total_macs = 0;  // of every MatMul / Gemm / Conv
  int64_t staged_bytes = 0;                   // the block's staged B, 128-byte multiple
  int64_t a_tile_bytes = 0;                   // per warp, 128-byte multiples
  int64_t c_tile_bytes = 0;
  static constexpr int kWarpsPerBlock = 4;
  static constexpr int64_t kMaxSharedBytes = 227 * 1024;  // sm_90's dynamic shared memory per block
  int64_t shared_bytes() const {
    return staged_bytes + kWarpsPerBlock * (a_tile_bytes + c_tile_bytes);
  }
};

// The MatMul / Gemm nodes that can run as warp steps: a constant 2-D B, at most 8 rows of A per
// sample, and padding to multiples of 16 that at most quadruples the work. Offsets and tile
// sizes are filled in; weight_byte and fp8_scale are the caller's (it owns the weight buffer).
TensorCorePlan PlanTensorCores(const ir::Graph& g);

// Multiply-adds of a MatMul / Gemm / Conv node per sample (0 for other ops).
int64_t MatrixMacs(const ir::Graph& g, const ir::Node& n);

// B of a layer as staged: k_pad x ldb floats, row-major, alpha folded in, zeros in the padding.
std::vector<float> PackedB(const ir::Graph& g, const TensorCoreLayer& layer);

// E4M3 (OCP FP8: 4 exponent bits, bias 7, 3 mantissa bits, no infinities, max 448), round to
// nearest even, saturating; and back.
uint8_t FloatToE4M3(float f);
float E4M3ToFloat(uint8_t code);

// Per-lane code before the warp step (A's rows of this lane into the tile) and after it (the
// product's rows, plus Gemm's bias, into the output's slot).
Status EmitTensorCorePut(EmitContext& ctx, const TensorCoreLayer& layer);
Status EmitTensorCoreGet(EmitContext& ctx, const TensorCoreLayer& layer);
// The warp step itself: one call of kiln_tc_matmul.
std::string TensorCoreCall(const TensorCoreLayer& layer);

// The helpers every tensor-core kernel uses (WMMA or its host emulation, tile loads and stores,
// half and E4M3 conversions), guarded so that several models compile together.
std::string TensorCoreHelpers(bool fp8);

}  // namespace kiln::codegen::cuda
