#include "ops/gemm_dnnl.h"

#include <unordered_map>

#if KILN_WITH_DNNL
#include "ops/dnnl_common.h"
#endif

namespace kiln::ops {

#if KILN_WITH_DNNL
namespace {

using dnnl::memory;
using Tag = memory::format_tag;

struct DnnlGemmState : NodeState {
  int64_t M = 0, N = 0, K = 0;
  bool trans_b = false, has_bias = false;
  int threads = 0;
  bool supported = false;
  dnnl::matmul mm;
  memory a, w_user, w, bias, y;  // made once, pointed at each call's buffers
  dnnl::reorder w_reorder;
  const float* w_ptr = nullptr;  // the constant B w holds, if any
  std::unordered_map<int, memory> args;
};

void Prepare(DnnlGemmState* st) {
  dnnl::engine& e = dnnl_common::Engine();
  const auto f32 = memory::data_type::f32;
  const memory::desc a_md({st->M, st->K}, f32, Tag::ab), y_md({st->M, st->N}, f32, Tag::ab);
  const memory::desc w_user_md({st->K, st->N}, f32, st->trans_b ? Tag::ba : Tag::ab);
  const memory::desc bias_md({1, st->N}, f32, Tag::ab);
  const memory::desc w_any({st->K, st->N}, f32, Tag::any);
  auto d = st->has_bias ? dnnl::matmul::desc(a_md, w_any, bias_md, y_md)
                        : dnnl::matmul::desc(a_md, w_any, y_md);
  dnnl::matmul::primitive_desc pd(d, e);
  st->mm = dnnl::matmul(pd);
  st->a = memory(a_md, e, DNNL_MEMORY_NONE);
  st->y = memory(y_md, e, DNNL_MEMORY_NONE);
  st->w_user = memory(w_user_md, e, DNNL_MEMORY_NONE);
  if (pd.weights_desc() != w_user_md) {
    st->w = memory(pd.weights_desc(), e);
    st->w_reorder = dnnl::reorder(dnnl::reorder::primitive_desc(e, w_user_md, e, pd.weights_desc()));
  } else {
    st->w = st->w_user;
  }
  st->args = {{DNNL_ARG_SRC, st->a}, {DNNL_ARG_WEIGHTS, st->w}, {DNNL_ARG_DST, st->y}};
  if (st->has_bias) {
    st->bias = memory(bias_md, e, DNNL_MEMORY_NONE);
    st->args.emplace(DNNL_ARG_BIAS, st->bias);
  }
  st->supported = true;
}

}  // namespace

bool DnnlGemm(int64_t M, int64_t N, int64_t K, const float* A, const float* B, bool trans_b,
              bool b_constant, const float* bias, float* Y, int threads,
              std::unique_ptr<NodeState>* state) {
  std::unique_ptr<NodeState> local;
  if (!state) state = &local;
  auto* st = dynamic_cast<DnnlGemmState*>(state->get());
  dnnl_common::SetThreads(threads);
  if (!st || st->M != M || st->N != N || st->K != K || st->trans_b != trans_b ||
      st->has_bias != (bias != nullptr) || st->threads != threads) {
    auto fresh = std::make_unique<DnnlGemmState>();
    fresh->M = M;
    fresh->N = N;
    fresh->K = K;
    fresh->trans_b = trans_b;
    fresh->has_bias = bias != nullptr;
    fresh->threads = threads;
    st = fresh.get();
    *state = std::move(fresh);
    try {
      Prepare(st);
    } catch (const dnnl::error&) {
      return false;  // supported stays false
    }
  }
  if (!st->supported) return false;
  dnnl::stream& s = dnnl_common::Stream();
  st->w_user.set_data_handle(const_cast<float*>(B));
  if (st->w != st->w_user && (!b_constant || st->w_ptr != B)) {
    st->w_reorder.execute(s, st->w_user, st->w);
    st->w_ptr = b_constant ? B : nullptr;
  }
  st->a.set_data_handle(const_cast<float*>(A));
  st->y.set_data_handle(Y);
  if (bias) st->bias.set_data_handle(const_cast<float*>(bias));
  st->mm.execute(s, st->args);
  s.wait();
  return true;
}

#else

bool DnnlGemm(int64_t, int64_t, int64_t, const float*, const float*, bool, bool, const float*,
              float*, int, std::unique_ptr<NodeState>*) {
  return false;
}

#endif

}  // namespace kiln::ops
