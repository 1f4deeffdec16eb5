#include "codegen/cuda/cuda_fused_mlp.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>

#include "codegen/c/code_writer.h"
#include "codegen/c/emit_util.h"
#include "codegen/cuda/cuda_tensor_core.h"
#include "ir/half.h"
#include "ops/op_traits.h"

namespace kiln::codegen::cuda {
namespace {

constexpr int64_t kMaxWidth = 128;  // K and N padded; wider layers would spill the fragments

int64_t RoundUp(int64_t x, int64_t m) { return (x + m - 1) / m * m; }
std::string Int(int64_t v) { return std::to_string(v); }

bool DefaultDomain(const ir::Node& n) { return n.domain.empty() || n.domain == "ai.onnx"; }

// Elements of a value, -1 when not known.
int64_t Elements(const ir::Graph& g, int v) {
  const auto& t = g.values[v].type;
  return t.shape_known() ? NumElements(t.dims) : -1;
}

// A dense product with one row of A per sample: its K, N and B (k x n, alpha and transB folded).
bool DenseProduct(const ir::Graph& g, int index, FusedLayer* l) {
  const ir::Node& n = g.nodes[index];
  bool gemm = n.op_type == "Gemm";
  if ((n.op_type != "MatMul" && !gemm) || !DefaultDomain(n)) return false;
  if (n.inputs.size() < 2 || n.inputs[0] < 0 || n.inputs[1] < 0 || n.outputs.empty() ||
      n.outputs[0] < 0)
    return false;
  const ir::Value& a = g.values[n.inputs[0]];
  const ir::Value& b = g.values[n.inputs[1]];
  if (a.constant || !b.constant || b.type.dims.size() != 2 || a.type.dims.size() < 2) return false;
  if (gemm && n.attr_int("transA", 0) != 0) return false;
  const Dims& ad = a.type.dims;
  for (size_t k = 0; k + 1 < ad.size(); ++k)
    if (ad[k] != 1) return false;  // one row of A per sample
  bool trans_b = gemm && n.attr_int("transB", 0) != 0;
  l->k = ad.back();
  l->n = trans_b ? b.type.dims[0] : b.type.dims[1];
  if ((trans_b ? b.type.dims[1] : b.type.dims[0]) != l->k || l->k < 1 || l->n < 1) return false;
  double alpha = gemm ? n.attr_float("alpha", 1) : 1;
  const Tensor& bt = *b.constant;
  l->weight.assign(static_cast<size_t>(l->k * l->n), 0.0f);
  for (int64_t k = 0; k < l->k; ++k)
    for (int64_t j = 0; j < l->n; ++j)
      l->weight[k * l->n + j] =
          static_cast<float>(alpha * c::ElementAsDouble(bt, trans_b ? j * l->k + k : k * l->n + j));
  l->bias.assign(static_cast<size_t>(l->n), 0.0f);
  if (gemm && n.inputs.size() > 2 && n.inputs[2] >= 0) {
    const ir::Value& c = g.values[n.inputs[2]];
    int64_t ce = c.constant ? c.constant->size() : -1;
    if (ce != 1 && ce != l->n) return false;
    if (ce == l->n && !c.type.dims.empty() && c.type.dims.back() != l->n) return false;
    double beta = n.attr_float("beta", 1);
    for (int64_t j = 0; j < l->n; ++j)
      l->bias[j] = static_cast<float>(beta * c::ElementAsDouble(*c.constant, ce == 1 ? 0 : j));
  }
  l->product = index;
  l->nodes = {index};
  return true;
}

class ChainFinder {
 public:
  explicit ChainFinder(const ir::Graph& g) : g_(g), consumers_(g.values.size()) {
    for (size_t i = 0; i < g.nodes.size(); ++i) {
      for (int v : g.nodes[i].inputs)
        if (v >= 0) consumers_[v].push_back(static_cast<int>(i));
      for (int v : g.nodes[i].implicit_inputs)
        if (v >= 0) consumers_[v].push_back(static_cast<int>(i));
    }
    for (int v : g.outputs) graph_output_.insert(v);
  }

