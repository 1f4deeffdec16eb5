// Post-training static quantization (kiln quantize): a float ONNX model and calibration samples
// in, the same model in the standard QDQ form out (QuantizeLinear / DequantizeLinear pairs, int8
// weights, int32 biases; quantize/qdq_writer.h says which tensors), which ONNX Runtime runs as
// well as kiln, whose fuse-qdq pass (passes/fuse_qdq.h) runs its Conv and MatMul on integers.
//
// Calibration runs the float model as written (no passes) on every sample, watching every
// tensor the quantizer will store; quantize/calibration.h gives the methods.
#pragma once

#include <cstddef>
#include <functional>
#include <string>
#include <vector>

#include "quantize/calibration.h"
#include "support/status.h"

namespace kiln::quantize {

struct QuantizeOptions {
  CalibrationMethod method = CalibrationMethod::kMinMax;
  double percentile = 99.999;            // kPercentile's p
  bool per_channel = true;               // weights per output channel (opset 13+)
  DType activation_type = DType::kInt8;  // or kUInt8
  int threads = 1;
  // Called before each sample is run: the stage ("calibrating", "histograms"), the samples
  // done and their count.
  std::function<void(const char*, size_t, size_t)> progress;
};

struct QuantizeSummary {
  int activations = 0, weights = 0, per_channel_weights = 0, biases = 0, constants = 0;
  int samples = 0;
  std::vector<std::string> notes;  // what was not done as asked, and why
};

// The quantized model's ONNX bytes. `model_path` is an .onnx file (its external data beside it
// is read and written inline).
Expected<std::string> QuantizeModel(const std::string& model_path,
                                    const std::vector<Sample>& samples,
                                    const QuantizeOptions& options, QuantizeSummary* summary);

// How far one output of a model lies from the reference model's, over all samples.
struct OutputError {
  std::string name;
  double max_abs = 0;  // the largest |model - reference|
  double rel_l2 = 0;   // ||model - reference|| / ||reference||
};

// A model as the comparison runs it: `host_passes`, as the executor runs it by default (a QDQ
// model's Conv and MatMul on fuse-qdq's integer kernels); otherwise as written (every QDQ pair in
// float).
struct ModelRun {
  std::string path;
  bool host_passes = true;
};

// Runs `run` and every reference once per sample and gives, per reference, how far run's float
// outputs lie from that reference's.
Expected<std::vector<std::vector<OutputError>>> CompareOutputs(
    const ModelRun& run, const std::vector<ModelRun>& references,
    const std::vector<Sample>& samples, int threads);

}  // namespace kiln::quantize
