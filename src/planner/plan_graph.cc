#include "planner/plan_graph.h"

namespace kiln::planner {

Expected<GraphPlan> PlanGraph(const ir::Graph& g, const PlanOptions& options) {
  GraphPlan gp;
  if (options.reorder) {
    gp.schedule = ChooseSchedule(g);
  } else {
    gp.schedule.order.resize(g.nodes.size());
    for (size_t i = 0; i < g.nodes.size(); ++i) gp.schedule.order[i] = static_cast<int>(i);
    gp.schedule.peak_bytes = gp.schedule.original_peak = PeakBytes(g, gp.schedule.order);
  }
  LifetimeOptions lo;
  lo.aliasing = options.aliasing;
  lo.include_io = options.include_io;
  lo.concat_placement = options.concat_placement;
  lo.fused_conv_in_place = options.fused_conv_in_place;
  gp.buffers = BuildBuffers(g, gp.schedule.order, lo);
  KILN_ASSIGN_OR_RETURN(gp.plan,
                        PlanMemory(gp.buffers.buffers, options.planner, options.max_steps));
  return gp;
}

}  // namespace kiln::planner