  // The node alone reads v, and v is not a graph output: v can stay inside the chain.
  int SoleConsumer(int v) const {
    if (graph_output_.count(v) || consumers_[v].size() != 1) return -1;
    return consumers_[v][0];
  }

  // The layer starting at product node `index`: its bias Add and activations follow while each
  // intermediate value has one reader. Returns the layer's last value, or -1.
  int Layer(int index, FusedLayer* l) const {
    if (!DenseProduct(g_, index, l)) return -1;
    int out = g_.nodes[index].outputs[0];
    if (Elements(g_, out) != l->n) return -1;
    bool gemm_bias = g_.nodes[index].op_type == "Gemm" && g_.nodes[index].inputs.size() > 2 &&
                     g_.nodes[index].inputs[2] >= 0;
    int next = SoleConsumer(out);
    if (!gemm_bias && next >= 0 && Bias(next, out, l)) {
      l->nodes.push_back(next);
      out = g_.nodes[next].outputs[0];
      next = SoleConsumer(out);
    }
    while (next >= 0) {
      const ir::Node& a = g_.nodes[next];
      if (!DefaultDomain(a) || !ops::HasTrait(a.domain, a.op_type, ops::kCudaUnary) ||
          a.outputs.empty() || a.outputs[0] < 0 || Elements(g_, a.outputs[0]) != l->n)
        break;
      int inputs = 0;
      for (int v : a.inputs) inputs += v >= 0;
      if (inputs != 1) break;
      l->nodes.push_back(next);
      l->activations.push_back(next);
      out = a.outputs[0];
      next = SoleConsumer(out);
    }
    return out;
  }

  const std::vector<int>& consumers(int v) const { return consumers_[v]; }

 private:
  // An Add of the product and a constant of n elements along the last axis.
  bool Bias(int index, int product_out, FusedLayer* l) const {
    const ir::Node& n = g_.nodes[index];
    if (n.op_type != "Add" || !DefaultDomain(n) || n.inputs.size() != 2 || n.outputs.empty() ||
        n.outputs[0] < 0)
      return false;
    int other = n.inputs[0] == product_out ? n.inputs[1] : n.inputs[0];
    if (other < 0 || other == product_out || !g_.values[other].constant) return false;
    const Tensor& b = *g_.values[other].constant;
    const Dims& d = b.dims();
    if (Elements(g_, n.outputs[0]) != l->n) return false;
    if (b.size() != l->n && b.size() != 1) return false;
    if (b.size() == l->n && (d.empty() || d.back() != l->n)) return false;
    for (int64_t j = 0; j < l->n; ++j)
      l->bias[j] = static_cast<float>(c::ElementAsDouble(b, b.size() == 1 ? 0 : j));
    return true;
  }

