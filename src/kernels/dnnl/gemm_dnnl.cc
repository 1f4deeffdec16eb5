#include "kernels/dnnl/gemm_dnnl.h"

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

// One matmul over rows [m0, m0 + M) of A and Y and columns [n0, n0 + N) of B and Y.
struct GemmPart {
  int64_t m0 = 0, M = 0, n0 = 0, N = 0;
  std::string impl;  // oneDNN's name for the kernel
  dnnl::matmul mm;
  memory a, w_user, w, bias, y;  // made once, pointed at each call's buffers
  dnnl::reorder w_reorder;
  bool shares_w = false;  // w is part 0's packed B
  std::unordered_map<int, memory> args;
  dnnl_common::Scratchpad scratchpad;
};

// The element types of a product: float32 throughout, or 8-bit A and int8 B into int32.
struct GemmTypes {
  memory::data_type a = memory::data_type::f32, w = memory::data_type::f32,
                    y = memory::data_type::f32;
  bool operator==(const GemmTypes& o) const { return a == o.a && w == o.w && y == o.y; }
};

size_t ElementBytes(memory::data_type t) {
  return t == memory::data_type::s8 || t == memory::data_type::u8 ? 1 : 4;
}

// What a plan is made for: the product, the layouts and what follows it in the primitive.
struct GemmKey {
  int64_t M = 0, N = 0, K = 0, lda = 0;
  GemmTypes types;
  bool trans_a = false, trans_b = false, b_constant = true;
  bool bias = false;  // a bias of N values in the primitive
  bool sum = false;   // the sum post-op: y holds z, or a bias per row, when the primitive runs
  PostOps::Act act = PostOps::Act::kNone;
  float alpha = 0, beta = 0;
  int threads = 0;
  bool operator==(const GemmKey&) const = default;
};

// With several threads, the rows split into parts on kiln's pool with oneDNN at one thread
// each (as for convolutions: kernels/dnnl/conv_dnnl.cc), sharing one packed B where the layouts
// agree; or, where B outweighs A (few rows: a classifier, a small batch), its columns, each part
// packing and streaming only its own share of B.
struct DnnlGemmPlan : NodeState {
  GemmKey key;
  bool supported = false;
  std::vector<GemmPart> parts;
  const void* w_ptr = nullptr;  // the constant B the parts hold, if any

  std::string Kernel() const override {
    if (parts.empty()) return "";
    return "onednn matmul " + parts[0].impl +
           (parts.size() > 1 ? " x" + std::to_string(parts.size()) : "");
  }

  // B is input 1 of the MatMul, Gemm and Conv nodes that run here.
  bool HoldsConstant(int i) const override {
    if (i != 1 || !supported || !w_ptr) return false;
    for (const GemmPart& part : parts)
      if (part.w == part.w_user) return false;  // oneDNN reads B where it is
    return true;
  }
};

