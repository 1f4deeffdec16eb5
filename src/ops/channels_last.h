// kiln's channels-last activation layout: between convolutions the host executor may keep a
// float32 [N, C, H, W] tensor as [N, H, W, C] (NHWC), the layout oneDNN's convolutions compute in
// fastest (measured against its nChw16c blocks), so that a chain of convs pays no
// NCHW round trip per node. Both layouts take the same bytes, so the memory plan holds. Made and
// read only by nodes that say they can, never graph outputs or values a subgraph reads: every
// other kernel sees ONNX layouts. The compile step decides (compiler/host_layout.cc); a kernel asks
// ComputeContext::input_channels_last / output_channels_last.
#pragma once

#include <cstdint>
#include <vector>

#include "ir/graph.h"

namespace kiln::ops {

// `input` of CanRunChannelsLast that asks about writing output 0.
inline constexpr int kChannelsLastOutput = -1;

// True when `node` (inferred shapes) can read its input `input` (or write its output 0, input
// kChannelsLastOutput) channels-last: a float32 2-D Conv or FusedConv (input 0 = X or 3 = Z)
// that oneDNN runs; a channel Concat with N = 1 (ChannelsLastConcat); a 2-D MaxPool /
// AveragePool (kernels/x86/pool_kernels.h's ChannelsLastPool2D); a channel-scale Mul and the input
// of a GlobalAveragePool (ChannelsLastScale / ChannelsLastGlobalAverage); a com.kiln
// ChannelShuffle; a nearest Resize (ops/resize_plan.h); an inference BatchNormalization (a
// per-channel affine map); element-wise ops whose data inputs all have the output's dims, or for
// binary and variadic ones a single element (Relu, Clip, Sigmoid, ...; Add, Sum, Mul, ...), which
// do not care about the layout. Only on AVX-512 and AVX2 CPUs (where the layout's kernels were
// measured).
bool CanRunChannelsLast(const ir::Node& node, const ir::Graph& g, int input);

// CanRunChannelsLast's rule for Conv and FusedConv (defined in ops/conv.cc).
bool ConvCanRunChannelsLast(const ir::Node& node, const ir::Graph& g, int input);

// True when `node` can write its output 0 channels-last inside a wider tensor: pixel p's
// channels at p * C for the C that ComputeContext::output_pixel_channels gives (the executor
// makes a channels-last Concat's inputs in place that way). A Conv or FusedConv oneDNN runs,
// without a residual input or Swish (whose passes over the output assume it dense).
bool CanWriteChannelsLastInterleaved(const ir::Node& node, const ir::Graph& g);

// How `node` takes the layout, by CanRunChannelsLast's rules, in one answer: whether it writes
// output 0 channels-last, and per input whether it reads it so and whether that input must be
// channels-last exactly when output 0 is (linked: all but the convolutions and
// GlobalAveragePool compute in one layout). All false where the node cannot.
struct ChannelsLastUse {
  bool output = false;
  std::vector<char> reads, linked;  // per input
};
ChannelsLastUse ChannelsLastUseOf(const ir::Node& node, const ir::Graph& g);

}  // namespace kiln::ops
