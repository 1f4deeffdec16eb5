// Runs a model through the generated C on this machine: compile to C in a scratch folder, build
// it with the strict flags of DESIGN.md section 2.4 together with the file driver, run it on the
// given inputs and read the outputs back. Used by `kiln test-onnx --backend c` and `kiln run
// --backend c`.
#pragma once

#include <string>
#include <vector>

#include "ir/graph.h"
#include "passes/infer_shapes.h"
#include "planner/plan_graph.h"
#include "support/status.h"

namespace kiln::cli {

struct CHarnessOptions {
  std::string cc = "cc";  // the C compiler
  std::string work_dir;   // scratch folder (created; removed afterwards unless keep)
  bool keep = false;
  std::string run_prefix;  // runs the program through this command (e.g. an emulator)
  passes::ShapeOverrides shapes;
  std::vector<std::string> passes;  // after shape inference (the C backend folds constants anyway)
  planner::PlanOptions plan;
  std::string weight_storage = "fp32";  // codegen::c::CompileOptions::weight_storage
};

// inputs: one tensor per graph input a caller feeds, in graph order.
Expected<std::vector<Tensor>> RunThroughC(ir::Model model, const std::vector<Tensor>& inputs,
                                          const CHarnessOptions& options);

// The flags every generated file must build with.
const char* StrictCFlags();

}  // namespace kiln::cli
