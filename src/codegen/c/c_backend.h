// The embedded C backend: a model becomes NAME.h / NAME.c / NAME_params.c / NAME_kernels.h with
// the interface of DESIGN.md section 2.4.
//
// Pipeline: shape inference (with --shape overrides) -> constant folding and dead-node removal ->
// per graph: schedule + memory plan (planner/) -> one static function per node (node emitters,
// one file per op family) -> run() calling them in schedule order with the planner's offsets as
// named constants. Graph inputs and outputs live in caller memory; every intermediate lives in the
// one workspace arena (subgraphs and node scratch get regions after the main graph's arena).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "compiler/compile.h"
#include "ir/graph.h"
#include "passes/infer_shapes.h"
#include "planner/plan_graph.h"
#include "support/status.h"

namespace kiln::codegen::c {

struct CompileOptions {
  std::string name;            // the model name: a C identifier
  std::string params_section;  // put parameter arrays in this linker section ("" = default)
  // The core the code is for: "generic" (portable C99) or a Cortex-M with the DSP extension
  // ("cortex-m4", "cortex-m7", "cortex-m33"), whose int8 kernels then use its instructions.
  std::string cpu = "generic";
  std::string command_line;  // recorded in the header comment
  // Names the model in the header comment (its file name and SHA-256, never a path, so that the
  // bytes do not depend on the folder kiln ran in); "" names it by its file name.
  std::string source;
  std::string kiln_version;
  passes::ShapeOverrides shapes;
  std::vector<std::string> passes;         // run after shape inference (passes/pipeline.h)
  std::vector<std::string> dump_ir_after;  // print the IR to stderr after these passes ("all")
  planner::PlanOptions plan;
  // How float weights are stored: "fp32" as they are; "fp8" (FLOAT8E4M3FN) or "fp4" (FLOAT4E2M1,
  // two per byte) codes with one scale per tensor, for the B operand of MatMul and Gemm when it is
  // a float constant, decoded in the GEMM through a table (kernels/reference/gemm_lut.c).
  std::string weight_storage = "fp32";
};

struct GeneratedFile {
  std::string name;  // file name inside the output folder
  std::string text;
};

// What a caller of the generated code sees (graph order); for test drivers.
struct CompiledInterface {
  std::vector<ir::Value> inputs, outputs;
  size_t workspace_size = 0;
};

struct CompiledC {
  std::vector<GeneratedFile> files;
  CompiledInterface interface;
  // The main graph as the backend lowered it, and its memory plan: what `kiln plan --target c`
  // prints. The workspace is this arena, then each node's scratch and each subgraph's arena.
  std::shared_ptr<const ir::Graph> graph;
  planner::GraphPlan plan;
};

// Compiles the model for the c target and emits it. Fails with a message
// naming the node or tensor for: an invalid name, an op (or an attribute, dtype or shape of one)
// the C backend cannot emit, a dim not fixed by --shape.
Expected<CompiledC> CompileToC(ir::Model model, const CompileOptions& options);

// CompileToC in two steps: the program for the c target, then its code (options' compile fields
// are not read again).
Expected<compiler::Program> CompileProgram(ir::Model model, const CompileOptions& options);
Expected<CompiledC> CompileToC(const compiler::Program& program, const CompileOptions& options);

}  // namespace kiln::codegen::c
