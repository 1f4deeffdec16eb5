// Einsum's plan, read once from the equation and the input dims: shape inference and the host
// kernels (ops/matmul.cc) and the C emitter (codegen/c/emit_matmul.cc) read it. Labels are the
// 52 letters, then one per "..." (broadcast) dim, aligned from the right across operands as numpy
// does. Each label gets one stride per operand: the sum of the strides of the operand's axes with
// that label (so a repeated label walks the diagonal), 0 when absent.
#pragma once

#include <string>
#include <vector>

#include "ir/tensor.h"

namespace kiln::ops {

struct EinsumPlan {
  int num_labels = 0;                        // letters (52) + ellipsis dims
  std::vector<int64_t> size;                 // per label
  std::vector<int> out_labels;               // output axes
  std::vector<int> sum_labels;               // contracted labels
  std::vector<std::vector<int64_t>> stride;  // [operand][label]
  Dims out_dims;
};

// The plan of `equation` over inputs of dims `inputs`; "" or what is malformed.
std::string PlanEinsum(const std::string& equation, const std::vector<const Dims*>& inputs,
                       EinsumPlan* plan);

}  // namespace kiln::ops