  const ir::Graph& g_;
  std::vector<std::vector<int>> consumers_;
  std::set<int> graph_output_;
};

// Every computed node that `v` depends on.
void Ancestors(const ir::Graph& g, int v, std::set<int>* nodes) {
  if (v < 0 || g.values[v].constant || g.values[v].producer < 0) return;
  int p = g.values[v].producer;
  if (!nodes->insert(p).second) return;
  for (int u : g.nodes[p].inputs) Ancestors(g, u, nodes);
  for (int u : g.nodes[p].implicit_inputs) Ancestors(g, u, nodes);
}

// Position of k (0..15) within its group of 16 in the fp8 staging: lane t's 32-bit ldmatrix
// element (positions 4t .. 4t + 3) holds k = 2t, 2t + 1, 2t + 8, 2t + 9.
int Fp8Position(int k) {
  int t = (k & 7) >> 1, e = (k & 1) + 2 * (k >> 3);
  return 4 * t + e;
}

void Lay(FusedMlpPlan* p, bool fp8) {
  int64_t at = 0;
  int64_t widest = 0;
  for (size_t i = 0; i < p->layers.size(); ++i) {
    FusedLayer& l = p->layers[i];
    bool last = i + 1 == p->layers.size();
    l.k_pad = RoundUp(l.k, 16);
    l.n_pad = RoundUp(l.n, last ? 8 : 16);
    widest = std::max({widest, l.k_pad, l.n_pad});
    // Rows of 16-byte chunks, an odd number of them: ldmatrix's eight rows hit distinct banks.
    l.b_row_bytes = fp8 ? l.k_pad + ((l.k_pad / 16) % 2 == 0 ? 16 : 0) : 2 * l.k_pad + 16;
    l.b_offset = at;
    at += l.n_pad * l.b_row_bytes;
    l.bias_offset = at;
    at += RoundUp(4 * l.n_pad, 16);
    if (fp8) {
      l.scale_offset = at;
      at += RoundUp(4 * l.n_pad, 16);
    }
  }
  p->staged_bytes = RoundUp(at, 128);
  p->m_tiles = widest <= 64 ? 4 : 2;
  p->a_row_bytes = 2 * p->layers.front().k_pad + 16;
  p->c_row_bytes = 4 * p->layers.back().n_pad + 16;
  int64_t rows = 16 * p->m_tiles;
  p->tile_bytes = RoundUp(std::max(rows * p->a_row_bytes, rows * p->c_row_bytes), 128);
}

std::vector<float> Fp8Scales(const FusedLayer& l) {
  std::vector<float> s(static_cast<size_t>(l.n_pad), 1.0f);
  for (int64_t j = 0; j < l.n; ++j) {
    float m = 0;
    for (int64_t k = 0; k < l.k; ++k) m = std::max(m, std::fabs(l.weight[k * l.n + j]));
    s[j] = m > 0 ? m / 448.0f : 1.0f;
  }
  return s;
}

void PutFloat(std::vector<unsigned char>* img, int64_t at, float f) {
  std::memcpy(img->data() + at, &f, 4);
}

}  // namespace

std::optional<FusedMlpPlan> PlanFusedMlp(const ir::Graph& g, bool fp8) {
  ChainFinder finder(g);
  FusedMlpPlan best;
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    FusedMlpPlan p;
    FusedLayer first;
    int out = finder.Layer(static_cast<int>(i), &first);
    if (out < 0) continue;
    p.input = g.nodes[i].inputs[0];
    // A layer fed by another layer's sole output is not a chain's start.
    int pi = g.values[p.input].producer;
    FusedLayer before;
    if (pi >= 0 && finder.Layer(pi, &before) >= 0 && finder.SoleConsumer(p.input) == (int)i)
      continue;
    p.layers.push_back(first);
    for (;;) {
      int next = finder.SoleConsumer(out);
      FusedLayer l;
      if (next < 0 || g.nodes[next].inputs[0] != out) break;
      int o = finder.Layer(next, &l);
      if (o < 0) break;
      p.layers.push_back(l);
      out = o;
    }
    p.output = out;
    for (const auto& l : p.layers) {
      p.chain_macs += l.macs();
      p.chain_nodes.insert(l.nodes.begin(), l.nodes.end());
    }
    if (p.chain_macs > best.chain_macs) best = std::move(p);
  }
  if (best.layers.empty()) return std::nullopt;
  for (const auto& l : best.layers)
    if (RoundUp(l.k, 16) > kMaxWidth || RoundUp(l.n, 16) > kMaxWidth) return std::nullopt;
  if (Elements(g, best.input) != best.layers.front().k) return std::nullopt;
  // The prologue is what the chain's input depends on; everything else is the epilogue, which
  // may read only the chain's result, its own values and constants (the prologue's slots are
  // reused by the next samples before the epilogue runs).
  std::set<int> prologue;
  Ancestors(g, best.input, &prologue);
  std::set<int> epilogue_values = {best.output};
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    int idx = static_cast<int>(i);
    if (prologue.count(idx) || best.chain_nodes.count(idx)) continue;
    const ir::Node& n = g.nodes[i];
    for (int v : n.inputs)
      if (v >= 0 && !g.values[v].constant && !epilogue_values.count(v)) return std::nullopt;
    for (int v : n.implicit_inputs)
      if (v >= 0 && !g.values[v].constant) return std::nullopt;
    for (int v : n.outputs)
      if (v >= 0) epilogue_values.insert(v);
  }
  for (int v : g.outputs)
    if (!epilogue_values.count(v)) return std::nullopt;  // a prologue value or a graph input
  for (const auto& n : g.nodes) best.total_macs += MatrixMacs(g, n);
  best.prologue_nodes = std::move(prologue);
  Lay(&best, fp8);
  return best;
}

