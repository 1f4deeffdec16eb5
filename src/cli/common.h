// Helpers shared by the verbs: option parsing for --shape / --input, random inputs, printing.
#pragma once

#include <CLI/CLI.hpp>
#include <map>
#include <string>
#include <vector>

#include "ir/graph.h"
#include "kernels/x86/thread_pool.h"
#include "passes/infer_shapes.h"
#include "passes/pipeline.h"
#include "planner/plan_graph.h"
#include "runtime/executor.h"
#include "support/status.h"

namespace kiln::codegen::c {
struct CompiledC;
}

namespace kiln::cli {

constexpr const char* kKilnVersion = "0.1.0";
// --threads takes 1 to this many (what the kernels' thread pool runs).
constexpr int kMaxThreads = ops::kMaxThreads;
// Byte-count options take at most 1 PiB.
constexpr long long kMaxBytesOption = 1LL << 50;

// The largest dim --shape takes (a tensor holds at most 2^42 elements).
constexpr long long kMaxDimension = 1LL << 42;

// Parses "NAME=D0,D1,..." options (split at the last '=' so names may contain '=').
Expected<passes::ShapeOverrides> ParseShapes(const std::vector<std::string>& specs);
// OK when `name` is a runtime input of `g`; else an error for `option` that lists the inputs.
Status CheckInputName(const ir::Graph& g, const std::string& name, const std::string& option);
// An --input spec as (NAME, FILE): "NAME=FILE" splits at the first '='; a bare FILE names the
// model's only input (an error listing the inputs when there are several).
Expected<std::pair<std::string, std::string>> SplitInputSpec(const std::string& spec,
                                                             const ir::Graph& g,
                                                             const std::string& option);
// Symbolic dims of input `name` take the sizes of a file given for it, unless --shape fixed them
// (fixed dims are checked when the model runs).
void AddShapeFromFile(const ir::Graph& g, const std::string& name, const Dims& dims,
                      passes::ShapeOverrides* shapes);
// The same for an input declared `declared` given data of `dims`.
void AddShapeFromData(const std::string& name, const ir::TypeInfo& declared, const Dims& dims,
                      passes::ShapeOverrides* shapes);
// Deterministic pseudo-random data for an input of the given type (dims must be known).
Tensor RandomTensor(DType dtype, const Dims& dims, uint64_t seed);
// --pipeline FILE gives the passes, planner and reorder choice (as `kiln tune` writes them);
// without it, the default pipeline with --planner / --no-reorder. Both at once is an error.
Expected<passes::Pipeline> ResolvePipeline(const std::string& file, const std::string& planner,
                                           bool no_reorder);
// Adds the pipeline's input shapes for the inputs `shapes` does not fix yet.
void AddPipelineShapes(const passes::Pipeline& p, passes::ShapeOverrides* shapes);
// PlanOptions with a pipeline's planner choice.
planner::PlanOptions PlanOptionsOf(const passes::Pipeline& p);
// ExecutorOptions with a pipeline's passes and planner choice, and the input dims.
runtime::ExecutorOptions ExecutorOptionsOf(const passes::Pipeline& p,
                                           const passes::ShapeOverrides& shapes);
// --kernels fast|reference: the host executor's kernels (ExecutorOptions::kernels).
void AddKernelsOption(CLI::App* c, ops::KernelSet* kernels);
// A node's FLOPs: a multiply-add counts as two (Conv, FusedConv, ConvTranspose, MatMul, Gemm and
// their integer forms), any other op as one per output element. *known becomes false when the
// output shape (or a weight's) is not known.
double NodeFlops(const ir::Graph& g, const ir::Node& n, bool* known);
// Option checks whose messages name the value given and what is allowed (CLI11 puts the option's
// name in front): "--threads: '0' is not allowed; give an integer from 1 to 64".
CLI::Validator IntegerIn(long long lo, long long hi);
CLI::Validator UnsignedInteger();         // any value of a uint64_t
CLI::Validator NumberAtLeast(double lo);  // a finite real number >= lo
CLI::Validator OneOf(const std::vector<std::string>& allowed);
// The one line kiln prints for a command line CLI11 refused (an unknown verb or option, a missing
// argument, a value a check refused), without the "kiln: " prefix.
std::string CommandLineError(const CLI::App& app, const CLI::ParseError& e, int argc, char** argv);
// Prints "kiln: <message>" to stderr and returns 1.
int Fail(const Status& s);
// The command as generated files record it: each path argument by its file name ("NAME=PATH" as
// NAME=FILE), so that their bytes do not depend on the folder kiln ran in.
std::string RecordedCommandLine(int argc, char** argv);

// .kiln programs and .bpte bundles (cli/bundle.cc).
bool IsProgramPath(const std::string& path);  // ends in .kiln
bool IsBundlePath(const std::string& path);   // ends in .bpte
// Loads a model by extension: .kiln (a compiled program), .bpte (the program a bundle holds), or
// anything frontend::LoadModel reads (.onnx, .json with --weights).
Expected<ir::Model> LoadAnyModel(const std::string& path, const std::string& weights = "");
// The .kiln bytes of MODEL: a model file is compiled (shape inference with `shapes`, then
// `passes`, the main graph planned with `plan`); a .kiln or .bpte gives its program as it is (no
// --shape then).
Expected<std::string> CompileProgram(const std::string& path, const std::string& weights,
                                     const passes::ShapeOverrides& shapes,
                                     const std::vector<std::string>& passes,
                                     const planner::PlanOptions& plan,
                                     DType weight_storage = DType::kUndefined);
// kiln compile --bundle: adds NAME_verify.c for the test sets of the bundle at `bundle_path`.
Status AddVerifyMain(const std::string& bundle_path, const std::string& name,
                     const std::string& command_line, codegen::c::CompiledC* compiled);
// kiln inspect on a .bpte (the bundle, its program and test sets) and the header of a .kiln.
int InspectBundle(const std::string& path);
Status PrintProgramHeader(const std::string& path);

}  // namespace kiln::cli
