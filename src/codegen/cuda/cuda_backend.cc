#include "codegen/cuda/cuda_backend.h"

#include <algorithm>
#include <cstdio>
#include <map>
#include <set>

#include "codegen/c/c_names.h"
#include "codegen/c/emit_util.h"
#include "codegen/cuda/cuda_emit.h"
#include "ir/half.h"
#include "passes/compress_constants.h"
#include "passes/fold_constants.h"
#include "passes/pipeline.h"
#include "planner/plan_graph.h"

namespace kiln::codegen::cuda {
namespace {

using c::CommentText;
using c::Upper;

constexpr int kThreadsPerBlock = 128;
constexpr size_t kWeightAlignment = 16;  // bytes; float4 / 4-half loads need it
constexpr long kPlannerSteps = 4000;     // fixed search steps: the same slots on every machine

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

class Generator {
 public:
  Generator(const ir::Model& m, const CompileOptions& o, const passes::ConstantReport& report)
      : model_(m), g_(*m.graph), o_(o), upper_(Upper(o.name)), half_(o.precision == Precision::kFloat16) {
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

    planner::PlanOptions po;
    po.planner = "coloring";
    po.include_io = true;
    po.max_steps = kPlannerSteps;
    KILN_ASSIGN_OR_RETURN(plan_, planner::PlanGraph(g_, po));
    AssignSlots();

    std::string body;
    for (size_t k = 0; k < feeds.size(); ++k) {
      int v = feeds[k];
      int64_t e = NumElements(g_.values[v].type.dims);
      if (!slot_of_.count(v)) {  // read by no node
        body += "  /* input '" + CommentText(g_.values[v].name) + "' is not used */\n";
        continue;
      }
      KILN_ASSIGN_OR_RETURN(Loc l, Locate(v));
      body += "  /* input '" + CommentText(g_.values[v].name) + "' into its slot */\n";
      body += "  " + Unroll(v) + "\n  for (int k = 0; k < " + std::to_string(e) + "; ++k) " + l.slot + "[" +
              (l.offset ? std::to_string(l.offset) + " + " : "") + "k] = in_" + in_members_[k] + "[i * " +
              std::to_string(e) + " + k];\n";
    }
    for (size_t p = 0; p < plan_.schedule.order.size(); ++p) {
      const ir::Node& n = g_.nodes[plan_.schedule.order[p]];
      std::string shapes;
      for (int v : n.outputs)
        if (v >= 0) {
          shapes += ' ';
          shapes += DimsToString(g_.values[v].type.dims);
        }
      body += "  /* " + CommentText(NodeName(g_, n)) + ": " + n.op_type + " ->" + shapes +
              (plan_.buffers.is_noop[p] ? " (a view of its input: no code)" : "") + " */\n";
      if (plan_.buffers.is_noop[p]) continue;
      KILN_ASSIGN_OR_RETURN(std::string text, EmitNode(n));
      body += "  {\n" + text + "  }\n";
    }
    for (size_t k = 0; k < g_.outputs.size(); ++k) {
      int v = g_.outputs[k];
      int64_t e = NumElements(g_.values[v].type.dims);
      KILN_ASSIGN_OR_RETURN(Loc l, Locate(v));
      std::string src;
      if (l.kind == Loc::Kind::kSlot) src = l.slot + "[" + (l.offset ? std::to_string(l.offset) + " + " : "") + "k]";
      else return Error("output '" + g_.values[v].name + "' is a constant; --target cuda computes its outputs");
      body += "  " + Unroll(v) + "\n  for (int k = 0; k < " + std::to_string(e) + "; ++k) out_" + out_members_[k] + "[i * " +
              std::to_string(e) + " + k] = " + src + ";\n";
    }
    body_ = body;

    CompiledCuda result;
    for (int v : feeds) result.inputs.push_back(g_.values[v]);
    for (int v : g_.outputs) result.outputs.push_back(g_.values[v]);
    result.weight_bytes = weights_.size();
    result.files.push_back({o_.name + ".h", Header()});
    result.files.push_back({o_.name + ".cu", Source()});
    return result;
  }

