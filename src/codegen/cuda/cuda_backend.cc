#include "codegen/cuda/cuda_backend.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <map>
#include <optional>
#include <set>

#include "codegen/c/c_names.h"
#include "codegen/c/emit_util.h"
#include "codegen/cuda/cuda_emit.h"
#include "codegen/cuda/cuda_fused_mlp.h"
#include "codegen/cuda/cuda_perf_model.h"
#include "codegen/cuda/cuda_tensor_core.h"
#include "compiler/compile.h"
#include "ir/half.h"
#include "ops/op_traits.h"
#include "passes/compress_constants.h"
#include "planner/plan_graph.h"

namespace kiln::codegen::cuda {

namespace {

using c::CommentText;
using c::FileName;
using c::Upper;

constexpr int kThreadsPerBlock = 128;
constexpr size_t kWeightAlignment = 16;  // bytes; float4 / 4-half loads need it

std::string NodeName(const ir::Graph& g, const ir::Node& n) {
  if (!n.name.empty()) return "node '" + n.name + "'";
  for (int o : n.outputs)
    if (o >= 0) return n.op_type + " node producing '" + g.values[o].name + "'";
  return n.op_type + " node";
}

// The helpers generated files share, each guarded so that several models compile together,
// and each emitted only where the model calls it (nvcc warns about unused static functions).
const char* kPrelude = R"(#ifndef KILN_CUDA_HELPERS_
#define KILN_CUDA_HELPERS_
#ifdef __CUDACC__
#include <cuda_fp16.h>
#define KILN_HD __host__ __device__
#define KILN_UNROLL _Pragma("unroll")
#define KILN_NO_UNROLL _Pragma("unroll 1")
#else /* a host C++ compiler: the per-sample code runs on the CPU (KILN_CUDA_HOST_CHECK) */
#define KILN_HD
#define KILN_UNROLL
#define KILN_NO_UNROLL
#endif
typedef struct kiln_f4 { float x, y, z, w; } kiln_f4;
#endif /* KILN_CUDA_HELPERS_ */
)";

// (function name, text); weights go through the read-only data cache, four at a time where
// 16-byte aligned; IEEE half weights (--precision fp16) are widened to float on load.
const std::vector<std::pair<std::string, std::string>>& Helpers() {
  static const auto* h = new std::vector<std::pair<std::string, std::string>>{
      {"kiln_ld", R"(#ifndef KILN_CUDA_LD_
#define KILN_CUDA_LD_
KILN_HD static inline float kiln_ld(const float *p) {
#ifdef __CUDA_ARCH__
  return __ldg(p);
#else
  return *p;
#endif
}
#endif
)"},
      {"kiln_ld4", R"(#ifndef KILN_CUDA_LD4_
#define KILN_CUDA_LD4_
KILN_HD static inline kiln_f4 kiln_ld4(const float *p) {
#ifdef __CUDA_ARCH__
  const float4 v = __ldg(reinterpret_cast<const float4 *>(p));
  kiln_f4 r = {v.x, v.y, v.z, v.w};
#else
  kiln_f4 r = {p[0], p[1], p[2], p[3]};
#endif
  return r;
}
#endif
)"},
      {"kiln_h2f", R"(#ifndef KILN_CUDA_H2F_
#define KILN_CUDA_H2F_
KILN_HD static inline float kiln_h2f(unsigned short h) {
#ifdef __CUDA_ARCH__
  return __half2float(__ushort_as_half(h));
#else
  const unsigned e = (h >> 10) & 31u, m = h & 1023u;
  const float v = e == 0 ? ldexpf((float)m, -24) : e == 31 ? (m ? NAN : INFINITY) : ldexpf((float)(m | 1024u), (int)e - 25);
  return (h & 0x8000u) ? -v : v;
#endif
}
#endif
)"},
      {"kiln_ldh", R"(#ifndef KILN_CUDA_LDH_
#define KILN_CUDA_LDH_
KILN_HD static inline float kiln_ldh(const unsigned short *p) {
#ifdef __CUDA_ARCH__
  return kiln_h2f(__ldg(p));
#else
  return kiln_h2f(*p);
#endif
}
#endif
)"},
      {"kiln_ldh4", R"(#ifndef KILN_CUDA_LDH4_
#define KILN_CUDA_LDH4_
KILN_HD static inline kiln_f4 kiln_ldh4(const unsigned short *p) {
#ifdef __CUDA_ARCH__
  const uint2 v = __ldg(reinterpret_cast<const uint2 *>(p));
  const float2 a = __half22float2(*reinterpret_cast<const __half2 *>(&v.x));
  const float2 b = __half22float2(*reinterpret_cast<const __half2 *>(&v.y));
  kiln_f4 r = {a.x, a.y, b.x, b.y};
#else
  kiln_f4 r = {kiln_h2f(p[0]), kiln_h2f(p[1]), kiln_h2f(p[2]), kiln_h2f(p[3])};
#endif
  return r;
}
#endif
)"},
  };
  return *h;
}

// fp16 / fp8 (tolerance 1e-2): Sin, Cos and Exp through sin.approx / cos.approx / ex2.approx, an
// abs. error of about 2^-21 for |x| <= pi, growing slowly beyond, instead of libm's 20-40
// instructions a call; libm on the host.
const std::vector<std::pair<std::string, std::string>>& FastMathHelpers() {
  static const auto* h = [] {
    auto* v = new std::vector<std::pair<std::string, std::string>>;
    for (const char* f : {"sinf", "cosf", "expf"}) {
      std::string name = std::string("kiln_fast_") + f, guard = "KILN_CUDA_FAST_" + Upper(f) + "_";
      std::string sig = "KILN_HD static inline float " + name + "(float x) { return ";
      v->push_back({name, "#ifndef " + guard + "\n#define " + guard + "\n#ifdef __CUDA_ARCH__\n" +
                              sig + "__" + f + "(x); }\n#else\n" + sig + f +
                              "(x); }\n#endif\n#endif\n"});
    }
    return v;
  }();
  return *h;
}

class Generator {
 public:
  // tc: the tensor-core layers, or nullptr for the scalar path.
  Generator(const compiler::Program& p, const CompileOptions& o,
            const passes::ConstantReport& report, TensorCorePlan* tc, FusedMlpPlan* fused,
            std::string prediction)
      : model_(p.model),
        g_(*p.model.graph),
        plan_(p.main().plan),
        o_(o),
        upper_(Upper(o.name)),
        half_(o.precision != Precision::kFloat32),
        tc_(tc),
        fused_(fused),
        prediction_(std::move(prediction)) {
    for (const auto& e : report.encodings) enc_[e.value] = e;
    for (const auto& n : g_.nodes) {
      bool matrix = n.op_type == "MatMul" || n.op_type == "Gemm" || n.op_type == "Conv";
      if (matrix && n.inputs.size() > 1 && n.inputs[1] >= 0) matrix_weights_.insert(n.inputs[1]);
    }
  }

  Expected<CompiledCuda> Run() {
    std::vector<int> feeds = g_.RuntimeInputs();
    c::NameScope in_names, out_names;
    for (int v : feeds) in_members_.push_back(in_names.Take(g_.values[v].name));
    for (int v : g_.outputs) out_members_.push_back(out_names.Take(g_.values[v].name));

    AssignSlots();
    if (tc_) PackTensorCoreWeights();
    if (fused_) {
      AlignWeights();
      staged_at_ = static_cast<int64_t>(weights_.size());
      std::vector<unsigned char> img = StagedImage(*fused_, o_.precision == Precision::kFloat8);
      weights_.insert(weights_.end(), img.begin(), img.end());
      weight_list_.push_back(
          {"the fused layers' B, biases and scales, as staged in shared memory",
           static_cast<size_t>(staged_at_),
           {static_cast<int64_t>(img.size())},
           o_.precision == Precision::kFloat8 ? "e4m3 / float" : "half / float"});
      KILN_RETURN_IF_ERROR(BuildFused(feeds));
    } else {
      KILN_RETURN_IF_ERROR(BuildSegments(feeds));
    }

    CompiledCuda result;
    for (int v : feeds) result.inputs.push_back(g_.values[v]);
    for (int v : g_.outputs) result.outputs.push_back(g_.values[v]);
    result.weight_bytes = weights_.size();
    result.graph = model_.graph;
    result.plan = plan_;
    result.files.push_back({o_.name + ".h", Header()});
    result.files.push_back({o_.name + ".cu", Source()});
    return result;
  }