std::vector<unsigned char> StagedImage(const FusedMlpPlan& p, bool fp8) {
  std::vector<unsigned char> img(static_cast<size_t>(p.staged_bytes), 0);
  for (const auto& l : p.layers) {
    std::vector<float> scale = fp8 ? Fp8Scales(l) : std::vector<float>();
    for (int64_t j = 0; j < l.n; ++j) {
      unsigned char* row = img.data() + l.b_offset + j * l.b_row_bytes;
      for (int64_t k = 0; k < l.k; ++k) {
        float w = l.weight[k * l.n + j];
        if (fp8) {
          row[(k / 16) * 16 + Fp8Position(static_cast<int>(k % 16))] = FloatToE4M3(w / scale[j]);
        } else {
          uint16_t h = FloatToHalfBits(w);
          std::memcpy(row + 2 * k, &h, 2);
        }
      }
    }
    for (int64_t j = 0; j < l.n; ++j) {
      PutFloat(&img, l.bias_offset + 4 * j, fp8 ? l.bias[j] / scale[j] : l.bias[j]);
      if (fp8) PutFloat(&img, l.scale_offset + 4 * j, scale[j]);
    }
  }
  return img;
}

bool ReluOnly(const ir::Graph& g, const FusedLayer& l) {
  return l.activations.size() == 1 && g.nodes[l.activations[0]].op_type == "Relu";
}

std::string FusedMlpHelpers(bool fp8) {
  std::string s = R"(#ifndef KILN_CUDA_MMA_
#define KILN_CUDA_MMA_
#ifdef __CUDACC__
#define KILN_DEV __device__ __forceinline__
#define KILN_SHARED(name) extern __shared__ __align__(128) unsigned char name[]
#define KILN_SYNCTHREADS() __syncthreads()
typedef struct kiln_f2 { float x, y; } kiln_f2;
KILN_DEV int kiln_lane_id(void) { return (int)(threadIdx.x & 31u); }
KILN_DEV void kiln_syncwarp(void) { __syncwarp(); }
/* Two floats as half2 (lo in the low half), round to nearest even; and with ReLU. */
KILN_DEV uint32_t kiln_pack(float lo, float hi) {
  uint32_t d;
  asm("cvt.rn.f16x2.f32 %0, %1, %2;" : "=r"(d) : "f"(hi), "f"(lo));
  return d;
}
KILN_DEV uint32_t kiln_pack_relu(float lo, float hi) {
  uint32_t d;
  asm("cvt.rn.relu.f16x2.f32 %0, %1, %2;" : "=r"(d) : "f"(hi), "f"(lo));
  return d;
}
/* D = A B + C on m16n8k16: half inputs, float accumulation; C and D in c. */
KILN_DEV void kiln_mma(float *c, const uint32_t *a, uint32_t b0, uint32_t b1) {
  asm("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "
      "{%8, %9}, {%0, %1, %2, %3};"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}
KILN_DEV void kiln_ldsm4(uint32_t *r, const void *row) {
  const unsigned s = (unsigned)__cvta_generic_to_shared(row);
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(s) : "memory");
}
KILN_DEV void kiln_ldsm2(uint32_t *r, const void *row) {
  const unsigned s = (unsigned)__cvta_generic_to_shared(row);
  asm volatile("ldmatrix.sync.aligned.m8n8.x2.shared.b16 {%0, %1}, [%2];"
               : "=r"(r[0]), "=r"(r[1]) : "r"(s) : "memory");
}
KILN_DEV void kiln_ldsm1(uint32_t *r, const void *row) {
  const unsigned s = (unsigned)__cvta_generic_to_shared(row);
  asm volatile("ldmatrix.sync.aligned.m8n8.x1.shared.b16 {%0}, [%1];" : "=r"(r[0]) : "r"(s) : "memory");
}
KILN_DEV void kiln_sts16(void *p, uint32_t a, uint32_t b, uint32_t c, uint32_t d) {
  *(uint4 *)p = make_uint4(a, b, c, d);
}
KILN_DEV void kiln_sts_f2(void *p, float a, float b) { *(float2 *)p = make_float2(a, b); }
KILN_DEV float kiln_lds_f(const void *p) { return *(const float *)p; }
KILN_DEV kiln_f2 kiln_lds_f2(const void *p) {
  const float2 v = *(const float2 *)p;
  const kiln_f2 r = {v.x, v.y};
  return r;
}
/* 16 bytes from global (read-only cache) to shared. */
KILN_DEV void kiln_stage16(void *dst, const unsigned char *src) {
  *(uint4 *)dst = __ldg((const uint4 *)src);
}
)";
  if (fp8)
    s += R"(/* Four E4M3 codes (bytes 0..3) as two half2: bytes 0, 1 into lo; 2, 3 into hi. */
