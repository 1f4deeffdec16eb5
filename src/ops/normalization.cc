// Normalization: BatchNormalization, InstanceNormalization, LayerNormalization,
// GroupNormalization, RMSNormalization, LRN, MeanVarianceNormalization, LpNormalization, and
// Dropout (which at inference is the identity). Statistics accumulate in double; results are
// written in the input's type. float32 Layer / RMS / Instance / Group normalization run kernels
// with float sums in 16 lanes (as ONNX computes float32), and float32 MeanVarianceNormalization one
// with double sums, compiled per instruction set.
#include <algorithm>
#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "kernels/x86/cpu_isa.h"
#include "kernels/x86/simd.h"
#include "kernels/x86/thread_pool.h"
#include "kernels/x86/vector_math.h"
#include "ops/common.h"
#include "ops/normalization_plan.h"

namespace kiln::ops {
namespace {

std::string TypeName(DType t) { return std::string(DTypeName(t)); }

// A float tensor read as floats (the float32 kernels' parameter vectors).
std::vector<float> ReadFloats(const Tensor& t) {
  std::vector<float> v(t.size());
  for (int64_t i = 0; i < t.size(); ++i) v[i] = static_cast<float>(t.GetDouble(i));
  return v;
}

// Instance and group normalization in float32 (below, with the other float32 kernels).
void NormGroupsF32(const float* x, float* y, int64_t outer, int64_t channels, int64_t inner,
                   int64_t per_group, const float* scale, const float* bias, float eps,
                   int threads);

// A float tensor read as doubles (parameter vectors: scale, bias, mean, var).
std::vector<double> ReadDoubles(const Tensor& t) {
  std::vector<double> v(t.size());
  for (int64_t i = 0; i < t.size(); ++i) v[i] = t.GetDouble(i);
  return v;
}

// `t` broadcast (unidirectionally) to `to`, as doubles in row-major order of `to`.
std::vector<double> ExpandDoubles(const Tensor& t, const Dims& to) {
  std::vector<double> src = ReadDoubles(t);
  std::vector<double> out(NumElements(to));
  std::array<Dims, 1> st = {BroadcastStrides(t.dims(), to)};
  ForEachBroadcast<1>(to, st,
                      [&](int64_t o, const std::array<int64_t, 1>& off) { out[o] = src[off[0]]; });
  return out;
}

Status RequireFloat(const InferContext& ctx, int i, const char* what) {
  if (!IsFloatingDType(ctx.input_dtype(i)))
    return ctx.error(std::string(what) + " must be a floating-point tensor, got " +
                     TypeName(ctx.input_dtype(i)));
  return OkStatus();
}

// Number of (outer, channel, inner) elements for an N x C x D1 x ... tensor.
struct NCD {
  int64_t n = 1, c = 1, inner = 1;
};
NCD SplitNC(const Dims& d) {
  NCD s;
  s.n = d.empty() ? 1 : d[0];
  s.c = d.size() < 2 ? 1 : d[1];
  for (size_t i = 2; i < d.size(); ++i) s.inner *= d[i];
  return s;
}

// ---------------------------------------------------------------------------------------------
// BatchNormalization. Inference: y = (x - mean) / sqrt(var + eps) * scale + bias per channel.
// Training (training_mode=1 from opset 14; before that, when the statistics outputs are used):
// batch statistics normalize, and the running statistics are updated with `momentum`.

bool BatchNormTraining(const ir::Node& n, int64_t opset, int num_outputs) {
  if (opset >= 14) return n.attr_int("training_mode", 0) != 0;
  for (int i = 1; i < num_outputs; ++i)
    if (n.outputs[i] >= 0) return true;
  return false;
}

Status BatchNormInfer(InferContext& ctx) {
  if (ctx.num_inputs() < 5) return ctx.error("BatchNormalization needs 5 inputs");
  for (int i = 0; i < 5; ++i) {
    if (!ctx.has_input(i)) return ctx.error("BatchNormalization inputs cannot be omitted");
    KILN_RETURN_IF_ERROR(RequireFloat(ctx, i, "BatchNormalization input"));
  }
  const Dims& x = ctx.input_dims(0);
  if (x.size() < 2)
    return ctx.error("BatchNormalization needs X of rank >= 2, got " + DimsToString(x));
  NCD s = SplitNC(x);
  const bool per_element = ctx.opset() < 9 && ctx.node().attr_int("spatial", 1) == 0;
  for (int i = 1; i < 5; ++i) {
    int64_t n = NumElements(ctx.input_dims(i));
    if (n != s.c && !(per_element && n == s.c * s.inner))
      return ctx.error("BatchNormalization parameter " + std::to_string(i) + " has shape " +
                       DimsToString(ctx.input_dims(i)) + ", expected [" + std::to_string(s.c) +
                       "]");
  }
  ctx.set_output(0, ctx.input_dtype(0), x);
  const bool training = BatchNormTraining(ctx.node(), ctx.opset(), ctx.num_outputs());
  if (ctx.num_outputs() > 1 && ctx.opset() >= 14 && !training)
    return ctx.error("BatchNormalization statistics outputs need training_mode=1");
  for (int i = 1; i < ctx.num_outputs() && i < 5; ++i)
    ctx.set_output(i, ctx.input_dtype(i % 2 ? 3 : 4), ctx.input_dims(i % 2 ? 3 : 4));
  return OkStatus();
}

Status BatchNormCompute(ComputeContext& ctx) {
  const ir::Node& node = ctx.node();
  const Tensor& xt = ctx.input(0);
  NCD s = SplitNC(xt.dims());
  const double eps = node.attr_float("epsilon", 1e-5f);
  const double momentum = node.attr_float("momentum", 0.9f);
  std::vector<double> scale = ReadDoubles(ctx.input(1)), bias = ReadDoubles(ctx.input(2));
  std::vector<double> mean = ReadDoubles(ctx.input(3)), var = ReadDoubles(ctx.input(4));
  const int64_t params = static_cast<int64_t>(scale.size());
  // Per channel (params == C), or per element of a sample (spatial=0: params == C * inner).
  const int64_t block = params == s.c ? s.inner : 1;
  const bool training = BatchNormTraining(node, ctx.opset(), ctx.num_outputs());
  if (bias.size() != scale.size() || mean.size() != scale.size() || var.size() != scale.size())
    return ctx.error("BatchNormalization parameters differ in size");
  std::vector<double> batch_mean, batch_var;
  Dispatch<kFloatTypes>(xt.dtype(), [&]<class T>() {
    const T* x = xt.data<T>();
    T* y = ctx.output(0).data<T>();
    const int64_t sample = s.c * s.inner;
    if (training) {
      batch_mean.assign(params, 0.0);
      batch_var.assign(params, 0.0);
      const double count = static_cast<double>(s.n * block);
      for (int64_t n = 0; n < s.n; ++n)
        for (int64_t i = 0; i < sample; ++i)
          batch_mean[i / block] += static_cast<double>(x[n * sample + i]);
      for (auto& m : batch_mean) m /= count;
      for (int64_t n = 0; n < s.n; ++n)
        for (int64_t i = 0; i < sample; ++i) {
          double d = static_cast<double>(x[n * sample + i]) - batch_mean[i / block];
          batch_var[i / block] += d * d;
        }
      for (auto& v : batch_var) v /= count;
    }
    const std::vector<double>& m = training ? batch_mean : mean;
    const std::vector<double>& v = training ? batch_var : var;
    std::vector<Acc<T>> a(params), b(params);
    for (int64_t p = 0; p < params; ++p) {
      double inv = 1.0 / std::sqrt(v[p] + eps);
      a[p] = static_cast<Acc<T>>(scale[p] * inv);
      b[p] = static_cast<Acc<T>>(bias[p] - m[p] * scale[p] * inv);
    }
    // Rows of params values (channels-last) or of block values (one channel's plane), over
    // threads: the next layer reads its rows from the cores that wrote them.
    const bool channels_last = ctx.input_channels_last(0);
    const int64_t row = channels_last ? params : block,
                  rows = s.n * sample / std::max<int64_t>(row, 1);
    ParallelRows(ctx.threads(), rows,
                 std::max<int64_t>(1, (int64_t{1} << 15) / std::max<int64_t>(row, 1)),
                 [&](int64_t r0, int64_t r1) {
                   for (int64_t r = r0; r < r1; ++r) {
                     const T* xp = x + r * row;
                     T* yp = y + r * row;
                     if (channels_last) {  // [N, HW, C] (ops/channels_last.h): the same arithmetic
                       for (int64_t p = 0; p < params; ++p)
                         yp[p] = T(static_cast<Acc<T>>(xp[p]) * a[p] + b[p]);
                       continue;
                     }
                     const int64_t p = r % params;
                     const Acc<T> ap = a[p], bp = b[p];
                     for (int64_t i = 0; i < block; ++i)
                       yp[i] = T(static_cast<Acc<T>>(xp[i]) * ap + bp);
                   }
                 });
  });
  if (!training) return OkStatus();
  // Running statistics, then (before opset 14) the saved batch mean and variance.
  std::vector<std::vector<double>> outs(5);
  outs[1].resize(params);
  outs[2].resize(params);
  for (int64_t p = 0; p < params; ++p) {
    outs[1][p] = mean[p] * momentum + batch_mean[p] * (1 - momentum);
    outs[2][p] = var[p] * momentum + batch_var[p] * (1 - momentum);
  }
  outs[3] = batch_mean;
  outs[4] = batch_var;
  for (int i = 1; i < ctx.num_outputs() && i < 5; ++i) {
    Tensor& o = ctx.output(i);
    Dispatch<kFloatTypes>(o.dtype(), [&]<class T>() {
      for (int64_t p = 0; p < o.size() && p < params; ++p)
        o.data<T>()[p] = T(static_cast<Acc<T>>(outs[i][p]));
    });
  }
  return OkStatus();
}

// ---------------------------------------------------------------------------------------------
// InstanceNormalization: per (n, c) statistics over the spatial dims.

Status InstanceNormInfer(InferContext& ctx) {
  for (int i = 0; i < 3; ++i) {
    if (!ctx.has_input(i)) return ctx.error("InstanceNormalization needs input, scale and B");
    KILN_RETURN_IF_ERROR(RequireFloat(ctx, i, "InstanceNormalization input"));
  }
  const Dims& x = ctx.input_dims(0);
  if (x.size() < 2) return ctx.error("InstanceNormalization needs rank >= 2");
  if (NumElements(ctx.input_dims(1)) != x[1] || NumElements(ctx.input_dims(2)) != x[1])
    return ctx.error("InstanceNormalization scale and B must have C = " + std::to_string(x[1]) +
                     " elements");
  return SameAsInput(ctx);
}

// y = (x - mean) / sqrt(var + eps) * scale + bias over one contiguous block.
template <class T>
void NormalizeBlock(const T* x, T* y, int64_t n, double eps, double scale, double bias) {
  double mean = 0, var = 0;
  for (int64_t i = 0; i < n; ++i) mean += static_cast<double>(x[i]);
  mean /= n > 0 ? n : 1;
  for (int64_t i = 0; i < n; ++i) {
    double d = static_cast<double>(x[i]) - mean;
    var += d * d;
  }
  var /= n > 0 ? n : 1;
  const double a = scale / std::sqrt(var + eps), b = bias - mean * a;
  for (int64_t i = 0; i < n; ++i) y[i] = T(static_cast<Acc<T>>(static_cast<double>(x[i]) * a + b));
}

Status InstanceNormCompute(ComputeContext& ctx) {
  const Tensor& xt = ctx.input(0);
  NCD s = SplitNC(xt.dims());
  const double eps = ctx.node().attr_float("epsilon", 1e-5f);
  if (xt.dtype() == DType::kFloat32 && s.inner > 0) {
    const std::vector<float> scale = ReadFloats(ctx.input(1)), bias = ReadFloats(ctx.input(2));
    NormGroupsF32(xt.data<float>(), ctx.output(0).data<float>(), s.n, s.c, s.inner, 1, scale.data(),
                  bias.data(), static_cast<float>(eps), ctx.threads());
    return OkStatus();
  }
  std::vector<double> scale = ReadDoubles(ctx.input(1)), bias = ReadDoubles(ctx.input(2));
  Dispatch<kFloatTypes>(xt.dtype(), [&]<class T>() {
    const T* x = xt.data<T>();
    T* y = ctx.output(0).data<T>();
    for (int64_t n = 0; n < s.n; ++n)
      for (int64_t c = 0; c < s.c; ++c) {
        int64_t off = (n * s.c + c) * s.inner;
        NormalizeBlock(x + off, y + off, s.inner, eps, scale[c], bias[c]);
      }
  });
  return OkStatus();
}

// ---------------------------------------------------------------------------------------------
// LayerNormalization and RMSNormalization: statistics over the trailing dims from `axis`.
// Scale and bias broadcast to those dims (or, failing that, to the whole input).

// Scale or bias expanded to cols (broadcast over the normalized dims) or to rows * cols.
std::vector<double> ExpandAffine(const Tensor& t, const Dims& x, int64_t axis) {
  Dims norm(x.begin() + axis, x.end());
  return BroadcastsTo(t.dims(), norm) ? ExpandDoubles(t, norm) : ExpandDoubles(t, x);
}

Status LayerNormInfer(InferContext& ctx) {
  if (!ctx.has_input(0) || !ctx.has_input(1)) return ctx.error("needs X and Scale");
  KILN_RETURN_IF_ERROR(RequireFloat(ctx, 0, "X"));
  KILN_RETURN_IF_ERROR(RequireFloat(ctx, 1, "Scale"));
  const Dims& x = ctx.input_dims(0);
  LayerNormPlan p;
  const std::string err = PlanLayerNorm(ctx.node(), x, ctx.input_dims(1),
                                        ctx.has_input(2) ? &ctx.input_dims(2) : nullptr, &p);
  if (!err.empty()) return ctx.error(err);
  ctx.set_output(0, ctx.input_dtype(0), x);
  for (int i = 1; i < ctx.num_outputs() && i < 3; ++i)
    ctx.set_output(i, p.stash_type, p.StatDims(x));
  return OkStatus();
}

// Mean (0 for RMS) and 1 / sqrt(variance + eps) of n floats: float sums in kLanes lanes, two
// passes (the mean, then squares of the differences), as ONNX computes in float32.
template <int kLanes>
KILN_AI void MomentsF32(const float* x, int64_t n, float eps, bool rms, float* mean_out,
                        float* inv_out) {
  float part[kLanes] = {};
  int64_t c = 0;
  float mean = 0;
  if (!rms) {
    for (; c + kLanes <= n; c += kLanes)
      for (int l = 0; l < kLanes; ++l) part[l] += x[c + l];
    float sum = 0;
    for (int l = 0; l < kLanes; ++l) sum += part[l];
    for (; c < n; ++c) sum += x[c];
    mean = sum / static_cast<float>(n);
  }
  float sq[kLanes] = {};
  c = 0;
  for (; c + kLanes <= n; c += kLanes)
    for (int l = 0; l < kLanes; ++l) sq[l] += (x[c + l] - mean) * (x[c + l] - mean);
  float var = 0;
  for (int l = 0; l < kLanes; ++l) var += sq[l];
  for (; c < n; ++c) var += (x[c] - mean) * (x[c] - mean);
  *mean_out = mean;
  *inv_out = 1.0f / std::sqrt(var / static_cast<float>(n) + eps);
}

// One float32 row of LayerNormalization / RMSNormalization with per-column scale and bias
// (the transformer case).
template <int kLanes>
KILN_AI void NormRowF32(const float* x, float* y, int64_t n, const float* scale, const float* bias,
                        float eps, bool rms, float* mean_out, float* inv_out) {
  float mean, inv;
  MomentsF32<kLanes>(x, n, eps, rms, &mean, &inv);
  if (bias)
    for (int64_t k = 0; k < n; ++k) y[k] = (x[k] - mean) * inv * scale[k] + bias[k];
  else
    for (int64_t k = 0; k < n; ++k) y[k] = (x[k] - mean) * inv * scale[k];
  *mean_out = mean;
  *inv_out = inv;
}

// Instance and group normalization in float32: groups [g0, g1) of `per_group` channels of
// `inner` contiguous floats each share their statistics; channel c of a group then is
// (x - mean) * inv * scale[c] + bias[c], c counted within the `channels` of one image.
KILN_AI void NormGroups(const float* x, float* y, int64_t g0, int64_t g1, int64_t per_group,
                        int64_t inner, int64_t channels, const float* scale, const float* bias,
                        float eps) {
  const int64_t n = per_group * inner, groups_per_image = channels / per_group;
  for (int64_t g = g0; g < g1; ++g) {
    const float* xg = x + g * n;
    float* yg = y + g * n;
    float mean, inv;
    MomentsF32<16>(xg, n, eps, false, &mean, &inv);
    const int64_t c0 = (g % groups_per_image) * per_group;
    for (int64_t cc = 0; cc < per_group; ++cc) {
      const float a = inv * scale[c0 + cc], b = bias[c0 + cc];
      const float* xc = xg + cc * inner;
      float* yc = yg + cc * inner;
      for (int64_t i = 0; i < inner; ++i) yc[i] = (xc[i] - mean) * a + b;
    }
  }
}

__attribute__((always_inline)) inline void NormRows(const float* x, float* y, int64_t rows,
                                                    int64_t n, const float* scale,
                                                    const float* bias, float eps, bool rms,
                                                    double* means, double* invs) {
  for (int64_t r = 0; r < rows; ++r) {
    float m, i;
    NormRowF32<16>(x + r * n, y + r * n, n, scale, bias, eps, rms, &m, &i);
    means[r] = m;
    invs[r] = i;
  }
}

// NormRows compiled for each instruction set (the 16 lanes are one or two vectors).
#define KILN_NORM_ROWS(name, target_attr)                                                      \
  target_attr void name(const float* x, float* y, int64_t rows, int64_t n, const float* scale, \
                        const float* bias, float eps, bool rms, double* means, double* invs) { \
    NormRows(x, y, rows, n, scale, bias, eps, rms, means, invs);                               \
  }
#define KILN_NORM_GROUPS(name, target_attr)                                                     \
  target_attr void name(const float* x, float* y, int64_t g0, int64_t g1, int64_t per_group,    \
                        int64_t inner, int64_t channels, const float* scale, const float* bias, \
                        float eps) {                                                            \
    NormGroups(x, y, g0, g1, per_group, inner, channels, scale, bias, eps);                     \
  }
KILN_NORM_ROWS(NormRowsBase, )
KILN_NORM_GROUPS(NormGroupsBase, )
#if KILN_X86_DISPATCH
KILN_NORM_ROWS(NormRowsAvx2, __attribute__((target("avx2,fma"))))
KILN_NORM_ROWS(NormRowsAvx512, __attribute__((target("avx512f,fma"))))
KILN_NORM_GROUPS(NormGroupsAvx2, __attribute__((target("avx2,fma"))))
KILN_NORM_GROUPS(NormGroupsAvx512, __attribute__((target("avx512f,fma"))))
#endif
#undef KILN_NORM_ROWS
#undef KILN_NORM_GROUPS

// Float32 instance / group normalization over [outer, channels, inner] with per-channel scale
// and bias, the threads splitting the (image, group) blocks.
void NormGroupsF32(const float* x, float* y, int64_t outer, int64_t channels, int64_t inner,
                   int64_t per_group, const float* scale, const float* bias, float eps,
                   int threads) {
#if KILN_X86_DISPATCH
  auto run = BestIsa() == Isa::kAvx512 ? NormGroupsAvx512
             : BestIsa() == Isa::kAvx2 ? NormGroupsAvx2
                                       : NormGroupsBase;
#else
  auto run = NormGroupsBase;
#endif
  const int64_t groups = outer * (channels / per_group), n = per_group * inner;
  ParallelRows(threads, groups, std::max<int64_t>(1, (int64_t{1} << 15) / std::max<int64_t>(n, 1)),
               [&](int64_t g0, int64_t g1) {
                 run(x, y, g0, g1, per_group, inner, channels, scale, bias, eps);
               });
}

Status LayerNormCompute(ComputeContext& ctx) {
  const Tensor& xt = ctx.input(0);
  LayerNormPlan rc;
  const std::string err = PlanLayerNorm(ctx.node(), xt.dims(), ctx.input(1).dims(),
                                        ctx.has_input(2) ? &ctx.input(2).dims() : nullptr, &rc);
  if (!err.empty()) return ctx.error(err);
  const bool rms = rc.rms;
  const double eps = rc.epsilon;
  std::vector<double> scale = ExpandAffine(ctx.input(1), xt.dims(), rc.axis);
  std::vector<double> bias;
  if (!rms && ctx.has_input(2)) bias = ExpandAffine(ctx.input(2), xt.dims(), rc.axis);
  const int64_t scale_n = static_cast<int64_t>(scale.size());
  const int64_t bias_n = static_cast<int64_t>(bias.size());
  std::vector<double> means(rc.rows), inv_stds(rc.rows);
  const bool per_column = scale_n == rc.cols && (bias_n == 0 || bias_n == rc.cols) &&
                          ctx.input(1).size() == rc.cols &&
                          (bias_n == 0 || ctx.input(2).size() == rc.cols);
  if (xt.dtype() == DType::kFloat32 && per_column && ctx.input(1).dtype() == DType::kFloat32 &&
      (bias_n == 0 || ctx.input(2).dtype() == DType::kFloat32) && rc.cols > 0 &&
      ctx.node().attr_int("stash_type", 1) == 1) {
    const float* b = bias_n ? ctx.input(2).data<float>() : nullptr;
#if KILN_X86_DISPATCH
    auto rows = BestIsa() == Isa::kAvx512 ? NormRowsAvx512
                : BestIsa() == Isa::kAvx2 ? NormRowsAvx2
                                          : NormRowsBase;
#else
    auto rows = NormRowsBase;
#endif
    const float* xs = xt.data<float>();
    float* ys = ctx.output(0).data<float>();
    ParallelRows(ctx.threads(), rc.rows, std::max<int64_t>(1, (int64_t{1} << 15) / rc.cols),
                 [&](int64_t r0, int64_t r1) {
                   rows(xs + r0 * rc.cols, ys + r0 * rc.cols, r1 - r0, rc.cols,
                        ctx.input(1).data<float>(), b, static_cast<float>(eps), rms,
                        means.data() + r0, inv_stds.data() + r0);
                 });
  } else
    Dispatch<kFloatTypes>(xt.dtype(), [&]<class T>() {
      const T* x = xt.data<T>();
      T* y = ctx.output(0).data<T>();
      for (int64_t r = 0; r < rc.rows; ++r) {
        const T* xr = x + r * rc.cols;
        T* yr = y + r * rc.cols;
        double mean = 0, var = 0;
        if (!rms) {
          for (int64_t c = 0; c < rc.cols; ++c) mean += static_cast<double>(xr[c]);
          mean /= rc.cols > 0 ? rc.cols : 1;
        }
        for (int64_t c = 0; c < rc.cols; ++c) {
          double d = static_cast<double>(xr[c]) - mean;
          var += d * d;
        }
        var /= rc.cols > 0 ? rc.cols : 1;
        const double inv = 1.0 / std::sqrt(var + eps);
        means[r] = mean;
        inv_stds[r] = inv;
        const int64_t so = scale_n == rc.cols ? 0 : r * rc.cols;
        const int64_t bo = bias_n == rc.cols ? 0 : r * rc.cols;
        for (int64_t c = 0; c < rc.cols; ++c) {
          double v = (static_cast<double>(xr[c]) - mean) * inv * scale[so + c];
          if (bias_n) v += bias[bo + c];
          yr[c] = T(static_cast<Acc<T>>(v));
        }
      }
    });
  for (int i = 1; i < ctx.num_outputs() && i < 3; ++i) {
    Tensor& o = ctx.output(i);
    const std::vector<double>& src = i == 1 ? means : inv_stds;
    Dispatch<kFloatTypes>(o.dtype(), [&]<class T>() {
      for (int64_t r = 0; r < rc.rows && r < o.size(); ++r)
        o.data<T>()[r] = T(static_cast<Acc<T>>(src[r]));
    });
  }
  return OkStatus();
}

// ---------------------------------------------------------------------------------------------
// GroupNormalization: statistics per (n, group) over C / num_groups channels and the spatial
// dims. Opset 18 scales per group; opset 21 per channel.

Status GroupNormInfer(InferContext& ctx) {
  for (int i = 0; i < 3; ++i) {
    if (!ctx.has_input(i)) return ctx.error("GroupNormalization needs X, scale and bias");
    KILN_RETURN_IF_ERROR(RequireFloat(ctx, i, "GroupNormalization input"));
  }
  GroupNormPlan p;
  const std::string err =
      PlanGroupNorm(ctx.node(), ctx.input_dims(0), ctx.input_dims(1), ctx.input_dims(2), &p);
  if (!err.empty()) return ctx.error(err);
  return SameAsInput(ctx);
}

Status GroupNormCompute(ComputeContext& ctx) {
  const Tensor& xt = ctx.input(0);
  GroupNormPlan p;
  const std::string err =
      PlanGroupNorm(ctx.node(), xt.dims(), ctx.input(1).dims(), ctx.input(2).dims(), &p);
  if (!err.empty()) return ctx.error(err);
  const NCD s{p.batch, p.channels, p.inner};
  const int64_t groups = p.groups, cpg = p.channels_per_group;
  const double eps = p.epsilon;
  std::vector<double> scale = ReadDoubles(ctx.input(1)), bias = ReadDoubles(ctx.input(2));
  auto channel_param = [&](const std::vector<double>& v, bool per_group, int64_t c) {
    return per_group ? v[c / cpg] : v[c];
  };
  if (xt.dtype() == DType::kFloat32 && s.inner > 0 && cpg > 0) {
    std::vector<float> sc(static_cast<size_t>(s.c)), bi(static_cast<size_t>(s.c));
    for (int64_t c = 0; c < s.c; ++c) {
      sc[c] = static_cast<float>(channel_param(scale, p.scale_per_group, c));
      bi[c] = static_cast<float>(channel_param(bias, p.bias_per_group, c));
    }
    NormGroupsF32(xt.data<float>(), ctx.output(0).data<float>(), s.n, s.c, s.inner, cpg, sc.data(),
                  bi.data(), static_cast<float>(eps), ctx.threads());
    return OkStatus();
  }
  Dispatch<kFloatTypes>(xt.dtype(), [&]<class T>() {
    const T* x = xt.data<T>();
    T* y = ctx.output(0).data<T>();
    const int64_t gsize = cpg * s.inner;
    for (int64_t n = 0; n < s.n; ++n)
      for (int64_t g = 0; g < groups; ++g) {
        const int64_t off = (n * groups + g) * gsize;
        double mean = 0, var = 0;
        for (int64_t i = 0; i < gsize; ++i) mean += static_cast<double>(x[off + i]);
        mean /= gsize > 0 ? gsize : 1;
        for (int64_t i = 0; i < gsize; ++i) {
          double d = static_cast<double>(x[off + i]) - mean;
          var += d * d;
        }
        var /= gsize > 0 ? gsize : 1;
        const double inv = 1.0 / std::sqrt(var + eps);
        for (int64_t cc = 0; cc < cpg; ++cc) {
          const int64_t c = g * cpg + cc;
          const double a = channel_param(scale, p.scale_per_group, c) * inv;
          const double b = channel_param(bias, p.bias_per_group, c) - mean * a;
          for (int64_t i = 0; i < s.inner; ++i) {
            const int64_t k = off + cc * s.inner + i;
            y[k] = T(static_cast<Acc<T>>(static_cast<double>(x[k]) * a + b));
          }
        }
      }
  });
  return OkStatus();
}

// ---------------------------------------------------------------------------------------------
// LRN across channels: y = x / (bias + alpha / size * sum of squares over the window)^beta.

Status LrnInfer(InferContext& ctx) {
  KILN_RETURN_IF_ERROR(RequireFloat(ctx, 0, "LRN input"));
  if (ctx.input_rank(0) < 2) return ctx.error("LRN needs rank >= 2");
  if (ctx.node().attr_int("size", 0) <= 0) return ctx.error("LRN needs a positive size");
  return SameAsInput(ctx);
}

// float32: one plane of outputs at a time, the threads splitting the planes; the sum of squares
// in float (channels in order), then x * exp(-beta log(bias + k sum)) by the vector log and exp.
// AlexNet's two LRNs took 9.1 ms a run in the double loop above; ORT's are float too.
void LrnF32(const float* x, float* y, const NCD& s, int64_t lo, int64_t hi, float k, float beta,
            float bias, int threads) {
  ParallelFor(threads, s.n * s.c, [&](int64_t p0, int64_t p1) {
    std::vector<float> t(static_cast<size_t>(s.inner));
    for (int64_t p = p0; p < p1; ++p) {
      const int64_t b = p / s.c, c = p % s.c;
      const int64_t c0 = std::max<int64_t>(0, c - lo), c1 = std::min(s.c - 1, c + hi);
      std::fill(t.begin(), t.end(), 0.0f);
      for (int64_t q = c0; q <= c1; ++q) {
        const float* xq = x + (b * s.c + q) * s.inner;
        for (int64_t i = 0; i < s.inner; ++i) t[i] += xq[i] * xq[i];
      }
      for (int64_t i = 0; i < s.inner; ++i) t[i] = bias + k * t[i];
      LogF32(t.data(), t.data(), s.inner);
      for (int64_t i = 0; i < s.inner; ++i) t[i] *= -beta;
      ExpF32(t.data(), t.data(), s.inner);
      const float* xp = x + p * s.inner;
      float* yp = y + p * s.inner;
      for (int64_t i = 0; i < s.inner; ++i) yp[i] = xp[i] * t[i];
    }
  });
}

Status LrnCompute(ComputeContext& ctx) {
  const ir::Node& n = ctx.node();
  const double alpha = n.attr_float("alpha", 1e-4f), beta = n.attr_float("beta", 0.75f);
  const double bias = n.attr_float("bias", 1.0f);
  const int64_t size = n.attr_int("size", 1);
  const Tensor& xt = ctx.input(0);
  NCD s = SplitNC(xt.dims());
  const int64_t lo = (size - 1) / 2, hi = size - 1 - lo;
  if (xt.dtype() == DType::kFloat32) {
    LrnF32(xt.data<float>(), ctx.output(0).data<float>(), s, lo, hi,
           static_cast<float>(alpha / size), static_cast<float>(beta), static_cast<float>(bias),
           ctx.threads());
    return OkStatus();
  }
  Dispatch<kFloatTypes>(xt.dtype(), [&]<class T>() {
    const T* x = xt.data<T>();
    T* y = ctx.output(0).data<T>();
    for (int64_t b = 0; b < s.n; ++b)
      for (int64_t c = 0; c < s.c; ++c) {
        const int64_t c0 = std::max<int64_t>(0, c - lo), c1 = std::min(s.c - 1, c + hi);
        for (int64_t i = 0; i < s.inner; ++i) {
          double sq = 0;
          for (int64_t k = c0; k <= c1; ++k) {
            double v = static_cast<double>(x[(b * s.c + k) * s.inner + i]);
            sq += v * v;
          }
          const int64_t o = (b * s.c + c) * s.inner + i;
          y[o] = T(static_cast<Acc<T>>(static_cast<double>(x[o]) /
                                       std::pow(bias + alpha / size * sq, beta)));
        }
      }
  });
  return OkStatus();
}

// ---------------------------------------------------------------------------------------------
// MeanVarianceNormalization: (x - mean) / (std + 1e-9) over `axes` (default N, H, W), and
// LpNormalization: x / ||x||_p along one axis.

// Iterates the groups a reduction over `reduced` axes forms: calls fn(offsets) with the
// element offsets of one group, for each group.
template <class F>
void ForEachReductionGroup(const Dims& dims, const std::vector<char>& reduced, F&& fn) {
  const int rank = static_cast<int>(dims.size());
  Dims st = Strides(dims);
  Dims keep, red;
  Dims keep_st, red_st;
  for (int d = 0; d < rank; ++d) {
    (reduced[d] ? red : keep).push_back(dims[d]);
    (reduced[d] ? red_st : keep_st).push_back(st[d]);
  }
  const int64_t nkeep = NumElements(keep), nred = NumElements(red);
  std::vector<int64_t> offsets(nred);
  for (int64_t r = 0; r < nred; ++r) {
    int64_t rem = r, off = 0;
    for (int d = static_cast<int>(red.size()) - 1; d >= 0; --d) {
      off += (rem % red[d]) * red_st[d];
      rem /= red[d];
    }
    offsets[r] = off;
  }
  std::vector<int64_t> group(nred);
  for (int64_t k = 0; k < nkeep; ++k) {
    int64_t rem = k, base = 0;
    for (int d = static_cast<int>(keep.size()) - 1; d >= 0; --d) {
      base += (rem % keep[d]) * keep_st[d];
      rem /= keep[d];
    }
    for (int64_t r = 0; r < nred; ++r) group[r] = base + offsets[r];
    fn(group);
  }
}

// MeanVarianceNormalization's float32 layout: the axes collapse into alternating kept and
// reduced blocks, so the tensor is `rows` rows of `inner` contiguous floats, each of which either
// belongs to one group (the innermost block reduced) or runs across `inner` consecutive groups
// (the innermost block kept). Groups number the kept coordinates row-major.
struct MvnLayout {
  std::vector<int64_t> blocks;  // the outer blocks' lengths, outermost first
  std::vector<char> reduced;    // per outer block
  int64_t inner = 1, rows = 1, groups = 1;
  bool inner_reduced = true;

