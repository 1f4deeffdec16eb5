// Sliding-window geometry shared by Conv, ConvTranspose, DeformConv and the pooling ops:
// kernel, strides, dilations, pads (explicit or auto_pad) and the output size rules of the
// ONNX shape inference (convPoolShapeInference).
#pragma once

#include <string>

#include "ops/common.h"

namespace kiln::ops {

// The spatial dims of an [N, C, spatial...] shape.
inline Dims Spatial(const Dims& d) { return Dims(d.begin() + 2, d.end()); }

struct WindowGeom {
  int nd = 0;  // spatial rank
  Dims in, kernel, strides, dilations, pad_begin, pad_end, out;
};

// Reads strides/dilations/pads/auto_pad from `node` for a window of `kernel` over `in`
// (spatial dims only) and computes the output size. Returns "" or an error message.
inline std::string ComputeWindowGeom(const ir::Node& node, const Dims& in, const Dims& kernel,
                                     bool use_dilation, bool ceil_mode, WindowGeom* g) {
  const int nd = static_cast<int>(in.size());
  g->nd = nd;
  g->in = in;
  g->kernel = kernel;
  if (static_cast<int>(kernel.size()) != nd)
    return "kernel has " + std::to_string(kernel.size()) + " dims, input has " +
           std::to_string(nd) + " spatial dims";
  for (int64_t k : kernel)
    if (k <= 0) return "kernel_shape values must be positive";
  g->strides = node.attr_ints("strides");
  if (g->strides.empty()) g->strides.assign(nd, 1);
  if (static_cast<int>(g->strides.size()) != nd)
    return "strides must have one value per spatial dim";
  for (int64_t s : g->strides)
    if (s <= 0) return "strides must be positive";
  g->dilations = use_dilation ? node.attr_ints("dilations") : Dims{};
  if (g->dilations.empty()) g->dilations.assign(nd, 1);
  if (static_cast<int>(g->dilations.size()) != nd)
    return "dilations must have one value per spatial dim";
  for (int64_t d : g->dilations)
    if (d <= 0) return "dilations must be positive";
  std::string auto_pad = node.attr_string("auto_pad", "NOTSET");
  g->pad_begin.assign(nd, 0);
  g->pad_end.assign(nd, 0);
  if (auto_pad == "NOTSET") {
    Dims pads = node.attr_ints("pads");
    if (!pads.empty()) {
      if (static_cast<int>(pads.size()) != 2 * nd)
        return "pads must have two values per spatial dim";
      for (int i = 0; i < nd; ++i) {
        g->pad_begin[i] = pads[i];
        g->pad_end[i] = pads[i + nd];
        if (pads[i] < 0 || pads[i + nd] < 0) return "pads must not be negative";
      }
    }
  } else if (auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER") {
    for (int i = 0; i < nd; ++i) {
      int64_t keff = (kernel[i] - 1) * g->dilations[i] + 1;
      int64_t out = (in[i] + g->strides[i] - 1) / g->strides[i];
      int64_t total = std::max<int64_t>(0, (out - 1) * g->strides[i] + keff - in[i]);
      int64_t small = total / 2, big = total - small;
      g->pad_begin[i] = auto_pad == "SAME_UPPER" ? small : big;
      g->pad_end[i] = auto_pad == "SAME_UPPER" ? big : small;
    }
  } else if (auto_pad != "VALID") {
    return "unknown auto_pad '" + auto_pad + "'";
  }
  g->out.assign(nd, 0);
  for (int i = 0; i < nd; ++i) {
    int64_t keff = (kernel[i] - 1) * g->dilations[i] + 1;
    int64_t span = in[i] + g->pad_begin[i] + g->pad_end[i] - keff;
    if (span < 0)
      return "kernel extent " + std::to_string(keff) + " is larger than the padded input " +
             std::to_string(in[i] + g->pad_begin[i] + g->pad_end[i]);
    int64_t out = (span + (ceil_mode ? g->strides[i] - 1 : 0)) / g->strides[i] + 1;
    // As PyTorch: a window that would start in the end padding is dropped.
    if (ceil_mode && (out - 1) * g->strides[i] >= in[i] + g->pad_begin[i]) --out;
    if (out <= 0) return "output size would be empty";
    g->out[i] = out;
  }
  return "";
}

// Pads spatial dims to exactly 3 with leading unit dims so kernels can use three fixed loops.
inline Dims To3(const Dims& d, int64_t fill) {
  Dims r(3, fill);
  for (size_t i = 0; i < d.size(); ++i) r[3 - d.size() + i] = d[i];
  return r;
}

// Geometry normalized to 3 spatial dims.
struct Geom3 {
  int64_t in[3], k[3], s[3], d[3], p[3], pe[3], out[3];
  // Needs g.nd <= 3.
  explicit Geom3(const WindowGeom& g) {
    Dims i = To3(g.in, 1), k3 = To3(g.kernel, 1), s3 = To3(g.strides, 1), d3 = To3(g.dilations, 1),
         p3 = To3(g.pad_begin, 0), pe3 = To3(g.pad_end, 0), o3 = To3(g.out, 1);
    for (int j = 0; j < 3; ++j) {
      in[j] = i[j];
      k[j] = k3[j];
      s[j] = s3[j];
      d[j] = d3[j];
      p[j] = p3[j];
      pe[j] = pe3[j];
      out[j] = o3[j];
    }
  }
  int64_t kprod() const { return k[0] * k[1] * k[2]; }
  int64_t in_size() const { return in[0] * in[1] * in[2]; }
  int64_t out_size() const { return out[0] * out[1] * out[2]; }
};

// A Conv's or ConvTranspose's sizes: batch, input and output channels, groups, and the window.
// For ConvTranspose the window is read "backwards" (as in col2im): `in` is the output image,
// `out` the grid the input covers.
struct ConvShape {
  int64_t N = 0, C = 0, M = 0, group = 1;
  WindowGeom geom;
};

// The shapes of Conv and ConvTranspose nodes with inputs of dims x and w (and b, the bias, or
// null): "" or what is malformed. Shape inference, the host kernels and the C emitter read them.
std::string ConvShapeOf(const ir::Node& node, const Dims& x, const Dims& w, const Dims* b,
                        ConvShape* s);
std::string ConvTransposeShapeOf(const ir::Node& node, const Dims& x, const Dims& w, const Dims* b,
                                 ConvShape* s);

}  // namespace kiln::ops