 private:
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
    bool small = it != slot_of_.end() && slots_[it->second.first].elements <= EmitContext::kRegisterSlotLimit;
    return small ? "KILN_UNROLL" : "KILN_NO_UNROLL";
  }

  Expected<Loc> Locate(int v) {
    auto it = slot_of_.find(v);
    if (it != slot_of_.end()) {
      Loc l;
      l.slot = "slot" + std::to_string(it->second.first);
      l.offset = it->second.second;
      return l;
    }
    const ir::Value& val = g_.values[v];
    if (!val.constant) return Error("tensor '" + val.name + "' has no slot (its size is not known at compile time)");
    auto e = enc_.find(v);
    Loc l;
    if (e != enc_.end() && e->second.kind == passes::ConstantEncoding::Kind::kDuplicate && e->second.duplicate_of >= 0)
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
    weights_.resize((weights_.size() + kWeightAlignment - 1) / kWeightAlignment * kWeightAlignment, 0);
    l.offset = static_cast<int64_t>(weights_.size() / es);
    weight_at_[v] = l.offset;
    weight_list_.push_back({val.name, weights_.size(), t.dims(), l.half});
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

  Expected<std::string> EmitNode(const ir::Node& n) {
    auto fail = [&](const std::string& msg) { return Error(NodeName(g_, n) + " (" + n.op_type + "): " + msg); };
    for (int v : n.outputs) {
      if (v < 0) continue;
      const ir::Value& val = g_.values[v];
      if (val.type.dtype != DType::kFloat32)
        return fail("output '" + val.name + "' has element type " + std::string(DTypeName(val.type.dtype)) +
                    "; --target cuda computes float tensors only");
    }
    const EmitFn* fn = FindEmitter(n.domain, n.op_type);
    bool small = true;
    for (const auto* vals : {&n.inputs, &n.outputs})
      for (int v : *vals) {
        auto it = v >= 0 ? slot_of_.find(v) : slot_of_.end();
        if (it != slot_of_.end() && slots_[it->second.first].elements > EmitContext::kRegisterSlotLimit) small = false;
      }
    EmitContext ctx(g_, n, model_.OpsetFor(n.domain), small, [this](int v) { return Locate(v); });
    Status st = (*fn)(ctx);
    if (!st.ok()) return fail(st.message());
    return ctx.body();
  }

  std::string Banner(const std::string& what) const {
    std::string s = "/* " + what + "\n * Generated by kiln " + o_.kiln_version + ". Do not edit.\n";
    if (!o_.command_line.empty()) s += " * command: " + CommentText(o_.command_line, 400) + "\n";
    s += " * model:   " + CommentText(model_.source_path, 400) + "\n";
    s += " * precision: " + std::string(half_ ? "fp16 (matrix and filter weights stored as IEEE half, arithmetic in float)"
                                              : "fp32 (weights and arithmetic in float)") + "\n */\n";
    return s;
  }

  std::string Header() const {
    std::string n = o_.name, u = upper_, guard = "KILN_" + u + "_CUDA_H_";
    std::string s = Banner(n + ".h: the interface of the CUDA kernel of model " + n + ".");
    s += "#ifndef " + guard + "\n#define " + guard + "\n\n#include <stddef.h>\n#include <stdint.h>\n";
    s += "#ifndef KILN_CUDA_HOST_CHECK\n#include <cuda_runtime_api.h>\n#endif\n\n";
    s += "#ifdef __cplusplus\nextern \"C\" {\n#endif\n\n";
    s += R"(#ifndef KILN_OK
#define KILN_OK 0
#define KILN_ERROR_NULL_ARGUMENT 1        /* inputs, outputs or workspace is NULL */
#define KILN_ERROR_NULL_TENSOR 2          /* an input or output pointer is NULL */
#define KILN_ERROR_NULL_WORKSPACE 3       /* workspace->arena is NULL */
#define KILN_ERROR_MISALIGNED_WORKSPACE 4 /* workspace->arena is not WORKSPACE_ALIGNMENT-aligned */
#define KILN_ERROR_INVALID_INDEX 5        /* set_input / set_output: no tensor at that index */
#define KILN_ERROR_INVALID_DATA 6         /* an index in the input data is out of range */
#endif
#ifndef KILN_ERROR_CUDA
#define KILN_ERROR_CUDA 7                 /* a CUDA runtime call failed (cudaGetLastError tells which) */
#define KILN_ERROR_INVALID_SIZE 8         /* the sample count is negative or too large for one launch */
#endif

)";
    const auto feeds = g_.RuntimeInputs();
    s += "/* Device pointers; sample i occupies elements [i * ELEMENTS, (i + 1) * ELEMENTS). */\n";
    s += "struct kiln_" + n + "_inputs {\n";
    for (size_t k = 0; k < feeds.size(); ++k)
      s += "  const float *" + in_members_[k] + "; /* " + CommentText(g_.values[feeds[k]].name) + ": float32" +
           DimsToString(g_.values[feeds[k]].type.dims) + " per sample */\n";
    if (feeds.empty()) s += "  const void *none; /* the model has none */\n";
    s += "};\nstruct kiln_" + n + "_outputs {\n";
    for (size_t k = 0; k < g_.outputs.size(); ++k)
      s += "  float *" + out_members_[k] + "; /* " + CommentText(g_.values[g_.outputs[k]].name) + ": float32" +
           DimsToString(g_.values[g_.outputs[k]].type.dims) + " per sample */\n";
    s += "};\n\n";
    for (size_t k = 0; k < feeds.size(); ++k)
      s += "#define KILN_" + u + "_INPUT" + std::to_string(k) + "_ELEMENTS " +
           std::to_string(NumElements(g_.values[feeds[k]].type.dims)) + " /* " + CommentText(g_.values[feeds[k]].name) + " */\n";
    for (size_t k = 0; k < g_.outputs.size(); ++k)
      s += "#define KILN_" + u + "_OUTPUT" + std::to_string(k) + "_ELEMENTS " +
           std::to_string(NumElements(g_.values[g_.outputs[k]].type.dims)) + " /* " +
           CommentText(g_.values[g_.outputs[k]].name) + " */\n";
    s += "#define KILN_" + u + "_WEIGHT_BYTES " + std::to_string(weights_.size()) + "\n";
    s += "#define KILN_" + u + "_THREADS_PER_BLOCK " + std::to_string(kThreadsPerBlock) + "\n\n";
    s += "#ifndef KILN_CUDA_HOST_CHECK\n";
    s += "/* Copies the weight bytes (embedded in " + n + ".cu) to a new device buffer, once. */\n";
    s += "int32_t kiln_" + n + "_upload_weights(void **device_weights);\n";
    s += "/* Evaluates samples 0..n-1, one thread each, asynchronously on `stream`. */\n";
    s += "int32_t kiln_" + n + "_run(const void *device_weights, const struct kiln_" + n + "_inputs *inputs,\n" +
         "                const struct kiln_" + n + "_outputs *outputs, int64_t n, cudaStream_t stream);\n";
    s += "int32_t kiln_" + n + "_free_weights(void *device_weights);\n#endif\n\n";
    s += "#ifdef __cplusplus\n}\n#endif\n\n#endif /* " + guard + " */\n";
    return s;
  }

