// Helpers for the axis-wise emitters (matmul, normalization, reduction families): axis
// normalization, the [outer, len, inner] split around an axis, loop nests with their own index
// prefix (so nests can be nested), axis merging, and broadcast index expressions.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "codegen/c/emit_util.h"
#include "codegen/c/node_emitter.h"

namespace kiln::codegen::c {

// An index expression: loop variables times strides plus a constant, printed folded (no `* 1`,
// no `+ 0`, one constant) so that the emitted C reads as the arithmetic it does. A loop of one
// trip (For) binds its variable to the constant 0, so its terms vanish.
class Ix {
 public:
  Ix(int64_t c = 0) : c_(c) {}  // NOLINT: a constant is an index
  static Ix Var(const std::string& name) {
    Ix x;
    x.terms_.push_back({name, 1});
    return x;
  }
  Ix operator+(const Ix& b) const {
    Ix r = *this;
    r.c_ += b.c_;
    for (const auto& [v, k] : b.terms_) r.Add(v, k);
    return r;
  }
  Ix operator-(const Ix& b) const { return *this + b * -1; }
  Ix operator*(int64_t k) const {
    Ix r;
    if (k == 0) return r;
    r.c_ = c_ * k;
    for (const auto& [v, m] : terms_) r.terms_.push_back({v, m * k});
    return r;
  }
  bool is_constant() const { return terms_.empty(); }
  int64_t constant() const { return c_; }
  // Positive terms first, then the constant, then what is subtracted: "o * 12 + i + 3 - j".
  std::string str() const {
    std::string e;
    auto term = [](const std::string& v, int64_t k) {
      return k == 1 ? v : v + " * " + std::to_string(k);
    };
    for (const auto& [v, k] : terms_)
      if (k > 0) e += (e.empty() ? "" : " + ") + term(v, k);
    if (c_ > 0 || (c_ == 0 && e.empty() && terms_.empty()))
      e += (e.empty() ? "" : " + ") + std::to_string(c_);
    if (c_ < 0) e += (e.empty() ? "-" : " - ") + std::to_string(-c_);
    for (const auto& [v, k] : terms_)
      if (k < 0) e += (e.empty() ? "-" : " - ") + term(v, -k);
    return e;
  }

