// Helpers shared by the verbs: option parsing for --shape / --input, random inputs, printing.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "ir/graph.h"
#include "passes/infer_shapes.h"
#include "support/status.h"

namespace kiln::cli {

constexpr const char* kKilnVersion = "0.1.0";

// Parses "NAME=D0,D1,..." options (split at the last '=' so names may contain '=').
Expected<passes::ShapeOverrides> ParseShapes(const std::vector<std::string>& specs);
// Parses "NAME=FILE" options (split at the first '=').
Expected<std::map<std::string, std::string>> ParseInputs(const std::vector<std::string>& specs);
// Deterministic pseudo-random data for an input of the given type (dims must be known).
Tensor RandomTensor(DType dtype, const Dims& dims, uint64_t seed);
// Prints "kiln: <message>" to stderr and returns 1.
int Fail(const Status& s);

}  // namespace kiln::cli
