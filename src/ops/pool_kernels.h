// Vectorized 2-D float MaxPool / AveragePool (no dilation, no Indices output) over a padded copy
// of each plane, so that every window is read without bounds checks: the taps of an output row
// are one contiguous (stride 1) or strided loop over the output width each. The sums and maxima
// are taken in the reference's (kh, kw) tap order, so the outputs are the reference's: padding
// adds zeros to a sum and -inf to a maximum, both exact. A maximum whose result is -inf (every
// tap -inf or NaN) is left to the caller's reference loop, which tells the two apart.
#pragma once

#include <cstdint>

#include "ops/cpu_isa.h"

namespace kiln::ops {

struct Pool2DShape {
  int64_t planes, H, W, OH, OW, KH, KW;
  int64_t sh, sw, ph, pw;  // strides, leading pads
  int64_t peh, pew;        // trailing pads (count_include_pad counts taps inside them)
};

// Returns the number of planes whose outputs hold a -inf maximum (0 for averages); those planes'
// outputs must be recomputed by the reference. `bad` (planes entries) marks them.
int64_t MaxPool2D(const Pool2DShape& s, const float* x, float* y, int threads, bool* bad);
void AveragePool2D(const Pool2DShape& s, const float* x, float* y, bool count_include_pad,
                   int threads);

// The same pools on channels-last images (ops/channels_last.h): x [N, H, W, C], y [N, OH, OW, C]
// with s.planes = N * C, in the same tap order with the same results (a window whose maximum is
// -inf gets the reference's answer here: NaN when all its taps are). Vectors run along the
// channels, split over `threads` by output rows; twice as fast as oneDNN's jit pooling on
// SqueezeNet's and ResNet's 3x3 / 2 maps. `isa` as in ops/cpu_isa.h.
enum class PoolFlavor { kMax, kAvgExcludePad, kAvgIncludePad };
void ChannelsLastPool2D(const Pool2DShape& s, int64_t N, PoolFlavor flavor, const float* x,
                        float* y, int threads, Isa isa = Isa::kAuto);

}  // namespace kiln::ops
