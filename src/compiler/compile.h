// The one compile step every target takes, from a loaded model to a Program: the graph lowered
// for the target, and every graph's schedule, memory plan and layouts. It reads top to bottom in
// compile.cc; each target's choices are data (CompileOptions, and what Compile derives from the
// target), so the host executor, the C and CUDA backends, `.kiln` programs, `kiln plan` and the
// gym's observations run the same steps and emit exactly the plan Compile made.
#pragma once

#include <functional>
#include <string>
#include <unordered_map>
#include <vector>

#include "compiler/host_layout.h"
#include "ir/graph.h"
#include "passes/infer_shapes.h"
#include "planner/plan_graph.h"
#include "support/status.h"

namespace kiln::compiler {

enum class Target {
  kPipeline,  // the pipeline's graph as it is: what a `.kiln` program stores, the gym observes
  kHost,      // the host executor (runtime/)
  kC,         // the C backend (codegen/c)
  kCuda,      // the CUDA backend (codegen/cuda)
};

struct CompileOptions {
  Target target = Target::kHost;
  passes::ShapeOverrides shapes;
  std::vector<std::string> passes;         // the pipeline's (passes/pipeline.h)
  std::vector<std::string> dump_ir_after;  // print the IR to stderr after these passes ("all")
  bool host_passes = true;                 // kHost: its fusions (ExecutorOptions::host_passes)
  bool channels_last = true;               // kHost: channels-last layouts (host_layout.h)
  // The planner's choices. kCuda plans its own way (one slot per colour, inputs included) and
  // kHost sets the layout fields itself.
  planner::PlanOptions plan;
  // Runs right after shape inference, before any pass rewrites the graph (the CUDA backend checks
  // there that no node mixes samples).
  std::function<Status(const ir::Model&)> after_shapes;
  // kPipeline: float weights stored as FLOAT8E4M3FN or FLOAT4E2M1 codes after the lowering
  // (passes/store_weights.h); kUndefined keeps them.
  DType weight_storage = DType::kUndefined;
  // Runs on the lowered graph before planning: the target's own checks (which ops its emitters
  // support, which tensor types it takes), so that they are reported before any planner error.
  std::function<Status(const ir::Model&)> before_plan;
};

// One graph's plan as its target runs it.
struct GraphProgram {
  planner::GraphPlan plan;  // schedule, buffers, offsets
  HostLayout layout;        // kHost: which values stay channels-last, where Concats write
};

struct Program {
  Target target = Target::kHost;
  ir::Model model;  // lowered
  // The main graph and each subgraph (If/Loop/Scan bodies).
  std::unordered_map<const ir::Graph*, GraphProgram> graphs;

  const GraphProgram& Of(const ir::Graph& g) const { return graphs.at(&g); }
  const GraphProgram& main() const { return Of(*model.graph); }
};

// The host's own passes after the pipeline's: what ONNX Runtime rewrites at session time.
const std::vector<std::string>& HostFusions();

// The planner options a target plans with (CompileOptions::plan, as the target adjusts them).
planner::PlanOptions TargetPlanOptions(const CompileOptions& options);

// Lowering, then planning, for options.target. Takes the model; returns it lowered.
Expected<Program> Compile(ir::Model model, const CompileOptions& options);

}  // namespace kiln::compiler
