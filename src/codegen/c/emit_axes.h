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
