// A 2-D convolution in double for the kernel tests: any group, stride, asymmetric pads and
// dilation, then + bias, + a residual and the activation, as FusedConv defines them.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "kernels/x86/conv_params.h"
#include "kernels/x86/post_ops.h"

namespace kiln::testing {

// PostOps' activation in double.
inline double Activate(double v, const ops::PostOps& post) {
  using Act = ops::PostOps::Act;
  if (post.act == Act::kRelu) v = std::max(v, 0.0);
  if (post.act == Act::kLeakyRelu && v < 0) v *= post.alpha;
  if (post.act == Act::kClip) v = std::min(std::max(v, double(post.alpha)), double(post.beta));
  if (post.act == Act::kSwish) v = v / (1 + std::exp(-v));
  if (post.act == Act::kHardSwish) v *= std::min(std::max(v / 6 + 0.5, 0.0), 1.0);
  return v;
}

// y [N, M, OH, OW] = act(conv(x, w) + b + z) with x [N, C, H, W], w [M, C / group, KH, KW],
// z (may be null) NCHW like y, b (may be null) [M]. `magnitude` (may be null) gets each output's
// |b| + sum of |terms| of the convolution, the scale of its rounding error.
inline std::vector<double> ReferenceConv(const ops::Conv2DParams& p, const float* x, const float* w,
                                         const float* b, const float* z, const ops::PostOps& post,
                                         std::vector<double>* magnitude = nullptr) {
  const int64_t Cg = p.C / p.group, Mg = p.M / p.group, OHW = p.OH * p.OW;
  std::vector<double> y(static_cast<size_t>(p.N * p.M * OHW));
  if (magnitude) magnitude->assign(y.size(), 0.0);
  for (int64_t n = 0; n < p.N; ++n)
    for (int64_t m = 0; m < p.M; ++m)
      for (int64_t oh = 0; oh < p.OH; ++oh)
        for (int64_t ow = 0; ow < p.OW; ++ow) {
          double acc = b ? b[m] : 0.0, mag = std::fabs(acc);
          for (int64_t c = 0; c < Cg; ++c)
            for (int64_t kh = 0; kh < p.KH; ++kh)
              for (int64_t kw = 0; kw < p.KW; ++kw) {
                const int64_t ih = oh * p.sh - p.ph + kh * p.dh, iw = ow * p.sw - p.pw + kw * p.dw;
                if (ih < 0 || ih >= p.H || iw < 0 || iw >= p.W) continue;
                const int64_t ci = (m / Mg) * Cg + c;
                const double t = double(w[((m * Cg + c) * p.KH + kh) * p.KW + kw]) *
                                 x[((n * p.C + ci) * p.H + ih) * p.W + iw];
                acc += t;
                mag += std::fabs(t);
              }
          const size_t o = static_cast<size_t>((n * p.M + m) * OHW + oh * p.OW + ow);
          if (magnitude) (*magnitude)[o] = mag;
          if (z) acc += z[o];
          y[o] = Activate(acc, post);
        }
  return y;
}

}  // namespace kiln::testing
