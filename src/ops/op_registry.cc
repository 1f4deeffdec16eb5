#include <set>

#include "ops/op.h"
#include "ops/op_traits.h"

namespace kiln::ops {

const OpRegistry& OpRegistry::Global() {
  static const OpRegistry* registry = [] {
    auto* r = new OpRegistry();
    RegisterElementwiseOps(*r);
    RegisterActivationOps(*r);
    RegisterShapeOps(*r);
    RegisterIndexingOps(*r);
    RegisterConvOps(*r);
    RegisterConvGlobalPoolOps(*r);
    RegisterPoolOps(*r);
    RegisterNormalizationOps(*r);
    RegisterMatMulOps(*r);
    RegisterReduceOps(*r);
    RegisterSortOps(*r);
    RegisterQuantizeOps(*r);
    RegisterQuantizeIntegerOps(*r);
    RegisterResizeOps(*r);
    RegisterMiscOps(*r);
    RegisterControlFlowOps(*r);
    RegisterRecurrentOps(*r);
    RegisterSequenceOps(*r);
    RegisterTextOps(*r);
    RegisterImageOps(*r);
    // Ops whose first input may be absent: none at all, variadic (their infer checks the
    // count), or optional (Loop M, Scan-8 sequence_lens).
    for (const char* op : {"Constant", "RandomNormal", "RandomUniform", "SequenceEmpty", "Optional",
                           "SequenceConstruct", "Sum", "Mean", "Max", "Min", "Concat", "Loop",
                           "Scan", "OptionalHasElement"})
      for (auto& [key, schema] : r->ops_)
        if (key.second == op) schema.required_inputs = 0;
    return r;
  }();
  return *registry;
}

InferFn RefuseStrings(InferFn infer) {
  return [infer = std::move(infer)](InferContext& ctx) -> Status {
    auto is_string = [](const ir::TypeInfo& t) {
      return t.dtype == DType::kString || (t.elem && t.elem->dtype == DType::kString);
    };
    for (int i = 0; i < ctx.num_inputs(); ++i)
      if (ctx.has_input(i) && is_string(ctx.input_type(i)))
        return ctx.error(ctx.node().op_type + " does not take string tensors (input " +
                         std::to_string(i) + ")");
    KILN_RETURN_IF_ERROR(infer(ctx));
    for (int i = 0; i < ctx.num_outputs(); ++i)
      if (is_string(ctx.outputs_[i]))
        return ctx.error(ctx.node().op_type + " does not make string tensors");
    return OkStatus();
  };
}

namespace {

// The stand-in element type of a string element: no kMovesElements op mixes it with strings.
constexpr DType kStandIn = DType::kUInt64;

bool AnyStringInput(const std::vector<const ir::TypeInfo*>& types) {
  for (const ir::TypeInfo* t : types)
    if (t && t->kind == ir::TypeInfo::Kind::kTensor && t->dtype == DType::kString) return true;
  return false;
}

}  // namespace

InferFn MoveStringsByIndex(InferFn infer) {
  return [infer = std::move(infer)](InferContext& ctx) -> Status {
    if (!AnyStringInput(ctx.input_types_)) return infer(ctx);
    const std::vector<const ir::TypeInfo*> types = ctx.input_types_;
    const std::vector<const Tensor*> values = ctx.input_values_;
    std::vector<ir::TypeInfo> stand_ins(types.size());
    for (size_t i = 0; i < types.size(); ++i) {
      if (!types[i]) continue;
      if (types[i]->dtype == kStandIn)
        return ctx.error(ctx.node().op_type + " takes strings, but not beside UINT64 inputs");
      if (types[i]->dtype != DType::kString) continue;
      stand_ins[i] = *types[i];
      stand_ins[i].dtype = kStandIn;
      ctx.input_types_[i] = &stand_ins[i];
      if (i < ctx.input_values_.size()) ctx.input_values_[i] = nullptr;
    }
    Status st = infer(ctx);
    ctx.input_types_ = types;
    ctx.input_values_ = values;
    for (ir::TypeInfo& t : ctx.outputs_)
      if (t.dtype == kStandIn) t.dtype = DType::kString;
    return st;
  };
}

ComputeFn MoveStringsByIndex(ComputeFn compute) {
  return [compute = std::move(compute)](ComputeContext& ctx) -> Status {
    bool strings = false;
    for (const Tensor* t : ctx.inputs_) strings = strings || (t && t->is_string());
    if (!strings) return compute(ctx);
    // Every string input's elements, numbered in input order: the stand-in of element k of the
    // j-th string input is the count of the elements before it.
    std::vector<const std::string*> pool;
    const std::vector<const Tensor*> inputs = ctx.inputs_;
    std::vector<Tensor> in_stand_ins(inputs.size());
    for (size_t i = 0; i < inputs.size(); ++i) {
      if (!inputs[i] || !inputs[i]->is_string()) continue;
      Tensor& t = in_stand_ins[i] = Tensor(kStandIn, inputs[i]->dims());
      for (int64_t k = 0; k < t.size(); ++k) {
        t.data<uint64_t>()[k] = pool.size();
        pool.push_back(&inputs[i]->strings()[k]);
      }
      ctx.inputs_[i] = &t;
    }
    // The string outputs the executor made become stand-ins of the same dims (an output the
    // kernel allocates itself comes back in the stand-in type).
    const std::vector<Tensor*> outputs = ctx.outputs_;
    std::vector<Tensor> out_stand_ins(outputs.size());
    std::vector<char> stands_in(outputs.size(), 0);
    for (size_t o = 0; o < outputs.size(); ++o) {
      stands_in[o] = outputs[o]->is_string() || !outputs[o]->defined();
      if (!outputs[o]->is_string()) continue;
      out_stand_ins[o] = Tensor(kStandIn, outputs[o]->dims());
      ctx.outputs_[o] = &out_stand_ins[o];
    }
    Status st = compute(ctx);
    ctx.inputs_ = inputs;
    for (size_t o = 0; o < outputs.size(); ++o) {
      Tensor* made = ctx.outputs_[o];
      ctx.outputs_[o] = outputs[o];
      if (!st.ok() || !stands_in[o] || made->kind() != Tensor::Kind::kTensor ||
          made->dtype() != kStandIn)
        continue;
      Tensor s(DType::kString, made->dims());
      for (int64_t k = 0; k < s.size(); ++k) {
        const uint64_t at = made->data<uint64_t>()[k];
        if (at >= pool.size()) return ctx.error("moved a string from nowhere (a kiln bug)");
        s.strings()[k] = *pool[at];
      }
      *outputs[o] = std::move(s);
    }
    return st;
  };
}

Status CheckRequiredInputs(const OpSchema& schema, const ir::Node& node, const ir::Graph& graph) {
  for (int i = 0; i < schema.required_inputs; ++i)
    if (i >= static_cast<int>(node.inputs.size()) || node.inputs[i] < 0)
      return Error(node.Label(graph) + ": required input " + std::to_string(i) + " is missing");
  if (node.outputs.empty()) return Error(node.Label(graph) + ": has no outputs");
  return OkStatus();
}

void OpRegistry::Register(const std::string& op_type, InferFn infer, ComputeFn compute,
                          const std::string& domain) {
  auto key = std::make_pair(domain, op_type);
  KILN_CHECK(ops_.count(key) == 0, "op registered twice: " + op_type);
  // Only the ops that declare strings are given them: every other kernel would read a string
  // tensor's elements as bytes, of which it has none.
  if (HasTrait(domain, op_type, kMovesElements)) {
    infer = MoveStringsByIndex(std::move(infer));
    compute = MoveStringsByIndex(std::move(compute));
  } else if (!HasTrait(domain, op_type, kTakesStrings)) {
    infer = RefuseStrings(std::move(infer));
  }
  ops_[key] = OpSchema{domain, op_type, std::move(infer), std::move(compute)};
  // The hot ops whose kernels (every path) write each output element (ops/op_traits.cc): no
  // clearing pass before them.
  const bool whole = HasTrait(domain, op_type, kWritesWholeOutputs);
  ops_[key].writes_whole_outputs = whole;
  // Their shape rules read no input values either (Clip's bounds are scalars whatever they hold).
  ops_[key].infer_from_types_only = whole;
}

void OpRegistry::MarkWritesWholeOutputs(const std::string& op_type, bool types_only,
                                        const std::string& domain) {
  auto it = ops_.find({domain, op_type});
  KILN_CHECK(it != ops_.end(), "marking an op that is not registered: " + op_type);
  it->second.writes_whole_outputs = true;
  it->second.infer_from_types_only = it->second.infer_from_types_only || types_only;
}

const OpSchema* OpRegistry::Find(const std::string& domain, const std::string& op_type) const {
  std::string d = domain == "ai.onnx" ? "" : domain;
  auto it = ops_.find({d, op_type});
  return it == ops_.end() ? nullptr : &it->second;
}

std::vector<std::string> OpRegistry::Names() const {
  std::vector<std::string> n;
  for (const auto& [k, v] : ops_)
    n.push_back(k.first.empty() ? k.second : k.first + "." + k.second);
  return n;
}

}  // namespace kiln::ops
