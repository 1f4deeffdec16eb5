#include "ops/op_traits.h"

#include <map>
#include <utility>
#include <vector>

namespace kiln::ops {
namespace {

using Key = std::pair<std::string, std::string>;

const std::map<Key, unsigned>& Table() {
  constexpr unsigned U = kUnaryElementwise, W = kWritesWholeOutputs, C = kCudaUnary;
  constexpr unsigned B = kBinaryElementwise, V = kVariadicElementwise;
  static const std::map<Key, unsigned> kTable = {
      // Activations and unary math (ops/activation.cc, ops/elementwise.cc).
      {{"", "Relu"}, U | W | C},
      {{"", "LeakyRelu"}, U | W | C},
      {{"", "Clip"}, U | W},
      {{"", "Sigmoid"}, U | W | C},
      {{"", "Tanh"}, U | C},
      {{"", "Elu"}, U | C},
      {{"", "Selu"}, U | C},
      {{"", "Celu"}, U | C},
      {{"", "HardSigmoid"}, U | C},
      {{"", "HardSwish"}, U | C},
      {{"", "Softplus"}, U | C},
      {{"", "Softsign"}, U | C},
      {{"", "Mish"}, U | C},
      {{"", "Swish"}, U | C},
      {{"", "Gelu"}, U | C},
      {{"com.microsoft", "Gelu"}, U},
      {{"", "ThresholdedRelu"}, U},
      {{"", "Abs"}, U | C},
      {{"", "Neg"}, U | C},
      {{"", "Exp"}, U | C},
      {{"", "Log"}, U | C},
      {{"", "Sqrt"}, U | C},
      {{"", "Reciprocal"}, U | C},
      {{"", "Floor"}, U | C},
      {{"", "Ceil"}, U | C},
      {{"", "Round"}, U},
      {{"", "Sin"}, U | C},
      {{"", "Cos"}, U | C},
      {{"", "Tan"}, U | C},
      {{"", "Atan"}, U | C},
      {{"", "Asin"}, U},
      {{"", "Acos"}, U},
      {{"", "Sinh"}, U},
      {{"", "Cosh"}, U},
      {{"", "Asinh"}, U},
      {{"", "Acosh"}, U},
      {{"", "Atanh"}, U},
      {{"", "Erf"}, U | C},
      {{"", "Sign"}, U},
      {{"", "Shrink"}, U},
      // Binary and variadic element-wise (ops/elementwise.cc, ops/elementwise_variadic.cc).
      {{"", "Add"}, B | W},
      {{"", "Sub"}, B},
      {{"", "Mul"}, B | W},
      {{"", "Div"}, B},
      {{"", "PRelu"}, B | W},
      {{"", "Sum"}, V},
      {{"", "Max"}, V},
      {{"", "Min"}, V},
      // Kernels that write their outputs whole (a wrong entry shows in the poison conformance
      // runs: unwritten bytes keep the poison).
      {{"", "Conv"}, W},
      {{"com.microsoft", "FusedConv"}, W},
      {{"", "MaxPool"}, W},
      {{"", "AveragePool"}, W},
      {{"", "GlobalAveragePool"}, W},
      {{"", "MatMul"}, W},
      {{"", "Gemm"}, W},
      {{"", "Concat"}, W},
      {{"", "Softmax"}, W},
      {{"", "LayerNormalization"}, W},
      {{"", "QuantizeLinear"}, W},
      {{"", "DequantizeLinear"}, W},
      {{"", "DynamicQuantizeLinear"}, W},
      {{"", "MatMulInteger"}, W},
      {{"", "QLinearMatMul"}, W},
      {{"", "ConvInteger"}, W},
      {{"", "QLinearConv"}, W},
      {{"", "Transpose"}, W},
  };
  return kTable;
}

}  // namespace

unsigned OpTraits(const std::string& domain, const std::string& op_type) {
  const auto& t = Table();
  auto it = t.find({domain == "ai.onnx" ? "" : domain, op_type});
  return it == t.end() ? 0u : it->second;
}

std::vector<std::string> OpsWithTrait(OpTrait trait) {
  std::vector<std::string> ops;
  for (const auto& [key, traits] : Table())
    if (traits & trait)
      ops.push_back(key.first.empty() ? key.second : key.first + ":" + key.second);
  return ops;
}

}  // namespace kiln::ops
