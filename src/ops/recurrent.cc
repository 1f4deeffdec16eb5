// Recurrent layers: RNN, GRU, LSTM (all opsets: directions, activations with alpha/beta, clip,
// sequence_lens, initial states, peepholes, input_forget, linear_before_reset, layout 0/1).
// float32 runs ops/recurrent_kernels.h's RecurrentF32. The other types run the reference here,
// in Acc<T> on layout-0 copies: X*W^T for all steps at once, then per step the recurrent
// product, one dot product per gate row (rows of R are contiguous); the tests check the float32
// kernel against it (in double).
#include <cctype>

#include "ops/common.h"
#include "ops/recurrent_kernels.h"

namespace kiln::ops {
namespace {

using Cell = RnnCell;
using Act = RnnAct;
using Activation = RnnActivation;

int NumGates(Cell c) { return RnnGates(c); }
int NumActivations(Cell c) { return RnnActivations(c); }

// ---- Activations ---------------------------------------------------------------------------

struct ActInfo {
  const char* name;
  Act kind;
  bool uses_alpha, uses_beta;
  float alpha, beta;  // defaults when the lists run out
};

constexpr ActInfo kActs[] = {
    {"relu", Act::kRelu, false, false, 0, 0},
    {"tanh", Act::kTanh, false, false, 0, 0},
    {"sigmoid", Act::kSigmoid, false, false, 0, 0},
    {"affine", Act::kAffine, true, true, 1.0f, 0.0f},
    {"leakyrelu", Act::kLeakyRelu, true, false, 0.01f, 0},
    {"thresholdedrelu", Act::kThresholdedRelu, true, false, 1.0f, 0},
    {"scaledtanh", Act::kScaledTanh, true, true, 1.0f, 1.0f},
    {"hardsigmoid", Act::kHardSigmoid, true, true, 0.2f, 0.5f},
    {"elu", Act::kElu, true, false, 1.0f, 0},
    {"softsign", Act::kSoftsign, false, false, 0, 0},
    {"softplus", Act::kSoftplus, false, false, 0, 0},
};

// Activations for every direction, in attribute order (f, g, h per direction). alpha/beta values
// are consumed in order by the functions that take them (as onnxruntime does).
template <class Ctx>
Status ParseActivations(const Ctx& ctx, Cell cell, int num_dir, std::vector<Activation>* out) {
  const ir::Node& n = ctx.node();
  std::vector<std::string> names;
  if (const ir::Attribute* a = n.attr("activations")) names = a->strings;
  const int per_dir = NumActivations(cell);
  if (names.empty()) {
    static const char* kDefaults[][3] = {
        {"Tanh"}, {"Sigmoid", "Tanh"}, {"Sigmoid", "Tanh", "Tanh"}};
    for (int d = 0; d < num_dir; ++d)
      for (int k = 0; k < per_dir; ++k) names.push_back(kDefaults[per_dir - 1][k]);
  } else if (static_cast<int>(names.size()) == per_dir && num_dir == 2) {
    std::vector<std::string> forward = names;  // (inserting a vector's own range is undefined)
    names.insert(names.end(), forward.begin(), forward.end());
  }
  if (static_cast<int>(names.size()) != per_dir * num_dir)
    return ctx.error("expects " + std::to_string(per_dir * num_dir) + " activations, got " +
                     std::to_string(names.size()));
  std::vector<float> alphas = n.attr_floats("activation_alpha");
  std::vector<float> betas = n.attr_floats("activation_beta");
  size_t ai = 0, bi = 0;
  out->clear();
  for (const auto& name : names) {
    std::string lower;
    for (char c : name) lower += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    const ActInfo* info = nullptr;
    for (const auto& a : kActs)
      if (lower == a.name) info = &a;
    if (!info) return ctx.error("unsupported activation '" + name + "'");
    Activation act;
    act.kind = info->kind;
    act.alpha = info->alpha;
    act.beta = info->beta;
    if (info->uses_alpha && ai < alphas.size()) act.alpha = alphas[ai++];
    if (info->uses_beta && bi < betas.size()) act.beta = betas[bi++];
    out->push_back(act);
  }
  return OkStatus();
}

// ---- Shapes --------------------------------------------------------------------------------

struct RnnShape {
  int64_t seq = 0, batch = 0, input = 0, hidden = 0;
  int num_dir = 1;
  bool reverse_only = false;
  int layout = 0;
};

template <class Ctx>
Status GetDirection(const Ctx& ctx, int* num_dir, bool* reverse_only) {
  std::string dir = ctx.node().attr_string("direction", "forward");
  *num_dir = dir == "bidirectional" ? 2 : 1;
  *reverse_only = dir == "reverse";
  if (dir != "forward" && dir != "reverse" && dir != "bidirectional")
    return ctx.error("direction must be forward, reverse or bidirectional, not '" + dir + "'");
  return OkStatus();
}

// Validates the input shapes (dims[i] == nullptr for an omitted input) and derives the sizes.
template <class Ctx>
Status CheckShapes(const Ctx& ctx, Cell cell, const std::vector<const Dims*>& dims, RnnShape* s) {
  const int G = NumGates(cell);
  KILN_RETURN_IF_ERROR(GetDirection(ctx, &s->num_dir, &s->reverse_only));
  s->layout = ctx.opset() >= 14 ? static_cast<int>(ctx.node().attr_int("layout", 0)) : 0;
  if (s->layout != 0 && s->layout != 1) return ctx.error("layout must be 0 or 1");
  for (int i = 0; i < 3; ++i)
    if (!dims[i]) return ctx.error("inputs X, W and R are required");
  const Dims& x = *dims[0];
  const Dims& w = *dims[1];
  if (x.size() != 3) return ctx.error("X must have rank 3, got " + DimsToString(x));
  s->seq = s->layout == 0 ? x[0] : x[1];
  s->batch = s->layout == 0 ? x[1] : x[0];
  s->input = x[2];
  if (w.size() != 3 || w[0] != s->num_dir || w[2] != s->input || w[1] % G != 0)
    return ctx.error("W has shape " + DimsToString(w) + ", expected [" +
                     std::to_string(s->num_dir) + ", " + std::to_string(G) + "*hidden_size, " +
                     std::to_string(s->input) + "]");
  s->hidden = w[1] / G;
  int64_t attr_hidden = ctx.node().attr_int("hidden_size", -1);
  if (attr_hidden >= 0 && attr_hidden != s->hidden)
    return ctx.error("hidden_size is " + std::to_string(attr_hidden) + " but W has shape " +
                     DimsToString(w));
  const int64_t h = s->hidden, nd = s->num_dir;
  auto expect = [&](int i, const char* name, Dims want) -> Status {
    if (!dims[i] || *dims[i] == want) return OkStatus();
    return ctx.error(std::string(name) + " has shape " + DimsToString(*dims[i]) + ", expected " +
                     DimsToString(want));
  };
  KILN_RETURN_IF_ERROR(expect(2, "R", {nd, G * h, h}));
  KILN_RETURN_IF_ERROR(expect(3, "B", {nd, 2 * G * h}));
  KILN_RETURN_IF_ERROR(expect(4, "sequence_lens", {s->batch}));
  Dims state = s->layout == 0 ? Dims{nd, s->batch, h} : Dims{s->batch, nd, h};
  KILN_RETURN_IF_ERROR(expect(5, "initial_h", state));
  if (cell == Cell::kLstm) {
    KILN_RETURN_IF_ERROR(expect(6, "initial_c", state));
    KILN_RETURN_IF_ERROR(expect(7, "P", {nd, 3 * h}));
  }
  return OkStatus();
}

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
  RnnShape s;
  KILN_RETURN_IF_ERROR(CheckShapes(ctx, cell, dims, &s));
  std::vector<Activation> acts;
  KILN_RETURN_IF_ERROR(ParseActivations(ctx, cell, s.num_dir, &acts));
  const int64_t nd = s.num_dir;
  Dims y = s.layout == 0 ? Dims{s.seq, nd, s.batch, s.hidden} : Dims{s.batch, s.seq, nd, s.hidden};
  Dims state = s.layout == 0 ? Dims{nd, s.batch, s.hidden} : Dims{s.batch, nd, s.hidden};
  for (int i = 0; i < ctx.num_outputs(); ++i) ctx.set_output(i, dt, i == 0 ? y : state);
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

struct RnnParams {
  Cell cell;
  float clip = 0;
  bool input_forget = false, linear_before_reset = false;
};

template <class T>
Status RunRecurrent(ComputeContext& ctx, const RnnParams& p, const RnnShape& s,
                    const std::vector<Activation>& acts) {
  using A = Acc<T>;
  const int G = NumGates(p.cell);
  const int64_t S = s.seq, B = s.batch, I = s.input, H = s.hidden, GH = G * H;
  const int nd = s.num_dir;
  const bool lstm = p.cell == Cell::kLstm, gru = p.cell == Cell::kGru;

  // Layout-0 copies of X and the initial states.
  std::vector<A> x = ToAcc<T>(ctx.input(0));
  if (s.layout == 1) {  // [B, S, I] -> [S, B, I]
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
        std::copy_n(&in[s.layout == 0 ? (d * B + b) * H : (b * nd + d) * H], H,
                    &v[(d * B + b) * H]);
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
    const bool reverse = s.reverse_only || d == 1;
    const Activation* act = &acts[d * NumActivations(p.cell)];
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
          T* dst = out + (s.layout == 0 ? ((q * nd + d) * B + b) * H : ((b * S + q) * nd + d) * H);
          for (int64_t k = 0; k < H; ++k) dst[k] = static_cast<T>(src[k]);
        }
  }
  auto write_state = [&](int i, const std::vector<A>& v) {
    if (ctx.num_outputs() <= i || !ctx.output_used(i)) return;
    T* out = ctx.output(i).data<T>();
    for (int d = 0; d < nd; ++d)
      for (int64_t b = 0; b < B; ++b) {
        T* dst = out + (s.layout == 0 ? (d * B + b) * H : (b * nd + d) * H);
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
};

Status RunRecurrentF32(ComputeContext& ctx, const RnnParams& p, const RnnShape& s,
                       const std::vector<Activation>& acts) {
  RnnProblem q;
  q.cell = p.cell;
  q.seq = s.seq;
  q.batch = s.batch;
  q.input = s.input;
  q.hidden = s.hidden;
  q.num_dir = s.num_dir;
  q.reverse_only = s.reverse_only;
  q.layout = s.layout;
  q.clip = p.clip;
  q.input_forget = p.input_forget;
  q.linear_before_reset = p.linear_before_reset;
  q.acts = acts.data();
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
      if (lens.data<int32_t>()[b] < 0 || lens.data<int32_t>()[b] > s.seq)
        return ctx.error("sequence length " + std::to_string(lens.data<int32_t>()[b]) +
                         " is outside [0, " + std::to_string(s.seq) + "]");
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
  RnnShape s;
  KILN_RETURN_IF_ERROR(CheckShapes(ctx, cell, dims, &s));
  std::vector<Activation> acts;
  KILN_RETURN_IF_ERROR(ParseActivations(ctx, cell, s.num_dir, &acts));
  RnnParams p;
  p.cell = cell;
  p.clip = ctx.node().attr_float("clip", 0.0f);
  if (ctx.node().attr("clip") && p.clip <= 0) return ctx.error("clip must be positive");
  p.input_forget = ctx.node().attr_int("input_forget", 0) != 0;
  p.linear_before_reset = ctx.node().attr_int("linear_before_reset", 0) != 0;
  if (ctx.input(0).dtype() == DType::kFloat32) return RunRecurrentF32(ctx, p, s, acts);
  Status st;
  bool ok = Dispatch<kFloatTypes>(ctx.input(0).dtype(),
                                  [&]<class T>() { st = RunRecurrent<T>(ctx, p, s, acts); });
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