 private:
  // The sample code in segments: per-lane code, then (tensor-core path) a warp step, and so on.
  Status BuildSegments(const std::vector<int>& feeds) {
    segments_.assign(1, "");
    std::string* body = &segments_.back();
    KILN_ASSIGN_OR_RETURN(*body, InputCopies(feeds));
    for (size_t p = 0; p < plan_.schedule.order.size(); ++p) {
      const ir::Node& n = g_.nodes[plan_.schedule.order[p]];
      std::string shapes;
      for (int v : n.outputs)
        if (v >= 0) {
          shapes += ' ';
          shapes += DimsToString(g_.values[v].type.dims);
        }
      auto tc_layer = tc_ ? tc_->layer_of_node.find(plan_.schedule.order[p])
                          : std::map<int, int>::const_iterator();
      bool on_tensor_cores = tc_ && tc_layer != tc_->layer_of_node.end();
      *body += "  /* " + CommentText(NodeName(g_, n)) + ": " + n.op_type + " ->" + shapes +
               (plan_.buffers.is_noop[p] ? " (a view of its input: no code)" : "") +
               (on_tensor_cores ? " (tensor cores)" : "") + " */\n";
      if (plan_.buffers.is_noop[p]) continue;
      if (on_tensor_cores) {
        const TensorCoreLayer& layer = tc_->layers[tc_layer->second];
        KILN_ASSIGN_OR_RETURN(std::string put, EmitNode(n, [&](EmitContext& c) {
                                return EmitTensorCorePut(c, layer);
                              }));
        *body += "  {\n" + put + "  }\n";
        segments_.push_back("  KILN_SYNCWARP();\n  " + TensorCoreCall(layer) +
                            "\n  KILN_SYNCWARP();\n");
        KILN_ASSIGN_OR_RETURN(std::string get, EmitNode(n, [&](EmitContext& c) {
                                return EmitTensorCoreGet(c, layer);
                              }));
        segments_.push_back("  {\n" + get + "  }\n");
        body = &segments_.back();
        continue;
      }
      KILN_ASSIGN_OR_RETURN(std::string text, EmitNode(n, nullptr));
      *body += "  {\n" + text + "  }\n";
    }
    if (tc_)
      *body +=
          "  const int64_t i = base + KILN_LANE_ROW(L);\n  if (i >= n) continue; /* a lane past "
          "the last sample */\n";
    KILN_ASSIGN_OR_RETURN(std::string stores, OutputStores());
    *body += stores;
    for (const auto& seg : segments_) body_ += seg;
    return OkStatus();
  }

  // Sample i's inputs into their slots.
  Expected<std::string> InputCopies(const std::vector<int>& feeds) {
    std::string s;
    for (size_t k = 0; k < feeds.size(); ++k) {
      int v = feeds[k];
      int64_t e = NumElements(g_.values[v].type.dims);
      if (!slot_of_.count(v)) {  // read by no node
        s += "  /* input '" + CommentText(g_.values[v].name) + "' is not used */\n";
        continue;
      }
      KILN_ASSIGN_OR_RETURN(Loc l, Locate(v));
      s += "  /* input '" + CommentText(g_.values[v].name) + "' into its slot */\n";
      s += "  " + Unroll(v) + "\n  for (int k = 0; k < " + std::to_string(e) + "; ++k) " + l.slot +
           "[" + (l.offset ? std::to_string(l.offset) + " + " : "") + "k] = in_" + in_members_[k] +
           "[i * " + std::to_string(e) + " + k];\n";
    }
    return s;
  }

  // Sample i's outputs out of their slots.
  Expected<std::string> OutputStores() {
    std::string s;
    for (size_t k = 0; k < g_.outputs.size(); ++k) {
      int v = g_.outputs[k];
      int64_t e = NumElements(g_.values[v].type.dims);
      KILN_ASSIGN_OR_RETURN(Loc l, Locate(v));
      if (l.kind != Loc::Kind::kSlot)
        return Error("output '" + g_.values[v].name +
                     "' is a constant; --target cuda computes its outputs");
      s += "  " + Unroll(v) + "\n  for (int k = 0; k < " + std::to_string(e) + "; ++k) out_" +
           out_members_[k] + "[i * " + std::to_string(e) + " + k] = " + l.slot + "[" +
           (l.offset ? std::to_string(l.offset) + " + " : "") + "k];\n";
    }
    return s;
  }

  // The fused-MLP path: the prologue per lane into the tile, the chain in registers, the
  // epilogue per lane out of the tile (cuda_fused_mlp.h).
  Status BuildFused(const std::vector<int>& feeds) {
    const FusedMlpPlan& p = *fused_;
    KILN_ASSIGN_OR_RETURN(std::string prologue, InputCopies(feeds));
    std::string epilogue;
    for (size_t k = 0; k < plan_.schedule.order.size(); ++k) {
      int index = plan_.schedule.order[k];
      const ir::Node& n = g_.nodes[index];
      if (p.chain_nodes.count(index)) continue;
      std::string* body = p.prologue_nodes.count(index) ? &prologue : &epilogue;
      *body += "  /* " + CommentText(NodeName(g_, n)) + ": " + n.op_type +
               (plan_.buffers.is_noop[k] ? " (a view of its input: no code)" : "") + " */\n";
      if (plan_.buffers.is_noop[k]) continue;
      KILN_ASSIGN_OR_RETURN(std::string text, EmitNode(n, nullptr));
      *body += "  {\n" + text + "  }\n";
    }
    // The chain's input row into the tile as half, zero-padded to K_pad.
    KILN_ASSIGN_OR_RETURN(Loc in, Locate(p.input));
    const FusedLayer& first = p.layers.front();
    std::string at = in.slot + "[" + (in.offset ? std::to_string(in.offset) + " + " : "");
    prologue += "  /* the chain's input row into the warp's tile, as half */\n";
    for (int64_t q = 0; q < first.k_pad / 8; ++q) {
      std::string args;
      for (int64_t j = 0; j < 8; j += 2) {
        auto el = [&](int64_t k) {
          return k < first.k ? at + std::to_string(k) + "]" : std::string("0.0f");
        };
        args += ", kiln_pack(" + el(8 * q + j) + ", " + el(8 * q + j + 1) + ")";
      }
      prologue += "  kiln_sts16(kiln_tile + kiln_row * " + std::to_string(p.a_row_bytes) +
                  (q ? " + " + std::to_string(16 * q) : "") + args + ");\n";
    }
    KILN_ASSIGN_OR_RETURN(Loc out, Locate(p.output));
    const FusedLayer& last = p.layers.back();
    std::string read = "  /* the chain's output row out of the warp's tile */\n  KILN_UNROLL\n" +
                       std::string("  for (int k = 0; k < ") + std::to_string(last.n) + "; ++k) " +
                       out.slot + "[" + (out.offset ? std::to_string(out.offset) + " + " : "") +
                       "k] = kiln_lds_f(kiln_tile + kiln_row * " + std::to_string(p.c_row_bytes) +
                       " + 4 * k);\n";
    epilogue = read + epilogue;
    KILN_ASSIGN_OR_RETURN(std::string stores, OutputStores());
    std::vector<std::string> acts;
    for (size_t i = 0; i < p.layers.size(); ++i) {
      KILN_ASSIGN_OR_RETURN(std::string f, ActivationFunction(p.layers[i], i));
      acts.push_back(f);
    }
    std::string chain = FusedChainCode(p, o_.precision == Precision::kFloat8, g_, acts);
    std::string passes = std::to_string(p.m_tiles / 2);
    body_ = "  kiln_syncwarp(); /* the previous samples' reads of the tile are done */\n";
    body_ += "  KILN_NO_UNROLL\n  for (int kiln_p = 0; kiln_p < " + passes +
             "; ++kiln_p) { /* the prologue: one sample per lane and pass */\n";
    body_ += "  const int kiln_row = 32 * kiln_p + kiln_lane;\n";
    body_ += "  const int64_t row = base + kiln_row, i = row < n ? row : n - 1;\n";
    body_ += prologue + "  }\n  kiln_syncwarp(); /* the input rows are in the tile */\n";
    body_ += chain;
    body_ += "  KILN_NO_UNROLL\n  for (int kiln_p = 0; kiln_p < " + passes +
             "; ++kiln_p) { /* the epilogue: one sample per lane and pass */\n";
    body_ += "  const int kiln_row = 32 * kiln_p + kiln_lane;\n";
    body_ += "  const int64_t i = base + kiln_row;\n";
    body_ += epilogue + "  if (i < n) {\n" + stores + "  }\n  }\n";
    return OkStatus();
  }

