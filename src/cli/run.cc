// kiln run / kiln bench.
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "cli/common.h"
#include "frontend/model_loader.h"
#include "frontend/npy.h"
#include "runtime/model_runner.h"
#include "support/file_io.h"

namespace kiln::cli {
namespace {

struct ModelOptions {
  std::string model;
  std::string weights;
  std::vector<std::string> shapes;
  std::vector<std::string> inputs;
  int threads = 1;
  ops::KernelSet kernels = ops::KernelSet::kFast;
  std::string planner = "default", pipeline;
  std::vector<std::string> dump_ir_after;
  bool no_reorder = false, no_alias = false, poison = false;
  bool profile = false;    // bench only
  int profile_nodes = 10;  // bench --profile: how many of the slowest nodes to list
};

void AddModelOptions(CLI::App* c, ModelOptions& o) {
  c->add_option("MODEL", o.model, "model file (.onnx, .json or .kiln)")->required();
  c->add_option("--weights", o.weights, "safetensors weights for a .json model");
  c->add_option("--shape", o.shapes, "fix an input's dims: NAME=D0,D1,...");
  c->add_option("--input", o.inputs, "input data: NAME=FILE (.npy or .pb)");
  c->add_option("--threads", o.threads, "worker threads")->check(IntegerIn(1, kMaxThreads));
  AddKernelsOption(c, &o.kernels);
  c->add_option("--planner", o.planner,
                "memory planner (default, greedy-size, greedy-conflicts, "
                "coloring, anneal, tflm, none)");
  c->add_flag("--no-reorder", o.no_reorder, "run nodes in the file's order");
  c->add_option("--pipeline", o.pipeline,
                "passes and planner from a pipeline file (kiln tune writes one)");
  c->add_option("--dump-ir-after", o.dump_ir_after,
                "print the IR to stderr after this pass (all: every pass)");
  c->add_flag("--no-alias", o.no_alias, "no views, in-place or Concat-in-place sharing");
  c->add_flag("--poison", o.poison,
              "debug: fill dead arena bytes with a poison pattern between nodes");
}

// A model ready to run, and its inputs.
struct Prepared {
  std::unique_ptr<runtime::ModelRunner> runner;
  std::vector<Tensor> inputs;

  runtime::Executor& executor() { return runner->executor(); }
  Status Run(std::vector<Tensor>* outputs,
             const std::function<void(int64_t, int64_t)>& progress = {}) {
    return runner->Run(inputs, outputs, progress);
  }
};

// The full dims of every runtime input: the file's, --shape's, or the model's own.
Expected<std::vector<Dims>> InputDims(const ir::Graph& g,
                                      const std::map<std::string, Tensor>& given,
                                      const passes::ShapeOverrides& shapes) {
  std::vector<Dims> dims;
  for (int v : g.RuntimeInputs()) {
    const ir::Value& val = g.values[v];
    auto file = given.find(val.name);
    auto shape = shapes.find(val.name);
    if (file != given.end()) {
      dims.push_back(file->second.dims());
    } else if (shape != shapes.end()) {
      dims.push_back(shape->second);
    } else if (val.type.shape_known()) {
      dims.push_back(val.type.dims);
    } else {
      return Error("input '" + val.name + "' has dynamic dims " + val.type.ToString() +
                   "; fix them with --shape " + val.name + "=... or give --input");
    }
  }
  return dims;
}

// Loads the model and its inputs; inputs without files get deterministic random data.
Status Prepare(const ModelOptions& o, Prepared* p) {
  KILN_ASSIGN_OR_RETURN(ir::Model model, LoadAnyModel(o.model, o.weights));
  KILN_ASSIGN_OR_RETURN(auto shapes, ParseShapes(o.shapes));
  std::map<std::string, Tensor> given;
  const ir::Graph& g = *model.graph;
  for (const auto& spec : o.inputs) {
    KILN_ASSIGN_OR_RETURN(auto name_file, SplitInputSpec(spec, g, "--input"));
    const auto& [name, file] = name_file;
    if (given.count(name)) return Error("--input " + name + " is given twice");
    KILN_ASSIGN_OR_RETURN(Tensor t, frontend::LoadTensorFile(file));
    AddShapeFromFile(g, name, t.dims(), &shapes);
    given[name] = std::move(t);
  }
  KILN_ASSIGN_OR_RETURN(passes::Pipeline pipeline,
                        ResolvePipeline(o.pipeline, o.planner, o.no_reorder));
  AddPipelineShapes(pipeline, &shapes);
  runtime::ExecutorOptions eo = ExecutorOptionsOf(pipeline, shapes);
  eo.threads = o.threads;
  eo.kernels = o.kernels;
  eo.dump_ir_after = o.dump_ir_after;
  eo.aliasing = !o.no_alias;
  eo.poison = o.poison;
  eo.profile = o.profile;
  auto dims = InputDims(g, given, shapes);
  std::vector<int> feeds = g.RuntimeInputs();
  uint64_t seed = 1;
  for (size_t i = 0; i < feeds.size(); ++i, ++seed) {
    const ir::Value& val = g.values[feeds[i]];
    auto it = given.find(val.name);
    if (it != given.end()) {
      p->inputs.push_back(it->second);
      continue;
    }
    if (!dims.ok()) return dims.status();
    p->inputs.push_back(RandomTensor(val.type.dtype, (*dims)[i], seed));
  }
  KILN_ASSIGN_OR_RETURN(
      p->runner,
      runtime::ModelRunner::Create(std::move(model), eo, dims.ok() ? *dims : std::vector<Dims>{}));
  return OkStatus();
}

// "rows 1200000 / 10000000 (12%)" on stderr while a long tiled run goes, when it is a terminal.
class RowProgress {
 public:
  void operator()(int64_t done, int64_t total) {
    if (!isatty(2)) return;
    const double s =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
    if (s < 2.0 && done < total) return;
    if (s < 2.0 && !shown_) return;
    shown_ = true;
    std::fprintf(stderr, "\rkiln: rows %lld / %lld (%d%%)%s", static_cast<long long>(done),
                 static_cast<long long>(total),
                 static_cast<int>(100 * done / std::max<int64_t>(total, 1)),
                 done == total ? "\n" : "");
  }

