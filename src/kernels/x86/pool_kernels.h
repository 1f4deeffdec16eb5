// Vectorized 2-D float MaxPool (dilations too) / AveragePool (no dilation), no Indices output, by
// rows, then columns: each input row's window maxima (sums) once, then the maxima (sums) of KH of
// those, so about KW + KH taps per output instead of KW x KH. NCHW planes go over a padded copy of
// each, so that every tap is read without bounds checks. A maximum is the reference's bit for bit
// (the first of equal taps in (kh, kw) order wins, NaN taps are skipped); a maximum whose result is
// -inf (every tap -inf or NaN) is left to the caller's reference loop, which tells the two apart.
// A sum adds each row's taps, then the rows (the reference adds tap by tap: the last bits may
// differ).
#pragma once

#include <cstdint>

#include "kernels/x86/cpu_isa.h"

namespace kiln::ops {

struct Pool2DShape {
  int64_t planes, H, W, OH, OW, KH, KW;
  int64_t sh, sw, ph, pw;  // strides, leading pads
  int64_t peh, pew;        // trailing pads (count_include_pad counts taps inside them)
  int64_t dh = 1, dw = 1;  // dilations: MaxPool2D only
};

// Returns the number of planes whose outputs hold a -inf maximum (0 for averages); those planes'
// outputs must be recomputed by the reference. `bad` (planes entries) marks them.
int64_t MaxPool2D(const Pool2DShape& s, const float* x, float* y, int threads, bool* bad);
void AveragePool2D(const Pool2DShape& s, const float* x, float* y, bool count_include_pad,
                   int threads);

// The same pools on channels-last images (ops/channels_last.h): x [N, H, W, C], y [N, OH, OW, C]
// with s.planes = N * C, in the same order with the same results (a window whose maximum is
// -inf gets the reference's answer here: NaN when all its taps are). Vectors run along the
// channels, split over `threads` by output rows. `isa` as in kernels/x86/cpu_isa.h.
enum class PoolFlavor { kMax, kAvgExcludePad, kAvgIncludePad };
void ChannelsLastPool2D(const Pool2DShape& s, int64_t N, PoolFlavor flavor, const float* x,
                        float* y, int threads, Isa isa = Isa::kAuto);

}  // namespace kiln::ops