  // The group of row r's first element.
  int64_t GroupOf(int64_t r) const {
    int64_t g = 0, scale = inner_reduced ? 1 : inner;
    for (int b = static_cast<int>(blocks.size()) - 1; b >= 0; --b) {
      const int64_t i = r % blocks[b];
      r /= blocks[b];
      if (!reduced[b]) {
        g += i * scale;
        scale *= blocks[b];
      }
    }
    return g;
  }
};

MvnLayout CollapseMvn(const Dims& dims, const std::vector<char>& reduced) {
  MvnLayout l;
  for (size_t a = 0; a < dims.size(); ++a) {
    if (dims[a] == 1) continue;  // in no group's way
    if (!l.reduced.empty() && l.reduced.back() == reduced[a])
      l.blocks.back() *= dims[a];
    else {
      l.blocks.push_back(dims[a]);
      l.reduced.push_back(reduced[a]);
    }
  }
  if (!l.blocks.empty()) {
    l.inner = l.blocks.back();
    l.inner_reduced = l.reduced.back();
    l.blocks.pop_back();
    l.reduced.pop_back();
  }
  l.groups = l.inner_reduced ? 1 : l.inner;
  for (size_t b = 0; b < l.blocks.size(); ++b) {
    l.rows *= l.blocks[b];
    if (!l.reduced[b]) l.groups *= l.blocks[b];
  }
  return l;
}

// Adds rows [r0, r1)'s values and squares, in double, to their groups' sum and sq.
KILN_AI void MvnSums(const float* x, const MvnLayout& l, int64_t r0, int64_t r1, double* sum,
                     double* sq) {
  constexpr int kLanes = 16;
  for (int64_t r = r0; r < r1; ++r) {
    const float* row = x + r * l.inner;
    const int64_t g = l.GroupOf(r);
    if (!l.inner_reduced) {
      for (int64_t k = 0; k < l.inner; ++k) {
        const double v = row[k];
        sum[g + k] += v;
        sq[g + k] += v * v;
      }
      continue;
    }
    double s[kLanes] = {}, q[kLanes] = {};
    int64_t k = 0;
    for (; k + kLanes <= l.inner; k += kLanes)
      for (int i = 0; i < kLanes; ++i) {
        const double v = row[k + i];
        s[i] += v;
        q[i] += v * v;
      }
    for (; k < l.inner; ++k) {
      const double v = row[k];
      s[0] += v;
      q[0] += v * v;
    }
    for (int i = 0; i < kLanes; ++i) {
      sum[g] += s[i];
      sq[g] += q[i];
    }
  }
}

// y = (x - mean) * inv of each element's group, for rows [r0, r1).
KILN_AI void MvnApply(const float* x, float* y, const MvnLayout& l, int64_t r0, int64_t r1,
                      const double* mean, const double* inv) {
  for (int64_t r = r0; r < r1; ++r) {
    const float* row = x + r * l.inner;
    float* out = y + r * l.inner;
    const int64_t g = l.GroupOf(r);
    if (l.inner_reduced) {
      const double m = mean[g], a = inv[g];
      for (int64_t k = 0; k < l.inner; ++k) out[k] = static_cast<float>((row[k] - m) * a);
    } else {
      for (int64_t k = 0; k < l.inner; ++k)
        out[k] = static_cast<float>((row[k] - mean[g + k]) * inv[g + k]);
    }
  }
}

#define KILN_MVN(sums, apply, target_attr)                                                       \
  target_attr void sums(const float* x, const MvnLayout& l, int64_t r0, int64_t r1, double* sum, \
                        double* sq) {                                                            \
    MvnSums(x, l, r0, r1, sum, sq);                                                              \
  }                                                                                              \
  target_attr void apply(const float* x, float* y, const MvnLayout& l, int64_t r0, int64_t r1,   \
                         const double* mean, const double* inv) {                                \
    MvnApply(x, y, l, r0, r1, mean, inv);                                                        \
  }
KILN_MVN(MvnSumsBase, MvnApplyBase, )
#if KILN_X86_DISPATCH
KILN_MVN(MvnSumsAvx2, MvnApplyAvx2, __attribute__((target("avx2,fma"))))
KILN_MVN(MvnSumsAvx512, MvnApplyAvx512, __attribute__((target("avx512f,fma"))))
#endif
#undef KILN_MVN

// Float32 MeanVarianceNormalization over `reduced` axes: the sums over threads (each part its
// own totals), then the normalization over threads. `variance` false: only the mean goes.
void MvnF32(const float* x, float* y, const Dims& dims, const std::vector<char>& reduced,
            bool variance, int threads) {
  const MvnLayout l = CollapseMvn(dims, reduced);
  if (l.rows * l.inner == 0) return;
#if KILN_X86_DISPATCH
  const Isa isa = BestIsa();
  auto sums = isa == Isa::kAvx512 ? MvnSumsAvx512 : isa == Isa::kAvx2 ? MvnSumsAvx2 : MvnSumsBase;
  auto apply = isa == Isa::kAvx512 ? MvnApplyAvx512
               : isa == Isa::kAvx2 ? MvnApplyAvx2
                                   : MvnApplyBase;
#else
  auto sums = MvnSumsBase;
  auto apply = MvnApplyBase;
#endif
  const int64_t min_rows = std::max<int64_t>(1, (int64_t{1} << 15) / l.inner);
  const int parts = static_cast<int>(std::clamp<int64_t>(l.rows / min_rows, 1, threads));
  const auto G = static_cast<size_t>(l.groups);
  std::vector<double> acc(2 * G * static_cast<size_t>(parts), 0.0);
  ParallelFor(parts, parts, [&](int64_t p0, int64_t p1) {
    for (int64_t p = p0; p < p1; ++p)
      sums(x, l, l.rows * p / parts, l.rows * (p + 1) / parts, &acc[2 * G * p],
           &acc[2 * G * p + G]);
  });
  const double n = static_cast<double>(l.rows * l.inner / l.groups);
  std::vector<double> mean(G), inv(G, 1.0);
  for (size_t g = 0; g < G; ++g) {
    double s = 0, q = 0;
    for (int p = 0; p < parts; ++p) {
      s += acc[2 * G * p + g];
      q += acc[2 * G * p + G + g];
    }
    mean[g] = s / n;
    if (variance) inv[g] = 1.0 / (std::sqrt(std::max(0.0, q / n - mean[g] * mean[g])) + 1e-9);
  }
  ParallelRows(threads, l.rows, min_rows,
               [&](int64_t r0, int64_t r1) { apply(x, y, l, r0, r1, mean.data(), inv.data()); });
}

// Opset 9 normalizes over `axes`; the experimental opset-1 form normalizes each instance over
// H, W (and C with across_channels), optionally only subtracting the mean.
std::vector<int64_t> MvnAxes(const ir::Node& n, int64_t opset) {
  if (opset >= 9) return n.attr_ints("axes", {0, 2, 3});
  if (n.attr_int("across_channels", 0)) return {1, 2, 3};
  return {2, 3};
}

Status MvnInfer(InferContext& ctx) {
  KILN_RETURN_IF_ERROR(RequireFloat(ctx, 0, "MeanVarianceNormalization input"));
  const int64_t rank = ctx.input_rank(0);
  for (int64_t a : MvnAxes(ctx.node(), ctx.opset()))
    if (!NormalizeAxis(a, rank))
      return ctx.error("axis " + std::to_string(a) + " is out of range for rank " +
                       std::to_string(rank));
  return SameAsInput(ctx);
}

Status MvnCompute(ComputeContext& ctx) {
  const Tensor& xt = ctx.input(0);
  const int64_t rank = xt.rank();
  std::vector<char> reduced(rank, 0);
  for (int64_t a : MvnAxes(ctx.node(), ctx.opset())) {
    if (!NormalizeAxis(a, rank)) return ctx.error("axis out of range");
    reduced[a] = 1;
  }
  const bool variance = ctx.opset() >= 9 || ctx.node().attr_int("normalize_variance", 1) != 0;
  if (xt.dtype() == DType::kFloat32 && !ReferenceKernels()) {
    MvnF32(xt.data<float>(), ctx.output(0).data<float>(), xt.dims(), reduced, variance,
           ctx.threads());
    return OkStatus();
  }
  Dispatch<kFloatTypes>(xt.dtype(), [&]<class T>() {
    const T* x = xt.data<T>();
    T* y = ctx.output(0).data<T>();
    ForEachReductionGroup(xt.dims(), reduced, [&](const std::vector<int64_t>& g) {
      double mean = 0, sq = 0;
      for (int64_t o : g) {
        double v = static_cast<double>(x[o]);
        mean += v;
        sq += v * v;
      }
      const double n = g.empty() ? 1.0 : static_cast<double>(g.size());
      mean /= n;
      const double denom = variance ? std::sqrt(std::max(0.0, sq / n - mean * mean)) + 1e-9 : 1.0;
      for (int64_t o : g) y[o] = T(static_cast<Acc<T>>((static_cast<double>(x[o]) - mean) / denom));
    });
  });
  return OkStatus();
}

Status LpNormInfer(InferContext& ctx) {
  KILN_RETURN_IF_ERROR(RequireFloat(ctx, 0, "LpNormalization input"));
  int64_t axis = ctx.node().attr_int("axis", -1);
  if (!NormalizeAxis(axis, ctx.input_rank(0))) return ctx.error("axis out of range");
  int64_t p = ctx.node().attr_int("p", 2);
  if (p != 1 && p != 2)
    return ctx.error("LpNormalization p must be 1 or 2, got " + std::to_string(p));
  return SameAsInput(ctx);
}

// LpNormalization in float32 over the axis of n values `inner` apart, outer blocks over threads:
// a row (inner == 1) sums in 16 lanes; columns (inner > 1) accumulate across the n rows, vectors
// along the columns. Then x / norm; an all-zero slice stays zero.
template <int P>
void LpNormF32(const float* x, float* y, int64_t outer, int64_t n, int64_t inner, int threads) {
  auto term = [](float v) { return P == 1 ? std::fabs(v) : v * v; };
  const int t = static_cast<int>(std::min<int64_t>(threads, outer * n * inner / (1 << 15) + 1));
  ParallelFor(t, outer, [&](int64_t o0, int64_t o1) {
    std::vector<float> norm(static_cast<size_t>(inner));
    for (int64_t o = o0; o < o1; ++o) {
      const float* xb = x + o * n * inner;
      float* yb = y + o * n * inner;
      if (inner == 1) {
        float lanes[16] = {};
        int64_t i = 0;
        for (; i + 16 <= n; i += 16)
          for (int l = 0; l < 16; ++l) lanes[l] += term(xb[i + l]);
        float sum = 0;
        for (float l : lanes) sum += l;
        for (; i < n; ++i) sum += term(xb[i]);
        const float nm = P == 2 ? std::sqrt(sum) : sum;
        for (i = 0; i < n; ++i) yb[i] = nm == 0 ? 0.0f : xb[i] / nm;
        continue;
      }
      std::fill(norm.begin(), norm.end(), 0.0f);
      for (int64_t j = 0; j < n; ++j)
        for (int64_t i = 0; i < inner; ++i) norm[i] += term(xb[j * inner + i]);
      if (P == 2)
        for (float& v : norm) v = std::sqrt(v);
      for (int64_t j = 0; j < n; ++j)
        for (int64_t i = 0; i < inner; ++i)
          yb[j * inner + i] = norm[i] == 0 ? 0.0f : xb[j * inner + i] / norm[i];
    }
  });
}

Status LpNormCompute(ComputeContext& ctx) {
  const Tensor& xt = ctx.input(0);
  int64_t axis = ctx.node().attr_int("axis", -1);
  if (!NormalizeAxis(axis, xt.rank())) return ctx.error("axis out of range");
  const int64_t p = ctx.node().attr_int("p", 2);
  if (xt.dtype() == DType::kFloat32) {
    int64_t outer = 1, inner = 1;
    for (int64_t d = 0; d < axis; ++d) outer *= xt.dim(static_cast<int>(d));
    for (int64_t d = axis + 1; d < xt.rank(); ++d) inner *= xt.dim(static_cast<int>(d));
    const int64_t n = xt.dim(static_cast<int>(axis));
    float* y = ctx.output(0).data<float>();
    if (p == 1)
      LpNormF32<1>(xt.data<float>(), y, outer, n, inner, ctx.threads());
    else
      LpNormF32<2>(xt.data<float>(), y, outer, n, inner, ctx.threads());
    return OkStatus();
  }
  std::vector<char> reduced(xt.rank(), 0);
  reduced[axis] = 1;
  Dispatch<kFloatTypes>(xt.dtype(), [&]<class T>() {
    const T* x = xt.data<T>();
    T* y = ctx.output(0).data<T>();
    ForEachReductionGroup(xt.dims(), reduced, [&](const std::vector<int64_t>& g) {
      double norm = 0;
      for (int64_t o : g) {
        double v = static_cast<double>(x[o]);
        norm += p == 1 ? std::fabs(v) : v * v;
      }
      if (p == 2) norm = std::sqrt(norm);
      // An all-zero slice stays zero (the reference divides only where the norm is nonzero).
      for (int64_t o : g)
        y[o] = T(static_cast<Acc<T>>(norm == 0 ? 0.0 : static_cast<double>(x[o]) / norm));
    });
  });
  return OkStatus();
}

// ---------------------------------------------------------------------------------------------
// Dropout. Inference returns the input and an all-true mask. Training (opset 12+,
// training_mode input true) keeps x / (1 - ratio) where a uniform draw >= ratio. The draws use
// MT19937 seeded with `seed` and 53-bit doubles, the same stream as numpy's legacy
// RandomState(seed).uniform, so seeded models reproduce the ONNX reference.

Status DropoutInfer(InferContext& ctx) {
  KILN_RETURN_IF_ERROR(RequireFloat(ctx, 0, "Dropout input"));
  ctx.set_output(0, ctx.input_dtype(0), ctx.input_dims(0));
  if (ctx.num_outputs() > 1)
    ctx.set_output(1, ctx.opset() >= 10 ? DType::kBool : ctx.input_dtype(0), ctx.input_dims(0));
  if (ctx.opset() >= 12 && ctx.has_input(1) && NumElements(ctx.input_dims(1)) != 1)
    return ctx.error("Dropout ratio must be a scalar");
  if (ctx.opset() >= 12 && ctx.has_input(2) &&
      (ctx.input_dtype(2) != DType::kBool || NumElements(ctx.input_dims(2)) != 1))
    return ctx.error("Dropout training_mode must be a bool scalar");
  return OkStatus();
}

Status DropoutCompute(ComputeContext& ctx) {
  const Tensor& xt = ctx.input(0);
  double ratio = ctx.opset() >= 12 ? 0.5 : ctx.node().attr_float("ratio", 0.5f);
  bool training = false;
  if (ctx.opset() >= 12) {
    if (ctx.has_input(1)) ratio = ctx.input(1).GetDouble(0);
    if (ctx.has_input(2)) training = ctx.input(2).data<bool>()[0];
  }
  if (training && (ratio < 0 || ratio >= 1))
    return ctx.error("Dropout ratio must be in [0, 1), got " + std::to_string(ratio));
  const int64_t n = xt.size();
  std::vector<char> keep(n, 1);
  double scale = 1.0;
  if (training && ratio > 0) {
    const ir::Attribute* seed_attr = ctx.node().attr("seed");
    std::mt19937 gen(seed_attr ? static_cast<uint32_t>(seed_attr->i) : std::random_device{}());
    for (int64_t i = 0; i < n; ++i) {
      uint32_t a = gen() >> 5, b = gen() >> 6;
      double u = (a * 67108864.0 + b) / 9007199254740992.0;
      keep[i] = u >= ratio;
    }
    scale = 1.0 / (1.0 - ratio);
  }
  Dispatch<kFloatTypes>(xt.dtype(), [&]<class T>() {
    const T* x = xt.data<T>();
    T* y = ctx.output(0).data<T>();
    if (scale == 1.0) {
      for (int64_t i = 0; i < n; ++i) y[i] = keep[i] ? x[i] : T(0.0f);
    } else {
      const Acc<T> s = static_cast<Acc<T>>(scale);
      for (int64_t i = 0; i < n; ++i) y[i] = keep[i] ? T(static_cast<Acc<T>>(x[i]) * s) : T(0.0f);
    }
  });
  if (ctx.num_outputs() > 1) {
    Tensor& m = ctx.output(1);
    Dispatch<kAllTypes>(m.dtype(), [&]<class T>() {
      for (int64_t i = 0; i < n && i < m.size(); ++i)
        m.data<T>()[i] = ConvertValue<T>(static_cast<int>(keep[i]));
    });
  }
  return OkStatus();
}

}  // namespace

void RegisterNormalizationOps(OpRegistry& r) {
  r.Register("BatchNormalization", BatchNormInfer, BatchNormCompute);
  r.Register("InstanceNormalization", InstanceNormInfer, InstanceNormCompute);
  r.Register("LayerNormalization", LayerNormInfer, LayerNormCompute);
  r.Register("RMSNormalization", LayerNormInfer, LayerNormCompute);
  r.Register("GroupNormalization", GroupNormInfer, GroupNormCompute);
  r.Register("LRN", LrnInfer, LrnCompute);
  r.Register("MeanVarianceNormalization", MvnInfer, MvnCompute);
  r.Register("LpNormalization", LpNormInfer, LpNormCompute);
  r.Register("Dropout", DropoutInfer, DropoutCompute);
}

}  // namespace kiln::ops
