#include "runtime/executor.h"

#include <algorithm>
#include <unordered_map>

#include "ops/op.h"

namespace kiln::runtime {
namespace {

constexpr size_t kAlignment = 64;

size_t AlignUp(size_t n) { return (n + kAlignment - 1) / kAlignment * kAlignment; }

// What a graph needs at every run, computed once: kernels and the last use of each value.
struct GraphInfo {
  std::vector<const ops::OpSchema*> schemas;
  std::vector<int64_t> opsets;
  std::vector<std::vector<int>> release_after;  // per node: values dead after it
};

}  // namespace

struct Executor::Impl : public ops::SubgraphRunner {
  Executor* self = nullptr;
  std::unordered_map<const ir::Graph*, GraphInfo> infos;
  std::vector<int> slot_of;  // main graph value -> slot index or -1
  std::vector<uint8_t, std::allocator<uint8_t>> arena_storage;
  uint8_t* arena = nullptr;

  struct Frame {
    const ir::Graph* graph;
    const Frame* parent;
    std::vector<Tensor> values;
  };
  std::vector<const Frame*> frame_stack;

  Status Prepare(const ir::Graph& g, const ir::Model& m) {
    GraphInfo info;
    const auto& reg = ops::OpRegistry::Global();
    std::vector<int> last_use(g.values.size(), -1);
    for (size_t n = 0; n < g.nodes.size(); ++n) {
      const ir::Node& node = g.nodes[n];
      const ops::OpSchema* s = reg.Find(node.domain, node.op_type);
      if (!s)
        return Error(node.Label(g) + ": unsupported operator " +
                     (node.domain.empty() ? "" : node.domain + ".") + node.op_type);
      info.schemas.push_back(s);
      info.opsets.push_back(m.OpsetFor(node.domain));
      for (int v : node.inputs)
        if (v >= 0) last_use[v] = static_cast<int>(n);
      for (int v : node.implicit_inputs)
        if (v >= 0) last_use[v] = static_cast<int>(n);
      for (const auto& [k, a] : node.attrs) {
        if (a.g) KILN_RETURN_IF_ERROR(Prepare(*a.g, m));
        for (const auto& sg : a.graphs) KILN_RETURN_IF_ERROR(Prepare(*sg, m));
      }
    }
    for (int v : g.outputs) last_use[v] = static_cast<int>(g.nodes.size());
    info.release_after.resize(g.nodes.size());
    for (size_t v = 0; v < g.values.size(); ++v)
      if (last_use[v] >= 0 && last_use[v] < static_cast<int>(g.nodes.size()) &&
          !g.values[v].constant)
        info.release_after[last_use[v]].push_back(static_cast<int>(v));
    infos[&g] = std::move(info);
    return OkStatus();
  }

