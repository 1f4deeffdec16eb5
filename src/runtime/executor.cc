#include "runtime/executor.h"

#include <algorithm>
#include <chrono>
#include <unordered_map>

#include "ops/op.h"
#include "passes/compress_constants.h"
#include "planner/plan_graph.h"

namespace kiln::runtime {
namespace {

constexpr size_t kAlignment = planner::kArenaAlignment;

size_t AlignUp(size_t n) { return (n + kAlignment - 1) / kAlignment * kAlignment; }

// The working memory kernels may add for speed: a quarter of what the model needs anyway, its
// constants, its arena and its inputs and outputs (oneDNN's Winograd keeps a scratchpad of
// 10-30 MB whatever the map, which on a model of 27 MB of weights and 5 MB of activations put
// the peak 15% over ONNX Runtime's).
int64_t ScratchBudget(const ir::Graph& g, size_t arena_bytes) {
  auto tensor_bytes = [&](int v) -> int64_t {
    const ir::TypeInfo& t = g.values[v].type;
    if (t.kind != ir::TypeInfo::Kind::kTensor || !t.shape_known()) return 0;
    return NumElements(t.dims) * static_cast<int64_t>(DTypeSize(t.dtype));
  };
  auto bytes = static_cast<int64_t>(arena_bytes);
  for (const ir::Value& v : g.values)
    if (v.constant && v.constant->kind() == Tensor::Kind::kTensor)
      bytes += static_cast<int64_t>(v.constant->nbytes());
  for (int v : g.RuntimeInputs()) bytes += tensor_bytes(v);
  for (int v : g.outputs) bytes += tensor_bytes(v);
  return bytes / 4;
}

// What a graph needs at every run, computed once: kernels, the planned order, when values die,
// and the graph's own arena. Subgraphs (If/Loop/Scan bodies) get an arena of their own, reused
// by every run of the body; their results are copied out before the next run.
struct GraphInfo {
  std::vector<const ops::OpSchema*> schemas;  // per node index
  std::vector<int64_t> opsets;
  std::vector<int> order;                       // node indices in execution order
  std::vector<std::vector<int>> release_after;  // per position: values dead after it
  planner::BufferSet buffers;
  planner::Plan plan;
  std::vector<uint8_t> storage;
  uint8_t* arena = nullptr;
  // Per node: the input types and inferred outputs of its last run
  // (OpSchema::infer_from_types_only).
  struct InferCache {
    bool valid = false;
    std::vector<ir::TypeInfo> inputs, outputs;
  };
  mutable std::vector<InferCache> infer_cache;
  // ExecutorOptions::profile: seconds spent in each node (subgraph runs included), per node index.
  mutable std::vector<double> node_seconds;
  // Per value: kept channels-last (ops/channels_last.h).
  std::vector<char> channels_last;
  // Per value: the channels per pixel of the channels-last Concat output it is made inside
  // (ops::CanWriteChannelsLastInterleaved), else 0.
  std::vector<int64_t> pixel_channels;
  // Per node: where a Concat's inputs go (planner/lifetimes.h).
  std::vector<planner::ConcatPlacement> concat_placement;
  // Kernels' per-node state (ops::NodeState), per node index; written while a node runs.
  mutable std::vector<std::unique_ptr<ops::NodeState>> states;
  // Per value: the main graph's output tensors of the last run, whose bytes the next run
  // writes again when the caller has let them go (no fresh pages to fault in on every run).
  mutable std::vector<Tensor> kept_outputs;

  uint8_t* Planned(int v) const {
    int b = buffers.buffer_of[v];
    return b < 0 ? nullptr : arena + plan.buffers[b].offset;
  }
};

}  // namespace

struct Executor::Impl : public ops::SubgraphRunner {
  Executor* self = nullptr;
  std::unordered_map<const ir::Graph*, GraphInfo> infos;

  struct Frame {
    const ir::Graph* graph;
    const Frame* parent;
    std::vector<Tensor> values;
  };
  std::vector<const Frame*> frame_stack;

  // Weights that kernels pack or transform on their first run would otherwise be held twice.
  // Per value of the main graph until that run is over: how many of the nodes reading it have
  // yet to run, or -1 where it stays. A constant goes (a husk with its dims and address takes
  // its place) once every node reading it holds it (ops::NodeState::HoldsConstant) and has
  // inputs of static shapes, so that its state is never remade from the original. Constants
  // shared with a model the caller kept (ir::CloneModel) stay alive there.
  std::vector<int> unheld_readers;

