// Constant folding and dead-node removal, for backends that emit code (no interpreter at hand).
// Needs: a verified graph whose shapes are inferred. Guarantees: every node whose inputs are all
// constants (or that only reads the dims of a known-shape value: Shape, Size) and whose results
// are at most `max_bytes` (or no larger than its inputs) is evaluated now and its outputs become
// constants; nodes whose outputs nobody reads are removed (SweepDeadNodes of
// eliminate_dead_nodes.h). Nondeterministic ops and nodes with subgraphs are left alone.
// Subgraphs are folded too (with their own constants only).
#pragma once

#include <cstddef>

#include "ir/graph.h"
#include "support/status.h"

namespace kiln::passes {

// True for nodes that may be evaluated at compile time when their inputs are known.
bool IsFoldable(const ir::Node& n);

// `changed` (when given) is set to whether a node was folded or removed.
Status FoldConstants(ir::Model& model, size_t max_bytes = 64 * 1024, bool* changed = nullptr);

}  // namespace kiln::passes
