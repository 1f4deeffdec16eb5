// Convolution family: Conv, ConvTranspose, DeformConv, Col2Im.
// Conv is im2col + a blocked GEMM (a 1x1 stride-1 unpadded conv is a direct GEMM on the input,
// a 1-D / 2-D depthwise conv a direct kernel, conv_depthwise.h); ConvTranspose is
// GEMM + col2im. 1-D and 2-D problems are handled as 3-D ones with leading unit dims. The 16-bit
// float types are computed in float, as the ONNX reference does.
#include <numeric>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "kernels/dnnl/conv3d_dnnl.h"
#include "kernels/dnnl/conv_dnnl.h"
#include "kernels/dnnl/dnnl_available.h"
#include "kernels/dnnl/gemm_dnnl.h"
#include "kernels/reference/conv_shape_of.h"
#include "kernels/x86/conv_depthwise.h"
#include "kernels/x86/conv_direct.h"
#include "kernels/x86/conv_few_outputs.h"
#include "kernels/x86/conv_gemm.h"
#include "kernels/x86/conv_grouped.h"
#include "kernels/x86/conv_transpose.h"
#include "kernels/x86/conv_winograd.h"
#include "kernels/x86/cpu_isa.h"
#include "kernels/x86/gemm_kernels.h"
#include "kernels/x86/scratch.h"
#include "kernels/x86/thread_pool.h"
#include "kernels/x86/vector_math.h"
#include "ops/channels_last.h"
#include "ops/common.h"
#include "ops/conv_geometry.h"
#include "ops/shape_ops_util.h"
#include "ops/unary_ops.h"

namespace kiln::ops {
namespace {

// Upper bound on the im2col buffer (elements); larger problems are done in tiles of rows.
constexpr int64_t kColBudget = int64_t{1} << 18;

// An input as a pointer in the compute type (float for the 16-bit floats, converted once).
template <class T>
class InBuf {
 public:
  using C = Acc<T>;
  explicit InBuf(const Tensor& t) {
    if constexpr (kIsHalfLike<T>) {
      store_.resize(t.size());
      const T* s = t.data<T>();
      for (int64_t i = 0; i < t.size(); ++i) store_[i] = static_cast<float>(s[i]);
      p_ = store_.data();
    } else {
      p_ = t.data<T>();
    }
  }
  const C* get() const { return p_; }

 private:
  std::vector<C> store_;
  const C* p_ = nullptr;
};

// An output written in the compute type; Finish converts back for the 16-bit floats.
template <class T>
class OutBuf {
 public:
  using C = Acc<T>;
  explicit OutBuf(Tensor& t) : t_(t) {
    if constexpr (kIsHalfLike<T>) {
      store_.assign(t.size(), 0.0f);
      p_ = store_.data();
    } else {
      p_ = t.data<T>();
    }
  }
  C* get() { return p_; }
  void Finish() {
    if constexpr (kIsHalfLike<T>) {
      T* d = t_.data<T>();
      for (size_t i = 0; i < store_.size(); ++i) d[i] = T(store_[i]);
    }
  }

