// A zero constant Pad of only the spatial axes whose sole reader is a Conv (its X) or an
// AveragePool that counts the padding (count_include_pad = 1), as temporal convolutions and
// exports of 'same' padding write it, becomes the reader's own `pads`: the padded copy is never
// made and the convolution reads its border as zeros, which is the same arithmetic.
// Needs: a verified model whose shapes are inferred. Guarantees: only non-negative pads from
// constants, mode "constant" and value 0 (absent counts as 0), the reader's auto_pad NOTSET;
// the padded value must not be a graph output. Exact. Subgraphs too. Run by the compile step
// after folding (compiler/compile.cc) for every target; not an action of the gym's.
#pragma once

#include "ir/graph.h"
#include "support/status.h"

namespace kiln::passes {

// True iff it changed the model.
Expected<bool> FusePadConv(ir::Model& model);

}  // namespace kiln::passes