KILN_DEV void kiln_e4m3x4(uint32_t w, uint32_t *lo, uint32_t *hi) {
  asm("{\n .reg .b16 l, h;\n mov.b32 {l, h}, %2;\n cvt.rn.f16x2.e4m3x2 %0, l;\n"
      " cvt.rn.f16x2.e4m3x2 %1, h;\n }" : "=r"(*lo), "=r"(*hi) : "r"(w));
}
)";
  s += R"(#else /* a host C++ compiler: the lane-accurate emulation (lane_emulator.h, above) */
#define KILN_DEV static inline
#define KILN_SHARED(name) unsigned char *name = kiln_emu::Emulator::Get().shared_memory()
#define KILN_SYNCTHREADS() kiln_emu::SyncThreads()
typedef struct kiln_f2 { float x, y; } kiln_f2;
KILN_DEV int kiln_lane_id(void) { return (int)(threadIdx.x & 31u); }
KILN_DEV void kiln_syncwarp(void) { kiln_emu::SyncWarp(); }
KILN_DEV uint32_t kiln_pack(float lo, float hi) {
  return (uint32_t)kiln_emu::FloatToHalf(lo) | ((uint32_t)kiln_emu::FloatToHalf(hi) << 16);
}
KILN_DEV uint32_t kiln_pack_relu(float lo, float hi) {
  return kiln_pack(lo < 0.0f ? 0.0f : lo, hi < 0.0f ? 0.0f : hi);
}
KILN_DEV void kiln_mma(float *c, const uint32_t *a, uint32_t b0, uint32_t b1) {
  kiln_emu::Mma16816(c, a, b0, b1);
}
KILN_DEV void kiln_ldsm4(uint32_t *r, const void *row) { kiln_emu::LdMatrix(r, row, 4); }
KILN_DEV void kiln_ldsm2(uint32_t *r, const void *row) { kiln_emu::LdMatrix(r, row, 2); }
KILN_DEV void kiln_ldsm1(uint32_t *r, const void *row) { kiln_emu::LdMatrix(r, row, 1); }
KILN_DEV void kiln_sts16(void *p, uint32_t a, uint32_t b, uint32_t c, uint32_t d) {
  const uint32_t v[4] = {a, b, c, d};
  kiln_emu::SharedStore(p, v, 16);
}
KILN_DEV void kiln_sts_f2(void *p, float a, float b) {
  const float v[2] = {a, b};
  kiln_emu::SharedStore(p, v, 8);
}
KILN_DEV float kiln_lds_f(const void *p) {
  float v;
  kiln_emu::SharedLoad(&v, p, 4);
  return v;
}
KILN_DEV kiln_f2 kiln_lds_f2(const void *p) {
  kiln_f2 v;
  kiln_emu::SharedLoad(&v, p, 8);
  return v;
}
KILN_DEV void kiln_stage16(void *dst, const unsigned char *src) { kiln_emu::SharedStore(dst, src, 16); }
)";
  if (fp8)
    s += R"(KILN_DEV void kiln_e4m3x4(uint32_t w, uint32_t *lo, uint32_t *hi) {
  uint32_t h[4];
  for (int k = 0; k < 4; ++k) h[k] = kiln_emu::FloatToHalf(kiln_emu::E4M3ToFloat((uint8_t)(w >> (8 * k))));
  *lo = h[0] | (h[1] << 16);
  *hi = h[2] | (h[3] << 16);
}
)";
  return s + "#endif\n#endif /* KILN_CUDA_MMA_ */\n";
}

