#include "ops/op_traits.h"

#include <map>
#include <utility>
#include <vector>

#include "ops/unary_ops.h"

namespace kiln::ops {
namespace {

using Key = std::pair<std::string, std::string>;

const std::map<Key, unsigned>& Table() {
  constexpr unsigned U = kUnaryElementwise, W = kWritesWholeOutputs, C = kCudaUnary;
  constexpr unsigned B = kBinaryElementwise, V = kVariadicElementwise, R = kRowwise;
  constexpr unsigned D = kReadsDimsOnly, VW = kView, S = kTakesStrings, M = kMovesElements;
  static const std::map<Key, unsigned> kTable = {
      // The unary ops that are a formula get theirs from ops/unary_ops.h (below); the others:
      {{"", "Clip"}, U | W},
      {{"", "Abs"}, U | C},
      {{"", "Neg"}, U | C},
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
      // Other element-wise maps: rows stay independent.
      {{"", "Mean"}, R},
      {{"", "Pow"}, R},
      {{"", "Mod"}, R},
      {{"", "And"}, R},
      {{"", "Or"}, R},
      {{"", "Xor"}, R},
      {{"", "Not"}, R},
      {{"", "BitShift"}, R},
      {{"", "BitwiseAnd"}, R},
      {{"", "BitwiseOr"}, R},
      {{"", "BitwiseXor"}, R},
      {{"", "BitwiseNot"}, R},
      {{"", "Equal"}, R | S},
      {{"", "Greater"}, R},
      {{"", "GreaterOrEqual"}, R},
      {{"", "Less"}, R},
      {{"", "LessOrEqual"}, R},
      {{"", "IsInf"}, R},
      {{"", "IsNaN"}, R},
      {{"", "Where"}, R | M},
      {{"", "Cast"}, R | S},
      {{"", "CastLike"}, R | S},
      {{"", "Dropout"}, R},
      {{"", "Identity"}, R | VW | S},
      {{"", "QuantizeLinear"}, R | W},
      {{"", "DequantizeLinear"}, R | W},
      {{"", "DynamicQuantizeLinear"}, W},
      // The dims of a tensor.
      {{"", "Shape"}, D | S},
      {{"", "Size"}, D | S},
      // Shape ops (a change of axis 0 shows in the shapes).
      {{"", "Reshape"}, R | VW | S},
      {{"", "Flatten"}, R | VW | S},
      {{"", "Squeeze"}, R | VW | S},
      {{"", "Unsqueeze"}, R | VW | S},
      {{"", "Transpose"}, R | W | M},
      {{"", "Concat"}, R | W | M},
      {{"", "Split"}, R | M},
      {{"", "Slice"}, R | M},
      {{"", "Pad"}, R},
      {{"", "Tile"}, R | M},
      {{"", "Expand"}, R | M},
      {{"", "DepthToSpace"}, R | M},
      {{"", "SpaceToDepth"}, R | M},
      {{"", "Resize"}, R},
      {{"", "Upsample"}, R},
      {{"", "OneHot"}, R},
      {{"com.kiln", "ChannelShuffle"}, R},
      // Rows through GEMMs, images through convolutions, pools and per-image normalizations.
      {{"", "MatMul"}, R | W},
      {{"", "Gemm"}, R | W},
      {{"", "MatMulInteger"}, R | W},
      {{"", "QLinearMatMul"}, R | W},
      {{"", "Conv"}, R | W},
      {{"com.microsoft", "FusedConv"}, R | W},
      {{"com.kiln", "ConvGlobalPool"}, R | W},
      {{"", "ConvTranspose"}, R},
      {{"", "ConvInteger"}, R | W},
      {{"", "QLinearConv"}, R | W},
      {{"com.kiln", "QLinearMatMul"}, R | W},
      {{"com.kiln", "QLinearConv"}, R | W},
      {{"com.kiln", "QLinearGlobalAveragePool"}, R | W},
      {{"com.kiln", "QLinearAdd"}, R | W},
      {{"", "MaxPool"}, R | W},
      {{"", "AveragePool"}, R | W},
      {{"", "LpPool"}, R},
      {{"", "GlobalAveragePool"}, R | W},
      {{"", "GlobalMaxPool"}, R},
      {{"", "GlobalLpPool"}, R},
      {{"", "GridSample"}, R},
      {{"", "InstanceNormalization"}, R},
      {{"", "GroupNormalization"}, R},
      {{"", "LRN"}, R},
      // Reductions and selections (over axis 0 they lose the batch, which the shapes show).
      {{"", "ReduceMax"}, R},
      {{"", "ReduceMin"}, R},
      {{"", "ReduceMean"}, R},
      {{"", "ReduceSum"}, R},
      {{"", "ReduceProd"}, R},
      {{"", "ReduceL1"}, R},
      {{"", "ReduceL2"}, R},
      {{"", "ReduceLogSum"}, R},
      {{"", "ReduceLogSumExp"}, R},
      {{"", "ReduceSumSquare"}, R},
      {{"", "ArgMax"}, R},
      {{"", "ArgMin"}, R},
      {{"", "TopK"}, R},
      // Selections of elements (strings through stand-ins, like Where and the shape ops above).
      {{"", "Gather"}, M},
      {{"", "GatherElements"}, M},
      {{"", "GatherND"}, M},
      {{"", "Compress"}, M},
      {{"", "ScatterElements"}, M},
      {{"", "ScatterND"}, M},
      {{"", "ReverseSequence"}, M},
      {{"ai.onnx.ml", "ArrayFeatureExtractor"}, M},
      // Text: ops on string tensors (ops/text.cc, ops/misc_ml.cc).
      {{"", "Constant"}, S},
      {{"", "StringNormalizer"}, S},
      {{"", "StringConcat"}, R | S},
      {{"", "StringSplit"}, S},
      {{"", "RegexFullMatch"}, R | S},
      {{"", "TfIdfVectorizer"}, S},
      {{"ai.onnx.ml", "LabelEncoder"}, R | S},
      // Other kernels that write their outputs whole (a wrong entry shows in the poison
      // conformance runs: unwritten bytes keep the poison).
      {{"", "Softmax"}, W},
      {{"", "LayerNormalization"}, W},
      {{"", "RMSNormalization"}, W},
      // Every step's rows, or zeros past a row's sequence length (ops/recurrent_kernels.cc).
      {{"", "RNN"}, W},
      {{"", "GRU"}, W},
      {{"", "LSTM"}, W},
  };
  static const std::map<Key, unsigned>* table = [] {
    auto* t = new std::map<Key, unsigned>(kTable);
    unary::ForEachUnaryFormulaOp([&]<class Op>() {
      (*t)[{"", Op::kName}] = Op::kTraits;
      if constexpr (unary::HasOtherDomain<Op>) (*t)[{Op::kOtherDomain, Op::kName}] = Op::kTraits;
    });
    return t;
  }();
  return *table;
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
