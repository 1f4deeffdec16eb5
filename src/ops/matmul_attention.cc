// Attention (opset 23/24: scaled dot-product attention with masks, KV cache and grouped heads)
// and RotaryEmbedding (opset 23).
#include <limits>
#include <string>

#include "kernels/x86/cpu_isa.h"
#include "kernels/x86/gemm.h"
#include "kernels/x86/thread_pool.h"
#include "kernels/x86/vector_math.h"
#include "ops/attention_shape.h"
#include "ops/common.h"

namespace kiln::ops {
namespace {

std::string D2S(const Dims& d) { return DimsToString(d); }

}  // namespace

std::string MakeAttentionShape(const ir::Node& n, const std::vector<const Dims*>& in,
                               AttentionShape* s) {
  const Dims& q = *in[0];
  const Dims& k = *in[1];
  const Dims& v = *in[2];
  if (q.size() != k.size() || q.size() != v.size() || (q.size() != 3 && q.size() != 4))
    return std::string("Q, K and V must all be 3-D or all 4-D, got " + D2S(q) + ", " + D2S(k) +
                       ", " + D2S(v));
  s->is3d = q.size() == 3;
  s->B = q[0];
  if (k[0] != s->B || v[0] != s->B) return std::string("Q, K and V batch sizes differ");
  if (s->is3d) {
    s->Hq = n.attr_int("q_num_heads", 0);
    s->Hkv = n.attr_int("kv_num_heads", 0);
    if (s->Hq <= 0 || s->Hkv <= 0)
      return std::string("3-D Attention needs positive q_num_heads and kv_num_heads");
    if (q[2] % s->Hq || k[2] % s->Hkv || v[2] % s->Hkv)
      return std::string("hidden sizes " + D2S(q) + ", " + D2S(k) + ", " + D2S(v) +
                         " are not divisible by the head counts");
    s->Sq = q[1];
    s->Skv = k[1];
    s->D = q[2] / s->Hq;
    if (k[2] / s->Hkv != s->D) return std::string("Q and K head sizes differ");
    s->Dv = v[2] / s->Hkv;
    if (v[1] != s->Skv) return std::string("K and V sequence lengths differ");
  } else {
    s->Hq = q[1];
    s->Hkv = k[1];
    s->Sq = q[2];
    s->Skv = k[2];
    s->D = q[3];
    if (k[3] != s->D) return std::string("Q and K head sizes differ: " + D2S(q) + " vs " + D2S(k));
    if (v[1] != s->Hkv || v[2] != s->Skv)
      return std::string("K and V shapes disagree: " + D2S(k) + " vs " + D2S(v));
    s->Dv = v[3];
  }
  if (s->Hkv <= 0 || s->Hq % s->Hkv != 0)
    return std::string("q heads (" + std::to_string(s->Hq) + ") must be a multiple of kv heads (" +
                       std::to_string(s->Hkv) + ")");
  const Dims* pk = in.size() > 4 ? in[4] : nullptr;
  const Dims* pv = in.size() > 5 ? in[5] : nullptr;
  if ((pk == nullptr) != (pv == nullptr))
    return std::string("past_key and past_value come together");
  s->P = 0;
  if (pk) {
    if (pk->size() != 4 || (*pk)[0] != s->B || (*pk)[1] != s->Hkv || (*pk)[3] != s->D)
      return std::string("past_key must be [B, kv_heads, past, head_size], got " + D2S(*pk));
    s->P = (*pk)[2];
    if (pv->size() != 4 || (*pv)[0] != s->B || (*pv)[1] != s->Hkv || (*pv)[2] != s->P ||
        (*pv)[3] != s->Dv)
      return std::string("past_value must be [B, kv_heads, past, v_head_size], got " + D2S(*pv));
  }
  s->T = s->P + s->Skv;
  s->mask.clear();
  if (in.size() > 3 && in[3]) {
    const Dims& m = *in[3];
    if (m.size() < 2 || m.size() > 4)
      return std::string("attn_mask must have rank 2 to 4, got " + D2S(m));
    Dims full = {s->B, s->Hq, s->Sq, m.back()};
    Dims out;
    if (m.back() > s->T || !BroadcastDims(m, full, &out) || out != full)
      return std::string("attn_mask " + D2S(m) + " does not broadcast to " +
                         D2S({s->B, s->Hq, s->Sq, s->T}));
    s->mask = m;
  }
  if (in.size() > 6 && in[6]) {
    if (in[6]->size() != 1 || (*in[6])[0] != s->B)
      return std::string("nonpad_kv_seqlen must be [batch], got " + D2S(*in[6]));
  }
  s->qk_output_mode = n.attr_int("qk_matmul_output_mode", 0);
  if (s->qk_output_mode < 0 || s->qk_output_mode > 3)
    return std::string("qk_matmul_output_mode must be 0..3");
  s->causal = n.attr_int("is_causal", 0) != 0;
  const ir::Attribute* scale = n.attr("scale");
  s->scale = scale ? scale->f : 1.0 / std::sqrt(static_cast<double>(s->D));
  s->softcap = n.attr_float("softcap", 0.0f);
  return "";
}

namespace {

// ---------------------------------------------------------------------------------------------
// Attention. Inputs are [B, heads, seq, head_size] (4-D) or [B, seq, heads * head_size] (3-D,
// with q_num_heads / kv_num_heads). Per (batch, q head), with the KV head it shares:
//   scores = scale * Q K^T; softcap; + mask (attn_mask, causal, nonpad_kv_seqlen); softmax; * V.
// qk_matmul_output_mode picks which stage of the scores is output 3.

std::vector<const Dims*> InputDims(const InferContext& ctx) {
  std::vector<const Dims*> d;
  for (int i = 0; i < ctx.num_inputs(); ++i)
    d.push_back(ctx.has_input(i) ? &ctx.input_dims(i) : nullptr);
  return d;
}

Status AttentionInfer(InferContext& ctx) {
  if (ctx.num_inputs() < 3 || !ctx.has_input(0) || !ctx.has_input(1) || !ctx.has_input(2))
    return ctx.error("Attention needs Q, K and V");
  for (int i : {0, 1, 2, 4, 5})
    if (ctx.has_input(i) && !IsFloatingDType(ctx.input_dtype(i)))
      return ctx.error("Attention inputs must be floating point");
  if (ctx.input_dtype(1) != ctx.input_dtype(2)) return ctx.error("K and V types differ");
  if (ctx.has_input(3) && ctx.input_dtype(3) != DType::kBool &&
      !IsFloatingDType(ctx.input_dtype(3)))
    return ctx.error("attn_mask must be bool or floating point");
  if (ctx.has_input(6) && ctx.input_dtype(6) != DType::kInt64)
    return ctx.error("nonpad_kv_seqlen must be int64");
  AttentionShape s;
  const std::string bad = MakeAttentionShape(ctx.node(), InputDims(ctx), &s);
  if (!bad.empty()) return ctx.error(bad);
  if (s.is3d)
    ctx.set_output(0, ctx.input_dtype(0), {s.B, s.Sq, s.Hq * s.Dv});
  else
    ctx.set_output(0, ctx.input_dtype(0), {s.B, s.Hq, s.Sq, s.Dv});
  if (ctx.num_outputs() > 1) ctx.set_output(1, ctx.input_dtype(1), {s.B, s.Hkv, s.T, s.D});
  if (ctx.num_outputs() > 2) ctx.set_output(2, ctx.input_dtype(2), {s.B, s.Hkv, s.T, s.Dv});
  if (ctx.num_outputs() > 3) ctx.set_output(3, ctx.input_dtype(0), {s.B, s.Hq, s.Sq, s.T});
  return OkStatus();
}

// Element (b, h, s, d) of a Q/K/V input in its 3-D or 4-D layout.
inline int64_t QkvIndex(bool is3d, int64_t H, int64_t S, int64_t D, int64_t b, int64_t h, int64_t s,
                        int64_t d) {
  return is3d ? ((b * S + s) * H + h) * D + d : ((b * H + h) * S + s) * D + d;
}

// The rows of one head: the first and the stride between them.
template <class C>
struct HeadRows {
  const C* p = nullptr;
  int64_t ld = 0;
};

// The mask as additive values in the mask tensor's own layout (bool: 0 or -inf), so that each
// row of scores adds one contiguous or strided run; a float32 mask in float is read in place.
template <class C>
const C* MaskBias(const Tensor& mask, std::vector<C>* own) {
  if constexpr (std::is_same_v<C, float>)
    if (mask.dtype() == DType::kFloat32) return mask.data<float>();
  const int64_t n = mask.size();
  own->resize(static_cast<size_t>(n));
  if (mask.dtype() == DType::kBool) {
    const bool* m = mask.data<bool>();
    for (int64_t i = 0; i < n; ++i) (*own)[i] = m[i] ? C(0) : -std::numeric_limits<C>::infinity();
  } else {
    for (int64_t i = 0; i < n; ++i) (*own)[i] = static_cast<C>(mask.GetDouble(i));
  }
  return own->data();
}

// One kv head's keys (or values) of size D, converted to C: the past's P rows, then the input's.
template <class T, class C>
void GatherKvHead(const AttentionShape& s, int64_t D, const T* past, const T* x, int64_t b,
                  int64_t kh, C* dst) {
  for (int64_t t = 0; t < s.P; ++t)
    for (int64_t d = 0; d < D; ++d)
      dst[t * D + d] = static_cast<C>(past[((b * s.Hkv + kh) * s.P + t) * D + d]);
  for (int64_t t = 0; t < s.Skv; ++t)
    for (int64_t d = 0; d < D; ++d)
      dst[(s.P + t) * D + d] = static_cast<C>(x[QkvIndex(s.is3d, s.Hkv, s.Skv, D, b, kh, t, d)]);
}

// present_key / present_value of one kv head: its T rows of size D, dense.
template <class T, class C>
void WritePresent(const HeadRows<C>& r, int64_t rows, int64_t D, T* dst) {
  for (int64_t t = 0; t < rows; ++t)
    for (int64_t d = 0; d < D; ++d) dst[t * D + d] = T(static_cast<Acc<T>>(r.p[t * r.ld + d]));
}

template <class T, class C>
void AttentionKernel(ComputeContext& ctx, const AttentionShape& s) {
  // Where T is the compute type, Q, K (without a past), V and Y are read and written in place.
  constexpr bool kInPlace = std::is_same_v<T, C>;
  const T* q = ctx.input(0).data<T>();
  const T* k = ctx.input(1).data<T>();
  const T* v = ctx.input(2).data<T>();
  const bool has_past = ctx.has_input(4) && ctx.has_input(5);
  const T* pk = has_past ? ctx.input(4).data<T>() : nullptr;
  const T* pv = has_past ? ctx.input(5).data<T>() : nullptr;
  const int64_t mode = s.qk_output_mode;
  const bool causal = s.causal;
  const double scale = s.scale, softcap = s.softcap;
  const C neg_inf = -std::numeric_limits<C>::infinity();

  // The mask read through broadcast strides; columns past its last dim are masked out.
  const Tensor* mask = ctx.has_input(3) ? &ctx.input(3) : nullptr;
  Dims mstride;
  int64_t mcols = 0;
  std::vector<C> own_bias;
  const C* bias = nullptr;
  if (mask) {
    mcols = s.mask.back();
    mstride = BroadcastStrides(s.mask, {s.B, s.Hq, s.Sq, mcols});
    bias = MaskBias<C>(*mask, &own_bias);
  }
  std::vector<int64_t> nonpad;
  if (ctx.has_input(6)) nonpad = ctx.input(6).ToInt64Vector();

  T* y = ctx.output(0).data<T>();
  T* present_k = ctx.num_outputs() > 1 ? ctx.output(1).data<T>() : nullptr;
  T* present_v = ctx.num_outputs() > 2 ? ctx.output(2).data<T>() : nullptr;
  T* qk_out = ctx.num_outputs() > 3 && ctx.output_used(3) ? ctx.output(3).data<T>() : nullptr;
  const int64_t group = s.Hq / s.Hkv;
  // Row strides of one head in Q/K/V/Y: 3-D interleaves the heads of a position.
  const int64_t ldq = s.is3d ? s.Hq * s.D : s.D, ldk = s.is3d ? s.Hkv * s.D : s.D;
  const int64_t ldv = s.is3d ? s.Hkv * s.Dv : s.Dv, ldy = s.is3d ? s.Hq * s.Dv : s.Dv;

  // The (batch, kv head) pairs split over the threads, each part with buffers of its own; the
  // products inside take the threads only where there are fewer pairs than threads.
  const int64_t pairs = s.B * s.Hkv;
  const int threads = ctx.threads(), product_threads = pairs >= threads ? 1 : threads;
  ParallelFor(pairs >= threads ? threads : 1, pairs, [&](int64_t pair0, int64_t pair1) {
    const bool copy_kv = has_past || !kInPlace;
    std::vector<C> kt(copy_kv ? s.T * s.D : 0), vt(copy_kv ? s.T * s.Dv : 0);
    std::vector<C> qb(kInPlace ? 0 : s.Sq * s.D), scores(s.Sq * s.T),
        yb(kInPlace ? 0 : s.Sq * s.Dv);
    for (int64_t pair = pair0; pair < pair1; ++pair) {
      const int64_t b = pair / s.Hkv, kh = pair % s.Hkv;
      // Keys and values: the past followed by the new ones, [T, D] (present_key/value).
      HeadRows<C> kr, vr;
      if (copy_kv) {
        GatherKvHead(s, s.D, pk, k, b, kh, kt.data());
        GatherKvHead(s, s.Dv, pv, v, b, kh, vt.data());
        kr = {kt.data(), s.D};
        vr = {vt.data(), s.Dv};
      } else if constexpr (kInPlace) {
        kr = {k + QkvIndex(s.is3d, s.Hkv, s.Skv, s.D, b, kh, 0, 0), ldk};
        vr = {v + QkvIndex(s.is3d, s.Hkv, s.Skv, s.Dv, b, kh, 0, 0), ldv};
      }
      if (present_k) WritePresent(kr, s.T, s.D, present_k + (b * s.Hkv + kh) * s.T * s.D);
      if (present_v) WritePresent(vr, s.T, s.Dv, present_v + (b * s.Hkv + kh) * s.T * s.Dv);

      // The q heads that share this kv head: consecutive groups (kv head h serves q heads
      // h * group .. h * group + group - 1).
      for (int64_t g = 0; g < group; ++g) {
        const int64_t h = kh * group + g;
        HeadRows<C> qr;
        if constexpr (kInPlace) {
          qr = {q + QkvIndex(s.is3d, s.Hq, s.Sq, s.D, b, h, 0, 0), ldq};
        } else {
          for (int64_t i = 0; i < s.Sq; ++i)
            for (int64_t d = 0; d < s.D; ++d)
              qb[i * s.D + d] = static_cast<C>(q[QkvIndex(s.is3d, s.Hq, s.Sq, s.D, b, h, i, d)]);
          qr = {qb.data(), s.D};
        }
        // scores = scale * Q K^T
        GemmStrided<C>(s.Sq, s.T, s.D, static_cast<C>(scale), qr.p, qr.ld, 1, kr.p, 1, kr.ld,
                       scores.data(), s.T, /*accumulate=*/false, product_threads);
        T* qk_row = qk_out ? qk_out + ((b * s.Hq + h) * s.Sq) * s.T : nullptr;
        auto emit = [&](int64_t m) {
          if (qk_row && mode == m)
            for (int64_t i = 0; i < s.Sq * s.T; ++i) qk_row[i] = T(static_cast<Acc<T>>(scores[i]));
        };
        emit(0);
        // Masks: attn_mask (bool: false masks out; float: added), the causal frontier
        // (j <= i + offset, offset = past length, or nonpad - q_len for an external cache),
        // and keys at or past nonpad_kv_seqlen.
        int64_t offset = s.P;
        if (!has_past && !nonpad.empty()) offset = nonpad[b] - s.Sq;
        for (int64_t i = 0; i < s.Sq; ++i) {
          C* row = scores.data() + i * s.T;
          if (mask) {
            const C* m = bias + b * mstride[0] + h * mstride[1] + i * mstride[2];
            const int64_t step = mstride[3], cols = std::min(mcols, s.T);
            if (step == 1)
              for (int64_t j = 0; j < cols; ++j) row[j] += m[j];
            else
              for (int64_t j = 0; j < cols; ++j) row[j] += m[j * step];
            for (int64_t j = cols; j < s.T; ++j) row[j] += neg_inf;
          }
          if (causal)
            for (int64_t j = std::max<int64_t>(0, i + offset + 1); j < s.T; ++j) row[j] += neg_inf;
          if (!nonpad.empty())
            for (int64_t j = std::max<int64_t>(0, nonpad[b]); j < s.T; ++j) row[j] += neg_inf;
        }
        emit(1);
        if (softcap > 0)
          for (auto& x : scores) x = static_cast<C>(softcap * std::tanh(x / softcap));
        emit(2);
        // A fully masked row gives NaN, as the reference.
        if constexpr (std::is_same_v<C, float>) {
          SoftmaxRowsF32(scores.data(), scores.data(), s.Sq, s.T);
        } else {
          for (int64_t i = 0; i < s.Sq; ++i) {
            C* row = scores.data() + i * s.T;
            C mx = neg_inf;
            for (int64_t j = 0; j < s.T; ++j) mx = std::max(mx, row[j]);
            C sum = 0;
            for (int64_t j = 0; j < s.T; ++j) {
              row[j] = std::exp(row[j] - mx);
              sum += row[j];
            }
            for (int64_t j = 0; j < s.T; ++j) row[j] /= sum;
          }
        }
        emit(3);
        // Y = softmax(scores) V, in place where T is the compute type.
        if constexpr (kInPlace) {
          GemmStrided<C>(s.Sq, s.Dv, s.T, C(1), scores.data(), s.T, 1, vr.p, vr.ld, 1,
                         y + QkvIndex(s.is3d, s.Hq, s.Sq, s.Dv, b, h, 0, 0), ldy,
                         /*accumulate=*/false, product_threads);
        } else {
          GemmStrided<C>(s.Sq, s.Dv, s.T, C(1), scores.data(), s.T, 1, vr.p, vr.ld, 1, yb.data(),
                         s.Dv, /*accumulate=*/false, product_threads);
          for (int64_t i = 0; i < s.Sq; ++i)
            for (int64_t d = 0; d < s.Dv; ++d)
              y[QkvIndex(s.is3d, s.Hq, s.Sq, s.Dv, b, h, i, d)] =
                  T(static_cast<Acc<T>>(yb[i * s.Dv + d]));
        }
      }
    }
  });
}

Status AttentionCompute(ComputeContext& ctx) {
  std::vector<const Dims*> in;
  for (int i = 0; i < ctx.num_inputs(); ++i)
    in.push_back(ctx.has_input(i) ? &ctx.input(i).dims() : nullptr);
  AttentionShape s;
  const std::string bad = MakeAttentionShape(ctx.node(), in, &s);
  if (!bad.empty()) return ctx.error(bad);
  if (ctx.input(1).dtype() != ctx.input(0).dtype())
    return ctx.error("Attention with Q and K of different types is not supported");
  if (ctx.has_input(6))
    for (int64_t n : ctx.input(6).ToInt64Vector())
      if (n < 0 || n > s.T) return ctx.error("nonpad_kv_seqlen value out of range");
  Dispatch<kFloatTypes>(ctx.input(0).dtype(), [&]<class T>() {
    if constexpr (std::is_same_v<T, double>)
      AttentionKernel<T, double>(ctx, s);
    else
      AttentionKernel<T, float>(ctx, s);
  });
  return OkStatus();
}

// ---------------------------------------------------------------------------------------------
// RotaryEmbedding: rotates the first rotary_embedding_dim features of each head by the
// position's angle. Pairs are (x[i], x[i + rot/2]), or (x[2i], x[2i+1]) when interleaved.

struct RopeShape {
  bool is3d = false;
  int64_t B = 0, H = 0, S = 0, D = 0, rot = 0;
};

Status RopeShapeOf(const InferContext* ictx, const ComputeContext* cctx, const Dims& x,
                   const Dims& cos, const Dims& sin, const Dims* pos, RopeShape* r) {
  auto err = [&](const std::string& m) { return ictx ? ictx->error(m) : cctx->error(m); };
  const ir::Node& n = ictx ? ictx->node() : cctx->node();
  if (x.size() == 4) {
    r->B = x[0];
    r->H = x[1];
    r->S = x[2];
    r->D = x[3];
  } else if (x.size() == 3) {
    r->is3d = true;
    r->H = n.attr_int("num_heads", 0);
    if (r->H <= 0 || x[2] % r->H)
      return err("3-D RotaryEmbedding needs num_heads dividing " + std::to_string(x[2]));
    r->B = x[0];
    r->S = x[1];
    r->D = x[2] / r->H;
  } else {
    return err("RotaryEmbedding input must be 3-D or 4-D, got " + D2S(x));
  }
  r->rot = n.attr_int("rotary_embedding_dim", 0);
  if (r->rot == 0) r->rot = r->D;
  if (r->rot < 0 || r->rot > r->D || r->rot % 2)
    return err("rotary_embedding_dim " + std::to_string(r->rot) +
               " must be even and <= " + std::to_string(r->D));
  if (cos != sin) return err("cos_cache and sin_cache shapes differ");
  if (pos) {
    if (*pos != Dims{r->B, r->S}) return err("position_ids must be [batch, seq], got " + D2S(*pos));
    if (cos.size() != 2 || cos[1] != r->rot / 2)
      return err("cos_cache must be [max_position, rot/2], got " + D2S(cos));
  } else if (cos != Dims{r->B, r->S, r->rot / 2}) {
    return err("without position_ids, cos_cache must be [batch, seq, rot/2], got " + D2S(cos));
  }
  return OkStatus();
}

Status RopeInfer(InferContext& ctx) {
  if (ctx.num_inputs() < 3) return ctx.error("RotaryEmbedding needs X, cos_cache, sin_cache");
  for (int i = 0; i < 3; ++i)
    if (!ctx.has_input(i) || !IsFloatingDType(ctx.input_dtype(i)))
      return ctx.error("RotaryEmbedding X and caches must be floating point");
  if (ctx.has_input(3) && !IsSignedIntDType(ctx.input_dtype(3)))
    return ctx.error("position_ids must be integers");
  RopeShape r;
  KILN_RETURN_IF_ERROR(RopeShapeOf(&ctx, nullptr, ctx.input_dims(0), ctx.input_dims(1),
                                   ctx.input_dims(2),
                                   ctx.has_input(3) ? &ctx.input_dims(3) : nullptr, &r));
  return SameAsInput(ctx);
}

// float32 RotaryEmbedding: the (batch, position) rows over the threads, each head's pairs
// rotated by its position's cos and sin in loops the compiler vectorizes, the features past the
// rotary dims copied.
void RopeF32(const RopeShape& r, bool interleaved, const float* x, const float* cos_cache,
             const float* sin_cache, const int64_t* pos, float* y, int threads) {
  const int64_t half = r.rot / 2;
  const int64_t work = r.B * r.S * r.H * r.D;
  const int parts = static_cast<int>(std::min<int64_t>(threads, work / (1 << 14) + 1));
  ParallelFor(parts, r.B * r.S, [&](int64_t row0, int64_t row1) {
    for (int64_t bs = row0; bs < row1; ++bs) {
      const int64_t b = bs / r.S, s = bs % r.S;
      const int64_t at = pos ? pos[bs] : bs;
      const float* c = cos_cache + at * half;
      const float* sn = sin_cache + at * half;
      for (int64_t h = 0; h < r.H; ++h) {
        const int64_t base =
            r.is3d ? ((b * r.S + s) * r.H + h) * r.D : ((b * r.H + h) * r.S + s) * r.D;
        const float* xi = x + base;
        float* yi = y + base;
        if (interleaved) {
          for (int64_t i = 0; i < half; ++i) {
            const float x1 = xi[2 * i], x2 = xi[2 * i + 1];
            yi[2 * i] = c[i] * x1 - sn[i] * x2;
            yi[2 * i + 1] = sn[i] * x1 + c[i] * x2;
          }
        } else {
          for (int64_t i = 0; i < half; ++i) {
            const float x1 = xi[i], x2 = xi[i + half];
            yi[i] = c[i] * x1 - sn[i] * x2;
            yi[i + half] = sn[i] * x1 + c[i] * x2;
          }
        }
        std::memcpy(yi + r.rot, xi + r.rot, static_cast<size_t>(r.D - r.rot) * sizeof(float));
      }
    }
  });
}

Status RopeCompute(ComputeContext& ctx) {
  const Tensor& xt = ctx.input(0);
  const Tensor& cos_t = ctx.input(1);
  const Tensor& sin_t = ctx.input(2);
  const Tensor* pos_t = ctx.has_input(3) ? &ctx.input(3) : nullptr;
  RopeShape r;
  KILN_RETURN_IF_ERROR(RopeShapeOf(nullptr, &ctx, xt.dims(), cos_t.dims(), sin_t.dims(),
                                   pos_t ? &pos_t->dims() : nullptr, &r));
  const bool interleaved = ctx.node().attr_int("interleaved", 0) != 0;
  const int64_t half = r.rot / 2;
  std::vector<int64_t> pos;
  if (pos_t) {
    pos = pos_t->ToInt64Vector();
    for (int64_t p : pos)
      if (p < 0 || p >= cos_t.dim(0))
        return ctx.error("position id " + std::to_string(p) + " is outside the cache of " +
                         std::to_string(cos_t.dim(0)) + " positions");
  }
  if (!ReferenceKernels() && xt.dtype() == DType::kFloat32 && cos_t.dtype() == DType::kFloat32 &&
      sin_t.dtype() == DType::kFloat32) {
    RopeF32(r, interleaved, xt.data<float>(), cos_t.data<float>(), sin_t.data<float>(),
            pos_t ? pos.data() : nullptr, ctx.output(0).data<float>(), ctx.threads());
    return OkStatus();
  }
  bool ok = Dispatch<kFloatTypes>(xt.dtype(), [&]<class T>() {
    const T* x = xt.data<T>();
    T* y = ctx.output(0).data<T>();
    std::memcpy(y, x, xt.nbytes());
    for (int64_t b = 0; b < r.B; ++b)
      for (int64_t s = 0; s < r.S; ++s) {
        const int64_t row = pos_t ? pos[b * r.S + s] : b * r.S + s;
        for (int64_t h = 0; h < r.H; ++h) {
          const int64_t base =
              r.is3d ? ((b * r.S + s) * r.H + h) * r.D : ((b * r.H + h) * r.S + s) * r.D;
          for (int64_t i = 0; i < half; ++i) {
            const float c = static_cast<float>(cos_t.GetDouble(row * half + i));
            const float sn = static_cast<float>(sin_t.GetDouble(row * half + i));
            const int64_t i1 = interleaved ? 2 * i : i;
            const int64_t i2 = interleaved ? 2 * i + 1 : i + half;
            const float x1 = static_cast<float>(x[base + i1]);
            const float x2 = static_cast<float>(x[base + i2]);
            if constexpr (std::is_same_v<T, double>) {
              const double cd = cos_t.GetDouble(row * half + i);
              const double sd = sin_t.GetDouble(row * half + i);
              y[base + i1] = cd * x[base + i1] - sd * x[base + i2];
              y[base + i2] = sd * x[base + i1] + cd * x[base + i2];
            } else {
              y[base + i1] = T(c * x1 - sn * x2);
              y[base + i2] = T(sn * x1 + c * x2);
            }
          }
        }
      }
  });
  if (!ok) return ctx.error("RotaryEmbedding does not support this type");
  return OkStatus();
}

}  // namespace

void RegisterAttentionOps(OpRegistry& r) {
  r.Register("Attention", AttentionInfer, AttentionCompute);
  r.Register("RotaryEmbedding", RopeInfer, RopeCompute);
}

}  // namespace kiln::ops