  std::string Source() const {
    std::string n = o_.name, u = upper_;
    const auto feeds = g_.RuntimeInputs();
    std::string s = Banner(n + ".cu: the whole network as one CUDA kernel, one sample per thread.");
    s += "#include \"" + n + ".h\"\n\n#include <math.h>\n#include <string.h>\n\n" + kPrelude;
    bool half_loads = body_.find("kiln_ldh") != std::string::npos;
    for (const auto& [fn, text] : Helpers())
      if (body_.find(fn + "(") != std::string::npos || (fn == "kiln_h2f" && half_loads)) s += text;
    s += "\n";
    // Weights.
    s += "/* The weight buffer: " + std::to_string(weights_.size()) + " bytes, each tensor 16-byte aligned.\n";
    for (const auto& w : weight_list_)
      s += " *   byte " + std::to_string(w.byte) + ": " + CommentText(w.name) + " " + DimsToString(w.dims) +
           (w.half ? " half" : " float") + "\n";
    s += " */\nalignas(16) static const unsigned char kiln_" + n + "_weights[" +
         std::to_string(std::max<size_t>(weights_.size(), 1)) + "] = {";
    for (size_t i = 0; i < weights_.size(); ++i) {
      char b[16];
      std::snprintf(b, sizeof(b), "%s0x%02x,", i % 20 == 0 ? "\n   " : "", weights_[i]);
      s += b;
    }
    s += weights_.empty() ? "0};\n\n" : "\n};\n\n";
    // Slots.
    std::string decl;
    for (size_t k = 0; k < slots_.size(); ++k) {
      std::string members;
      for (size_t j = 0; j < slots_[k].values.size(); ++j) members += (j ? ", " : "") + slots_[k].values[j];
      decl += "  float slot" + std::to_string(k) + "[" + std::to_string(std::max<int64_t>(slots_[k].elements, 1)) +
              "]; /* " + CommentText(members, 300) + " */\n";
    }
    std::string params = "const unsigned char *__restrict__ weights";
    for (const auto& m : in_members_) params += ", const float *__restrict__ in_" + m;
    for (const auto& m : out_members_) params += ", float *__restrict__ out_" + m;
    s += "/* The network on sample i. Slots are the planner's colours (" + std::to_string(slots_.size()) +
         " per-thread arrays, " + std::to_string(SlotElements()) + " floats); every index is a constant once the\n" +
         " * loops are unrolled, so nvcc keeps small slots in registers. */\n";
    s += "KILN_HD static inline void kiln_" + n + "_sample(" + params + ", int64_t i) {\n";
    // Float and half views of the weight bytes, where the body reads them.
    if (body_.find("(w + ") != std::string::npos) s += "  const float *__restrict__ w = (const float *)weights;\n";
    if (body_.find("(wh + ") != std::string::npos)
      s += "  const unsigned short *__restrict__ wh = (const unsigned short *)weights;\n";
    if (body_.find("(w + ") == std::string::npos && body_.find("(wh + ") == std::string::npos) s += "  (void)weights;\n";
    s += decl + body_ + "}\n\n";
    // Kernel and host functions.
    std::string args = "weights";
    for (const auto& m : in_members_) args += ", in." + m;
    for (const auto& m : out_members_) args += ", out." + m;
    s += "#ifdef __CUDACC__\n";
    s += "__global__ void __launch_bounds__(KILN_" + u + "_THREADS_PER_BLOCK)\nkiln_" + n +
         "_kernel(const unsigned char *__restrict__ weights, struct kiln_" + n + "_inputs in, struct kiln_" + n +
         "_outputs out, int64_t n) {\n";
    s += "  const int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;\n  if (i < n) kiln_" + n + "_sample(" + args + ", i);\n}\n\n";
    s += "int32_t kiln_" + n + "_upload_weights(void **device_weights) {\n";
    s += "  void *p = NULL;\n  if (device_weights == NULL) return KILN_ERROR_NULL_ARGUMENT;\n  *device_weights = NULL;\n";
    s += "  if (cudaMalloc(&p, sizeof(kiln_" + n + "_weights)) != cudaSuccess) return KILN_ERROR_CUDA;\n";
    s += "  if (cudaMemcpy(p, kiln_" + n + "_weights, sizeof(kiln_" + n + "_weights), cudaMemcpyHostToDevice) != cudaSuccess) {\n";
    s += "    cudaFree(p);\n    return KILN_ERROR_CUDA;\n  }\n  *device_weights = p;\n  return KILN_OK;\n}\n\n";
    s += "int32_t kiln_" + n + "_run(const void *device_weights, const struct kiln_" + n + "_inputs *inputs,\n" +
         "                const struct kiln_" + n + "_outputs *outputs, int64_t n, cudaStream_t stream) {\n";
    s += "  const int64_t per_block = KILN_" + u + "_THREADS_PER_BLOCK;\n";
    s += "  if (device_weights == NULL || inputs == NULL || outputs == NULL) return KILN_ERROR_NULL_ARGUMENT;\n";
    for (const auto& m : in_members_) s += "  if (inputs->" + m + " == NULL) return KILN_ERROR_NULL_TENSOR;\n";
    for (const auto& m : out_members_) s += "  if (outputs->" + m + " == NULL) return KILN_ERROR_NULL_TENSOR;\n";
    s += "  if (n < 0 || (n + per_block - 1) / per_block > 2147483647) return KILN_ERROR_INVALID_SIZE;\n";
    s += "  if (n == 0) return KILN_OK;\n";
    s += "  kiln_" + n + "_kernel<<<(unsigned)((n + per_block - 1) / per_block), (unsigned)per_block, 0, stream>>>(\n" +
         "      (const unsigned char *)device_weights, *inputs, *outputs, n);\n";
    s += "  return cudaGetLastError() == cudaSuccess ? KILN_OK : KILN_ERROR_CUDA;\n}\n\n";
    s += "int32_t kiln_" + n + "_free_weights(void *device_weights) {\n";
    s += "  if (device_weights == NULL) return KILN_OK;\n  return cudaFree(device_weights) == cudaSuccess ? KILN_OK : KILN_ERROR_CUDA;\n}\n";
    s += "#endif /* __CUDACC__ */\n";
    return s;
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
    bool half;
  };

