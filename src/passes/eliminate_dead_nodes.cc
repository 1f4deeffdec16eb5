#include "passes/eliminate_dead_nodes.h"

#include "passes/graph_edit.h"

namespace kiln::passes {
namespace {

// Drops the captures of sg that sg no longer reads; true when it dropped one.
bool PruneCaptures(ir::Graph& sg) {
  std::vector<int> reads = ReadCounts(sg);
  size_t before = sg.captures.size();
  std::erase_if(sg.captures, [&](const std::pair<int, int>& c) { return reads[c.first] == 0; });
  return sg.captures.size() != before;
}

bool EliminateGraph(ir::Graph& g) {
  bool changed = false;
  for (auto& n : g.nodes) {
    bool pruned = false;
    ForEachSubgraph(n, [&](ir::Graph& sg) {
      changed = EliminateGraph(sg) || changed;
      pruned = PruneCaptures(sg) || pruned;
    });
    if (!pruned) continue;
    // implicit_inputs is what the node's subgraphs capture, in attribute order (as imported).
    n.implicit_inputs.clear();
    ForEachSubgraph(n, [&](ir::Graph& sg) {
      for (auto [local, outer] : sg.captures) n.implicit_inputs.push_back(outer);
    });
    changed = true;
  }
  if (SweepDeadNodes(g, std::vector<char>(g.nodes.size(), 1)) > 0) changed = true;
  // Constants nobody reads any more (weights a fold replaced): release their bytes.
  std::vector<int> reads = ReadCounts(g);
  std::vector<char> referenced(g.values.size(), 0);
  for (int v : g.inputs) referenced[v] = 1;
  for (auto [local, outer] : g.captures) referenced[local] = 1;
  for (const auto& n : g.nodes)
    ForEachSubgraph(n, [&](const ir::Graph& sg) {
      for (auto [local, outer] : sg.captures) referenced[outer] = 1;
    });
  for (size_t v = 0; v < g.values.size(); ++v) {
    if (!g.values[v].constant || reads[v] > 0 || referenced[v]) continue;
    g.values[v].constant.reset();
    changed = true;
  }
  return changed;
}

}  // namespace

int SweepDeadNodes(ir::Graph& g, std::vector<char> keep) {
  MarkDeadNodes(g, keep);
  int removed = 0;
  for (char k : keep) removed += k ? 0 : 1;
  CompactNodes(g, keep);
  return removed;
}

Expected<bool> EliminateDeadNodes(ir::Model& model) {
  return VerifiedChange(*model.graph, EliminateGraph(*model.graph));
}

}  // namespace kiln::passes
