// The host executor's layout choices, made at compile time with its plan: which values stay
// channels-last between the kernels that take them (ops/channels_last.h), and where a
// channels-last Concat's inputs are written. Layouts never change the bytes a value takes.
#pragma once

#include <cstdint>
#include <vector>

#include "ir/graph.h"
#include "planner/plan_graph.h"

namespace kiln::compiler {

struct HostLayout {
  std::vector<char> channels_last;                         // per value: kept channels-last
  std::vector<int64_t> pixel_channels;                     // per value: see ChooseHostLayout
  std::vector<planner::ConcatPlacement> concat_placement;  // per node (planner/lifetimes.h)
};

// Before planning. channels_last: the values kept channels-last (none when false). A value's
// pixel_channels are the channels per pixel of the channels-last Concat output it is written
// inside (ops::CanWriteChannelsLastInterleaved), else 0.
HostLayout ChooseHostLayout(const ir::Graph& g, bool channels_last, bool aliasing);

// After planning: a Concat the plan could not make in place after all copies its (then dense)
// inputs.
void SettleConcats(const ir::Graph& g, const planner::GraphPlan& plan, HostLayout* layout);

}  // namespace kiln::compiler