  const ir::Model& model_;
  const ir::Graph& g_;
  const CompileOptions& o_;
  std::string upper_;
  bool half_;
  std::map<int, passes::ConstantEncoding> enc_;
  std::set<int> matrix_weights_;  // B of MatMul / Gemm, W of Conv: stored as half with fp16
  planner::GraphPlan plan_;
  std::vector<Slot> slots_;
  std::map<int, std::pair<int, int64_t>> slot_of_;  // value -> (slot, element offset)
  std::map<int, int64_t> weight_at_;                // value -> element offset in the weight buffer
  std::vector<WeightEntry> weight_list_;
  std::vector<unsigned char> weights_;
  std::vector<std::string> in_members_, out_members_;
  std::string body_;
};

// Layout ops (views included) must keep axis 0 as the batch: merging it into another axis or
// dropping it would, in the batched model, mix samples that each thread sees alone.
Status CheckKeepsBatch(const ir::Graph& g, const ir::Node& n) {
  const std::string& op = n.op_type;
  if (op == "Transpose") {  // cancel-transposes turns one that moves only size-1 axes into a Reshape
    std::vector<int64_t> perm = n.attr_ints("perm");
    size_t rank = g.values[n.inputs[0]].type.dims.size();
    if (rank > 1 && (perm.empty() ? static_cast<int64_t>(rank) - 1 : perm[0]) != 0)
      return Error(NodeName(g, n) + " (Transpose): it moves axis 0 (the batch), which mixes samples a per-thread kernel sees alone");
    return OkStatus();
  }
  if (op != "Reshape" && op != "Flatten" && op != "Squeeze" && op != "Unsqueeze") return OkStatus();
  auto fail = [&] {
    return Error(NodeName(g, n) + " (" + op + "): it moves axis 0 (the batch) into other axes, which a per-thread kernel cannot do");
  };
  const Dims& in = g.values[n.inputs[0]].type.dims;
  const Dims& out = g.values[n.outputs[0]].type.dims;
  if (out.empty() || out[0] != 1 || in.empty()) return fail();
  std::vector<int64_t> axes = n.attr_ints("axes");
  if (n.inputs.size() > 1 && n.inputs[1] >= 0 && g.values[n.inputs[1]].constant && op != "Reshape") {
    const Tensor& t = *g.values[n.inputs[1]].constant;
    axes.clear();
    for (int64_t k = 0; k < t.size(); ++k) axes.push_back(static_cast<int64_t>(c::ElementAsDouble(t, k)));
  }
  if (op == "Flatten" && (n.attr_int("axis", 1) == 0 || n.attr_int("axis", 1) == -static_cast<int64_t>(in.size()))) return fail();
  if (op == "Squeeze" && axes.empty()) return fail();  // squeezes every size-1 axis, the batch too
  size_t rank = op == "Unsqueeze" ? out.size() : in.size();
  for (int64_t a : axes)
    if ((op == "Squeeze" || op == "Unsqueeze") && (a < 0 ? a + static_cast<int64_t>(rank) : a) == 0) return fail();
  return OkStatus();
}

Status CheckTensor(const ir::Value& v, const char* what, bool batch) {
  if (v.type.kind != ir::TypeInfo::Kind::kTensor || v.type.dtype != DType::kFloat32)
    return Error(std::string(what) + " '" + v.name + "' is not a float32 tensor; --target cuda takes float inputs and outputs");
  if (!v.type.shape_known())
    return Error(std::string(what) + " '" + v.name + "' has dims " + v.type.ToString() +
                 " not known at compile time; give the input dims with --shape");
  if (batch && (v.type.dims.empty() || v.type.dims[0] != 1))
    return Error(std::string(what) + " '" + v.name + "' has dims " + DimsToString(v.type.dims) +
                 "; its leading dim must be the batch (1 per sample)");
  return OkStatus();
}

}  // namespace

