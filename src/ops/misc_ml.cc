// ai.onnx.ml operators: Binarizer, ArrayFeatureExtractor, LabelEncoder (numeric or string keys and
// values), TreeEnsemble (ml opset 5),
// Scaler, Normalizer, LinearRegressor and Imputer.
#include <cmath>
#include <map>
#include <string>
#include <unordered_map>
#include <vector>

#include "ops/common.h"
#include "ops/ml_plans.h"

namespace kiln::ops {
namespace {

const char kMl[] = "ai.onnx.ml";

bool IsMlNumeric(DType t) {
  return t == DType::kFloat32 || t == DType::kFloat64 || t == DType::kInt64 || t == DType::kInt32;
}

// ---------------------------------------------------------------- Binarizer

Status BinarizerInfer(InferContext& ctx) {
  if (!ctx.has_input(0) || !IsMlNumeric(ctx.input_dtype(0)))
    return ctx.error("X must be float, double, int64 or int32");
  return SameAsInput(ctx);
}

Status BinarizerCompute(ComputeContext& ctx) {
  const double th = ctx.node().attr_float("threshold", 0.0f);
  const Tensor& x = ctx.input(0);
  Dispatch<kNumericTypes>(x.dtype(), [&]<class T>() {
    const T* p = x.data<T>();
    T* q = ctx.output(0).data<T>();
    for (int64_t i = 0; i < x.size(); ++i) q[i] = static_cast<double>(p[i]) > th ? T(1) : T(0);
  });
  return OkStatus();
}

// ---------------------------------------------------------------- ArrayFeatureExtractor

Dims FeatureDims(const Dims& x, int64_t n) {
  if (x.size() <= 1) return {1, n};
  Dims o(x.begin(), x.end() - 1);
  o.push_back(n);
  return o;
}

Status AfeInfer(InferContext& ctx) {
  if (!ctx.has_input(0) || !ctx.has_input(1)) return ctx.error("needs X and Y");
  if (ctx.input_dtype(1) != DType::kInt64) return ctx.error("Y must be int64");
  if (ctx.input_rank(0) < 1) return ctx.error("X must have rank >= 1");
  ctx.set_output(0, ctx.input_dtype(0),
                 FeatureDims(ctx.input_dims(0), NumElements(ctx.input_dims(1))));
  return OkStatus();
}

Status AfeCompute(ComputeContext& ctx) {
  const Tensor& x = ctx.input(0);
  const Tensor& y = ctx.input(1);
  const int64_t last = x.dims().back(), rows = x.size() / std::max<int64_t>(last, 1), n = y.size();
  const int64_t* ip = y.data<int64_t>();
  for (int64_t k = 0; k < n; ++k)
    if (ip[k] < 0 || ip[k] >= last)
      return ctx.error("index " + std::to_string(ip[k]) + " is out of range [0, " +
                       std::to_string(last) + ")");
  const size_t es = DTypeSize(x.dtype());
  const uint8_t* src = static_cast<const uint8_t*>(x.raw());
  uint8_t* dst = static_cast<uint8_t*>(ctx.output(0).raw());
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t k = 0; k < n; ++k)
      std::memcpy(dst + (r * n + k) * es, src + (r * last + ip[k]) * es, es);
  return OkStatus();
}

// ---------------------------------------------------------------- LabelEncoder

// Keys or values as a 1-D tensor, from the *_strings / *_floats / *_int64s / *_tensor attribute;
// undefined when none is given.
std::string ReadList(const ir::Node& node, const std::string& prefix, Tensor* l) {
  auto row = [](const auto& v) { return Dims{static_cast<int64_t>(v.size())}; };
  if (const ir::Attribute* a = node.attr(prefix + "_strings")) {
    *l = Tensor::FromVector(DType::kString, row(a->strings), a->strings);
  } else if ((a = node.attr(prefix + "_floats"))) {
    *l = Tensor::FromVector(DType::kFloat32, row(a->floats), a->floats);
  } else if ((a = node.attr(prefix + "_int64s"))) {
    *l = Tensor::FromVector(DType::kInt64, row(a->ints), a->ints);
  } else if ((a = node.attr(prefix + "_tensor"))) {
    const Tensor& t = a->t;
    if (!t.defined() || (!t.is_string() && !IsSupportedDType(t.dtype())))
      return prefix + "_tensor has an unsupported type";
    *l = t.Reshaped({t.size()});
  }
  return "";
}

struct LabelEncoderPlan {
  Tensor keys, values;
  Tensor fallback;  // one element of the values' type
};

// ML opset 1's form: `classes_strings` maps strings to their index, or an index to its string,
// as X is a string or an integer tensor.
void ReadClasses(const std::vector<std::string>& classes, DType x, LabelEncoderPlan* p) {
  const Tensor names = Tensor::FromVector(DType::kString, {int64_t(classes.size())}, classes);
  Tensor index(DType::kInt64, {int64_t(classes.size())});
  for (int64_t i = 0; i < index.size(); ++i) index.data<int64_t>()[i] = i;
  p->keys = x == DType::kString ? names : index;
  p->values = x == DType::kString ? index : names;
}

std::string MakeLabelEncoderPlan(const ir::Node& n, DType x, LabelEncoderPlan* p) {
  std::string err;
  if (const ir::Attribute* c = n.attr("classes_strings"))
    ReadClasses(c->strings, x, p);
  else
    err = ReadList(n, "keys", &p->keys);
  if (err.empty() && !n.attr("classes_strings")) err = ReadList(n, "values", &p->values);
  if (!err.empty()) return err;
  if (!p->keys.defined() || !p->values.defined()) return "needs keys and values";
  if (p->keys.size() != p->values.size()) return "keys and values differ in length";
  const DType vt = p->values.dtype();
  if (const ir::Attribute* d = n.attr("default_tensor"); d && d->t.defined() && d->t.size() > 0) {
    if (d->t.dtype() != vt) return "default_tensor's type differs from the values'";
    p->fallback = Tensor(vt, {});
    CopyElement(d->t, 0, &p->fallback, 0);
  } else if (vt == DType::kString) {
    p->fallback = Tensor::FromVector(
        DType::kString, {}, std::vector<std::string>{n.attr_string("default_string", "_Unused")});
  } else {
    p->fallback = Tensor(vt, {});
    Dispatch<kNumericTypes>(vt, [&]<class T>() {
      p->fallback.data<T>()[0] = IsFloatingDType(vt)
                                     ? ConvertValue<T>(n.attr_float("default_float", -0.0f))
                                     : ConvertValue<T>(n.attr_int("default_int64", -1));
    });
  }
  return "";
}

Status LabelEncoderInfer(InferContext& ctx) {
  LabelEncoderPlan p;
  if (!ctx.has_input(0)) return ctx.error("needs X");
  if (std::string err = MakeLabelEncoderPlan(ctx.node(), ctx.input_dtype(0), &p); !err.empty())
    return ctx.error(err);
  if (ctx.input_dtype(0) != p.keys.dtype())
    return ctx.error("X type differs from the key type " + std::string(DTypeName(p.keys.dtype())));
  ctx.set_output(0, p.values.dtype(), ctx.input_dims(0));
  return OkStatus();
}

// The slot of each element of x among the keys (SIZE_MAX where none matches; NaN matches NaN).
std::vector<size_t> KeySlots(const Tensor& keys, const Tensor& x) {
  std::vector<size_t> slots(static_cast<size_t>(x.size()), SIZE_MAX);
  if (keys.is_string()) {
    std::unordered_map<std::string, size_t> index;
    for (int64_t e = keys.size() - 1; e >= 0; --e) index[keys.strings()[e]] = e;
    for (int64_t e = 0; e < x.size(); ++e)
      if (auto it = index.find(x.strings()[e]); it != index.end()) slots[e] = it->second;
  } else if (IsFloatingDType(keys.dtype())) {
    std::map<double, size_t> index;
    size_t nan_slot = SIZE_MAX;
    for (int64_t e = keys.size() - 1; e >= 0; --e) {
      const double k = keys.GetDouble(e);
      (std::isnan(k) ? nan_slot : index[k]) = e;
    }
    for (int64_t e = 0; e < x.size(); ++e) {
      const double k = x.GetDouble(e);
      if (std::isnan(k))
        slots[e] = nan_slot;
      else if (auto it = index.find(k); it != index.end())
        slots[e] = it->second;
    }
  } else {
    std::unordered_map<int64_t, size_t> index;
    for (int64_t e = keys.size() - 1; e >= 0; --e) index[keys.GetInt(e)] = e;
    for (int64_t e = 0; e < x.size(); ++e)
      if (auto it = index.find(x.GetInt(e)); it != index.end()) slots[e] = it->second;
  }
  return slots;
}

Status LabelEncoderCompute(ComputeContext& ctx) {
  LabelEncoderPlan p;
  if (std::string err = MakeLabelEncoderPlan(ctx.node(), ctx.input(0).dtype(), &p); !err.empty())
    return ctx.error(err);
  const std::vector<size_t> slots = KeySlots(p.keys, ctx.input(0));
  Tensor& y = ctx.output(0);
  for (int64_t e = 0; e < y.size(); ++e) {
    if (slots[e] == SIZE_MAX)
      CopyElement(p.fallback, 0, &y, e);
    else
      CopyElement(p.values, static_cast<int64_t>(slots[e]), &y, e);
  }
  return OkStatus();
}

// ---------------------------------------------------------------- TreeEnsemble

}  // namespace

