#include "ops/recurrent_plan.h"

#include <cctype>
#include <string>

namespace kiln::ops {
namespace {

struct ActInfo {
  const char* name;
  RnnAct kind;
  bool uses_alpha, uses_beta;
  float alpha, beta;  // defaults when the lists run out
};

constexpr ActInfo kActs[] = {
    {"relu", RnnAct::kRelu, false, false, 0, 0},
    {"tanh", RnnAct::kTanh, false, false, 0, 0},
    {"sigmoid", RnnAct::kSigmoid, false, false, 0, 0},
    {"affine", RnnAct::kAffine, true, true, 1.0f, 0.0f},
    {"leakyrelu", RnnAct::kLeakyRelu, true, false, 0.01f, 0},
    {"thresholdedrelu", RnnAct::kThresholdedRelu, true, false, 1.0f, 0},
    {"scaledtanh", RnnAct::kScaledTanh, true, true, 1.0f, 1.0f},
    {"hardsigmoid", RnnAct::kHardSigmoid, true, true, 0.2f, 0.5f},
    {"elu", RnnAct::kElu, true, false, 1.0f, 0},
    {"softsign", RnnAct::kSoftsign, false, false, 0, 0},
    {"softplus", RnnAct::kSoftplus, false, false, 0, 0},
};

// Activations for every direction, in attribute order (f, g, h per direction). alpha/beta values
// are consumed in order by the functions that take them (as onnxruntime does).
Status ParseActivations(const ir::Node& n, RnnCell cell, int num_dir,
                        std::vector<RnnActivation>* out) {
  std::vector<std::string> names;
  if (const ir::Attribute* a = n.attr("activations")) names = a->strings;
  const int per_dir = RnnActivations(cell);
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
    return Error("expects " + std::to_string(per_dir * num_dir) + " activations, got " +
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
    if (!info) return Error("unsupported activation '" + name + "'");
    RnnActivation act;
    act.kind = info->kind;
    act.alpha = info->alpha;
    act.beta = info->beta;
    if (info->uses_alpha && ai < alphas.size()) act.alpha = alphas[ai++];
    if (info->uses_beta && bi < betas.size()) act.beta = betas[bi++];
    out->push_back(act);
  }
  return OkStatus();
}

Status ParseOptions(const ir::Node& n, int64_t opset, RecurrentPlan* p) {
  std::string dir = n.attr_string("direction", "forward");
  if (dir != "forward" && dir != "reverse" && dir != "bidirectional")
    return Error("direction must be forward, reverse or bidirectional, not '" + dir + "'");
  p->num_dir = dir == "bidirectional" ? 2 : 1;
  p->reverse_only = dir == "reverse";
  p->layout = opset >= 14 ? static_cast<int>(n.attr_int("layout", 0)) : 0;
  if (p->layout != 0 && p->layout != 1) return Error("layout must be 0 or 1");
  p->clip = n.attr_float("clip", 0.0f);
  if (n.attr("clip") && p->clip <= 0) return Error("clip must be positive");
  p->input_forget = n.attr_int("input_forget", 0) != 0;
  p->linear_before_reset = n.attr_int("linear_before_reset", 0) != 0;
  return ParseActivations(n, p->cell, p->num_dir, &p->acts);
}

}  // namespace

Dims RecurrentPlan::YDims() const {
  return layout == 0 ? Dims{seq, num_dir, batch, hidden} : Dims{batch, seq, num_dir, hidden};
}

Dims RecurrentPlan::StateDims() const {
  return layout == 0 ? Dims{num_dir, batch, hidden} : Dims{batch, num_dir, hidden};
}

Status PlanRecurrent(const ir::Node& node, int64_t opset, RnnCell cell,
                     const std::vector<const Dims*>& dims, RecurrentPlan* plan) {
  RecurrentPlan& p = *plan;
  p = RecurrentPlan();
  p.cell = cell;
  KILN_RETURN_IF_ERROR(ParseOptions(node, opset, &p));
  auto input = [&](size_t i) { return i < dims.size() ? dims[i] : nullptr; };
  for (size_t i = 0; i < 3; ++i)
    if (!input(i)) return Error("inputs X, W and R are required");
  const int G = p.gates();
  const Dims& x = *input(0);
  const Dims& w = *input(1);
  if (x.size() != 3) return Error("X must have rank 3, got " + DimsToString(x));
  p.seq = p.layout == 0 ? x[0] : x[1];
  p.batch = p.layout == 0 ? x[1] : x[0];
  p.input = x[2];
  if (w.size() != 3 || w[0] != p.num_dir || w[2] != p.input || w[1] % G != 0)
    return Error("W has shape " + DimsToString(w) + ", expected [" + std::to_string(p.num_dir) +
                 ", " + std::to_string(G) + "*hidden_size, " + std::to_string(p.input) + "]");
  p.hidden = w[1] / G;
  int64_t attr_hidden = node.attr_int("hidden_size", -1);
  if (attr_hidden >= 0 && attr_hidden != p.hidden)
    return Error("hidden_size is " + std::to_string(attr_hidden) + " but W has shape " +
                 DimsToString(w));
  const int64_t h = p.hidden, nd = p.num_dir;
  auto expect = [&](size_t i, const char* name, const Dims& want) -> Status {
    if (!input(i) || *input(i) == want) return OkStatus();
    return Error(std::string(name) + " has shape " + DimsToString(*input(i)) + ", expected " +
                 DimsToString(want));
  };
  KILN_RETURN_IF_ERROR(expect(2, "R", {nd, G * h, h}));
  KILN_RETURN_IF_ERROR(expect(3, "B", {nd, 2 * G * h}));
  KILN_RETURN_IF_ERROR(expect(4, "sequence_lens", {p.batch}));
  KILN_RETURN_IF_ERROR(expect(5, "initial_h", p.StateDims()));
  if (cell == RnnCell::kLstm) {
    KILN_RETURN_IF_ERROR(expect(6, "initial_c", p.StateDims()));
    KILN_RETURN_IF_ERROR(expect(7, "P", {nd, 3 * h}));
  }
  return OkStatus();
}

}  // namespace kiln::ops