 private:
  void Add(const std::string& v, int64_t k) {
    for (auto it = terms_.begin(); it != terms_.end(); ++it)
      if (it->first == v) {
        it->second += k;
        if (it->second == 0) terms_.erase(it);
        return;
      }
    terms_.push_back({v, k});
  }
  int64_t c_ = 0;
  std::vector<std::pair<std::string, int64_t>> terms_;
};

// `pointer + index`, or the pointer alone at index 0.
inline std::string Offset(const std::string& pointer, const Ix& index) {
  return index.is_constant() && index.constant() == 0 ? pointer : pointer + " + " + index.str();
}

// The index of variables `vars` with `strides`: vars[0] * strides[0] + ...
inline Ix IndexIx(const std::vector<std::string>& vars, const std::vector<int64_t>& strides) {
  Ix e;
  for (size_t k = 0; k < vars.size(); ++k) e = e + Ix::Var(vars[k]) * strides[k];
  return e;
}

// The index of indices `at` with `strides`: at[0] * strides[0] + ...
inline Ix IndexIx(const std::vector<Ix>& at, const std::vector<int64_t>& strides) {
  Ix e;
  for (size_t k = 0; k < at.size(); ++k) e = e + at[k] * strides[k];
  return e;
}

// A loop of `n` trips over variable `var` (of C type `type`), its body given the variable as an
// index: no loop when n is 1 (the body gets the constant 0), nothing when n is 0 or less.
inline void For(NodeContext& ctx, int64_t n, const std::string& var,
                const std::function<void(const Ix&)>& body, const char* type = "size_t") {
  if (n <= 0) return;
  if (n == 1) return body(Ix(0));
  ctx.Line(std::string("for (") + type + " " + var + " = 0; " + var + " < " + std::to_string(n) +
           "; ++" + var + ") {");
  ctx.Indent();
  body(Ix::Var(var));
  ctx.Dedent();
  ctx.Line("}");
}

// A possibly negative axis made non-negative; false when it is out of range for `rank`.
inline bool NormAxis(int64_t* axis, size_t rank) {
  int64_t r = static_cast<int64_t>(rank);
  if (*axis < 0) *axis += r;
  return *axis >= 0 && *axis < r;
}

// dims split around `axis`: the product of the dims before it, its extent, and the product after.
struct AxisSplit {
  int64_t outer = 1, len = 1, inner = 1;
};
inline AxisSplit SplitAround(const Dims& d, int64_t axis) {
  AxisSplit s;
  for (int64_t i = 0; i < axis; ++i) s.outer *= d[i];
  s.len = d.empty() ? 1 : d[axis];
  for (size_t i = axis + 1; i < d.size(); ++i) s.inner *= d[i];
  return s;
}

// Loops over `dims` with index variables <prefix>0, <prefix>1, ... (size_t); `body` gets their
// names and runs at the innermost depth. An empty `dims` runs the body once, with no loop.
inline void Nest(NodeContext& ctx, const Dims& dims, const std::string& prefix,
                 const std::function<void(const std::vector<std::string>&)>& body) {
  std::vector<std::string> idx;
  for (size_t d = 0; d < dims.size(); ++d) {
    std::string i = prefix + std::to_string(d);
    ctx.Line("for (size_t " + i + " = 0; " + i + " < " + std::to_string(dims[d]) + "; ++" + i +
             ") {");
    ctx.Indent();
    idx.push_back(i);
  }
  body(idx);
  for (size_t d = 0; d < dims.size(); ++d) {
    ctx.Dedent();
    ctx.Line("}");
  }
}

// One loop of `n` iterations over variable `var`; nothing when n is 0 (a loop that never runs
// would draw -Wtype-limits).
inline void Loop(NodeContext& ctx, int64_t n, const std::string& var,
                 const std::function<void()>& body) {
  if (n <= 0) return;
  ctx.Line("for (size_t " + var + " = 0; " + var + " < " + std::to_string(n) + "; ++" + var +
           ") {");
  ctx.Indent();
  body();
  ctx.Dedent();
  ctx.Line("}");
}

// Axes of one iteration space walked by several operands (strides[k][axis] for operand k):
// extent-1 axes are dropped and an axis is merged into the one before it when every operand
// walks the pair as one run.
struct MergedAxes {
  Dims dims;
  std::vector<std::vector<int64_t>> strides;  // per operand, per merged axis
};
inline MergedAxes MergeAxes(const Dims& dims, const std::vector<std::vector<int64_t>>& strides) {
  MergedAxes m;
  m.strides.resize(strides.size());
  for (size_t a = 0; a < dims.size(); ++a) {
    if (dims[a] == 1) continue;
    bool merge = !m.dims.empty();
    for (size_t k = 0; merge && k < strides.size(); ++k)
      merge = m.strides[k].back() == strides[k][a] * dims[a];
    if (merge) {
      m.dims.back() *= dims[a];
      for (size_t k = 0; k < strides.size(); ++k) m.strides[k].back() = strides[k][a];
    } else {
      m.dims.push_back(dims[a]);
      for (size_t k = 0; k < strides.size(); ++k) m.strides[k].push_back(strides[k][a]);
    }
  }
  return m;
}

// The strides of `src` broadcast (numpy-style, right-aligned) over `to`: 0 on broadcast axes.
inline std::vector<int64_t> BroadcastStridesOver(const Dims& src, const Dims& to) {
  std::vector<int64_t> s(to.size(), 0);
  int64_t st = 1;
  for (size_t a = 0; a < src.size() && a < to.size(); ++a) {
    size_t axis = to.size() - 1 - a, sa = src.size() - 1 - a;
    s[axis] = src[sa] == 1 ? 0 : st;
    st *= src[sa];
  }
  return s;
}

// The C expression of the element of `src` (broadcast over `to`) read at the flat row-major
// index `var` of `to`.
inline std::string BroadcastIndex(const std::string& var, const Dims& src, const Dims& to) {
  std::vector<int64_t> bs = BroadcastStridesOver(src, to);
  if (NumElements(src) == NumElements(to)) return var;
  MergedAxes m = MergeAxes(to, {bs, Strides(to)});
  std::string e;
  for (size_t a = 0; a < m.dims.size(); ++a) {
    int64_t s = m.strides[0][a], unit = m.strides[1][a];
    if (s == 0) continue;
    std::string t = var;
    if (unit != 1) t = "(" + t + " / " + std::to_string(unit) + ")";
    if (a != 0) t = "(" + t + " % " + std::to_string(m.dims[a]) + ")";
    if (s != 1) t += " * " + std::to_string(s);
    e += (e.empty() ? "" : " + ") + t;
  }
  return e.empty() ? "0" : e;
}

}  // namespace kiln::codegen::c
