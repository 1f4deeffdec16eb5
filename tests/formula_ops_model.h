// One model that runs every op of ops/unary_ops.h side by side, so a backend compiles all of them
// once and is checked against the host: each op on x [rows, cols] brought into its domain, with
// its default attributes and, where it has attributes, once more with other values.
#pragma once

#include <map>
#include <string>
#include <utility>
#include <vector>

#include "ops/unary_ops.h"
#include "test_models.h"

namespace kiln::testing {

// Non-default attribute values per op (a second node each).
inline const std::map<std::string, std::vector<std::pair<std::string, std::string>>>&
FormulaOpAttributes() {
  static const auto* m =
      new std::map<std::string, std::vector<std::pair<std::string, std::string>>>{
          {"LeakyRelu", {{"alpha", "0.3"}}},
          {"Elu", {{"alpha", "0.7"}}},
          {"Selu", {{"alpha", "1.2"}, {"gamma", "0.9"}}},
          {"Celu", {{"alpha", "0.6"}}},
          {"HardSigmoid", {{"alpha", "0.3"}, {"beta", "0.4"}}},
          {"ThresholdedRelu", {{"alpha", "0.25"}}},
          {"Swish", {{"alpha", "1.7"}}},
          {"Gelu", {{"approximate", "tanh"}}},
      };
  return *m;
}

// The model: input "x" (float32, [rows, cols], values in [-1, 1)) and one output per op node,
// float32, or with `float64` float64 (the ops run on x cast to double). `only` (a trait, 0 for
// none) keeps the ops that have it.
inline onnx::ModelProto FormulaOpsModel(int64_t rows, int64_t cols, bool float64,
                                        unsigned only = 0) {
  onnx::ModelProto m = EmptyModel("formula_ops");
  m.mutable_opset_import(0)->set_version(20);
  auto* g = m.mutable_graph();
  *g->add_input() = FloatInfo("x", {rows, cols});
  AddFloatInitializer(g, "k_wide", {}, {8.0f});
  AddFloatInitializer(g, "k_unit", {}, {0.99f});
  AddFloatInitializer(g, "one", {}, {1.0f});
  // x scaled to [-8, 8), to |8x| + 1 for the ops defined from 1 up, to [-0.99, 0.99) for those
  // defined on (-1, 1).
  AddNamedNode(g, "Mul", {"x", "k_wide"}, "x_wide");
  AddNamedNode(g, "Mul", {"x", "k_unit"}, "x_unit");
  AddNamedNode(g, "Abs", {"x_wide"}, "x_abs");
  AddNamedNode(g, "Add", {"x_abs", "one"}, "x_pos");
  if (float64)
    for (const char* x : {"x_wide", "x_unit", "x_pos"})
      SetAttr(AddNamedNode(g, "Cast", {x}, std::string(x) + "_f64"), "to",
              int64_t{onnx::TensorProto::DOUBLE});
  auto add_op = [&](const std::string& op, const std::string& tag,
                    const std::vector<std::pair<std::string, std::string>>& attrs) {
    std::string in = op == "Log" || op == "Sqrt" || op == "Acosh"                   ? "x_pos"
                     : op == "Asin" || op == "Acos" || op == "Atanh" || op == "Tan" ? "x_unit"
                                                                                    : "x_wide";
    auto add = [&](const std::string& x, const std::string& y) {
      auto* n = AddNamedNode(g, op, {x}, y);
      for (const auto& [name, value] : attrs) {
        if (name == "approximate")
          SetAttr(n, name, value);
        else
          SetAttr(n, name, std::stof(value));
      }
    };
    std::string y = "y_" + op + tag;
    add(float64 ? in + "_f64" : in, y);
    auto out = FloatInfo(y, {rows, cols});
    if (float64)
      out.mutable_type()->mutable_tensor_type()->set_elem_type(onnx::TensorProto::DOUBLE);
    *g->add_output() = out;
  };
  ops::unary::ForEachUnaryFormulaOp([&]<class Op>() {
    if (only != 0 && (Op::kTraits & only) == 0) return;
    add_op(Op::kName, "", {});
    auto it = FormulaOpAttributes().find(Op::kName);
    if (it != FormulaOpAttributes().end()) add_op(Op::kName, "_attrs", it->second);
  });
  return m;
}

}  // namespace kiln::testing