  // A float -> float function applying a layer's activations (not ReLU alone, which the packing
  // does), or "".
  Expected<std::string> ActivationFunction(const FusedLayer& l, size_t index) {
    if (l.activations.empty() || ReluOnly(g_, l)) return std::string();
    static const std::map<std::string, std::string> fast = {
        {"Sin", "kiln_fast_sinf"}, {"Cos", "kiln_fast_cosf"}, {"Exp", "kiln_fast_expf"}};
    std::string name = "kiln_" + o_.name + "_act" + std::to_string(index);
    std::string s = "KILN_DEV float " + name + "(float x) {\n";
    for (int a : l.activations) {
      const ir::Node& n = g_.nodes[a];
      auto f = fast.find(n.op_type);
      if (f != fast.end()) {
        s += "  x = " + f->second + "(x);\n";
        continue;
      }
      c::NodeContext cctx(g_, n, model_.OpsetFor(n.domain));
      KILN_ASSIGN_OR_RETURN(std::string e, c::UnaryExpr(cctx, DType::kFloat32, "x"));
      s += "  x = " + e + ";\n";
    }
    activation_defs_ += s + "  return x;\n}\n";
    return name;
  }
  // Every colour of the planner's interference colouring becomes one per-thread array. The
  // colouring planner lays its colours out end to end, so the buffers at one offset (alias
  // groups resolved to their root) are one colour; the slot is as long as its longest member.
  void AssignSlots() {
    const auto& bufs = plan_.plan.buffers;
    std::map<size_t, int> slot_at;
    for (size_t b = 0; b < bufs.size(); ++b) {
      int r = static_cast<int>(b);
      size_t off = 0;
      while (bufs[r].alias_of >= 0) {
        off += bufs[r].alias_offset;
        r = bufs[r].alias_of;
      }
      auto it = slot_at.find(bufs[r].offset);
      if (it == slot_at.end()) {
        it = slot_at.emplace(bufs[r].offset, static_cast<int>(slots_.size())).first;
        slots_.push_back({});
      }
      Slot& s = slots_[it->second];
      int v = bufs[b].value;
      int64_t first = static_cast<int64_t>(off / sizeof(float));
      s.elements = std::max(s.elements, first + NumElements(g_.values[v].type.dims));
      s.values.push_back(g_.values[v].name);
      slot_of_[v] = {it->second, first};
    }
  }

  // The pragma for a copy loop over value v's slot.
  std::string Unroll(int v) const {
    auto it = slot_of_.find(v);
    bool small = it != slot_of_.end() &&
                 slots_[it->second.first].elements <= EmitContext::kRegisterSlotLimit;
    return small ? "KILN_UNROLL" : "KILN_NO_UNROLL";
  }

  Expected<Loc> Locate(int v) {
    auto it = slot_of_.find(v);
    if (it != slot_of_.end()) {
      Loc l;
      l.slot = "slot" + std::to_string(it->second.first) +
               (tc_ ? "[L]" : "");  // lane L's copy on the host
      l.offset = it->second.second;
      return l;
    }
    const ir::Value& val = g_.values[v];
    if (!val.constant)
      return Error("tensor '" + val.name + "' has no slot (its size is not known at compile time)");
    auto e = enc_.find(v);
    Loc l;
    if (e != enc_.end() && e->second.kind == passes::ConstantEncoding::Kind::kDuplicate &&
        e->second.duplicate_of >= 0)
      return Locate(e->second.duplicate_of);
    if (e != enc_.end() && e->second.kind == passes::ConstantEncoding::Kind::kSplat) {
      l.kind = Loc::Kind::kSplat;
      l.start = e->second.start;
      return l;
    }
    if (e != enc_.end() && e->second.kind == passes::ConstantEncoding::Kind::kArithmetic) {
      l.kind = Loc::Kind::kArithmetic;
      l.start = e->second.start;
      l.step = e->second.step;
      return l;
    }
    l.kind = Loc::Kind::kWeight;
    auto w = weight_at_.find(v);
    if (w != weight_at_.end()) {
      l.offset = w->second;
      l.half = half_ && matrix_weights_.count(v);
      return l;
    }
    // Appended once, 16-byte aligned, as float or half whatever the stored dtype. With fp16 only
    // matrix and filter weights are halved; biases, scales and encoding frequencies (a sin/cos
    // encoding's phase error grows with the frequency) stay float.
    const Tensor& t = *val.constant;
    l.half = half_ && matrix_weights_.count(v);
    size_t es = l.half ? 2 : 4;
    AlignWeights();
    l.offset = static_cast<int64_t>(weights_.size() / es);
    weight_at_[v] = l.offset;
    weight_list_.push_back({val.name, weights_.size(), t.dims(), l.half ? "half" : "float"});
    for (int64_t i = 0; i < t.size(); ++i) {
      float f = static_cast<float>(c::ElementAsDouble(t, i));
      unsigned char b[4];
      if (l.half) {
        uint16_t h = FloatToHalfBits(f);
        std::memcpy(b, &h, 2);
      } else {
        std::memcpy(b, &f, 4);
      }
      weights_.insert(weights_.end(), b, b + es);
    }
    return l;
  }

  // The node's code by its op's emitter, or by `emit` where given (the tensor-core steps).
  Expected<std::string> EmitNode(const ir::Node& n, const EmitFn& emit) {
    auto fail = [&](const std::string& msg) {
      return Error(NodeName(g_, n) + " (" + n.op_type + "): " + msg);
    };
    for (int v : n.outputs) {
      if (v < 0) continue;
      const ir::Value& val = g_.values[v];
      if (val.type.dtype != DType::kFloat32)
        return fail("output '" + val.name + "' has element type " +
                    std::string(DTypeName(val.type.dtype)) +
                    "; --target cuda computes float tensors only");
    }
    const EmitFn* fn = FindEmitter(n.domain, n.op_type);
    bool small = true;
    for (const auto* vals : {&n.inputs, &n.outputs})
      for (int v : *vals) {
        auto it = v >= 0 ? slot_of_.find(v) : slot_of_.end();
        if (it != slot_of_.end() &&
            slots_[it->second.first].elements > EmitContext::kRegisterSlotLimit)
          small = false;
      }
    EmitContext ctx(g_, n, model_.OpsetFor(n.domain), small, [this](int v) { return Locate(v); });
    ctx.SetFastMath(half_);
    Status st = emit ? emit(ctx) : (*fn)(ctx);
    if (!st.ok()) return fail(st.message());
    return ctx.body();
  }

  std::string Banner(const std::string& what) const {
    std::string s = c::BannerOpening(what, o_.kiln_version, o_.command_line,
                                     o_.source.empty() ? FileName(model_.source_path) : o_.source) +
                    "\n";
    const char* precision =
        o_.precision == Precision::kFloat32 ? "fp32 (weights and arithmetic in float)"
        : o_.precision == Precision::kFloat16
            ? "fp16 (matrix and filter weights stored as IEEE half, arithmetic in float)"
            : "fp8 (tensor-core weights stored as E4M3 with a per-tensor scale, other matrix and "
              "filter weights as half)";
    s += " * precision: " + std::string(precision) + "\n";
    if (fused_) {
      int64_t pct = fused_->total_macs ? 100 * fused_->chain_macs / fused_->total_macs : 100;
      s += " * tensor cores: a fused MLP of " + std::to_string(fused_->layers.size()) +
           " layers (" + std::to_string(pct) + "% of the multiply-adds) on mma.sync.m16n8k16,\n" +
           " *   half inputs, float accumulation, activations in registers; " +
           std::to_string(fused_->samples_per_warp()) + " samples per warp\n";
    }
    s += " * predicted: " + prediction_ + "\n";
    if (tc_) {
      int64_t pct = tc_->total_macs ? 100 * tc_->eligible_macs / tc_->total_macs : 100;
      s += " * tensor cores: " + std::to_string(tc_->layers.size()) + " matrix products (" +
           std::to_string(pct) +
           "% of the multiply-adds) on WMMA 16x16x16,\n *   half inputs, float accumulation\n";
    }
    s += " */\n";
    return s;
  }

