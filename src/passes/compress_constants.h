// Constant compression (the GPU runtime seed's "constants as formulas").
// Needs: a verified graph. Guarantees: identical constants (same dtype, dims and bytes) share one
// storage afterwards; each constant gets an encoding a backend can emit instead of its bytes:
//   splat       every element equal: stored as one scalar
//   arithmetic  x[i] = start + i * step exactly (in the element type): stored as start and step
//   duplicate   the same bytes as an earlier constant: stored once
//   dense       anything else
// The report gives parameter bytes before and after. The graph's values are otherwise unchanged.
#pragma once

#include <cstddef>
#include <vector>

#include "ir/graph.h"

namespace kiln::passes {

struct ConstantEncoding {
  enum class Kind { kDense, kSplat, kArithmetic, kDuplicate };
  int value = -1;
  Kind kind = Kind::kDense;
  double start = 0, step = 0;  // splat: start; arithmetic: start and step
  int duplicate_of = -1;       // value index of the first copy
  size_t stored_bytes = 0;     // bytes this constant needs in its encoding
};

struct ConstantReport {
  size_t bytes_before = 0, bytes_after = 0;
  int splats = 0, progressions = 0, duplicates = 0;
  std::vector<ConstantEncoding> encodings;  // one per constant of the graph (main graph only)
};

ConstantReport CompressConstants(ir::Graph& g);

}  // namespace kiln::passes
