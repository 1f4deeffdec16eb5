// Dead-node elimination.
// Needs: a verified graph. Guarantees: every node none of whose outputs is read (by a node, by a
// subgraph capture through implicit_inputs, or as a graph output) is removed, unless it has
// subgraphs or is Multinomial / Bernoulli (the rule fold-constants always used; other random
// draws and Dropout go when unread). Subgraphs are swept first; a capture a subgraph no longer
// reads is dropped from it (and from its node's implicit_inputs), so what only it kept alive in
// the enclosing graph goes too. Constants nothing reads lose their bytes (the value stays, so
// value indices do not move). Value types are untouched.
#pragma once

#include <vector>

#include "ir/graph.h"
#include "support/status.h"

namespace kiln::passes {

// The sweep alone, on one graph (no recursion): nodes with keep = 0 go, and so does every node
// that is dead once they are gone. Producers are renumbered. Returns how many nodes went.
int SweepDeadNodes(ir::Graph& g, std::vector<char> keep);

// The pass: true iff it changed the model.
Expected<bool> EliminateDeadNodes(ir::Model& model);

}  // namespace kiln::passes
