// Shape inference over a whole model.
// Needs: a verified graph. Guarantees: every value whose dims follow from the input dims (after
// `overrides` fix symbolic input dims) gets a known TypeInfo; values that depend on data the
// compiler cannot see stay unknown. Small computations on constants (Shape -> Gather -> Concat
// chains feeding Reshape) are evaluated so that their consumers' shapes are known. A declared
// value_info that contradicts an inferred shape is an error naming the node.
#pragma once

#include <map>
#include <string>

#include "ir/graph.h"
#include "support/status.h"

namespace kiln::passes {

using ShapeOverrides = std::map<std::string, Dims>;

Status InferShapes(ir::Model& model, const ShapeOverrides& overrides = {});

// "x (float32[1,4]), y (int64[N])": values of `g` with their types, for messages that list what a
// model has ("none" when empty).
std::string ListValues(const ir::Graph& g, const std::vector<int>& values);

}  // namespace kiln::passes
