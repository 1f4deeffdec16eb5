// NegativeLogLikelihoodLoss and SoftmaxCrossEntropyLoss (= log-softmax over axis 1, then NLL).
// Inputs are laid out [N, C, D...]; the labels [N, D...]. The mean reduction divides by the sum of
// the weights that were gathered (1 per element without a weight input, 0 for ignored labels),
// which is np.mean when nothing is weighted or ignored.
#include <limits>
#include <optional>
#include <string>

#include "ops/common.h"

namespace kiln::ops {
namespace {

enum class Reduction { kNone, kSum, kMean };

struct LossShape {
  int64_t n = 0, c = 0, d = 1;  // d: product of the trailing dims
  Dims label_dims;
};

std::string ParseReduction(const ir::Node& node, Reduction* r) {
  std::string s = node.attr_string("reduction", "mean");
  if (s == "none")
    *r = Reduction::kNone;
  else if (s == "sum")
    *r = Reduction::kSum;
  else if (s == "mean")
    *r = Reduction::kMean;
  else
    return "reduction must be 'none', 'sum' or 'mean', got '" + s + "'";
  return "";
}

// Checks the shapes of scores [N, C, D...], labels [N, D...] and the optional weight [C].
std::string CheckLossShapes(const Dims& x, const Dims& labels, const Dims* weight, LossShape* s) {
  if (x.size() < 2) return "input must have rank >= 2 ([N, C, ...])";
  if (labels.size() != x.size() - 1) return "labels must have rank " + std::to_string(x.size() - 1);
  if (labels[0] != x[0]) return "labels dim 0 must equal the batch size";
  for (size_t i = 1; i < labels.size(); ++i)
    if (labels[i] != x[i + 1])
      return "labels shape " + DimsToString(labels) + " does not match input " + DimsToString(x);
  if (weight && (weight->size() != 1 || (*weight)[0] != x[1]))
    return "weight must have shape [" + std::to_string(x[1]) + "]";
  s->n = x[0];
  s->c = x[1];
  s->d = 1;
  for (size_t i = 2; i < x.size(); ++i) s->d *= x[i];
  s->label_dims = labels;
  return "";
}

Status LossInfer(InferContext& ctx, bool sce) {
  if (!ctx.has_input(0) || !ctx.has_input(1)) return ctx.error("expects scores and labels");
  DType dt = ctx.input_dtype(0);
  if (!IsFloatingDType(dt))
    return ctx.error("unsupported input type " + std::string(DTypeName(dt)));
  DType lt = ctx.input_dtype(1);
  if (lt != DType::kInt32 && lt != DType::kInt64) return ctx.error("labels must be int32 or int64");
  const Dims* w = nullptr;
  if (ctx.has_input(2)) {
    if (ctx.input_dtype(2) != dt) return ctx.error("weight must have the input's type");
    w = &ctx.input_dims(2);
  }
  Reduction red;
  std::string err = ParseReduction(ctx.node(), &red);
  if (err.empty()) {
    LossShape s;
    err = CheckLossShapes(ctx.input_dims(0), ctx.input_dims(1), w, &s);
  }
  if (!err.empty()) return ctx.error(err);
  ctx.set_output(0, dt, red == Reduction::kNone ? ctx.input_dims(1) : Dims{});
  if (sce && ctx.num_outputs() > 1) ctx.set_output(1, dt, ctx.input_dims(0));
  return OkStatus();
}

// loss[n, d] = -weight[label] * logp[n, label, d], then reduced.
template <class T>
Status Nll(const ComputeContext& ctx, const T* logp, const LossShape& s,
           const std::vector<int64_t>& labels, const T* weight, Reduction red, T* out) {
  const bool has_ignore = ctx.node().attr("ignore_index") != nullptr;
  const int64_t ignore = ctx.node().attr_int("ignore_index", 0);
  double total = 0, wsum = 0;
  for (int64_t n = 0; n < s.n; ++n)
    for (int64_t d = 0; d < s.d; ++d) {
      int64_t i = n * s.d + d;
      int64_t t = labels[i];
      double loss = 0, w = 0;
      if (!(has_ignore && t == ignore)) {
        if (t < 0 || t >= s.c)
          return ctx.error("label " + std::to_string(t) + " is out of range [0, " +
                           std::to_string(s.c) + ")");
        w = weight ? static_cast<double>(static_cast<Acc<T>>(weight[t])) : 1.0;
        loss = -static_cast<double>(static_cast<Acc<T>>(logp[(n * s.c + t) * s.d + d])) * w;
      }
      if (red == Reduction::kNone) out[i] = T(static_cast<Acc<T>>(loss));
      total += loss;
      wsum += w;
    }
  if (red == Reduction::kSum) out[0] = T(static_cast<Acc<T>>(total));
  if (red == Reduction::kMean) out[0] = T(static_cast<Acc<T>>(total / wsum));
  return OkStatus();
}

template <class T>
void LogSoftmaxAxis1(const T* x, const LossShape& s, T* out) {
  for (int64_t n = 0; n < s.n; ++n)
    for (int64_t d = 0; d < s.d; ++d) {
      const int64_t base = n * s.c * s.d + d;
      double mx = -std::numeric_limits<double>::infinity();
      for (int64_t c = 0; c < s.c; ++c)
        mx = std::max(mx, static_cast<double>(static_cast<Acc<T>>(x[base + c * s.d])));
      double sum = 0;
      for (int64_t c = 0; c < s.c; ++c)
        sum += std::exp(static_cast<double>(static_cast<Acc<T>>(x[base + c * s.d])) - mx);
      const double lse = mx + std::log(sum);
      for (int64_t c = 0; c < s.c; ++c)
        out[base + c * s.d] = T(
            static_cast<Acc<T>>(static_cast<double>(static_cast<Acc<T>>(x[base + c * s.d])) - lse));
    }
}

Status LossCompute(ComputeContext& ctx, bool sce) {
  const Tensor& x = ctx.input(0);
  const Tensor& lab = ctx.input(1);
  const Tensor* w = ctx.has_input(2) ? &ctx.input(2) : nullptr;
  Reduction red;
  std::string err = ParseReduction(ctx.node(), &red);
  LossShape s;
  if (err.empty()) err = CheckLossShapes(x.dims(), lab.dims(), w ? &w->dims() : nullptr, &s);
  if (!err.empty()) return ctx.error(err);
  if (w && w->dtype() != x.dtype()) return ctx.error("weight must have the input's type");
  std::vector<int64_t> labels = lab.ToInt64Vector();
  Status st;
  bool ok = Dispatch<kFloatTypes>(x.dtype(), [&]<class T>() {
    const T* logp = x.data<T>();
    Tensor scratch;
    if (sce) {
      Tensor* lp;
      if (ctx.num_outputs() > 1 && ctx.output(1).defined() && ctx.output(1).dims() == x.dims()) {
        lp = &ctx.output(1);
      } else {
        scratch = Tensor(x.dtype(), x.dims());
        lp = &scratch;
      }
      LogSoftmaxAxis1<T>(x.data<T>(), s, lp->data<T>());
      logp = lp->data<T>();
    }
    st = Nll<T>(ctx, logp, s, labels, w ? w->data<T>() : nullptr, red, ctx.output(0).data<T>());
  });
  if (!ok) return ctx.error("unsupported input type " + std::string(DTypeName(x.dtype())));
  return st;
}

}  // namespace

void RegisterReduceLossOps(OpRegistry& r) {
  r.Register(
      "NegativeLogLikelihoodLoss", [](InferContext& c) { return LossInfer(c, false); },
      [](ComputeContext& c) { return LossCompute(c, false); });
  r.Register(
      "SoftmaxCrossEntropyLoss", [](InferContext& c) { return LossInfer(c, true); },
      [](ComputeContext& c) { return LossCompute(c, true); });
}

}  // namespace kiln::ops