  std::string Header() const {
    std::string n = o_.name, u = upper_, guard = "KILN_" + u + "_CUDA_H_";
    std::string s = Banner(n + ".h: the interface of the CUDA kernel of model " + n + ".");
    s += "#ifndef " + guard + "\n#define " + guard +
         "\n\n#include <stddef.h>\n#include <stdint.h>\n";
    s += "#ifndef KILN_CUDA_HOST_CHECK\n#include <cuda_runtime_api.h>\n#endif\n\n";
    s += "#ifdef __cplusplus\nextern \"C\" {\n#endif\n\n";
    s += c::kStatusCodeDefines;
    s += R"(#ifndef KILN_ERROR_CUDA
#define KILN_ERROR_CUDA 7                 /* a CUDA runtime call failed (cudaGetLastError tells which) */
#define KILN_ERROR_INVALID_SIZE 8         /* the sample count is negative or too large for one launch */
#endif

)";
    const auto feeds = g_.RuntimeInputs();
    s += "/* Device pointers; sample i occupies elements [i * ELEMENTS, (i + 1) * ELEMENTS). */\n";
    s += "struct kiln_" + n + "_inputs {\n";
    for (size_t k = 0; k < feeds.size(); ++k)
      s += "  const float *" + in_members_[k] + "; /* " + CommentText(g_.values[feeds[k]].name) +
           ": float32" + DimsToString(g_.values[feeds[k]].type.dims) + " per sample */\n";
    if (feeds.empty()) s += "  const void *none; /* the model has none */\n";
    s += "};\nstruct kiln_" + n + "_outputs {\n";
    for (size_t k = 0; k < g_.outputs.size(); ++k)
      s += "  float *" + out_members_[k] + "; /* " + CommentText(g_.values[g_.outputs[k]].name) +
           ": float32" + DimsToString(g_.values[g_.outputs[k]].type.dims) + " per sample */\n";
    s += "};\n\n";
    for (size_t k = 0; k < feeds.size(); ++k)
      s += "#define KILN_" + u + "_INPUT" + std::to_string(k) + "_ELEMENTS " +
           std::to_string(NumElements(g_.values[feeds[k]].type.dims)) + " /* " +
           CommentText(g_.values[feeds[k]].name) + " */\n";
    for (size_t k = 0; k < g_.outputs.size(); ++k)
      s += "#define KILN_" + u + "_OUTPUT" + std::to_string(k) + "_ELEMENTS " +
           std::to_string(NumElements(g_.values[g_.outputs[k]].type.dims)) + " /* " +
           CommentText(g_.values[g_.outputs[k]].name) + " */\n";
    s += "#define KILN_" + u + "_WEIGHT_BYTES " + std::to_string(weights_.size()) + "\n";
    if (!tc_ && !fused_)
      s += "#define KILN_" + u + "_THREADS_PER_BLOCK " + std::to_string(kThreadsPerBlock) + "\n";
    if (fused_) {
      s += "/* The fused-MLP path: warps of " + std::to_string(fused_->samples_per_warp()) +
           " samples; a block's shared memory holds the staged weights and each\n"
           " * warp's tile. WARPS_PER_BLOCK may be set at build time (-D; at most 32, and "
           "SHARED_BYTES at most\n * the device's 227 KB). */\n";
      s += "#ifndef KILN_" + u + "_WARPS_PER_BLOCK\n#define KILN_" + u + "_WARPS_PER_BLOCK " +
           std::to_string(FusedMlpPlan::kWarpsPerBlock) + "\n#endif\n";
      s += "#define KILN_" + u + "_THREADS_PER_BLOCK (32 * KILN_" + u + "_WARPS_PER_BLOCK)\n";
      s += "#define KILN_" + u + "_SAMPLES_PER_WARP " + std::to_string(fused_->samples_per_warp()) +
           "\n";
      s += "#define KILN_" + u + "_STAGED_BYTES " + std::to_string(fused_->staged_bytes) + "\n";
      s += "#define KILN_" + u + "_TILE_BYTES " + std::to_string(fused_->tile_bytes) + "\n";
      s += "#define KILN_" + u + "_SHARED_BYTES (KILN_" + u + "_STAGED_BYTES + KILN_" + u +
           "_WARPS_PER_BLOCK * KILN_" + u + "_TILE_BYTES)\n";
    }
    if (tc_) {
      s += "/* The tensor-core path: warps of 32 samples; a block's shared memory holds the staged "
           "weights and\n"
           " * each warp's tiles. WARPS_PER_BLOCK may be set at build time (-D; at most 32, and "
           "SHARED_BYTES at\n"
           " * most the device's 227 KB). */\n";
      s += "#ifndef KILN_" + u + "_WARPS_PER_BLOCK\n#define KILN_" + u + "_WARPS_PER_BLOCK " +
           std::to_string(TensorCorePlan::kWarpsPerBlock) + "\n#endif\n";
      s += "#define KILN_" + u + "_THREADS_PER_BLOCK (32 * KILN_" + u + "_WARPS_PER_BLOCK)\n";
      s += "#define KILN_" + u + "_STAGED_BYTES " + std::to_string(tc_->staged_bytes) + "\n";
      s += "#define KILN_" + u + "_WARP_BYTES " +
           std::to_string(tc_->a_tile_bytes + tc_->c_tile_bytes) + "\n";
      s += "#define KILN_" + u + "_SHARED_BYTES (KILN_" + u + "_STAGED_BYTES + KILN_" + u +
           "_WARPS_PER_BLOCK * KILN_" + u + "_WARP_BYTES)\n";
    }
    s += "\n";
    s += "#ifndef KILN_CUDA_HOST_CHECK\n";
    s += "/* Copies the weight bytes (embedded in " + n + ".cu) to a new device buffer, once. */\n";
    s += "int32_t kiln_" + n + "_upload_weights(void **device_weights);\n";
    s += std::string(
        tc_ || fused_
            ? "/* Evaluates samples 0..n-1, " +
                  std::to_string(fused_ ? fused_->samples_per_warp() : 32) +
                  " per warp, asynchronously on `stream`. */\n"
            : "/* Evaluates samples 0..n-1, one thread each, asynchronously on `stream`. */\n");
    s += "int32_t kiln_" + n + "_run(const void *device_weights, const struct kiln_" + n +
         "_inputs *inputs,\n" + "                const struct kiln_" + n +
         "_outputs *outputs, int64_t n, cudaStream_t stream);\n";
    s += "int32_t kiln_" + n + "_free_weights(void *device_weights);\n#endif\n\n";
    s += "#ifdef __cplusplus\n}\n#endif\n\n#endif /* " + guard + " */\n";
    return s;
  }

  std::string Source() const {
    std::string n = o_.name;
    std::string s =
        Banner(n + ".cu: the whole network as one CUDA kernel, " +
               (fused_ ? std::to_string(fused_->samples_per_warp()) + " samples per warp."
                : tc_  ? "32 samples per warp."
                       : "one sample per thread."));
    s += "#include \"" + n + ".h\"\n\n#include <math.h>\n#include <string.h>\n\n" + kPrelude;
    if (!tc_) s += EmulationPrelude();
    bool half_loads = body_.find("kiln_ldh") != std::string::npos;
    for (const auto& [fn, text] : FastMathHelpers())
      if (body_.find(fn + "(") != std::string::npos ||
          activation_defs_.find(fn + "(") != std::string::npos)
        s += text;
    for (const auto& [fn, text] : Helpers()) {
      bool used = body_.find(fn + "(") != std::string::npos || (fn == "kiln_h2f" && half_loads);
      if (used) s += text;
      // The WMMA emulation reads half on the host; nvcc would warn about an unused function.
      if (!used && fn == "kiln_h2f" && tc_) s += "#ifndef __CUDACC__\n" + text + "#endif\n";
    }
    if (tc_) s += TensorCoreHelpers(o_.precision == Precision::kFloat8);
    if (fused_) s += FusedMlpHelpers(o_.precision == Precision::kFloat8) + activation_defs_;
    s += "\n";
    // Weights.
    s += "/* The weight buffer: " + std::to_string(weights_.size()) +
         " bytes, each tensor 16-byte aligned.\n";
    for (const auto& w : weight_list_)
      s += " *   byte " + std::to_string(w.byte) + ": " + CommentText(w.name) + " " +
           DimsToString(w.dims) + " " + w.type + "\n";
    s += " */\nalignas(16) static const unsigned char kiln_" + n + "_weights[" +
         std::to_string(std::max<size_t>(weights_.size(), 1)) + "] = {";
    for (size_t i = 0; i < weights_.size(); ++i) {
      char b[16];
      std::snprintf(b, sizeof(b), "%s0x%02x,", i % 20 == 0 ? "\n   " : "", weights_[i]);
      s += b;
    }
    s += weights_.empty() ? "0};\n\n" : "\n};\n\n";
    if (tc_) {
      s += WarpFunction() + "#ifdef __CUDACC__\n" + TensorCoreKernel() +
           OccupancyRun("KILN_" + upper_ + "_THREADS_PER_BLOCK") + UploadAndFree() + "#else\n" +
           HostCheckEntry() + "#endif /* __CUDACC__ */\n";
      return s;
    }
    // The kernel compiles under nvcc and, on the lane emulator, under a host C++ compiler.
    s += fused_ ? FusedFunction() + FusedKernel() : SampleFunction() + ScalarKernel();
    s += "#ifdef __CUDACC__\n" +
         (fused_ ? OccupancyRun("(int64_t)KILN_" + upper_ + "_WARPS_PER_BLOCK * KILN_" + upper_ +
                                "_SAMPLES_PER_WARP")
                 : ScalarRun()) +
         UploadAndFree() + "#else\n" + EmulateEntry() + HostCheckEntry() +
         "#endif /* __CUDACC__ */\n";
    return s;
  }