  void CountConstantReaders(const ir::Graph& g) {
    unheld_readers.assign(g.values.size(), -1);
    for (size_t v = 0; v < g.values.size(); ++v)
      if (g.values[v].constant && g.values[v].constant->kind() == Tensor::Kind::kTensor)
        unheld_readers[v] = 0;
    for (int v : g.outputs) unheld_readers[v] = -1;
    for (const ir::Node& node : g.nodes) {
      for (int v : node.implicit_inputs) unheld_readers[v] = -1;
      bool fixed = true;
      for (int v : node.inputs) fixed = fixed && (v < 0 || g.values[v].type.shape_known());
      for (int v : node.inputs) {
        if (v < 0 || unheld_readers[v] < 0) continue;
        unheld_readers[v] = fixed ? unheld_readers[v] + 1 : -1;
      }
    }
  }

  // After node n of the main graph ran for the first time.
  void ReleaseHeldConstants(ir::Graph& g, int n, const GraphInfo& info, Frame& f) {
    const ir::Node& node = g.nodes[n];
    const ops::NodeState* st =
        info.states.size() > static_cast<size_t>(n) ? info.states[n].get() : nullptr;
    for (size_t i = 0; i < node.inputs.size(); ++i) {
      const int v = node.inputs[i];
      if (v < 0 || unheld_readers[v] <= 0) continue;
      if (!st || !st->HoldsConstant(static_cast<int>(i))) {
        unheld_readers[v] = -1;
        continue;
      }
      if (--unheld_readers[v] > 0) continue;
      std::optional<Tensor>& c = g.values[v].constant;
      c = Tensor::View(c->dtype(), c->dims(), c->raw());
      f.values[v] = *c;
      unheld_readers[v] = -1;
    }
  }

  // Kernels, schedule and verified memory plan of g and, recursively, of its subgraphs.
  // program: g's plan and layouts, moved out (its model has moved to m).
  Status Prepare(const ir::Graph& g, const ir::Model& m, compiler::Program& program) {
    if (infos.count(&g)) return OkStatus();  // a body two nodes share, prepared once
    GraphInfo info;
    const auto& reg = ops::OpRegistry::Global();
    for (size_t n = 0; n < g.nodes.size(); ++n) {
      const ir::Node& node = g.nodes[n];
      const ops::OpSchema* s = reg.Find(node.domain, node.op_type);
      if (!s)
        return Error(node.Label(g) + ": unsupported operator " +
                     (node.domain.empty() ? "" : node.domain + ".") + node.op_type);
      KILN_RETURN_IF_ERROR(ops::CheckRequiredInputs(*s, node, g));
      info.schemas.push_back(s);
      info.opsets.push_back(m.OpsetFor(node.domain));
      for (const auto& [k, a] : node.attrs) {
        if (a.g) KILN_RETURN_IF_ERROR(Prepare(*a.g, m, program));
        for (const auto& sg : a.graphs) KILN_RETURN_IF_ERROR(Prepare(*sg, m, program));
      }
    }
    compiler::GraphProgram& planned = program.graphs.at(&g);
    info.channels_last = std::move(planned.layout.channels_last);
    info.pixel_channels = std::move(planned.layout.pixel_channels);
    info.concat_placement = std::move(planned.layout.concat_placement);
    info.order = std::move(planned.plan.schedule.order);
    info.buffers = std::move(planned.plan.buffers);
    info.plan = std::move(planned.plan.plan);
    info.storage.assign(info.plan.arena_bytes + kAlignment, 0);
    uintptr_t p = reinterpret_cast<uintptr_t>(info.storage.data());
    info.arena = info.storage.data() + (AlignUp(p) - p);

    std::vector<int> last_use = planner::LastUses(g, info.order);
    info.release_after.resize(info.order.size());
    for (size_t v = 0; v < g.values.size(); ++v)
      if (last_use[v] >= 0 && last_use[v] < static_cast<int>(info.order.size()) &&
          !g.values[v].constant)
        info.release_after[last_use[v]].push_back(static_cast<int>(v));
    infos[&g] = std::move(info);
    return OkStatus();
  }

