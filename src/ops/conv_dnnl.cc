#include "ops/conv_dnnl.h"

#include <cstring>
#include <string>
#include <unordered_map>

#include "ops/scratch.h"

#if KILN_WITH_DNNL
#include "ops/dnnl_common.h"
#endif

namespace kiln::ops {

#if KILN_WITH_DNNL
namespace {

using dnnl::memory;
using Tag = memory::format_tag;
constexpr memory::data_type kF32 = memory::data_type::f32;

using dnnl_common::Engine;
using dnnl_common::Stream;

struct DnnlConvState : NodeState {
  Conv2DParams p{};
  int threads = 0;
  bool has_bias = false, has_z = false;
  ConvPostOps::Act act = ConvPostOps::Act::kNone;
  float alpha = 0, beta = 0;
  ConvLayouts layouts;
  bool supported = false;
  dnnl::convolution_forward conv;
  memory::desc src_md, dst_md, w_md, user_src_md, user_dst_md, user_z_md, user_w_md, bias_md;
  dnnl::reorder src_reorder, dst_reorder, w_reorder, z_reorder;
  memory w_mem;                  // the weights in the primitive's layout
  const float* w_ptr = nullptr;  // the constant weights w_mem holds, if any
  // Made once; each call points them at its buffers (creating them cost a few us per call).
  memory user_src, src, user_w, user_dst, dst, bias, user_z;
  std::unordered_map<int, memory> args;

