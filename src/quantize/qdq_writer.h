// Internal to quantize/: which tensors of an ONNX graph the quantizer stores in int8, and the
// rewrite of the ModelProto into the QDQ form ONNX Runtime's quantize_static writes.
//
// Chosen on the main graph (subgraphs stay float): the inputs and outputs of the ops that have
// integer kernels (Conv, ConvTranspose, MatMul, Gemm, Add, Mul, Concat, the pools, Relu, Clip,
// LeakyRelu, Sigmoid, Tanh) and of the data-movement ops between them (Reshape, Flatten,
// Transpose, Squeeze, Unsqueeze). Weights: int8, symmetric ([-127, 127], zero point 0), per
// output channel where asked and the opset allows (13+). Conv and Gemm biases, and the 1-D bias
// an Add puts on a MatMul's result (a dense layer: that result then stays float, as inside a
// Gemm): int32 at input scale x weight scale. Other float constants those ops read (an Add's bias,
// a Mul's factor): per tensor, as an activation. A Conv / MatMul / Gemm / Add result read only by a
// Relu is not quantized itself: the Relu's output is, with its zero point at the type's lowest
// value, so that fuse-qdq (passes/fuse_qdq.h) folds the Relu into the integer op.
//
// Activations: per tensor, asymmetric over [min(lo, 0), max(hi, 0)] (so zero is exact), with
// ONNX Runtime's arithmetic: scale = (hi - lo) / (qmax - qmin), zero point =
// round(qmin - lo / scale).
#pragma once

#include <onnx/onnx_pb.h>

#include <map>
#include <string>
#include <vector>

#include "ir/graph.h"
#include "quantize/calibration.h"

namespace kiln::quantize {

struct QdqChoice {
  // Float values computed at run time (graph inputs and node outputs), to calibrate; those that
  // turn out float32 get a QuantizeLinear / DequantizeLinear pair.
  std::vector<std::string> activations;
  struct Weight {
    std::string name;
    int axis = -1;  // the output-channel axis; -1: per tensor
  };
  std::vector<Weight> weights;
  std::vector<std::string> constants;  // other float constants, quantized as activations
  struct Bias {
    std::string name, input, weight;  // the bias, and the data input and weight of its node
  };
  std::vector<Bias> biases;
};

// The tensors of mp's main graph to quantize; `constants` holds the initializers' values.
QdqChoice ChooseTensors(const onnx::GraphProto& g, const std::map<std::string, Tensor>& constants,
                        bool per_channel);

struct QdqSettings {
  DType activation_type = DType::kInt8;  // or kUInt8
  std::map<std::string, Range> ranges;   // the calibrated activations (float32 ones only)
};

struct QdqCounts {
  int activations = 0, weights = 0, per_channel_weights = 0, biases = 0, constants = 0;
};

// Rewrites mp into the QDQ form; fails where the default opset is under 10 (no
// QuantizeLinear). Activations absent from settings.ranges stay float.
Expected<QdqCounts> RewriteToQdq(onnx::ModelProto& mp, const QdqChoice& choice,
                                 const std::map<std::string, Tensor>& constants,
                                 const QdqSettings& settings);

// The opset of the default ONNX domain mp imports (0: none).
int64_t DefaultOpset(const onnx::ModelProto& mp);

}  // namespace kiln::quantize
