// Separable interpolation in float32 (Resize / Upsample in linear, cubic and antialiased modes on
// the host): the taps ops/resize.cc plans per axis, applied one axis at a time, the cheapest pass
// first (the ONNX reference goes last axis first; the order changes only the rounding). An axis
// with elements after it (a row of a plane, or channels in a channels-last tensor) combines whole
// contiguous rows, vectorized; the last axis gathers its taps per element. Threads split the rows
// of each pass. The reference in double stays in resize.cc for the other types; the tests check
// this one against it.
#pragma once

#include <cstdint>
#include <vector>

namespace kiln::ops {

// One axis: output position i reads the taps [start[i], start[i + 1]) of (idx, w), or, when
// extrapolate[i], is the extrapolation value (tf_crop_and_resize outside the roi).
struct ResizeAxisF32 {
  std::vector<int64_t> start = {0};
  std::vector<int64_t> idx;
  std::vector<float> w;
  std::vector<uint8_t> extrapolate;
  // Where every output position has the same 1 to 4 taps and none extrapolates (Finish() says):
  // that count, and tap t of output i at idx32[t * size() + i], w_by_tap[t * size() + i], for
  // the last axis's vector gathers.
  int uniform_taps = 0;
  std::vector<int32_t> idx32;
  std::vector<float> w_by_tap;
  int64_t size() const { return static_cast<int64_t>(start.size()) - 1; }
  // Fills uniform_taps, idx32 and w_by_tap once the table is complete.
  void Finish();
};

// y (dims `in` with each resized axis at its table's size) = x resized along every axis that has
// a table (null: unchanged).
void ResizeF32(const float* x, const std::vector<int64_t>& in,
               const std::vector<const ResizeAxisF32*>& axes, float extrapolation, float* y,
               int threads);

}  // namespace kiln::ops
