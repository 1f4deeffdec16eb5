// com.kiln ConvGlobalPool (made by passes/fuse_conv_global_pool): a pointwise 1-D convolution, its
// activation, and a max or mean over every position, as one node:
//   y[n, m] = pool over p of act(b[m] + sum_c w[m, c, 0] x[n, c, p])
// x [N, C, P], w [M, C, 1], b [M] (optional); y [N, M], or [N, M, 1] with keepdims. Attributes:
// mode ("max" or "mean"), keepdims, and FusedConv's activation / activation_params.
// Why one node: PointNet-style models lift each point to 1,024 channels and keep only the max; as
// two nodes the 1,024 x P map (32 MB for 8 x 1,024 points) goes to memory and back. Here blocks of
// positions run through oneDNN's matmul (pixels by channels, the weights its packed operand) into
// an L2-sized scratch and are reduced there.
#include <algorithm>
#include <cmath>
#include <limits>
#include <memory>
#include <vector>

#include "kernels/dnnl/dnnl_available.h"
#include "kernels/dnnl/gemm_dnnl.h"
#include "kernels/x86/cpu_isa.h"
#include "kernels/x86/post_ops.h"
#include "kernels/x86/scratch.h"
#include "kernels/x86/thread_pool.h"
#include "ops/op.h"
#include "ops/shape_ops_util.h"

