// Operator reordering: choose the topological order with the smallest peak of live bytes.
// Needs: a graph whose shapes are inferred. Guarantees: a valid execution order (every node
// after the producers of its inputs and of the values its subgraphs read). The cost of an order
// is the largest, over its steps, of the bytes live before the step plus the step's outputs.
// Exact for small graphs (a search over sets of scheduled nodes with memoization, up to a state
// budget); beyond that, a greedy that runs the ready node freeing the most bytes, kept only when
// it beats the file's own order.
#pragma once

#include <cstddef>
#include <vector>

#include "ir/graph.h"

namespace kiln::planner {

struct Schedule {
  std::vector<int> order;
  size_t peak_bytes = 0;     // of `order`
  size_t original_peak = 0;  // of the file's order
  bool exact = false;
};

Schedule ChooseSchedule(const ir::Graph& g);
// The peak of live bytes of a given order.
size_t PeakBytes(const ir::Graph& g, const std::vector<int>& order);

}  // namespace kiln::planner
