// Recurrent layers: RNN, GRU, LSTM (all opsets: directions, activations with alpha/beta, clip,
// sequence_lens, initial states, peepholes, input_forget, linear_before_reset, layout 0/1).
// float32 runs ops/recurrent_kernels.h's RecurrentF32. The other types run the reference here,
// in Acc<T> on layout-0 copies: X*W^T for all steps at once, then per step the recurrent
// product, one dot product per gate row (rows of R are contiguous); the tests check the float32
// kernel against it (in double).

#include "ops/common.h"
#include "ops/recurrent_kernels.h"

namespace kiln::ops {
namespace {

using Cell = RnnCell;
using Activation = RnnActivation;

int MaxInputs(Cell c) { return c == Cell::kLstm ? 8 : 6; }
int MaxOutputs(Cell c) { return c == Cell::kLstm ? 3 : 2; }

Status InferRecurrent(InferContext& ctx, Cell cell) {
  if (ctx.num_inputs() > MaxInputs(cell))
    return ctx.error("takes at most " + std::to_string(MaxInputs(cell)) + " inputs");
  if (ctx.num_outputs() > MaxOutputs(cell))
    return ctx.error("has at most " + std::to_string(MaxOutputs(cell)) + " outputs");
  std::vector<const Dims*> dims(8, nullptr);
  for (int i = 0; i < ctx.num_inputs(); ++i) {
    if (!ctx.has_input(i)) continue;
    if (ctx.input_type(i).kind != ir::TypeInfo::Kind::kTensor)
      return ctx.error("inputs must be tensors");
    dims[i] = &ctx.input_dims(i);
  }
  if (!dims[0] || !dims[1] || !dims[2]) return ctx.error("inputs X, W and R are required");
  const DType dt = ctx.input_dtype(0);
  if (!IsFloatingDType(dt)) return ctx.error("X must be a floating-point tensor");
  for (int i : {1, 2, 3, 5, 6, 7})
    if (ctx.has_input(i) && ctx.input_dtype(i) != dt)
      return ctx.error("input " + std::to_string(i) + " has type " +
                       std::string(DTypeName(ctx.input_dtype(i))) + ", expected " +
                       std::string(DTypeName(dt)));
  if (ctx.has_input(4) && ctx.input_dtype(4) != DType::kInt32)
    return ctx.error("sequence_lens must be int32");
  RecurrentPlan p;
  Status st = PlanRecurrent(ctx.node(), ctx.opset(), cell, dims, &p);
  if (!st.ok()) return ctx.error(st.message());
  for (int i = 0; i < ctx.num_outputs(); ++i)
    ctx.set_output(i, dt, i == 0 ? p.YDims() : p.StateDims());
  return OkStatus();
}

// ---- Kernel --------------------------------------------------------------------------------

template <class A>
A Clip(A x, float clip) {
  return clip > 0 ? std::max(A(-clip), std::min(A(clip), x)) : x;
}

template <class A>
A Dot(const A* a, const A* b, int64_t n) {
  A s0 = 0, s1 = 0, s2 = 0, s3 = 0;
  int64_t i = 0;
  for (; i + 4 <= n; i += 4) {
    s0 += a[i] * b[i];
    s1 += a[i + 1] * b[i + 1];
    s2 += a[i + 2] * b[i + 2];
    s3 += a[i + 3] * b[i + 3];
  }
  for (; i < n; ++i) s0 += a[i] * b[i];
  return (s0 + s1) + (s2 + s3);
}

template <class T>
std::vector<Acc<T>> ToAcc(const Tensor& t) {
  std::vector<Acc<T>> v(t.size());
  const T* p = t.data<T>();
  for (int64_t i = 0; i < t.size(); ++i) v[i] = static_cast<Acc<T>>(p[i]);
  return v;
}

template <class T>
Status RunRecurrent(ComputeContext& ctx, const RecurrentPlan& p) {
  using A = Acc<T>;
  const int G = p.gates();
  const int64_t S = p.seq, B = p.batch, I = p.input, H = p.hidden, GH = G * H;
  const int nd = p.num_dir;
  const bool lstm = p.cell == Cell::kLstm, gru = p.cell == Cell::kGru;

  // Layout-0 copies of X and the initial states.
  std::vector<A> x = ToAcc<T>(ctx.input(0));
  if (p.layout == 1) {  // [B, S, I] -> [S, B, I]
    std::vector<A> t(x.size());
    for (int64_t b = 0; b < B; ++b)
      for (int64_t q = 0; q < S; ++q) std::copy_n(&x[(b * S + q) * I], I, &t[(q * B + b) * I]);
    x.swap(t);
  }
  auto state_input = [&](int i) {
    std::vector<A> v(nd * B * H, A(0));
    if (!ctx.has_input(i)) return v;
    std::vector<A> in = ToAcc<T>(ctx.input(i));
    for (int d = 0; d < nd; ++d)
      for (int64_t b = 0; b < B; ++b)
        std::copy_n(&in[p.StateRow(d, b) * H], H, &v[(d * B + b) * H]);
    return v;
  };
  std::vector<A> h0 = state_input(5);
  std::vector<A> c0 = lstm ? state_input(6) : std::vector<A>();
  const std::vector<A> w = ToAcc<T>(ctx.input(1)), r = ToAcc<T>(ctx.input(2));
  const std::vector<A> bias =
      ctx.has_input(3) ? ToAcc<T>(ctx.input(3)) : std::vector<A>(nd * 2 * GH, A(0));
  const std::vector<A> peep =
      lstm && ctx.has_input(7) ? ToAcc<T>(ctx.input(7)) : std::vector<A>(nd * 3 * H, A(0));
  std::vector<int64_t> lens(B, S);
  if (ctx.has_input(4)) {
    lens = ctx.input(4).ToInt64Vector();
    for (int64_t l : lens)
      if (l < 0 || l > S)
        return ctx.error("sequence length " + std::to_string(l) + " is outside [0, " +
                         std::to_string(S) + "]");
  }

  std::vector<A> y(S * nd * B * H, A(0)), yh(nd * B * H, A(0)), yc(nd * B * H, A(0));
  std::vector<A> xw(S * B * GH), hr(GH), gates(GH), rh(H);
  for (int d = 0; d < nd; ++d) {
    const bool reverse = p.reverse_only || d == 1;
    const Activation* act = &p.acts[d * RnnActivations(p.cell)];
    const A* wd = &w[d * GH * I];
    const A* rd = &r[d * GH * H];
    const A* wb = &bias[d * 2 * GH];
    const A* rb = wb + GH;
    const A* pd = &peep[d * 3 * H];
    // X * W^T + Wb for every step and batch entry.
    for (int64_t m = 0; m < S * B; ++m)
      for (int64_t j = 0; j < GH; ++j) xw[m * GH + j] = Dot(&x[m * I], wd + j * I, I) + wb[j];
    for (int64_t b = 0; b < B; ++b) {
      std::vector<A> hp(&h0[(d * B + b) * H], &h0[(d * B + b) * H] + H);
      std::vector<A> cp =
          lstm ? std::vector<A>(&c0[(d * B + b) * H], &c0[(d * B + b) * H] + H) : std::vector<A>();
      const int64_t len = lens[b];
      for (int64_t t = 0; t < len; ++t) {
        const int64_t ti = reverse ? len - 1 - t : t;
        const A* xg = &xw[(ti * B + b) * GH];
        // Recurrent product for the gates that use H_prev directly (GRU's h gate may not).
        const int64_t direct = gru && !p.linear_before_reset ? 2 * H : GH;
        for (int64_t j = 0; j < direct; ++j) hr[j] = Dot(hp.data(), rd + j * H, H) + rb[j];
        A* hout = &y[((ti * nd + d) * B + b) * H];
        if (p.cell == Cell::kRnn) {
          for (int64_t k = 0; k < H; ++k) hout[k] = act[0](Clip(xg[k] + hr[k], p.clip));
        } else if (gru) {
          A* z = gates.data();
          A* rg = z + H;
          for (int64_t k = 0; k < 2 * H; ++k) gates[k] = act[0](Clip(xg[k] + hr[k], p.clip));
          if (p.linear_before_reset) {
            for (int64_t k = 0; k < H; ++k)
              gates[2 * H + k] = act[1](Clip(xg[2 * H + k] + rg[k] * hr[2 * H + k], p.clip));
          } else {
            for (int64_t k = 0; k < H; ++k) rh[k] = rg[k] * hp[k];
            for (int64_t k = 0; k < H; ++k)
              gates[2 * H + k] = act[1](Clip(
                  xg[2 * H + k] + Dot(rh.data(), rd + (2 * H + k) * H, H) + rb[2 * H + k], p.clip));
          }
          for (int64_t k = 0; k < H; ++k) hout[k] = (A(1) - z[k]) * gates[2 * H + k] + z[k] * hp[k];
        } else {  // LSTM, gates i, o, f, c; peepholes P = [Pi, Po, Pf]
          const A *pi = pd, *po = pd + H, *pf = pd + 2 * H;
          for (int64_t k = 0; k < H; ++k) {
            A ig = act[0](Clip(xg[k] + hr[k] + pi[k] * cp[k], p.clip));
            A fg = p.input_forget
                       ? A(1) - ig
                       : act[0](Clip(xg[2 * H + k] + hr[2 * H + k] + pf[k] * cp[k], p.clip));
            A cg = act[1](Clip(xg[3 * H + k] + hr[3 * H + k], p.clip));
            A c = fg * cp[k] + ig * cg;
            A og = act[0](Clip(xg[H + k] + hr[H + k] + po[k] * c, p.clip));
            cp[k] = c;
            hout[k] = og * act[2](c);
          }
        }
        std::copy_n(hout, H, hp.data());
      }
      std::copy(hp.begin(), hp.end(), &yh[(d * B + b) * H]);
      if (lstm) std::copy(cp.begin(), cp.end(), &yc[(d * B + b) * H]);
    }
  }

  // Write the outputs in the requested layout.
  if (ctx.num_outputs() > 0 && ctx.output_used(0)) {
    T* out = ctx.output(0).data<T>();
    for (int64_t q = 0; q < S; ++q)
      for (int d = 0; d < nd; ++d)
        for (int64_t b = 0; b < B; ++b) {
          const A* src = &y[((q * nd + d) * B + b) * H];
          T* dst = out + (p.layout == 0 ? ((q * nd + d) * B + b) * H : ((b * S + q) * nd + d) * H);
          for (int64_t k = 0; k < H; ++k) dst[k] = static_cast<T>(src[k]);
        }
  }
  auto write_state = [&](int i, const std::vector<A>& v) {
    if (ctx.num_outputs() <= i || !ctx.output_used(i)) return;
    T* out = ctx.output(i).data<T>();
    for (int d = 0; d < nd; ++d)
      for (int64_t b = 0; b < B; ++b) {
        T* dst = out + p.StateRow(d, b) * H;
        for (int64_t k = 0; k < H; ++k) dst[k] = static_cast<T>(v[(d * B + b) * H + k]);
      }
  };
  write_state(1, yh);
  if (lstm) write_state(2, yc);
  return OkStatus();
}

// W and R laid out once for a node whose W and R are constants.
struct RecurrentState : NodeState {
  RnnWeights weights;
  std::string Kernel() const override { return "kiln recurrent f32"; }
  // W and R as the kernels laid them out (panels, or W^T packed for the GEMM).
  bool HoldsConstant(int i) const override { return (i == 1 || i == 2) && !weights.dirs.empty(); }
};

Status RunRecurrentF32(ComputeContext& ctx, const RecurrentPlan& p) {
  RnnProblem q;
  q.cell = p.cell;
  q.seq = p.seq;
  q.batch = p.batch;
  q.input = p.input;
  q.hidden = p.hidden;
  q.num_dir = p.num_dir;
  q.reverse_only = p.reverse_only;
  q.layout = p.layout;
  q.clip = p.clip;
  q.input_forget = p.input_forget;
  q.linear_before_reset = p.linear_before_reset;
  q.acts = p.acts.data();
  auto in = [&](int i) { return ctx.has_input(i) ? ctx.input(i).data<float>() : nullptr; };
  q.x = in(0);
  q.w = in(1);
  q.r = in(2);
  q.bias = in(3);
  q.initial_h = in(5);
  q.initial_c = p.cell == Cell::kLstm ? in(6) : nullptr;
  q.peepholes = p.cell == Cell::kLstm ? in(7) : nullptr;
  if (ctx.has_input(4)) {
    const Tensor& lens = ctx.input(4);
    for (int64_t b = 0; b < lens.size(); ++b)
      if (lens.data<int32_t>()[b] < 0 || lens.data<int32_t>()[b] > p.seq)
        return ctx.error("sequence length " + std::to_string(lens.data<int32_t>()[b]) +
                         " is outside [0, " + std::to_string(p.seq) + "]");
    q.sequence_lens = lens.data<int32_t>();
  }
  auto out = [&](int i) {
    return ctx.num_outputs() > i && ctx.output_used(i) ? ctx.output(i).data<float>() : nullptr;
  };
  q.y = out(0);
  q.y_h = out(1);
  q.y_c = p.cell == Cell::kLstm ? out(2) : nullptr;
  if (ctx.state() && ctx.input_constant(1) && ctx.input_constant(2)) {
    auto* st = dynamic_cast<RecurrentState*>(ctx.state()->get());
    if (!st) {
      *ctx.state() = std::make_unique<RecurrentState>();
      st = static_cast<RecurrentState*>(ctx.state()->get());
    }
    q.weights = &st->weights;
  }
  RecurrentF32(q, ctx.threads());
  return OkStatus();
}

Status ComputeRecurrent(ComputeContext& ctx, Cell cell) {
  std::vector<const Dims*> dims(8, nullptr);
  for (int i = 0; i < ctx.num_inputs() && i < 8; ++i)
    if (ctx.has_input(i)) dims[i] = &ctx.input(i).dims();
  RecurrentPlan p;
  Status st = PlanRecurrent(ctx.node(), ctx.opset(), cell, dims, &p);
  if (!st.ok()) return ctx.error(st.message());
  if (ctx.input(0).dtype() == DType::kFloat32) return RunRecurrentF32(ctx, p);
  bool ok =
      Dispatch<kFloatTypes>(ctx.input(0).dtype(), [&]<class T>() { st = RunRecurrent<T>(ctx, p); });
  if (!ok) return ctx.error("unsupported type " + std::string(DTypeName(ctx.input(0).dtype())));
  return st;
}

}  // namespace

void RegisterRecurrentOps(OpRegistry& r) {
  r.Register(
      "RNN", [](InferContext& c) { return InferRecurrent(c, Cell::kRnn); },
      [](ComputeContext& c) { return ComputeRecurrent(c, Cell::kRnn); });
  r.Register(
      "GRU", [](InferContext& c) { return InferRecurrent(c, Cell::kGru); },
      [](ComputeContext& c) { return ComputeRecurrent(c, Cell::kGru); });
  r.Register(
      "LSTM", [](InferContext& c) { return InferRecurrent(c, Cell::kLstm); },
      [](ComputeContext& c) { return ComputeRecurrent(c, Cell::kLstm); });
}

}  // namespace kiln::ops
