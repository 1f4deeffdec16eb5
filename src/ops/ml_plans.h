// The ai.onnx.ml ops whose attributes need checking, read and checked once from the node: the
// plans that shape inference and the host kernels (ops/misc_ml.cc) and the C emitter
// (codegen/c/emit_misc.cc) all read.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "ir/graph.h"
#include "ir/tensor.h"

namespace kiln::ops {

// The post_transform both ops apply to each row of outputs, as TreeEnsemble's integer attribute
// numbers it.
enum MlPostTransform : int64_t {
  kPostNone = 0,
  kPostSoftmax = 1,
  kPostLogistic = 2,
  kPostSoftmaxZero = 3,
  kPostProbit = 4
};

// LinearRegressor: Y[n, t] = post(intercepts[t] + sum_f coefficients[t * F + f] * X[n, f]).
struct LinearRegressorPlan {
  int64_t targets = 1, rows = 0, features = 0;  // X is [rows, features] (or [features]: one row)
  std::vector<float> coefficients;              // targets x features
  std::vector<float> intercepts;                // targets (zeros where the node has none)
  int64_t post = kPostNone;
};

// Reads and checks the attributes against X's dims; "" or why they are malformed.
std::string MakeLinearRegressorPlan(const ir::Node& n, const Dims& x, LinearRegressorPlan* p);

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