  // The planner's colours as per-thread arrays (with a lane index on the host, tensor-core path).
  std::string SlotDeclarations() const {
    std::string decl;
    for (size_t k = 0; k < slots_.size(); ++k) {
      if (fused_ && body_.find("slot" + std::to_string(k) + "[") == std::string::npos) continue;
      std::string members;
      for (size_t j = 0; j < slots_[k].values.size(); ++j)
        members += (j ? ", " : "") + slots_[k].values[j];
      decl += "  float slot" + std::to_string(k) + (tc_ ? "[KILN_LANE_COUNT]" : "") + "[" +
              std::to_string(std::max<int64_t>(slots_[k].elements, 1)) + "]; /* " +
              CommentText(members, 300) + " */\n";
    }
    return decl;
  }

  // Float and half views of the weight bytes, where the body reads them.
  std::string WeightViews() const {
    std::string s;
    if (body_.find("(w + ") != std::string::npos)
      s += "  const float *__restrict__ w = (const float *)weights;\n";
    if (body_.find("(wh + ") != std::string::npos)
      s += "  const unsigned short *__restrict__ wh = (const unsigned short *)weights;\n";
    return s.empty() ? "  (void)weights;\n" : s;
  }

  std::string TensorParams() const {
    std::string params;
    for (const auto& m : in_members_) params += ", const float *__restrict__ in_" + m;
    for (const auto& m : out_members_) params += ", float *__restrict__ out_" + m;
    return params;
  }
  std::string TensorArgs(const std::string& in, const std::string& out) const {
    std::string args;
    for (const auto& m : in_members_) args += ", " + in + m;
    for (const auto& m : out_members_) args += ", " + out + m;
    return args;
  }

  std::string SampleFunction() const {
    std::string s = "/* The network on sample i. Slots are the planner's colours (" +
                    std::to_string(slots_.size()) + " per-thread arrays, " +
                    std::to_string(SlotElements()) +
                    " floats); every index is a constant once the\n" +
                    " * loops are unrolled, so nvcc keeps small slots in registers. */\n";
    s += "KILN_HD static inline void kiln_" + o_.name +
         "_sample(const unsigned char *__restrict__ weights" + TensorParams() + ", int64_t i) {\n";
    return s + WeightViews() + SlotDeclarations() + body_ + "}\n\n";
  }

  // Samples base .. base + 31, lane L on sample base + L: per-lane segments between warp steps.
  std::string WarpFunction() const {
    std::string s =
        "/* The network on samples base .. base + 31, one per lane. Slots are the planner's "
        "colours (" +
        std::to_string(slots_.size()) + " per-lane arrays, " + std::to_string(SlotElements()) +
        " floats), registers on the device;\n * between the per-lane segments the warp multiplies "
        "its tiles on the tensor cores. tcw: the\n" +
        " * staged tensor-core weights; scratch: the warp's A tile (half) and product tile "
        "(float). */\n";
    s += "KILN_TC static inline void kiln_" + o_.name +
         "_warp(const unsigned char *__restrict__ weights, const kiln_half *tcw, unsigned char "
         "*scratch" +
         TensorParams() + ", int64_t base, int64_t n) {\n";
    s += "  kiln_half *kiln_a = (kiln_half *)scratch;\n  float *kiln_c = (float *)(scratch + " +
         std::to_string(tc_->a_tile_bytes) + ");\n";
    s += WeightViews() + SlotDeclarations();
    for (size_t k = 0; k < segments_.size(); ++k) {
      if (k % 2 == 1) {  // a warp step
        s += segments_[k];
        continue;
      }
      s += "  for (int L = 0; L < KILN_LANE_COUNT; ++L) {\n";
      if (k == 0)  // lanes past the last sample compute on its inputs and store nothing
        s += "  const int64_t row = base + KILN_LANE_ROW(L), i = row < n ? row : n - 1;\n";
      s += segments_[k] + "  }\n";
    }
    return s + "}\n\n";
  }

  std::string RunDeclaration() const {
    const std::string& n = o_.name;
    return "int32_t kiln_" + n + "_run(const void *device_weights, const struct kiln_" + n +
           "_inputs *inputs,\n" + "                const struct kiln_" + n +
           "_outputs *outputs, int64_t n, cudaStream_t stream) {\n";
  }

  // The argument checks every run starts with.
  std::string RunChecks() const {
    std::string s =
        "  if (device_weights == NULL || inputs == NULL || outputs == NULL) return "
        "KILN_ERROR_NULL_ARGUMENT;\n";
    for (const auto& m : in_members_)
      s += "  if (inputs->" + m + " == NULL) return KILN_ERROR_NULL_TENSOR;\n";
    for (const auto& m : out_members_)
      s += "  if (outputs->" + m + " == NULL) return KILN_ERROR_NULL_TENSOR;\n";
    return s +
           "  if (n < 0 || (n + per_block - 1) / per_block > 2147483647) return "
           "KILN_ERROR_INVALID_SIZE;\n" +
           "  if (n == 0) return KILN_OK;\n";
  }

  std::string KernelHead() const {
    const std::string& n = o_.name;
    return "__global__ void __launch_bounds__(KILN_" + upper_ + "_THREADS_PER_BLOCK)\nkiln_" + n +
           "_kernel(const unsigned char *__restrict__ weights, struct kiln_" + n +
           "_inputs in, struct kiln_" + n + "_outputs out, int64_t n) {\n";
  }

  std::string ScalarKernel() const {
    std::string s = KernelHead();
    return s +
           "  const int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;\n  if (i < n) "
           "kiln_" +
           o_.name + "_sample(weights" + TensorArgs("in.", "out.") + ", i);\n}\n\n";
  }

  std::string ScalarRun() const {
    const std::string &n = o_.name, &u = upper_;
    std::string s = RunDeclaration() + "  const int64_t per_block = KILN_" + u +
                    "_THREADS_PER_BLOCK;\n" + RunChecks();
    s += "  kiln_" + n +
         "_kernel<<<(unsigned)((n + per_block - 1) / per_block), (unsigned)per_block, 0, "
         "stream>>>(\n" +
         "      (const unsigned char *)device_weights, *inputs, *outputs, n);\n";
    return s + "  return cudaGetLastError() == cudaSuccess ? KILN_OK : KILN_ERROR_CUDA;\n}\n\n";
  }

  // The staging of every tensor-core B into the block's shared memory (threads first, first +
  // step, ...).
  std::string StageCalls(const std::string& first, const std::string& step) const {
    if (o_.precision != Precision::kFloat8) {
      int64_t bytes = 0;
      for (const auto& l : tc_->layers) bytes += l.k_pad * l.ldb * 2;
      return "  kiln_tc_stage(weights + " + std::to_string(tc_->layers[0].weight_byte) + ", tcw, " +
             std::to_string(bytes) + ", " + first + ", " + step + ");\n";
    }
    std::string s;
    for (const auto& l : tc_->layers)
      s += "  kiln_tc_stage8(weights + " + std::to_string(l.weight_byte) + ", tcw + " +
           std::to_string(l.staged_offset) + ", " + std::to_string(l.k_pad * l.ldb) + ", " +
           c::CNumber(DType::kFloat32, l.fp8_scale) + ", " + first + ", " + step + ");\n";
    return s;
  }

  // A grid of as many blocks as the GPU holds at once; each stages the weights once, then its
  // warps take 32 samples at a time.
  std::string TensorCoreKernel() const {
    const std::string &n = o_.name, &u = upper_;
    std::string s = KernelHead();
    s += "  extern __shared__ __align__(128) unsigned char kiln_smem[];\n";
    s += "  kiln_half *tcw = (kiln_half *)kiln_smem;\n" +
         StageCalls("(int)threadIdx.x", "(int)blockDim.x");
    s += "  __syncthreads();\n";
    s += "  const int warp = (int)(threadIdx.x >> 5);\n";
    s += "  unsigned char *scratch = kiln_smem + KILN_" + u + "_STAGED_BYTES + warp * KILN_" + u +
         "_WARP_BYTES;\n";
    s += "  const int64_t stride = (int64_t)gridDim.x * KILN_" + u + "_WARPS_PER_BLOCK * 32;\n";
    s += "  for (int64_t base = ((int64_t)blockIdx.x * KILN_" + u +
         "_WARPS_PER_BLOCK + warp) * 32; base < n; base += stride)\n";
    s += "    kiln_" + n + "_warp(weights, tcw, scratch" + TensorArgs("in.", "out.") +
         ", base, n);\n}\n\n";
    return s;
  }

