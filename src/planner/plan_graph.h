// The whole planning step for one graph: schedule (reordering), buffers and aliases, offsets.
// Used by the host executor, `kiln plan` and the backends so they all run the same plan.
#pragma once

#include <string>

#include "planner/lifetimes.h"
#include "planner/memory_planner.h"
#include "planner/reorder.h"

namespace kiln::planner {

struct PlanOptions {
  std::string planner = "default";
  bool reorder = true;
  bool aliasing = true;
  bool include_io = false;  // see LifetimeOptions
  long max_steps = 0;       // search steps per search planner; 0: DefaultSearchSteps
  std::vector<ConcatPlacement> concat_placement;  // LifetimeOptions's (the host executor's)
  bool fused_conv_in_place = false;               // LifetimeOptions's (the host executor's)
};

struct GraphPlan {
  Schedule schedule;  // schedule.order is the execution order
  BufferSet buffers;  // lifetimes, aliases and no-op nodes (buffers.buffers are pre-planning)
  Plan plan;          // offsets; plan.buffers parallels buffers.buffers
};

Expected<GraphPlan> PlanGraph(const ir::Graph& g, const PlanOptions& options = {});

}  // namespace kiln::planner
