// The pass pipeline: every graph transformation kiln has, registered by name, and the default
// sequence `kiln compile` / `run` apply. The optimization service's action space is this registry
// (plus the planner choices), and a pipeline file written by `kiln tune` names passes from it.
//
// A pass is `Expected<bool> Pass(ir::Model&)`: it needs a verified model whose shapes are inferred,
// keeps every value's type correct, and answers whether it changed the model. RunPipeline verifies
// the graph after every pass.
//
// Pipeline file (JSON, written by `kiln tune`, read by `--pipeline FILE`):
//   {"kiln_pipeline": 1, "passes": ["fold-constants", ...], "planner": "default",
//    "reorder": true, "planner_steps": 0, "shapes": {"x": [1, 3]}}
// `planner_steps` > 0: the search planners' steps; 0: as many as the graph's size allows
// (planner::DefaultSearchSteps). Either way the plan is the same on every machine.
// `shapes` (optional) fixes symbolic input dims the way the pipeline was tuned; --shape and the
// dims of given input files take precedence.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "ir/graph.h"
#include "passes/infer_shapes.h"
#include "support/status.h"

namespace kiln::passes {

struct PassInfo {
  std::string name;         // kebab-case, the action name
  std::string description;  // one line
  std::function<Expected<bool>(ir::Model&)> run;
  bool exact = true;  // false when it may change results by rounding (reassociation)
};

// Every pass, in a fixed order (pass_registry.cc).
const std::vector<PassInfo>& RegisteredPasses();
const PassInfo* FindPass(const std::string& name);

struct Pipeline {
  std::vector<std::string> passes;
  std::string planner = "default";
  bool reorder = true;
  long planner_steps = 0;
  ShapeOverrides shapes;
};

// What kiln applies when no --pipeline is given.
Pipeline DefaultPipeline();

// Parses and validates a pipeline file's text (every pass and planner known); `source` names it in
// errors.
Expected<Pipeline> ParsePipeline(const std::string& text, const std::string& source);
Expected<Pipeline> LoadPipelineFile(const std::string& path);
std::string PipelineToJson(const Pipeline& p);

struct PipelineOptions {
  // Print the IR to stderr after these passes ("all" for every one).
  std::vector<std::string> dump_ir_after;
};

// Runs `passes` in order on a model whose shapes are inferred; verifies after each. Errors name the
// pass.
Status RunPasses(ir::Model& model, const std::vector<std::string>& passes,
                 const PipelineOptions& options = {});

}  // namespace kiln::passes
