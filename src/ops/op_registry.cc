#include "ops/op.h"

namespace kiln::ops {

const OpRegistry& OpRegistry::Global() {
  static const OpRegistry* registry = [] {
    auto* r = new OpRegistry();
    RegisterElementwiseOps(*r);
    RegisterActivationOps(*r);
    RegisterShapeOps(*r);
    RegisterIndexingOps(*r);
    RegisterConvOps(*r);
    RegisterPoolOps(*r);
    RegisterNormalizationOps(*r);
    RegisterMatMulOps(*r);
    RegisterReduceOps(*r);
    RegisterSortOps(*r);
    RegisterQuantizeOps(*r);
    RegisterResizeOps(*r);
    RegisterMiscOps(*r);
    RegisterControlFlowOps(*r);
    RegisterRecurrentOps(*r);
    RegisterSequenceOps(*r);
    return r;
  }();
  return *registry;
}

void OpRegistry::Register(const std::string& op_type, InferFn infer, ComputeFn compute,
                          const std::string& domain) {
  auto key = std::make_pair(domain, op_type);
  KILN_CHECK(ops_.count(key) == 0, "op registered twice: " + op_type);
  ops_[key] = OpSchema{domain, op_type, std::move(infer), std::move(compute)};
}

const OpSchema* OpRegistry::Find(const std::string& domain, const std::string& op_type) const {
  std::string d = domain == "ai.onnx" ? "" : domain;
  auto it = ops_.find({d, op_type});
  return it == ops_.end() ? nullptr : &it->second;
}

std::vector<std::string> OpRegistry::Names() const {
  std::vector<std::string> n;
  for (const auto& [k, v] : ops_) n.push_back(k.first.empty() ? k.second : k.first + "." + k.second);
  return n;
}

}  // namespace kiln::ops
