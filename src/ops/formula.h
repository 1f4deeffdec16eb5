// The vocabulary of formulas: functions over host numbers and over SymExpr alike, so one
// definition of a scalar function (ops/unary_ops.h, the recurrent activations) is what the host
// computes and what the code generators print.
#pragma once

#include <cmath>
#include <type_traits>
#include <utility>

#include "ops/sym_expr.h"

namespace kiln::ops::unary {

// An operand of Select: a value, or a callable giving it (evaluated only when picked).
template <class A>
decltype(auto) SelectOperand(A&& a) {
  if constexpr (std::is_invocable_v<A>)
    return a();
  else
    return std::forward<A>(a);
}

// c ? a : b. On host numbers only the side picked is evaluated when it is given as a callable
// (Select(x > V(0), x, [&] { return Expm1(x); })), so a costly side costs nothing where it is not
// taken; on SymExpr both sides become the printed formula.
template <class A, class B>
auto Select(bool c, A&& a, B&& b) {
  using V = std::common_type_t<std::decay_t<decltype(SelectOperand(std::forward<A>(a)))>,
                               std::decay_t<decltype(SelectOperand(std::forward<B>(b)))>>;
  return c ? static_cast<V>(SelectOperand(std::forward<A>(a)))
           : static_cast<V>(SelectOperand(std::forward<B>(b)));
}
template <class A, class B>
SymExpr Select(const SymExpr& c, A&& a, B&& b) {
  return SymExpr::Select(c, SymExpr(SelectOperand(std::forward<A>(a))),
                         SymExpr(SelectOperand(std::forward<B>(b))));
}

#define KILN_FORMULA_FN(Name, fn)                                         \
  template <class V>                                                      \
  requires std::is_floating_point_v<V> V Name(V x) { return std::fn(x); } \
  inline SymExpr Name(const SymExpr& x) { return SymExpr::Call(#fn, {x}); }
KILN_FORMULA_FN(Exp, exp)
KILN_FORMULA_FN(Expm1, expm1)
KILN_FORMULA_FN(Log, log)
KILN_FORMULA_FN(Log1p, log1p)
KILN_FORMULA_FN(Fabs, fabs)
KILN_FORMULA_FN(Sqrt, sqrt)
KILN_FORMULA_FN(Floor, floor)
KILN_FORMULA_FN(Ceil, ceil)
// In the default rounding mode: half to even, as Round asks.
KILN_FORMULA_FN(Nearbyint, nearbyint)
KILN_FORMULA_FN(Sin, sin)
KILN_FORMULA_FN(Cos, cos)
KILN_FORMULA_FN(Tan, tan)
KILN_FORMULA_FN(Asin, asin)
KILN_FORMULA_FN(Acos, acos)
KILN_FORMULA_FN(Atan, atan)
KILN_FORMULA_FN(Sinh, sinh)
KILN_FORMULA_FN(Cosh, cosh)
KILN_FORMULA_FN(Tanh, tanh)
KILN_FORMULA_FN(Asinh, asinh)
KILN_FORMULA_FN(Acosh, acosh)
KILN_FORMULA_FN(Atanh, atanh)
KILN_FORMULA_FN(Erf, erf)
#undef KILN_FORMULA_FN

// C's fmax / fmin: a NaN operand gives the other one.
template <class V>
requires std::is_floating_point_v<V> V Max(V a, V b) { return std::fmax(a, b); }
template <class V>
requires std::is_floating_point_v<V> V Min(V a, V b) { return std::fmin(a, b); }
inline SymExpr Max(const SymExpr& a, const SymExpr& b) { return SymExpr::Call("fmax", {a, b}); }
inline SymExpr Min(const SymExpr& a, const SymExpr& b) { return SymExpr::Call("fmin", {a, b}); }

// 1 / (1 + exp(-x)), with exp of a non-positive argument so nothing overflows.
template <class V>
V Sigmoid(V x) {
  V e = Exp(-Fabs(x));
  return Select(x >= V(0), V(1) / (V(1) + e), e / (V(1) + e));
}
template <class V>
V Softplus(V x) {
  return Max(x, V(0)) + Log1p(Exp(-Fabs(x)));
}

}  // namespace kiln::ops::unary