  // First-fit: values in order of definition, each at the lowest offset that overlaps no live
  // value placed before it.
  void PlanArena(const ir::Graph& g) {
    std::vector<int> first(g.values.size(), -1), last(g.values.size(), -1);
    for (size_t n = 0; n < g.nodes.size(); ++n) {
      for (int v : g.nodes[n].outputs)
        if (v >= 0) first[v] = static_cast<int>(n);
      for (int v : g.nodes[n].inputs)
        if (v >= 0) last[v] = static_cast<int>(n);
      for (int v : g.nodes[n].implicit_inputs)
        if (v >= 0) last[v] = static_cast<int>(n);
    }
    std::vector<char> is_output(g.values.size(), 0);
    for (int v : g.outputs) is_output[v] = 1;
    slot_of.assign(g.values.size(), -1);
    auto& slots = self->slots_;
    std::vector<int> live;  // slot indices, pruned as their lifetimes end
    size_t arena_end = 0;
    for (size_t n = 0; n < g.nodes.size(); ++n) {
      for (int v : g.nodes[n].outputs) {
        if (v < 0 || is_output[v]) continue;
        const ir::TypeInfo& t = g.values[v].type;
        if (!t.shape_known() || DTypeSize(t.dtype) == 0) continue;
        size_t size = AlignUp(std::max<size_t>(1, NumElements(t.dims) * DTypeSize(t.dtype)));
        int lu = std::max(last[v], first[v]);
        live.erase(std::remove_if(live.begin(), live.end(),
                                  [&](int s) { return slots[s].last_use < first[v]; }),
                   live.end());
        std::vector<std::pair<size_t, size_t>> busy;
        for (int s : live) busy.push_back({slots[s].offset, slots[s].offset + slots[s].size});
        std::sort(busy.begin(), busy.end());
        size_t offset = 0;
        for (auto [b, e] : busy) {
          if (offset + size <= b) break;
          offset = std::max(offset, e);
        }
        slots.push_back(ArenaSlot{v, offset, size, first[v], lu});
        slot_of[v] = static_cast<int>(slots.size()) - 1;
        live.push_back(slot_of[v]);
        arena_end = std::max(arena_end, offset + size);
      }
    }
    self->arena_bytes_ = arena_end;
    arena_storage.assign(arena_end + kAlignment, 0);
    uintptr_t p = reinterpret_cast<uintptr_t>(arena_storage.data());
    arena = arena_storage.data() + (AlignUp(p) - p);
  }

  Status RunGraph(const ir::Graph& g, const Frame* parent, const std::vector<Tensor>& inputs,
                  std::vector<Tensor>* outputs, bool main_graph) {
    const GraphInfo& info = infos.at(&g);
    Frame f{&g, parent, std::vector<Tensor>(g.values.size())};
    for (size_t v = 0; v < g.values.size(); ++v)
      if (g.values[v].constant) f.values[v] = *g.values[v].constant;
    for (auto [local, outer] : g.captures) f.values[local] = parent->values[outer];
    std::vector<int> feeds = main_graph ? g.RuntimeInputs() : g.inputs;
    if (inputs.size() > feeds.size())
      return Error("graph '" + g.name + "' takes " + std::to_string(feeds.size()) +
                   " inputs, got " + std::to_string(inputs.size()));
    for (size_t i = 0; i < inputs.size(); ++i) f.values[feeds[i]] = inputs[i];

    frame_stack.push_back(&f);
    for (size_t n = 0; n < g.nodes.size(); ++n) {
      Status st = RunNode(g, n, info, f, main_graph);
      if (!st.ok()) {
        frame_stack.pop_back();
        return st;
      }
      for (int v : info.release_after[n]) f.values[v] = Tensor();
    }
    frame_stack.pop_back();
    outputs->clear();
    for (int v : g.outputs) {
      const Tensor& t = f.values[v];
      // Results must outlive the arena and the frame: copy anything that does not own its bytes.
      outputs->push_back(t.owns_or_keeps_alive() ? t : t.Clone());
    }
    return OkStatus();
  }

