#include "codegen/cuda/cuda_tensor_core.h"

#include <algorithm>
#include <array>
#include <cmath>

#include "codegen/c/c_names.h"
#include "codegen/c/emit_util.h"
#include "codegen/cuda/cuda_emit.h"
#include "ops/common.h"

namespace kiln::codegen::cuda {
namespace {

int64_t RoundUp(int64_t x, int64_t m) { return (x + m - 1) / m * m; }

constexpr int64_t kMaxRowsPerSample = 8;
constexpr int64_t kMaxPaddingFactor = 4;  // padded K x N at most this many times K x N
constexpr int64_t kMaxPadded = 1024;      // K and N; larger tiles exceed shared memory

// The layer when node n can run on tensor cores.
bool Eligible(const ir::Graph& g, int index, TensorCoreLayer* layer) {
  const ir::Node& n = g.nodes[index];
  bool gemm = n.op_type == "Gemm";
  if ((n.op_type != "MatMul" && !gemm) || !(n.domain.empty() || n.domain == "ai.onnx"))
    return false;
  if (n.inputs.size() < 2 || n.inputs[0] < 0 || n.inputs[1] < 0 || n.outputs.empty() ||
      n.outputs[0] < 0)
    return false;
  const ir::Value& a = g.values[n.inputs[0]];
  const ir::Value& b = g.values[n.inputs[1]];
  if (a.constant || !b.constant || b.type.dims.size() != 2 || a.type.dims.size() < 2) return false;
  const Dims& ad = a.type.dims;
  for (size_t k = 0; k + 2 < ad.size(); ++k)
    if (ad[k] != 1) return false;  // batch axes of a MatMul within the sample
  TensorCoreLayer l;
  l.node = index;
  l.trans_a = gemm && n.attr_int("transA", 0) != 0;
  l.trans_b = gemm && n.attr_int("transB", 0) != 0;
  l.alpha = gemm ? n.attr_float("alpha", 1) : 1;
  l.beta = gemm ? n.attr_float("beta", 1) : 1;
  l.bias_input = gemm && n.inputs.size() > 2 && n.inputs[2] >= 0 ? 2 : -1;
  l.rows = l.trans_a ? ad[ad.size() - 1] : ad[ad.size() - 2];
  l.k = l.trans_a ? ad[ad.size() - 2] : ad[ad.size() - 1];
  l.n = l.trans_b ? b.type.dims[0] : b.type.dims[1];
  if (l.rows < 1 || l.rows > kMaxRowsPerSample || l.k < 1 || l.n < 1) return false;
  if (l.trans_a && l.rows != 1) return false;  // A's rows are then strided: not worth a tile
  l.k_pad = RoundUp(l.k, 16);
  l.n_pad = RoundUp(l.n, 16);
  if (l.k_pad > kMaxPadded || l.n_pad > kMaxPadded) return false;
  if (l.k_pad * l.n_pad > kMaxPaddingFactor * l.k * l.n) return false;
  l.lda = l.k_pad + 8;
  l.ldb = l.n_pad + 8;
  l.ldc = l.n_pad + 4;
  *layer = l;
  return true;
}

std::string Int(int64_t v) { return std::to_string(v); }

// "(KILN_LANE_ROW(L) * rows + m) * ld + col": a lane's row of a tile.
std::string TileAt(const char* tile, const TensorCoreLayer& l, int64_t m, int64_t ld, int64_t col) {
  std::string row = l.rows == 1
                        ? "KILN_LANE_ROW(L)"
                        : "(KILN_LANE_ROW(L) * " + Int(l.rows) + (m ? " + " + Int(m) : "") + ")";
  return std::string(tile) + " + " + row + " * " + Int(ld) + (col ? " + " + Int(col) : "");
}

}  // namespace

int64_t MatrixMacs(const ir::Graph& g, const ir::Node& n) {
  if (n.op_type != "MatMul" && n.op_type != "Gemm" && n.op_type != "Conv") return 0;
  if (n.inputs.size() < 2 || n.inputs[0] < 0 || n.inputs[1] < 0 || n.outputs.empty() ||
      n.outputs[0] < 0)
    return 0;
  const Dims& out = g.values[n.outputs[0]].type.dims;
  const Dims& a = g.values[n.inputs[0]].type.dims;
  const Dims& b = g.values[n.inputs[1]].type.dims;
  if (out.empty() || a.empty() || b.size() < 2) return 0;
  if (n.op_type == "Conv") return NumElements(out) * NumElements(b) / std::max<int64_t>(b[0], 1);
  bool trans_a = n.op_type == "Gemm" && n.attr_int("transA", 0) != 0;
  return NumElements(out) * (trans_a ? a[a.size() - 2] : a.back());
}

TensorCorePlan PlanTensorCores(const ir::Graph& g) {
  TensorCorePlan p;
  int64_t staged = 0, a_tile = 0, c_tile = 0;
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    p.total_macs += MatrixMacs(g, g.nodes[i]);
    TensorCoreLayer l;
    if (!Eligible(g, static_cast<int>(i), &l)) continue;
    l.staged_offset =
        staged;  // k_pad * ldb halves: a multiple of 16, so every B is 32-byte aligned
    staged += l.k_pad * l.ldb;
    a_tile = std::max(a_tile, 32 * l.rows * l.lda * 2);
    c_tile = std::max(c_tile, 32 * l.rows * l.ldc * 4);
    p.eligible_macs += l.macs();
    p.layer_of_node[static_cast<int>(i)] = static_cast<int>(p.layers.size());
    p.layers.push_back(l);
  }
  p.staged_bytes = RoundUp(staged * 2, 128);
  p.a_tile_bytes = RoundUp(a_tile, 128);
  p.c_tile_bytes = RoundUp(c_tile, 128);
  return p;
}

