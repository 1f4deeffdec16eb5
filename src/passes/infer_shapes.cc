#include "passes/infer_shapes.h"

#include "ops/op.h"
#include "ops/op_traits.h"
#include "passes/fold_constants.h"

namespace kiln::passes {
namespace {

constexpr int64_t kMaxFoldElements = 1 << 16;

// Checks an inferred type against what the file declared, keeping the more precise of the two.
Status Merge(const ir::TypeInfo& inferred, ir::TypeInfo& declared, const ir::Node& n,
             const ir::Graph& g, const std::string& value) {
  if (declared.kind == ir::TypeInfo::Kind::kTensor && declared.dtype != DType::kUndefined &&
      inferred.dtype != DType::kUndefined && declared.dtype != inferred.dtype)
    return Error(n.Label(g) + ": output '" + value + "' is declared " +
                 std::string(DTypeName(declared.dtype)) + " but computes " +
                 std::string(DTypeName(inferred.dtype)));
  if (declared.has_shape && inferred.has_shape) {
    if (declared.dims.size() != inferred.dims.size())
      return Error(n.Label(g) + ": output '" + value + "' is declared with shape " +
                   declared.ToString() + " but computes " + inferred.ToString());
    for (size_t i = 0; i < declared.dims.size(); ++i)
      if (declared.dims[i] >= 0 && inferred.dims[i] >= 0 && declared.dims[i] != inferred.dims[i])
        return Error(n.Label(g) + ": output '" + value + "' is declared with shape " +
                     declared.ToString() + " but computes " + inferred.ToString());
  }
  std::vector<std::string> symbols = declared.symbols;
  declared = inferred;
  if (symbols.size() == declared.dims.size()) declared.symbols = symbols;
  return OkStatus();
}

class Inferrer {
 public:
  explicit Inferrer(const ir::Model& m) : model_(m) {}