namespace {

std::vector<double> AttrValues(const ir::Node& n, const std::string& name) {
  std::vector<double> v;
  if (const ir::Attribute* a = n.attr(name)) {
    if (a->kind == ir::Attribute::Kind::kTensor && a->t.defined())
      for (int64_t i = 0; i < a->t.size(); ++i) v.push_back(a->t.GetDouble(i));
    for (float f : a->floats) v.push_back(f);
    for (int64_t i : a->ints) v.push_back(static_cast<double>(i));
  }
  return v;
}

}  // namespace

std::string MakeTreeEnsemblePlan(const ir::Node& n, TreeEnsemblePlan* e) {
  e->splits = AttrValues(n, "nodes_splits");
  e->weights = AttrValues(n, "leaf_weights");
  auto ints = [&](const char* k) { return n.attr_ints(k); };
  e->features = ints("nodes_featureids");
  for (double m : AttrValues(n, "nodes_modes")) e->modes.push_back(static_cast<int64_t>(m));
  e->true_ids = ints("nodes_truenodeids");
  e->false_ids = ints("nodes_falsenodeids");
  e->true_leaf = ints("nodes_trueleafs");
  e->false_leaf = ints("nodes_falseleafs");
  e->targets = ints("leaf_targetids");
  e->roots = ints("tree_roots");
  e->missing_true = ints("nodes_missing_value_tracks_true");
  e->n_targets = n.attr_int("n_targets", 0);
  e->aggregate = n.attr_int("aggregate_function", 1);
  e->post = n.attr_int("post_transform", 0);
  const size_t nn = e->splits.size();
  if (e->features.size() != nn || e->modes.size() != nn || e->true_ids.size() != nn ||
      e->false_ids.size() != nn || e->true_leaf.size() != nn || e->false_leaf.size() != nn)
    return "node attributes differ in length";
  if (!e->missing_true.empty() && e->missing_true.size() != nn)
    return "nodes_missing_value_tracks_true has the wrong length";
  if (e->targets.size() != e->weights.size()) return "leaf attributes differ in length";
  if (e->n_targets <= 0) return "n_targets must be positive";
  if (e->aggregate < 0 || e->aggregate > 3) return "unknown aggregate_function";
  if (e->post < kPostNone || e->post > kPostProbit) return "unknown post_transform";
  for (int64_t t : e->targets)
    if (t < 0 || t >= e->n_targets) return "leaf_targetids entry out of range";
  for (size_t i = 0; i < nn; ++i) {
    if (e->modes[i] < 0 || e->modes[i] > 6) return "unknown node mode";
    int64_t lim_t =
        e->true_leaf[i] ? static_cast<int64_t>(e->weights.size()) : static_cast<int64_t>(nn);
    int64_t lim_f =
        e->false_leaf[i] ? static_cast<int64_t>(e->weights.size()) : static_cast<int64_t>(nn);
    if (e->true_ids[i] < 0 || e->true_ids[i] >= lim_t || e->false_ids[i] < 0 ||
        e->false_ids[i] >= lim_f)
      return "node " + std::to_string(i) + " points outside the ensemble";
    if (e->features[i] < 0) return "negative feature id";
  }
  for (int64_t r : e->roots)
    if (r < 0 || r >= static_cast<int64_t>(nn)) return "tree_roots entry out of range";
  // Set members, in the order the MEMBER nodes appear, each list ended by NaN.
  std::vector<double> mv = AttrValues(n, "membership_values");
  e->members.assign(nn, {});
  size_t pos = 0;
  for (size_t i = 0; i < nn; ++i) {
    if (e->modes[i] != 6) continue;
    if (pos >= mv.size()) return "membership_values has too few sets";
    while (pos < mv.size() && !std::isnan(mv[pos])) e->members[i].push_back(mv[pos++]);
    ++pos;
  }
  return "";
}

