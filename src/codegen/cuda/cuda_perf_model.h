// A static performance model of the CUDA backend's kernels, written down so that it can be
// checked: what `--tensor-cores auto` picks a path by, and what the generated header reports.
//
// The model is an SM's throughput bound on a named GPU (default: an H200 SXM, sm_90):
//   - issue: 4 warp instructions per clock (one per SM sub-partition);
//   - tensor cores: mma.sync.m16n8k16 (2,048 f16 multiply-adds) at 2/3 of an SM's dense fp16
//     peak of 1,024 FMA per clock, the practical rate of mma.sync (not wgmma) on Hopper;
//   - shared memory: one 128-byte wavefront per clock (ldmatrix.x4: 4, .x2: 2);
//   - global memory: the device's bandwidth over the bytes each sample reads and writes.
// A warp iteration of S samples costs max(issue, tensor, shared) cycles on its SM; samples per
// second = SMs x clock x S / cycles, at most the memory bound. Latency and occupancy are not
// modelled: the kernels keep 8 to 16 warps per SM with independent mma chains.
#pragma once

#include <cstdint>
#include <string>

#include "codegen/cuda/cuda_fused_mlp.h"
#include "codegen/cuda/cuda_tensor_core.h"
#include "ir/graph.h"

namespace kiln::codegen::cuda {

struct GpuModel {
  std::string name = "H200 SXM";
  int sms = 132;
  double clock_hz = 1.98e9;
  double issue_per_clock = 4;        // warp instructions per SM
  double mma_per_clock = 2.0 / 3.0;  // m16n8k16 per SM
  double wavefronts_per_clock = 1;   // 128-byte shared-memory wavefronts per SM
  double memory_bytes_per_second = 4.8e12;
};

struct KernelEstimate {
  std::string path;                // "scalar", "fused-mlp", "wmma"
  int samples_per_iteration = 32;  // per warp
  double instructions = 0;         // warp instructions per iteration
  double mma = 0;                  // m16n8k16 per iteration
  double wavefronts = 0;           // shared-memory wavefronts per iteration
  double bytes_per_sample = 0;     // global inputs and outputs
  double cycles(
      const GpuModel& gpu = GpuModel()) const;  // per iteration on one SM: the largest bound
  std::string bound(const GpuModel& gpu = GpuModel()) const;  // which one
  double samples_per_second(const GpuModel& gpu = GpuModel()) const;
  std::string Summary(const GpuModel& gpu = GpuModel()) const;  // one line for the banner
};

// Warp instructions of one sample's per-lane code for the nodes not in `skip` (every node when
// null): MatMul / Gemm / Conv one per multiply-add, transcendental maps ~8 (fast: ~4), other
// element-wise and data ops one per element.
double PerSampleInstructions(const ir::Graph& g, const std::set<int>* skip, bool fast_math);

KernelEstimate EstimateScalar(const ir::Graph& g, bool fast_math);
KernelEstimate EstimateFusedMlp(const ir::Graph& g, const FusedMlpPlan& p, bool fp8);
KernelEstimate EstimateWmma(const ir::Graph& g, const TensorCorePlan& p, bool fast_math);

}  // namespace kiln::codegen::cuda