namespace {

// The code of one layer: A fragments in `in` ([m][kt][4]), the result packed into `out` (the
// next layer's A) or, for the last layer, stored to the tile as float rows.
class LayerWriter : c::CodeWriter {
 public:
  LayerWriter(const FusedMlpPlan& p, const FusedLayer& l, bool fp8, bool last, bool relu,
              const std::string& act, std::string* s)
      : p_(p), l_(l), fp8_(fp8), last_(last), relu_(relu), act_(act), s_(*s) {}

  void Write(const std::string& in, const std::string& out) {
    int64_t kt = l_.k_pad / 16, pairs = l_.n_pad / 16;
    std::string m = Int(p_.m_tiles);
    if (!last_) Line("uint32_t " + out + "[" + m + "][" + Int(l_.n_pad / 16) + "][4];");
    Open("");
    Line("const unsigned char *kiln_b = kiln_sw + " + Int(l_.b_offset) + ";");
    Line("const unsigned char *kiln_bias = kiln_sw + " + Int(l_.bias_offset) + ";");
    if (fp8_) Line("const unsigned char *kiln_scale = kiln_sw + " + Int(l_.scale_offset) + ";");
    if (pairs > 0) {
      Line("KILN_UNROLL");
      Open("for (int q = 0; q < " + Int(pairs) + "; ++q)");
      Chunk(in, out, kt, 2, "q");
      Close();
    }
    if (l_.n_pad % 16) {
      Open("");
      Line("const int q = " + Int(pairs) + ";");
      Chunk(in, out, kt, 1, "q");
      Close();
    }
    Close();
    s_ += body();
  }

 private:
  // Columns 16q .. 16q + 8 tiles - 1 over all of K.
  void Chunk(const std::string& in, const std::string& out, int64_t kt, int tiles,
             const std::string& q) {
    std::string m = Int(p_.m_tiles), nt = Int(tiles);
    Line("float kiln_c[" + m + "][" + nt + "][4];");
    Line("KILN_UNROLL");
    Open("for (int j = 0; j < " + nt + "; ++j)");
    Line("const kiln_f2 kiln_b0 = kiln_lds_f2(kiln_bias + 4 * (16 * " + q +
         " + 8 * j + 2 * kiln_t));");
    Line("KILN_UNROLL");
    Open("for (int m = 0; m < " + m + "; ++m)");
    Line("kiln_c[m][j][0] = kiln_b0.x; kiln_c[m][j][1] = kiln_b0.y;");
    Line("kiln_c[m][j][2] = kiln_b0.x; kiln_c[m][j][3] = kiln_b0.y;");
    Close();
    Close();
    Line("KILN_UNROLL");
    Open("for (int kt = 0; kt < " + Int(kt) + "; ++kt)");
    Line("uint32_t kiln_w[4];");
    std::string row = Int(l_.b_row_bytes);
    if (!fp8_ && tiles == 2) {  // matrices: (n 0-7, k 0-7), (n 0-7, k 8-15), (n 8-15, k 0-7), ...
      Line("kiln_ldsm4(kiln_w, kiln_b + (16 * " + q +
           " + (kiln_lane & 7) + 8 * (kiln_lane >> 4)) * " + row +
           " + 2 * (16 * kt + 8 * ((kiln_lane >> 3) & 1)));");
    } else if (!fp8_) {
      Line("kiln_ldsm2(kiln_w, kiln_b + (16 * " + q + " + (kiln_lane & 7)) * " + row +
           " + 2 * (16 * kt + 8 * ((kiln_lane >> 3) & 1)));");
    } else {  // one 16-byte row of codes per n: matrix j is n-tile j
      Line("uint32_t kiln_e[2];");
      Line(tiles == 2 ? "kiln_ldsm2(kiln_e, kiln_b + (16 * " + q + " + (kiln_lane & 15)) * " + row +
                            " + 16 * kt);"
                      : "kiln_ldsm1(kiln_e, kiln_b + (16 * " + q + " + (kiln_lane & 7)) * " + row +
                            " + 16 * kt);");
      Line("kiln_e4m3x4(kiln_e[0], &kiln_w[0], &kiln_w[1]);");
      if (tiles == 2) Line("kiln_e4m3x4(kiln_e[1], &kiln_w[2], &kiln_w[3]);");
    }
    Line("KILN_UNROLL");
    Open("for (int m = 0; m < " + m + "; ++m)");
    Line("kiln_mma(kiln_c[m][0], " + in + "[m][kt], kiln_w[0], kiln_w[1]);");
    if (tiles == 2) Line("kiln_mma(kiln_c[m][1], " + in + "[m][kt], kiln_w[2], kiln_w[3]);");
    Close();
    Close();
    Finish(out, tiles, q);
  }