namespace {

// The leaf a tree sends row x to.
int64_t TreeLeaf(const TreeEnsemblePlan& e, int64_t root, const std::function<double(int64_t)>& x) {
  if (e.true_leaf[root] && e.false_leaf[root] && e.true_ids[root] == e.false_ids[root])
    return e.true_ids[root];
  int64_t node = root;
  for (size_t steps = 0; steps <= e.splits.size(); ++steps) {
    double v = x(e.features[node]);
    double s = e.splits[node];
    bool t;
    switch (e.modes[node]) {
      case 0:
        t = v <= s;
        break;
      case 1:
        t = v < s;
        break;
      case 2:
        t = v >= s;
        break;
      case 3:
        t = v > s;
        break;
      case 4:
        t = v == s;
        break;
      case 5:
        t = v != s;
        break;
      default:
        t = std::find(e.members[node].begin(), e.members[node].end(), v) != e.members[node].end();
    }
    if (std::isnan(v) && !e.missing_true.empty() && e.missing_true[node]) t = true;
    int64_t next = t ? e.true_ids[node] : e.false_ids[node];
    if (t ? e.true_leaf[node] : e.false_leaf[node]) return next;
    node = next;
  }
  return -1;  // a cycle
}

void PostTransform(int64_t post, std::vector<double>& v) {
  if (post == kPostSoftmax || post == kPostSoftmaxZero) {
    double mx = -INFINITY;
    for (double a : v) mx = std::max(mx, a);
    double sum = 0;
    for (double& a : v) {
      a = (post == kPostSoftmaxZero && a == 0) ? 0 : std::exp(a - mx);
      sum += a;
    }
    for (double& a : v) a = sum > 0 ? a / sum : 0;
  } else if (post == kPostLogistic) {
    for (double& a : v) a = 1 / (1 + std::exp(-a));
  } else if (post == kPostProbit) {
    // probit: sqrt(2) * erfinv(2p - 1), by Newton iterations on erf.
    for (double& a : v) {
      double y = 2 * a - 1, z = 0;
      if (y <= -1 || y >= 1) {
        a = y <= -1 ? -INFINITY : INFINITY;
        continue;
      }
      for (int it = 0; it < 60; ++it)
        z -= (std::erf(z) - y) / (2 / std::sqrt(3.14159265358979323846) * std::exp(-z * z));
      a = std::sqrt(2.0) * z;
    }
  }
}

Status TreeEnsembleInfer(InferContext& ctx) {
  if (!ctx.has_input(0) || !IsFloatingDType(ctx.input_dtype(0)) || ctx.input_rank(0) != 2)
    return ctx.error("X must be a 2-D float tensor");
  TreeEnsemblePlan e;
  KILN_RETURN_IF_ERROR(Checked(ctx, MakeTreeEnsemblePlan(ctx.node(), &e)));
  ctx.set_output(0, ctx.input_dtype(0), {ctx.input_dims(0)[0], e.n_targets});
  return OkStatus();
}

Status TreeEnsembleCompute(ComputeContext& ctx) {
  TreeEnsemblePlan e;
  KILN_RETURN_IF_ERROR(Checked(ctx, MakeTreeEnsemblePlan(ctx.node(), &e)));
  const Tensor& x = ctx.input(0);
  const int64_t N = x.dim(0), F = x.dim(1);
  for (int64_t f : e.features)
    if (f >= F) return ctx.error("feature id " + std::to_string(f) + " is out of range");
  Tensor& y = ctx.output(0);
  std::vector<double> row(e.n_targets);
  const double init = e.aggregate == 2 ? INFINITY : e.aggregate == 3 ? -INFINITY : 0.0;
  for (int64_t n = 0; n < N; ++n) {
    std::fill(row.begin(), row.end(), init);
    std::vector<char> hit(e.n_targets, 0);
    auto feat = [&](int64_t f) { return x.GetDouble(n * F + f); };
    for (int64_t root : e.roots) {
      int64_t leaf = TreeLeaf(e, root, feat);
      if (leaf < 0)
        return ctx.error("tree rooted at node " + std::to_string(root) + " has a cycle");
      int64_t t = e.targets[leaf];
      double w = e.weights[leaf];
      hit[t] = 1;
      switch (e.aggregate) {
        case 0:
          row[t] += w / static_cast<double>(e.roots.size());
          break;
        case 1:
          row[t] += w;
          break;
        case 2:
          row[t] = std::min(row[t], w);
          break;
        default:
          row[t] = std::max(row[t], w);
      }
    }
    for (int64_t t = 0; t < e.n_targets; ++t)
      if (!hit[t] && (e.aggregate == 2 || e.aggregate == 3)) row[t] = 0;
    PostTransform(e.post, row);
    Dispatch<kFloatTypes>(y.dtype(), [&]<class T>() {
      T* p = y.data<T>();
      for (int64_t t = 0; t < e.n_targets; ++t) p[n * e.n_targets + t] = ConvertValue<T>(row[t]);
    });
  }
  return OkStatus();
}

// ---------------------------------------------------------------- Scaler, Normalizer, ...

// Shape inference of an op with a float32 output of X's dims whose plan checks its attributes.
template <class Plan, auto kMake>
Status FloatOutInfer(InferContext& ctx) {
  if (!ctx.has_input(0) || !IsMlNumeric(ctx.input_dtype(0)))
    return ctx.error("X must be float, double, int64 or int32");
  Plan plan;
  KILN_RETURN_IF_ERROR(Checked(ctx, kMake(ctx.node(), ctx.input_dims(0), &plan)));
  ctx.set_output(0, DType::kFloat32, ctx.input_dims(0));
  return OkStatus();
}

Status ScalerCompute(ComputeContext& ctx) {
  const Tensor& x = ctx.input(0);
  ScalerPlan p;
  KILN_RETURN_IF_ERROR(Checked(ctx, MakeScalerPlan(ctx.node(), x.dims(), &p)));
  float* y = ctx.output(0).data<float>();
  for (int64_t i = 0; i < x.size(); ++i) {
    int64_t f = i % p.features;
    y[i] = static_cast<float>((x.GetDouble(i) - p.Offset(f)) * p.Scale(f));
  }
  return OkStatus();
}

Status NormalizerCompute(ComputeContext& ctx) {
  const Tensor& x = ctx.input(0);
  NormalizerPlan p;
  KILN_RETURN_IF_ERROR(Checked(ctx, MakeNormalizerPlan(ctx.node(), x.dims(), &p)));
  const int64_t C = p.features;
  float* y = ctx.output(0).data<float>();
  for (int64_t r = 0; r < p.rows; ++r) {
    double acc = 0;
    for (int64_t c = 0; c < C; ++c) {
      double v = x.GetDouble(r * C + c);
      if (p.norm == MlNorm::kMax)
        acc = c == 0 ? v : std::max(acc, v);
      else if (p.norm == MlNorm::kL1)
        acc += std::fabs(v);
      else
        acc += v * v;
    }
    if (p.norm == MlNorm::kL2) acc = std::sqrt(acc);
    for (int64_t c = 0; c < C; ++c) {
      double v = x.GetDouble(r * C + c);
      y[r * C + c] = static_cast<float>(acc == 0 ? v : v / acc);
    }
  }
  return OkStatus();
}

}  // namespace

