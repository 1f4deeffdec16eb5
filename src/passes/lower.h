// The one lowering every target runs, from a loaded model to the graph its backend plans and
// emits. It reads top to bottom in lower.cc; each target's choices are data (LowerOptions), so
// the host executor, the C and CUDA backends, and `kiln plan --target` take the same steps.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "ir/graph.h"
#include "passes/infer_shapes.h"
#include "support/status.h"

namespace kiln::passes {

enum class Target { kHost, kC, kCuda };

struct LowerOptions {
  Target target = Target::kHost;
  ShapeOverrides shapes;
  std::vector<std::string> passes;         // the pipeline's (passes/pipeline.h)
  std::vector<std::string> dump_ir_after;  // print the IR to stderr after these passes ("all")
  bool host_passes = true;                 // kHost: its fusions (ExecutorOptions::host_passes)
  // Runs right after shape inference, before any pass rewrites the graph (the CUDA backend checks
  // there that no node mixes samples).
  std::function<Status(const ir::Model&)> after_shapes;
};

// The host's own passes after the pipeline's: what ONNX Runtime rewrites at session time.
const std::vector<std::string>& HostFusions();

// Shape inference, the pipeline's passes and the target's lowering, in place.
Status Lower(ir::Model& model, const LowerOptions& options);

}  // namespace kiln::passes