  // A grid of as many blocks as the GPU holds at once (each stages the weights once), of
  // `per_block` samples each.
  std::string OccupancyRun(const std::string& per_block) const {
    const std::string &n = o_.name, &u = upper_;
    std::string s = RunDeclaration() + "  const int64_t per_block = " + per_block + ";\n";
    s += "  const int shared = KILN_" + u +
         "_SHARED_BYTES;\n  int device = 0, sms = 0, per_sm = 0;\n" + RunChecks();
    s += "  if (cudaGetDevice(&device) != cudaSuccess ||\n"
         "      cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device) != "
         "cudaSuccess)\n"
         "    return KILN_ERROR_CUDA;\n";
    s += "  if (shared > 48 * 1024 &&\n      cudaFuncSetAttribute(kiln_" + n +
         "_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, shared) != cudaSuccess)\n    "
         "return KILN_ERROR_CUDA;\n";
    s += "  if (cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kiln_" + n +
         "_kernel, (int)per_block, shared) != cudaSuccess || per_sm < 1)\n    return "
         "KILN_ERROR_CUDA;\n";
    s += "  int64_t blocks = (n + per_block - 1) / per_block;\n";
    s += "  if (blocks > (int64_t)sms * per_sm) blocks = (int64_t)sms * per_sm;\n";
    s += "  kiln_" + n + "_kernel<<<(unsigned)blocks, KILN_" + u +
         "_THREADS_PER_BLOCK, shared, stream>>>(\n" +
         "      (const unsigned char *)device_weights, *inputs, *outputs, n);\n";
    return s + "  return cudaGetLastError() == cudaSuccess ? KILN_OK : KILN_ERROR_CUDA;\n}\n\n";
  }

  // Samples base .. base + SAMPLES_PER_WARP - 1 on one warp (cuda_fused_mlp.h).
  std::string FusedFunction() const {
    std::string s = "/* The network on samples base .. base + " +
                    std::to_string(fused_->samples_per_warp() - 1) +
                    " on one warp: the prologue and epilogue per lane (slots are the\n"
                    " * planner's colours), the MLP on mma.sync with its activations in registers. "
                    "kiln_sw: the staged\n * weights; kiln_tile: the warp's tile. */\n";
    s += "KILN_DEV void kiln_" + o_.name +
         "_mlp(const unsigned char *__restrict__ weights, const unsigned char *kiln_sw, unsigned "
         "char *kiln_tile" +
         TensorParams() + ", int64_t base, int64_t n) {\n";
    s += "  const int kiln_lane = kiln_lane_id(), kiln_g = kiln_lane >> 2, kiln_t = kiln_lane & "
         "3;\n  (void)kiln_g;\n";
    return s + WeightViews() + SlotDeclarations() + body_ + "}\n\n";
  }

  // Each block stages the weights into shared memory once; its warps then take
  // SAMPLES_PER_WARP samples at a time, grid-stride.
  std::string FusedKernel() const {
    const std::string &n = o_.name, &u = upper_;
    std::string s = KernelHead();
    s += "  KILN_SHARED(kiln_smem);\n";
    s += "  for (int k = (int)threadIdx.x; k < KILN_" + u +
         "_STAGED_BYTES / 16; k += (int)blockDim.x)\n";
    s += "    kiln_stage16(kiln_smem + 16 * k, weights + " + std::to_string(staged_at_) +
         " + 16 * k);\n";
    s += "  KILN_SYNCTHREADS(); /* the weights are staged */\n";
    s += "  const int warp = (int)(threadIdx.x >> 5);\n";
    s += "  unsigned char *tile = kiln_smem + KILN_" + u + "_STAGED_BYTES + warp * KILN_" + u +
         "_TILE_BYTES;\n";
    s += "  const int64_t stride = (int64_t)gridDim.x * KILN_" + u + "_WARPS_PER_BLOCK * KILN_" +
         u + "_SAMPLES_PER_WARP;\n";
    s += "  for (int64_t base = ((int64_t)blockIdx.x * KILN_" + u +
         "_WARPS_PER_BLOCK + warp) * KILN_" + u + "_SAMPLES_PER_WARP; base < n; base += stride)\n";
    s += "    kiln_" + n + "_mlp(weights, kiln_smem, tile" + TensorArgs("in.", "out.") +
         ", base, n);\n}\n\n";
    return s;
  }