std::string MakeLinearRegressorPlan(const ir::Node& n, const Dims& x, LinearRegressorPlan* p) {
  if (x.empty()) return "X must be [N, C] or [C]";
  p->targets = n.attr_int("targets", 1);
  if (p->targets <= 0) return "targets must be positive";
  // A row is all of X past its first dim (rank 1: X is the one row).
  p->rows = x.size() == 1 ? 1 : x[0];
  p->features = x.size() == 1 ? x[0] : NumElements(Dims(x.begin() + 1, x.end()));
  p->coefficients = n.attr_floats("coefficients");
  p->intercepts = n.attr_floats("intercepts");
  if (static_cast<int64_t>(p->coefficients.size()) != p->targets * p->features)
    return "coefficients must have targets*F entries";
  if (p->intercepts.empty()) p->intercepts.assign(static_cast<size_t>(p->targets), 0.0f);
  if (static_cast<int64_t>(p->intercepts.size()) != p->targets)
    return "intercepts must have targets entries";
  static const std::map<std::string, MlPostTransform> kPosts = {{"NONE", kPostNone},
                                                                {"SOFTMAX", kPostSoftmax},
                                                                {"LOGISTIC", kPostLogistic},
                                                                {"SOFTMAX_ZERO", kPostSoftmaxZero},
                                                                {"PROBIT", kPostProbit}};
  const std::string post = n.attr_string("post_transform", "NONE");
  const auto it = kPosts.find(post);
  if (it == kPosts.end()) return "unknown post_transform '" + post + "'";
  p->post = it->second;
  return "";
}

