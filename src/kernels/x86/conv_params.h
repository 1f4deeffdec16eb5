// The geometry and layouts of one 2-D float convolution, as every host convolution kernel takes
// them (oneDNN's, kiln's direct, few-output, grouped and Winograd kernels).
#pragma once

#include <cstdint>

namespace kiln::ops {

struct Conv2DParams {
  int64_t N, C, M, group;
  int64_t H, W, OH, OW, KH, KW;
  int64_t sh, sw, ph, pw, peh, pew, dh, dw;  // strides, leading and trailing pads, dilations
};

// Which of X, Z and Y are channels-last (ops/channels_last.h) instead of NCHW, and, for a
// channels-last Y that is a slice of a wider tensor (a Concat made in place), the channels per
// pixel of that tensor (0: Y is dense). Not with Z or Swish.
struct ConvLayouts {
  bool x = false, z = false, y = false;
  int64_t y_channels = 0;
  bool any() const { return x || z || y; }
};

}  // namespace kiln::ops