  Status RunNode(const ir::Graph& g, size_t n, const GraphInfo& info, Frame& f, bool main_graph) {
    const ir::Node& node = g.nodes[n];
    const ops::OpSchema* schema = info.schemas[n];
    ops::InferContext ictx(node, g, info.opsets[n]);
    std::vector<ir::TypeInfo> in_types(node.inputs.size());
    for (size_t i = 0; i < node.inputs.size(); ++i) {
      int v = node.inputs[i];
      if (v < 0) {
        ictx.input_types_.push_back(nullptr);
        ictx.input_values_.push_back(nullptr);
        continue;
      }
      const Tensor& t = f.values[v];
      if (!t.defined())
        return Error(node.Label(g) + ": input '" + g.values[v].name + "' has no value");
      in_types[i] = ir::TypeInfo::Of(t);
      ictx.input_types_.push_back(&in_types[i]);
      ictx.input_values_.push_back(&t);
    }
    ictx.outputs_.assign(node.outputs.size(), ir::TypeInfo{});
    KILN_RETURN_IF_ERROR(schema->infer(ictx));

    std::vector<Tensor> scratch(node.outputs.size());
    ops::ComputeContext cctx(node, g, info.opsets[n]);
    for (size_t i = 0; i < node.inputs.size(); ++i)
      cctx.inputs_.push_back(node.inputs[i] < 0 ? nullptr : &f.values[node.inputs[i]]);
    for (size_t i = 0; i < node.outputs.size(); ++i) {
      int v = node.outputs[i];
      Tensor& dst = v < 0 ? scratch[i] : f.values[v];
      const ir::TypeInfo& t = ictx.outputs_[i];
      if (t.shape_known()) {
        size_t bytes = NumElements(t.dims) * DTypeSize(t.dtype);
        int slot = main_graph && v >= 0 ? slot_of[v] : -1;
        if (slot >= 0 && bytes <= self->slots_[slot].size) {
          dst = Tensor::View(t.dtype, t.dims, arena + self->slots_[slot].offset);
          std::memset(dst.raw(), 0, bytes);
        } else {
          dst = Tensor(t.dtype, t.dims);
        }
      } else {
        dst = Tensor();
      }
      cctx.outputs_.push_back(&dst);
    }
    cctx.subgraphs_ = this;
    cctx.threads_ = self->options_.threads;
    KILN_RETURN_IF_ERROR(schema->compute(cctx));
    for (size_t i = 0; i < node.outputs.size(); ++i)
      if (node.outputs[i] >= 0 && !cctx.outputs_[i]->defined())
        return Error(node.Label(g) + ": kernel produced no value for output " + std::to_string(i));
    return OkStatus();
  }

  Status Run(const ir::Graph& body, const std::vector<Tensor>& inputs,
             std::vector<Tensor>* outputs) override {
    if (frame_stack.size() > 64) return Error("subgraphs nest too deeply");
    return RunGraph(body, frame_stack.back(), inputs, outputs, false);
  }
};

Executor::~Executor() = default;

Expected<std::unique_ptr<Executor>> Executor::Create(ir::Model model, ExecutorOptions options) {
  std::unique_ptr<Executor> e(new Executor());
  e->model_ = std::move(model);
  e->options_ = std::move(options);
  if (e->options_.threads < 1) return Error("--threads must be at least 1");
  KILN_RETURN_IF_ERROR(passes::InferShapes(e->model_, e->options_.shapes));
  e->impl_ = std::make_unique<Impl>();
  e->impl_->self = e.get();
  KILN_RETURN_IF_ERROR(e->impl_->Prepare(*e->model_.graph, e->model_));
  e->impl_->PlanArena(*e->model_.graph);
  return e;
}

Status Executor::Run(const std::vector<Tensor>& inputs, std::vector<Tensor>* outputs) {
  const ir::Graph& g = *model_.graph;
  std::vector<int> feeds = g.RuntimeInputs();
  if (inputs.size() != feeds.size())
    return Error("model takes " + std::to_string(feeds.size()) + " inputs, got " +
                 std::to_string(inputs.size()));
  for (size_t i = 0; i < feeds.size(); ++i) {
    const ir::Value& v = g.values[feeds[i]];
    const Tensor& t = inputs[i];
    if (v.type.dtype != DType::kUndefined && t.dtype() != v.type.dtype)
      return Error("input '" + v.name + "': expected " + std::string(DTypeName(v.type.dtype)) +
                   ", got " + std::string(DTypeName(t.dtype())));
    if (v.type.has_shape) {
      bool ok = v.type.dims.size() == t.dims().size();
      for (size_t d = 0; ok && d < t.dims().size(); ++d)
        ok = v.type.dims[d] < 0 || v.type.dims[d] == t.dims()[d];
      if (!ok)
        return Error("input '" + v.name + "': expected shape " + v.type.ToString() + ", got " +
                     DimsToString(t.dims()));
    }
  }
  return impl_->RunGraph(g, nullptr, inputs, outputs, true);
}

}  // namespace kiln::runtime