  // Under a host C++ compiler: CUDA's built-ins on the lane emulator (lane_emulator.h).
  static std::string EmulationPrelude() {
    return "#ifndef __CUDACC__ /* a host C++ compiler: kernels run on the lane emulator */\n" +
           EmbeddedCudaSources().at("lane_emulator") + R"(#ifndef KILN_CUDA_EMULATION_
#define KILN_CUDA_EMULATION_
#define __global__
#define __launch_bounds__(threads)
#define threadIdx (kiln_emu::Emulator::Get().thread_idx())
#define blockIdx (kiln_emu::Emulator::Get().block_idx())
#define blockDim (kiln_emu::Emulator::Get().block_dim())
#define gridDim (kiln_emu::Emulator::Get().grid_dim())
#endif
#endif
)";
  }

  // kiln_NAME_emulate: the kernel on the lane emulator; the fused path's at most max_blocks
  // blocks (fewer blocks than samples need: the grid-stride loop runs), the scalar path's one
  // thread per sample. KILN_ERROR_CUDA when the emulator reports a
  // problem (printed to stderr).
  std::string EmulateEntry() const {
    const std::string &n = o_.name, &u = upper_;
    std::string params = TensorParams();
    std::string s =
        "/* The kernel on the CPU's lane emulator (lane_emulator.h), with at most "
        "max_blocks blocks where\n * the kernel loops grid-stride; returns KILN_ERROR_CUDA when it "
        "reports a race,\n * a deadlock or a bad shared-memory access. */\n";
    s += "static inline int32_t kiln_" + n + "_emulate(" +
         params.substr(std::min<size_t>(2, params.size())) + (params.empty() ? "" : ", ") +
         "int64_t n, unsigned max_blocks) {\n";
    s += "  struct kiln_" + n + "_inputs in;\n  struct kiln_" + n + "_outputs out;\n";
    s += "  memset(&in, 0, sizeof in);\n  memset(&out, 0, sizeof out);\n";
    for (const auto& m : in_members_) s += "  in." + m + " = in_" + m + ";\n";
    for (const auto& m : out_members_) s += "  out." + m + " = out_" + m + ";\n";
    std::string per_block =
        fused_ ? "(int64_t)KILN_" + u + "_WARPS_PER_BLOCK * KILN_" + u + "_SAMPLES_PER_WARP"
               : "(int64_t)KILN_" + u + "_THREADS_PER_BLOCK";
    s += "  const int64_t per_block = " + per_block + ";\n";
    s += "  int64_t blocks = (n + per_block - 1) / per_block;\n";
    s += "  if (n <= 0) return n < 0 ? KILN_ERROR_INVALID_SIZE : KILN_OK;\n";
    if (fused_)  // the scalar kernel has one thread per sample and no grid-stride loop
      s += "  if (blocks > (int64_t)max_blocks) blocks = (int64_t)max_blocks;\n";
    else
      s += "  (void)max_blocks;\n";
    s += "  kiln_emu::Emulator &e = kiln_emu::Emulator::Get();\n  const int before = "
         "e.problems();\n";
    s += "  e.Launch((unsigned)blocks, KILN_" + u + "_THREADS_PER_BLOCK, " +
         (fused_ ? "KILN_" + u + "_SHARED_BYTES" : std::string("0")) + ", [&] { kiln_" + n +
         "_kernel(kiln_" + n + "_weights, in, out, n); });\n";
    s += "  if (e.problems() == before) return KILN_OK;\n";
    s += "  fprintf(stderr, \"kiln_" + n +
         "_emulate: %d problem(s):\\n%s\", e.problems() - before, e.report().c_str());\n";
    return s + "  return KILN_ERROR_CUDA;\n}\n\n";
  }

  std::string UploadAndFree() const {
    const std::string& n = o_.name;
    std::string s = "int32_t kiln_" + n + "_upload_weights(void **device_weights) {\n";
    s += "  void *p = NULL;\n  if (device_weights == NULL) return KILN_ERROR_NULL_ARGUMENT;\n  "
         "*device_weights = NULL;\n";
    s += "  if (cudaMalloc(&p, sizeof(kiln_" + n +
         "_weights)) != cudaSuccess) return KILN_ERROR_CUDA;\n";
    s += "  if (cudaMemcpy(p, kiln_" + n + "_weights, sizeof(kiln_" + n +
         "_weights), cudaMemcpyHostToDevice) != cudaSuccess) {\n";
    s += "    cudaFree(p);\n    return KILN_ERROR_CUDA;\n  }\n  *device_weights = p;\n  return "
         "KILN_OK;\n}\n\n";
    s += "int32_t kiln_" + n + "_free_weights(void *device_weights) {\n";
    s += "  if (device_weights == NULL) return KILN_OK;\n  return cudaFree(device_weights) == "
         "cudaSuccess ? KILN_OK : KILN_ERROR_CUDA;\n}\n";
    return s;
  }

  // Under a host C++ compiler: samples 0..n-1 through the same per-sample (or per-warp) code,
  // with the embedded weights; this is what the tests compare with the host executor.
  std::string HostCheckEntry() const {
    const std::string &n = o_.name, &u = upper_;
    std::string s =
        "/* The host check: samples 0 .. n-1 on the CPU; returns KILN_OK, or KILN_ERROR_CUDA when "
        "the\n"
        " * scratch memory cannot be allocated. */\n";
    std::string params = TensorParams();  // ", const float *in_x, ..."
    s += "static inline int32_t kiln_" + n + "_host_check(" +
         params.substr(std::min<size_t>(2, params.size())) + (params.empty() ? "" : ", ") +
         "int64_t n) {\n";
    if (fused_)  // lane-accurate only: two blocks, so that the grid-stride loop runs too
      return s + "  return kiln_" + n + "_emulate(" + TensorArgs("in_", "out_").substr(2) +
             ", n, 2);\n}\n";
    if (!tc_)
      return s + "  for (int64_t i = 0; i < n; ++i) kiln_" + n + "_sample(kiln_" + n + "_weights" +
             TensorArgs("in_", "out_") + ", i);\n  return KILN_OK;\n}\n";
    s += "  const unsigned char *weights = kiln_" + n + "_weights;\n";
    s += "  unsigned char *smem = (unsigned char *)aligned_alloc(128, KILN_" + u +
         "_STAGED_BYTES + KILN_" + u + "_WARP_BYTES);\n";
    s += "  if (smem == NULL) return KILN_ERROR_CUDA;\n  kiln_half *tcw = (kiln_half *)smem;\n" +
         StageCalls("0", "1");
    s += "  for (int64_t base = 0; base < n; base += 32)\n    kiln_" + n +
         "_warp(weights, tcw, smem + KILN_" + u + "_STAGED_BYTES" + TensorArgs("in_", "out_") +
         ", base, n);\n";
    return s + "  free(smem);\n  return KILN_OK;\n}\n";
  }

  // Zero bytes up to the next tensor's 16-byte boundary in the weight buffer.
  void AlignWeights() {
    weights_.resize((weights_.size() + kWeightAlignment - 1) / kWeightAlignment * kWeightAlignment,
                    0);
  }

  // Tensor-core B matrices, as staged (k_pad x ldb halves, so that one copy stages them all),
  // or as E4M3 codes with a per-tensor scale.
  void PackTensorCoreWeights() {
    bool fp8 = o_.precision == Precision::kFloat8;
    for (auto& l : tc_->layers) {
      AlignWeights();
      l.weight_byte = static_cast<int64_t>(weights_.size());
      std::vector<float> b = PackedB(g_, l);
      float max_abs = 0;
      for (float x : b) max_abs = std::max(max_abs, std::fabs(x));
      if (fp8) l.fp8_scale = max_abs > 0 ? max_abs / 448.0f : 1.0f;
      for (float x : b) {
        if (fp8) {
          weights_.push_back(FloatToE4M3(x / l.fp8_scale));
          continue;
        }
        uint16_t h = FloatToHalfBits(x);
        unsigned char bytes[2];
        std::memcpy(bytes, &h, 2);
        weights_.insert(weights_.end(), bytes, bytes + 2);
      }
      const ir::Node& node = g_.nodes[l.node];
      weight_list_.push_back({g_.values[node.inputs[1]].name + " (B of " + NodeName(g_, node) +
                                  ", padded for tensor cores)",
                              static_cast<size_t>(l.weight_byte),
                              {l.k_pad, l.ldb},
                              fp8 ? "e4m3" : "half"});
    }
  }

  int64_t SlotElements() const {
    int64_t t = 0;
    for (const auto& s : slots_) t += s.elements;
    return t;
  }

  struct Slot {
    int64_t elements = 0;
    std::vector<std::string> values;
  };
  struct WeightEntry {
    std::string name;
    size_t byte;
    Dims dims;
    std::string type;  // float, half or e4m3
  };

  const ir::Model& model_;
  const ir::Graph& g_;
  const planner::GraphPlan& plan_;
  const CompileOptions& o_;
  std::string upper_;
  bool half_;
  TensorCorePlan* tc_;           // nullptr: the scalar or fused path
  FusedMlpPlan* fused_;          // nullptr: the scalar or tensor-core path
  std::string activation_defs_;  // the fused layers' activation functions
  std::string prediction_;       // the performance model's, for the banner
  std::map<int, passes::ConstantEncoding> enc_;
  std::set<int> matrix_weights_;  // B of MatMul / Gemm, W of Conv: stored as half with fp16
  std::vector<Slot> slots_;
  std::map<int, std::pair<int, int64_t>> slot_of_;  // value -> (slot, element offset)
  std::map<int, int64_t> weight_at_;                // value -> element offset in the weight buffer
  std::vector<WeightEntry> weight_list_;
  std::vector<unsigned char> weights_;
  std::vector<std::string> in_members_, out_members_;
  int64_t staged_at_ = 0;              // fused path: the staged image in the weight buffer
  std::vector<std::string> segments_;  // per-lane code and warp steps, alternating
  std::string body_;                   // all of them
};

// Layout ops (views included) must keep axis 0 as the batch: merging it into another axis or
// dropping it would, in the batched model, mix samples that each thread sees alone.
Status CheckKeepsBatch(const ir::Graph& g, const ir::Node& n) {
  const std::string& op = n.op_type;
  if (op ==
      "Transpose") {  // cancel-transposes turns one that moves only size-1 axes into a Reshape
    std::vector<int64_t> perm = n.attr_ints("perm");
    size_t rank = g.values[n.inputs[0]].type.dims.size();
    if (rank > 1 && (perm.empty() ? static_cast<int64_t>(rank) - 1 : perm[0]) != 0)
      return Error(NodeName(g, n) +
                   " (Transpose): it moves axis 0 (the batch), which mixes samples a per-thread "
                   "kernel sees alone");
    return OkStatus();
  }
  if (!ops::HasTrait(n.domain, op, ops::kView)) return OkStatus();
  auto fail = [&] {
    return Error(
        NodeName(g, n) + " (" + op +
        "): it moves axis 0 (the batch) into other axes, which a per-thread kernel cannot do");
  };
  const Dims& in = g.values[n.inputs[0]].type.dims;
  const Dims& out = g.values[n.outputs[0]].type.dims;
  if (out.empty() || out[0] != 1 || in.empty()) return fail();
  std::vector<int64_t> axes = n.attr_ints("axes");
  if (n.inputs.size() > 1 && n.inputs[1] >= 0 && g.values[n.inputs[1]].constant &&
      op != "Reshape") {
    const Tensor& t = *g.values[n.inputs[1]].constant;
    axes.clear();
    for (int64_t k = 0; k < t.size(); ++k)
      axes.push_back(static_cast<int64_t>(c::ElementAsDouble(t, k)));
  }
  if (op == "Flatten" &&
      (n.attr_int("axis", 1) == 0 || n.attr_int("axis", 1) == -static_cast<int64_t>(in.size())))
    return fail();
  if (op == "Squeeze" && axes.empty()) return fail();  // squeezes every size-1 axis, the batch too
  size_t rank = op == "Unsqueeze" ? out.size() : in.size();
  for (int64_t a : axes)
    if ((op == "Squeeze" || op == "Unsqueeze") && (a < 0 ? a + static_cast<int64_t>(rank) : a) == 0)
      return fail();
  return OkStatus();
}

Status CheckTensor(const ir::Value& v, const char* what, bool batch) {
  if (v.type.kind != ir::TypeInfo::Kind::kTensor || v.type.dtype != DType::kFloat32)
    return Error(std::string(what) + " '" + v.name +
                 "' is not a float32 tensor; --target cuda takes float inputs and outputs");
  if (!v.type.shape_known())
    return Error(std::string(what) + " '" + v.name + "' has dims " + v.type.ToString() +
                 " not known at compile time; give the input dims with --shape");
  if (batch && (v.type.dims.empty() || v.type.dims[0] != 1))
    return Error(std::string(what) + " '" + v.name + "' has dims " + DimsToString(v.type.dims) +
                 "; its leading dim must be the batch (1 per sample)");
  return OkStatus();
}

