// TreeEnsemble (ai.onnx.ml opset 5) read and checked once from the node's attributes: the plan the
// host kernel (ops/misc_ml.cc) and the C emitter (codegen/c/emit_misc.cc) both read.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "ir/graph.h"

namespace kiln::ops {

struct TreeEnsemblePlan {
  std::vector<double> splits, weights;
  std::vector<int64_t> features, modes, true_ids, false_ids, true_leaf, false_leaf, targets, roots;
  std::vector<int64_t> missing_true;         // empty, or per node
  std::vector<std::vector<double>> members;  // per node (MEMBER mode only)
  int64_t n_targets = 0, aggregate = 1, post = 0;
};

// Reads and checks the attributes; "" or why they are malformed.
std::string MakeTreeEnsemblePlan(const ir::Node& n, TreeEnsemblePlan* e);

}  // namespace kiln::ops
