// What the quantization ops share (ops/quantize.cc, ops/quantize_integer.cc) and the C backend
// reads: the range of each quantized type and the ONNX reference's rounding.
#pragma once

#include "ir/tensor.h"

namespace kiln::ops {

// The representable range of an integer quantized type (int8 / uint8 / int16 / uint16 / int32).
void QuantRange(DType t, double* lo, double* hi);

// Round half to even, then saturate into [lo, hi]. NaN maps to 0 (before the zero point).
double RoundSaturate(double v, double lo, double hi);

// Zero point i of a per-tensor (one value) or per-axis zero-point tensor as int32; 0 without one.
int32_t ZeroPointAt(const Tensor* zp, int64_t i);

// The requantization multiplier a_scale[ai] * b_scale[bi] / y_scale, rounded as numpy does in
// the scale type (float16 scales round each step).
double RequantMultiplier(const Tensor& as, int64_t ai, const Tensor& bs, int64_t bi,
                         const Tensor& ys);

// The requantization multiplier of an average of `count` values: x_scale / (y_scale * count), in
// double (com.kiln QLinearGlobalAveragePool; its kernels requantize in fixed point).
inline double PoolRequantMultiplier(const Tensor& xs, const Tensor& ys, int64_t count) {
  return xs.GetDouble(0) / (ys.GetDouble(0) * static_cast<double>(count));
}

}  // namespace kiln::ops