std::vector<float> PackedB(const ir::Graph& g, const TensorCoreLayer& l) {
  const Tensor& b = *g.values[g.nodes[l.node].inputs[1]].constant;
  std::vector<float> out(static_cast<size_t>(l.k_pad * l.ldb), 0.0f);
  for (int64_t k = 0; k < l.k; ++k)
    for (int64_t n = 0; n < l.n; ++n)
      out[k * l.ldb + n] = static_cast<float>(
          l.alpha * c::ElementAsDouble(b, l.trans_b ? n * l.k + k : k * l.n + n));
  return out;
}

float E4M3ToFloat(uint8_t code) {
  int e = (code >> 3) & 15, m = code & 7;
  float v = e == 15 && m == 7 ? NAN
            : e == 0          ? std::ldexp(static_cast<float>(m), -9)
                              : std::ldexp(static_cast<float>(8 + m), e - 10);
  return (code & 0x80) ? -v : v;
}

uint8_t FloatToE4M3(float f) {
  static const std::array<float, 127> values = [] {  // codes 0x00..0x7e, increasing
    std::array<float, 127> v{};
    for (int c = 0; c < 127; ++c) v[c] = E4M3ToFloat(static_cast<uint8_t>(c));
    return v;
  }();
  if (std::isnan(f)) return 0x7f;
  uint8_t sign = std::signbit(f) ? 0x80 : 0;
  float a = std::fabs(f);
  if (a >= values.back()) return sign | 0x7e;  // saturate at 448
  int hi = static_cast<int>(std::upper_bound(values.begin(), values.end(), a) -
                            values.begin());  // values[hi] > a
  int lo = hi - 1;                            // values[lo] <= a
  float dl = a - values[lo], dh = values[hi] - a;
  int c = dl < dh ? lo : dh < dl ? hi : (lo % 2 == 0 ? lo : hi);  // ties to the even code
  return sign | static_cast<uint8_t>(c);
}

Status EmitTensorCorePut(EmitContext& ctx, const TensorCoreLayer& l) {
  ctx.Line("/* this lane's rows of A into the warp's tile, as half */");
  for (int64_t m = 0; m < l.rows; ++m)
    for (int64_t k0 = 0; k0 < l.k_pad; k0 += 8) {
      std::string args;
      for (int64_t k = k0; k < k0 + 8; ++k) {
        std::string v = "0.0f";
        if (k < l.k) {
          KILN_ASSIGN_OR_RETURN(v, ctx.In(0, c::Ix(l.trans_a ? k * l.rows + m : m * l.k + k)));
        }
        args += ", " + v;
      }
      ctx.Line("kiln_tc_put8(" + TileAt("kiln_a", l, m, l.lda, k0) + args + ");");
    }
  return OkStatus();
}

Status EmitTensorCoreGet(EmitContext& ctx, const TensorCoreLayer& l) {
  ctx.Line("/* this lane's rows of the product out of the warp's tile" +
           std::string(l.bias_input >= 0 ? ", plus the bias */" : " */"));
  std::vector<int64_t> bias_strides;
  if (l.bias_input >= 0)
    bias_strides = ops::BroadcastStrides(ctx.input_dims(l.bias_input), {l.rows, l.n});
  const char* lanes[] = {"x", "y", "z", "w"};
  for (int64_t m = 0; m < l.rows; ++m)
    for (int64_t n0 = 0; n0 < l.n; n0 += 4) {
      std::string t = ctx.Temp();
      ctx.Line("const kiln_f4 " + t + " = kiln_tc_get4(" + TileAt("kiln_c", l, m, l.ldc, n0) +
               ");");
      for (int64_t j = 0; j < 4 && n0 + j < l.n; ++j) {
        int64_t n = n0 + j;
        KILN_ASSIGN_OR_RETURN(std::string o, ctx.Out(0, c::Ix(m * l.n + n)));
        std::string v = t + "." + lanes[j];
        if (l.bias_input >= 0) {
          KILN_ASSIGN_OR_RETURN(std::string c,
                                ctx.In(l.bias_input, Flat({c::Ix(m), c::Ix(n)}, bias_strides)));
          v += l.beta == 1 ? " + " + c : " + " + c::CNumber(DType::kFloat32, l.beta) + " * " + c;
        }
        ctx.Line(o + " = " + v + ";");
      }
    }
  return OkStatus();
}

std::string TensorCoreCall(const TensorCoreLayer& l) {
  return "kiln_tc_matmul<" + Int(2 * l.rows) + ", " + Int(l.k_pad / 16) + ", " + Int(l.n_pad / 16) +
         ", " + Int(l.lda) + ", " + Int(l.ldb) + ", " + Int(l.ldc) + ">(kiln_a, tcw + " +
         Int(l.staged_offset) + ", kiln_c);";
}

std::string TensorCoreHelpers(bool fp8) {
  const auto& sources = EmbeddedCudaSources();
  return sources.at("wmma_helpers") + (fp8 ? sources.at("wmma_fp8_helpers") : std::string());
}

}  // namespace kiln::codegen::cuda
