// Resize (opsets 10-19) and the deprecated Upsample. The interpolation is separable: for every
// resized axis and output position we compute (input index, weight) taps once, following the
// ONNX reference's coordinate transforms and coefficient functions, then apply the axes one at
// a time (last axis first, as the reference recursion does): float32 in
// kernels/x86/resize_kernels.h, the other types here in double precision. Taps that pick one
// element each are a gather. GridSample and AffineGrid live in resize_grid.cc.
#include <algorithm>
#include <cstring>
#include <limits>
#include <string>

#include "kernels/x86/resize_kernels.h"
#include "kernels/x86/thread_pool.h"
#include "ops/common.h"
#include "ops/resize_plan.h"

namespace kiln::ops {
void RegisterGridOps(OpRegistry& r);  // resize_grid.cc

namespace {

struct ResizeAttrs {
  std::string mode = "nearest";
  std::string coord = "half_pixel";
  std::string nearest_mode = "round_prefer_floor";
  bool simple_nearest = false;  // Upsample and Resize-10: floor (ceil when downsampling)
  double cubic_a = -0.75;
  bool exclude_outside = false;
  double extrapolation = 0;
  bool antialias = false;
  std::string policy = "stretch";
  Dims axes;  // empty: all
};

// Where the scales / sizes live for this op and opset: input index, or -1 (attribute/none).
struct ResizeInputs {
  int roi = -1, scales = -1, sizes = -1;
};

ResizeInputs InputsFor(const ir::Node& node, int64_t opset) {
  ResizeInputs in;
  if (node.op_type == "Upsample") {
    if (opset >= 9) in.scales = 1;
  } else if (opset < 11) {
    in.scales = 1;
  } else {
    in.roi = 1;
    in.scales = 2;
    in.sizes = 3;
  }
  return in;
}

std::string ReadAttrs(const ir::Node& node, int64_t opset, int64_t rank, ResizeAttrs* a) {
  a->mode = node.attr_string("mode", "nearest");
  if (a->mode == "bilinear" || a->mode == "trilinear") a->mode = "linear";
  if (a->mode != "nearest" && a->mode != "linear" && a->mode != "cubic")
    return "unknown mode '" + a->mode + "'";
  const bool legacy = node.op_type == "Upsample" || opset < 11;
  if (legacy) {
    if (a->mode == "cubic") return "cubic mode needs Resize opset 11 or later";
    a->coord = "asymmetric";
    a->simple_nearest = true;
    return "";
  }
  a->coord = node.attr_string("coordinate_transformation_mode", "half_pixel");
  static const char* kCoords[] = {
      "half_pixel",         "pytorch_half_pixel",   "align_corners",       "asymmetric",
      "tf_crop_and_resize", "half_pixel_symmetric", "tf_half_pixel_for_nn"};
  bool ok = false;
  for (const char* c : kCoords) ok |= a->coord == c;
  if (!ok) return "unknown coordinate_transformation_mode '" + a->coord + "'";
  a->nearest_mode = node.attr_string("nearest_mode", "round_prefer_floor");
  if (a->nearest_mode != "round_prefer_floor" && a->nearest_mode != "round_prefer_ceil" &&
      a->nearest_mode != "floor" && a->nearest_mode != "ceil")
    return "unknown nearest_mode '" + a->nearest_mode + "'";
  a->cubic_a = node.attr_float("cubic_coeff_a", -0.75f);
  a->exclude_outside = node.attr_int("exclude_outside", 0) != 0;
  a->extrapolation = node.attr_float("extrapolation_value", 0.0f);
  if (opset >= 18) {
    a->antialias = node.attr_int("antialias", 0) != 0;
    a->policy = node.attr_string("keep_aspect_ratio_policy", "stretch");
    if (a->policy != "stretch" && a->policy != "not_larger" && a->policy != "not_smaller")
      return "unknown keep_aspect_ratio_policy '" + a->policy + "'";
    a->axes = node.attr_ints("axes", {});
    std::vector<char> seen(rank, 0);
    for (auto& ax : a->axes) {
      if (!NormalizeAxis(ax, rank)) return "axes entry out of range";
      if (seen[ax]) return "axes has a repeated entry";
      seen[ax] = 1;
    }
  }
  return "";
}

// Output dims and per-dim scale factors from scales or sizes (exactly one given).
std::string ResizeShape(const ResizeAttrs& a, const Dims& in, const std::vector<double>* scales,
                        const std::vector<int64_t>* sizes, Dims* out, std::vector<double>* sc) {
  const int64_t r = static_cast<int64_t>(in.size());
  Dims axes = a.axes;
  if (axes.empty())
    for (int64_t d = 0; d < r; ++d) axes.push_back(d);
  const size_t n = axes.size();
  *out = in;
  sc->assign(r, 1.0);
  if (sizes) {
    if (sizes->size() != n)
      return "sizes has " + std::to_string(sizes->size()) + " entries, expected " +
             std::to_string(n);
    for (size_t i = 0; i < n; ++i) {
      if ((*sizes)[i] < 0) return "sizes must be non-negative";
      (*out)[axes[i]] = (*sizes)[i];
      (*sc)[axes[i]] = in[axes[i]] == 0 ? 1.0 : static_cast<double>((*sizes)[i]) / in[axes[i]];
    }
    if (a.policy != "stretch") {
      double s = (*sc)[axes[0]];
      for (int64_t ax : axes)
        s = a.policy == "not_larger" ? std::min(s, (*sc)[ax]) : std::max(s, (*sc)[ax]);
      for (int64_t ax : axes) {
        (*sc)[ax] = s;
        (*out)[ax] = static_cast<int64_t>(s * in[ax] + 0.5);
      }
    }
  } else {
    if (scales->size() != n)
      return "scales has " + std::to_string(scales->size()) + " entries, expected " +
             std::to_string(n);
    for (size_t i = 0; i < n; ++i) {
      double s = (*scales)[i];
      if (!(s > 0) || !std::isfinite(s)) return "scales must be positive";
      (*sc)[axes[i]] = s;
      double o = std::floor(s * in[axes[i]]);
      if (o > 1e12) return "scales make the output too large";
      (*out)[axes[i]] = static_cast<int64_t>(o);
    }
  }
  return "";
}

std::vector<double> ScalesOf(const Tensor& t) {
  std::vector<double> v(t.size());
  for (int64_t i = 0; i < t.size(); ++i) v[i] = t.GetDouble(i);
  return v;
}

bool NonEmpty(const InferContext& ctx, int i) {
  return i >= 0 && ctx.has_input(i) && NumElements(ctx.input_dims(i)) > 0;
}

// Reads scales / sizes (from inputs or the Upsample-7 attribute). Returns false when a needed
// value is not known yet.
bool ScalesOrSizes(const InferContext* ictx, const ComputeContext* cctx, const ir::Node& node,
                   int64_t opset, std::vector<double>* scales, std::vector<int64_t>* sizes,
                   bool* use_sizes, std::string* err) {
  ResizeInputs io = InputsFor(node, opset);
  auto get = [&](int i, bool* present) -> const Tensor* {
    *present = false;
    if (i < 0) return nullptr;
    if (ictx) {
      if (!NonEmpty(*ictx, i)) return nullptr;
      *present = true;
      return ictx->input_value(i);
    }
    if (!cctx->has_input(i) || cctx->input(i).size() == 0) return nullptr;
    *present = true;
    return &cctx->input(i);
  };
  bool has_scales, has_sizes;
  const Tensor* st = get(io.scales, &has_scales);
  const Tensor* zt = get(io.sizes, &has_sizes);
  if (has_scales && has_sizes) {
    *err = "only one of scales and sizes may be given";
    return true;
  }
  *use_sizes = has_sizes;
  if (has_sizes) {
    if (!zt) return false;
    *sizes = zt->ToInt64Vector();
  } else if (has_scales) {
    if (!st) return false;
    if (!IsFloatingDType(st->dtype())) {
      *err = "scales must be a float tensor";
      return true;
    }
    *scales = ScalesOf(*st);
  } else if (node.op_type == "Upsample" && opset < 9) {
    auto f = node.attr_floats("scales");
    scales->assign(f.begin(), f.end());
    if (f.empty()) *err = "Upsample needs the scales attribute";
  } else {
    *err = "one of scales and sizes must be given";
  }
  return true;
}

Status ResizeInfer(InferContext& ctx) {
  if (!ctx.has_input(0)) return ctx.error("needs X");
  const Dims& in = ctx.input_dims(0);
  ResizeAttrs a;
  std::string m = ReadAttrs(ctx.node(), ctx.opset(), static_cast<int64_t>(in.size()), &a);
  if (!m.empty()) return ctx.error(m);
  std::vector<double> scales;
  std::vector<int64_t> sizes;
  bool use_sizes = false;
  if (!ScalesOrSizes(&ctx, nullptr, ctx.node(), ctx.opset(), &scales, &sizes, &use_sizes, &m)) {
    ctx.set_output_dynamic(0, ctx.input_dtype(0));
    return OkStatus();
  }
  if (!m.empty()) return ctx.error(m);
  Dims out;
  std::vector<double> sc;
  m = ResizeShape(a, in, use_sizes ? nullptr : &scales, use_sizes ? &sizes : nullptr, &out, &sc);
  if (!m.empty()) return ctx.error(m);
  ctx.set_output(0, ctx.input_dtype(0), out);
  return OkStatus();
}

using Taps = ResizeTaps;

std::vector<double> CubicCoeffs(double ratio, double A) {
  return {
      ((A * (ratio + 1) - 5 * A) * (ratio + 1) + 8 * A) * (ratio + 1) - 4 * A,
      ((A + 2) * ratio - (A + 3)) * ratio * ratio + 1,
      ((A + 2) * (1 - ratio) - (A + 3)) * (1 - ratio) * (1 - ratio) + 1,
      ((A * ((1 - ratio) + 1) - 5 * A) * ((1 - ratio) + 1) + 8 * A) * ((1 - ratio) + 1) - 4 * A};
}

// Taps for every output position of one axis.
std::vector<Taps> AxisTaps(const ResizeAttrs& a, int64_t in, int64_t out, double scale,
                           double roi_start, double roi_end) {
  std::vector<Taps> taps(out);
  const double out_w = scale * in;  // the reference's (float) output width
  for (int64_t x = 0; x < out; ++x) {
    Taps& t = taps[x];
    double xo;
    const std::string& c = a.coord;
    if (c == "align_corners") {
      xo = out_w == 1 ? 0.0 : x * (in - 1) / (out_w - 1);
    } else if (c == "asymmetric") {
      xo = x / scale;
    } else if (c == "tf_crop_and_resize") {
      xo = out_w == 1 ? (roi_end - roi_start) * (in - 1) / 2
                      : x * (roi_end - roi_start) * (in - 1) / (out_w - 1);
      xo += roi_start * (in - 1);
      if (xo < 0 || xo > in - 1) {
        t.extrapolate = true;
        continue;
      }
    } else if (c == "pytorch_half_pixel") {
      xo = out_w == 1 ? -0.5 : (x + 0.5) / scale - 0.5;
    } else if (c == "half_pixel_symmetric") {
      double adjustment = out / out_w;
      double center = in / 2.0;
      xo = center * (1 - adjustment) + (x + 0.5) / scale - 0.5;
    } else if (c == "tf_half_pixel_for_nn") {
      xo = (x + 0.5) / scale;
    } else {  // half_pixel
      xo = (x + 0.5) / scale - 0.5;
    }
    if (a.mode == "nearest") {
      int64_t i;
      if (a.simple_nearest) {
        i = scale < 1 ? static_cast<int64_t>(std::ceil(xo)) : static_cast<int64_t>(std::floor(xo));
      } else if (xo == std::floor(xo)) {
        i = static_cast<int64_t>(xo);
      } else {
        int64_t base = static_cast<int64_t>(std::floor(xo));
        double ratio = xo - base;
        const std::string& nm = a.nearest_mode;
        bool up = nm == "round_prefer_floor"  ? ratio > 0.5
                  : nm == "round_prefer_ceil" ? ratio >= 0.5
                                              : nm == "ceil";
        i = base + (up ? 1 : 0);
      }
      t.idx = {std::clamp<int64_t>(i, 0, in - 1)};
      t.w = {1.0};
      continue;
    }
    // ratio in (0, 1]: prefer the pixel left of xo.
    int64_t base =
        xo == std::floor(xo) ? static_cast<int64_t>(xo) - 1 : static_cast<int64_t>(std::floor(xo));
    double ratio = xo - base;
    std::vector<int64_t> offs;
    std::vector<double> w;
    const double s = std::min(scale, 1.0);
    if (a.mode == "linear") {
      if (a.antialias) {
        int64_t start = static_cast<int64_t>(std::floor(-1 / s) + 1);
        int64_t n = 2 - 2 * start;
        for (int64_t k = 0; k < n; ++k) {
          double arg = (start + k - ratio) * s;
          offs.push_back(start + k);
          w.push_back(std::clamp(1 - std::fabs(arg), 0.0, 1.0));
        }
      } else {
        offs = {0, 1};
        w = {1 - ratio, ratio};
      }
    } else {  // cubic
      const double A = a.cubic_a;
      if (a.antialias) {
        int64_t start = static_cast<int64_t>(std::floor(-2 / s) + 1);
        for (int64_t i = start; i < 2 - start; ++i) {
          double x2 = std::fabs(s * (i - ratio));
          double v = x2 <= 1  ? ((A + 2) * x2 - (A + 3)) * x2 * x2 + 1
                     : x2 < 2 ? ((A * x2 - 5 * A) * x2 + 8 * A) * x2 - 4 * A
                              : 0.0;
          offs.push_back(i);
          w.push_back(v);
        }
      } else {
        offs = {-1, 0, 1, 2};
        w = CubicCoeffs(ratio, A);
      }
    }
    if (a.antialias) {
      double sum = 0;
      for (double v : w) sum += v;
      for (double& v : w) v /= sum;
    }
    if (a.exclude_outside) {
      double sum = 0;
      for (size_t k = 0; k < offs.size(); ++k) {
        int64_t i = base + offs[k];
        if (i < 0 || i >= in) w[k] = 0;
        sum += w[k];
      }
      if (sum != 0)
        for (double& v : w) v /= sum;
    }
    for (size_t k = 0; k < offs.size(); ++k) {
      if (w[k] == 0) continue;
      t.idx.push_back(std::clamp<int64_t>(base + offs[k], 0, in - 1));
      t.w.push_back(w[k]);
    }
  }
  return taps;
}

// Every output the input at its own position: its taps there weigh 1 in all (a size-1 axis's
// clamped neighbours are all that position), any others 0.
bool IsIdentity(const std::vector<Taps>& taps, int64_t in) {
  if (static_cast<int64_t>(taps.size()) != in) return false;
  for (int64_t x = 0; x < in; ++x) {
    const Taps& t = taps[x];
    if (t.extrapolate) return false;
    double own = 0;
    for (size_t k = 0; k < t.idx.size(); ++k) {
      if (t.idx[k] == x)
        own += t.w[k];
      else if (t.w[k] != 0.0)
        return false;
    }
    if (own != 1.0) return false;
  }
  return true;
}

// Resizes `cur` (dims `dims`) along `axis` into a new buffer.
void ApplyAxis(std::vector<double>& cur, Dims& dims, int axis, const std::vector<Taps>& taps,
               double extrapolation) {
  int64_t outer = 1, inner = 1;
  for (int d = 0; d < axis; ++d) outer *= dims[d];
  for (size_t d = axis + 1; d < dims.size(); ++d) inner *= dims[d];
  const int64_t in = dims[axis], out = static_cast<int64_t>(taps.size());
  std::vector<double> next(outer * out * inner, 0.0);
  for (int64_t o = 0; o < outer; ++o) {
    const double* src = cur.data() + o * in * inner;
    for (int64_t x = 0; x < out; ++x) {
      double* dst = next.data() + (o * out + x) * inner;
      const Taps& t = taps[x];
      if (t.extrapolate) {
        std::fill(dst, dst + inner, extrapolation);
        continue;
      }
      for (size_t k = 0; k < t.idx.size(); ++k) {
        const double w = t.w[k];
        const double* s = src + t.idx[k] * inner;
        for (int64_t i = 0; i < inner; ++i) dst[i] += w * s[i];
      }
    }
  }
  cur.swap(next);
  dims[axis] = out;
}

// True when every resized axis takes one input position per output position, with weight 1
// (nearest, or an axis that only crops or repeats): the output is a gather of input elements.
bool IsGather(const ResizePlan& plan) {
  for (const auto& axis : plan.axes)
    for (const Taps& t : axis)
      if (t.extrapolate || t.idx.size() != 1 || t.w[0] != 1.0) return false;
  return true;
}

// The input position of each output position along axis d (the identity where it is unchanged).
std::vector<int64_t> GatherMap(const ResizePlan& plan, int d) {
  std::vector<int64_t> map(static_cast<size_t>(plan.out[d]));
  for (int64_t i = 0; i < plan.out[d]; ++i)
    map[i] = plan.axes[d].empty() ? i : plan.axes[d][i].idx[0];
  return map;
}

// dst[2 j] = dst[2 j + 1] = src[j] for j < n (a loop the compiler turns into vector unpacks).
void RepeatTwice(uint32_t* __restrict dst, const uint32_t* __restrict src, int64_t n) {
  for (int64_t j = 0; j < n; ++j) {
    dst[2 * j] = src[j];
    dst[2 * j + 1] = src[j];
  }
}

// y = x gathered along every axis by `maps` (GatherMap), on the elements' bytes (`es` each; an
// element may be a whole pixel's channels). An output row (the last axis) whose source row is
// the previous row's is a copy of it. Threads split the output rows.
void GatherResize(const char* x, char* y, const Dims& in, const Dims& out,
                  const std::vector<std::vector<int64_t>>& maps, size_t es, int threads) {
  const int r = static_cast<int>(out.size());
  const int64_t ow = out[r - 1], iw = in[r - 1], rows = NumElements(out) / ow;
  const std::vector<int64_t>& cols = maps[r - 1];
  const size_t row_bytes = static_cast<size_t>(ow) * es;
  // Each input element repeated `repeat` times in order (nearest upsampling by an integer
  // factor): runs of equal values, not a lookup per element.
  int64_t repeat = ow % iw == 0 ? ow / iw : 0;
  for (int64_t j = 0; repeat > 1 && j < ow; ++j)
    if (cols[j] != j / repeat) repeat = 0;
  ParallelRows(threads, rows, std::max<int64_t>(1, (1 << 15) / std::max<int64_t>(ow, 1)),
               [&](int64_t r0, int64_t r1) {
                 int64_t prev = -1;
                 for (int64_t row = r0; row < r1; ++row) {
                   int64_t rem = row, src = 0, pitch = 1;
                   for (int d = r - 2; d >= 0; --d) {
                     src += maps[d][rem % out[d]] * pitch;
                     rem /= out[d];
                     pitch *= in[d];
                   }
                   char* dst = y + row * row_bytes;
                   if (src == prev) {
                     std::memcpy(dst, dst - row_bytes, row_bytes);
                     continue;
                   }
                   prev = src;
                   const char* s = x + src * iw * es;
                   if (es == 4 && repeat == 2) {
                     RepeatTwice(reinterpret_cast<uint32_t*>(dst),
                                 reinterpret_cast<const uint32_t*>(s), iw);
                   } else if (es == 4) {
                     for (int64_t j = 0; j < ow; ++j) std::memcpy(dst + j * 4, s + cols[j] * 4, 4);
                   } else {
                     for (int64_t j = 0; j < ow; ++j)
                       std::memcpy(dst + j * es, s + cols[j] * es, es);
                   }
                 }
               });
}

// The plan's taps of one axis as the float32 kernel's table (null when the axis is unchanged).
std::unique_ptr<ResizeAxisF32> TableOf(const std::vector<Taps>& taps) {
  if (taps.empty()) return nullptr;
  auto t = std::make_unique<ResizeAxisF32>();
  for (const Taps& p : taps) {
    t->extrapolate.push_back(p.extrapolate ? 1 : 0);
    if (!p.extrapolate)
      for (size_t k = 0; k < p.idx.size(); ++k) {
        t->idx.push_back(p.idx[k]);
        t->w.push_back(static_cast<float>(p.w[k]));
      }
    t->start.push_back(static_cast<int64_t>(t->idx.size()));
  }
  t->Finish();
  return t;
}

// float32 through ResizeF32: `order` lists the plan's axes in the order of the tensor's memory
// (NCHW, or N, H, W, C for a channels-last one).
void ResizeFloat(const Tensor& x, const ResizePlan& plan, const std::vector<int>& order, Tensor& y,
                 int threads) {
  std::vector<std::unique_ptr<ResizeAxisF32>> tables;
  std::vector<const ResizeAxisF32*> axes;
  Dims in;
  for (int d : order) {
    tables.push_back(TableOf(plan.axes[d]));
    axes.push_back(tables.back().get());
    in.push_back(x.dim(d));
  }
  ResizeF32(x.data<float>(), in, axes, static_cast<float>(plan.extrapolation), y.data<float>(),
            threads);
}

Status ResizeCompute(ComputeContext& ctx) {
  const Tensor& x = ctx.input(0);
  ResizePlan plan;
  KILN_RETURN_IF_ERROR(PlanResize(ctx, x.dims(), &plan));
  Tensor& y = ctx.output(0).defined() && ctx.output(0).dims() == plan.out
                  ? ctx.output(0)
                  : ctx.allocate_output(0, x.dtype(), plan.out);
  if (y.size() == 0) return OkStatus();
  if (x.size() == 0) return ctx.error("cannot resize an empty tensor to a non-empty one");
  const bool numeric = Dispatch<kNumericTypes>(x.dtype(), []<class T>() {});
  if (ctx.output_channels_last(0)) {  // ResizeCanRunChannelsLast: 4-D float32
    if (x.rank() != 4 || x.dtype() != DType::kFloat32)
      return ctx.error("channels-last Resize it cannot run (a kiln bug)");
    if (!IsGather(plan)) {
      ResizeFloat(x, plan, {0, 2, 3, 1}, y, ctx.threads());
      return OkStatus();
    }
    // [N, H, W, C]; where the channels map to themselves, a pixel's channels are one element.
    Dims in = {x.dim(0), x.dim(2), x.dim(3), x.dim(1)};
    Dims out = {plan.out[0], plan.out[2], plan.out[3], plan.out[1]};
    std::vector<std::vector<int64_t>> maps = {GatherMap(plan, 0), GatherMap(plan, 2),
                                              GatherMap(plan, 3), GatherMap(plan, 1)};
    size_t es = DTypeSize(x.dtype());
    if (plan.axes[1].empty()) {
      es *= static_cast<size_t>(x.dim(1));
      in.pop_back();
      out.pop_back();
      maps.pop_back();
    }
    GatherResize(static_cast<const char*>(x.raw()), static_cast<char*>(y.raw()), in, out, maps, es,
                 ctx.threads());
    return OkStatus();
  }
  if (numeric && IsGather(plan) && x.rank() > 0) {
    std::vector<std::vector<int64_t>> maps;
    for (int d = 0; d < x.rank(); ++d) maps.push_back(GatherMap(plan, d));
    GatherResize(static_cast<const char*>(x.raw()), static_cast<char*>(y.raw()), x.dims(), plan.out,
                 maps, DTypeSize(x.dtype()), ctx.threads());
    return OkStatus();
  }
  if (x.dtype() == DType::kFloat32 && x.rank() > 0) {
    std::vector<int> order(static_cast<size_t>(x.rank()));
    for (int d = 0; d < x.rank(); ++d) order[d] = d;
    ResizeFloat(x, plan, order, y, ctx.threads());
    return OkStatus();
  }
  std::vector<double> cur(x.size());
  bool ok = Dispatch<kNumericTypes>(x.dtype(), [&]<class T>() {
    const T* p = x.data<T>();
    for (int64_t i = 0; i < x.size(); ++i) cur[i] = static_cast<double>(static_cast<Acc<T>>(p[i]));
  });
  if (!ok) return ctx.error("unsupported dtype " + std::string(DTypeName(x.dtype())));
  Dims dims = x.dims();
  for (int d = x.rank() - 1; d >= 0; --d)
    if (!plan.axes[d].empty()) ApplyAxis(cur, dims, d, plan.axes[d], plan.extrapolation);
  Dispatch<kNumericTypes>(y.dtype(), [&]<class T>() {
    T* p = y.data<T>();
    for (int64_t i = 0; i < y.size(); ++i) {
      double v = cur[i];
      if constexpr (std::is_integral_v<T>) {
        if (std::isnan(v)) v = 0;
        v = std::clamp(std::trunc(v), static_cast<double>(std::numeric_limits<T>::lowest()),
                       static_cast<double>(std::numeric_limits<T>::max()));
      }
      p[i] = ConvertValue<T>(v);
    }
  });
  return OkStatus();
}

}  // namespace

Status PlanResize(const ComputeContext& ctx, const Dims& in, ResizePlan* plan) {
  const int64_t r = static_cast<int64_t>(in.size());
  ResizeAttrs a;
  std::string m = ReadAttrs(ctx.node(), ctx.opset(), r, &a);
  if (!m.empty()) return ctx.error(m);
  std::vector<double> scales;
  std::vector<int64_t> sizes;
  bool use_sizes = false;
  ScalesOrSizes(nullptr, &ctx, ctx.node(), ctx.opset(), &scales, &sizes, &use_sizes, &m);
  if (!m.empty()) return ctx.error(m);
  std::vector<double> sc;
  m = ResizeShape(a, in, use_sizes ? nullptr : &scales, use_sizes ? &sizes : nullptr, &plan->out,
                  &sc);
  if (!m.empty()) return ctx.error(m);
  plan->axes.assign(r, {});
  plan->extrapolation = a.extrapolation;
  if (NumElements(plan->out) == 0 || NumElements(in) == 0) return OkStatus();
  // roi: [starts..., ends...] over `axes` (or all dims), normalized coordinates.
  std::vector<double> roi_s(r, 0.0), roi_e(r, 1.0);
  ResizeInputs io = InputsFor(ctx.node(), ctx.opset());
  if (a.coord == "tf_crop_and_resize") {
    if (io.roi < 0 || !ctx.has_input(io.roi)) return ctx.error("tf_crop_and_resize needs roi");
    const Tensor& rt = ctx.input(io.roi);
    Dims axes = a.axes;
    if (axes.empty())
      for (int64_t d = 0; d < r; ++d) axes.push_back(d);
    if (rt.size() != 2 * static_cast<int64_t>(axes.size()))
      return ctx.error("roi must have 2 * " + std::to_string(axes.size()) + " entries");
    for (size_t i = 0; i < axes.size(); ++i) {
      roi_s[axes[i]] = rt.GetDouble(i);
      roi_e[axes[i]] = rt.GetDouble(i + axes.size());
    }
  }
  for (int64_t d = 0; d < r; ++d) {
    std::vector<Taps> taps = AxisTaps(a, in[d], plan->out[d], sc[d], roi_s[d], roi_e[d]);
    if (!IsIdentity(taps, in[d])) plan->axes[d] = std::move(taps);
  }
  return OkStatus();
}

bool ResizeCanRunChannelsLast(const ir::Node& node, const ir::Graph& g) {
  if ((!node.domain.empty() && node.domain != "ai.onnx") ||
      (node.op_type != "Resize" && node.op_type != "Upsample") || node.inputs.empty() ||
      node.inputs[0] < 0 || node.outputs.size() != 1 || node.outputs[0] < 0)
    return false;
  if (node.attr_string("coordinate_transformation_mode", "") == "tf_crop_and_resize") return false;
  const ir::TypeInfo& x = g.values[node.inputs[0]].type;
  const ir::TypeInfo& y = g.values[node.outputs[0]].type;
  return x.dtype == DType::kFloat32 && x.shape_known() && y.shape_known() && x.dims.size() == 4 &&
         y.dims.size() == 4 && x.dims[0] == 1 && y.dims[0] == 1 && x.dims[1] == y.dims[1];
}

void RegisterResizeOps(OpRegistry& r) {
  r.Register("Resize", ResizeInfer, ResizeCompute);
  r.Register("Upsample", ResizeInfer, ResizeCompute);
  r.MarkWritesWholeOutputs("Resize", /*types_only=*/false);  // its shape reads scales or sizes
  r.MarkWritesWholeOutputs("Upsample", /*types_only=*/false);
  RegisterGridOps(r);
}

}  // namespace kiln::ops
