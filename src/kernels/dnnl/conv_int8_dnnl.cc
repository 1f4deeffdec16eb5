#include "kernels/dnnl/conv_int8_dnnl.h"

#include <algorithm>
#include <cstring>
#include <string>
#include <unordered_map>
#include <vector>

#include "kernels/x86/cpu_isa.h"
#include "kernels/x86/scratch.h"
#include "kernels/x86/strided_copy.h"
#include "kernels/x86/thread_pool.h"

#if KILN_WITH_DNNL
#include "kernels/dnnl/dnnl_available.h"
#include "kernels/dnnl/dnnl_common.h"
#endif

namespace kiln::ops {

#if KILN_WITH_DNNL
namespace {

using namespace dnnl_common;

// One primitive over output channels [m0, m0 + m) and output rows [o0, o1), reading input rows
// from in0.
struct Int8ConvPart {
  int64_t m0 = 0, m = 0, o0 = 0, o1 = 0, in0 = 0;
  bool shares_w = false;  // w is part 0's (row parts: the same weights)
  std::string impl;
  dnnl::convolution_forward conv;
  memory src, w_user, w, bias, dst, zp;
  dnnl::reorder w_reorder;
  LargeBuffer w_buffer;
  std::unordered_map<int, memory> args;
  dnnl_common::Scratchpad scratchpad;
};

struct Int8ConvPlan : NodeState {
  Int8ConvShape s;
  int threads = 0;
  bool supported = false;
  const void* w_from = nullptr;  // the constant weights the parts hold reordered
  std::vector<Int8ConvPart> parts;
  Int8ConvPart window_sums;  // where w has zero points
  std::string impl;