 private:
  Tensor& t_;
  std::vector<C> store_;
  C* p_ = nullptr;
};

bool IsFloatType(DType t) {
  return t == DType::kFloat32 || t == DType::kFloat64 || t == DType::kFloat16 ||
         t == DType::kBFloat16;
}

// The output columns [lo, hi) of a row of OW whose input column ow * sw + off lies in [0, W).
std::pair<int64_t, int64_t> InsideColumns(int64_t off, int64_t sw, int64_t W, int64_t OW) {
  int64_t lo = off >= 0 ? 0 : (-off + sw - 1) / sw;
  int64_t hi = W - 1 - off < 0 ? 0 : (W - 1 - off) / sw + 1;
  lo = std::min(lo, OW);
  return {lo, std::max(lo, std::min(hi, OW))};
}

// im2col for output rows [r0, r1) (a row is one (od, oh) pair): col[(c,kd,kh,kw)][(r - r0)*OW +
// ow].
template <class C>
void Im2Col(const C* x, int64_t channels, const Geom3& g, int64_t r0, int64_t r1, C* col) {
  const int64_t D = g.in[0], H = g.in[1], W = g.in[2], OH = g.out[1], OW = g.out[2];
  const int64_t ncols = (r1 - r0) * OW, sw = g.s[2];
  C* row = col;
  for (int64_t c = 0; c < channels; ++c) {
    for (int64_t kd = 0; kd < g.k[0]; ++kd) {
      for (int64_t kh = 0; kh < g.k[1]; ++kh) {
        for (int64_t kw = 0; kw < g.k[2]; ++kw, row += ncols) {
          const int64_t off = kw * g.d[2] - g.p[2];
          const auto [lo, hi] = InsideColumns(off, sw, W, OW);
          for (int64_t r = r0; r < r1; ++r) {
            C* dst = row + (r - r0) * OW;
            const int64_t id = (r / OH) * g.s[0] - g.p[0] + kd * g.d[0];
            const int64_t ih = (r % OH) * g.s[1] - g.p[1] + kh * g.d[1];
            if (id < 0 || id >= D || ih < 0 || ih >= H) {
              std::fill(dst, dst + OW, C(0));
              continue;
            }
            const C* src = x + ((c * D + id) * H + ih) * W + off;  // src[ow*sw], valid in [lo, hi)
            std::fill(dst, dst + lo, C(0));
            if (sw == 1) {
              std::copy(src + lo, src + hi, dst + lo);
            } else {
              for (int64_t ow = lo; ow < hi; ++ow) dst[ow] = src[ow * sw];
            }
            std::fill(dst + hi, dst + OW, C(0));
          }
        }
      }
    }
  }
}

// col2im (scatter-add) for grid rows [r0, r1) of `grid` (the positions the columns stand for);
// `g.in` is the image being accumulated into, `g.out` is the grid. Rows of col are `ld` apart
// (0: the grid rows' columns, (r1 - r0) * grid width).
template <class C>
void Col2Im(const C* col, int64_t channels, const Geom3& g, int64_t r0, int64_t r1, C* img,
            int64_t ld = 0) {
  const int64_t D = g.in[0], H = g.in[1], W = g.in[2], GH = g.out[1], GW = g.out[2];
  const int64_t ncols = ld ? ld : (r1 - r0) * GW, sw = g.s[2];
  if (r0 >= r1) return;
  const C* row = col;
  for (int64_t c = 0; c < channels; ++c) {
    for (int64_t kd = 0; kd < g.k[0]; ++kd) {
      for (int64_t kh = 0; kh < g.k[1]; ++kh) {
        for (int64_t kw = 0; kw < g.k[2]; ++kw, row += ncols) {
          const int64_t off = kw * g.d[2] - g.p[2];
          const auto [lo, hi] = InsideColumns(off, sw, W, GW);
          // Per depth slice of the grid, the rows whose image row is inside: one run, their
          // image rows s[1] apart.
          const auto [oh_lo, oh_hi] = InsideColumns(kh * g.d[1] - g.p[1], g.s[1], H, GH);
          for (int64_t od = r0 / GH; od * GH < r1; ++od) {
            const int64_t id = od * g.s[0] - g.p[0] + kd * g.d[0];
            const int64_t r = std::max(r0, od * GH + oh_lo), e = std::min(r1, od * GH + oh_hi);
            if (id < 0 || id >= D || r >= e) continue;
            const int64_t ih = (r - od * GH) * g.s[1] - g.p[1] + kh * g.d[1];
            const C* src = row + (r - r0) * GW;
            C* dst = img + ((c * D + id) * H + ih) * W + off;
            const int64_t dst_ld = g.s[1] * W;
            if constexpr (std::is_same_v<C, float> || std::is_same_v<C, double>) {
              if (sw == 2) {
                AddToEveryOther(dst + 2 * lo, src + lo, hi - lo, e - r, dst_ld, GW);
                continue;
              }
            }
            for (int64_t i = 0; i < e - r; ++i)
              for (int64_t j = lo; j < hi; ++j) dst[i * dst_ld + j * sw] += src[i * GW + j];
          }
        }
      }
    }
  }
}

// True when every output element of a 2-D ConvTranspose takes exactly one kernel tap: strides
// equal to the kernel (or a grid one position wide along that axis), undilated, unpadded (the
// 2x2, stride-2 upsampling of segmentation heads; a GAN generator's 1x1 code spread to 4x4).
bool TapsTileTheImage(const Geom3& g) {
  return g.k[0] == 1 && g.in[0] == 1 && g.d[1] == 1 && g.d[2] == 1 &&
         (g.s[1] == g.k[1] || g.out[1] == 1) && (g.s[2] == g.k[2] || g.out[2] == 1) &&
         g.p[1] == 0 && g.p[2] == 0 && g.in[1] == g.out[1] * g.k[1] && g.in[2] == g.out[2] * g.k[2];
}

// Col2Im where TapsTileTheImage: each output row is its kernel row's KW column rows of col
// interleaved, plus the bias, written once (no fill with the bias, no read-add per tap). `ld` as
// for Col2Im.
template <class C>
void Col2ImTiled(const C* col, int64_t channels, const Geom3& g, int64_t r0, int64_t r1,
                 const C* bias, C* img, int64_t ld = 0) {
  const int64_t KH = g.k[1], KW = g.k[2], W = g.in[2], GW = g.out[2];
  const int64_t ncols = ld ? ld : (r1 - r0) * GW;
  for (int64_t c = 0; c < channels; ++c) {
    const C b = bias ? bias[c] : C(0);
    for (int64_t kh = 0; kh < KH; ++kh) {
      const C* rows = col + (c * KH + kh) * KW * ncols;  // the KW rows of (c, kh)
      for (int64_t r = r0; r < r1; ++r) {
        C* dst = img + (c * g.in[1] + r * KH + kh) * W;
        const C* src = rows + (r - r0) * GW;
        if (KW == 2) {
          for (int64_t j = 0; j < GW; ++j) {
            dst[2 * j] = src[j] + b;
            dst[2 * j + 1] = src[ncols + j] + b;
          }
        } else {
          for (int64_t j = 0; j < GW; ++j)
            for (int64_t kw = 0; kw < KW; ++kw) dst[j * KW + kw] = src[kw * ncols + j] + b;
        }
      }
    }
  }
}

int64_t RowsPerTile(int64_t rows, int64_t row_elems) {
  return std::clamp<int64_t>(kColBudget / std::max<int64_t>(row_elems, 1), 1,
                             std::max<int64_t>(rows, 1));
}

// ---------------------------------------------------------------------------------------------
// Conv

// Shared by Conv and ConvTranspose: dtype checks, then the op's own shape rule. The output's
// spatial dims are the window grid (Conv) or the image the grid spreads into (ConvTranspose).
using ConvShapeFn = std::string (*)(const ir::Node&, const Dims&, const Dims&, const Dims*,
                                    ConvShape*);
Status InferConvLike(InferContext& ctx, ConvShapeFn shape_of, bool transpose) {
  if (ctx.num_inputs() < 2 || !ctx.has_input(0) || !ctx.has_input(1))
    return ctx.error("needs inputs X and W");
  if (!IsFloatType(ctx.input_dtype(0)))
    return ctx.error("unsupported dtype " + std::string(DTypeName(ctx.input_dtype(0))));
  if (ctx.input_dtype(1) != ctx.input_dtype(0) ||
      (ctx.has_input(2) && ctx.input_dtype(2) != ctx.input_dtype(0)))
    return ctx.error("X, W and B must have the same dtype");
  ConvShape s;
  std::string err = shape_of(ctx.node(), ctx.input_dims(0), ctx.input_dims(1),
                             ctx.has_input(2) ? &ctx.input_dims(2) : nullptr, &s);
  if (!err.empty()) return ctx.error(err);
  const Dims& spatial = transpose ? s.geom.in : s.geom.out;
  Dims out = {s.N, s.M};
  out.insert(out.end(), spatial.begin(), spatial.end());
  ctx.set_output(0, ctx.input_dtype(0), out);
  return OkStatus();
}

Status ConvInfer(InferContext& ctx) { return InferConvLike(ctx, ConvShapeOf, false); }

template <class C>
void ConvCore(const C* x, const C* w, const C* b, C* y, const ConvShape& s, int threads) {
  const Geom3 g(s.geom);
  const int64_t Cg = s.C / s.group, Mg = s.M / s.group, kprod = g.kprod(), K = Cg * kprod;
  const int64_t in_size = g.in_size(), out_size = g.out_size();
  if (Cg == 1 && s.group == s.C && g.in[0] == 1 && g.k[0] == 1 && g.out[0] == 1) {
    const DepthwiseShape d{s.N,    s.C,    s.M,    g.in[1], g.in[2], g.out[1], g.out[2], g.k[1],
                           g.k[2], g.s[1], g.s[2], g.p[1],  g.p[2],  g.d[1],   g.d[2]};
    DepthwiseConv2D<C>(d, x, w, b, y, threads);
    return;
  }
  bool pointwise = kprod == 1;
  for (int j = 0; j < 3; ++j)
    pointwise = pointwise && g.s[j] == 1 && g.p[j] == 0 && g.out[j] == g.in[j];
  const int64_t rows = g.out[0] * g.out[1];
  const int64_t tile = RowsPerTile(rows, K * g.out[2]);
  C* col = pointwise
               ? nullptr
               : Scratch<C>(ScratchSlot::kConvColumns, static_cast<size_t>(K * tile * g.out[2]));
  for (int64_t n = 0; n < s.N; ++n) {
    for (int64_t gi = 0; gi < s.group; ++gi) {
      const C* xg = x + (n * s.C + gi * Cg) * in_size;
      const C* wg = w + gi * Mg * K;
      C* yg = y + (n * s.M + gi * Mg) * out_size;
      if (b)
        for (int64_t m = 0; m < Mg; ++m)
          std::fill(yg + m * out_size, yg + (m + 1) * out_size, b[gi * Mg + m]);
      if (pointwise) {
        ConvGemm<C>(Mg, out_size, Cg, wg, K, xg, in_size, yg, out_size, b != nullptr, threads);
        continue;
      }
      for (int64_t r0 = 0; r0 < rows; r0 += tile) {
        int64_t r1 = std::min(rows, r0 + tile), ncols = (r1 - r0) * g.out[2];
        Im2Col(xg, Cg, g, r0, r1, col);
        ConvGemm<C>(Mg, ncols, K, wg, K, col, ncols, yg + r0 * g.out[2], out_size, b != nullptr,
                    threads);
      }
    }
  }
}

// ---------------------------------------------------------------------------------------------
// ConvTranspose

Status ConvTransposeInfer(InferContext& ctx) {
  return InferConvLike(ctx, ConvTransposeShapeOf, true);
}

// Below this many grid positions an image's GEMM is too narrow to run well (and packs the
// weights for few columns): images are batched into one GEMM's columns instead.
constexpr int64_t kBatchedGrid = 256;

// Spreads the columns of output channels [m0, m1) of group gi (col: their kprod rows each, ld
// apart, image n's columns from n * grid) into the nb images' outputs from image n0.
template <class C>
void SpreadChannels(const C* col, int64_t ld, int64_t gi, int64_t m0, int64_t m1, int64_t n0,
                    int64_t nb, const C* b, C* y, const ConvShape& s, bool tiled) {
  const Geom3 g(s.geom);
  const int64_t Mg = s.M / s.group, kprod = g.kprod(), img_size = g.in_size();
  const int64_t grid = g.out_size(), rows = g.out[0] * g.out[1];
  for (int64_t i = m0; i < m1; ++i)
    for (int64_t n = 0; n < nb; ++n) {
      const int64_t m = gi * Mg + i;
      const C* cc = col + (i - m0) * kprod * ld + n * grid;
      C* img = y + ((n0 + n) * s.M + m) * img_size;
      if (tiled) {
        Col2ImTiled(cc, 1, g, 0, rows, b ? b + m : nullptr, img, ld);
        continue;
      }
      std::fill(img, img + img_size, b ? b[m] : C(0));
      Col2Im(cc, 1, g, 0, rows, img, ld);
    }
}

// The GEMM W^T B of ConvTranspose by blocks of output channels over the threads: each block's
// rows (whole panels of the packed W^T, at most about kColBudget / 4 floats, the blocks a
// multiple of the threads) into the thread's own buffer, then spread(m0, m1, col) while they
// are in its core's cache. B [K, N] (dense) is packed once for all blocks. Making the
// whole column matrix first sent it through memory between the GEMM and the spread (4 MB for a
// generator's 256 -> 128 on 8x8 at batch 8). Under ReferenceKernels one GEMM, then one spread.
template <class C, class Spread>
void ChannelBlocks(const PackedA<C>& a, int64_t Mg, int64_t kprod, const C* B, int64_t N,
                   int threads, Spread&& spread) {
  if (a.reference || ReferenceKernels()) {
    C* col = Scratch<C>(ScratchSlot::kConvColumns, static_cast<size_t>(Mg * kprod * N));
    PackedGemm<C>(a, N, B, N, 1, col, N, false, threads);
    spread(0, Mg, col);
    return;
  }
  const PackedB<C> bp = PackGemmB<C>(a.K, N, B, N, 1, a.isa);
  // As many blocks as the budget asks, rounded up to a multiple of the threads, then as even as
  // whole panels allow.
  const int64_t panel = PackedRowsStep(a), unit = panel / std::gcd(panel, kprod);
  const int64_t fit = std::max<int64_t>(1, kColBudget / 4 / std::max<int64_t>(kprod * N, 1));
  const int64_t blocks = ((Mg + fit - 1) / fit + threads - 1) / threads * threads;
  const int64_t per_block = ((Mg + blocks - 1) / blocks + unit - 1) / unit * unit;
  ParallelRows(threads, (Mg + per_block - 1) / per_block, 1, [&](int64_t b0, int64_t b1) {
    C* col = Scratch<C>(ScratchSlot::kConvColumns, static_cast<size_t>(per_block * kprod * N));
    for (int64_t blk = b0; blk < b1; ++blk) {
      const int64_t m0 = blk * per_block, m1 = std::min(Mg, m0 + per_block);
      PackedGemmRows<C>(a, m0 * kprod, (m1 - m0) * kprod, bp, col, N, false);
      spread(m0, m1, col);
    }
  });
}

// ConvTranspose with images side by side in each GEMM's columns (the grids gathered into one
// matrix), each image's columns then spread into its output; for grids under kBatchedGrid.
template <class C>
void ConvTransposeImages(const C* x, const std::vector<PackedA<C>>& wt, const C* b, C* y,
                         const ConvShape& s, bool tiled, int threads) {
  const Geom3 g(s.geom);
  const int64_t Cg = s.C / s.group, Mg = s.M / s.group, kprod = g.kprod(), R = Mg * kprod;
  const int64_t grid = g.out_size();
  const int64_t batch = std::clamp<int64_t>(4 * kColBudget / (R * grid), 1, s.N);
  C* xb = Scratch<C>(ScratchSlot::kPadded, static_cast<size_t>(Cg * batch * grid));
  for (int64_t n0 = 0; n0 < s.N; n0 += batch) {
    const int64_t nb = std::min(batch, s.N - n0), ld = nb * grid;
    for (int64_t gi = 0; gi < s.group; ++gi) {
      for (int64_t n = 0; n < nb; ++n)
        for (int64_t c = 0; c < Cg; ++c) {
          const C* src = x + ((n0 + n) * s.C + gi * Cg + c) * grid;
          std::copy(src, src + grid, xb + c * ld + n * grid);
        }
      ChannelBlocks(wt[gi], Mg, kprod, xb, ld, threads, [&](int64_t m0, int64_t m1, const C* col) {
        SpreadChannels(col, ld, gi, m0, m1, n0, nb, b, y, s, tiled);
      });
    }
  }
}

// Whether a ConvTranspose runs on DepthwiseConvTranspose2D (else on GEMMs of W^T).
bool DepthwiseConvTranspose(const ConvShape& s) {
  const Geom3 g(s.geom);
  return s.C / s.group == 1 && s.group == s.C && g.in[0] == 1 && g.k[0] == 1 && g.out[0] == 1;
}

// Each group's W^T [Mg * taps, Cg] packed for the GEMM's left operand.
template <class C>
std::vector<PackedA<C>> PackConvTransposeWeights(const C* w, const ConvShape& s) {
  const Geom3 g(s.geom);
  const int64_t Cg = s.C / s.group, R = s.M / s.group * g.kprod();
  std::vector<PackedA<C>> wt;
  for (int64_t gi = 0; gi < s.group; ++gi) wt.push_back(PackGemmA<C>(R, Cg, w + gi * Cg * R, 1, R));
  return wt;
}

// A ConvTranspose node's packed weights, where W is a constant: the GEMMs read only them.
struct ConvTransposeState : NodeState {
  const void* w_from = nullptr;
  Dims w_dims;
  std::vector<PackedA<float>> wt;
  bool HoldsConstant(int i) const override { return i == 1 && w_from; }
};

// `wt`: PackConvTransposeWeights, unless DepthwiseConvTranspose (then w).
template <class C>
void ConvTransposeCore(const C* x, const C* w, const std::vector<PackedA<C>>& wt, const C* b, C* y,
                       const ConvShape& s, int threads) {
  const Geom3 g(s.geom);  // in = output image, out = input grid
  const int64_t Cg = s.C / s.group, Mg = s.M / s.group, kprod = g.kprod(), R = Mg * kprod;
  if (DepthwiseConvTranspose(s)) {
    const DepthwiseShape d{s.N,    s.C,    s.M,    g.out[1], g.out[2], g.in[1], g.in[2], g.k[1],
                           g.k[2], g.s[1], g.s[2], g.p[1],   g.p[2],   g.d[1],  g.d[2]};
    DepthwiseConvTranspose2D<C>(d, x, w, b, y, threads);
    return;
  }
  const int64_t img_size = g.in_size(), grid_size = g.out_size();
  const int64_t rows = g.out[0] * g.out[1];
  const int64_t tile = RowsPerTile(rows, R * g.out[2]);
  const bool tiled = TapsTileTheImage(g);
  if (s.N > 1 && tile == rows && grid_size < kBatchedGrid) {
    ConvTransposeImages(x, wt, b, y, s, tiled, threads);
    return;
  }
  C* col = Scratch<C>(ScratchSlot::kConvColumns, static_cast<size_t>(R * tile * g.out[2]));
  for (int64_t n = 0; n < s.N; ++n) {
    for (int64_t gi = 0; gi < s.group; ++gi) {
      const C* xg = x + (n * s.C + gi * Cg) * grid_size;
      C* yg = y + (n * s.M + gi * Mg) * img_size;
      if (!tiled)
        for (int64_t m = 0; m < Mg; ++m)
          std::fill(yg + m * img_size, yg + (m + 1) * img_size, b ? b[gi * Mg + m] : C(0));
      for (int64_t r0 = 0; r0 < rows; r0 += tile) {
        int64_t r1 = std::min(rows, r0 + tile), ncols = (r1 - r0) * g.out[2];
        PackedGemm<C>(wt[gi], ncols, xg + r0 * g.out[2], grid_size, 1, col, ncols, false, threads);
        // Output channels write their own planes: the threads split them.
        const int64_t per_channel = kprod * ncols;
        ParallelRows(threads, Mg,
                     std::max<int64_t>(1, (int64_t{1} << 14) / std::max<int64_t>(per_channel, 1)),
                     [&](int64_t m0, int64_t m1) {
                       const C* cc = col + m0 * per_channel;
                       if (tiled)
                         Col2ImTiled(cc, m1 - m0, g, r0, r1, b ? b + gi * Mg + m0 : nullptr,
                                     yg + m0 * img_size);
                       else
                         Col2Im(cc, m1 - m0, g, r0, r1, yg + m0 * img_size);
                     });
      }
    }
  }
}

// ---------------------------------------------------------------------------------------------
// Col2Im: input [N, C*prod(block), L] -> [N, C, image...]

struct Col2ImShape {
  int64_t N, C;
  WindowGeom geom;  // in = image, kernel = block, out = block grid
};

std::string Col2ImShapeOf(const ir::Node& node, const Dims& x, const std::vector<int64_t>& image,
                          const std::vector<int64_t>& block, Col2ImShape* s) {
  if (x.size() != 3) return "input must have rank 3, got " + DimsToString(x);
  if (image.empty() || image.size() != block.size())
    return "image_shape and block_shape must have the same non-zero length";
  if (image.size() > 3) return "more than 3 spatial dims are not supported";
  int64_t kprod = 1;
  for (int64_t k : block) {
    if (k <= 0) return "block_shape values must be positive";
    kprod *= k;
  }
  for (int64_t d : image)
    if (d <= 0) return "image_shape values must be positive";
  if (x[1] % kprod != 0)
    return "input dim 1 (" + std::to_string(x[1]) + ") is not divisible by the block size " +
           std::to_string(kprod);
  s->N = x[0];
  s->C = x[1] / kprod;
  std::string err = ComputeWindowGeom(node, image, block, true, false, &s->geom);
  if (!err.empty()) return err;
  if (NumElements(s->geom.out) != x[2])
    return "input has " + std::to_string(x[2]) + " blocks, the geometry gives " +
           std::to_string(NumElements(s->geom.out));
  return "";
}

Status Col2ImInfer(InferContext& ctx) {
  if (ctx.num_inputs() < 3 || !ctx.has_input(0) || !ctx.has_input(1) || !ctx.has_input(2))
    return ctx.error("needs inputs input, image_shape and block_shape");
  if (!IsFloatType(ctx.input_dtype(0)) &&
      !Dispatch<kIntTypes>(ctx.input_dtype(0), []<class T>() {}))
    return ctx.error("unsupported dtype");
  bool k1, k2;
  auto image = InputInts(ctx, 1, &k1);
  auto block = InputInts(ctx, 2, &k2);
  if (!k1 || !k2) {
    ctx.set_output_dynamic(0, ctx.input_dtype(0));
    return OkStatus();
  }
  Col2ImShape s;
  std::string err = Col2ImShapeOf(ctx.node(), ctx.input_dims(0), image, block, &s);
  if (!err.empty()) return ctx.error(err);
  Dims out = {s.N, s.C};
  out.insert(out.end(), image.begin(), image.end());
  ctx.set_output(0, ctx.input_dtype(0), out);
  return OkStatus();
}

Status Col2ImCompute(ComputeContext& ctx) {
  const Tensor& X = ctx.input(0);
  auto image = ctx.input(1).ToInt64Vector();
  auto block = ctx.input(2).ToInt64Vector();
  Col2ImShape s;
  std::string err = Col2ImShapeOf(ctx.node(), X.dims(), image, block, &s);
  if (!err.empty()) return ctx.error(err);
  Dims out = {s.N, s.C};
  out.insert(out.end(), image.begin(), image.end());
  Tensor& Y = ctx.output(0).defined() && ctx.output(0).dims() == out
                  ? ctx.output(0)
                  : ctx.allocate_output(0, X.dtype(), out);
  const Geom3 g(s.geom);
  bool ok = Dispatch<kNumericTypes>(X.dtype(), [&]<class T>() {
    using C = Acc<T>;
    const int64_t img = g.in_size(), cols = X.dims()[1] * X.dims()[2];
    std::vector<C> buf(static_cast<size_t>(cols)), acc(static_cast<size_t>(s.C * img));
    for (int64_t n = 0; n < s.N; ++n) {
      const T* src = X.data<T>() + n * cols;
      for (int64_t i = 0; i < cols; ++i) buf[i] = static_cast<C>(src[i]);
      std::fill(acc.begin(), acc.end(), C(0));
      Col2Im(buf.data(), s.C, g, 0, g.out[0] * g.out[1], acc.data());
      T* dst = Y.data<T>() + n * s.C * img;
      for (int64_t i = 0; i < s.C * img; ++i) dst[i] = static_cast<T>(acc[i]);
    }
  });
  if (!ok) return ctx.error("unsupported dtype");
  return OkStatus();
}

// ---------------------------------------------------------------------------------------------
// DeformConv (2-D): im2col at bilinearly sampled, offset positions, times an optional mask.

struct DeformShape {
  ConvShape conv;
  int64_t offset_group;
};

std::string DeformShapeOf(const ir::Node& node, const Dims& x, const Dims& w, const Dims& offset,
                          const Dims* b, const Dims* mask, DeformShape* s) {
  if (x.size() != 4)
    return "only 2-D DeformConv (X of rank 4) is supported, got " + DimsToString(x);
  std::string err = ConvShapeOf(node, x, w, b, &s->conv);
  if (!err.empty()) return err;
  s->offset_group = node.attr_int("offset_group", 1);
  if (s->offset_group <= 0 || s->conv.C % s->offset_group != 0)
    return "offset_group must be positive and divide the input channels";
  const WindowGeom& g = s->conv.geom;
  int64_t kprod = NumElements(g.kernel);
  Dims want = {s->conv.N, s->offset_group * kprod * 2, g.out[0], g.out[1]};
  if (offset != want)
    return "offset must have shape " + DimsToString(want) + ", got " + DimsToString(offset);
  if (mask) {
    want[1] = s->offset_group * kprod;
    if (*mask != want)
      return "mask must have shape " + DimsToString(want) + ", got " + DimsToString(*mask);
  }
  return "";
}

Status DeformConvInfer(InferContext& ctx) {
  if (ctx.num_inputs() < 3 || !ctx.has_input(0) || !ctx.has_input(1) || !ctx.has_input(2))
    return ctx.error("needs inputs X, W and offset");
  if (!IsFloatType(ctx.input_dtype(0))) return ctx.error("unsupported dtype");
  for (int i = 1; i < ctx.num_inputs(); ++i)
    if (ctx.has_input(i) && ctx.input_dtype(i) != ctx.input_dtype(0))
      return ctx.error("all inputs must have the same dtype");
  DeformShape s;
  std::string err =
      DeformShapeOf(ctx.node(), ctx.input_dims(0), ctx.input_dims(1), ctx.input_dims(2),
                    ctx.has_input(3) ? &ctx.input_dims(3) : nullptr,
                    ctx.has_input(4) ? &ctx.input_dims(4) : nullptr, &s);
  if (!err.empty()) return ctx.error(err);
  ctx.set_output(0, ctx.input_dtype(0),
                 {s.conv.N, s.conv.M, s.conv.geom.out[0], s.conv.geom.out[1]});
  return OkStatus();
}

template <class C>
void DeformConvCore(const C* x, const C* w, const C* off, const C* b, const C* mask, C* y,
                    const DeformShape& ds, int threads) {
  const ConvShape& s = ds.conv;
  const WindowGeom& g = s.geom;
  const int64_t H = g.in[0], W = g.in[1], KH = g.kernel[0], KW = g.kernel[1];
  const int64_t OH = g.out[0], OW = g.out[1], kprod = KH * KW, osz = OH * OW;
  const int64_t Cg = s.C / s.group, Mg = s.M / s.group, K = Cg * kprod;
  const int64_t c_per_og = s.C / ds.offset_group;
  std::vector<C> col(static_cast<size_t>(K * osz));
  auto sample = [&](const C* img, C h, C ww) -> C {  // bilinear, zero outside
    if (!(h > -1 && h < H && ww > -1 && ww < W)) return C(0);
    int64_t h0 = static_cast<int64_t>(std::floor(h)), w0 = static_cast<int64_t>(std::floor(ww));
    C lh = h - h0, lw = ww - w0;
    C v = 0;
    auto at = [&](int64_t i, int64_t j) {
      return i >= 0 && i < H && j >= 0 && j < W ? img[i * W + j] : C(0);
    };
    v += (1 - lh) * (1 - lw) * at(h0, w0) + (1 - lh) * lw * at(h0, w0 + 1) +
         lh * (1 - lw) * at(h0 + 1, w0) + lh * lw * at(h0 + 1, w0 + 1);
    return v;
  };
  for (int64_t n = 0; n < s.N; ++n) {
    for (int64_t gi = 0; gi < s.group; ++gi) {
      C* row = col.data();
      for (int64_t c = 0; c < Cg; ++c) {
        const int64_t ic = gi * Cg + c, og = ic / c_per_og;
        const C* img = x + (n * s.C + ic) * H * W;
        for (int64_t i = 0; i < KH; ++i) {
          for (int64_t j = 0; j < KW; ++j, row += osz) {
            const int64_t kidx = i * KW + j;
            const C* oh_ = off + ((n * ds.offset_group + og) * kprod * 2 + kidx * 2) * osz;
            const C* ow_ = oh_ + osz;
            const C* mk = mask ? mask + ((n * ds.offset_group + og) * kprod + kidx) * osz : nullptr;
            for (int64_t oy = 0; oy < OH; ++oy) {
              for (int64_t ox = 0; ox < OW; ++ox) {
                const int64_t p = oy * OW + ox;
                C h = static_cast<C>(oy * g.strides[0] - g.pad_begin[0] + i * g.dilations[0]) +
                      oh_[p];
                C ww = static_cast<C>(ox * g.strides[1] - g.pad_begin[1] + j * g.dilations[1]) +
                       ow_[p];
                C v = sample(img, h, ww);
                row[p] = mk ? v * mk[p] : v;
              }
            }
          }
        }
      }
      C* yg = y + (n * s.M + gi * Mg) * osz;
      if (b)
        for (int64_t m = 0; m < Mg; ++m)
          std::fill(yg + m * osz, yg + (m + 1) * osz, b[gi * Mg + m]);
      ConvGemm<C>(Mg, osz, K, w + gi * Mg * K, K, col.data(), osz, yg, osz, b != nullptr, threads);
    }
  }
}

// Shared by Conv and ConvTranspose (the shape rule and the core differ; the glue does not).
constexpr char kNoChannelsLast[] =
    "oneDNN refused a convolution the executor laid out channels-last (a kiln bug)";

// A pointwise convolution is a GEMM, which oneDNN's matmul runs faster than its 1x1 convolution
// (64->64 on 56x56 at one thread: 0.12-0.13 against 0.15-0.19 ms): pixels by channels for a
// channels-last output (an NCHW input read transposed, image by image), channels by pixels
// (the input read as it is) from NCHW to NCHW. From channels-last to NCHW (without a residual
// input), and between NCHW maps under kPixelsFirstBelow pixels, pixels by channels into scratch
// (the weights as the packed operand, full register tiles along the channels), then a transpose:
// oneDNN's 1x1 convolution wrote NCHW at half the GEMM's speed (64 -> 64 on 56x56: 0.27 ms at
// one and at two threads), and 512 -> 512 on 7 x 7 took 0.23 ms against 0.17. False (nothing
// written) for other convolutions or where oneDNN refuses.
constexpr int64_t kPixelsFirstBelow = 256;

bool PointwiseByGemm(ComputeContext& ctx, const Conv2DParams& p, ConvLayouts l, const float* b,
                     const PostOps& post) {
  if ((l.x && !l.y && post.z) || l.y_channels > 0 || p.group != 1 || p.KH != 1 || p.KW != 1 ||
      p.sh != 1 || p.sw != 1 || p.ph != 0 || p.pw != 0 || p.peh != 0 || p.pew != 0 ||
      (post.z && l.z != l.y))
    return false;
  const float* x = ctx.input(0).data<float>();
  const float* w = ctx.input(1).data<float>();
  float* y = ctx.output(0).data<float>();
  const int64_t HW = p.H * p.W;
  if (l.x && l.y)
    return DnnlGemm(p.N * HW, p.M, p.C, x, w, true, ctx.input_constant(1), b, y, ctx.threads(),
                    ctx.state(), {.post = post});
  for (int64_t n = 0; n < p.N; ++n) {
    const float* xn = x + n * p.C * HW;
    float* yn = y + n * HW * p.M;
    GemmOptions o{.post = post};
    if (l.x || (!l.y && HW < kPixelsFirstBelow && !post.z)) {  // pixels by channels, transposed
      auto* t = Scratch<float>(ScratchSlot::kDnnlRowsDst, HW * p.M);
      o.trans_a = !l.x;
      o.lda = l.x ? 0 : HW;
      if (!DnnlGemm(HW, p.M, p.C, xn, w, true, ctx.input_constant(1), b, t, ctx.threads(),
                    ctx.state(), o))
        return false;
      moves::StridedCopy({p.M, HW}, {1, p.M}, 0, t, yn, sizeof(float), ctx.threads());
      continue;
    }
    o.trans_a = l.y;  // pixels by channels: the NCHW image read transposed
    o.lda = l.y ? HW : 0;
    o.bias_per_row = !l.y;
    if (post.z) o.post.z = post.z + n * HW * p.M;
    const bool ok =
        l.y ? DnnlGemm(HW, p.M, p.C, xn, w, true, ctx.input_constant(1), b, yn, ctx.threads(),
                       ctx.state(), o)
            : DnnlGemm(p.M, HW, p.C, w, xn, false, false, b, yn, ctx.threads(), ctx.state(), o);
    if (!ok) return false;
  }
  return true;
}

// A 1-D or 2-D float Conv through oneDNN (kernels/dnnl/conv_dnnl.h) where it is built in, except
// the depthwise ones (kiln's register-tap kernel, without the layout round trip, is faster there);
// pointwise ones through its matmul (PointwiseByGemm) or, where that refuses, its convolution
// (on large NCHW maps our GEMM).
// With a channels-last input or output (ops/channels_last.h) it must, and does every shape.
bool TryDnnlConv(ComputeContext& ctx, const ConvShape& s, const PostOps& post = {}) {
  const Geom3 g(s.geom);
  if (!DnnlAvailable() || g.in[0] != 1 || g.k[0] != 1 || g.out[0] != 1) return false;
  const ConvLayouts layouts{ctx.input_channels_last(0), post.z && ctx.input_channels_last(3),
                            ctx.output_channels_last(0), ctx.output_pixel_channels(0)};
  const Conv2DParams p{s.N,      s.C,      s.M,     s.group, g.in[1], g.in[2],
                       g.out[1], g.out[2], g.k[1],  g.k[2],  g.s[1],  g.s[2],
                       g.p[1],   g.p[2],   g.pe[1], g.pe[2], g.d[1],  g.d[2]};
  const float* b = ctx.has_input(2) ? ctx.input(2).data<float>() : nullptr;
  auto run = [&] {
    return DnnlConv2D(p, ctx.input(0).data<float>(), ctx.input(1).data<float>(),
                      ctx.input_constant(1), b, ctx.output(0).data<float>(), ctx.threads(),
                      ctx.state(), post, layouts, ctx.scratch_budget());
  };
  if (FewOutputsConvFits(p, layouts, post) && FewOutputsConvPays(p)) {
    FewOutputsConv(p, ctx.input(0).data<float>(), ctx.input(1).data<float>(), b,
                   ctx.output(0).data<float>(), layouts, post, ctx.threads());
    return true;
  }
  const bool direct = DirectConvFits(p, layouts, post) && DirectConvPays(p, layouts);
  if (!direct && PointwiseByGemm(ctx, p, layouts, b, post)) return true;
  if (layouts.any() && WinogradFits(p, layouts, post) && WinogradPays(p, ctx.threads())) {
    WinogradChannelsLast(p, ctx.input(0).data<float>(), ctx.input(1).data<float>(),
                         ctx.input_constant(1), b, ctx.output(0).data<float>(), layouts, post,
                         ctx.threads(), ctx.state());
    return true;
  }
  if (direct) {
    DirectConv(p, ctx.input(0).data<float>(), ctx.input(1).data<float>(), ctx.input_constant(1), b,
               ctx.output(0).data<float>(), layouts, post, ctx.threads(), ctx.state());
    return true;
  }
  if (layouts.any() && GroupedPointwiseFits(p, layouts, post)) {
    GroupedPointwise(p, ctx.input(0).data<float>(), ctx.input(1).data<float>(),
                     ctx.input_constant(1), b, ctx.output(0).data<float>(), layouts, post,
                     ctx.threads(), ctx.state());
    return true;
  }
  if (layouts.any()) return run();
  if (s.group > 1 && s.group == s.C) return false;
  // A pointwise conv on a large map is a GEMM with a short K that streams memory: there our
  // GEMM, on NCHW as it is, beats oneDNN plus its layout round trip.
  const bool pointwise = g.k[1] == 1 && g.k[2] == 1 && g.s[1] == 1 && g.s[2] == 1 && g.p[1] == 0 &&
                         g.p[2] == 0 && g.pe[1] == 0 && g.pe[2] == 0;
  if (pointwise && g.out[1] * g.out[2] >= 28 * 28) return false;
  return run();
}

// A float 3-D Conv through oneDNN (kernels/dnnl/conv3d_dnnl.h); false (nothing written) elsewhere.
bool TryDnnlConv3D(ComputeContext& ctx, const ConvShape& s, const PostOps& post = {}) {
  if (ctx.input(0).dims().size() != 5) return false;
  const Geom3 g(s.geom);
  Conv3DParams p{s.N, s.C, s.M, s.group, {}, {}, {}, {}, {}, {}, {}};
  for (int j = 0; j < 3; ++j) {
    p.in[j] = g.in[j], p.k[j] = g.k[j], p.s[j] = g.s[j], p.d[j] = g.d[j];
    p.p[j] = g.p[j], p.pe[j] = g.pe[j], p.out[j] = g.out[j];
  }
  const float* b = ctx.has_input(2) ? ctx.input(2).data<float>() : nullptr;
  return DnnlConv3D(p, ctx.input(0).data<float>(), ctx.input(1).data<float>(),
                    ctx.input_constant(1), b, ctx.output(0).data<float>(), post, ctx.threads(),
                    ctx.state());
}

// Under the reference kernels, a float convolution of up to 3 spatial dims on the portable kernel
// (kernels/reference): true when it ran.
template <class C>
bool RunReferenceConv(const C* x, const C* w, const C* b, C* y, const ConvShape& s,
                      bool transpose) {
  if constexpr (!std::is_same_v<C, float>) {
    return false;
  } else {
    kiln_conv_shape k;
    if (!ReferenceKernels() || !kernels::reference::ToKilnConvShape(s, transpose, &k)) return false;
    (transpose ? kiln_reference_conv_transpose_f32 : kiln_reference_conv_f32)(x, w, b, y, &k);
    return true;
  }
}

// PackConvTransposeWeights of w, held in the node's state where W is a constant and w is W's
// own float32 (then w is not read again), else made for this call in `local`.
template <class C>
const std::vector<PackedA<C>>& TransposedWeights(ComputeContext& ctx, const ConvShape& s,
                                                 const C* w, bool w_is_input,
                                                 std::vector<PackedA<C>>* local) {
  if (DepthwiseConvTranspose(s)) return *local;
  if constexpr (std::is_same_v<C, float>) {
    if (w_is_input && ctx.state() && ctx.input_constant(1)) {
      auto* st = dynamic_cast<ConvTransposeState*>(ctx.state()->get());
      if (!st) {
        *ctx.state() = std::make_unique<ConvTransposeState>();
        st = static_cast<ConvTransposeState*>(ctx.state()->get());
      }
      if (st->w_from != ctx.input(1).raw() || st->w_dims != ctx.input(1).dims()) {
        st->wt = PackConvTransposeWeights(w, s);
        st->w_from = ctx.input(1).raw();
        st->w_dims = ctx.input(1).dims();
      }
      return st->wt;
    }
  }
  *local = PackConvTransposeWeights(w, s);
  return *local;
}

template <bool kTranspose>
Status ComputeConvLike(ComputeContext& ctx) {
  const Tensor& X = ctx.input(0);
  const Tensor& W = ctx.input(1);
  const Tensor* B = ctx.has_input(2) ? &ctx.input(2) : nullptr;
  ConvShape s;
  ConvShapeFn shape_of = kTranspose ? ConvTransposeShapeOf : ConvShapeOf;
  std::string err = shape_of(ctx.node(), X.dims(), W.dims(), B ? &B->dims() : nullptr, &s);
  if (!err.empty()) return ctx.error(err);
  Tensor& Y = ctx.output(0);
  if constexpr (!kTranspose) {
    if (X.dtype() == DType::kFloat32 && (TryDnnlConv(ctx, s) || TryDnnlConv3D(ctx, s)))
      return OkStatus();
    if (ctx.input_channels_last(0) || ctx.output_channels_last(0))
      return ctx.error(kNoChannelsLast);
  }
  Dispatch<kFloatTypes>(X.dtype(), [&]<class T>() {
    InBuf<T> x(X), w(W);
    std::optional<InBuf<T>> b;
    if (B) b.emplace(*B);
    OutBuf<T> y(Y);
    if (!RunReferenceConv(x.get(), w.get(), b ? b->get() : nullptr, y.get(), s, kTranspose)) {
      if constexpr (kTranspose) {
        std::vector<PackedA<typename InBuf<T>::C>> local;
        ConvTransposeCore(x.get(), w.get(),
                          TransposedWeights(ctx, s, w.get(), std::is_same_v<T, float>, &local),
                          b ? b->get() : nullptr, y.get(), s, ctx.threads());
      } else {
        ConvCore(x.get(), w.get(), b ? b->get() : nullptr, y.get(), s, ctx.threads());
      }
    }
    y.Finish();
  });
  return OkStatus();
}

Status DeformConvCompute(ComputeContext& ctx) {
  const Tensor& X = ctx.input(0);
  const Tensor& W = ctx.input(1);
  const Tensor& O = ctx.input(2);
  const Tensor* B = ctx.has_input(3) ? &ctx.input(3) : nullptr;
  const Tensor* Mk = ctx.has_input(4) ? &ctx.input(4) : nullptr;
  DeformShape s;
  std::string err = DeformShapeOf(ctx.node(), X.dims(), W.dims(), O.dims(),
                                  B ? &B->dims() : nullptr, Mk ? &Mk->dims() : nullptr, &s);
  if (!err.empty()) return ctx.error(err);
  Tensor& Y = ctx.output(0);
  Dispatch<kFloatTypes>(X.dtype(), [&]<class T>() {
    InBuf<T> x(X), w(W), o(O);
    std::optional<InBuf<T>> b, m;
    if (B) b.emplace(*B);
    if (Mk) m.emplace(*Mk);
    OutBuf<T> y(Y);
    DeformConvCore(x.get(), w.get(), o.get(), b ? b->get() : nullptr, m ? m->get() : nullptr,
                   y.get(), s, ctx.threads());
    y.Finish();
  });
  return OkStatus();
}

// ---------------------------------------------------------------------------------------------
// FusedConv (com.microsoft, as ONNX Runtime defines it; made by passes/fuse_conv_activation):
// Y = activation(Conv(X, W, B) + Z).

}  // namespace

// Swish (x * sigmoid(x), exporters' SiLU) and HardSwish are kiln's extensions of the op.
Status ActivationOf(ComputeContext& ctx, PostOps* post) {
  const std::string name = ctx.node().attr_string("activation", "");
  const std::vector<float> p = ctx.node().attr_floats("activation_params");
  using Act = PostOps::Act;
  if (name.empty()) return OkStatus();
  if (name == "Swish" && p.empty()) {
    post->act = Act::kSwish;
  } else if (name == "HardSwish" && p.empty()) {
    post->act = Act::kHardSwish;
  } else if (name == "Relu") {
    post->act = Act::kRelu;
  } else if (name == "LeakyRelu" && p.size() == 1) {
    post->act = Act::kLeakyRelu;
    post->alpha = p[0];
  } else if (name == "Clip" && p.size() == 2) {
    post->act = Act::kClip;
    post->alpha = p[0];
    post->beta = p[1];
  } else {
    return ctx.error("unsupported activation '" + name + "' with " + std::to_string(p.size()) +
                     " parameters (Relu, LeakyRelu [alpha], Clip [min, max], Swish, HardSwish)");
  }
  return OkStatus();
}

namespace {

Status FusedConvInfer(InferContext& ctx) {
  KILN_RETURN_IF_ERROR(ConvInfer(ctx));
  if (ctx.num_inputs() > 3 && ctx.has_input(3)) {
    const ir::TypeInfo& y = ctx.outputs_[0];
    if (ctx.input_dtype(3) != y.dtype || ctx.input_dims(3) != y.dims)
      return ctx.error("Z must have Y's type and shape " + DimsToString(y.dims) + ", got " +
                       DimsToString(ctx.input_dims(3)));
  }
  return OkStatus();
}

// An activation's formula in place, as the reference kernels run it (ops/unary_ops.h).
template <class Op>
void ApplyFormula(float* y, int64_t n, const Op& op) {
  for (int64_t i = 0; i < n; ++i) y[i] = op(y[i]);
}

template <class T>
void AddAndActivate(const T* z, T* y, int64_t n, const PostOps& post) {
  using Act = PostOps::Act;
  for (int64_t i = 0; i < n; ++i) {
    Acc<T> v = static_cast<Acc<T>>(y[i]);
    if (z) v = v + static_cast<Acc<T>>(z[i]);
    if (post.act == Act::kRelu) v = v < 0 ? Acc<T>(0) : v;
    if (post.act == Act::kLeakyRelu) v = v < 0 ? v * static_cast<Acc<T>>(post.alpha) : v;
    if (post.act == Act::kClip)
      v = v < static_cast<Acc<T>>(post.alpha)  ? static_cast<Acc<T>>(post.alpha)
          : v > static_cast<Acc<T>>(post.beta) ? static_cast<Acc<T>>(post.beta)
                                               : v;
    y[i] = static_cast<T>(v);
  }
}

Status FusedConvCompute(ComputeContext& ctx) {
  PostOps post;
  KILN_RETURN_IF_ERROR(ActivationOf(ctx, &post));
  const Tensor& X = ctx.input(0);
  const Tensor* Z = ctx.num_inputs() > 3 && ctx.has_input(3) ? &ctx.input(3) : nullptr;
  Tensor& Y = ctx.output(0);
  // Y may hold Z's bytes (planner/lifetimes.h): oneDNN's sum reads each element before writing
  // it when both share a layout; anything else writes Y before it reads Z, so it gets a copy.
  const bool in_place = Z && Z->raw() == Y.raw() && Z->nbytes() == Y.nbytes();
  const void* z_bytes = Z ? Z->raw() : nullptr;
  auto set_z_apart = [&] {
    void* copy = ScratchBytes(ScratchSlot::kConvZ, Z->nbytes());
    std::memcpy(copy, Z->raw(), Z->nbytes());
    z_bytes = copy;
  };
  if (in_place && ctx.input_channels_last(3) != ctx.output_channels_last(0)) set_z_apart();
  if (X.dtype() == DType::kFloat32) {
    ConvShape s;
    const Tensor* B = ctx.has_input(2) ? &ctx.input(2) : nullptr;
    std::string err =
        ConvShapeOf(ctx.node(), X.dims(), ctx.input(1).dims(), B ? &B->dims() : nullptr, &s);
    if (!err.empty()) return ctx.error(err);
    post.z = static_cast<const float*>(z_bytes);
    // Each writes nothing when it returns false.
    if (TryDnnlConv(ctx, s, post) || TryDnnlConv3D(ctx, s, post)) return OkStatus();
  }
  if (ctx.input_channels_last(0) || ctx.input_channels_last(3) || ctx.output_channels_last(0))
    return ctx.error(kNoChannelsLast);
  if (in_place && z_bytes == Z->raw()) set_z_apart();
  // Otherwise the Conv, then one pass for the sum and the activation.
  KILN_RETURN_IF_ERROR(ComputeConvLike<false>(ctx));
  Dispatch<kFloatTypes>(Y.dtype(), [&]<class T>() {
    AddAndActivate<T>(Z ? static_cast<const T*>(z_bytes) : nullptr, Y.data<T>(), Y.size(), post);
  });
  if (post.act == PostOps::Act::kSwish) {  // with the Sigmoid and Mul kernels' arithmetic
    if (Y.dtype() != DType::kFloat32) return ctx.error("Swish needs float32");
    if (ReferenceKernels())
      ApplyFormula(Y.data<float>(), Y.size(), unary::Swish());
    else
      SwishF32(Y.data<float>(), Y.data<float>(), Y.size(), 1.0f);
  }
  if (post.act == PostOps::Act::kHardSwish) {  // with the HardSwish kernel's arithmetic
    if (Y.dtype() != DType::kFloat32) return ctx.error("HardSwish needs float32");
    if (ReferenceKernels())
      ApplyFormula(Y.data<float>(), Y.size(), unary::HardSwish());
    else
      HardSwishF32(Y.data<float>(), Y.data<float>(), Y.size());
  }
  return OkStatus();
}

}  // namespace

bool ConvCanRunChannelsLast(const ir::Node& node, const ir::Graph& g, int input) {
  const bool fused = node.op_type == "FusedConv" && node.domain == "com.microsoft";
  if (!DnnlAvailable() ||
      !(fused || (node.op_type == "Conv" && (node.domain.empty() || node.domain == "ai.onnx"))))
    return false;
  if (input != kChannelsLastOutput && input != 0 && !(fused && input == 3)) return false;
  if (node.inputs.size() < 2 || node.inputs[0] < 0 || node.inputs[1] < 0 || node.outputs.empty() ||
      node.outputs[0] < 0)
    return false;
  const ir::TypeInfo& x = g.values[node.inputs[0]].type;
  const ir::TypeInfo& w = g.values[node.inputs[1]].type;
  const ir::TypeInfo& y = g.values[node.outputs[0]].type;
  if (x.dtype != DType::kFloat32 || !x.shape_known() || !w.shape_known() || !y.shape_known() ||
      x.dims.size() != 4 || y.dims.size() != 4)
    return false;
  const Dims* b =
      node.inputs.size() > 2 && node.inputs[2] >= 0 ? &g.values[node.inputs[2]].type.dims : nullptr;
  ConvShape s;
  if (!ConvShapeOf(node, x.dims, w.dims, b, &s).empty()) return false;
  return y.dims[1] == s.M;
}

void RegisterConvOps(OpRegistry& r) {
  r.Register("Conv", ConvInfer, ComputeConvLike<false>);
  r.Register("ConvTranspose", ConvTransposeInfer, ComputeConvLike<true>);
  r.Register("Col2Im", Col2ImInfer, Col2ImCompute);
  r.Register("DeformConv", DeformConvInfer, DeformConvCompute);
  r.Register("FusedConv", FusedConvInfer, FusedConvCompute, "com.microsoft");
}

}  // namespace kiln::ops
