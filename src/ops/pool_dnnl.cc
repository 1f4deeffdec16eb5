#include "ops/pool_dnnl.h"

#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "ops/channels_last.h"
#include "ops/conv_geometry.h"
#include "ops/thread_pool.h"

#if KILN_WITH_DNNL
#include "ops/dnnl_common.h"
#endif

namespace kiln::ops {

bool PoolCanRunChannelsLast(const ir::Node& node, const ir::Graph& g) {
  const bool onnx = node.domain.empty() || node.domain == "ai.onnx";
  if (!onnx || (node.op_type != "MaxPool" && node.op_type != "AveragePool")) return false;
  if (node.inputs.empty() || node.inputs[0] < 0 || node.outputs.empty() || node.outputs[0] < 0)
    return false;
  for (size_t i = 1; i < node.outputs.size(); ++i)
    if (node.outputs[i] >= 0) return false;  // Indices
  const ir::TypeInfo& x = g.values[node.inputs[0]].type;
  const ir::TypeInfo& y = g.values[node.outputs[0]].type;
  if (x.dtype != DType::kFloat32 || !x.shape_known() || !y.shape_known() || x.dims.size() != 4 ||
      node.attr_int("storage_order", 0) != 0)
    return false;
  Dims kernel = node.attr_ints("kernel_shape");
  WindowGeom wg;
  if (kernel.size() != 2 ||
      !ComputeWindowGeom(node, Dims(x.dims.begin() + 2, x.dims.end()), kernel, true,
                         node.attr_int("ceil_mode", 0) != 0, &wg)
           .empty())
    return false;
  for (int64_t d : wg.dilations)
    if (d != 1) return false;
  if (y.dims != Dims{x.dims[0], x.dims[1], wg.out[0], wg.out[1]}) return false;
  // The grid's last window may run past the trailing pad (ceil mode): oneDNN would count those
  // taps as padding too.
  if (node.op_type == "AveragePool" && node.attr_int("count_include_pad", 0) != 0)
    for (int j = 0; j < 2; ++j)
      if ((wg.out[j] - 1) * wg.strides[j] + kernel[j] > x.dims[2 + j] + wg.pad_begin[j] + wg.pad_end[j])
        return false;
  return true;
}

#if KILN_WITH_DNNL
namespace {

using dnnl::memory;

// One primitive: the whole pool, or the part of it one thread runs (images [n0, ..) or output
// rows [out0, ..) reading input rows from in0).
struct PoolPart {
  int64_t n0 = 0, out0 = 0, in0 = 0;
  dnnl::pooling_forward pool;
  memory mx, my;  // made once, pointed at each call's buffers
  dnnl_common::Scratchpad scratchpad;
};

// As for convolutions (ops/conv_dnnl.cc): with several threads, parts on kiln's pool with
// oneDNN at one thread each.
struct DnnlPoolPlan : NodeState {
  Pool2DShape s{};
  int64_t N = 0;
  DnnlPoolKind kind{};
  int threads = 0;
  std::vector<PoolPart> parts;
  bool Matches(const Pool2DShape& q, int64_t n, DnnlPoolKind k, int t) const {
    return std::memcmp(&s, &q, sizeof(s)) == 0 && N == n && kind == k && threads == t;
  }
};

// The primitive for images [n0, n1) and output rows [o0, o1). Rows of one image get the pads
// of the image edges they reach; whole images (o0 = 0, o1 = OH) read every row. On the right,
// the pads that make the grid end where it does (ceil mode runs past the pads). Throws when
// only oneDNN's reference loops take it.
PoolPart MakePart(const Pool2DShape& s, int64_t C, DnnlPoolKind kind, int64_t n0, int64_t n1,
                  int64_t o0, int64_t o1) {
  dnnl::engine& e = dnnl_common::Engine();
  const bool whole = o0 == 0 && o1 == s.OH;
  const int64_t first = whole ? -s.ph : o0 * s.sh - s.ph, end = (o1 - 1) * s.sh - s.ph + s.KH;
  const int64_t top = std::max<int64_t>(0, -first);
  const int64_t bottom = whole ? end - s.H : std::max<int64_t>(0, end - s.H);
  const int64_t rows = whole ? s.H : std::min(end, s.H) - std::max<int64_t>(0, first);
  PoolPart part;
  part.n0 = n0;
  part.out0 = o0;
  part.in0 = std::max<int64_t>(0, first);
  const memory::desc md_x({n1 - n0, C, rows, s.W}, memory::data_type::f32, memory::format_tag::nhwc);
  const memory::desc md_y({n1 - n0, C, o1 - o0, s.OW}, memory::data_type::f32, memory::format_tag::nhwc);
  const memory::dims pr{bottom, (s.OW - 1) * s.sw + s.KW - s.W - s.pw};
  const auto alg = kind == DnnlPoolKind::kMax ? dnnl::algorithm::pooling_max
                   : kind == DnnlPoolKind::kAvgIncludePad ? dnnl::algorithm::pooling_avg_include_padding
                                                          : dnnl::algorithm::pooling_avg_exclude_padding;
  dnnl::pooling_forward::desc d(dnnl::prop_kind::forward_inference, alg, md_x, md_y, {s.sh, s.sw},
                                {s.KH, s.KW}, {top, s.pw}, pr);
  dnnl::pooling_forward::primitive_desc pd(d, dnnl_common::UserScratchpad(), e);
  if (std::string(pd.impl_info_str()).rfind("ref", 0) == 0)
    throw dnnl::error(dnnl_unimplemented, "only oneDNN's reference pooling takes the part");
  part.pool = dnnl::pooling_forward(pd);
  part.scratchpad = dnnl_common::Scratchpad(pd.scratchpad_desc());
  part.mx = memory(md_x, e, DNNL_MEMORY_NONE);
  part.my = memory(md_y, e, DNNL_MEMORY_NONE);
  return part;
}

void Run(PoolPart& part, const float* x, float* y) {
  part.mx.set_data_handle(const_cast<float*>(x));
  part.my.set_data_handle(y);
  dnnl::stream& str = dnnl_common::Stream();
  std::unordered_map<int, dnnl::memory> args{{DNNL_ARG_SRC, part.mx}, {DNNL_ARG_DST, part.my}};
  part.scratchpad.Bind(args);
  part.pool.execute(str, args);
  str.wait();
}

}  // namespace

bool DnnlPool2DChannelsLast(const Pool2DShape& s, int64_t N, DnnlPoolKind kind, const float* x,
                       float* y, int threads, std::unique_ptr<NodeState>* state) {
  std::unique_ptr<NodeState> local;
  if (!state) state = &local;
  auto* plan = dynamic_cast<DnnlPoolPlan*>(state->get());
  dnnl_common::SingleThreaded();
  const int64_t C = s.planes / N;
  // Parts: the images when there is one per thread, else the rows of the one image, else one.
  const bool by_images = N >= threads, by_rows = !by_images && N == 1 && s.OH >= 2;
  if (!plan || !plan->Matches(s, N, kind, threads)) {
    auto fresh = std::make_unique<DnnlPoolPlan>();
    fresh->s = s;
    fresh->N = N;
    fresh->kind = kind;
    fresh->threads = threads;
    auto make = [&](int t) {
      fresh->parts.clear();
      const int64_t total = t <= 1 ? 1 : by_images ? N : by_rows ? s.OH : 1;
      const int64_t n = std::min<int64_t>(t, total);
      for (int64_t c = 0; c < n; ++c) {
        const int64_t a = c * total / n, e = (c + 1) * total / n;
        fresh->parts.push_back(n == 1      ? MakePart(s, C, kind, 0, N, 0, s.OH)
                               : by_images ? MakePart(s, C, kind, a, e, 0, s.OH)
                                           : MakePart(s, C, kind, 0, 1, a, e));
      }
    };
    try {
      try {
        make(threads);
      } catch (const dnnl::error&) {
        if (threads <= 1) throw;
        make(1);  // a part only the reference loops take: the whole pool on one thread
      }
    } catch (const dnnl::error&) {
      return false;
    }
    plan = fresh.get();
    *state = std::move(fresh);
  }
  const int64_t parts = static_cast<int64_t>(plan->parts.size());
  if (parts == 1) {
    Run(plan->parts[0], x, y);
    return true;
  }
  const int64_t image = C * s.H * s.W, out_image = C * s.OH * s.OW;
  ParallelFor(threads, parts, [&](int64_t c0, int64_t c1) {
    dnnl_common::SingleThreaded();
    for (int64_t c = c0; c < c1; ++c) {
      PoolPart& part = plan->parts[c];
      Run(part, x + part.n0 * image + part.in0 * s.W * C, y + part.n0 * out_image + part.out0 * s.OW * C);
    }
  });
  return true;
}

#else

bool DnnlPool2DChannelsLast(const Pool2DShape&, int64_t, DnnlPoolKind, const float*, float*, int,
                       std::unique_ptr<NodeState>*) {
  return false;
}

#endif

}  // namespace kiln::ops
