#include "kernels/dnnl/conv3d_dnnl.h"

#include <algorithm>
#include <cstring>
#include <string>
#include <unordered_map>
#include <vector>

#include "kernels/x86/cpu_isa.h"
#include "kernels/x86/scratch.h"
#include "kernels/x86/thread_pool.h"
#include "kernels/x86/vector_math.h"

#if KILN_WITH_DNNL
#include "kernels/dnnl/dnnl_available.h"
#include "kernels/dnnl/dnnl_common.h"
#endif

namespace kiln::ops {

#if KILN_WITH_DNNL
namespace {

using namespace dnnl_common;

// One part of the output: images [n0, n1), output depths [od0, od1) of each, reading input
// depths from id0.
struct Part {
  int64_t n0 = 0, n1 = 0, od0 = 0, od1 = 0, id0 = 0;
  dnnl::convolution_forward conv;
  std::string kernel;  // oneDNN's name for conv's implementation
  memory::desc src_md, dst_md, w_md, user_src_md, user_dst_md;
  dnnl::reorder src_reorder, dst_reorder, z_reorder;
  memory user_src, src, user_dst, dst, user_z, weights, bias;
  std::unordered_map<int, memory> args;
  dnnl_common::Scratchpad scratchpad;
  LargeBuffer own_w;  // where this part's weight layout differs from part 0's
  memory own_w_mem;
};

struct Conv3DPlan : NodeState {
  Conv3DParams p{};
  int threads = 0;
  bool has_bias = false, has_z = false;
  PostOps::Act act = PostOps::Act::kNone;
  float alpha = 0, beta = 0;
  bool supported = false;
  std::string kernel;
  std::vector<Part> parts;
  memory::desc user_w_md;
  const float* w_ptr = nullptr;  // the constant weights the parts' buffers hold

