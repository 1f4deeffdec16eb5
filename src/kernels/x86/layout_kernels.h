// The channels-last layout's own kernels (ops/channels_last.h says when the host keeps a tensor
// so): conversions of one image between NCHW and NHWC, and the element-wise nodes that read it.
#pragma once

#include <cstdint>
#include <vector>

#include "kernels/x86/cpu_isa.h"

namespace kiln::ops {

// The channels-last kernels of the element-wise nodes CanRunChannelsLast takes, x and y
// [N, C, H, W] channels-last (HW = H * W): y = x * s with s [1, C, 1, 1] (a squeeze-and-
// excitation scale: Mul), and y [N, C] = the mean of each channel (GlobalAveragePool, whose
// output is NCHW).
void ChannelsLastScale(const float* x, const float* s, float* y, int64_t N, int64_t C, int64_t HW);
void ChannelsLastGlobalAverage(const float* x, float* y, int64_t N, int64_t C, int64_t HW,
                               Isa isa = Isa::kAuto);
// y = the channel Concat (N = 1) of inputs k of channels[k] channels, all channels-last. Inputs
// the plan put in their NCHW places inside y (Concat in place) are read from a copy.
// The layout changes of one image: y[HW, C] = x[C, HW] and back, split over `threads`.
void ChannelsLastFromNchw(const float* x, float* y, int64_t C, int64_t HW, int threads);
void NchwFromChannelsLast(const float* x, float* y, int64_t C, int64_t HW, int threads);
// y = ChannelShuffle(x) {group} (ops/shape_ops.cc), both channels-last with HW pixels.
void ChannelsLastShuffle(const float* x, float* y, int64_t C, int64_t group, int64_t HW);
void ChannelsLastConcat(const std::vector<const float*>& inputs,
                        const std::vector<int64_t>& channels, float* y, int64_t HW);

}  // namespace kiln::ops