  // Debug: every arena byte that no live buffer owns at position p gets the poison pattern, so a
  // kernel reading a dead or misplaced buffer sees garbage.
  static void Poison(const GraphInfo& info, int p) {
    std::vector<std::pair<size_t, size_t>> live;
    for (const auto& b : info.plan.buffers)
      if (b.first_use < p && p <= b.last_use) live.push_back({b.offset, b.offset + b.size});
    std::sort(live.begin(), live.end());
    size_t pos = 0;
    for (auto [b, e] : live) {
      if (b > pos) std::memset(info.arena + pos, 0xA5, b - pos);
      pos = std::max(pos, e);
    }
    if (pos < info.plan.arena_bytes)
      std::memset(info.arena + pos, 0xA5, info.plan.arena_bytes - pos);
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
    for (size_t p = 0; p < info.order.size(); ++p) {
      if (self->options_.poison) Poison(info, static_cast<int>(p));
      const auto t0 = self->options_.profile ? std::chrono::steady_clock::now()
                                             : std::chrono::steady_clock::time_point{};
      Status st = RunNode(g, info.order[p], p, info, f);
      if (main_graph && st.ok() && !unheld_readers.empty())
        ReleaseHeldConstants(*self->model_.graph, info.order[p], info, f);
      if (self->options_.profile) {
        if (info.node_seconds.size() != g.nodes.size())
          info.node_seconds.assign(g.nodes.size(), 0.0);
        info.node_seconds[info.order[p]] +=
            std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      }
      if (!st.ok()) {
        frame_stack.pop_back();
        // Only the first run drops constants: a later run would count its readers again.
        if (main_graph) unheld_readers.clear();
        return st;
      }
      for (int v : info.release_after[p]) f.values[v] = Tensor();
    }
    frame_stack.pop_back();
    if (main_graph) unheld_readers.clear();  // the first run is over
    outputs->clear();
    if (main_graph) info.kept_outputs.resize(g.values.size());  // each run sets every output
    for (int v : g.outputs) {
      const Tensor& t = f.values[v];
      // Results must outlive the arena and the frame: copy anything that does not own its bytes.
      outputs->push_back(t.owns_or_keeps_alive() ? t : t.Clone());
      if (main_graph) info.kept_outputs[v] = outputs->back();
    }
    return OkStatus();
  }

