#include "ops/einsum_plan.h"

#include <algorithm>

#include "ops/common.h"

namespace kiln::ops {
namespace {

int LetterLabel(char c) {
  if (c >= 'a' && c <= 'z') return c - 'a' + 26;
  if (c >= 'A' && c <= 'Z') return c - 'A';
  return -1;
}

// Splits a term into labels; kEllipsis marks "...". False on a bad character.
constexpr int kEllipsis = -2;
bool ParseTerm(const std::string& t, std::vector<int>* out) {
  out->clear();
  for (size_t i = 0; i < t.size(); ++i) {
    if (t[i] == '.') {
      if (t.compare(i, 3, "...") != 0) return false;
      for (int x : *out)
        if (x == kEllipsis) return false;
      out->push_back(kEllipsis);
      i += 2;
      continue;
    }
    int l = LetterLabel(t[i]);
    if (l < 0) return false;
    out->push_back(l);
  }
  return true;
}

}  // namespace

std::string PlanEinsum(const std::string& equation_in, const std::vector<const Dims*>& inputs,
                       EinsumPlan* plan) {
  std::string eq;
  for (char c : equation_in)
    if (c != ' ' && c != '\t') eq += c;
  auto fail = [&](const std::string& m) { return "Einsum equation '" + equation_in + "': " + m; };
  size_t arrow = eq.find("->");
  std::string lhs = arrow == std::string::npos ? eq : eq.substr(0, arrow);
  std::vector<std::vector<int>> terms;
  size_t start = 0;
  while (true) {
    size_t comma = lhs.find(',', start);
    std::vector<int> term;
    if (!ParseTerm(
            lhs.substr(start, comma == std::string::npos ? std::string::npos : comma - start),
            &term))
      return fail("bad input term");
    terms.push_back(term);
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  if (terms.size() != inputs.size())
    return fail("has " + std::to_string(terms.size()) + " input terms but the node has " +
                std::to_string(inputs.size()) + " inputs");
  // Ellipsis rank per operand, and the broadcast ellipsis dims.
  int64_t ell_rank = 0;
  std::vector<int64_t> op_ell(inputs.size(), 0);
  for (size_t i = 0; i < terms.size(); ++i) {
    int64_t letters = 0;
    bool has_ell = false;
    for (int l : terms[i]) (l == kEllipsis ? has_ell = true : ++letters);
    int64_t rank = static_cast<int64_t>(inputs[i]->size());
    if (has_ell ? rank < letters : rank != letters)
      return fail("term " + std::to_string(i) + " does not match the rank of input " +
                  std::to_string(i) + " " + DimsToString(*inputs[i]));
    op_ell[i] = has_ell ? rank - letters : 0;
    ell_rank = std::max(ell_rank, op_ell[i]);
  }
  plan->num_labels = 52 + static_cast<int>(ell_rank);
  plan->size.assign(plan->num_labels, -1);
  plan->stride.assign(inputs.size(), std::vector<int64_t>(plan->num_labels, 0));
  std::vector<int> count(plan->num_labels, 0);
  for (size_t i = 0; i < terms.size(); ++i) {
    Dims st = Strides(*inputs[i]);
    int axis = 0;
    for (int l : terms[i]) {
      if (l == kEllipsis) {
        for (int64_t e = 0; e < op_ell[i]; ++e, ++axis) {
          int label = 52 + static_cast<int>(ell_rank - op_ell[i] + e);
          int64_t d = (*inputs[i])[axis];
          int64_t& sz = plan->size[label];
          if (d != 1) {
            if (sz > 1 && sz != d) return fail("ellipsis dims do not broadcast");
            sz = d;
            plan->stride[i][label] += st[axis];
          } else if (sz < 0) {
            sz = 1;
          }
          ++count[label];
        }
        continue;
      }
      int64_t d = (*inputs[i])[axis];
      if (plan->size[l] >= 0 && plan->size[l] != d)
        return fail("label '" + std::string(1, l < 26 ? 'A' + l : 'a' + l - 26) + "' has sizes " +
                    std::to_string(plan->size[l]) + " and " + std::to_string(d));
      plan->size[l] = d;
      plan->stride[i][l] += st[axis];
      ++count[l];
      ++axis;
    }
  }
  // Output labels.
  plan->out_labels.clear();
  std::vector<char> in_out(plan->num_labels, 0);
  if (arrow != std::string::npos) {
    std::vector<int> term;
    if (!ParseTerm(eq.substr(arrow + 2), &term)) return fail("bad output term");
    for (int l : term) {
      if (l == kEllipsis) {
        for (int e = 0; e < ell_rank; ++e) plan->out_labels.push_back(52 + e);
        continue;
      }
      if (count[l] == 0) return fail("output label does not appear in the inputs");
      if (in_out[l]) return fail("output label repeated");
      in_out[l] = 1;
      plan->out_labels.push_back(l);
    }
    for (int e = 0; e < ell_rank; ++e) in_out[52 + e] = 1;  // ellipsis dims never contract...
    bool out_has_ell = false;
    for (int l : term) out_has_ell |= l == kEllipsis;
    if (!out_has_ell)  // ...unless the output omits "...": then they are summed
      for (int e = 0; e < ell_rank; ++e) in_out[52 + e] = 0;
  } else {
    for (int e = 0; e < ell_rank; ++e) {
      plan->out_labels.push_back(52 + e);
      in_out[52 + e] = 1;
    }
    for (int l = 0; l < 52; ++l)
      if (count[l] == 1) {
        plan->out_labels.push_back(l);
        in_out[l] = 1;
      }
  }
  plan->sum_labels.clear();
  for (int l = 0; l < plan->num_labels; ++l)
    if (!in_out[l] && count[l] > 0) plan->sum_labels.push_back(l);
  plan->out_dims.clear();
  for (int l : plan->out_labels) plan->out_dims.push_back(plan->size[l]);
  return "";
}

}  // namespace kiln::ops
