// From a scheduled graph to the buffers the memory planner places.
// Needs: a graph whose shapes are inferred. Guarantees: one Buffer per intermediate tensor of
// known size (not constants; graph inputs and outputs only with include_io, since they normally
// live in caller memory), with its lifetime in schedule positions. With aliasing enabled, outputs that share bytes with an
// input by design say so through alias_of:
//   views     Reshape, Flatten, Squeeze, Unsqueeze, Identity (same bytes); Split along an axis
//             whose outer dims are all 1 and Slice with constant bounds and step 1 that keeps a
//             contiguous run (each output a contiguous slice of the input);
//   in place  element-wise ops and activations whose output matches an input's dtype and dims
//             when every byte sharing that input's storage dies at this node;
//   Concat    inputs produced directly into their slice of the output when the slices are
//             contiguous (outer dims all 1) and each input is a plain intermediate used once.
// Nodes whose outputs are all views of their inputs need no kernel call (`is_noop`).
#pragma once

#include <vector>

#include "ir/graph.h"
#include "planner/memory_planner.h"

namespace kiln::planner {

struct LifetimeOptions {
  bool aliasing = true;
  // Also plan graph inputs (live from position 0) and outputs (live to the end), for a target
  // whose caller hands all memory over as one arena. The host executor keeps them outside.
  bool include_io = false;
  // Per node (graph index; empty: none): Concats whose inputs keep bytes of their own instead of
  // their slices of the output (the host's channels-last Concats interleave them).
  std::vector<char> concat_copies;
};

struct BufferSet {
  std::vector<Buffer> buffers;
  std::vector<int> buffer_of;  // per graph value: index into buffers, or -1
  std::vector<bool> is_noop;   // per schedule position
};

// `order` lists node indices in execution order.
BufferSet BuildBuffers(const ir::Graph& g, const std::vector<int>& order,
                       const LifetimeOptions& options = {});

// The node positions in `order` at which each value is last read (-1 when never read);
// graph outputs are read at order.size().
std::vector<int> LastUses(const ir::Graph& g, const std::vector<int>& order);

}  // namespace kiln::planner
