#include "codegen/c/node_emitter.h"

namespace kiln::codegen::c {

const EmitterRegistry& EmitterRegistry::Global() {
  static const EmitterRegistry* r = [] {
    auto* reg = new EmitterRegistry;
    RegisterElementwiseEmitters(*reg);
    RegisterShapeEmitters(*reg);
    RegisterConvEmitters(*reg);
    RegisterQConvEmitters(*reg);
    RegisterMatMulEmitters(*reg);
    RegisterNormalizationEmitters(*reg);
    RegisterReduceEmitters(*reg);
    RegisterIndexingEmitters(*reg);
    RegisterControlFlowEmitters(*reg);
    RegisterSequenceModelEmitters(*reg);
    RegisterMiscEmitters(*reg);
    return reg;
  }();
  return *r;
}

void EmitterRegistry::Register(const std::string& op_type, NodeEmitFn fn,
                               const std::string& domain) {
  fns_[{domain, op_type}] = std::move(fn);
}

const NodeEmitFn* EmitterRegistry::Find(const std::string& domain,
                                        const std::string& op_type) const {
  auto it = fns_.find({domain == "ai.onnx" ? "" : domain, op_type});
  return it == fns_.end() ? nullptr : &it->second;
}

std::vector<std::string> EmitterRegistry::Names() const {
  std::vector<std::string> n;
  for (const auto& [k, fn] : fns_)
    n.push_back(k.first.empty() ? k.second : k.first + "." + k.second);
  return n;
}

std::string IntList(const std::vector<int64_t>& v) {
  if (v.empty()) return "{0}";
  std::string s = "{";
  for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + std::to_string(v[i]);
  return s + "}";
}

std::vector<int64_t> Strides(const Dims& dims) {
  std::vector<int64_t> s(dims.size(), 1);
  for (size_t i = dims.size(); i-- > 1;) s[i - 1] = s[i] * dims[i];
  return s;
}

void LoopNest(NodeContext& ctx, const Dims& dims,
              const std::function<void(const std::vector<std::string>& idx)>& body) {
  std::vector<std::string> idx;
  for (size_t d = 0; d < dims.size(); ++d) {
    std::string i = "i" + std::to_string(d);
    ctx.Line("for (size_t " + i + " = 0; " + i + " < " + std::to_string(dims[d]) + "; ++" + i +
             ") {");
    ctx.Indent();
    idx.push_back(i);
  }
  body(idx);
  for (size_t d = 0; d < dims.size(); ++d) {
    ctx.Dedent();
    ctx.Line("}");
  }
}

}  // namespace kiln::codegen::c
