// The host executor: runs a model's graph on the CPU. Intermediates of the main graph whose size
// is known at load time live in one working arena, placed by a first-fit plan over their
// lifetimes; values whose size depends on data (and subgraph values) are allocated per run.
// Results are deterministic for a given --threads.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "ir/graph.h"
#include "passes/infer_shapes.h"
#include "support/status.h"

namespace kiln::runtime {

struct ExecutorOptions {
  int threads = 1;
  passes::ShapeOverrides shapes;
};

struct ArenaSlot {
  int value = -1;
  size_t offset = 0;
  size_t size = 0;
  int first_use = 0;  // node positions
  int last_use = 0;
};

class Executor {
 public:
  // Takes ownership of the model; infers shapes and plans the arena.
  static Expected<std::unique_ptr<Executor>> Create(ir::Model model, ExecutorOptions options = {});
  ~Executor();

  const ir::Model& model() const { return model_; }
  // The inputs a caller feeds, in graph order (initializer-backed inputs excluded).
  std::vector<int> input_values() const { return model_.graph->RuntimeInputs(); }
  const ir::Value& value(int v) const { return model_.graph->values[v]; }
  size_t arena_bytes() const { return arena_bytes_; }
  const std::vector<ArenaSlot>& arena_plan() const { return slots_; }

  // inputs: one tensor per input_values() entry, in that order.
  Status Run(const std::vector<Tensor>& inputs, std::vector<Tensor>* outputs);

 private:
  Executor() = default;
  struct Impl;
  ir::Model model_;
  ExecutorOptions options_;
  std::vector<ArenaSlot> slots_;
  size_t arena_bytes_ = 0;
  std::unique_ptr<Impl> impl_;
};

}  // namespace kiln::runtime
