#include "codegen/cuda/cuda_perf_model.h"

#include <algorithm>
#include <cstdio>

#include "ops/op_traits.h"

namespace kiln::codegen::cuda {
namespace {

int64_t Elements(const ir::Graph& g, int v) {
  if (v < 0) return 0;
  const auto& t = g.values[v].type;
  return t.shape_known() ? NumElements(t.dims) : 0;
}

double GlobalBytesPerSample(const ir::Graph& g) {
  double b = 0;
  for (int v : g.RuntimeInputs()) b += 4.0 * Elements(g, v);
  for (int v : g.outputs) b += 4.0 * Elements(g, v);
  return b;
}

}  // namespace

double KernelEstimate::cycles(const GpuModel& gpu) const {
  return std::max({instructions / gpu.issue_per_clock, mma / gpu.mma_per_clock,
                   wavefronts / gpu.wavefronts_per_clock, 1.0});
}

std::string KernelEstimate::bound(const GpuModel& gpu) const {
  double issue = instructions / gpu.issue_per_clock, tensor = mma / gpu.mma_per_clock;
  double shared = wavefronts / gpu.wavefronts_per_clock;
  if (tensor >= issue && tensor >= shared) return "tensor cores";
  return shared >= issue ? "shared memory" : "instruction issue";
}

double KernelEstimate::samples_per_second(const GpuModel& gpu) const {
  double compute = gpu.sms * gpu.clock_hz * samples_per_iteration / cycles(gpu);
  double memory = bytes_per_sample > 0 ? gpu.memory_bytes_per_second / bytes_per_sample : compute;
  return std::min(compute, memory);
}

std::string KernelEstimate::Summary(const GpuModel& gpu) const {
  char b[320];
  std::snprintf(b, sizeof(b),
                "%.1f G samples/s on an %s (model: per %d samples %.0f warp instructions, %.0f "
                "mma.sync, %.0f shared wavefronts; bound: %s)",
                samples_per_second(gpu) / 1e9, gpu.name.c_str(), samples_per_iteration,
                instructions, mma, wavefronts, bound(gpu).c_str());
  return b;
}

double PerSampleInstructions(const ir::Graph& g, const std::set<int>* skip, bool fast_math) {
  static const std::set<std::string> transcendental = {
      "Sin", "Cos",  "Exp",  "Log", "Tanh", "Sigmoid", "Erf",  "Gelu", "Softplus", "Pow",
      "Elu", "Selu", "Mish", "Tan", "Atan", "Asin",    "Acos", "Sinh", "Cosh",     "HardSwish"};
  double total = 0;
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    if (skip && skip->count(static_cast<int>(i))) continue;
    const ir::Node& n = g.nodes[i];
    int64_t out = 0;
    for (int v : n.outputs) out += Elements(g, v);
    if (n.op_type == "Conv" && n.inputs.size() > 1 && n.inputs[1] >= 0) {
      const Dims& w = g.values[n.inputs[1]].type.dims;  // one multiply-add per weight and pixel
      if (!w.empty() && w[0] > 0) total += static_cast<double>(out) * NumElements(w) / w[0];
      continue;
    }
    if ((n.op_type == "MatMul" || n.op_type == "Gemm") && n.inputs[0] >= 0) {
      const Dims& a = g.values[n.inputs[0]].type.dims;
      bool trans_a = n.op_type == "Gemm" && n.attr_int("transA", 0) != 0;
      if (a.size() >= 2) total += static_cast<double>(out) * (trans_a ? a[a.size() - 2] : a.back());
      continue;
    }
    bool fast = fast_math && (n.op_type == "Sin" || n.op_type == "Cos" || n.op_type == "Exp");
    total += static_cast<double>(out) * (fast ? 4 : transcendental.count(n.op_type) ? 12 : 1);
  }
  return total;
}

KernelEstimate EstimateScalar(const ir::Graph& g, bool fast_math) {
  KernelEstimate e;
  e.path = "scalar";
  e.samples_per_iteration = 32;  // a warp: one sample per lane
  e.instructions = PerSampleInstructions(g, nullptr, fast_math);
  e.bytes_per_sample = GlobalBytesPerSample(g);
  return e;
}

KernelEstimate EstimateFusedMlp(const ir::Graph& g, const FusedMlpPlan& p, bool fp8) {
  KernelEstimate e;
  e.path = "fused-mlp";
  e.samples_per_iteration = p.samples_per_warp();
  FusedMlpCounts c = CountFusedMlp(p, fp8);
  std::set<int> chain = p.chain_nodes;
  double lane = PerSampleInstructions(g, &chain, true);
  const FusedLayer& first = p.layers.front();
  // Per sample and lane: the tile row (a pack per two elements, a 16-byte store per eight), the
  // output row's loads.
  lane += first.k_pad / 2.0 + first.k_pad / 8.0 + p.layers.back().n;
  double passes = p.samples_per_warp() / 32.0;
  double bias_loads = 0;
  for (const auto& l : p.layers) bias_loads += (l.n_pad / 8.0) * (fp8 ? 2 : 1);
  // Accumulator set-up and activations: a move per accumulator, the activation's formula.
  double accumulators = 0;
  for (const auto& l : p.layers)
    accumulators += p.m_tiles * (l.n_pad / 8.0) * 4 * (1 + (l.activations.empty() ? 0 : 1));
  e.mma = static_cast<double>(c.mma);
  e.instructions =
      c.mma + c.ldmatrix + c.cvt_e4m3 + c.pack + bias_loads + accumulators + lane * passes;
  e.wavefronts = (c.shared_bytes_read + c.shared_bytes_written) / 128.0;
  e.bytes_per_sample = GlobalBytesPerSample(g);
  return e;
}

KernelEstimate EstimateWmma(const ir::Graph& g, const TensorCorePlan& p, bool fast_math) {
  KernelEstimate e;
  e.path = "wmma";
  e.samples_per_iteration = 32;
  std::set<int> layer_nodes;
  for (const auto& l : p.layers) layer_nodes.insert(l.node);
  double lane = PerSampleInstructions(g, &layer_nodes, fast_math);
  double mma = 0, bytes = 0, instructions = 0;
  for (const auto& l : p.layers) {
    double row_tiles = (32.0 * l.rows + 15) / 16, kt = l.k_pad / 16.0, nt = l.n_pad / 16.0;
    mma += 2 * row_tiles * kt * nt;  // a 16x16x16 WMMA is two m16n8k16
    // A and B fragments from shared memory per row tile, C out and back in through it.
    bytes += row_tiles * kt * nt * (512 + 512) + 32.0 * l.rows * (2 * l.k_pad + 8 * l.n_pad);
    instructions += row_tiles * kt * nt * 4 + l.rows * (l.k_pad / 8.0 + l.n_pad / 2.0);
  }
  e.mma = mma;
  e.instructions = mma + instructions + lane;
  e.wavefronts = bytes / 128.0;
  e.bytes_per_sample = GlobalBytesPerSample(g);
  return e;
}

}  // namespace kiln::codegen::cuda