  bool Matches(const Int8ConvShape& q, int t) const {
    return std::memcmp(&s, &q, sizeof(s)) == 0 && threads == t;
  }
  std::string Kernel() const override {
    if (!supported) return "";
    return "onednn " + impl + (parts.size() > 1 ? " x" + std::to_string(parts.size()) : "");
  }
};

// Below this many multiply-adds a part, one thread does it all (grouped ones, depthwise most,
// do far fewer per byte).
constexpr int64_t kPartWork = int64_t{1} << 21, kGroupedPartWork = int64_t{1} << 18;

// The primitive for output channels [m0, m0 + m) and rows [o0, o1), or (window_sums) the one
// that sums each group's window of x - x_zp over the whole image: weights of ones, one output
// channel per group.
Int8ConvPart MakePart(const Int8ConvShape& whole, int64_t m0, int64_t m, int64_t o0, int64_t o1,
                      bool window_sums = false) {
  dnnl::engine& e = dnnl_common::Engine();
  Int8ConvShape s = whole;
  const int64_t extent = (s.kh - 1) * s.dh + 1;
  const int64_t first = o0 * s.sh - s.ph, end = (o1 - 1) * s.sh - s.ph + extent;
  const bool row_part = o0 > 0 || o1 < whole.oh;  // of one image (batches keep whole images)
  if (row_part) {                                 // its input rows and paddings
    s.ph = std::max<int64_t>(0, -first);
    s.h = std::min(end, whole.h) - std::max<int64_t>(0, first);
    s.oh = o1 - o0;
  }
  const int64_t cg = s.c / s.group;
  if (window_sums) m = s.group;
  const bool bias = s.has_bias && !window_sums;
  const memory::dims src{s.n, s.c, s.h, s.w}, dst{s.n, m, s.oh, s.ow};
  const memory::dims w = s.group == 1 ? memory::dims{m, s.c, s.kh, s.kw}
                                      : memory::dims{s.group, m / s.group, cg, s.kh, s.kw};
  const memory::dims strides{s.sh, s.sw}, dilation{s.dh - 1, s.dw - 1}, pad_l{s.ph, s.pw};
  // Right padding as the output size implies it (negative where the last windows end before
  // the image does).
  const memory::dims pad_r{(s.oh - 1) * s.sh + (s.kh - 1) * s.dh + 1 - s.h - s.ph,
                           (s.ow - 1) * s.sw + (s.kw - 1) * s.dw + 1 - s.w - s.pw};
  const memory::desc src_md(src, s.x_signed ? dt::s8 : dt::u8, Tag::nhwc),
      w_user_md(w, dt::s8, s.group == 1 ? Tag::oihw : Tag::goihw), w_md(w, dt::s8, Tag::any),
      bias_md({m}, dt::s32, Tag::x), dst_md(dst, dt::s32, Tag::nhwc);
  dnnl::primitive_attr attr = dnnl_common::UserScratchpad();
  attr.set_zero_points(DNNL_ARG_SRC, 0, {DNNL_RUNTIME_S32_VAL});
  const auto prop = dnnl::prop_kind::forward_inference;
  const auto alg = dnnl::algorithm::convolution_direct;
  auto d = bias ? dnnl::convolution_forward::desc(prop, alg, src_md, w_md, bias_md, dst_md, strides,
                                                  dilation, pad_l, pad_r)
                : dnnl::convolution_forward::desc(prop, alg, src_md, w_md, dst_md, strides,
                                                  dilation, pad_l, pad_r);
  dnnl::convolution_forward::primitive_desc pd(d, attr, e);
  const std::string impl = pd.impl_info_str();
  // Without VNNI or AMX oneDNN sums pairs of products in saturating int16 (vpmaddubsw).
  if (impl.find("vnni") == std::string::npos && impl.find("amx") == std::string::npos)
    throw dnnl::error(dnnl_unimplemented, "no exact int8 convolution kernel on this CPU");
  Int8ConvPart part;
  part.m0 = m0;
  part.m = m;
  part.o0 = o0;
  part.o1 = o1;
  part.in0 = row_part ? std::max<int64_t>(0, first) : 0;
  part.impl = impl;
  part.conv = dnnl::convolution_forward(pd);
  part.scratchpad = dnnl_common::Scratchpad(pd.scratchpad_desc());
  part.src = memory(src_md, e, DNNL_MEMORY_NONE);
  part.dst = memory(dst_md, e, DNNL_MEMORY_NONE);
  part.zp = memory({{1}, dt::s32, Tag::x}, e, DNNL_MEMORY_NONE);
  part.w_user = memory(w_user_md, e, DNNL_MEMORY_NONE);
  part.w_buffer = AllocateLarge(pd.weights_desc().get_size());
  part.w = memory(pd.weights_desc(), e, part.w_buffer.get());
  part.w_reorder = dnnl::reorder(dnnl::reorder::primitive_desc(e, w_user_md, e, pd.weights_desc()));
  part.args = {{DNNL_ARG_SRC, part.src},
               {DNNL_ARG_WEIGHTS, part.w},
               {DNNL_ARG_DST, part.dst},
               {DNNL_ARG_ATTR_ZERO_POINTS | DNNL_ARG_SRC, part.zp}};
  if (bias) {
    part.bias = memory(bias_md, e, DNNL_MEMORY_NONE);
    part.args[DNNL_ARG_BIAS] = part.bias;
  }
  if (window_sums) {
    std::vector<int8_t> ones(static_cast<size_t>(s.c * s.kh * s.kw), 1);
    part.w_user.set_data_handle(ones.data());
    part.w_reorder.execute(dnnl_common::Stream(), part.w_user, part.w);
    dnnl_common::Stream().wait();
  }
  return part;
}

// The plan for s at `threads`: output channels split in parts of whole 16-channel blocks, or,
// for grouped convolutions, output rows; or unsupported.
std::unique_ptr<Int8ConvPlan> MakePlan(const Int8ConvShape& s, int threads) {
  auto plan = std::make_unique<Int8ConvPlan>();
  plan->s = s;
  plan->threads = threads;
  const int64_t work = s.n * s.m * s.oh * s.ow * (s.c / s.group) * s.kh * s.kw;
  const int64_t most = s.group == 1 ? std::min<int64_t>({threads, s.m / 16, work / kPartWork})
                                    : std::min<int64_t>({threads, s.oh, work / kGroupedPartWork});
  const int64_t parts = std::max<int64_t>(most, 1);
  const int64_t blocks = (s.m + 15) / 16;
  try {
    for (int64_t i = 0; i < parts; ++i) {
      if (s.group > 1) {  // rows of one image
        plan->parts.push_back(MakePart(s, 0, s.m, i * s.oh / parts, (i + 1) * s.oh / parts));
        continue;
      }
      const int64_t m0 = i * blocks / parts * 16;
      const int64_t m1 = i + 1 == parts ? s.m : std::min(s.m, (i + 1) * blocks / parts * 16);
      plan->parts.push_back(MakePart(s, m0, m1 - m0, 0, s.oh));
    }
    for (size_t i = 1; i < plan->parts.size() && s.group > 1; ++i) {
      Int8ConvPart& part = plan->parts[i];
      if (part.w.get_desc() != plan->parts[0].w.get_desc()) continue;
      part.w = plan->parts[0].w;
      part.args[DNNL_ARG_WEIGHTS] = part.w;
      part.w_buffer.reset();
      part.shares_w = true;
    }
    if (s.w_zero_points) plan->window_sums = MakePart(s, 0, 0, 0, s.oh, true);
    plan->impl = plan->parts[0].impl;
    plan->supported = true;
  } catch (const dnnl::error&) {
    plan->parts.clear();
  }
  return plan;
}

// Reorders each part's slice of w into its layout (uint8 weights less 128 first).
void ReorderWeights(Int8ConvPlan* plan, const void* w) {
  const Int8ConvShape& s = plan->s;
  const int64_t per_m = (s.c / s.group) * s.kh * s.kw;
  std::vector<int8_t> shifted;
  for (Int8ConvPart& part : plan->parts) {
    if (part.shares_w) continue;
    const auto* bytes = static_cast<const uint8_t*>(w) + part.m0 * per_m;
    if (s.w_unsigned) {
      shifted.resize(static_cast<size_t>(part.m * per_m));
      for (size_t i = 0; i < shifted.size(); ++i)
        shifted[i] = static_cast<int8_t>(static_cast<int32_t>(bytes[i]) - 128);
      bytes = reinterpret_cast<const uint8_t*>(shifted.data());
    }
    part.w_user.set_data_handle(const_cast<uint8_t*>(bytes));
    part.w_reorder.execute(dnnl_common::Stream(), part.w_user, part.w);
    dnnl_common::Stream().wait();
  }
}

// Runs part into a channels-last buffer of the calling thread's scratch slot; returns it.
int32_t* RunPart(Int8ConvPart& part, const Int8ConvShape& s, const void* x, int32_t* x_zp,
                 const int32_t* bias, ScratchSlot slot = ScratchSlot::kDnnlDst) {
  auto* dst = Scratch<int32_t>(slot, s.n * (part.o1 - part.o0) * s.ow * part.m);
  // x: 8-bit, channels-last, so an input row is w * c bytes.
  part.src.set_data_handle(
      const_cast<uint8_t*>(static_cast<const uint8_t*>(x) + part.in0 * s.w * s.c));
  part.dst.set_data_handle(dst);
  part.zp.set_data_handle(x_zp);
  if (bias) part.bias.set_data_handle(const_cast<int32_t*>(bias + part.m0));
  part.scratchpad.Bind(part.args);
  dnnl::stream& stream = dnnl_common::Stream();
  part.conv.execute(stream, part.args);
  stream.wait();
  return dst;
}

// y [m, pixels] (channel rows `stride` apart) = dst [pixels, m], in blocks of 64 pixels that stay
// in the cache while each channel takes its column.
void ChannelsFirst(const int32_t* dst, int64_t pixels, int64_t m, int32_t* y, int64_t stride) {
  for (int64_t p0 = 0; p0 < pixels; p0 += 64) {
    const int64_t p1 = std::min(pixels, p0 + 64);
    for (int64_t j = 0; j < m; ++j)
      for (int64_t p = p0; p < p1; ++p) y[j * stride + p] = dst[p * m + j];
  }
}

}  // namespace

DnnlInt8 DnnlInt8Kernels() {
  // The ISAs are bit sets, each one holding the ones below it.
  static const DnnlInt8 kernels = [] {
    const auto isa = static_cast<unsigned>(dnnl::get_effective_cpu_isa());
    auto has = [&](dnnl_cpu_isa_t i) { return (isa & static_cast<unsigned>(i)) == i; };
    if (has(dnnl_cpu_isa_avx512_core_amx)) return DnnlInt8::kAmx;
    if (has(dnnl_cpu_isa_avx512_core_vnni) || has(dnnl_cpu_isa_avx2_vnni)) return DnnlInt8::kVnni;
    return DnnlInt8::kInexact;
  }();
  return DnnlAvailable() ? kernels : DnnlInt8::kInexact;
}

bool DnnlConvInt8(const Int8ConvShape& s, const void* x, int32_t x_zp, const void* w,
                  bool w_constant, const int32_t* w_zp, const int32_t* bias, int32_t* out,
                  int threads, std::unique_ptr<NodeState>* state) {
  if (!DnnlAvailable()) return false;
  auto* plan = dynamic_cast<Int8ConvPlan*>(state->get());
  if (!plan || !plan->Matches(s, threads)) {
    dnnl_common::SingleThreaded();
    auto fresh = MakePlan(s, threads);
    plan = fresh.get();
    *state = std::move(fresh);
  }
  if (!plan->supported) return false;
  if (!w_constant || plan->w_from != w) {
    ReorderWeights(plan, w);
    plan->w_from = w_constant ? w : nullptr;
  }
  const int64_t pixels = s.oh * s.ow, mg = s.m / s.group;
  int32_t zp = x_zp;
  // Each group's window sums of x - x_zp, [pixels, group], shared by the parts (in a slot of
  // the caller's scratch that the parts do not use).
  const int32_t* sums = s.w_zero_points
                            ? RunPart(plan->window_sums, s, x, &zp, nullptr, ScratchSlot::kDnnlSrc)
                            : nullptr;
  auto run = [&](Int8ConvPart& part) {
    const int32_t* dst = RunPart(part, s, x, &zp, bias);
    const int64_t p0 = part.o0 * s.ow, rows = (part.o1 - part.o0) * s.ow;
    for (int64_t img = 0; img < s.n; ++img) {
      int32_t* y = out + (img * s.m + part.m0) * pixels + p0;
      if (rows == pixels)  // the part's block of y is whole
        moves::StridedCopy({part.m, pixels}, {1, part.m}, 0, dst + img * rows * part.m, y, 4, 1);
      else
        ChannelsFirst(dst + img * rows * part.m, rows, part.m, y, pixels);
      for (int64_t j = 0; j < part.m && sums; ++j) {
        const int32_t z = w_zp[part.m0 + j];
        const int32_t* sum = sums + (img * pixels + p0) * s.group + (part.m0 + j) / mg;
        if (z != 0)
          for (int64_t p = 0; p < rows; ++p) y[j * pixels + p] -= z * sum[p * s.group];
      }
    }
  };
  const auto n = static_cast<int64_t>(plan->parts.size());
  if (n == 1) {
    run(plan->parts[0]);
  } else {
    ParallelFor(static_cast<int>(n), n, [&](int64_t i0, int64_t i1) {
      dnnl_common::SingleThreaded();  // a worker's own OpenMP team would compete with the pool
      for (int64_t i = i0; i < i1; ++i) run(plan->parts[i]);
    });
  }
  return true;
}

#else

bool DnnlConvInt8(const Int8ConvShape&, const void*, int32_t, const void*, bool, const int32_t*,
                  const int32_t*, int32_t*, int, std::unique_ptr<NodeState>*) {
  return false;
}

DnnlInt8 DnnlInt8Kernels() { return DnnlInt8::kInexact; }

#endif

}  // namespace kiln::ops