std::string MakeScalerPlan(const ir::Node& n, const Dims& x, ScalerPlan* p) {
  p->features = x.empty() ? 1 : x.back();
  p->rows = p->features ? NumElements(x) / p->features : 0;
  p->offset = n.attr_floats("offset");
  p->scale = n.attr_floats("scale");
  for (const std::vector<float>* v : {&p->offset, &p->scale})
    if (v->size() > 1 && static_cast<int64_t>(v->size()) != p->features)
      return "offset/scale must have 1 or C entries";
  return "";
}

std::string MakeNormalizerPlan(const ir::Node& n, const Dims& x, NormalizerPlan* p) {
  const std::string norm = n.attr_string("norm", "MAX");
  if (norm != "MAX" && norm != "L1" && norm != "L2") return "unknown norm '" + norm + "'";
  p->norm = norm == "MAX" ? MlNorm::kMax : norm == "L1" ? MlNorm::kL1 : MlNorm::kL2;
  p->features = x.empty() ? 1 : x.back();
  p->rows = p->features ? NumElements(x) / p->features : 0;
  return "";
}

std::string MakeImputerPlan(const ir::Node& n, DType x, const Dims& dims, ImputerPlan* p) {
  const bool floating = IsFloatingDType(x);
  p->values.clear();
  if (floating)
    for (float f : n.attr_floats("imputed_value_floats")) p->values.push_back(f);
  else
    for (int64_t i : n.attr_ints("imputed_value_int64s"))
      p->values.push_back(static_cast<double>(i));
  p->replaced = floating ? n.attr_float("replaced_value_float", NAN)
                         : static_cast<double>(n.attr_int("replaced_value_int64", 0));
  p->features = dims.empty() ? 1 : dims.back();
  if (p->values.empty() ||
      (p->values.size() != 1 && static_cast<int64_t>(p->values.size()) != p->features))
    return "imputed values must have 1 or C entries";
  return "";
}