  // Scale (fp8), activation, then the next layer's A or the tile.
  void Finish(const std::string& out, int tiles, const std::string& q) {
    std::string m = Int(p_.m_tiles), nt = Int(tiles);
    Line("KILN_UNROLL");
    Open("for (int j = 0; j < " + nt + "; ++j)");
    if (fp8_)
      Line("const kiln_f2 kiln_s = kiln_lds_f2(kiln_scale + 4 * (16 * " + q +
           " + 8 * j + 2 * kiln_t));");
    // Padded columns are zeros before the activation; after it they must stay zeros only
    // where the next layer could see a non-finite value times a zero weight.
    bool mask = !last_ && !act_.empty() && l_.n % 16 != 0;
    if (mask)
      Line("const bool kiln_live0 = 16 * " + q + " + 8 * j + 2 * kiln_t < " + Int(l_.n) +
           ", kiln_live1 = 16 * " + q + " + 8 * j + 2 * kiln_t + 1 < " + Int(l_.n) + ";");
    Line("KILN_UNROLL");
    Open("for (int m = 0; m < " + m + "; ++m)");
    Line("float *kiln_cc = kiln_c[m][j];");
    if (fp8_)
      Line(
          "kiln_cc[0] *= kiln_s.x; kiln_cc[1] *= kiln_s.y; kiln_cc[2] *= kiln_s.x; "
          "kiln_cc[3] *= kiln_s.y;");
    for (int e = 0; e < 4; ++e) {  // ReLU alone goes with the packing, except on the last layer
      std::string v = "kiln_cc[" + Int(e) + "]";
      if (!act_.empty()) Line(v + " = " + act_ + "(" + v + ");");
      if (relu_ && last_) Line(v + " = " + v + " < 0.0f ? 0.0f : " + v + ";");
    }
    if (mask) {
      Line("if (!kiln_live0) kiln_cc[0] = kiln_cc[2] = 0.0f;");
      Line("if (!kiln_live1) kiln_cc[1] = kiln_cc[3] = 0.0f;");
    }
    if (last_) {
      std::string col = "4 * (16 * " + q + " + 8 * j + 2 * kiln_t)";
      std::string rr = Int(p_.c_row_bytes);
      Line("kiln_sts_f2(kiln_tile + (16 * m + kiln_g) * " + rr + " + " + col +
           ", kiln_cc[0], kiln_cc[1]);");
      Line("kiln_sts_f2(kiln_tile + (16 * m + kiln_g + 8) * " + rr + " + " + col +
           ", kiln_cc[2], kiln_cc[3]);");
    } else {
      // Accumulator rows g / g + 8, columns 2t, 2t + 1 of n-tile j are A's registers 2j, 2j + 1.
      std::string pack = relu_ ? "kiln_pack_relu" : "kiln_pack";
      Line(out + "[m][" + q + "][2 * j] = " + pack + "(kiln_cc[0], kiln_cc[1]);");
      Line(out + "[m][" + q + "][2 * j + 1] = " + pack + "(kiln_cc[2], kiln_cc[3]);");
    }
    Close();
    Close();
  }

