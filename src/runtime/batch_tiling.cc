#include "runtime/batch_tiling.h"

#include <algorithm>
#include <cstring>
#include <set>

#include "ops/op_traits.h"
#include "passes/infer_shapes.h"

namespace kiln::runtime {
namespace {

int64_t NormalizedAxis(int64_t axis, size_t rank) {
  return axis < 0 ? axis + static_cast<int64_t>(rank) : axis;
}

// Why node n (which reads a batch-carrying value) may mix rows, or "".
std::string RowMixing(const ir::Node& n, const ir::Graph& g, int64_t opset,
                      const std::vector<char>& carries) {
  const std::string& op = n.op_type;
  const size_t rank =
      n.inputs.empty() || n.inputs[0] < 0 ? 0 : g.values[n.inputs[0]].type.dims.size();
  auto axis_not_zero = [&](const char* attr, int64_t fallback) -> std::string {
    return NormalizedAxis(n.attr_int(attr, fallback), rank) == 0 ? op + " works along axis 0" : "";
  };
  if (op == "Softmax" || op == "LogSoftmax" || op == "Hardmax")
    return axis_not_zero("axis", opset >= 13 ? -1 : 1);
  if (op == "LayerNormalization" || op == "RMSNormalization" || op == "LpNormalization")
    return axis_not_zero("axis", -1);
  if (op == "GatherElements" || op == "ScatterElements") return axis_not_zero("axis", 0);
  if (op == "Gather") {  // an embedding lookup by batch-carrying indices is row-wise
    const bool data_carries = n.inputs[0] >= 0 && carries[n.inputs[0]];
    return data_carries ? axis_not_zero("axis", 0) : "";
  }
  if (op == "MeanVarianceNormalization") {
    std::vector<int64_t> axes = n.attr_ints("axes");
    if (axes.empty()) axes = {0, 2, 3};
    for (int64_t a : axes)
      if (NormalizedAxis(a, rank) == 0) return op + " normalizes over axis 0";
    return "";
  }
  if (op == "CumSum") {
    const int a = n.inputs.size() > 1 ? n.inputs[1] : -1;
    if (a < 0 || !g.values[a].constant || g.values[a].constant->size() != 1)
      return "CumSum's axis is not a constant";
    return NormalizedAxis(static_cast<int64_t>(g.values[a].constant->GetDouble(0)), rank) == 0
               ? "CumSum runs along axis 0"
               : "";
  }
  if (op == "BatchNormalization") {
    const bool training =
        n.attr_int("training_mode", 0) != 0 || (opset < 14 && n.outputs.size() > 1);
    return training ? "BatchNormalization computes batch statistics (training)" : "";
  }
  if (op == "LSTM" || op == "GRU" || op == "RNN")
    return n.attr_int("layout", 0) == 1 ? "" : op + " takes the sequence on axis 0 (layout 0)";
  if (op == "ReverseSequence")
    return n.attr_int("batch_axis", 1) == 0 ? "" : "ReverseSequence runs along axis 0";
  if (op == "Trilu") return rank >= 3 ? "" : "Trilu's mask depends on the row";
  if (ops::IsRowwise(n.domain, op)) return "";  // ops/op_traits.cc
  return op + " is not known to treat rows independently";
}

// Shape / Size of a batch-carrying value: allowed where the numbers only go on to size tensors
// (Reshape's shape, Expand's shape, ConstantOfShape, Tile's repeats), through integer arithmetic.
bool FeedsShapesOnly(const ir::Graph& g, int value,
                     const std::vector<std::vector<std::pair<int, int>>>& users, int depth = 0) {
  if (depth > 64) return false;
  for (const auto& [node, slot] : users[value]) {
    const ir::Node& n = g.nodes[node];
    const std::string& op = n.op_type;
    if ((op == "Reshape" || op == "Expand" || op == "Tile") && slot == 1) continue;
    if (op == "ConstantOfShape") continue;
    static const std::set<std::string> kArithmetic = {
        "Gather", "Slice", "Concat", "Unsqueeze", "Squeeze", "Cast",    "Mul",
        "Add",    "Sub",   "Div",    "Floor",     "Ceil",    "Identity"};
    if (!kArithmetic.count(op)) return false;
    for (int o : n.outputs)
      if (o >= 0 && !FeedsShapesOnly(g, o, users, depth + 1)) return false;
  }
  return true;
}

// Shapes at batch size `b`: `model` cloned with every input's axis 0 set to b.
Expected<ir::Model> InferAt(const ir::Model& model, const std::vector<Dims>& input_dims,
                            int64_t b) {
  ir::Model m = ir::CloneModel(model);
  passes::ShapeOverrides shapes;
  const std::vector<int> inputs = m.graph->RuntimeInputs();
  for (size_t i = 0; i < inputs.size(); ++i) {
    Dims d = input_dims[i];
    d[0] = b;
    shapes[m.graph->values[inputs[i]].name] = d;
  }
  KILN_RETURN_IF_ERROR(passes::InferShapes(m, shapes));
  return m;
}

}  // namespace

std::string BatchTilingRefusal(const ir::Model& model, const std::vector<Dims>& input_dims) {
  const ir::Graph& g = *model.graph;
  const std::vector<int> inputs = g.RuntimeInputs();
  if (inputs.empty() || inputs.size() != input_dims.size())
    return "the model has no runtime inputs to stream";
  for (size_t i = 0; i < inputs.size(); ++i) {
    const ir::TypeInfo& t = g.values[inputs[i]].type;
    if (input_dims[i].empty() || input_dims[i][0] != input_dims[0][0])
      return "the inputs do not share a leading batch dim";
    if (t.kind != ir::TypeInfo::Kind::kTensor || (t.has_shape && !t.dims.empty() && t.dims[0] >= 0))
      return "input '" + g.values[inputs[i]].name + "' fixes its leading dim";
  }
  // Tiles are copied as bytes, which a string tensor does not have.
  for (int v : g.outputs)
    if (g.values[v].type.dtype == DType::kString)
      return "output '" + g.values[v].name + "' is a string tensor";
  for (int v : inputs)
    if (g.values[v].type.dtype == DType::kString)
      return "input '" + g.values[v].name + "' is a string tensor";
  constexpr int64_t kA = 3, kB = 5;
  auto a = InferAt(model, input_dims, kA);
  if (!a.ok()) return a.status().message();
  auto b = InferAt(model, input_dims, kB);
  if (!b.ok()) return b.status().message();
  const ir::Graph& ga = *a->graph;
  const ir::Graph& gb = *b->graph;
  // Which values carry the batch, and only on axis 0.
  std::vector<char> carries(ga.values.size(), 0);
  for (size_t v = 0; v < ga.values.size(); ++v) {
    const ir::TypeInfo &ta = ga.values[v].type, &tb = gb.values[v].type;
    if (ta.kind != ir::TypeInfo::Kind::kTensor) continue;
    if (!ta.shape_known() || !tb.shape_known())
      return "value '" + ga.values[v].name + "' has dims that depend on data";
    if (ta.dims == tb.dims) continue;
    bool axis0 = ta.dims.size() == tb.dims.size() && ta.dims[0] == kA && tb.dims[0] == kB;
    for (size_t d = 1; axis0 && d < ta.dims.size(); ++d) axis0 = ta.dims[d] == tb.dims[d];
    if (!axis0) return "value '" + ga.values[v].name + "' does not keep the batch on axis 0";
    carries[v] = 1;
  }
  for (int o : ga.outputs)
    if (!carries[o]) return "output '" + ga.values[o].name + "' does not carry the batch";
  std::vector<std::vector<std::pair<int, int>>> users(ga.values.size());
  for (size_t i = 0; i < ga.nodes.size(); ++i)
    for (size_t s = 0; s < ga.nodes[i].inputs.size(); ++s)
      if (ga.nodes[i].inputs[s] >= 0)
        users[ga.nodes[i].inputs[s]].push_back({static_cast<int>(i), static_cast<int>(s)});
  for (const ir::Node& n : ga.nodes) {
    for (const auto& [k, attr] : n.attrs)
      if (attr.g || !attr.graphs.empty())
        return "node '" + n.name + "' (" + n.op_type + ") has a subgraph";
    bool reads = false, writes = false;
    for (int v : n.inputs) reads = reads || (v >= 0 && carries[v]);
    for (int v : n.outputs) writes = writes || (v >= 0 && carries[v]);
    if (!reads) continue;
    const std::string label = "node '" + n.name + "' (" + n.op_type + ")";
    if (ops::ReadsDimsOnly(n.domain, n.op_type)) {
      if (!FeedsShapesOnly(ga, n.outputs[0], users)) return label + " computes with the batch size";
      continue;
    }
    if (!writes) return label + " reduces over the batch";
    auto opset = model.opsets.find(n.domain.empty() ? "" : n.domain);
    std::string why = RowMixing(n, ga, opset == model.opsets.end() ? 1 : opset->second, carries);
    if (!why.empty()) return label + ": " + why;
  }
  return "";
}

Expected<std::unique_ptr<TiledRunner>> TiledRunner::Create(const ir::Model& model,
                                                           ExecutorOptions options,
                                                           const std::vector<Dims>& input_dims,
                                                           size_t target_arena_bytes) {
  std::string why = BatchTilingRefusal(model, input_dims);
  if (!why.empty()) return Error("cannot stream the batch: " + why);
  std::unique_ptr<TiledRunner> r(new TiledRunner());
  r->model_ = ir::CloneModel(model);
  r->options_ = options;
  r->input_dims_ = input_dims;
  r->batch_ = input_dims[0][0];
  const std::vector<int> inputs = model.graph->RuntimeInputs();
  auto make = [&](int64_t rows) -> Expected<std::unique_ptr<Executor>> {
    ExecutorOptions o = r->options_;
    for (size_t i = 0; i < inputs.size(); ++i) {
      Dims d = input_dims[i];
      d[0] = rows;
      o.shapes[model.graph->values[inputs[i]].name] = d;
    }
    return Executor::Create(ir::CloneModel(r->model_), o);
  };
  // The tile: the arena of a 1024-row probe, scaled to the target (at least 64 rows).
  constexpr int64_t kProbe = 1024, kMinRows = 64, kMaxRows = 1 << 20;
  KILN_ASSIGN_OR_RETURN(auto probe, make(std::min(kProbe, r->batch_)));
  const double per_row = static_cast<double>(std::max<size_t>(probe->arena_bytes(), 1)) /
                         static_cast<double>(std::min(kProbe, r->batch_));
  r->tile_rows_ = std::clamp<int64_t>(
      static_cast<int64_t>(static_cast<double>(target_arena_bytes) / per_row), kMinRows, kMaxRows);
  r->tile_rows_ = std::min(r->tile_rows_, r->batch_);
  if (r->tile_rows_ == std::min(kProbe, r->batch_)) {
    r->tile_ = std::move(probe);
  } else {
    KILN_ASSIGN_OR_RETURN(r->tile_, make(r->tile_rows_));
  }
  if (r->batch_ % r->tile_rows_ != 0) {
    KILN_ASSIGN_OR_RETURN(r->rest_, make(r->batch_ % r->tile_rows_));
  }
  return r;
}

Status TiledRunner::Run(const std::vector<Tensor>& inputs, std::vector<Tensor>* outputs,
                        const std::function<void(int64_t, int64_t)>& progress) {
  if (inputs.size() != input_dims_.size())
    return Error("expected " + std::to_string(input_dims_.size()) + " inputs");
  for (size_t i = 0; i < inputs.size(); ++i)
    if (inputs[i].dims() != input_dims_[i])
      return Error("input " + std::to_string(i) + " has dims " + DimsToString(inputs[i].dims()) +
                   ", the runner " + DimsToString(input_dims_[i]));
  outputs->clear();
  std::vector<Tensor> tile_in(inputs.size()), tile_out;
  for (int64_t row = 0; row < batch_;) {
    const int64_t rows = std::min(tile_rows_, batch_ - row);
    Executor& exec = rows == tile_rows_ ? *tile_ : *rest_;
    for (size_t i = 0; i < inputs.size(); ++i) {
      Dims d = inputs[i].dims();
      d[0] = rows;
      if (tile_in[i].dims() != d) tile_in[i] = Tensor(inputs[i].dtype(), d);
      const size_t row_bytes = inputs[i].nbytes() / static_cast<size_t>(batch_);
      std::memcpy(tile_in[i].raw(), static_cast<const char*>(inputs[i].raw()) + row * row_bytes,
                  row_bytes * static_cast<size_t>(rows));
    }
    KILN_RETURN_IF_ERROR(exec.Run(tile_in, &tile_out));
    if (outputs->empty()) {
      for (const Tensor& t : tile_out) {
        Dims d = t.dims();
        d[0] = batch_;
        outputs->emplace_back(t.dtype(), d);
      }
    }
    for (size_t k = 0; k < tile_out.size(); ++k) {
      const size_t row_bytes = (*outputs)[k].nbytes() / static_cast<size_t>(batch_);
      std::memcpy(static_cast<char*>((*outputs)[k].raw()) + row * row_bytes, tile_out[k].raw(),
                  row_bytes * static_cast<size_t>(rows));
    }
    row += rows;
    if (progress) progress(row, batch_);
  }
  return OkStatus();
}

}  // namespace kiln::runtime
