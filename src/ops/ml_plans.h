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
  int64_t targets = 1, rows = 0, features = 0;  // X is [rows, features...] or [features]
  std::vector<float> coefficients;              // targets x features
  std::vector<float> intercepts;                // targets (zeros where the node has none)
  int64_t post = kPostNone;
};

// Reads and checks the attributes against X's dims; "" or why they are malformed.
std::string MakeLinearRegressorPlan(const ir::Node& n, const Dims& x, LinearRegressorPlan* p);

// Scaler: Y = (X - offset) * scale per feature, a feature being an index of X's last dim.
struct ScalerPlan {
  int64_t features = 1, rows = 0;
  std::vector<float> offset, scale;  // empty (0 / 1), one value for all, or one per feature
  double Offset(int64_t f) const { return Entry(offset, f, 0.0); }
  double Scale(int64_t f) const { return Entry(scale, f, 1.0); }
  static double Entry(const std::vector<float>& v, int64_t f, double empty) {
    return v.empty() ? empty : v.size() == 1 ? v[0] : v[static_cast<size_t>(f)];
  }
};
std::string MakeScalerPlan(const ir::Node& n, const Dims& x, ScalerPlan* p);

// Normalizer: each row of X's last dim divided by its max, L1 or L2 norm (where that is not 0).
enum class MlNorm { kMax, kL1, kL2 };
struct NormalizerPlan {
  MlNorm norm = MlNorm::kMax;
  int64_t features = 1, rows = 0;
};
std::string MakeNormalizerPlan(const ir::Node& n, const Dims& x, NormalizerPlan* p);

// Imputer: entries of X equal to `replaced` (NaN: the NaNs) become the feature's value.
struct ImputerPlan {
  int64_t features = 1;
  std::vector<double> values;  // one for all, or one per feature
  double replaced = 0;
  double Value(int64_t f) const { return values.size() == 1 ? values[0] : values[f]; }
};
std::string MakeImputerPlan(const ir::Node& n, DType x, const Dims& dims, ImputerPlan* p);

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