  Status Run(ir::Graph& g, std::vector<const Tensor*> parent_values = {}) {
    std::vector<std::optional<Tensor>> folded(g.values.size());
    std::vector<const Tensor*> known(g.values.size(), nullptr);
    for (size_t v = 0; v < g.values.size(); ++v)
      if (g.values[v].constant) known[v] = &*g.values[v].constant;
    for (auto [local, outer] : g.captures) {
      if (outer < static_cast<int>(parent_values.size())) known[local] = parent_values[outer];
      // A captured value has its outer value's type (inferred by now: the node comes later).
      ir::TypeInfo& lt = g.values[local].type;
      if (g.parent && lt.dtype == DType::kUndefined && !lt.has_shape)
        lt = g.parent->values[outer].type;
    }
    const auto& registry = ops::OpRegistry::Global();

    for (ir::Node& n : g.nodes) {
      // Subgraphs first, so control-flow infer functions see their bodies' types.
      // A body's error is not the model's: an If branch that never runs may be invalid for
      // these inputs. Its types stay unknown and the run reports the error if it executes.
      for (auto& [k, a] : n.attrs) {
        if (a.g) (void)Run(*a.g, known);
        for (auto& sg : a.graphs) (void)Run(*sg, known);
      }
      const ops::OpSchema* schema = registry.Find(n.domain, n.op_type);
      if (!schema) continue;  // reported by whoever needs to run it
      KILN_RETURN_IF_ERROR(ops::CheckRequiredInputs(*schema, n, g));
      bool all_known = true;
      ops::InferContext ctx(n, g, model_.OpsetFor(n.domain));
      for (int v : n.inputs) {
        if (v < 0) {
          ctx.input_types_.push_back(nullptr);
          ctx.input_values_.push_back(nullptr);
          continue;
        }
        const ir::TypeInfo& t = g.values[v].type;
        if (t.kind == ir::TypeInfo::Kind::kTensor && !t.shape_known()) all_known = false;
        ctx.input_types_.push_back(&t);
        ctx.input_values_.push_back(known[v]);
      }
      if (!all_known) continue;
      ctx.outputs_.assign(n.outputs.size() + ops::kScratchOutputs, ir::TypeInfo{});
      Status st = schema->infer(ctx);
      if (!st.ok()) return st;
      bool outputs_known = true;
      for (size_t i = 0; i < n.outputs.size(); ++i) {
        if (n.outputs[i] < 0) continue;
        ir::Value& val = g.values[n.outputs[i]];
        KILN_RETURN_IF_ERROR(Merge(ctx.outputs_[i], val.type, n, g, val.name));
        if (!ctx.outputs_[i].shape_known()) outputs_known = false;
      }
      // Fold small constant computations so that shape-computing chains resolve.
      bool inputs_constant = true;
      int64_t elements = 0;
      for (size_t i = 0; i < n.inputs.size(); ++i) {
        if (n.inputs[i] < 0) continue;
        if (!known[n.inputs[i]])
          inputs_constant = false;
        else
          elements += known[n.inputs[i]]->size();
      }
      bool shape_op = ops::ReadsDimsOnly(n.domain, n.op_type);
      if (!outputs_known || !IsFoldable(n) || !(inputs_constant || shape_op)) continue;
      int64_t out_elements = 0;
      for (const auto& t : ctx.outputs_)
        if (t.shape_known()) out_elements += NumElements(t.dims);
      if (elements + out_elements > kMaxFoldElements && !shape_op) continue;
      std::vector<Tensor> inputs_storage(n.inputs.size());
      std::vector<Tensor> outs(ctx.outputs_.size());
      ops::ComputeContext cc(n, g, model_.OpsetFor(n.domain));
      for (size_t i = 0; i < n.inputs.size(); ++i) {
        int v = n.inputs[i];
        if (v < 0) {
          cc.inputs_.push_back(nullptr);
        } else if (known[v]) {
          cc.inputs_.push_back(known[v]);
        } else {  // Shape/Size read only the dims: give them a dims-only stand-in
          inputs_storage[i] = Tensor::View(g.values[v].type.dtype, g.values[v].type.dims, nullptr);
          cc.inputs_.push_back(&inputs_storage[i]);
        }
      }
      for (size_t i = 0; i < outs.size(); ++i) {
        if (ctx.outputs_[i].shape_known())
          outs[i] = Tensor(ctx.outputs_[i].dtype, ctx.outputs_[i].dims);
        cc.outputs_.push_back(&outs[i]);
      }
      if (!schema->compute(cc).ok()) continue;  // the run will report it
      for (size_t i = 0; i < n.outputs.size(); ++i) {
        if (n.outputs[i] < 0) continue;
        folded[n.outputs[i]] = std::move(outs[i]);
        known[n.outputs[i]] = &*folded[n.outputs[i]];
      }
    }
    folded_.push_back(std::move(folded));  // keep alive for subgraphs inferred later
    return OkStatus();
  }

 private:
  const ir::Model& model_;
  std::vector<std::vector<std::optional<Tensor>>> folded_;
};

}  // namespace

std::string ListValues(const ir::Graph& g, const std::vector<int>& values) {
  std::string s;
  for (int v : values)
    s += (s.empty() ? "" : ", ") + g.values[v].name + " (" + g.values[v].type.ToString() + ")";
  return s.empty() ? "none" : s;
}

Status InferShapes(ir::Model& model, const ShapeOverrides& overrides) {
  ir::Graph& g = *model.graph;
  for (const auto& [name, dims] : overrides) {
    bool found = false;
    for (int v : g.RuntimeInputs()) {
      if (g.values[v].name != name) continue;
      found = true;
      ir::TypeInfo& t = g.values[v].type;
      if (t.has_shape && t.dims.size() != dims.size())
        return Error("--shape " + name + ": input has rank " + std::to_string(t.dims.size()) +
                     ", got " + std::to_string(dims.size()) + " dims");
      for (size_t i = 0; t.has_shape && i < dims.size(); ++i)
        if (t.dims[i] >= 0 && t.dims[i] != dims[i])
          return Error("--shape " + name + ": dim " + std::to_string(i) + " is fixed at " +
                       std::to_string(t.dims[i]) + " by the model");
      std::vector<std::string> symbols = t.symbols;
      DType dt = t.dtype;
      t = ir::TypeInfo::Tensor(dt, dims);
      if (symbols.size() == dims.size()) t.symbols = symbols;
    }
    if (!found)
      return Error("--shape " + name + ": the model has no input of that name; its inputs are " +
                   ListValues(g, g.RuntimeInputs()));
  }
  Inferrer inf(model);
  return inf.Run(g);
}

}  // namespace kiln::passes
