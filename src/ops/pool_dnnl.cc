#include "ops/pool_dnnl.h"

#include <cstring>

#include "ops/channels_last.h"
#include "ops/conv_geometry.h"

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

struct DnnlPoolState : NodeState {
  Pool2DShape s{};
  int64_t N = 0;
  DnnlPoolKind kind{};
  int threads = 0;
  dnnl::pooling_forward pool;
  memory::desc md_x, md_y;
  memory mx, my;  // made once, pointed at each call's buffers
  bool Matches(const Pool2DShape& q, int64_t n, DnnlPoolKind k, int t) const {
    return std::memcmp(&s, &q, sizeof(s)) == 0 && N == n && kind == k && threads == t;
  }
};

}  // namespace

bool DnnlPool2DChannelsLast(const Pool2DShape& s, int64_t N, DnnlPoolKind kind, const float* x,
                       float* y, int threads, std::unique_ptr<NodeState>* state) {
  std::unique_ptr<NodeState> local;
  if (!state) state = &local;
  auto* st = dynamic_cast<DnnlPoolState*>(state->get());
  dnnl_common::SetThreads(threads);
  dnnl::engine& e = dnnl_common::Engine();
  if (!st || !st->Matches(s, N, kind, threads)) {
    auto fresh = std::make_unique<DnnlPoolState>();
    fresh->s = s;
    fresh->N = N;
    fresh->kind = kind;
    fresh->threads = threads;
    try {
      const int64_t C = s.planes / N;
      fresh->md_x = memory::desc({N, C, s.H, s.W}, memory::data_type::f32, memory::format_tag::nhwc);
      fresh->md_y = memory::desc({N, C, s.OH, s.OW}, memory::data_type::f32, memory::format_tag::nhwc);
      // The right pads that make the grid end where it does (ceil mode runs past the pads).
      const memory::dims pr{(s.OH - 1) * s.sh + s.KH - s.H - s.ph, (s.OW - 1) * s.sw + s.KW - s.W - s.pw};
      const auto alg = kind == DnnlPoolKind::kMax ? dnnl::algorithm::pooling_max
                       : kind == DnnlPoolKind::kAvgIncludePad ? dnnl::algorithm::pooling_avg_include_padding
                                                              : dnnl::algorithm::pooling_avg_exclude_padding;
      dnnl::pooling_forward::desc d(dnnl::prop_kind::forward_inference, alg, fresh->md_x, fresh->md_y,
                                    {s.sh, s.sw}, {s.KH, s.KW}, {s.ph, s.pw}, pr);
      fresh->pool = dnnl::pooling_forward(dnnl::pooling_forward::primitive_desc(d, e));
      fresh->mx = memory(fresh->md_x, e, DNNL_MEMORY_NONE);
      fresh->my = memory(fresh->md_y, e, DNNL_MEMORY_NONE);
    } catch (const dnnl::error&) {
      return false;
    }
    st = fresh.get();
    *state = std::move(fresh);
  }
  st->mx.set_data_handle(const_cast<float*>(x));
  st->my.set_data_handle(y);
  dnnl::stream& str = dnnl_common::Stream();
  st->pool.execute(str, {{DNNL_ARG_SRC, st->mx}, {DNNL_ARG_DST, st->my}});
  str.wait();
  return true;
}

#else

bool DnnlPool2DChannelsLast(const Pool2DShape&, int64_t, DnnlPoolKind, const float*, float*, int,
                       std::unique_ptr<NodeState>*) {
  return false;
}

#endif

}  // namespace kiln::ops