  bool Matches(const Conv3DParams& q, int t, bool bias, const PostOps& o) const {
    return std::memcmp(&p, &q, sizeof(p)) == 0 && threads == t && has_bias == bias &&
           has_z == (o.z != nullptr) && act == o.act && alpha == o.alpha && beta == o.beta;
  }
  std::string Kernel() const override {
    if (!supported || parts.empty()) return "";
    return "onednn " + kernel + (parts.size() > 1 ? " x" + std::to_string(parts.size()) : "");
  }
  bool HoldsConstant(int i) const override {
    if (i != 1 || !supported || !w_ptr) return false;
    for (const Part& part : parts)
      if (part.w_md == user_w_md) return false;
    return true;
  }
};

// The part's primitive and memory objects; throws dnnl::error where oneDNN refuses the shape.
void PreparePart(const Conv3DPlan& plan, Part* part, const LargeBuffer& shared_w,
                 const memory::desc& shared_w_md) {
  const Conv3DParams& p = plan.p;
  const int64_t nb = part->n1 - part->n0, odn = part->od1 - part->od0;
  // The input depths the part reads, and the depth pads around them.
  const int64_t first = part->od0 * p.s[0] - p.p[0];
  const int64_t last = (part->od1 - 1) * p.s[0] - p.p[0] + (p.k[0] - 1) * p.d[0] + 1;
  part->id0 = std::max<int64_t>(0, first);
  const int64_t id1 = std::min(p.in[0], last);
  if (id1 <= part->id0) throw dnnl::error(dnnl_invalid_arguments, "a part reads no input");
  const int64_t D = p.in[0], H = p.in[1], W = p.in[2], OD = p.out[0], OH = p.out[1], OW = p.out[2];
  const int64_t pad_front = part->id0 - first, pad_back = last - id1;
  const memory::dims src{nb, p.C, id1 - part->id0, H, W}, dst{nb, p.M, odn, OH, OW};
  part->user_src_md =
      memory::desc(src, kF32, memory::dims{p.C * D * H * W, D * H * W, H * W, W, 1});
  part->user_dst_md =
      memory::desc(dst, kF32, memory::dims{p.M * OD * OH * OW, OD * OH * OW, OH * OW, OW, 1});
  const memory::dims w =
      p.group == 1 ? memory::dims{p.M, p.C, p.k[0], p.k[1], p.k[2]}
                   : memory::dims{p.group, p.M / p.group, p.C / p.group, p.k[0], p.k[1], p.k[2]};
  const memory::desc bias_md({p.M}, kF32, Tag::x);
  const memory::dims strides{p.s[0], p.s[1], p.s[2]}, dil{p.d[0] - 1, p.d[1] - 1, p.d[2] - 1},
      pl{pad_front, p.p[1], p.p[2]}, pr{pad_back, p.pe[1], p.pe[2]};
  dnnl::primitive_attr attr = dnnl_common::UserScratchpad();
  const PostOps::Act act = plan.act == PostOps::Act::kSwish ? PostOps::Act::kNone : plan.act;
  attr.set_post_ops(dnnl_common::PostOpsOf(plan.has_z, act, plan.alpha, plan.beta));
  const memory::desc any_src(src, kF32, Tag::any), any_dst(dst, kF32, Tag::any),
      any_w(w, kF32, Tag::any);
  const auto prop = dnnl::prop_kind::forward_inference;
  const auto alg = dnnl::algorithm::convolution_direct;
  auto d = plan.has_bias ? dnnl::convolution_forward::desc(prop, alg, any_src, any_w, bias_md,
                                                           any_dst, strides, dil, pl, pr)
                         : dnnl::convolution_forward::desc(prop, alg, any_src, any_w, any_dst,
                                                           strides, dil, pl, pr);
  dnnl::convolution_forward::primitive_desc pd(d, attr, Engine());
  if (std::string(pd.impl_info_str()).rfind("ref", 0) == 0)
    throw dnnl::error(dnnl_unimplemented, "only oneDNN's reference convolution takes it");
  part->conv = dnnl::convolution_forward(pd);
  part->kernel = pd.impl_info_str();
  part->scratchpad = dnnl_common::Scratchpad(pd.scratchpad_desc());
  part->src_md = pd.src_desc();
  part->dst_md = pd.dst_desc();
  part->w_md = pd.weights_desc();
  dnnl::engine& e = Engine();
  auto none = [&](const memory::desc& md) { return memory(md, e, DNNL_MEMORY_NONE); };
  part->user_src = none(part->user_src_md);
  part->user_dst = none(part->user_dst_md);
  part->user_z = none(part->user_dst_md);
  part->src = part->src_md != part->user_src_md ? none(part->src_md) : part->user_src;
  part->dst = part->dst_md != part->user_dst_md ? none(part->dst_md) : part->user_dst;
  if (part->src_md != part->user_src_md)
    part->src_reorder =
        dnnl::reorder(dnnl::reorder::primitive_desc(e, part->user_src_md, e, part->src_md));
  if (part->dst_md != part->user_dst_md) {
    part->dst_reorder =
        dnnl::reorder(dnnl::reorder::primitive_desc(e, part->dst_md, e, part->user_dst_md));
  }
  if (plan.has_z)  // z into dst, which the sum post-op adds (also where the layouts agree)
    part->z_reorder =
        dnnl::reorder(dnnl::reorder::primitive_desc(e, part->user_dst_md, e, part->dst_md));
  if (part->w_md == plan.user_w_md) {
    part->weights = none(part->w_md);
  } else if (shared_w && part->w_md == shared_w_md) {
    part->weights = memory(part->w_md, e, shared_w.get());
  } else {
    part->own_w = AllocateLarge(part->w_md.get_size());
    part->own_w_mem = memory(part->w_md, e, part->own_w.get());
    part->weights = part->own_w_mem;
  }
  part->args = {
      {DNNL_ARG_SRC, part->src}, {DNNL_ARG_WEIGHTS, part->weights}, {DNNL_ARG_DST, part->dst}};
  if (plan.has_bias) {
    part->bias = none(bias_md);
    part->args.emplace(DNNL_ARG_BIAS, part->bias);
  }
}

// The parts: images over threads where the batch has as many, else each image's output depths.
void Prepare(Conv3DPlan* plan) {
  const Conv3DParams& p = plan->p;
  const int64_t t = std::max(1, plan->threads);
  const bool by_images = p.N >= t || p.out[0] < 2;
  const int64_t n = by_images ? std::min(t, p.N) : std::min(t, p.out[0]);
  for (int64_t i = 0; i < n; ++i) {
    Part part;
    if (by_images) {
      part.n0 = p.N * i / n, part.n1 = p.N * (i + 1) / n, part.od1 = p.out[0];
    } else {
      part.n1 = p.N, part.od0 = p.out[0] * i / n, part.od1 = p.out[0] * (i + 1) / n;
    }
    plan->parts.push_back(std::move(part));
  }
  plan->user_w_md =
      p.group == 1 ? memory::desc({p.M, p.C, p.k[0], p.k[1], p.k[2]}, kF32, Tag::oidhw)
                   : memory::desc({p.group, p.M / p.group, p.C / p.group, p.k[0], p.k[1], p.k[2]},
                                  kF32, Tag::goidhw);
  // Part 0's weight buffer serves every part of the same layout.
  PreparePart(*plan, &plan->parts[0], LargeBuffer(), {});
  const Part& first = plan->parts[0];
  for (size_t i = 1; i < plan->parts.size(); ++i)
    PreparePart(*plan, &plan->parts[i], first.own_w, first.w_md);
  plan->kernel = first.kernel;
  plan->supported = true;
}

// Reorders w into every buffer of the parts that hold their own (once for constant weights).
void PrepareWeights(Conv3DPlan* plan, const float* w, bool w_constant) {
  if (w_constant && plan->w_ptr == w) return;
  memory user_w(plan->user_w_md, Engine(), const_cast<float*>(w));
  for (Part& part : plan->parts) {
    if (part.w_md == plan->user_w_md) {
      part.weights.set_data_handle(const_cast<float*>(w));
      continue;
    }
    if (!part.own_w) continue;  // it reads part 0's buffer
    dnnl::reorder(user_w, part.own_w_mem).execute(Stream(), user_w, part.own_w_mem);
  }
  Stream().wait();
  plan->w_ptr = w_constant ? w : nullptr;
}

void RunPart(Part& part, const Conv3DParams& p, const float* x, const float* b, const float* z,
             float* y) {
  dnnl::stream& s = Stream();
  const int64_t in_image = p.C * p.in[0] * p.in[1] * p.in[2];
  const int64_t out_image = p.M * p.out[0] * p.out[1] * p.out[2], plane = p.out[1] * p.out[2];
  part.user_src.set_data_handle(
      const_cast<float*>(x + part.n0 * in_image + part.id0 * p.in[1] * p.in[2]));
  if (part.src_md != part.user_src_md) {
    part.src.set_data_handle(ScratchBytes(ScratchSlot::kDnnlSrc, part.src_md.get_size()));
    part.src_reorder.execute(s, part.user_src, part.src);
  }
  const int64_t out_offset = part.n0 * out_image + part.od0 * plane;
  part.user_dst.set_data_handle(y + out_offset);
  if (part.dst_md != part.user_dst_md)
    part.dst.set_data_handle(ScratchBytes(ScratchSlot::kDnnlDst, part.dst_md.get_size()));
  if (z && (z != y || part.dst_md != part.user_dst_md)) {
    part.user_z.set_data_handle(const_cast<float*>(z + out_offset));
    part.z_reorder.execute(s, part.user_z, part.dst);
  }
  if (b) part.bias.set_data_handle(const_cast<float*>(b));
  part.scratchpad.Bind(part.args);
  part.conv.execute(s, part.args);
  if (part.dst_md != part.user_dst_md) part.dst_reorder.execute(s, part.dst, part.user_dst);
  s.wait();
}

}  // namespace

bool DnnlConv3D(const Conv3DParams& p, const float* x, const float* w, bool w_constant,
                const float* b, float* y, const PostOps& post, int threads,
                std::unique_ptr<NodeState>* state) {
  if (!DnnlAvailable()) return false;
  std::unique_ptr<NodeState> local;
  if (!state) state = &local;
  auto* plan = dynamic_cast<Conv3DPlan*>(state->get());
  if (!plan || !plan->Matches(p, threads, b != nullptr, post)) {
    auto fresh = std::make_unique<Conv3DPlan>();
    fresh->p = p;
    fresh->threads = threads;
    fresh->has_bias = b != nullptr;
    fresh->has_z = post.z != nullptr;
    fresh->act = post.act;
    fresh->alpha = post.alpha;
    fresh->beta = post.beta;
    try {
      dnnl_common::SingleThreaded();
      Prepare(fresh.get());
    } catch (const dnnl::error&) {
      fresh->supported = false;
      fresh->parts.clear();
    }
    plan = fresh.get();
    *state = std::move(fresh);
  }
  if (!plan->supported) return false;
  dnnl_common::SingleThreaded();
  PrepareWeights(plan, w, w_constant);
  ParallelFor(threads, static_cast<int64_t>(plan->parts.size()), [&](int64_t i0, int64_t i1) {
    dnnl_common::SingleThreaded();
    for (int64_t i = i0; i < i1; ++i) RunPart(plan->parts[i], p, x, b, post.z, y);
  });
  if (post.act == PostOps::Act::kSwish) {
    const int64_t n = p.N * p.M * p.out[0] * p.out[1] * p.out[2];
    SwishF32(y, y, n, 1.0f);
  }
  return true;
}

#else

bool DnnlConv3D(const Conv3DParams&, const float*, const float*, bool, const float*, float*,
                const PostOps&, int, std::unique_ptr<NodeState>*) {
  return false;
}

#endif

}  // namespace kiln::ops