namespace kiln::ops {
namespace {

// Positions per block: the block's M floats per position stay within this many bytes.
constexpr int64_t kBlockBytes = int64_t{512} << 10;

// One part per thread, each running its own blocks at one thread with its own oneDNN plans.
struct ConvPoolState : NodeState {
  struct Part {
    std::unique_ptr<NodeState> full, tail;  // plans for whole blocks and the last one
  };
  std::vector<Part> parts;
  std::string Kernel() const override {
    if (parts.empty() || !parts[0].full) return "";
    return parts[0].full->Kernel() +
           (parts.size() > 1 ? " x" + std::to_string(parts.size()) : std::string());
  }
};

Status Infer(InferContext& ctx) {
  const Dims& x = ctx.input_dims(0);
  const Dims& w = ctx.input_dims(1);
  if (ctx.input_dtype(0) != DType::kFloat32 || ctx.input_dtype(1) != DType::kFloat32)
    return ctx.error("x and w must be float32");
  if (x.size() != 3 || w.size() != 3 || w[2] != 1 || (x[1] >= 0 && w[1] != x[1]))
    return ctx.error("x must be [N, C, P] and w [M, C, 1], got " + DimsToString(x) + " and " +
                     DimsToString(w));
  if (ctx.has_input(2) && (ctx.input_dims(2).size() != 1 || ctx.input_dims(2)[0] != w[0]))
    return ctx.error("b must have M = " + std::to_string(w[0]) + " elements");
  const std::string mode = ctx.node().attr_string("mode", "");
  if (mode != "max" && mode != "mean") return ctx.error("mode must be max or mean");
  Dims y = {x[0], w[0]};
  if (ctx.node().attr_int("keepdims", 0) != 0) y.push_back(1);
  ctx.set_output(0, DType::kFloat32, y);
  return OkStatus();
}

float Activate(float v, const PostOps& post) {
  using Act = PostOps::Act;
  if (post.act == Act::kRelu) return v < 0 ? 0.0f : v;
  if (post.act == Act::kLeakyRelu) return v < 0 ? v * post.alpha : v;
  if (post.act == Act::kClip) return v < post.alpha ? post.alpha : v > post.beta ? post.beta : v;
  return v;
}

// The portable loops: each output channel's products position by position.
void ReferencePool(const float* x, const float* w, const float* b, int64_t N, int64_t C, int64_t P,
                   int64_t M, bool max, const PostOps& post, float* y) {
  for (int64_t n = 0; n < N; ++n)
    for (int64_t m = 0; m < M; ++m) {
      float acc = max ? -std::numeric_limits<float>::infinity() : 0.0f;
      for (int64_t p = 0; p < P; ++p) {
        float v = b ? b[m] : 0.0f;
        for (int64_t c = 0; c < C; ++c) v += w[m * C + c] * x[(n * C + c) * P + p];
        v = Activate(v, post);
        acc = max ? std::max(acc, v) : acc + v;
      }
      y[n * M + m] = max ? acc : acc / static_cast<float>(P);
    }
}

// Blocks of positions through oneDNN (rows: positions, columns: channels), each reduced while it
// is in cache. The (sample, block) pairs split over threads, each reducing into its own partial
// rows, merged at the end. False (y unwritten) where oneDNN refuses.
bool DnnlPool(ComputeContext& ctx, const float* x, const float* w, const float* b, int64_t N,
              int64_t C, int64_t P, int64_t M, bool max, const PostOps& post, float* y) {
  std::unique_ptr<NodeState> local;  // constant folding runs nodes without a state
  std::unique_ptr<NodeState>* slot = ctx.state() ? ctx.state() : &local;
  if (!dynamic_cast<ConvPoolState*>(slot->get())) *slot = std::make_unique<ConvPoolState>();
  auto* st = static_cast<ConvPoolState*>(slot->get());
  const int64_t block = std::clamp<int64_t>(kBlockBytes / (4 * M) / 16 * 16, 16, P);
  const int64_t blocks = (P + block - 1) / block, items = N * blocks;
  const int parts = static_cast<int>(std::min<int64_t>(ctx.threads(), items));
  if (static_cast<int>(st->parts.size()) != parts) st->parts.resize(parts);
  const float init = max ? -std::numeric_limits<float>::infinity() : 0.0f;
  std::vector<float> partial(static_cast<size_t>(parts * N * M), init);
  std::vector<char> ok(parts, 1);
  GemmOptions o{.post = post};
  ParallelFor(parts, parts, [&](int64_t c0, int64_t c1) {
    for (int64_t c = c0; c < c1; ++c) {
      // Scratch slots are per thread.
      float* rows = static_cast<float*>(ScratchBytes(ScratchSlot::kDnnlRowsDst, block * M * 4));
      float* cols = static_cast<float*>(ScratchBytes(ScratchSlot::kDnnlRowsSrc, block * C * 4));
      for (int64_t item = c * items / parts; item < (c + 1) * items / parts; ++item) {
        const int64_t n = item / blocks, p0 = item % blocks * block, len = std::min(block, P - p0);
        // The block's positions as rows (a transpose of C x len floats): oneDNN's brgemm
        // kernels take contiguous rows, its strided-A path only a slower generic one.
        moves::StridedCopy({len, C}, {1, P}, n * C * P + p0, x, cols, sizeof(float));
        ConvPoolState::Part& part = st->parts[c];
        if (!DnnlGemm(len, M, C, cols, w, true, ctx.input_constant(1), b, rows, 1,
                      len == block ? &part.full : &part.tail, o)) {
          ok[c] = 0;
          return;
        }
        float* acc = partial.data() + (c * N + n) * M;
        for (int64_t r = 0; r < len; ++r) {
          const float* row = rows + r * M;
          if (max) {
            for (int64_t m = 0; m < M; ++m) acc[m] = std::max(acc[m], row[m]);
          } else {
            for (int64_t m = 0; m < M; ++m) acc[m] += row[m];
          }
        }
      }
    }
  });
  if (std::count(ok.begin(), ok.end(), 0) > 0) return false;
  for (int64_t i = 0; i < N * M; ++i) {
    float v = init;
    for (int c = 0; c < parts; ++c) {
      const float p = partial[c * N * M + i];
      v = max ? std::max(v, p) : v + p;
    }
    y[i] = max ? v : v / static_cast<float>(P);
  }
  return true;
}

Status Compute(ComputeContext& ctx) {
  PostOps post;
  KILN_RETURN_IF_ERROR(ActivationOf(ctx, &post));
  if (post.act == PostOps::Act::kSwish || post.act == PostOps::Act::kHardSwish)
    return ctx.error("ConvGlobalPool takes Relu, LeakyRelu or Clip");
  const Tensor& X = ctx.input(0);
  const Tensor& W = ctx.input(1);
  const float* b = ctx.has_input(2) ? ctx.input(2).data<float>() : nullptr;
  const int64_t N = X.dim(0), C = X.dim(1), P = X.dim(2), M = W.dim(0);
  const bool max = ctx.node().attr_string("mode", "") == "max";
  float* y = ctx.output(0).data<float>();
  if (P == 0) return ctx.error("a pool over no positions");
  if (!ReferenceKernels() && DnnlAvailable() &&
      DnnlPool(ctx, X.data<float>(), W.data<float>(), b, N, C, P, M, max, post, y))
    return OkStatus();
  ReferencePool(X.data<float>(), W.data<float>(), b, N, C, P, M, max, post, y);
  return OkStatus();
}

}  // namespace

void RegisterConvGlobalPoolOps(OpRegistry& r) {
  r.Register("ConvGlobalPool", Infer, Compute, kKilnDomain);
}

}  // namespace kiln::ops