  bool Matches(const Conv2DParams& q, int t, bool bias, const ConvPostOps& post,
               ConvLayouts l) const {
    return std::memcmp(&p, &q, sizeof(p)) == 0 && threads == t && has_bias == bias &&
           has_z == (post.z != nullptr) && act == post.act && alpha == post.alpha &&
           beta == post.beta && layouts.x == l.x && layouts.y == l.y && layouts.z == l.z;
  }
};

void Prepare(DnnlConvState* st) {
  const Conv2DParams& p = st->p;
  const memory::dims src{p.N, p.C, p.H, p.W}, dst{p.N, p.M, p.OH, p.OW};
  const memory::dims w = p.group == 1
                             ? memory::dims{p.M, p.C, p.KH, p.KW}
                             : memory::dims{p.group, p.M / p.group, p.C / p.group, p.KH, p.KW};
  const ConvLayouts& l = st->layouts;
  st->user_src_md = memory::desc(src, kF32, l.x ? Tag::nhwc : Tag::nchw);
  st->user_dst_md = memory::desc(dst, kF32, l.y ? Tag::nhwc : Tag::nchw);
  st->user_z_md = memory::desc(dst, kF32, l.z ? Tag::nhwc : Tag::nchw);
  st->user_w_md = memory::desc(w, kF32, p.group == 1 ? Tag::oihw : Tag::goihw);
  st->bias_md = memory::desc({p.M}, kF32, Tag::x);
  const memory::dims strides{p.sh, p.sw}, dil{p.dh - 1, p.dw - 1}, pl{p.ph, p.pw},
      pr{p.peh, p.pew};
  const auto prop = dnnl::prop_kind::forward_inference;
  const auto alg = dnnl::algorithm::convolution_direct;
  dnnl::post_ops po;
  if (st->has_z) po.append_sum(1.0f);
  using Act = ConvPostOps::Act;
  if (st->act == Act::kRelu) po.append_eltwise(1.0f, dnnl::algorithm::eltwise_relu, 0.0f, 0.0f);
  if (st->act == Act::kLeakyRelu)
    po.append_eltwise(1.0f, dnnl::algorithm::eltwise_relu, st->alpha, 0.0f);
  if (st->act == Act::kClip)
    po.append_eltwise(1.0f, dnnl::algorithm::eltwise_clip, st->alpha, st->beta);
  if (st->act == Act::kSwish) po.append_eltwise(1.0f, dnnl::algorithm::eltwise_swish, 1.0f, 0.0f);
  dnnl::primitive_attr attr;
  attr.set_post_ops(po);
  auto make = [&](Tag src_tag, Tag dst_tag) {
    const memory::desc any_src(src, kF32, src_tag), any_dst(dst, kF32, dst_tag),
        any_w(w, kF32, Tag::any);
    auto d = st->has_bias ? dnnl::convolution_forward::desc(prop, alg, any_src, any_w, st->bias_md,
                                                            any_dst, strides, dil, pl, pr)
                          : dnnl::convolution_forward::desc(prop, alg, any_src, any_w, any_dst,
                                                            strides, dil, pl, pr);
    return dnnl::convolution_forward::primitive_desc(d, attr, Engine());
  };
  // With a channels-last side the primitive computes channels-last on both sides (mixed layouts
  // mostly take oneDNN's reference loops). All in NCHW, oneDNN chooses, except for a first layer
  // (under 16 input channels): its JIT kernel reads NCHW directly into 16-channel blocks, and
  // one reorder gives NCHW back (half the time of its choice, NHWC with two reorders).
  dnnl::convolution_forward::primitive_desc pd;
  if (!l.any() && p.C < 16) {
    pd = make(Tag::nchw, Tag::nChw16c);
    if (std::string(pd.impl_info_str()).rfind("ref", 0) == 0) pd = make(Tag::any, Tag::any);
  } else if (!l.any()) {
    pd = make(Tag::any, Tag::any);
  } else {
    pd = make(Tag::nhwc, Tag::nhwc);
  }
  if (l.any() && std::string(pd.impl_info_str()).rfind("ref", 0) == 0)
    throw dnnl::error(dnnl_unimplemented, "only oneDNN's reference convolution takes the layout");
  st->conv = dnnl::convolution_forward(pd);
  st->src_md = pd.src_desc();
  st->dst_md = pd.dst_desc();
  st->w_md = pd.weights_desc();
  if (st->src_md != st->user_src_md)
    st->src_reorder = dnnl::reorder(dnnl::reorder::primitive_desc(
        Engine(), st->user_src_md, Engine(), st->src_md));
  if (st->dst_md != st->user_dst_md) {
    st->dst_reorder = dnnl::reorder(dnnl::reorder::primitive_desc(
        Engine(), st->dst_md, Engine(), st->user_dst_md));
  }
  if (st->has_z && st->user_z_md != st->dst_md)
    st->z_reorder = dnnl::reorder(dnnl::reorder::primitive_desc(
        Engine(), st->user_z_md, Engine(), st->dst_md));
  if (st->w_md != st->user_w_md) {
    st->w_reorder = dnnl::reorder(dnnl::reorder::primitive_desc(
        Engine(), st->user_w_md, Engine(), st->w_md));
    st->w_mem = memory(st->w_md, Engine());
  }
  dnnl::engine& e = Engine();
  auto none = [&](const memory::desc& md) { return memory(md, e, DNNL_MEMORY_NONE); };
  st->user_src = none(st->user_src_md);
  st->src = st->src_md != st->user_src_md ? none(st->src_md) : st->user_src;
  st->user_w = none(st->user_w_md);
  st->user_dst = none(st->user_dst_md);
  st->dst = st->dst_md != st->user_dst_md ? none(st->dst_md) : st->user_dst;
  st->user_z = none(st->user_z_md);
  st->args = {{DNNL_ARG_SRC, st->src},
              {DNNL_ARG_WEIGHTS, st->w_md != st->user_w_md ? st->w_mem : st->user_w},
              {DNNL_ARG_DST, st->dst}};
  if (st->has_bias) {
    st->bias = none(st->bias_md);
    st->args.emplace(DNNL_ARG_BIAS, st->bias);
  }
  st->supported = true;
}

}  // namespace

bool DnnlAvailable() { return true; }

bool DnnlConv2D(const Conv2DParams& p, const float* x, const float* w, bool w_constant,
                const float* b, float* y, int threads, std::unique_ptr<NodeState>* state,
                const ConvPostOps& post, ConvLayouts layouts) {
  std::unique_ptr<NodeState> local;
  if (!state) state = &local;
  auto* st = dynamic_cast<DnnlConvState*>(state->get());
  dnnl_common::SetThreads(threads);
  try {
    if (!st || !st->Matches(p, threads, b != nullptr, post, layouts)) {
      auto fresh = std::make_unique<DnnlConvState>();
      fresh->p = p;
      fresh->threads = threads;
      fresh->has_bias = b != nullptr;
      fresh->has_z = post.z != nullptr;
      fresh->act = post.act;
      fresh->alpha = post.alpha;
      fresh->beta = post.beta;
      fresh->layouts = layouts;
      st = fresh.get();
      *state = std::move(fresh);
      Prepare(st);
    }
  } catch (const dnnl::error&) {
    return false;  // st->supported stays false: this shape takes kiln's own kernels
  }
  if (!st->supported) return false;
  dnnl::stream& s = Stream();
  st->user_src.set_data_handle(const_cast<float*>(x));
  if (st->src_md != st->user_src_md) {
    st->src.set_data_handle(ScratchBytes(ScratchSlot::kDnnlSrc, st->src_md.get_size()));
    st->src_reorder.execute(s, st->user_src, st->src);
  }
  st->user_w.set_data_handle(const_cast<float*>(w));
  if (st->w_md != st->user_w_md && (!w_constant || st->w_ptr != w)) {
    st->w_reorder.execute(s, st->user_w, st->w_mem);
    st->w_ptr = w_constant ? w : nullptr;
  }
  st->user_dst.set_data_handle(y);
  if (st->dst_md != st->user_dst_md)
    st->dst.set_data_handle(ScratchBytes(ScratchSlot::kDnnlDst, st->dst_md.get_size()));
  if (post.z) {  // the sum post-op adds what dst holds
    if (st->user_z_md != st->dst_md) {
      st->user_z.set_data_handle(const_cast<float*>(post.z));
      st->z_reorder.execute(s, st->user_z, st->dst);
    } else if (post.z != st->dst.get_data_handle()) {
      std::memcpy(st->dst.get_data_handle(), post.z, st->dst_md.get_size());
    }
  }
  if (b) st->bias.set_data_handle(const_cast<float*>(b));
  st->conv.execute(s, st->args);
  if (st->dst_md != st->user_dst_md) st->dst_reorder.execute(s, st->dst, st->user_dst);
  s.wait();
  return true;
}

#else

bool DnnlAvailable() { return false; }

bool DnnlConv2D(const Conv2DParams&, const float*, const float*, bool, const float*, float*, int,
                std::unique_ptr<NodeState>*, const ConvPostOps&, ConvLayouts) {
  return false;
}

#endif

}  // namespace kiln::ops