GemmPart MakePart(const GemmKey& k, int64_t m0, int64_t M, int64_t n0, int64_t N) {
  dnnl::engine& e = dnnl_common::Engine();
  const GemmTypes& t = k.types;
  const memory::dims a_strides = k.trans_a ? memory::dims{1, k.lda} : memory::dims{k.lda, 1};
  // A column part writes its own rows densely (oneDNN's fastest kernels want that), which the
  // caller copies into Y's columns.
  const memory::desc a_md({M, k.K}, t.a, a_strides), y_md({M, N}, t.y, Tag::ab);
  // Columns [n0, n0 + N) of B [K, k.N] (stored [k.N, K] when transposed).
  const memory::desc w_user_md({k.K, N}, t.w,
                               k.trans_b ? memory::dims{1, k.K} : memory::dims{k.N, 1});
  const memory::desc bias_md({1, N}, memory::data_type::f32, Tag::ab);
  // B read where it is when it changes per call, unless transposed (oneDNN packs that).
  const memory::desc w_md =
      k.b_constant || k.trans_b ? memory::desc({k.K, N}, t.w, Tag::any) : w_user_md;
  auto d =
      k.bias ? dnnl::matmul::desc(a_md, w_md, bias_md, y_md) : dnnl::matmul::desc(a_md, w_md, y_md);
  dnnl::primitive_attr attr = dnnl_common::UserScratchpad();
  attr.set_post_ops(dnnl_common::PostOpsOf(k.sum, k.act, k.alpha, k.beta));
  dnnl::matmul::primitive_desc pd(d, attr, e);
  const std::string impl = pd.impl_info_str();
  if (impl.find("ref") != std::string::npos)  // its reference loops: kiln's own kernels are faster
    throw dnnl::error(dnnl_unimplemented, "only oneDNN's reference matmul takes this layout");
  // Integer products only where the CPU multiplies 8-bit pairs into int32 exactly (VNNI, AMX):
  // without it oneDNN sums pairs in saturating int16 (vpmaddubsw) and the result can differ.
  if (t.y == memory::data_type::s32 && impl.find("vnni") == std::string::npos &&
      impl.find("amx") == std::string::npos)
    throw dnnl::error(dnnl_unimplemented, "no exact int8 kernel on this CPU");
  GemmPart part;
  part.impl = impl;
  part.m0 = m0;
  part.M = M;
  part.n0 = n0;
  part.N = N;
  part.mm = dnnl::matmul(pd);
  part.scratchpad = dnnl_common::Scratchpad(pd.scratchpad_desc());
  part.a = memory(a_md, e, DNNL_MEMORY_NONE);
  part.y = memory(y_md, e, DNNL_MEMORY_NONE);
  part.w_user = memory(w_user_md, e, DNNL_MEMORY_NONE);
  if (pd.weights_desc() != w_user_md) {
    part.w = memory(pd.weights_desc(), e);
    part.w_reorder =
        dnnl::reorder(dnnl::reorder::primitive_desc(e, w_user_md, e, pd.weights_desc()));
  } else {
    part.w = part.w_user;
  }
  part.args = {{DNNL_ARG_SRC, part.a}, {DNNL_ARG_WEIGHTS, part.w}, {DNNL_ARG_DST, part.y}};
  if (k.bias) {
    part.bias = memory(bias_md, e, DNNL_MEMORY_NONE);
    part.args.emplace(DNNL_ARG_BIAS, part.bias);
  }
  return part;
}

// True when the parts should split B's columns rather than A's rows: a constant B larger than A
// (rows split, every part streams all of B; columns split, A is read by all), few enough rows
// that no part would have many, and at least 64 columns a part. Only where the
// parts' post-ops stay within their own columns (no sum post-op, no Swish pass over rows).
bool SplitsColumns(const GemmKey& k) {
  return k.threads > 1 && k.b_constant && !k.sum && k.act != PostOps::Act::kSwish && k.M < k.N &&
         k.M <= 64 && k.N >= 64 * k.threads;
}

void Prepare(DnnlGemmPlan* plan) {
  const GemmKey& k = plan->key;
  if (SplitsColumns(k)) {  // in blocks of 16 columns, each part packing its own
    const int64_t blocks = (k.N + 15) / 16;
    for (int64_t c = 0; c < k.threads; ++c) {
      const int64_t a = c * blocks / k.threads * 16,
                    e = std::min(k.N, (c + 1) * blocks / k.threads * 16);
      plan->parts.push_back(MakePart(k, 0, k.M, a, e - a));
    }
    plan->supported = true;
    return;
  }
  const int64_t n = std::max<int64_t>(1, std::min<int64_t>(k.threads, k.M / 4));
  for (int64_t c = 0; c < n; ++c) {
    const int64_t a = c * k.M / n, e = (c + 1) * k.M / n;
    plan->parts.push_back(MakePart(k, a, e - a, 0, k.N));
  }
  GemmPart& first = plan->parts[0];
  for (size_t c = 1; c < plan->parts.size(); ++c) {
    GemmPart& part = plan->parts[c];
    if (part.w != part.w_user && part.w.get_desc() == first.w.get_desc()) {
      part.w = first.w;
      part.args[DNNL_ARG_WEIGHTS] = part.w;
      part.shares_w = true;
    }
  }
  plan->supported = true;
}

