#include "compiler/host_layout.h"

#include "ops/channels_last.h"

namespace kiln::compiler {
namespace {

// A channels-last Concat's inputs interleave: each producer writes its channels of every pixel
// into the output (kInterleaved) where all of them can (a Conv: CanWriteChannelsLastInterleaved)
// and the Concat is their only reader; otherwise they get bytes of their own, copied by the
// kernel (kCopies), which beats placing them in NCHW slices it would copy out first.
void PlaceConcats(const ir::Graph& g, bool aliasing, HostLayout* layout) {
  layout->concat_placement.assign(g.nodes.size(), planner::ConcatPlacement::kSlices);
  layout->pixel_channels.assign(g.values.size(), 0);
  std::vector<int> producer(g.values.size(), -1), readers(g.values.size(), 0);
  for (size_t n = 0; n < g.nodes.size(); ++n) {
    for (int v : g.nodes[n].outputs)
      if (v >= 0) producer[v] = static_cast<int>(n);
    for (int v : g.nodes[n].inputs)
      if (v >= 0) ++readers[v];
    for (int v : g.nodes[n].implicit_inputs)
      if (v >= 0) ++readers[v];
  }
  for (int v : g.outputs) ++readers[v];
  for (size_t n = 0; n < g.nodes.size(); ++n) {
    const ir::Node& node = g.nodes[n];
    if (node.op_type != "Concat" || node.outputs.empty() || node.outputs[0] < 0 ||
        !layout->channels_last[node.outputs[0]])
      continue;
    layout->concat_placement[n] = planner::ConcatPlacement::kCopies;
    bool all = aliasing && !node.inputs.empty();
    for (int v : node.inputs)
      all = all && v >= 0 && readers[v] == 1 && producer[v] >= 0 && layout->channels_last[v] &&
            g.nodes[producer[v]].outputs[0] == v &&
            ops::CanWriteChannelsLastInterleaved(g.nodes[producer[v]], g);
    if (!all) continue;
    layout->concat_placement[n] = planner::ConcatPlacement::kInterleaved;
    for (int v : node.inputs) layout->pixel_channels[v] = g.values[node.outputs[0]].type.dims[1];
  }
}

// The values kept channels-last between the kernels that can take them (ops/channels_last.h):
// a node's output 0 whose producer and every reader can, that no graph output or subgraph
// capture reads. Layouts never change the bytes a value takes, so the plan holds.
std::vector<char> ChannelsLastValues(const ir::Graph& g) {
  std::vector<ops::ChannelsLastUse> uses;  // per node, asked once
  for (const auto& node : g.nodes) uses.push_back(ops::ChannelsLastUseOf(node, g));
  std::vector<char> cl(g.values.size(), 0);
  for (size_t n = 0; n < g.nodes.size(); ++n) {
    const ir::Node& node = g.nodes[n];
    if (!node.outputs.empty() && node.outputs[0] >= 0 && uses[n].output) cl[node.outputs[0]] = 1;
  }
  auto clear = [&](int v) {
    if (v >= 0) cl[v] = 0;
  };
  for (int v : g.outputs) clear(v);
  for (size_t n = 0; n < g.nodes.size(); ++n) {
    const ir::Node& node = g.nodes[n];
    for (int v : node.implicit_inputs) clear(v);
    for (size_t i = 0; i < node.inputs.size(); ++i)
      if (node.inputs[i] >= 0 && cl[node.inputs[i]] && !uses[n].reads[i]) cl[node.inputs[i]] = 0;
  }
  // A node's linked inputs and its output share one layout: clear all of them if one is not
  // channels-last, until nothing changes (a clear can reach other such nodes).
  for (bool changed = true; changed;) {
    changed = false;
    for (size_t n = 0; n < g.nodes.size(); ++n) {
      const ir::Node& node = g.nodes[n];
      if (node.outputs.empty() || node.outputs[0] < 0) continue;
      std::vector<int> linked;
      for (size_t i = 0; i < node.inputs.size(); ++i)
        if (uses[n].linked[i]) linked.push_back(node.inputs[i]);
      if (linked.empty()) continue;
      bool all = cl[node.outputs[0]] != 0;
      for (int v : linked) all = all && v >= 0 && cl[v];
      if (all) continue;
      for (int v : linked) {
        if (v >= 0 && cl[v]) changed = true;
        clear(v);
      }
      if (cl[node.outputs[0]]) changed = true;
      clear(node.outputs[0]);
    }
  }
  return cl;
}

}  // namespace

HostLayout ChooseHostLayout(const ir::Graph& g, bool channels_last, bool aliasing) {
  HostLayout layout;
  layout.channels_last =
      channels_last ? ChannelsLastValues(g) : std::vector<char>(g.values.size(), 0);
  PlaceConcats(g, aliasing, &layout);
  return layout;
}

void SettleConcats(const ir::Graph& g, const planner::GraphPlan& plan, HostLayout* layout) {
  for (size_t p = 0; p < plan.schedule.order.size(); ++p) {
    const int n = plan.schedule.order[p];
    if (layout->concat_placement[n] != planner::ConcatPlacement::kInterleaved ||
        plan.buffers.is_noop[p])
      continue;
    layout->concat_placement[n] = planner::ConcatPlacement::kCopies;
    for (int v : g.nodes[n].inputs) layout->pixel_channels[v] = 0;
  }
}

}  // namespace kiln::compiler
