// Calibration for post-training quantization (kiln quantize): the samples a float model runs on,
// and the range each tensor's values are quantized over.
//
// Ranges: min / max of every value seen (minmax); the values' (100 - p)th and pth percentiles
// (percentile, p = 99.999 by default), so that a few outliers do not stretch the scale over the
// bulk; or the clipping threshold whose int8 histogram is closest to the float one in
// Kullback-Leibler divergence (entropy, TensorRT's method: 2,048 bins of |x|, 128 levels for a
// signed tensor or 256 for one that is never negative). Percentile and entropy need a second pass
// over the samples, once the min and max are known.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "ir/graph.h"
#include "support/status.h"

namespace kiln::quantize {

enum class CalibrationMethod { kMinMax, kPercentile, kEntropy };

// "minmax", "percentile" or "entropy".
Expected<CalibrationMethod> ParseCalibrationMethod(const std::string& name);

// One sample: a tensor per runtime input of the model (ir::Graph::RuntimeInputs), in that order.
using Sample = std::vector<Tensor>;

// Samples from a folder or a bundle, checked against g's runtime inputs (element type, rank and
// the dims it fixes):
//  - DIR whose files are .npy or .pb tensors: one sample per file, for a model of one input;
//  - DIR of folders, one sample each, holding each input as NAME.npy, or as input_K.pb or
//    input_K.npy for the input at position K (the ONNX backend-test layout);
//  - FILE.bpte: the inputs of every test set of the bundle (kiln bundle).
// Files and folders are taken in name order.
Expected<std::vector<Sample>> LoadSamples(const std::string& path, const ir::Graph& g);

struct Range {
  float lo = 0, hi = 0;
};

// Gathers one tensor's values over all samples: ObserveMinMax for every sample, then, for the
// histogram methods, StartHistogram and ObserveHistogram for every sample again.
class RangeCollector {
 public:
  static constexpr int kBins = 2048;

  void ObserveMinMax(const float* x, int64_t n);
  // False when the method needs no second pass (minmax, or every value seen was one number).
  bool StartHistogram(CalibrationMethod method);
  void ObserveHistogram(const float* x, int64_t n);
  // The range to quantize over; `percentile` is p for kPercentile.
  Range Result(CalibrationMethod method, double percentile) const;

 private:
  Range PercentileRange(double percentile) const;
  Range EntropyRange() const;

  bool seen_ = false;
  float lo_ = 0, hi_ = 0;
  // kPercentile: the values over [lo_, hi_]; kEntropy: |x| over [0, max |x|].
  bool absolute_ = false;
  double hist_lo_ = 0, hist_width_ = 0;
  std::vector<double> hist_;
};

// The KL-optimal number of leading bins of `hist` to keep when they are quantized to `levels`
// levels (the values beyond are clipped into the last bin kept); at least `levels`.
int EntropyThresholdBins(const std::vector<double>& hist, int levels);

}  // namespace kiln::quantize