  Status RunNode(const ir::Graph& g, size_t n, size_t pos, const GraphInfo& info, Frame& f) {
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
    if (info.infer_cache.size() != g.nodes.size()) info.infer_cache.resize(g.nodes.size());
    GraphInfo::InferCache& cache = info.infer_cache[n];
    if (schema->infer_from_types_only && cache.valid && SameTypes(cache.inputs, in_types)) {
      ictx.outputs_ = cache.outputs;
    } else {
      ictx.outputs_.assign(node.outputs.size() + ops::kScratchOutputs, ir::TypeInfo{});
      KILN_RETURN_IF_ERROR(schema->infer(ictx));
      if (schema->infer_from_types_only) {
        cache.valid = true;
        cache.inputs = in_types;
        cache.outputs = ictx.outputs_;
      }
    }

    std::vector<Tensor> scratch(ictx.outputs_.size());
    ops::ComputeContext cctx(node, g, info.opsets[n]);
    for (size_t i = 0; i < node.inputs.size(); ++i) {
      const int v = node.inputs[i];
      cctx.inputs_.push_back(v < 0 ? nullptr : &f.values[v]);
      cctx.input_constant_.push_back(v >= 0 && g.values[v].constant.has_value());
      cctx.input_channels_last_.push_back(v >= 0 && info.channels_last[v]);
    }
    for (int v : node.outputs) {
      cctx.output_channels_last_.push_back(v >= 0 && info.channels_last[v]);
      cctx.output_pixel_channels_.push_back(v >= 0 ? info.pixel_channels[v] : 0);
    }
    // A view / slice node the plan resolved needs no kernel when everything sits where planned.
    // A channels-last Concat is in place only when its inputs were made interleaved.
    const bool interleaved = info.concat_placement[n] == planner::ConcatPlacement::kInterleaved;
    bool noop = info.buffers.is_noop[pos] &&
                (interleaved || !(node.outputs.size() == 1 && node.outputs[0] >= 0 &&
                                  info.channels_last[node.outputs[0]]));
    for (size_t i = 0; noop && i < node.inputs.size(); ++i)
      noop = node.inputs[i] >= 0 && f.values[node.inputs[i]].raw() == info.Planned(node.inputs[i]);
    if (interleaved && !noop)  // its inputs are strided: no kernel reads them
      return Error(node.Label(g) + ": a Concat made in place has inputs elsewhere (a kiln bug)");
    for (size_t i = 0; i < ictx.outputs_.size(); ++i) {
      int v = i < node.outputs.size() ? node.outputs[i] : -1;
      Tensor& dst = v < 0 ? scratch[i] : f.values[v];
      const ir::TypeInfo& t = ictx.outputs_[i];
      if (t.shape_known() && t.dtype == DType::kString) {
        dst = Tensor(t.dtype, t.dims);  // strings live on the heap, never in the arena
      } else if (t.shape_known()) {
        size_t bytes = NumElements(t.dims) * DTypeSize(t.dtype);
        int b = v >= 0 ? info.buffers.buffer_of[v] : -1;
        if (b >= 0 && bytes <= info.plan.buffers[b].size) {
          dst = Tensor::View(t.dtype, t.dims, info.arena + info.plan.buffers[b].offset);
          // Kernels may accumulate into their outputs: clear them, except an output that
          // shares an input's bytes by design (in place), which must keep them.
          // Nor an output interleaved with others in a Concat's (it writes its channels only).
          if (!noop && !schema->writes_whole_outputs && info.pixel_channels[v] == 0 &&
              !OverlapsInput(cctx, dst.raw(), bytes))
            std::memset(dst.raw(), 0, bytes);
        } else {
          noop = noop && v < 0 && i >= node.outputs.size();
          const Tensor* kept = v >= 0 && v < static_cast<int>(info.kept_outputs.size())
                                   ? &info.kept_outputs[v]
                                   : nullptr;
          if (kept && kept->sole_owner() && kept->dtype() == t.dtype && kept->dims() == t.dims) {
            dst = *kept;
            if (!schema->writes_whole_outputs) std::memset(dst.raw(), 0, bytes);
          } else {
            dst = Tensor(t.dtype, t.dims);
          }
        }
      } else {
        noop = noop && i >= node.outputs.size();  // scratch slots infer left unset don't matter
        dst = Tensor();
      }
      cctx.outputs_.push_back(&dst);
    }
    if (noop) return OkStatus();
    cctx.subgraphs_ = this;
    // The reference kernels run on one thread (kernels/x86/cpu_isa.h).
    const bool reference = self->options_.kernels == ops::KernelSet::kReference;
    cctx.threads_ = reference ? 1 : self->options_.threads;
    cctx.scratch_budget_ = self->scratch_budget_;
    if (info.states.size() != g.nodes.size()) info.states.resize(g.nodes.size());
    cctx.state_ = &info.states[n];
    KILN_RETURN_IF_ERROR(schema->compute(cctx));
    for (size_t i = 0; i < node.outputs.size(); ++i)
      if (node.outputs[i] >= 0 && !cctx.outputs_[i]->defined())
        return Error(node.Label(g) + ": kernel produced no value for output " + std::to_string(i));
    return OkStatus();
  }

  // Tensor types equal in kind, dtype and dims (what the types-only shape rules read).
  static bool SameTypes(const std::vector<ir::TypeInfo>& a, const std::vector<ir::TypeInfo>& b) {
    if (a.size() != b.size()) return false;
    for (size_t i = 0; i < a.size(); ++i)
      if (a[i].kind != b[i].kind || a[i].dtype != b[i].dtype || a[i].dims != b[i].dims ||
          a[i].has_shape != b[i].has_shape)
        return false;
    return true;
  }

  static bool OverlapsInput(const ops::ComputeContext& c, const void* p, size_t n) {
    const uint8_t* a = static_cast<const uint8_t*>(p);
    for (const Tensor* in : c.inputs_) {
      if (!in || in->kind() != Tensor::Kind::kTensor || !in->raw()) continue;
      const uint8_t* b = static_cast<const uint8_t*>(in->raw());
      if (a < b + in->nbytes() && b < a + n) return true;
    }
    return false;
  }

