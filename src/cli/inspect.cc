// kiln inspect: the IR, an op histogram, parameter bytes and a FLOP estimate.
#include <map>
#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "cli/common.h"
#include "frontend/model_loader.h"
#include "passes/infer_shapes.h"

namespace kiln::cli {
namespace {

struct Stats {
  std::map<std::string, int> ops;
  size_t param_bytes = 0;
  int64_t params = 0;
  double flops = 0;
  bool flops_complete = true;
};

void Accumulate(const ir::Graph& g, Stats* s) {
  for (const auto& v : g.values)
    if (v.constant) {
      s->param_bytes += v.constant->nbytes();
      s->params += v.constant->size();
    }
  for (const auto& n : g.nodes) {
    s->ops[(n.domain.empty() ? "" : n.domain + ".") + n.op_type]++;
    bool known = true;
    s->flops += NodeFlops(g, n, &known);
    if (!known) s->flops_complete = false;
    for (const auto& [k, a] : n.attrs) {
      if (a.g) Accumulate(*a.g, s);
      for (const auto& sg : a.graphs) Accumulate(*sg, s);
    }
  }
}

nlohmann::ordered_json ValuesJson(const ir::Graph& g, const std::vector<int>& values) {
  nlohmann::ordered_json list = nlohmann::ordered_json::array();
  for (int v : values) {
    const ir::TypeInfo& t = g.values[v].type;
    nlohmann::ordered_json j;
    j["name"] = g.values[v].name;
    j["dtype"] = std::string(DTypeName(t.dtype));
    if (t.has_shape) {
      // Known dims as numbers; unknown ones as their symbol, or null.
      nlohmann::ordered_json dims = nlohmann::ordered_json::array();
      for (size_t d = 0; d < t.dims.size(); ++d) {
        if (t.dims[d] >= 0)
          dims.push_back(t.dims[d]);
        else if (d < t.symbols.size() && !t.symbols[d].empty())
          dims.push_back(t.symbols[d]);
        else
          dims.push_back(nullptr);
      }
      j["dims"] = dims;
    } else {
      j["dims"] = nullptr;
    }
    list.push_back(j);
  }
  return list;
}

int InspectMain(const std::string& path, const std::string& weights,
                const std::vector<std::string>& shape_specs, bool summary_only, bool json) {
  if (IsBundlePath(path) && !json) return InspectBundle(path);
  auto model = LoadAnyModel(path, weights);
  if (!model.ok()) return Fail(model.status());
  if (IsProgramPath(path) && !json) {
    Status header = PrintProgramHeader(path);
    if (!header.ok()) return Fail(header);
  }
  auto shapes = ParseShapes(shape_specs);
  if (!shapes.ok()) return Fail(shapes.status());
  Status st = passes::InferShapes(*model, *shapes);
  if (!st.ok()) return Fail(st);
  const ir::Graph& g = *model->graph;
  Stats s;
  Accumulate(g, &s);
  std::vector<std::pair<int, std::string>> sorted;
  for (const auto& [op, c] : s.ops) sorted.push_back({-c, op});
  std::sort(sorted.begin(), sorted.end());
  if (json) {
    nlohmann::ordered_json j;
    j["model"] = path;
    j["inputs"] = ValuesJson(g, g.RuntimeInputs());
    j["outputs"] = ValuesJson(g, g.outputs);
    j["nodes"] = g.nodes.size();
    nlohmann::ordered_json ops = nlohmann::ordered_json::object();
    for (const auto& [c, op] : sorted) ops[op] = -c;
    j["ops"] = ops;
    j["parameters"] = s.params;
    j["parameter_bytes"] = s.param_bytes;
    j["flops"] = s.flops;
    j["flops_complete"] = s.flops_complete;
    std::printf("%s\n", j.dump(2).c_str());
    return 0;
  }
  if (!summary_only) std::printf("%s\n", ir::PrintModel(*model).c_str());
  if (!IsProgramPath(path)) {  // the program header lists them already
    for (int v : g.RuntimeInputs())
      std::printf("input  '%s': %s\n", g.values[v].name.c_str(),
                  g.values[v].type.ToString().c_str());
    for (int v : g.outputs)
      std::printf("output '%s': %s\n", g.values[v].name.c_str(),
                  g.values[v].type.ToString().c_str());
  }
  std::printf("op histogram:\n");
  for (const auto& [c, op] : sorted) std::printf("  %-28s %d\n", op.c_str(), -c);
  std::printf("nodes: %zu\n", g.nodes.size());
  std::printf("parameters: %lld (%zu bytes)\n", static_cast<long long>(s.params), s.param_bytes);
  std::printf("flops: %.4g%s\n", s.flops,
              s.flops_complete ? "" : " (lower bound: some shapes are dynamic)");
  return 0;
}

}  // namespace

void AddInspectCommand(CLI::App& app, int& rc) {
  auto* c = app.add_subcommand("inspect", "print the IR, an op histogram, parameters and FLOPs");
  struct Options {
    std::string path, weights;
    std::vector<std::string> shapes;
    bool summary = false, json = false;
  };
  auto o = std::make_shared<Options>();  // owned by the callback
  c->add_option("MODEL", o->path, "model file (.onnx, .json, .kiln, or a .bpte bundle)")
      ->required();
  c->add_option("--weights", o->weights, "safetensors weights for a .json model");
  c->add_option("--shape", o->shapes, "fix an input's dims: NAME=D0,D1,...");
  c->add_flag("--summary", o->summary, "only the inputs, outputs, histogram and totals");
  c->add_flag(
      "--json", o->json,
      "one JSON object: inputs and outputs (name, dtype, dims), nodes, ops, parameters, flops");
  c->callback([&rc, o] { rc = InspectMain(o->path, o->weights, o->shapes, o->summary, o->json); });
}

}  // namespace kiln::cli
