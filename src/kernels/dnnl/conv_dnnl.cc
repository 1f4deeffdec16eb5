#include "kernels/dnnl/conv_dnnl.h"

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
#include "kernels/x86/layout_kernels.h"
#endif

namespace kiln::ops {

#if KILN_WITH_DNNL
namespace {

using namespace dnnl_common;

// One primitive and its buffers: the whole convolution, or one part of a split one.
struct DnnlConvState {
  Conv2DParams p{};
  bool has_bias = false, has_z = false;
  PostOps::Act act = PostOps::Act::kNone;
  float alpha = 0, beta = 0;
  ConvLayouts layouts;
  bool winograd = false;       // try oneDNN's Winograd kernels first (WinogradWins)
  int64_t scratch_budget = 0;  // ... where they fit it (DnnlConv2D)
  // Channels per pixel of the memory y (and z) sit in when wider than the part's M: the whole
  // output's when the part makes only some (by_channels), a Concat's (ConvLayouts::y_channels).
  int64_t y_channels = 0, z_channels = 0;
  int64_t w_offset = 0;  // where the part's weights start, in floats
  dnnl::convolution_forward conv;
  std::string kernel;  // oneDNN's name for conv's implementation
  memory::desc src_md, dst_md, w_md, user_src_md, user_dst_md, user_z_md, user_w_md, bias_md;
  dnnl::reorder src_reorder, dst_reorder, w_reorder, z_reorder;
  // dst is dense channels-last and user_dst the same pixels y_channels apart: a copy per pixel
  // (twice as fast as oneDNN's reorder for it) instead of dst_reorder.
  bool dst_pixel_copy = false;
  memory w_mem;  // the weights in the primitive's layout, in w_buffer
  LargeBuffer w_buffer;
  const float* w_ptr = nullptr;  // the constant weights w_mem holds, if any
  bool shares_w = false;         // w_mem is part 0's (the same layout)
  // Made once; each call points them at its buffers (creating them cost a few us per call).
  memory user_src, src, user_w, user_dst, dst, bias, user_z;
  std::unordered_map<int, memory> args;
  dnnl_common::Scratchpad scratchpad;
};

// Where a part of a split convolution reads and writes: images [n0, n1) (a batch), or output
// pixels [out0, out1) reading input pixels from in0 (one image, channels-last: whole rows, or
// columns of a one-row image).
struct ConvPart {
  int64_t n0 = 0, n1 = 0, out0 = 0, out1 = 0, in0 = 0;
  int64_t m0 = 0;  // or output channels [m0, m0 + the part's M) of the whole image (by_channels)
};

// With Swish a large channels-last output is made in parts of about this many bytes, on one
// thread too, so that the Swish pass after each part finds it in the core's L2 cache.
constexpr int64_t kSwishPartBytes = 512 << 10;

// A node's convolution: one primitive, or, with several threads, one per part of the output
// run on kiln's thread pool with oneDNN at one thread each (so that only one pool of threads
// ever works: oneDNN's own OpenMP team would compete with it for the cores).
struct DnnlConvPlan : NodeState {
  Conv2DParams p{};
  int threads = 0;
  bool has_bias = false;
  PostOps post;
  ConvLayouts layouts;
  bool supported = false;
  int64_t scratch_budget = 0;
  bool by_rows = false;      // parts split the rows (NHWC); else they split the batch
  bool by_cols = false;      // ... or the columns of a one-row image (a 1-D convolution)
  bool by_channels = false;  // parts split the output channels, in either layout
  bool cache_parts = true;   // Swish may split a single image's rows for the cache
  std::vector<ConvPart> parts;
  std::vector<std::unique_ptr<DnnlConvState>> states;  // one per part

  bool HoldsConstant(int i) const override {
    if (i != 1 || !supported || states.empty()) return false;
    for (const auto& st : states)
      if (st->w_md == st->user_w_md || (!st->shares_w && !st->w_ptr)) return false;
    return true;
  }

  std::string Kernel() const override {
    if (!supported || states.empty()) return "";
    return "onednn " + states[0]->kernel +
           (parts.size() > 1 ? " x" + std::to_string(parts.size()) : "");
  }

