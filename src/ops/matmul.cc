// Matrix products: MatMul, Gemm, Einsum, Det. Attention and RotaryEmbedding live in
// matmul_attention.cc; the GEMM kernels in kernels/x86/gemm.cc.
#include <string>

#include "kernels/dnnl/gemm_dnnl.h"
#include "kernels/x86/gemm.h"
#include "kernels/x86/gemm_kernels.h"
#include "kernels/x86/thread_pool.h"
#include "ops/common.h"
#include "ops/einsum_plan.h"

namespace kiln::ops {

void RegisterAttentionOps(OpRegistry& r);  // matmul_attention.cc

namespace {

// ---------------------------------------------------------------------------------------------
// MatMul: numpy matmul. 1-D operands are promoted to matrices and the added dim removed again.

struct MatMulShape {
  Dims a_batch, b_batch, out_batch;
  int64_t M = 1, N = 1, K = 1;
  Dims out;
};

Status MatMulShapeOf(const Dims& a, const Dims& b, MatMulShape* s, const InferContext* ictx,
                     const ComputeContext* cctx) {
  auto err = [&](const std::string& m) { return ictx ? ictx->error(m) : cctx->error(m); };
  if (a.empty() || b.empty()) return err("MatMul operands must have rank >= 1");
  Dims a2 = a, b2 = b;
  if (a.size() == 1) a2.insert(a2.begin(), 1);
  if (b.size() == 1) b2.push_back(1);
  s->M = a2[a2.size() - 2];
  s->K = a2.back();
  s->N = b2.back();
  if (b2[b2.size() - 2] != s->K)
    return err("MatMul inner dimensions differ: " + DimsToString(a) + " x " + DimsToString(b));
  s->a_batch.assign(a2.begin(), a2.end() - 2);
  s->b_batch.assign(b2.begin(), b2.end() - 2);
  if (!BroadcastDims(s->a_batch, s->b_batch, &s->out_batch))
    return err("MatMul batch dimensions do not broadcast: " + DimsToString(a) + " x " +
               DimsToString(b));
  s->out = s->out_batch;
  if (a.size() > 1) s->out.push_back(s->M);
  if (b.size() > 1) s->out.push_back(s->N);
  return OkStatus();
}

Status MatMulInfer(InferContext& ctx) {
  if (!IsFloatingDType(ctx.input_dtype(0)) && !IsSignedIntDType(ctx.input_dtype(0)) &&
      !IsUnsignedIntDType(ctx.input_dtype(0)))
    return ctx.error("MatMul does not support " + std::string(DTypeName(ctx.input_dtype(0))));
  if (ctx.input_dtype(1) != ctx.input_dtype(0)) return ctx.error("MatMul operand types differ");
  MatMulShape s;
  KILN_RETURN_IF_ERROR(MatMulShapeOf(ctx.input_dims(0), ctx.input_dims(1), &s, &ctx, nullptr));
  ctx.set_output(0, ctx.input_dtype(0), s.out);
  return OkStatus();
}

Status MatMulCompute(ComputeContext& ctx) {
  const Tensor& a = ctx.input(0);
  const Tensor& b = ctx.input(1);
  MatMulShape s;
  KILN_RETURN_IF_ERROR(MatMulShapeOf(a.dims(), b.dims(), &s, nullptr, &ctx));
  Tensor& y = ctx.output(0);
  const int64_t M = s.M, N = s.N, K = s.K;
  std::array<Dims, 2> strides = {BroadcastStrides(s.a_batch, s.out_batch),
                                 BroadcastStrides(s.b_batch, s.out_batch)};
  // Constant float weights shared by every row (a linear layer on [.., M, K] activations, as
  // transformers write them): oneDNN's matmul with B packed once (kernels/dnnl/gemm_dnnl.h), as
  // Gemm.
  const int64_t rows = NumElements(s.out_batch) * M;
  if (a.dtype() == DType::kFloat32 && NumElements(s.b_batch) == 1 && ctx.input_constant(1) &&
      rows > 1 &&
      DnnlGemm(rows, N, K, a.data<float>(), b.data<float>(), false, true, nullptr, y.data<float>(),
               ctx.threads(), ctx.state()))
    return OkStatus();
  // Products of activations without broadcasting (attention's Q K^T, P V): oneDNN's batched
  // matmul reads them as they are, where our GEMM would pack both per batch.
  if (a.dtype() == DType::kFloat32 && !ctx.input_constant(1) && s.a_batch == s.out_batch &&
      s.b_batch == s.out_batch && M > 1 && N > 1 &&
      DnnlBatchedMatMul(NumElements(s.out_batch), M, N, K, a.data<float>(), b.data<float>(),
                        y.data<float>(), ctx.threads(), ctx.state()))
    return OkStatus();
  bool ok = Dispatch<kNumericTypes>(a.dtype(), [&]<class T>() {
    const T* A = a.data<T>();
    const T* B = b.data<T>();
    T* Y = y.data<T>();
    // The GEMM accumulates; the output may be an uncleared slice of a Concat's buffer.
    std::fill(Y, Y + y.size(), T(0));
    if (NumElements(s.b_batch) == 1) {  // one shared B: a single GEMM over all rows of A
      GemmAny<T>(false, false, NumElements(s.out_batch) * M, N, K, 1.0, A, B, Y, ctx.threads());
      return;
    }
    // Many small products (a decode step's one query row per head): the threads take whole
    // products; few large ones: each product takes the threads.
    std::vector<std::array<int64_t, 2>> offsets;
    ForEachBroadcast<2>(s.out_batch, strides, [&](int64_t, const std::array<int64_t, 2>& off) {
      offsets.push_back(off);
    });
    const int64_t batches = static_cast<int64_t>(offsets.size());
    const int outer = static_cast<int>(std::min<int64_t>(ctx.threads(), batches));
    const int inner = batches >= ctx.threads() ? 1 : ctx.threads();
    ParallelFor(outer, batches, [&](int64_t o0, int64_t o1) {
      for (int64_t o = o0; o < o1; ++o)
        GemmAny<T>(false, false, M, N, K, 1.0, A + offsets[o][0] * M * K, B + offsets[o][1] * K * N,
                   Y + o * M * N, inner);
    });
  });
  if (!ok) return ctx.error("MatMul does not support " + std::string(DTypeName(a.dtype())));
  return OkStatus();
}

// ---------------------------------------------------------------------------------------------
// Gemm: Y = alpha * op(A) * op(B) + beta * C, C broadcast to [M, N].

Status GemmDims(const Dims& a, const Dims& b, bool ta, bool tb, int64_t* M, int64_t* N, int64_t* K,
                std::string* why) {
  if (a.size() != 2 || b.size() != 2) {
    *why = "Gemm needs 2-D A and B, got " + DimsToString(a) + " and " + DimsToString(b);
    return Error(*why);
  }
  *M = ta ? a[1] : a[0];
  *K = ta ? a[0] : a[1];
  int64_t kb = tb ? b[1] : b[0];
  *N = tb ? b[0] : b[1];
  if (kb != *K) {
    *why = "Gemm inner dimensions differ: " + DimsToString(a) + (ta ? "^T" : "") + " x " +
           DimsToString(b) + (tb ? "^T" : "");
    return Error(*why);
  }
  return OkStatus();
}

Status GemmInfer(InferContext& ctx) {
  const ir::Node& n = ctx.node();
  DType t = ctx.input_dtype(0);
  if (!IsFloatingDType(t) && !IsSignedIntDType(t) && !IsUnsignedIntDType(t))
    return ctx.error("Gemm does not support " + std::string(DTypeName(t)));
  if (ctx.input_dtype(1) != t) return ctx.error("Gemm operand types differ");
  int64_t M, N, K;
  std::string why;
  if (!GemmDims(ctx.input_dims(0), ctx.input_dims(1), n.attr_int("transA", 0) != 0,
                n.attr_int("transB", 0) != 0, &M, &N, &K, &why)
           .ok())
    return ctx.error(why);
  if (ctx.has_input(2)) {
    if (ctx.input_dtype(2) != t) return ctx.error("Gemm C has a different type from A");
    const Dims& c = ctx.input_dims(2);
    Dims out;
    if (c.size() > 2 || !BroadcastDims(c, {M, N}, &out) || out != Dims{M, N})
      return ctx.error("Gemm C of shape " + DimsToString(c) + " does not broadcast to " +
                       DimsToString({M, N}));
  } else if (ctx.opset() < 11) {
    return ctx.error("Gemm before opset 11 requires input C");
  }
  ctx.set_output(0, t, {M, N});
  return OkStatus();
}

Status GemmCompute(ComputeContext& ctx) {
  const ir::Node& n = ctx.node();
  const bool ta = n.attr_int("transA", 0) != 0, tb = n.attr_int("transB", 0) != 0;
  const double alpha = n.attr_float("alpha", 1.0f), beta = n.attr_float("beta", 1.0f);
  const Tensor& a = ctx.input(0);
  const Tensor& b = ctx.input(1);
  int64_t M, N, K;
  std::string why;
  if (!GemmDims(a.dims(), b.dims(), ta, tb, &M, &N, &K, &why).ok()) return ctx.error(why);
  Tensor& y = ctx.output(0);
  // Constant float weights, alpha 1 and a bias of N values (or none): oneDNN, B packed once
  // (not for a single row: our GEMV streams B at memory speed, oneDNN's matmul does not).
  if (a.dtype() == DType::kFloat32 && !ta && alpha == 1.0 && ctx.input_constant(1) && M > 1) {
    const bool bias = ctx.has_input(2) && beta != 0.0;
    const Tensor* c = bias ? &ctx.input(2) : nullptr;
    const bool bias_ok = !c || (beta == 1.0 && c->size() == N &&
                                (c->rank() == 1 || (c->rank() == 2 && c->dim(0) == 1)));
    if (bias_ok &&
        DnnlGemm(M, N, K, a.data<float>(), b.data<float>(), tb, true,
                 c ? c->data<float>() : nullptr, y.data<float>(), ctx.threads(), ctx.state()))
      return OkStatus();
  }
  bool ok = Dispatch<kNumericTypes>(a.dtype(), [&]<class T>() {
    T* Y = y.data<T>();
    std::fill(Y, Y + y.size(), T(0));  // the GEMM accumulates into Y
    if (ctx.has_input(2) && beta != 0.0) {
      const Tensor& c = ctx.input(2);
      std::array<Dims, 1> st = {BroadcastStrides(c.dims(), {M, N})};
      const T* C = c.data<T>();
      ForEachBroadcast<1>({M, N}, st, [&](int64_t o, const std::array<int64_t, 1>& off) {
        if constexpr (kIsFloat<T>) {
          Y[o] = T(static_cast<Acc<T>>(beta * static_cast<double>(C[off[0]])));
        } else {
          Y[o] = beta == 1.0 ? C[off[0]] : static_cast<T>(beta * static_cast<double>(C[off[0]]));
        }
      });
    }
    GemmAny<T>(ta, tb, M, N, K, alpha, a.data<T>(), b.data<T>(), Y, ctx.threads());
  });
  if (!ok) return ctx.error("Gemm does not support " + std::string(DTypeName(a.dtype())));
  return OkStatus();
}

// ---------------------------------------------------------------------------------------------
// Einsum (its plan: ops/einsum_plan.h).

Status EinsumInfer(InferContext& ctx) {
  std::vector<const Dims*> dims;
  for (int i = 0; i < ctx.num_inputs(); ++i) {
    if (!ctx.has_input(i)) return ctx.error("Einsum inputs cannot be omitted");
    if (ctx.input_dtype(i) != ctx.input_dtype(0)) return ctx.error("Einsum input types differ");
    dims.push_back(&ctx.input_dims(i));
  }
  if (dims.empty()) return ctx.error("Einsum needs at least one input");
  EinsumPlan plan;
  const std::string why = PlanEinsum(ctx.node().attr_string("equation", ""), dims, &plan);
  if (!why.empty()) return ctx.error(why);
  ctx.set_output(0, ctx.input_dtype(0), plan.out_dims);
  return OkStatus();
}

// Advances an odometer over `labels`; returns false after the last index. Keeps each operand's
// offset in sync.
inline bool Advance(const std::vector<int>& labels, const EinsumPlan& p, std::vector<int64_t>& idx,
                    std::vector<int64_t>& off) {
  for (int d = static_cast<int>(labels.size()) - 1; d >= 0; --d) {
    int l = labels[d];
    ++idx[d];
    for (size_t k = 0; k < off.size(); ++k) off[k] += p.stride[k][l];
    if (idx[d] < p.size[l]) return true;
    for (size_t k = 0; k < off.size(); ++k) off[k] -= p.stride[k][l] * p.size[l];
    idx[d] = 0;
  }
  return false;
}

// One dim of a strided product: its size and its strides in a, b and the output.
struct EinsumAxis {
  int64_t size = 1, sa = 0, sb = 0, sy = 0;
};

// The labels of one group as axes, outermost first by `key`'s stride, neighbours that are
// contiguous in every operand and the output merged into one (bij,jk->bik's b and i are rows).
std::vector<EinsumAxis> MergedAxes(const EinsumPlan& p, const std::vector<int>& labels,
                                   const std::vector<int64_t>& out_stride, int key) {
  std::vector<EinsumAxis> axes;
  for (int l : labels) axes.push_back({p.size[l], p.stride[0][l], p.stride[1][l], out_stride[l]});
  auto by = [key](const EinsumAxis& x) { return key == 0 ? x.sa : key == 1 ? x.sb : x.sy; };
  std::stable_sort(axes.begin(), axes.end(),
                   [&](const EinsumAxis& x, const EinsumAxis& y) { return by(x) > by(y); });
  std::vector<EinsumAxis> out;
  for (const EinsumAxis& x : axes) {
    if (!out.empty()) {
      EinsumAxis& o = out.back();
      if (o.sa == x.sa * x.size && o.sb == x.sb * x.size && o.sy == x.sy * x.size) {
        o = {o.size * x.size, x.sa, x.sb, x.sy};
        continue;
      }
    }
    out.push_back(x);
  }
  return out;
}

// A batched product whose rows, columns and contracted dims each merge into one axis (or none):
// the packed GEMM reads both operands in place by their strides and writes each batch index's
// block of the output (whose columns, or rows, are contiguous). Attention's bhqd,bhkd->bhqk,
// bmk,bkn->bmn and bij,jk->bik go here without a copy. False where the layouts do not allow it.
template <class T>
bool EinsumByStrides(const EinsumPlan& p, const std::vector<int>& batch_labels,
                     const std::vector<int>& m_labels, const std::vector<int>& n_labels,
                     const std::vector<int>& k_labels, const T* a, const T* b, T* y, int threads,
                     std::unique_ptr<NodeState>* state) {
  if constexpr (!std::is_same_v<T, float> && !std::is_same_v<T, double>) {
    return false;
  } else {
    std::vector<int64_t> out_stride(static_cast<size_t>(p.num_labels), 0);
    const Dims ost = Strides(p.out_dims);
    for (size_t d = 0; d < p.out_labels.size(); ++d) out_stride[p.out_labels[d]] += ost[d];
    const auto batch = MergedAxes(p, batch_labels, out_stride, 2);
    const auto m = MergedAxes(p, m_labels, out_stride, 0),
               n = MergedAxes(p, n_labels, out_stride, 1);
    const auto k = MergedAxes(p, k_labels, out_stride, 0);
    if (m.size() > 1 || n.size() > 1 || k.size() > 1) return false;
    const EinsumAxis one;
    const EinsumAxis &am = m.empty() ? one : m[0], &an = n.empty() ? one : n[0],
                     &ak = k.empty() ? one : k[0];
    int64_t M = am.size, N = an.size, K = ak.size;
    int64_t rsa = am.sa, csa = ak.sa, rsb = ak.sb, csb = an.sb, ldc = am.sy;
    const T *A = a, *B = b;
    bool swapped = false;  // computing Y^T = B^T A^T: the output's rows are the contiguous ones
    if (N > 1 && an.sy != 1) {
      if (M > 1 && am.sy != 1) return false;
      std::swap(M, N);
      std::swap(A, B);
      const int64_t ra = rsa, ca = csa;
      rsa = csb;
      csa = rsb;
      rsb = ca;
      csb = ra;
      ldc = an.sy;
      swapped = true;
    }
    if (M > 1 && ldc < N) return false;
    if (K == 0) {
      std::fill(y, y + NumElements(p.out_dims), T(0));
      return true;
    }
    // A single row (a decoder's one query) with A's row and B's rows or columns contiguous.
    const bool tb = rsb == 1 && csb == K;
    const bool gemv =
        M == 1 && !swapped && csa == 1 && an.sy == 1 && (tb || (rsb == N && csb == 1));
    // float products of one batch axis through oneDNN's matmul, which reads both operands by
    // their strides as the packed GEMM does (attention's Q K^T: 1.7x its speed on 3 x 197 x 197
    // x 64) and splits rows where the batch does not divide over the threads.
    if constexpr (std::is_same_v<T, float>) {
      const EinsumAxis& bt = batch.empty() ? one : batch[0];
      if (!gemv && batch.size() <= 1 &&
          DnnlStridedBatchedMatMul(bt.size, M, N, K, A, {swapped ? bt.sb : bt.sa, rsa, csa}, B,
                                   {swapped ? bt.sa : bt.sb, rsb, csb}, y, {bt.sy, ldc, 1}, threads,
                                   state))
        return true;
    }
    int64_t batches = 1;
    for (const EinsumAxis& x : batch) batches *= x.size;
    const int outer = static_cast<int>(std::min<int64_t>(threads, batches));
    const int inner = batches >= threads ? 1 : threads;
    ParallelFor(outer, batches, [&](int64_t b0, int64_t b1) {
      for (int64_t i = b0; i < b1; ++i) {
        int64_t oa = 0, ob = 0, oy = 0, index = i;
        for (int d = static_cast<int>(batch.size()) - 1; d >= 0; --d) {
          const int64_t j = index % batch[d].size;
          index /= batch[d].size;
          oa += j * batch[d].sa;
          ob += j * batch[d].sb;
          oy += j * batch[d].sy;
        }
        if (swapped) std::swap(oa, ob);
        if (gemv) {  // one row: the GEMV reads B in place (packing it would cost as much)
          std::fill(y + oy, y + oy + N, T(0));
          GemmAny<T>(false, tb, 1, N, K, 1.0, A + oa, B + ob, y + oy, inner);
          continue;
        }
        PackedGemm<T>(M, N, K, T(1), A + oa, rsa, csa, B + ob, rsb, csb, y + oy, ldc, false, inner);
      }
    });
    return true;
  }
}

// Two operands that form a batched matrix product (every label is batch, row, column or
// contracted, each in both or the right one operand) go through the GEMM instead of the
// generic loop: operands are gathered into [batch, M, K] and [batch, K, N].
template <class T>
bool EinsumAsGemm(const EinsumPlan& p, const Tensor& a, const Tensor& b, Tensor& y, int threads,
                  std::unique_ptr<NodeState>* state) {
  std::vector<int> batch, m, n, k;
  std::vector<char> is_out(p.num_labels, 0);
  for (int l : p.out_labels) is_out[l] = 1;
  for (int l = 0; l < p.num_labels; ++l) {
    if (p.size[l] < 0) continue;
    bool ina = p.stride[0][l] != 0, inb = p.stride[1][l] != 0;
    if (p.size[l] == 1) continue;  // size-1 labels are free to go anywhere
    if (is_out[l]) {
      if (ina && inb)
        batch.push_back(l);
      else if (ina)
        m.push_back(l);
      else if (inb)
        n.push_back(l);
    } else {
      if (ina && inb)
        k.push_back(l);
      else
        return false;  // summed over one operand only: leave to the generic loop
    }
  }
  // Gathering follows the summed strides, so diagonals and broadcast dims come out right.
  if (a.size() == 0 || b.size() == 0) return false;
  if (EinsumByStrides<T>(p, batch, m, n, k, a.data<T>(), b.data<T>(), y.data<T>(), threads, state))
    return true;
  auto prod = [&](const std::vector<int>& ls) {
    int64_t r = 1;
    for (int l : ls) r *= p.size[l];
    return r;
  };
  const int64_t Bn = prod(batch), M = prod(m), N = prod(n), K = prod(k);
  // Gathers operand t laid out as [g0..., g1..., g2...] into dst.
  auto gather = [&](int t, const T* src, const std::vector<int>& g0, const std::vector<int>& g1,
                    const std::vector<int>& g2, std::vector<T>& dst) {
    std::vector<int> ls = g0;
    ls.insert(ls.end(), g1.begin(), g1.end());
    ls.insert(ls.end(), g2.begin(), g2.end());
    dst.resize(prod(ls));
    if (dst.empty()) return;
    std::vector<int64_t> idx(ls.size(), 0), off(2, 0);
    int64_t i = 0;
    do {
      dst[i++] = src[off[t]];
    } while (Advance(ls, p, idx, off));
  };
  std::vector<T> A, Bm;
  gather(0, a.data<T>(), batch, m, k, A);
  gather(1, b.data<T>(), batch, k, n, Bm);
  std::vector<T> C(Bn * M * N, T(0));
  for (int64_t i = 0; i < Bn; ++i)
    GemmAny<T>(false, false, M, N, K, 1.0, A.data() + i * M * K, Bm.data() + i * K * N,
               C.data() + i * M * N, threads);
  // Scatter [batch, m, n] to the output label order.
  std::vector<int> ls = batch;
  ls.insert(ls.end(), m.begin(), m.end());
  ls.insert(ls.end(), n.begin(), n.end());
  EinsumPlan q = p;
  q.stride.assign(1, std::vector<int64_t>(p.num_labels, 0));
  Dims ost = Strides(p.out_dims);
  for (size_t d = 0; d < p.out_labels.size(); ++d) q.stride[0][p.out_labels[d]] = ost[d];
  T* Y = y.data<T>();
  if (C.empty()) return true;
  std::vector<int64_t> idx(ls.size(), 0), off(1, 0);
  int64_t i = 0;
  do {
    Y[off[0]] = C[i++];
  } while (Advance(ls, q, idx, off));
  return true;
}

Status EinsumCompute(ComputeContext& ctx) {
  std::vector<const Dims*> dims;
  for (int i = 0; i < ctx.num_inputs(); ++i) dims.push_back(&ctx.input(i).dims());
  EinsumPlan p;
  const std::string why = PlanEinsum(ctx.node().attr_string("equation", ""), dims, &p);
  if (!why.empty()) return ctx.error(why);
  Tensor& y = ctx.output(0);
  const int nops = ctx.num_inputs();
  bool ok = Dispatch<kNumericTypes>(ctx.input(0).dtype(), [&]<class T>() {
    if (nops == 2 && kIsFloat<T> &&
        EinsumAsGemm<T>(p, ctx.input(0), ctx.input(1), y, ctx.threads(), ctx.state()))
      return;
    using A = std::conditional_t<kIsFloat<T>, double,
                                 std::conditional_t<(sizeof(T) > 4), uint64_t, uint32_t>>;
    std::vector<const T*> src(nops);
    for (int k = 0; k < nops; ++k) src[k] = ctx.input(k).data<T>();
    T* Y = y.data<T>();
    if (y.size() == 0) return;
    for (int l : p.sum_labels)
      if (p.size[l] == 0) {  // empty contraction: every sum is zero
        std::fill(Y, Y + y.size(), T(0));
        return;
      }
    std::vector<int64_t> oidx(p.out_labels.size(), 0), ooff(nops, 0);
    std::vector<int64_t> sidx(p.sum_labels.size(), 0);
    int64_t o = 0;
    do {
      A acc = 0;
      std::vector<int64_t> soff = ooff;
      std::fill(sidx.begin(), sidx.end(), 0);
      do {
        A prod = 1;
        for (int k = 0; k < nops; ++k) prod *= static_cast<A>(src[k][soff[k]]);
        acc += prod;
      } while (Advance(p.sum_labels, p, sidx, soff));
      Y[o++] = static_cast<T>(static_cast<Acc<T>>(acc));
    } while (Advance(p.out_labels, p, oidx, ooff));
  });
  if (!ok)
    return ctx.error("Einsum does not support " + std::string(DTypeName(ctx.input(0).dtype())));
  return OkStatus();
}

// ---------------------------------------------------------------------------------------------
// Det: LU decomposition with partial pivoting, in double.

Status DetInfer(InferContext& ctx) {
  if (!IsFloatingDType(ctx.input_dtype(0))) return ctx.error("Det needs a floating-point input");
  const Dims& d = ctx.input_dims(0);
  if (d.size() < 2 || d[d.size() - 1] != d[d.size() - 2])
    return ctx.error("Det needs [..., M, M] input, got " + DimsToString(d));
  ctx.set_output(0, ctx.input_dtype(0), Dims(d.begin(), d.end() - 2));
  return OkStatus();
}

Status DetCompute(ComputeContext& ctx) {
  const Tensor& x = ctx.input(0);
  const int64_t n = x.dims().back();
  const int64_t count = ctx.output(0).size();
  Dispatch<kFloatTypes>(x.dtype(), [&]<class T>() {
    const T* X = x.data<T>();
    T* Y = ctx.output(0).data<T>();
    std::vector<double> a(n * n);
    for (int64_t b = 0; b < count; ++b) {
      for (int64_t i = 0; i < n * n; ++i) a[i] = static_cast<double>(X[b * n * n + i]);
      double det = 1.0;
      for (int64_t c = 0; c < n && det != 0.0; ++c) {
        int64_t piv = c;
        for (int64_t r = c + 1; r < n; ++r)
          if (std::fabs(a[r * n + c]) > std::fabs(a[piv * n + c])) piv = r;
        if (a[piv * n + c] == 0.0) {
          det = 0.0;
          break;
        }
        if (piv != c) {
          for (int64_t j = 0; j < n; ++j) std::swap(a[c * n + j], a[piv * n + j]);
          det = -det;
        }
        det *= a[c * n + c];
        for (int64_t r = c + 1; r < n; ++r) {
          double f = a[r * n + c] / a[c * n + c];
          for (int64_t j = c; j < n; ++j) a[r * n + j] -= f * a[c * n + j];
        }
      }
      Y[b] = T(static_cast<Acc<T>>(det));
    }
  });
  return OkStatus();
}

}  // namespace

void RegisterMatMulOps(OpRegistry& r) {
  r.Register("MatMul", MatMulInfer, MatMulCompute);
  r.Register("Gemm", GemmInfer, GemmCompute);
  r.Register("Einsum", EinsumInfer, EinsumCompute);
  r.Register("Det", DetInfer, DetCompute);
  RegisterAttentionOps(r);
}

}  // namespace kiln::ops