// Where the sum post-op stands in for z or a bias per row: rows [m0, m0 + rows) of y start as
// z (or 0) plus the row's bias.
void StartRows(float* y, const float* z, const float* bias_per_row, int64_t m0, int64_t rows,
               int64_t N) {
  for (int64_t r = m0; r < m0 + rows; ++r) {
    float* yr = y + r * N;
    const float* zr = z ? z + r * N : nullptr;
    if (!bias_per_row) {
      if (zr != yr) std::memcpy(yr, zr, N * sizeof(float));
      continue;
    }
    const float b = bias_per_row[r];
    if (zr)
      for (int64_t j = 0; j < N; ++j) yr[j] = zr[j] + b;
    else
      std::fill(yr, yr + N, b);
  }
}

// Y = post(A op(B) (+ bias)) for any GemmTypes; A, B and Y as bytes of their types (a bias per
// row and post.z only with float Y).
bool RunGemm(int64_t M, int64_t N, int64_t K, const GemmTypes& types, const void* A, const void* B,
             bool trans_b, bool b_constant, const float* bias, void* Y, int threads,
             std::unique_ptr<NodeState>* state, const GemmOptions& options = {}) {
  if (!DnnlAvailable()) return false;
  std::unique_ptr<NodeState> local;
  if (!state) state = &local;
  auto* plan = dynamic_cast<DnnlGemmPlan*>(state->get());
  dnnl_common::SingleThreaded();
  const PostOps& post = options.post;
  const float* row_bias = options.bias_per_row ? bias : nullptr;
  GemmKey key;
  key.M = M;
  key.N = N;
  key.K = K;
  key.lda = options.lda > 0 ? options.lda : options.trans_a ? M : K;
  key.types = types;
  key.trans_a = options.trans_a;
  key.trans_b = trans_b;
  key.b_constant = b_constant;
  key.bias = bias && !row_bias;
  key.sum = post.z || row_bias;
  key.act = post.act;
  key.alpha = post.alpha;
  key.beta = post.beta;
  key.threads = threads;
  if (!plan || plan->key != key) {
    auto fresh = std::make_unique<DnnlGemmPlan>();
    fresh->key = key;
    plan = fresh.get();
    *state = std::move(fresh);
    try {
      Prepare(plan);
    } catch (const dnnl::error&) {
      return false;  // supported stays false
    }
  }
  if (!plan->supported) return false;
  const size_t w_elem = ElementBytes(types.w);
  if (!b_constant || plan->w_ptr != B) {  // pack B (on this thread, before the parts read it)
    for (GemmPart& part : plan->parts) {
      const size_t w_first = part.n0 * (trans_b ? K : 1) * w_elem;  // column n0's first element
      part.w_user.set_data_handle(const_cast<char*>(static_cast<const char*>(B) + w_first));
      if (part.w == part.w_user || part.shares_w) continue;
      part.w_reorder.execute(dnnl_common::Stream(), part.w_user, part.w);
      dnnl_common::Stream().wait();
    }
    plan->w_ptr = b_constant ? B : nullptr;
  }
  const size_t a_elem = ElementBytes(types.a), y_elem = ElementBytes(types.y), y_row = N * y_elem;
  const size_t a_step = options.trans_a ? a_elem : key.lda * a_elem;  // from one row to the next
  ParallelFor(threads, static_cast<int64_t>(plan->parts.size()), [&](int64_t c0, int64_t c1) {
    dnnl_common::SingleThreaded();
    for (int64_t c = c0; c < c1; ++c) {
      GemmPart& part = plan->parts[c];
      dnnl::stream& s = dnnl_common::Stream();
      const bool columns = part.N != N;
      char* y =
          columns
              ? static_cast<char*>(ScratchBytes(ScratchSlot::kDnnlDst, part.M * part.N * y_elem))
              : static_cast<char*>(Y) + part.m0 * y_row;
      part.a.set_data_handle(const_cast<char*>(static_cast<const char*>(A) + part.m0 * a_step));
      part.y.set_data_handle(y);
      if (key.bias) part.bias.set_data_handle(const_cast<float*>(bias + part.n0));
      if (key.sum) StartRows(static_cast<float*>(Y), post.z, row_bias, part.m0, part.M, N);
      part.scratchpad.Bind(part.args);
      part.mm.execute(s, part.args);
      s.wait();
      for (int64_t r = 0; columns && r < part.M; ++r)
        std::memcpy(static_cast<char*>(Y) + (part.m0 + r) * y_row + part.n0 * y_elem,
                    y + r * part.N * y_elem, part.N * y_elem);
      float* yf = reinterpret_cast<float*>(y);
      if (post.act == PostOps::Act::kSwish) SwishF32(yf, yf, part.M * N, 1.0f);
    }
  });
  return true;
}

}  // namespace