// The tensor-core layers, or nullopt for the scalar path (DESIGN.md 2.5: "chosen automatically
// where it is faster"). Without a device to time both, auto takes the tensor cores when the
// products they can run hold at least half of the multiply-adds: those then cost a warp's
// handful of MMA instructions instead of a multiply-add per weight and lane.
Expected<std::optional<TensorCorePlan>> ChooseTensorCores(const ir::Graph& g,
                                                          const CompileOptions& o) {
  if (o.tensor_cores == TensorCores::kOff) {
    if (o.precision == Precision::kFloat8)
      return Error(
          "--precision fp8 stores the tensor-core layers' weights; it needs --tensor-cores auto or "
          "on");
    return std::optional<TensorCorePlan>();
  }
  TensorCorePlan p = PlanTensorCores(g);
  bool low = o.precision != Precision::kFloat32;
  bool fits = p.shared_bytes() <= TensorCorePlan::kMaxSharedBytes;
  bool worth = !p.layers.empty() && 2 * p.eligible_macs >= p.total_macs;
  bool forced = o.tensor_cores == TensorCores::kOn || o.tensor_cores == TensorCores::kWmma ||
                o.precision == Precision::kFloat8;
  if (forced) {
    const char* why = o.tensor_cores == TensorCores::kOn     ? "--tensor-cores on"
                      : o.tensor_cores == TensorCores::kWmma ? "--tensor-cores wmma"
                                                             : "--precision fp8";
    if (!low)
      return Error("--tensor-cores on multiplies half inputs: give --precision fp16 or fp8");
    if (p.layers.empty())
      return Error(
          std::string(why) +
          ": no MatMul or Gemm fits the tensor-core path (a constant 2-D B, at most 8 rows "
          "of A per sample, padding to multiples of 16 that at most quadruples the work)");
    if (!fits)
      return Error(std::string(why) + ": the staged weights and warp tiles need " +
                   std::to_string(p.shared_bytes()) +
                   " bytes of shared memory per block, more than " +
                   std::to_string(TensorCorePlan::kMaxSharedBytes));
    return std::optional<TensorCorePlan>(std::move(p));
  }
  if (low && fits && worth &&
      EstimateWmma(g, p, true).samples_per_second() > EstimateScalar(g, true).samples_per_second())
    return std::optional<TensorCorePlan>(std::move(p));
  return std::optional<TensorCorePlan>();
}

// The fused-MLP path where the graph is one and its shared memory fits (cuda_fused_mlp.h):
// `on` takes it first; `auto` where the performance model (cuda_perf_model.h) predicts it faster
// than the scalar path. wmma and off leave it out.
std::optional<FusedMlpPlan> ChooseFusedMlp(const ir::Graph& g, const CompileOptions& o) {
  if (o.precision == Precision::kFloat32 || o.tensor_cores == TensorCores::kOff ||
      o.tensor_cores == TensorCores::kWmma)
    return std::nullopt;
  bool fp8 = o.precision == Precision::kFloat8;
  std::optional<FusedMlpPlan> p = PlanFusedMlp(g, fp8);
  if (!p || p->shared_bytes() > TensorCorePlan::kMaxSharedBytes) return std::nullopt;
  if (o.tensor_cores == TensorCores::kAuto && !fp8 &&
      EstimateFusedMlp(g, *p, fp8).samples_per_second() <=
          EstimateScalar(g, true).samples_per_second())
    return std::nullopt;
  return p;
}

// The model's prediction for the path taken.
KernelEstimate Estimate(const ir::Graph& g, const CompileOptions& o, const FusedMlpPlan* fused,
                        const TensorCorePlan* tc) {
  bool fast = o.precision != Precision::kFloat32;
  if (fused) return EstimateFusedMlp(g, *fused, o.precision == Precision::kFloat8);
  if (tc) return EstimateWmma(g, *tc, fast);
  return EstimateScalar(g, fast);
}

}  // namespace

Expected<compiler::Program> CompileProgram(ir::Model model, const CompileOptions& options) {
  KILN_RETURN_IF_ERROR(c::CheckModelName(options.name));
  // One sample: the leading dim of every input (given with --shape, or the model's) becomes 1.
  passes::ShapeOverrides shapes = options.shapes;
  for (int v : model.graph->RuntimeInputs()) {
    const ir::Value val = model.graph->values[v];
    auto it = shapes.find(val.name);
    Dims d = it != shapes.end() ? it->second : val.type.dims;
    if (d.empty())
      return Error(
          "input '" + val.name +
          "' has no dims; --target cuda maps the leading (batch) dim of every input to threads");
    d[0] = 1;
    for (size_t k = 1; k < d.size(); ++k)
      if (d[k] < 0)
        return Error("input '" + val.name + "' has dims " + val.type.ToString() +
                     " not fixed at compile time; give them with --shape NAME=D0,D1,...");
    // Set on the input itself: shape inference refuses overrides of dims the model fixes.
    ir::TypeInfo& t = model.graph->values[v].type;
    t.dims = d;
    t.has_shape = true;
    t.symbols.assign(d.size(), "");
    shapes.erase(val.name);
  }
  // Declared dims of computed values (graph outputs, value_info) are the batched model's: shape
  // inference recomputes them for one sample.
  {
    std::set<int> feeds;
    for (int v : model.graph->RuntimeInputs()) feeds.insert(v);
    for (size_t v = 0; v < model.graph->values.size(); ++v) {
      ir::Value& val = model.graph->values[v];
      if (feeds.count(static_cast<int>(v)) || val.constant || val.producer < 0) continue;
      val.type.has_shape = false;
      val.type.dims.clear();
      val.type.symbols.clear();
    }
  }
  compiler::CompileOptions co;
  co.target = compiler::Target::kCuda;
  co.shapes = shapes;
  co.passes = options.passes;
  co.dump_ir_after = options.dump_ir_after;
  // Before the passes: for one sample, some of these become identities and vanish.
  // Only values computed from the inputs carry samples (a Reshape of a weight is fine).
  co.after_shapes = [](const ir::Model& m) -> Status {
    const ir::Graph& g = *m.graph;
    std::vector<bool> per_sample(g.values.size(), false);
    for (int v : g.RuntimeInputs()) per_sample[v] = true;
    for (const auto& n : g.nodes) {
      bool any = false;
      for (int v : n.inputs) any = any || (v >= 0 && per_sample[v]);
      for (int v : n.implicit_inputs) any = any || (v >= 0 && per_sample[v]);
      if (ops::ReadsDimsOnly(n.domain, n.op_type)) any = false;  // dims, not sample data
      for (int v : n.outputs)
        if (v >= 0) per_sample[v] = any;
      if (any && n.inputs[0] >= 0 && per_sample[n.inputs[0]])
        KILN_RETURN_IF_ERROR(CheckKeepsBatch(g, n));
    }
    return OkStatus();
  };
  co.before_plan = [](const ir::Model& m) -> Status {
    const ir::Graph& g = *m.graph;
    for (const auto& n : g.nodes)
      if (!FindEmitter(n.domain, n.op_type))
        return Error(NodeName(g, n) + ": op " +
                     (n.domain.empty() || n.domain == "ai.onnx" ? "" : n.domain + ".") + n.op_type +
                     " is not supported by --target cuda");
    for (int v : g.RuntimeInputs()) KILN_RETURN_IF_ERROR(CheckTensor(g.values[v], "input", true));
    for (int v : g.outputs) KILN_RETURN_IF_ERROR(CheckTensor(g.values[v], "output", true));
    return OkStatus();
  };
  return compiler::Compile(std::move(model), co);
}

Expected<CompiledCuda> CompileToCuda(compiler::Program program, const CompileOptions& options) {
  KILN_RETURN_IF_ERROR(c::CheckModelName(options.name));
  if (program.target != compiler::Target::kCuda)
    return Error("the CUDA backend emits programs compiled for the cuda target");
  const ir::Graph& g = *program.model.graph;
  std::optional<FusedMlpPlan> fused = ChooseFusedMlp(g, options);
  std::optional<TensorCorePlan> tc;
  if (!fused) {
    KILN_ASSIGN_OR_RETURN(tc, ChooseTensorCores(g, options));
  }
  passes::ConstantReport report = passes::CompressConstants(*program.model.graph);
  KernelEstimate estimate = Estimate(g, options, fused ? &*fused : nullptr, tc ? &*tc : nullptr);
  Generator gen(program, options, report, tc ? &*tc : nullptr, fused ? &*fused : nullptr,
                estimate.Summary());
  return gen.Run();
}

Expected<CompiledCuda> CompileToCuda(ir::Model model, const CompileOptions& options) {
  KILN_ASSIGN_OR_RETURN(auto program, CompileProgram(std::move(model), options));
  return CompileToCuda(std::move(program), options);
}

}  // namespace kiln::codegen::cuda