  Status Run(const ir::Graph& body, const std::vector<Tensor>& inputs,
             std::vector<Tensor>* outputs) override {
    if (frame_stack.size() > 64) return Error("subgraphs nest too deeply");
    return RunGraph(body, frame_stack.back(), inputs, outputs, false);
  }
};

Executor::~Executor() = default;

compiler::CompileOptions HostCompileOptions(const ExecutorOptions& o) {
  compiler::CompileOptions co;
  co.target = compiler::Target::kHost;
  co.shapes = o.shapes;
  co.passes = o.passes;
  co.dump_ir_after = o.dump_ir_after;
  co.host_passes = o.host_passes;
  co.channels_last = o.channels_last && o.kernels == ops::KernelSet::kFast;
  co.plan.planner = o.planner;
  co.plan.reorder = o.reorder;
  co.plan.aliasing = o.aliasing;
  co.plan.max_steps = o.planner_steps;
  return co;
}

Expected<std::unique_ptr<Executor>> Executor::Create(ir::Model model, ExecutorOptions options) {
  if (options.threads < 1) return Error("--threads must be at least 1");
  // Constant folding uses the executor's kernels too.
  const ops::ScopedKernelSet kernels(options.kernels);
  // Its own graph (the caller's Model may share one): passes rewrite it and weights a kernel
  // holds are dropped from it. Constants still share their bytes with the caller's copy.
  ir::Model own = ir::CloneModel(model);
  model = {};
  KILN_ASSIGN_OR_RETURN(auto program,
                        compiler::Compile(std::move(own), HostCompileOptions(options)));
  return Create(std::move(program), std::move(options));
}

Expected<std::unique_ptr<Executor>> Executor::Create(compiler::Program program,
                                                     ExecutorOptions options) {
  if (program.target != compiler::Target::kHost)
    return Error("the host executor runs programs compiled for the host target");
  // Only the fast kernels read and write channels-last values.
  if (options.kernels == ops::KernelSet::kReference)
    for (const auto& [g, gp] : program.graphs)
      if (std::count(gp.layout.channels_last.begin(), gp.layout.channels_last.end(), 1) > 0)
        return Error(
            "the reference kernels run programs compiled without channels-last layouts (compile "
            "with HostCompileOptions of the same executor options)");
  std::unique_ptr<Executor> e(new Executor());
  e->options_ = std::move(options);
  if (e->options_.threads < 1) return Error("--threads must be at least 1");
  // The kernels' prepared states use the executor's kernels.
  const ops::ScopedKernelSet kernels(e->options_.kernels);
  e->model_ = std::move(program.model);
  passes::CompressConstants(*e->model_.graph);  // identical constants share one storage
  e->impl_ = std::make_unique<Impl>();
  e->impl_->self = e.get();
  const ir::Graph& g = *e->model_.graph;
  KILN_RETURN_IF_ERROR(e->impl_->Prepare(g, e->model_, program));
  const GraphInfo& main = e->impl_->infos.at(&g);
  e->impl_->CountConstantReaders(g);
  e->plan_ = main.plan;
  e->order_ = main.order;
  e->scratch_budget_ = ScratchBudget(g, e->plan_.arena_bytes);
  return e;
}

std::vector<double> Executor::NodeSeconds() const {
  std::vector<double> t = impl_->infos.at(model_.graph.get()).node_seconds;
  t.resize(model_.graph->nodes.size(), 0.0);
  return t;
}

void Executor::ResetProfile() {
  for (auto& [g, info] : impl_->infos) info.node_seconds.clear();
}

int Executor::channels_last_values() const {
  const auto& b = impl_->infos.at(model_.graph.get()).channels_last;
  return static_cast<int>(std::count(b.begin(), b.end(), 1));
}

std::vector<std::string> Executor::NodeKernels() const {
  const ir::Graph& g = *model_.graph;
  const auto& states = impl_->infos.at(&g).states;
  std::vector<std::string> k(g.nodes.size());
  for (size_t n = 0; n < states.size() && n < k.size(); ++n)
    if (states[n]) k[n] = states[n]->Kernel();
  return k;
}

int Executor::interleaved_concats() const {
  const auto& c = impl_->infos.at(model_.graph.get()).concat_placement;
  return static_cast<int>(std::count(c.begin(), c.end(), planner::ConcatPlacement::kInterleaved));
}

Status Executor::Run(const std::vector<Tensor>& inputs, std::vector<Tensor>* outputs) {
  const ops::ScopedKernelSet kernels(options_.kernels);
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
  // The last run's outputs go now, so that this run may write into their bytes again.
  if (&inputs != outputs) outputs->clear();
  return impl_->RunGraph(g, nullptr, inputs, outputs, true);
}

}  // namespace kiln::runtime