  bool Matches(const Conv2DParams& q, int t, bool bias, const PostOps& o, ConvLayouts l) const {
    return std::memcmp(&p, &q, sizeof(p)) == 0 && threads == t && has_bias == bias &&
           (post.z != nullptr) == (o.z != nullptr) && post.act == o.act && post.alpha == o.alpha &&
           post.beta == o.beta && layouts.x == l.x && layouts.y == l.y && layouts.z == l.z &&
           layouts.y_channels == l.y_channels;
  }
};

// Without AVX-512, oneDNN 2.6 runs a dense convolution (not 1x1, not depthwise) on
// channels-last memory at 45-55 GFLOP/s on one Zen 3 core, and in its blocked layout (nChw8c)
// at 75-78, so there it computes blocked, reorders included: resnet18 channels-last 66 -> 56 ms
// Its 1x1 and depthwise kernels run as fast on channels-last.
bool BlockedBeatsChannelsLast(const Conv2DParams& p) {
  const bool depthwise = p.group > 1 && p.group == p.C;
  return BestIsa() != Isa::kAvx512 && !depthwise && (p.KH != 1 || p.KW != 1);
}

void Prepare(DnnlConvState* st) {
  const Conv2DParams& p = st->p;
  const memory::dims src{p.N, p.C, p.H, p.W}, dst{p.N, p.M, p.OH, p.OW};
  const memory::dims w = p.group == 1
                             ? memory::dims{p.M, p.C, p.KH, p.KW}
                             : memory::dims{p.group, p.M / p.group, p.C / p.group, p.KH, p.KW};
  const ConvLayouts& l = st->layouts;
  st->user_src_md = memory::desc(src, kF32, l.x ? Tag::nhwc : Tag::nchw);
  // A part of the output channels writes its slice of a wider output (and reads z's).
  auto out_md = [&](bool channels_last, int64_t m) {
    if (m == 0) return memory::desc(dst, kF32, channels_last ? Tag::nhwc : Tag::nchw);
    const int64_t hw = p.OH * p.OW;
    return memory::desc(
        dst, kF32,
        channels_last ? memory::dims{m * hw, 1, p.OW * m, m} : memory::dims{m * hw, hw, p.OW, 1});
  };
  st->user_dst_md = out_md(l.y, st->y_channels);
  st->user_z_md = out_md(l.z, st->z_channels);
  st->user_w_md = memory::desc(w, kF32, p.group == 1 ? Tag::oihw : Tag::goihw);
  st->bias_md = memory::desc({p.M}, kF32, Tag::x);
  const memory::dims strides{p.sh, p.sw}, dil{p.dh - 1, p.dw - 1}, pl{p.ph, p.pw}, pr{p.peh, p.pew};
  const auto prop = dnnl::prop_kind::forward_inference;
  dnnl::primitive_attr attr = dnnl_common::UserScratchpad();
  attr.set_post_ops(dnnl_common::PostOpsOf(st->has_z, st->act, st->alpha, st->beta));
  auto make = [&](Tag src_tag, Tag dst_tag,
                  dnnl::algorithm alg = dnnl::algorithm::convolution_direct) {
    const memory::desc any_src(src, kF32, src_tag), any_dst(dst, kF32, dst_tag),
        any_w(w, kF32, Tag::any);
    auto d = st->has_bias ? dnnl::convolution_forward::desc(prop, alg, any_src, any_w, st->bias_md,
                                                            any_dst, strides, dil, pl, pr)
                          : dnnl::convolution_forward::desc(prop, alg, any_src, any_w, any_dst,
                                                            strides, dil, pl, pr);
    return dnnl::convolution_forward::primitive_desc(d, attr, Engine());
  };
  // Winograd computes in its own blocked layout, reordered from and to ours around it (the
  // reorders are in WinogradWins's measurements).
  dnnl::convolution_forward::primitive_desc pd;
  bool winograd = false;
  if (st->winograd) {
    try {
      pd = make(Tag::any, Tag::any, dnnl::algorithm::convolution_winograd);
      const auto direct_w = static_cast<int64_t>(p.M * (p.C / p.group) * p.KH * p.KW * 4);
      const auto extra =
          static_cast<int64_t>(pd.scratchpad_desc().get_size() + pd.weights_desc().get_size()) -
          direct_w;
      winograd = st->scratch_budget == 0 || extra <= st->scratch_budget;
    } catch (const dnnl::error&) {  // a post-op or part it does not take: the direct kernels
    }
  }
  // With a channels-last side the primitive computes channels-last on both sides (mixed layouts
  // mostly take oneDNN's reference loops), or blocked where BlockedBeatsChannelsLast. All in
  // NCHW, oneDNN chooses, except for a first layer (under 16 input channels): its JIT kernel reads
  // NCHW directly into 16-channel blocks, and one reorder gives NCHW back (half the time of its
  // choice, NHWC with two reorders).
  if (!winograd) {
    if (!l.any() && p.C < 16) {
      pd = make(Tag::nchw, Tag::nChw16c);
      if (std::string(pd.impl_info_str()).rfind("ref", 0) == 0) pd = make(Tag::any, Tag::any);
    } else if (!l.any()) {
      pd = make(Tag::any, Tag::any);
    } else if (BlockedBeatsChannelsLast(p)) {
      pd = make(Tag::any, Tag::any);
    } else {
      pd = make(Tag::nhwc, Tag::nhwc);
    }
    if (l.any() && std::string(pd.impl_info_str()).rfind("ref", 0) == 0)
      throw dnnl::error(dnnl_unimplemented, "only oneDNN's reference convolution takes the layout");
  }
  st->conv = dnnl::convolution_forward(pd);
  st->kernel = pd.impl_info_str();
  st->scratchpad = dnnl_common::Scratchpad(pd.scratchpad_desc());
  st->src_md = pd.src_desc();
  st->dst_md = pd.dst_desc();
  st->w_md = pd.weights_desc();
  if (st->src_md != st->user_src_md)
    st->src_reorder = dnnl::reorder(
        dnnl::reorder::primitive_desc(Engine(), st->user_src_md, Engine(), st->src_md));
  st->dst_pixel_copy = l.y && st->y_channels > 0 && st->y_channels != p.M &&
                       st->dst_md == memory::desc(dst, kF32, Tag::nhwc);
  if (st->dst_md != st->user_dst_md && !st->dst_pixel_copy) {
    st->dst_reorder = dnnl::reorder(
        dnnl::reorder::primitive_desc(Engine(), st->dst_md, Engine(), st->user_dst_md));
  }
  if (st->has_z && st->user_z_md != st->dst_md)
    st->z_reorder =
        dnnl::reorder(dnnl::reorder::primitive_desc(Engine(), st->user_z_md, Engine(), st->dst_md));
  if (st->w_md != st->user_w_md) {
    st->w_reorder =
        dnnl::reorder(dnnl::reorder::primitive_desc(Engine(), st->user_w_md, Engine(), st->w_md));
    st->w_buffer = AllocateLarge(st->w_md.get_size());
    st->w_mem = memory(st->w_md, Engine(), st->w_buffer.get());
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
}

// Points st's memory objects at this call's buffers and runs it (on the calling thread's
// stream). The weights are already in st->w_mem where the primitive wants another layout.
void Run(DnnlConvState* st, const float* x, const float* w, const float* b, float* y,
         const float* z) {
  dnnl::stream& s = Stream();
  st->user_src.set_data_handle(const_cast<float*>(x));
  if (st->src_md != st->user_src_md) {
    st->src.set_data_handle(ScratchBytes(ScratchSlot::kDnnlSrc, st->src_md.get_size()));
    st->src_reorder.execute(s, st->user_src, st->src);
  }
  st->user_w.set_data_handle(const_cast<float*>(w + st->w_offset));
  st->user_dst.set_data_handle(y);
  if (st->dst_md != st->user_dst_md)
    st->dst.set_data_handle(ScratchBytes(ScratchSlot::kDnnlDst, st->dst_md.get_size()));
  if (z) {  // the sum post-op adds what dst holds
    if (st->user_z_md != st->dst_md) {
      st->user_z.set_data_handle(const_cast<float*>(z));
      st->z_reorder.execute(s, st->user_z, st->dst);
    } else if (z != st->dst.get_data_handle()) {
      std::memcpy(st->dst.get_data_handle(), z, st->dst_md.get_size());
    }
  }
  if (b) st->bias.set_data_handle(const_cast<float*>(b));
  st->scratchpad.Bind(st->args);
  st->conv.execute(s, st->args);
  if (st->dst_pixel_copy) {
    s.wait();
    const Conv2DParams& p = st->p;
    const float* from = static_cast<const float*>(st->dst.get_data_handle());
    for (int64_t i = 0; i < p.N * p.OH * p.OW; ++i)
      std::memcpy(y + i * st->y_channels, from + i * p.M, static_cast<size_t>(p.M) * sizeof(float));
    return;
  }
  if (st->dst_md != st->user_dst_md) st->dst_reorder.execute(s, st->dst, st->user_dst);
  s.wait();
}

// Reorders w into every part's w_mem that needs it (on the calling thread, before the parts run).
void PrepareWeights(DnnlConvPlan* plan, const float* w, bool w_constant) {
  for (auto& st : plan->states) {
    if (st->shares_w || st->w_md == st->user_w_md || (w_constant && st->w_ptr == w)) continue;
    st->user_w.set_data_handle(const_cast<float*>(w + st->w_offset));
    st->w_reorder.execute(Stream(), st->user_w, st->w_mem);
    Stream().wait();
    st->w_ptr = w_constant ? w : nullptr;
  }
}

// Whether oneDNN's Winograd convolution (F(2x2, 3x3) or F(4x4, 3x3), chosen by oneDNN) beats its
// direct one on the whole convolution p, blocked-layout reorders included. Measured at one
// thread on Zen 4: 0.37-0.47 of the direct time on
// 64..512-channel maps of 14..56 pixels, 0.6-0.9 on 16..48 channels; it loses on a first layer
// (3 channels: 3.3x slower), on 8 channels (2x) and on the smallest products (64 -> 64 channels
// on 7 x 7, 1.8M multiply-adds: 1.07) and on maps under 14 x 14, where oneDNN takes F(2x2, 3x3)
// (96 -> 208 channels on 13 x 13: 92 GFLOP/s against 190 direct). oneDNN 2.6 has Winograd
// kernels for AVX-512 only.
// Its weights take four times the direct ones' bytes (36 transformed taps for 9), which on deep
// layers of small maps outgrow everything else a model holds (vgg19: 1,077 MB against 638
// without Winograd, ONNX Runtime 909): so only where the extra weights, 27 C M floats, stay
// within 16 times the output's M OH OW floats.
bool WinogradWins(const Conv2DParams& p) {
  const int64_t macs = p.N * p.M * p.C * p.KH * p.KW * p.OH * p.OW;
  return BestIsa() == Isa::kAvx512 && p.group == 1 && p.KH == 3 && p.KW == 3 && p.sh == 1 &&
         p.sw == 1 && p.dh == 1 && p.dw == 1 && p.C >= 16 && p.M >= 16 &&
         macs >= (int64_t{2} << 20) && p.OH >= 14 && p.OW >= 14 &&
         27 * p.C <= 16 * p.N * p.OH * p.OW;
}

// A part that makes output channels [m0, ..) of out_channels (by_channels), or the whole output.
std::unique_ptr<DnnlConvState> MakePart(const Conv2DParams& p, bool has_bias, const PostOps& post,
                                        ConvLayouts layouts, bool winograd, int64_t scratch_budget,
                                        int64_t out_channels = 0, int64_t w_offset = 0) {
  auto st = std::make_unique<DnnlConvState>();
  st->p = p;
  st->winograd = winograd;
  st->scratch_budget = scratch_budget;
  st->y_channels = layouts.y_channels > 0 ? layouts.y_channels : out_channels;
  st->z_channels = out_channels;
  st->w_offset = w_offset;
  st->has_bias = has_bias;
  st->has_z = post.z != nullptr;
  st->act = post.act;
  st->alpha = post.alpha;
  st->beta = post.beta;
  st->layouts = layouts;
  Prepare(st.get());
  return st;
}

// The parts for `threads` threads: the batch when it has an image per thread, else the output
// rows of the one image (computed channels-last: each part's rows are one block of memory),
// else none (one primitive). Each row part gets the pads of its edge of the image only.
void PlanParts(DnnlConvPlan* plan) {
  const Conv2DParams& p = plan->p;
  int64_t t = plan->threads;
  const ConvLayouts& l = plan->layouts;
  if (plan->cache_parts && plan->post.act == PostOps::Act::kSwish && p.N == 1 && l.x && l.y &&
      (!plan->post.z || l.z)) {
    const int64_t bytes = p.M * p.OH * p.OW * static_cast<int64_t>(sizeof(float));
    t = std::max(t, std::min(p.OH, (bytes + kSwishPartBytes - 1) / kSwishPartBytes));
  }
  const bool winograd = WinogradWins(p);
  auto part_params = [&](int64_t n0, int64_t n1, int64_t o0, int64_t o1) {
    Conv2DParams q = p;
    q.N = n1 - n0;
    // Output positions [o0, o1) of an axis read the input from their first tap's position to
    // their last one's, with the image's pads only where they reach past its edges.
    auto crop = [&](int64_t k, int64_t d, int64_t st, int64_t n, int64_t* pl, int64_t* pr,
                    int64_t* in, int64_t* out) {
      const int64_t first = o0 * st - *pl, end = (o1 - 1) * st - *pl + (k - 1) * d + 1;
      *pl = std::max<int64_t>(0, -first);
      *pr = std::max<int64_t>(0, end - n);
      *in = std::min(end, n) - std::max<int64_t>(0, first);
      *out = o1 - o0;
    };
    if (plan->by_rows) crop(p.KH, p.dh, p.sh, p.H, &q.ph, &q.peh, &q.H, &q.OH);
    if (plan->by_cols) crop(p.KW, p.dw, p.sw, p.W, &q.pw, &q.pew, &q.W, &q.OW);
    return q;
  };
  // Output channels split where rows cannot (one output row: a 1-D convolution) or should not:
  // a small map (under 8 output rows a thread), where each row part would read all the weights
  // for few rows (Winograd's 512 -> 512 channels on 7 x 7 took 2.6 ms at 2 threads, 1.9 at one;
  // direct, 4 + 3 rows made resnet18 12.2 ms at two threads, 10.5 by channels); and a Winograd
  // convolution with at least 64 output channels a part, whose channels-last row parts ran
  // oneDNN's direct kernel in the models (GoogLeNet's 64 -> 192 on 56 x 56 at two threads: 2.0 ms
  // by rows, 1.3 by channels; with 32 channels a part, Winograd lost to the rows' direct kernel).
  // A long 1-D convolution (one row, from 16 input channels) computes channels-last in parts
  // of its columns, at one thread too, the NCHW sides converted by kiln: TCN's dilated 64 -> 64
  // over 2048 steps on Zen 5 ran at 140 GFLOP/s in oneDNN's blocked layout at one thread, 165
  // at two (32 output channels a part, each reading the whole input); 175 / 280 so. Under 16
  // input channels the blocked first-layer kernel stays (1 -> 512 over 16000: 0.40 ms, 0.63
  // channels-last).
  plan->by_cols = p.N == 1 && p.group == 1 && p.C >= 16 && p.H == 1 && p.KH == 1 && p.OH == 1 &&
                  p.OW >= 64 * t && plan->post.act != PostOps::Act::kSwish;
  const bool nchw = !l.x && !l.y && (!plan->post.z || !l.z);
  plan->by_channels = !plan->by_cols && t > 1 && p.N < t && p.M >= 32 && p.group == 1 &&
                      (p.OH < 2 || nchw || p.OH < 8 * t || (winograd && p.M >= 64 * t));
  if (!plan->by_channels && !plan->by_cols && (t <= 1 || (p.N < t && (p.N != 1 || p.OH < 2)))) {
    plan->states.push_back(
        MakePart(p, plan->has_bias, plan->post, plan->layouts, winograd, plan->scratch_budget));
    plan->parts.push_back({});
    return;
  }
  if (plan->by_channels) {
    const int64_t blocks = p.M / 16, n = std::min<int64_t>(t, blocks);
    for (int64_t c = 0; c < n; ++c) {
      ConvPart part;
      part.m0 = c * blocks / n * 16;
      Conv2DParams q = p;
      q.M = (c + 1 == n ? p.M : (c + 1) * blocks / n * 16) - part.m0;
      plan->states.push_back(MakePart(q, plan->has_bias, plan->post, plan->layouts, winograd,
                                      plan->scratch_budget, p.M, part.m0 * p.C * p.KH * p.KW));
      plan->parts.push_back(part);
    }
    return;  // each part has weights of its own
  }
  plan->by_rows = !plan->by_cols && p.N < t;
  const bool by_pixels = plan->by_rows || plan->by_cols;
  const int64_t total = plan->by_rows ? p.OH : plan->by_cols ? p.OW : p.N;
  const int64_t n = std::min<int64_t>(t, total);
  const ConvLayouts nhwc{true, plan->post.z != nullptr, true, l.y ? l.y_channels : 0};
  for (int64_t c = 0; c < n; ++c) {
    const int64_t a = c * total / n, e = (c + 1) * total / n;
    ConvPart part;
    Conv2DParams q;
    if (plan->by_rows) {  // pixel offsets of whole rows
      q = part_params(0, 1, a, e);
      part.out0 = a * p.OW;
      part.out1 = e * p.OW;
      part.in0 = std::max<int64_t>(0, a * p.sh - p.ph) * p.W;
    } else if (plan->by_cols) {
      q = part_params(0, 1, a, e);
      part.out0 = a;
      part.out1 = e;
      part.in0 = std::max<int64_t>(0, a * p.sw - p.pw);
    } else {
      q = part_params(a, e, 0, 0);
      part.n0 = a;
      part.n1 = e;
    }
    plan->states.push_back(MakePart(q, plan->has_bias, plan->post, by_pixels ? nhwc : plan->layouts,
                                    winograd, plan->scratch_budget));
    plan->parts.push_back(part);
  }
  for (size_t c = 1; c < plan->states.size(); ++c) {
    DnnlConvState& st = *plan->states[c];
    if (st.w_md != st.user_w_md && st.w_md == plan->states[0]->w_md) {  // one copy of the weights
      st.w_mem = plan->states[0]->w_mem;
      st.args[DNNL_ARG_WEIGHTS] = st.w_mem;
      st.shares_w = true;
    }
  }
}

}  // namespace

bool DnnlAvailable() { return !ReferenceKernels(); }

bool DnnlConv2D(const Conv2DParams& p, const float* x, const float* w, bool w_constant,
                const float* b, float* y, int threads, std::unique_ptr<NodeState>* state,
                const PostOps& post, ConvLayouts layouts, int64_t scratch_budget) {
  if (!DnnlAvailable()) return false;
  if (layouts.y_channels > 0 &&  // a slice of a wider output: what ConvLayouts allows
      (!layouts.y || p.N != 1 || layouts.y_channels < p.M || post.z ||
       post.act == PostOps::Act::kSwish))
    return false;
  std::unique_ptr<NodeState> local;
  if (!state) state = &local;
  auto* plan = dynamic_cast<DnnlConvPlan*>(state->get());
  dnnl_common::SingleThreaded();
  try {
    if (!plan || !plan->Matches(p, threads, b != nullptr, post, layouts)) {
      auto fresh = std::make_unique<DnnlConvPlan>();
      fresh->p = p;
      fresh->threads = threads;
      fresh->has_bias = b != nullptr;
      fresh->post = post;
      fresh->layouts = layouts;
      fresh->scratch_budget = scratch_budget;
      plan = fresh.get();
      *state = std::move(fresh);
      try {
        PlanParts(plan);
      } catch (const dnnl::error&) {
        if (threads <= 1) throw;
        plan->states.clear();  // a part oneDNN does not take: the whole convolution on one thread
        plan->parts.clear();
        plan->threads = 1;
        plan->cache_parts = false;
        PlanParts(plan);
        plan->threads = threads;
      }
      plan->supported = true;
    }
  } catch (const dnnl::error&) {
    return false;  // plan->supported stays false: this shape takes kiln's own kernels
  }
  if (!plan->supported) return false;
  PrepareWeights(plan, w, w_constant);
  const int64_t parts = static_cast<int64_t>(plan->parts.size());
  const bool swish = post.act == PostOps::Act::kSwish;
  auto swish_over = [&](float* out, int64_t n) {
    if (swish) SwishF32(out, out, n, 1.0f);
  };
  const int64_t HW = p.H * p.W, OHW = p.OH * p.OW;
  auto swish_all = [&] {  // after parts that do not each own a block of y
    if (swish)
      ParallelSlices(threads, p.N * p.M * OHW, int64_t{1} << 15,
                     [&](int64_t s, int64_t e) { swish_over(y + s, e - s); });
  };
  if (parts == 1 && !plan->by_cols) {
    Run(plan->states[0].get(), x, w, b, y, post.z);
    swish_all();
    return true;
  }
  if (plan->by_channels) {
    ParallelFor(threads, parts, [&](int64_t c0, int64_t c1) {
      dnnl_common::SingleThreaded();
      for (int64_t c = c0; c < c1; ++c) {
        const int64_t m0 = plan->parts[c].m0;
        Run(plan->states[c].get(), x, w, b ? b + m0 : nullptr, y + m0 * (layouts.y ? 1 : OHW),
            post.z ? post.z + m0 * (layouts.z ? 1 : OHW) : nullptr);
      }
    });
    swish_all();
    return true;
  }
  if (!plan->by_rows && !plan->by_cols) {  // images are contiguous in either layout
    ParallelFor(threads, parts, [&](int64_t c0, int64_t c1) {
      dnnl_common::SingleThreaded();
      for (int64_t c = c0; c < c1; ++c) {
        const int64_t n0 = plan->parts[c].n0;
        Run(plan->states[c].get(), x + n0 * p.C * HW, w, b, y + n0 * p.M * OHW,
            post.z ? post.z + n0 * p.M * OHW : nullptr);
        swish_over(y + n0 * p.M * OHW, (plan->parts[c].n1 - n0) * p.M * OHW);
      }
    });
    return true;
  }
  // Rows (or a row's columns) of one image, channels-last: an NCHW side goes through a
  // channels-last copy.
  const float* xs = x;
  if (!layouts.x) {
    float* t = Scratch<float>(ScratchSlot::kDnnlRowsSrc, static_cast<size_t>(p.C * HW));
    ChannelsLastFromNchw(x, t, p.C, HW, threads);
    xs = t;
  }
  float* ys =
      layouts.y ? y : Scratch<float>(ScratchSlot::kDnnlRowsDst, static_cast<size_t>(p.M * OHW));
  const float* zs = post.z;
  if (post.z && !layouts.z) {  // the sum post-op reads what dst holds: start it as z
    ChannelsLastFromNchw(post.z, ys, p.M, OHW, threads);
    zs = ys;
  }
  const int64_t y_pixel = layouts.y && layouts.y_channels > 0 ? layouts.y_channels : p.M;
  ParallelFor(threads, parts, [&](int64_t c0, int64_t c1) {
    dnnl_common::SingleThreaded();
    for (int64_t c = c0; c < c1; ++c) {
      const ConvPart& part = plan->parts[c];
      Run(plan->states[c].get(), xs + part.in0 * p.C, w, b, ys + part.out0 * y_pixel,
          zs ? zs + part.out0 * p.M : nullptr);
      swish_over(ys + part.out0 * p.M, (part.out1 - part.out0) * p.M);
    }
  });
  if (!layouts.y) NchwFromChannelsLast(ys, y, p.M, OHW, threads);
  return true;
}

#else

bool DnnlAvailable() { return false; }

bool DnnlConv2D(const Conv2DParams&, const float*, const float*, bool, const float*, float*, int,
                std::unique_ptr<NodeState>*, const PostOps&, ConvLayouts, int64_t) {
  return false;
}

#endif

}  // namespace kiln::ops