 private:
  std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now();
  bool shown_ = false;
};

int RunMain(const ModelOptions& o, const std::string& out_dir) {
  Prepared p;
  Status st = Prepare(o, &p);
  if (!st.ok()) return Fail(st);
  std::vector<Tensor> outputs;
  st = p.Run(&outputs, RowProgress());
  if (!st.ok()) return Fail(st);
  std::error_code ec;
  std::filesystem::create_directories(out_dir, ec);
  if (ec) return Fail(Error(out_dir + ": cannot create folder: " + ec.message()));
  nlohmann::ordered_json names = nlohmann::ordered_json::object();
  const ir::Graph& g = *p.executor().model().graph;
  for (size_t k = 0; k < outputs.size(); ++k) {
    std::string path = out_dir + "/output_" + std::to_string(k) + ".npy";
    st = WriteFile(path, frontend::SerializeNpy(outputs[k]));
    if (!st.ok()) return Fail(st);
    names[std::to_string(k)] = g.values[g.outputs[k]].name;
    std::printf("output %zu '%s': %s%s\n", k, g.values[g.outputs[k]].name.c_str(),
                std::string(DTypeName(outputs[k].dtype())).c_str(),
                DimsToString(outputs[k].dims()).c_str());
  }
  st = WriteFile(out_dir + "/outputs.json", names.dump(2) + "\n");
  if (!st.ok()) return Fail(st);
  std::printf("wrote %s to %s\n",
              outputs.size() == 1 ? "output_0.npy and outputs.json"
                                  : ("output_0.npy .. output_" +
                                     std::to_string(outputs.size() - 1) + ".npy and outputs.json")
                                        .c_str(),
              std::filesystem::absolute(out_dir).lexically_normal().string().c_str());
  return 0;
}

// Per op type, then the slowest nodes: milliseconds per run, to stderr.
void PrintProfile(runtime::Executor& exec, int iterations, int nodes_shown) {
  const ir::Graph& g = *exec.model().graph;
  const std::vector<double> sec = exec.NodeSeconds();
  double total = 0;
  std::map<std::string, std::pair<int, double>> by_op;
  for (size_t n = 0; n < g.nodes.size(); ++n) {
    const ir::Node& node = g.nodes[n];
    auto& e = by_op[(node.domain.empty() ? "" : node.domain + ".") + node.op_type];
    ++e.first;
    e.second += sec[n];
    total += sec[n];
  }
  std::vector<std::pair<double, std::string>> ops;
  for (const auto& [op, e] : by_op) ops.push_back({e.second, op});
  std::sort(ops.rbegin(), ops.rend());
  const double per = 1e3 / iterations;
  std::fprintf(stderr, "%-32s %5s %10s %6s\n", "op", "nodes", "ms/run", "%");
  for (const auto& [t, op] : ops)
    std::fprintf(stderr, "%-32s %5d %10.4f %5.1f%%\n", op.c_str(), by_op[op].first, t * per,
                 total > 0 ? 100.0 * t / total : 0.0);
  std::vector<size_t> order(g.nodes.size());
  for (size_t n = 0; n < order.size(); ++n) order[n] = n;
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return sec[a] > sec[b]; });
  std::fprintf(stderr, "slowest nodes:\n");
  const std::vector<std::string> kernels = exec.NodeKernels();
  for (size_t k = 0; k < std::min<size_t>(nodes_shown, order.size()); ++k) {
    const ir::Node& node = g.nodes[order[k]];
    std::string out_shape = "?";
    if (!node.outputs.empty() && g.values[node.outputs[0]].type.shape_known()) {
      out_shape.clear();
      for (int64_t d : g.values[node.outputs[0]].type.dims)
        out_shape += (out_shape.empty() ? "" : "x") + std::to_string(d);
    }
    bool known = true;
    const double flops = NodeFlops(g, node, &known);
    const double ms = sec[order[k]] * per;
    std::fprintf(stderr, "  %10.4f ms  %-48s %-18s", ms, node.Label(g).c_str(), out_shape.c_str());
    if (known && ms > 0) std::fprintf(stderr, " %8.1f GFLOP/s", flops / (ms * 1e6));
    if (!kernels[order[k]].empty()) std::fprintf(stderr, "  %s", kernels[order[k]].c_str());
    std::fprintf(stderr, "\n");
  }
}

