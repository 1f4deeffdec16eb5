// The CUDA backend's fused-MLP path: a chain of dense layers (MatMul / Gemm, a bias, element-wise
// activations) evaluated by one warp for 16 x m_tiles samples at a time on mma.sync.m16n8k16
// (half inputs, float accumulation), with every layer's activations kept in registers.
//
// How a warp runs its samples:
//   - The per-sample prologue (input encodings, everything the chain's input depends on) runs
//     per lane, one sample each, as on the scalar path. It writes the chain's input row into the
//     warp's tile in shared memory as half; ldmatrix loads it as A fragments.
//   - Each layer starts its accumulators at the bias. It multiplies the A fragments by B
//     fragments, which ldmatrix loads from the block's staged weights (rows of B^T, skewed so
//     that the eight rows of each 8x8 matrix fall in distinct banks). It then applies the
//     activation and packs pairs to half2 (cvt.rn.relu.f16x2.f32 for ReLU).
//   - The m16n8k16 accumulator layout of two adjacent n-tiles is the A layout of one k-tile, so
//     the packed registers are the next layer's A fragments directly.
//   - The last layer's accumulators go to the tile as float. Each lane reads its sample's row
//     back and runs the per-sample epilogue (sigmoid, concat, ...) and the output stores.
//
// With --precision fp8 the staged B holds E4M3 codes with a scale per output column. Each k-group
// of 16 is permuted so that one 32-bit ldmatrix element is a lane's four codes of a B fragment;
// cvt.rn.f16x2.e4m3x2 widens them in registers. The accumulators start at bias / scale, and
// the scale is applied before the activation.
//
// The same code runs on a CPU through lane_emulator.h (lane-accurate fragments, barriers, a
// shared-memory race checker).
#pragma once

#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "ir/graph.h"

namespace kiln::codegen::cuda {

struct FusedLayer {
  int product = -1;              // the MatMul / Gemm node
  std::vector<int> nodes;        // the product, its bias Add and its activations, in order
  std::vector<int> activations;  // the unary element-wise nodes after the bias
  int64_t k = 0, n = 0, k_pad = 0, n_pad = 0;
  std::vector<float> weight;  // k x n, row-major, Gemm's alpha and transB folded in
  std::vector<float> bias;    // n (zeros without one), Gemm's beta folded in
  // The staged image (bytes from its start).
  int64_t b_offset = 0, b_row_bytes = 0;  // n_pad rows of B^T
  int64_t bias_offset = 0;                // n_pad floats (fp8: bias / scale)
  int64_t scale_offset = -1;              // fp8: n_pad floats
  int64_t macs() const { return k * n; }
};

struct FusedMlpPlan {
  std::vector<FusedLayer> layers;
  std::set<int> chain_nodes;
  std::set<int> prologue_nodes;  // what the chain's input depends on; the rest is the epilogue
  int input = -1, output = -1;   // the first layer's A ([1, K]) and the last layer's result
  int m_tiles = 4;               // 16-row tiles per warp iteration
  int64_t staged_bytes = 0;      // the block's shared weights, 128-byte multiple
  int64_t tile_bytes = 0;        // per warp: the input rows (half) or the output rows (float)
  int64_t a_row_bytes = 0, c_row_bytes = 0;
  int64_t chain_macs = 0, total_macs = 0;  // per sample
  static constexpr int kWarpsPerBlock = 4;
  int samples_per_warp() const { return 16 * m_tiles; }
  int64_t shared_bytes() const { return staged_bytes + kWarpsPerBlock * tile_bytes; }
};

// The chain, when the graph is a per-sample prologue, at least one dense layer (a constant 2-D
// B, one row of A per sample, K and N at most 256) and an epilogue that reads only the chain's
// result; nullopt otherwise (then the WMMA or scalar path applies). fp8: the staged B as E4M3.
std::optional<FusedMlpPlan> PlanFusedMlp(const ir::Graph& g, bool fp8);

// The bytes the kernel copies into shared memory: every layer's B (half or E4M3, in ldmatrix
// order) and its biases and scales, at the offsets of the plan.
std::vector<unsigned char> StagedImage(const FusedMlpPlan& p, bool fp8);

// The device helpers (inline PTX) and their emulation under a host C++ compiler.
std::string FusedMlpHelpers(bool fp8);

// The code between the tile holding the chain's input rows (kiln_tile, half) and the tile
// holding its output rows (float): the whole chain in registers. `activation(layer)` gives the
// name of a float -> float function for a layer's activations, or "" for none / ReLU alone.
std::string FusedChainCode(const FusedMlpPlan& p, bool fp8, const ir::Graph& g,
                           const std::vector<std::string>& activation_functions);

// True when a layer's activations are a single Relu (packed with cvt.rn.relu.f16x2.f32).
bool ReluOnly(const ir::Graph& g, const FusedLayer& l);

// Instructions and shared-memory traffic per warp iteration, as generated (what the static
// performance report's model counts before nvcc).
struct FusedMlpCounts {
  int64_t mma = 0, ldmatrix = 0, cvt_e4m3 = 0, pack = 0;
  int64_t shared_bytes_read = 0, shared_bytes_written = 0;
};
FusedMlpCounts CountFusedMlp(const FusedMlpPlan& p, bool fp8);

}  // namespace kiln::codegen::cuda