namespace {

Status LinearRegressorInfer(InferContext& ctx) {
  if (!ctx.has_input(0) || !IsMlNumeric(ctx.input_dtype(0))) return ctx.error("X must be numeric");
  LinearRegressorPlan p;
  KILN_RETURN_IF_ERROR(Checked(ctx, MakeLinearRegressorPlan(ctx.node(), ctx.input_dims(0), &p)));
  ctx.set_output(0, DType::kFloat32, {p.rows, p.targets});
  return OkStatus();
}

Status LinearRegressorCompute(ComputeContext& ctx) {
  const Tensor& x = ctx.input(0);
  LinearRegressorPlan p;
  KILN_RETURN_IF_ERROR(Checked(ctx, MakeLinearRegressorPlan(ctx.node(), x.dims(), &p)));
  const int64_t T = p.targets, F = p.features;
  float* y = ctx.output(0).data<float>();
  std::vector<double> row(T);
  for (int64_t n = 0; n < p.rows; ++n) {
    for (int64_t t = 0; t < T; ++t) {
      double acc = p.intercepts[t];
      for (int64_t f = 0; f < F; ++f) acc += p.coefficients[t * F + f] * x.GetDouble(n * F + f);
      row[t] = acc;
    }
    PostTransform(p.post, row);
    for (int64_t t = 0; t < T; ++t) y[n * T + t] = static_cast<float>(row[t]);
  }
  return OkStatus();
}

Status ImputerInfer(InferContext& ctx) {
  if (!ctx.has_input(0) || !IsMlNumeric(ctx.input_dtype(0))) return ctx.error("X must be numeric");
  ImputerPlan p;
  KILN_RETURN_IF_ERROR(
      Checked(ctx, MakeImputerPlan(ctx.node(), ctx.input_dtype(0), ctx.input_dims(0), &p)));
  return SameAsInput(ctx);
}

Status ImputerCompute(ComputeContext& ctx) {
  const Tensor& x = ctx.input(0);
  ImputerPlan plan;
  KILN_RETURN_IF_ERROR(Checked(ctx, MakeImputerPlan(ctx.node(), x.dtype(), x.dims(), &plan)));
  Dispatch<kNumericTypes>(x.dtype(), [&]<class T>() {
    const T* p = x.data<T>();
    T* q = ctx.output(0).data<T>();
    for (int64_t i = 0; i < x.size(); ++i) {
      double v = static_cast<double>(p[i]);
      bool miss = std::isnan(plan.replaced) ? std::isnan(v) : v == plan.replaced;
      q[i] = miss ? ConvertValue<T>(plan.Value(i % plan.features)) : p[i];
    }
  });
  return OkStatus();
}

}  // namespace

void RegisterMlOps(OpRegistry& r) {
  r.Register("Binarizer", BinarizerInfer, BinarizerCompute, kMl);
  r.Register("ArrayFeatureExtractor", AfeInfer, AfeCompute, kMl);
  r.Register("LabelEncoder", LabelEncoderInfer, LabelEncoderCompute, kMl);
  r.Register("TreeEnsemble", TreeEnsembleInfer, TreeEnsembleCompute, kMl);
  r.Register("Scaler", FloatOutInfer<ScalerPlan, MakeScalerPlan>, ScalerCompute, kMl);
  r.Register("Normalizer", FloatOutInfer<NormalizerPlan, MakeNormalizerPlan>, NormalizerCompute,
             kMl);
  r.Register("LinearRegressor", LinearRegressorInfer, LinearRegressorCompute, kMl);
  r.Register("Imputer", ImputerInfer, ImputerCompute, kMl);
}

}  // namespace kiln::ops