int BenchMain(const ModelOptions& o, int iterations) {
  Prepared p;
  Status st = Prepare(o, &p);
  if (!st.ok()) return Fail(st);
  std::vector<Tensor> outputs;
  for (int w = 0; w < 2; ++w) {  // warm-up
    st = p.Run(&outputs);
    if (!st.ok()) return Fail(st);
  }
  p.executor().ResetProfile();
  std::vector<double> ms;
  for (int i = 0; i < iterations; ++i) {
    auto t0 = std::chrono::steady_clock::now();
    st = p.Run(&outputs);
    auto t1 = std::chrono::steady_clock::now();
    if (!st.ok()) return Fail(st);
    ms.push_back(std::chrono::duration<double, std::milli>(t1 - t0).count());
  }
  // Tiled: the profile is the tile executor's, over all its tiles of a run.
  if (o.profile) PrintProfile(p.executor(), iterations, o.profile_nodes);
  std::sort(ms.begin(), ms.end());
  nlohmann::ordered_json j;
  j["model"] = o.model;
  j["threads"] = o.threads;
  j["iterations"] = iterations;
  j["median_ms"] = ms[ms.size() / 2];
  j["min_ms"] = ms.front();
  j["max_ms"] = ms.back();
  j["arena_bytes"] = p.executor().arena_bytes();
  if (p.runner->tile_rows() > 0) j["tile_rows"] = p.runner->tile_rows();
  std::printf("%s\n", j.dump().c_str());
  return 0;
}

}  // namespace

void AddRunCommand(CLI::App& app, int& rc) {
  auto* c = app.add_subcommand("run", "run a model on the host CPU and write its outputs");
  struct Options : ModelOptions {
    std::string out_dir = ".";
  };
  auto o = std::make_shared<Options>();  // owned by the callback
  AddModelOptions(c, *o);
  c->add_option("--output-dir", o->out_dir, "where output_<k>.npy and outputs.json go");
  c->callback([&rc, o] { rc = RunMain(*o, o->out_dir); });
}

void AddBenchCommand(CLI::App& app, int& rc) {
  auto* c = app.add_subcommand("bench", "time inference and print one JSON line");
  struct Options : ModelOptions {
    int iterations = 20;
  };
  auto o = std::make_shared<Options>();  // owned by the callback
  AddModelOptions(c, *o);
  c->add_option("--iterations", o->iterations, "timed runs")->check(IntegerIn(1, 100000000));
  c->add_flag(
      "--profile", o->profile,
      "also print ms per run by op type and the slowest nodes (output shape, GFLOP/s) to stderr");
  c->add_option("--profile-nodes", o->profile_nodes,
                "how many of the slowest nodes --profile lists")
      ->check(IntegerIn(0, 1000000));
  c->callback([&rc, o] { rc = BenchMain(*o, o->iterations); });
}

}  // namespace kiln::cli
