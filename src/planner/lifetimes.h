// From a scheduled graph to the buffers the memory planner places.
// Needs: a graph whose shapes are inferred. Guarantees: one Buffer per intermediate tensor of
// known size (not constants; graph inputs and outputs only with include_io, since they normally
// live in caller memory), with its lifetime in schedule positions. With aliasing enabled, outputs
// that share bytes with an input by design say so through alias_of:
//   views     Reshape, Flatten, Squeeze, Unsqueeze, Identity (same bytes); Split along an axis
//             whose outer dims are all 1 and Slice with constant bounds and step 1 that keeps a
//             contiguous run (each output a contiguous slice of the input);
//   in place  element-wise ops and activations whose output matches an input's dtype and dims
//             when every byte sharing that input's storage dies at this node; likewise a
//             com.microsoft FusedConv's Y and its residual Z where the caller says its kernel
//             takes that (LifetimeOptions::fused_conv_in_place);
//   Concat    inputs produced directly into their slice of the output when the slices are
//             contiguous (outer dims all 1) and each input is a plain intermediate used once;
//             or, where the caller says so (ConcatPlacement::kInterleaved), channel slices of a
//             [1, C, H, W] output laid out channels-last, each input starting at its first
//             channel and spanning (H W - 1) C + its own channels elements (its producer writes
//             with a pixel stride of C).
// Nodes whose outputs are all views of their inputs need no kernel call (`is_noop`).
#pragma once

#include <vector>

#include "ir/graph.h"
#include "planner/memory_planner.h"

namespace kiln::planner {

// How a Concat's inputs are placed (LifetimeOptions::concat_placement).
enum class ConcatPlacement : char {
  kSlices,  // each input in its contiguous slice of the output, where the slices are contiguous
  kCopies,  // bytes of their own: the kernel copies (the host's other channels-last Concats)
  kInterleaved,  // channels-last channel slices (see above); the caller checked the producers
};

struct LifetimeOptions {
  bool aliasing = true;
  // Also plan graph inputs (live from position 0) and outputs (live to the end), for a target
  // whose caller hands all memory over as one arena. The host executor keeps them outside.
  bool include_io = false;
  // Per node (graph index; empty or a node past its end: kSlices); only Concats read it.
  std::vector<ConcatPlacement> concat_placement;
  // FusedConv's Y may take the bytes of its residual input Z (the host's kernel adds Z as it
  // writes Y; a conv-then-add loop, as the C backend emits, would read Z overwritten).
  bool fused_conv_in_place = false;
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