bool DnnlGemm(int64_t M, int64_t N, int64_t K, const float* A, const float* B, bool trans_b,
              bool b_constant, const float* bias, float* Y, int threads,
              std::unique_ptr<NodeState>* state, const GemmOptions& options) {
  return RunGemm(M, N, K, GemmTypes{}, A, B, trans_b, b_constant, bias, Y, threads, state, options);
}

bool DnnlGemmInt8(int64_t M, int64_t N, int64_t K, const void* A, bool a_signed, const int8_t* B,
                  bool trans_b, bool b_constant, int32_t* Y, int threads,
                  std::unique_ptr<NodeState>* state) {
  const GemmTypes types{a_signed ? dt::s8 : dt::u8, dt::s8, dt::s32};
  return RunGemm(M, N, K, types, A, B, trans_b, b_constant, nullptr, Y, threads, state);
}

namespace {

// Batched products of activations (attention's Q K^T and P V) read where they lie by their
// strides. Parts: runs of the batch where they divide it evenly over the threads, else blocks of
// each batch's rows (3 heads over 2 threads had one thread do twice the other's work).
struct MatMulPart {
  int64_t b0 = 0, m0 = 0;
  dnnl::matmul mm;
  memory a, w, y;
  std::unordered_map<int, memory> args;
  dnnl_common::Scratchpad scratchpad;
};

// What a batched matmul plan was made for: its shapes, the operands' strides and the threads.
struct MatMulKey {
  int64_t batch = 0, M = 0, N = 0, K = 0;
  Strides3 as{}, bs{}, ys{};
  int threads = 0;
  bool operator==(const MatMulKey&) const = default;
};

struct DnnlMatMulPlan : NodeState {
  MatMulKey key;
  bool supported = false;
  std::vector<MatMulPart> parts;
  std::string impl;  // oneDNN's implementation, for profiles
  std::string Kernel() const override {
    return "onednn batched matmul " + impl +
           (parts.size() > 1 ? " x" + std::to_string(parts.size()) : "");
  }
};

MatMulPart MakeBatchPart(DnnlMatMulPlan& plan, int64_t b0, int64_t b, int64_t m0, int64_t m) {
  dnnl::engine& e = dnnl_common::Engine();
  const auto f32 = memory::data_type::f32;
  auto md = [&](int64_t rows, int64_t cols, const Strides3& st) {
    // One product: a batch stride of the matrix's extent, as a dense tensor's (brgemm's need).
    const int64_t batch_stride = b == 1 ? std::max(rows * st[1], cols * st[2]) : st[0];
    return memory::desc({b, rows, cols}, f32, {batch_stride, st[1], st[2]});
  };
  const MatMulKey& k = plan.key;
  const memory::desc a_md = md(m, k.K, k.as), w_md = md(k.K, k.N, k.bs), y_md = md(m, k.N, k.ys);
  dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(a_md, w_md, y_md),
                                  dnnl_common::UserScratchpad(), e);
  if (std::string(pd.impl_info_str()).rfind("ref", 0) == 0)
    throw dnnl::error(dnnl_unimplemented, "only oneDNN's reference matmul takes it");
  plan.impl = pd.impl_info_str();
  MatMulPart part;
  part.b0 = b0;
  part.m0 = m0;
  part.mm = dnnl::matmul(pd);
  part.scratchpad = dnnl_common::Scratchpad(pd.scratchpad_desc());
  part.a = memory(a_md, e, DNNL_MEMORY_NONE);
  part.w = memory(w_md, e, DNNL_MEMORY_NONE);
  part.y = memory(y_md, e, DNNL_MEMORY_NONE);
  part.args = {{DNNL_ARG_SRC, part.a}, {DNNL_ARG_WEIGHTS, part.w}, {DNNL_ARG_DST, part.y}};
  return part;
}

