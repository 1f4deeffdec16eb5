// RNN, GRU and LSTM as ONNX defines them: the cell, its activations, and the plan of a node
// (sizes, directions, layout, options), validated once. Shape inference and the host kernels
// (ops/recurrent.cc, ops/recurrent_kernels.h) and the C emitter
// (codegen/c/emit_sequence_models.cc) all read this one plan.
#pragma once

#include <cstdint>
#include <vector>

#include "ir/graph.h"
#include "ops/formula.h"
#include "support/status.h"

namespace kiln::ops {

enum class RnnCell { kRnn, kGru, kLstm };

inline int RnnGates(RnnCell c) { return c == RnnCell::kRnn ? 1 : c == RnnCell::kGru ? 3 : 4; }
inline int RnnActivations(RnnCell c) { return c == RnnCell::kRnn ? 1 : c == RnnCell::kGru ? 2 : 3; }

enum class RnnAct {
  kRelu,
  kTanh,
  kSigmoid,
  kAffine,
  kLeakyRelu,
  kThresholdedRelu,
  kScaledTanh,
  kHardSigmoid,
  kElu,
  kSoftsign,
  kSoftplus
};

// One of the activations the recurrent ops name, as a formula (ops/formula.h): the host computes
// it with V a number, the C emitter prints it with V = SymExpr.
struct RnnActivation {
  RnnAct kind = RnnAct::kTanh;
  float alpha = 0, beta = 0;

  template <class V>
  V operator()(V x) const {
    using namespace unary;  // NOLINT: the formula vocabulary
    switch (kind) {
      case RnnAct::kRelu:
        return Select(x > V(0), x, V(0));
      case RnnAct::kTanh:
        return Tanh(x);
      case RnnAct::kSigmoid:
        return Sigmoid(x);
      case RnnAct::kAffine:
        return V(alpha) * x + V(beta);
      case RnnAct::kLeakyRelu:
        return Select(x >= V(0), x, V(alpha) * x);
      case RnnAct::kThresholdedRelu:
        return Select(x > V(alpha), x, V(0));
      case RnnAct::kScaledTanh:
        return V(alpha) * Tanh(V(beta) * x);
      case RnnAct::kHardSigmoid:
        return Max(V(0), Min(V(1), V(alpha) * x + V(beta)));
      case RnnAct::kElu:
        return Select(x >= V(0), x, [&] { return V(alpha) * (Exp(x) - V(1)); });
      case RnnAct::kSoftsign:
        return x / (V(1) + Fabs(x));
      case RnnAct::kSoftplus:
        return Select(x > V(20), x, [&] { return Log1p(Exp(x)); });
    }
    return x;
  }
};

struct RecurrentPlan {
  RnnCell cell = RnnCell::kLstm;
  int64_t seq = 0, batch = 0, input = 0, hidden = 0;
  int num_dir = 1;
  bool reverse_only = false;  // direction "reverse" (bidirectional: direction 1 is reversed)
  int layout = 0;             // 0: [seq, batch, ...]; 1: [batch, seq, ...]
  float clip = 0;             // 0: none
  bool input_forget = false, linear_before_reset = false;
  std::vector<RnnActivation> acts;  // RnnActivations(cell) per direction, in f, g, h order

  int gates() const { return RnnGates(cell); }
  // The shapes of Y and of Y_h / Y_c (and of initial_h / initial_c).
  Dims YDims() const;
  Dims StateDims() const;
  // The offset, in units of hidden, of direction d's row b in a state tensor.
  int64_t StateRow(int d, int64_t b) const { return layout == 0 ? d * batch + b : b * num_dir + d; }
};

// The plan of a node of `cell` whose inputs have dims `dims` (nullptr where omitted; at most 8).
// Errors say what the spec forbids, without the node's name.
Status PlanRecurrent(const ir::Node& node, int64_t opset, RnnCell cell,
                     const std::vector<const Dims*>& dims, RecurrentPlan* plan);

}  // namespace kiln::ops