Expected<CompiledCuda> CompileToCuda(ir::Model model, const CompileOptions& options) {
  if (!c::IsValidModelName(options.name))
    return Error("--name '" + options.name +
                 "': the model name must be a C identifier (letters, digits, '_', starting with a "
                 "letter, at most 40 characters, not starting with 'kiln', not 'model' and not a C keyword)");
  // One sample: the leading dim of every input (given with --shape, or the model's) becomes 1.
  passes::ShapeOverrides shapes = options.shapes;
  for (int v : model.graph->RuntimeInputs()) {
    const ir::Value val = model.graph->values[v];
    auto it = shapes.find(val.name);
    Dims d = it != shapes.end() ? it->second : val.type.dims;
    if (d.empty())
      return Error("input '" + val.name + "' has no dims; --target cuda maps the leading (batch) dim of every input to threads");
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
  KILN_RETURN_IF_ERROR(passes::InferShapes(model, shapes));
  // Before the passes: for one sample, some of these become identities and vanish.
  // Only values computed from the inputs carry samples (a Reshape of a weight is fine).
  {
    const ir::Graph& g = *model.graph;
    std::vector<bool> per_sample(g.values.size(), false);
    for (int v : g.RuntimeInputs()) per_sample[v] = true;
    for (const auto& n : g.nodes) {
      bool any = false;
      for (int v : n.inputs) any = any || (v >= 0 && per_sample[v]);
      for (int v : n.implicit_inputs) any = any || (v >= 0 && per_sample[v]);
      if (n.op_type == "Shape" || n.op_type == "Size") any = false;  // dims, not sample data
      for (int v : n.outputs)
        if (v >= 0) per_sample[v] = any;
      if (any && n.inputs[0] >= 0 && per_sample[n.inputs[0]]) KILN_RETURN_IF_ERROR(CheckKeepsBatch(g, n));
    }
  }
  passes::PipelineOptions po;
  po.dump_ir_after = options.dump_ir_after;
  KILN_RETURN_IF_ERROR(passes::RunPasses(model, options.passes, po));
  KILN_RETURN_IF_ERROR(passes::FoldConstants(model));
  const ir::Graph& g = *model.graph;
  for (const auto& n : g.nodes)
    if (!FindEmitter(n.domain, n.op_type))
      return Error(NodeName(g, n) + ": op " + (n.domain.empty() || n.domain == "ai.onnx" ? "" : n.domain + ".") +
                   n.op_type + " is not supported by --target cuda");
  for (int v : g.RuntimeInputs()) KILN_RETURN_IF_ERROR(CheckTensor(g.values[v], "input", true));
  for (int v : g.outputs) KILN_RETURN_IF_ERROR(CheckTensor(g.values[v], "output", true));
  passes::ConstantReport report = passes::CompressConstants(*model.graph);
  Generator gen(model, options, report);
  return gen.Run();
}

}  // namespace kiln::codegen::cuda