void PlanBatchParts(DnnlMatMulPlan* plan) {
  const int64_t t = plan->key.threads, batch = plan->key.batch, M = plan->key.M;
  if (t <= 1 || batch % t == 0 || batch >= 4 * t || M < 2 * t) {
    const int64_t n = std::max<int64_t>(1, std::min<int64_t>(t, batch));
    for (int64_t c = 0; c < n; ++c) {
      const int64_t a = c * batch / n, e = (c + 1) * batch / n;
      plan->parts.push_back(MakeBatchPart(*plan, a, e - a, 0, M));
    }
    return;
  }
  // Each batch's rows in T blocks: batch * T parts of one product each, as dense as the
  // operands are (oneDNN's brgemm takes those; a block over all batches is strided).
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t c = 0; c < t; ++c) {
      const int64_t a = c * M / t, e = (c + 1) * M / t;
      plan->parts.push_back(MakeBatchPart(*plan, b, 1, a, e - a));
    }
}

}  // namespace

bool DnnlStridedBatchedMatMul(int64_t batch, int64_t M, int64_t N, int64_t K, const float* A,
                              const Strides3& as, const float* B, const Strides3& bs, float* Y,
                              const Strides3& ys, int threads, std::unique_ptr<NodeState>* state) {
  if (!DnnlAvailable() || batch <= 0 || M <= 0 || N <= 0 || K <= 0) return false;
  std::unique_ptr<NodeState> local;
  if (!state) state = &local;
  auto* plan = dynamic_cast<DnnlMatMulPlan*>(state->get());
  dnnl_common::SingleThreaded();
  const MatMulKey key{batch, M, N, K, as, bs, ys, threads};
  if (!plan || plan->key != key) {
    auto fresh = std::make_unique<DnnlMatMulPlan>();
    fresh->key = key;
    plan = fresh.get();
    *state = std::move(fresh);
    try {
      PlanBatchParts(plan);
      plan->supported = true;
    } catch (const dnnl::error&) {
      return false;  // supported stays false
    }
  }
  if (!plan->supported) return false;
  ParallelFor(threads, static_cast<int64_t>(plan->parts.size()), [&](int64_t c0, int64_t c1) {
    dnnl_common::SingleThreaded();
    for (int64_t c = c0; c < c1; ++c) {
      MatMulPart& part = plan->parts[c];
      dnnl::stream& s = dnnl_common::Stream();
      part.a.set_data_handle(const_cast<float*>(A + part.b0 * as[0] + part.m0 * as[1]));
      part.w.set_data_handle(const_cast<float*>(B + part.b0 * bs[0]));
      part.y.set_data_handle(Y + part.b0 * ys[0] + part.m0 * ys[1]);
      part.scratchpad.Bind(part.args);
      part.mm.execute(s, part.args);
      s.wait();
    }
  });
  return true;
}

bool DnnlBatchedMatMul(int64_t batch, int64_t M, int64_t N, int64_t K, const float* A,
                       const float* B, float* Y, int threads, std::unique_ptr<NodeState>* state) {
  return DnnlStridedBatchedMatMul(batch, M, N, K, A, {M * K, K, 1}, B, {K * N, N, 1}, Y,
                                  {M * N, N, 1}, threads, state);
}

#else

bool DnnlGemmInt8(int64_t, int64_t, int64_t, const void*, bool, const int8_t*, bool, bool, int32_t*,
                  int, std::unique_ptr<NodeState>*) {
  return false;
}

bool DnnlBatchedMatMul(int64_t, int64_t, int64_t, int64_t, const float*, const float*, float*, int,
                       std::unique_ptr<NodeState>*) {
  return false;
}

bool DnnlStridedBatchedMatMul(int64_t, int64_t, int64_t, int64_t, const float*, const Strides3&,
                              const float*, const Strides3&, float*, const Strides3&, int,
                              std::unique_ptr<NodeState>*) {
  return false;
}

bool DnnlGemm(int64_t, int64_t, int64_t, const float*, const float*, bool, bool, const float*,
              float*, int, std::unique_ptr<NodeState>*, const GemmOptions&) {
  return false;
}

#endif

}  // namespace kiln::ops