  const FusedMlpPlan& p_;
  const FusedLayer& l_;
  bool fp8_, last_, relu_;
  std::string act_;
  std::string& s_;
};

}  // namespace

std::string FusedChainCode(const FusedMlpPlan& p, bool fp8, const ir::Graph& g,
                           const std::vector<std::string>& activation_functions) {
  std::string s;
  std::string m = Int(p.m_tiles);
  const FusedLayer& first = p.layers.front();
  int64_t kt0 = first.k_pad / 16;
  s += "  /* the chain's input rows as A fragments: matrices (rows 0-7, k 0-7), (rows 8-15, k "
       "0-7), (rows 0-7, k 8-15), (rows 8-15, k 8-15) */\n";
  s += "  uint32_t kiln_x0[" + m + "][" + Int(kt0) + "][4];\n";
  s += "  KILN_UNROLL\n  for (int m = 0; m < " + m + "; ++m) {\n";
  s += "    KILN_UNROLL\n    for (int kt = 0; kt < " + Int(kt0) + "; ++kt)\n";
  s += "      kiln_ldsm4(kiln_x0[m][kt], kiln_tile + (16 * m + (kiln_lane & 7) + 8 * ((kiln_lane "
       ">> 3) & 1)) * " +
       Int(p.a_row_bytes) + " + 2 * (16 * kt + 8 * (kiln_lane >> 4)));\n";
  s += "  }\n";
  for (size_t i = 0; i < p.layers.size(); ++i) {
    const FusedLayer& l = p.layers[i];
    bool last = i + 1 == p.layers.size();
    std::string what;
    for (int n : l.nodes) what += (what.empty() ? "" : ", ") + g.nodes[n].op_type;
    s += "  /* layer " + Int(static_cast<int64_t>(i)) + ": " + what + ", " + Int(l.k) + " -> " +
         Int(l.n) + " (padded " + Int(l.k_pad) + " -> " + Int(l.n_pad) + ") */\n";
    if (last) s += "  kiln_syncwarp(); /* every lane has loaded its A fragments from the tile */\n";
    LayerWriter w(p, l, fp8, last, ReluOnly(g, l), activation_functions[i], &s);
    w.Write("kiln_x" + Int(static_cast<int64_t>(i)), "kiln_x" + Int(static_cast<int64_t>(i) + 1));
  }
  s += "  kiln_syncwarp(); /* the output rows are in the tile */\n";
  return s;
}

FusedMlpCounts CountFusedMlp(const FusedMlpPlan& p, bool fp8) {
  FusedMlpCounts c;
  const FusedLayer& first = p.layers.front();
  int64_t mt = p.m_tiles;
  c.ldmatrix += mt * (first.k_pad / 16);
  c.shared_bytes_read += mt * (first.k_pad / 16) * 512;
  c.shared_bytes_written += 16 * mt * 2 * first.k_pad;
  for (size_t i = 0; i < p.layers.size(); ++i) {
    const FusedLayer& l = p.layers[i];
    int64_t kt = l.k_pad / 16, ntiles = l.n_pad / 8, chunks = (ntiles + 1) / 2;
    c.mma += mt * kt * ntiles;
    c.ldmatrix += kt * chunks;
    c.shared_bytes_read += kt * ntiles * (fp8 ? 128 : 256) + ntiles * 32 * (fp8 ? 2 : 1);
    if (fp8) c.cvt_e4m3 += 2 * kt * ntiles;
    if (i + 1 < p.layers.size()) c.pack += mt * ntiles * 2;
  }
  const FusedLayer& last = p.layers.back();
  c.shared_bytes_written += 16 * mt * 4 * last.n_pad;
  c.shared_bytes_read += 16 * mt * 4 * last.n;
  return c;
}

}  // namespace kiln::codegen::cuda
