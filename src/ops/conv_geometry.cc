#include "ops/conv_geometry.h"

namespace kiln::ops {
namespace {

int64_t FloorDiv2(int64_t v) { return v >= 0 ? v / 2 : -((-v + 1) / 2); }

// X and W of one rank, 3 to 5: "" or the message.
std::string CheckRanks(const Dims& x, const Dims& w) {
  if (x.size() < 3) return "X must have rank 3 or more (N, C, spatial...), got " + DimsToString(x);
  if (w.size() != x.size())
    return "W rank " + std::to_string(w.size()) + " differs from X rank " +
           std::to_string(x.size());
  if (x.size() > 5) return "more than 3 spatial dims are not supported";
  return "";
}

}  // namespace

std::string ConvShapeOf(const ir::Node& node, const Dims& x, const Dims& w, const Dims* b,
                        ConvShape* s) {
  if (std::string e = CheckRanks(x, w); !e.empty()) return e;
  s->N = x[0];
  s->C = x[1];
  s->M = w[0];
  s->group = node.attr_int("group", 1);
  if (s->group <= 0) return "group must be positive";
  if (w[1] * s->group != s->C)
    return "X has " + std::to_string(s->C) + " channels but W expects " + std::to_string(w[1]) +
           " x group " + std::to_string(s->group);
  if (s->M % s->group != 0) return "W output channels are not divisible by group";
  Dims kernel = Spatial(w);
  Dims ks = node.attr_ints("kernel_shape");
  if (!ks.empty() && ks != kernel)
    return "kernel_shape " + DimsToString(ks) + " does not match W " + DimsToString(w);
  if (b && (b->size() != 1 || (*b)[0] != s->M))
    return "B must have shape [" + std::to_string(s->M) + "]";
  return ComputeWindowGeom(node, Spatial(x), kernel, true, false, &s->geom);
}

std::string ConvTransposeShapeOf(const ir::Node& node, const Dims& x, const Dims& w, const Dims* b,
                                 ConvShape* s) {
  if (std::string e = CheckRanks(x, w); !e.empty()) return e;
  const int nd = static_cast<int>(x.size()) - 2;
  s->N = x[0];
  s->C = x[1];
  s->group = node.attr_int("group", 1);
  if (s->group <= 0) return "group must be positive";
  if (w[0] != s->C)
    return "W has " + std::to_string(w[0]) + " input channels, X has " + std::to_string(s->C);
  if (s->C % s->group != 0) return "input channels are not divisible by group";
  s->M = w[1] * s->group;
  if (b && (b->size() != 1 || (*b)[0] != s->M))
    return "B must have shape [" + std::to_string(s->M) + "]";
  Dims kernel = Spatial(w);
  Dims ks = node.attr_ints("kernel_shape");
  if (!ks.empty() && ks != kernel)
    return "kernel_shape " + DimsToString(ks) + " does not match W " + DimsToString(w);
  WindowGeom& g = s->geom;
  g.nd = nd;
  g.kernel = kernel;
  g.out = Spatial(x);  // the grid the input covers
  auto get = [&](const char* name, int64_t def, Dims* v) -> std::string {
    *v = node.attr_ints(name);
    if (v->empty()) v->assign(nd, def);
    if (static_cast<int>(v->size()) != nd)
      return std::string(name) + " must have one value per spatial dim";
    return "";
  };
  Dims op;
  std::string e;
  if (!(e = get("strides", 1, &g.strides)).empty() ||
      !(e = get("dilations", 1, &g.dilations)).empty() ||
      !(e = get("output_padding", 0, &op)).empty())
    return e;
  for (int i = 0; i < nd; ++i) {
    if (g.strides[i] <= 0 || g.dilations[i] <= 0) return "strides and dilations must be positive";
    if (kernel[i] <= 0) return "kernel dims must be positive";
    if (op[i] < 0) return "output_padding must not be negative";
  }
  std::string auto_pad = node.attr_string("auto_pad", "NOTSET");
  if (auto_pad != "NOTSET" && auto_pad != "VALID" && auto_pad != "SAME_UPPER" &&
      auto_pad != "SAME_LOWER")
    return "unknown auto_pad '" + auto_pad + "'";
  Dims out_shape = node.attr_ints("output_shape");
  if (!out_shape.empty()) {
    if (static_cast<int>(out_shape.size()) == nd + 2)
      out_shape.erase(out_shape.begin(), out_shape.begin() + 2);
    if (static_cast<int>(out_shape.size()) != nd)
      return "output_shape must have one value per spatial dim";
  } else if (auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER") {
    for (int i = 0; i < nd; ++i) out_shape.push_back(g.out[i] * g.strides[i]);
  }
  g.pad_begin.assign(nd, 0);
  g.pad_end.assign(nd, 0);
  g.in.assign(nd, 0);
  for (int i = 0; i < nd; ++i) {
    int64_t keff = (kernel[i] - 1) * g.dilations[i] + 1;
    int64_t full = g.strides[i] * (g.out[i] - 1) + op[i] + keff;
    if (!out_shape.empty()) {
      int64_t total = full - out_shape[i];
      int64_t half = FloorDiv2(total);
      g.pad_begin[i] = auto_pad == "SAME_UPPER" ? half : total - half;
      g.pad_end[i] = total - g.pad_begin[i];
    } else if (auto_pad == "NOTSET") {
      Dims pads = node.attr_ints("pads");
      if (!pads.empty()) {
        if (static_cast<int>(pads.size()) != 2 * nd)
          return "pads must have two values per spatial dim";
        g.pad_begin[i] = pads[i];
        g.pad_end[i] = pads[i + nd];
        if (pads[i] < 0 || pads[i + nd] < 0) return "pads must not be negative";
      }
    }
    g.in[i] = full - g.pad_begin[i] - g.pad_end[i];
    if (g.in[i] <= 0) return "output size would be empty";
  }
  return "";
}

}  // namespace kiln::ops
