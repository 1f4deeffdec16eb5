// The host executor: runs a model's graph on the CPU. Intermediates of the main graph whose size
// is known at load time live in one working arena placed by the memory planner (planner/), in
// the order the reordering pass chose; views and Concat/Split slices cost no copy, element-wise
// ops run in place where the plan says so. Values whose size depends on data (and subgraph
// values) are allocated per run. Results are deterministic for a given --threads.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "compiler/compile.h"
#include "ir/graph.h"
#include "kernels/x86/cpu_isa.h"
#include "passes/infer_shapes.h"
#include "planner/memory_planner.h"
#include "support/status.h"

namespace kiln::runtime {

struct ExecutorOptions {
  int threads = 1;
  passes::ShapeOverrides shapes;
  std::string planner = "default";  // see planner/memory_planner.h
  bool reorder = true;              // run nodes in the order with the smallest peak
  bool aliasing = true;             // views, in-place and Concat-in-place
  bool poison = false;              // debug: fill dead arena bytes with 0xA5 before every node
  std::vector<std::string> passes;  // run after shape inference (passes/pipeline.h)
  std::vector<std::string> dump_ir_after;  // print the IR to stderr after these passes ("all")
  long planner_steps = 0;                  // the planner's search steps (PlanOptions::max_steps)
  // First, fuse-qdq (a QDQ model's Conv and MatMul on int8 arithmetic); last, what makes the
  // host fastest (ONNX Runtime's session-time rewrites): fold-constants
  // whatever the results' size, fold-batchnorm, fuse-channel-shuffle (one node the executor
  // keeps channels-last), fuse-gelu (one vector kernel for five nodes), fuse-transpose-matmul
  // (attention's K^T read in place), fuse-matmul-add (the bias inside the GEMM),
  // fuse-conv-activation (one kernel where there were two or three, fewer intermediates). The
  // fusions round differently (a few ulp).
  bool host_passes = true;
  // Channels-last activations between the convolutions that take them (ops/channels_last.h).
  bool channels_last = true;
  bool profile = false;  // time every node of the main graph (NodeSeconds)
  // kFast: the fastest kernels this CPU runs. kReference: the portable reference kernels, on one
  // thread and without channels-last layouts (kernels/x86/cpu_isa.h); the oracle for the fast ones.
  ops::KernelSet kernels = ops::KernelSet::kFast;
};

// What the executor compiles a model with: the host target, with options' passes, shapes,
// planner and layouts.
compiler::CompileOptions HostCompileOptions(const ExecutorOptions& options);

class Executor {
 public:
  // Takes ownership of the model and compiles it for the host (HostCompileOptions).
  static Expected<std::unique_ptr<Executor>> Create(ir::Model model, ExecutorOptions options = {});
  // Runs a program compiled for the host target; options' compile fields are not read again.
  static Expected<std::unique_ptr<Executor>> Create(compiler::Program program,
                                                    ExecutorOptions options = {});
  ~Executor();

  const ir::Model& model() const { return model_; }
  // The inputs a caller feeds, in graph order (initializer-backed inputs excluded).
  std::vector<int> input_values() const { return model_.graph->RuntimeInputs(); }
  const ir::Value& value(int v) const { return model_.graph->values[v]; }
  size_t arena_bytes() const { return plan_.arena_bytes; }
  const planner::Plan& plan() const { return plan_; }
  // With ExecutorOptions::profile: seconds spent in each main-graph node (by node index) over
  // the runs since creation or ResetProfile.
  std::vector<double> NodeSeconds() const;
  // Per node of the main graph: the kernel its state says it runs (ops::NodeState::Kernel), or "".
  std::vector<std::string> NodeKernels() const;
  void ResetProfile();
  // How many values of the main graph are kept channels-last (ops/channels_last.h).
  int channels_last_values() const;
  // How many channel Concats of the main graph are made in place channels-last: their inputs'
  // producers write into the output, interleaved (ops::CanWriteChannelsLastInterleaved).
  int interleaved_concats() const;
  // Node indices of the main graph in execution order.
  const std::vector<int>& schedule() const { return order_; }

  // inputs: one tensor per input_values() entry, in that order.
  Status Run(const std::vector<Tensor>& inputs, std::vector<Tensor>* outputs);

 private:
  Executor() = default;
  struct Impl;
  ir::Model model_;
  ExecutorOptions options_;
  planner::Plan plan_;
  std::vector<int> order_;
  int64_t scratch_budget_ = 0;  // ops::ComputeContext::scratch_budget for every node
  std::unique_ptr<Impl> impl_;
};

}  // namespace kiln::runtime
