// kiln inspect: the IR, an op histogram, parameter bytes and a FLOP estimate.
#include <map>

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

int InspectMain(const std::string& path, const std::string& weights,
                const std::vector<std::string>& shape_specs, bool summary_only) {
  if (IsBundlePath(path)) return InspectBundle(path);
  auto model = LoadAnyModel(path, weights);
  if (!model.ok()) return Fail(model.status());
  if (IsProgramPath(path)) {
    Status header = PrintProgramHeader(path);
    if (!header.ok()) return Fail(header);
  }
  auto shapes = ParseShapes(shape_specs);
  if (!shapes.ok()) return Fail(shapes.status());
  Status st = passes::InferShapes(*model, *shapes);
  if (!st.ok()) return Fail(st);
  if (!summary_only) std::printf("%s\n", ir::PrintModel(*model).c_str());
  Stats s;
  Accumulate(*model->graph, &s);
  std::printf("op histogram:\n");
  std::vector<std::pair<int, std::string>> sorted;
  for (const auto& [op, c] : s.ops) sorted.push_back({-c, op});
  std::sort(sorted.begin(), sorted.end());
  for (const auto& [c, op] : sorted) std::printf("  %-28s %d\n", op.c_str(), -c);
  std::printf("nodes: %zu\n", model->graph->nodes.size());
  std::printf("parameters: %lld (%zu bytes)\n", static_cast<long long>(s.params), s.param_bytes);
  std::printf("flops: %.4g%s\n", s.flops, s.flops_complete ? "" : " (lower bound: some shapes are dynamic)");
  return 0;
}

}  // namespace

void AddInspectCommand(CLI::App& app, int& rc) {
  auto* c = app.add_subcommand("inspect", "print the IR, an op histogram, parameters and FLOPs");
  struct Options {
    std::string path, weights;
    std::vector<std::string> shapes;
    bool summary = false;
  };
  auto o = std::make_shared<Options>();  // owned by the callback
  c->add_option("MODEL", o->path, "model file (.onnx, .json, .kiln, or a .bpte bundle)")->required();
  c->add_option("--weights", o->weights, "safetensors weights for a .json model");
  c->add_option("--shape", o->shapes, "fix an input's dims: NAME=D0,D1,...");
  c->add_flag("--summary", o->summary, "only the histogram and totals");
  c->callback([&rc, o] { rc = InspectMain(o->path, o->weights, o->shapes, o->summary); });
}

}  // namespace kiln::cli
