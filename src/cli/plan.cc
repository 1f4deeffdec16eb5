// kiln plan: the memory plan as text (a table and an ASCII timeline), JSON, or an SVG picture.
#include <algorithm>
#include <fstream>
#include <nlohmann/json.hpp>
#include <optional>

#include "cli/commands.h"
#include "cli/common.h"
#include "codegen/c/c_backend.h"
#include "codegen/cuda/cuda_backend.h"
#include "compiler/compile.h"
#include "frontend/model_loader.h"
#include "passes/compress_constants.h"
#include "planner/plan_graph.h"
#include "runtime/executor.h"
#include "support/file_io.h"

namespace kiln::cli {
namespace {

struct PlanCliOptions {
  std::string model, weights, planner = "default", svg, pipeline, target;
  std::vector<std::string> dump_ir_after;
  std::vector<std::string> shapes;
  bool json = false, no_reorder = false, no_alias = false, include_io = false;
};

std::string Escape(const std::string& s) {
  std::string o;
  for (char c : s) {
    switch (c) {
      case '<':
        o += "&lt;";
        break;
      case '>':
        o += "&gt;";
        break;
      case '&':
        o += "&amp;";
        break;
      case '"':
        o += "&quot;";
        break;
      default:
        o += c;
    }
  }
  return o;
}

// Time across, offset up; one labelled rectangle per buffer, aliases drawn hatched.
std::string Svg(const planner::Plan& plan, int positions, const std::string& title) {
  const double W = 1000, H = 600, left = 70, bottom = 40, top = 30;
  const double arena = std::max<double>(1, static_cast<double>(plan.arena_bytes));
  const double xs = (W - left - 10) / std::max(1, positions);
  const double ys = (H - top - bottom) / arena;
  std::string s = "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" + std::to_string(int(W)) +
                  "\" height=\"" + std::to_string(int(H)) + "\" font-family=\"sans-serif\">\n";
  s += "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n";
  s += "<text x=\"" + std::to_string(int(left)) + "\" y=\"20\" font-size=\"14\">" + Escape(title) +
       "</text>\n";
  for (size_t i = 0; i < plan.buffers.size(); ++i) {
    const auto& b = plan.buffers[i];
    double x = left + b.first_use * xs, w = std::max(1.0, (b.last_use - b.first_use + 1) * xs);
    double y = H - bottom - (b.offset + b.size) * ys, h = std::max(1.0, b.size * ys);
    int hue = static_cast<int>((i * 47) % 360);
    s += "<rect x=\"" + std::to_string(x) + "\" y=\"" + std::to_string(y) + "\" width=\"" +
         std::to_string(w) + "\" height=\"" + std::to_string(h) + "\" fill=\"hsl(" +
         std::to_string(hue) + ",60%," + (b.alias_of >= 0 ? "85%" : "65%") +
         ")\" stroke=\"#333\" stroke-width=\"0.5\"" +
         (b.alias_of >= 0 ? " stroke-dasharray=\"3,2\"" : "") + "><title>" + Escape(b.name) + ": " +
         std::to_string(b.size) + " bytes at " + std::to_string(b.offset) + ", positions " +
         std::to_string(b.first_use) + ".." + std::to_string(b.last_use) +
         (b.alias_of >= 0 ? ", shares bytes of " + Escape(plan.buffers[b.alias_of].name) : "") +
         "</title></rect>\n";
    if (w > 40 && h > 10)
      s += "<text x=\"" + std::to_string(x + 2) + "\" y=\"" +
           std::to_string(y + std::min(h - 2, 11.0)) + "\" font-size=\"9\">" +
           Escape(b.name.substr(0, static_cast<size_t>(w / 5))) + "</text>\n";
  }
  s += "<line x1=\"" + std::to_string(left) + "\" y1=\"" + std::to_string(H - bottom) + "\" x2=\"" +
       std::to_string(W - 10) + "\" y2=\"" + std::to_string(H - bottom) + "\" stroke=\"black\"/>\n";
  s += "<line x1=\"" + std::to_string(left) + "\" y1=\"" + std::to_string(top) + "\" x2=\"" +
       std::to_string(left) + "\" y2=\"" + std::to_string(H - bottom) + "\" stroke=\"black\"/>\n";
  s += "<text x=\"" + std::to_string(left) + "\" y=\"" + std::to_string(H - 15) +
       "\" font-size=\"11\">schedule position (0.." + std::to_string(positions - 1) +
       ") &#8594;</text>\n";
  s += "<text x=\"5\" y=\"" + std::to_string(top + 10) + "\" font-size=\"11\">" +
       std::to_string(plan.arena_bytes) + " B</text>\n";
  s += "<text x=\"5\" y=\"" + std::to_string(H - bottom) + "\" font-size=\"11\">0</text>\n";
  double lb = H - bottom - plan.lower_bound_bytes * ys;
  s += "<line x1=\"" + std::to_string(left) + "\" y1=\"" + std::to_string(lb) + "\" x2=\"" +
       std::to_string(W - 10) + "\" y2=\"" + std::to_string(lb) +
       "\" stroke=\"red\" stroke-dasharray=\"6,3\"/><text x=\"" + std::to_string(W - 160) +
       "\" y=\"" + std::to_string(lb - 3) + "\" font-size=\"10\" fill=\"red\">lower bound " +
       std::to_string(plan.lower_bound_bytes) + " B</text>\n";
  return s + "</svg>\n";
}

// One row per buffer (largest first, at most 40): '#' while live, '=' for an alias.
void PrintTimeline(const planner::Plan& plan, int positions) {
  const int width = 60;
  std::vector<int> idx(plan.buffers.size());
  for (size_t i = 0; i < idx.size(); ++i) idx[i] = static_cast<int>(i);
  std::stable_sort(idx.begin(), idx.end(),
                   [&](int a, int b) { return plan.buffers[a].offset < plan.buffers[b].offset; });
  std::printf("%-28s %10s %10s  timeline (positions 0..%d)\n", "buffer", "offset", "size",
              std::max(0, positions - 1));
  int shown = 0;
  for (int i : idx) {
    if (++shown > 40) {
      std::printf("... %zu more buffers (see --json)\n", idx.size() - 40);
      break;
    }
    const auto& b = plan.buffers[i];
    std::string bar(width, '.');
    int s = positions > 0 ? b.first_use * width / positions : 0;
    int e = positions > 0 ? b.last_use * width / positions : 0;
    for (int k = s; k <= std::min(e, width - 1); ++k) bar[k] = b.alias_of >= 0 ? '=' : '#';
    std::string name = b.name.size() > 28 ? b.name.substr(0, 25) + "..." : b.name;
    std::printf("%-28s %10zu %10zu  %s\n", name.c_str(), b.offset, b.size, bar.c_str());
  }
}

// A plan as one target runs it: the graph it planned (after its own lowering), the plan and the
// order, and the bytes its working memory takes in all.
struct TargetPlan {
  std::shared_ptr<const ir::Graph> graph;
  planner::Plan plan;
  planner::Schedule schedule;
  size_t workspace_bytes = 0;
  std::optional<passes::ConstantReport> constants;  // without --target only
};

// The pipeline's planner, with --no-alias and --include-io.
planner::PlanOptions CliPlanOptions(const PlanCliOptions& o, const passes::Pipeline& pipeline) {
  planner::PlanOptions po = PlanOptionsOf(pipeline);
  po.aliasing = !o.no_alias;
  po.include_io = o.include_io;
  return po;
}

// Without --target: the pipeline's plan, as the optimization service observes it.
Expected<TargetPlan> PipelinePlan(const PlanCliOptions& o, ir::Model model,
                                  const passes::ShapeOverrides& shapes,
                                  const passes::Pipeline& pipeline) {
  compiler::CompileOptions co;
  co.target = compiler::Target::kPipeline;
  co.shapes = shapes;
  co.passes = pipeline.passes;
  co.dump_ir_after = o.dump_ir_after;
  co.plan = CliPlanOptions(o, pipeline);
  co.before_plan = [](const ir::Model& m) -> Status {
    const ir::Graph& g = *m.graph;
    for (int v : g.RuntimeInputs())
      if (!g.values[v].type.shape_known())
        return Error("input '" + g.values[v].name + "' has dynamic dims " +
                     g.values[v].type.ToString() + "; fix them with --shape");
    return OkStatus();
  };
  KILN_ASSIGN_OR_RETURN(auto program, compiler::Compile(std::move(model), co));
  TargetPlan tp;
  tp.constants = passes::CompressConstants(*program.model.graph);
  tp.graph = program.model.graph;
  tp.plan = program.main().plan.plan;
  tp.schedule = program.main().plan.schedule;
  tp.workspace_bytes = tp.plan.arena_bytes;
  return tp;
}

// --target host: the executor's own plan, after its host passes and layout choices: the program
// Executor::Create compiles, without the kernels' preparation.
Expected<TargetPlan> HostPlan(const PlanCliOptions& o, ir::Model model,
                              const passes::ShapeOverrides& shapes,
                              const passes::Pipeline& pipeline) {
  runtime::ExecutorOptions eo = ExecutorOptionsOf(pipeline, shapes);
  eo.dump_ir_after = o.dump_ir_after;
  eo.aliasing = !o.no_alias;
  KILN_ASSIGN_OR_RETURN(auto program,
                        compiler::Compile(std::move(model), runtime::HostCompileOptions(eo)));
  TargetPlan tp;
  tp.graph = program.model.graph;
  tp.plan = program.main().plan.plan;
  tp.schedule = program.main().plan.schedule;
  tp.workspace_bytes = tp.plan.arena_bytes;
  return tp;
}

// What a backend planned: its CompiledC or CompiledCuda.
template <class Compiled>
TargetPlan FromBackend(Compiled& compiled, size_t workspace_bytes) {
  TargetPlan tp;
  tp.graph = compiled.graph;
  tp.plan = std::move(compiled.plan.plan);
  tp.schedule = std::move(compiled.plan.schedule);
  tp.workspace_bytes = workspace_bytes;
  return tp;
}

// --target c and cuda: the backend's own lowering and plan, exactly what it emits.
Expected<TargetPlan> BackendPlan(const PlanCliOptions& o, ir::Model model,
                                 const passes::ShapeOverrides& shapes,
                                 const passes::Pipeline& pipeline) {
  if (o.target == "c") {
    codegen::c::CompileOptions co;
    co.name = "plan";
    co.shapes = shapes;
    co.passes = pipeline.passes;
    co.dump_ir_after = o.dump_ir_after;
    co.plan = CliPlanOptions(o, pipeline);
    KILN_ASSIGN_OR_RETURN(auto compiled, codegen::c::CompileToC(std::move(model), co));
    return FromBackend(compiled, compiled.interface.workspace_size);
  }
  codegen::cuda::CompileOptions cu;
  cu.name = "plan";
  cu.shapes = shapes;
  cu.passes = pipeline.passes;
  cu.dump_ir_after = o.dump_ir_after;
  KILN_ASSIGN_OR_RETURN(auto compiled, codegen::cuda::CompileToCuda(std::move(model), cu));
  return FromBackend(compiled, compiled.plan.plan.arena_bytes);
}

int PlanMain(const PlanCliOptions& o) {
  auto model = LoadAnyModel(o.model, o.weights);
  if (!model.ok()) return Fail(model.status());
  auto shapes = ParseShapes(o.shapes);
  if (!shapes.ok()) return Fail(shapes.status());
  auto pipeline = ResolvePipeline(o.pipeline, o.planner, o.no_reorder);
  if (!pipeline.ok()) return Fail(pipeline.status());
  AddPipelineShapes(*pipeline, &*shapes);
  if ((o.target == "host" || o.target == "cuda") && o.include_io)
    return Fail(Error("--include-io goes with --target c or no --target (--target " + o.target +
                      " plans what it plans)"));
  if (o.target == "cuda" && o.no_alias)
    return Fail(Error("--no-alias goes with --target c or host, or no --target"));
  auto planned = o.target.empty()     ? PipelinePlan(o, std::move(*model), *shapes, *pipeline)
                 : o.target == "host" ? HostPlan(o, std::move(*model), *shapes, *pipeline)
                                      : BackendPlan(o, std::move(*model), *shapes, *pipeline);
  if (!planned.ok()) return Fail(planned.status());
  const ir::Graph& g = *planned->graph;
  const planner::Plan& plan = planned->plan;
  const planner::Schedule& schedule = planned->schedule;
  const auto& consts = planned->constants;
  int positions = static_cast<int>(schedule.order.size());
  if (o.json) {
    nlohmann::ordered_json j;
    j["model"] = o.model;
    j["target"] =
        o.target.empty() ? nlohmann::ordered_json(nullptr) : nlohmann::ordered_json(o.target);
    j["planner"] = plan.planner;
    j["arena_bytes"] = plan.arena_bytes;
    j["workspace_bytes"] = planned->workspace_bytes;
    j["lower_bound_bytes"] = plan.lower_bound_bytes;
    j["peak_bytes_file_order"] = schedule.original_peak;
    j["peak_bytes_schedule"] = schedule.peak_bytes;
    j["schedule_exact"] = schedule.exact;
    if (consts) {
      j["param_bytes"] = consts->bytes_before;
      j["param_bytes_compressed"] = consts->bytes_after;
      j["constants"] = {{"splat", consts->splats},
                        {"arithmetic", consts->progressions},
                        {"duplicate", consts->duplicates}};
    }
    std::vector<std::string> order;
    for (int n : schedule.order) order.push_back(g.nodes[n].Label(g));
    j["schedule"] = order;
    j["buffers"] = nlohmann::ordered_json::array();
    for (const auto& b : plan.buffers) {
      nlohmann::ordered_json e;
      e["name"] = b.name;
      e["offset"] = b.offset;
      e["size"] = b.size;
      e["first_use"] = b.first_use;
      e["last_use"] = b.last_use;
      e["alias_of"] = b.alias_of >= 0 ? nlohmann::ordered_json(plan.buffers[b.alias_of].name)
                                      : nlohmann::ordered_json(nullptr);
      j["buffers"].push_back(e);
    }
    std::printf("%s\n", j.dump(1).c_str());
  } else {
    std::printf(
        "planner %s: arena %zu bytes, lower bound %zu bytes (%.3fx), %zu buffers, %d nodes\n",
        plan.planner.c_str(), plan.arena_bytes, plan.lower_bound_bytes,
        plan.lower_bound_bytes ? double(plan.arena_bytes) / plan.lower_bound_bytes : 1.0,
        plan.buffers.size(), positions);
    if (!o.target.empty())
      std::printf("target %s: workspace %zu bytes (the arena%s)\n", o.target.c_str(),
                  planned->workspace_bytes,
                  o.target == "c" ? ", then node scratch and subgraph arenas" : "");
    std::printf("schedule: live-byte peak %zu (file order %zu)%s\n", schedule.peak_bytes,
                schedule.original_peak, schedule.exact ? ", exact search" : "");
    if (consts)
      std::printf(
          "parameters: %zu bytes, %zu after constant compression (%d splat, %d arithmetic, "
          "%d duplicate)\n",
          consts->bytes_before, consts->bytes_after, consts->splats, consts->progressions,
          consts->duplicates);
    PrintTimeline(plan, positions);
  }
  if (!o.svg.empty()) {
    Status st = WriteFile(o.svg, Svg(plan, positions,
                                     o.model + ": " + plan.planner + ", " +
                                         std::to_string(plan.arena_bytes) + " bytes"));
    if (!st.ok()) return Fail(st);
  }
  return 0;
}

}  // namespace

void AddPlanCommand(CLI::App& app, int& rc) {
  auto* c = app.add_subcommand("plan", "print the memory plan (table and timeline, --json, --svg)");
  auto o = std::make_shared<PlanCliOptions>();  // owned by the callback
  c->add_option("MODEL", o->model, "model file")->required();
  c->add_option("--weights", o->weights, "safetensors weights for a .json model");
  c->add_option("--shape", o->shapes, "fix an input's dims: NAME=D0,D1,...");
  c->add_option("--planner", o->planner,
                "default, greedy-size, greedy-conflicts, coloring, anneal, tflm, none");
  c->add_option("--pipeline", o->pipeline,
                "passes and planner from a pipeline file (kiln tune writes one)");
  c->add_option("--dump-ir-after", o->dump_ir_after,
                "print the IR to stderr after this pass (all: every pass)");
  c->add_option("--target", o->target,
                "the plan that target emits, after its own lowering: host (the executor), c, cuda "
                "(one sample, inputs and outputs included); without it, the pipeline's plan")
      ->check(OneOf({"host", "c", "cuda"}));
  c->add_flag("--json", o->json,
              "one JSON object with arena_bytes, lower_bound_bytes, planner, buffers");
  c->add_option("--svg", o->svg, "write a picture of the plan");
  c->add_flag("--no-reorder", o->no_reorder, "keep the file's node order");
  c->add_flag("--no-alias", o->no_alias, "no views, in-place or Concat-in-place sharing");
  c->add_flag("--include-io", o->include_io,
              "plan graph inputs (live from the start) and outputs (live to the end) too");
  c->callback([&rc, o] { rc = PlanMain(*o); });
}

}  // namespace kiln::cli
