// A scalar formula as a tree, built by running an op's formula (ops/unary_ops.h) with SymExpr in
// place of a number; the code generators print it (codegen/c RenderC), so the host and the
// generated code compute one definition. All values have the compute type the printer is given;
// comparisons are booleans that only Select reads.
#pragma once

#include <memory>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

namespace kiln::ops {

class SymExpr {
 public:
  enum class Kind { kVar, kLiteral, kNeg, kBinary, kCall, kSelect };

  // A literal, printed in the compute type: V(0), V(alpha) in a formula.
  template <class N>
  requires std::is_arithmetic_v<N> SymExpr(N value)  // NOLINT: implicit, as a number converts to V
      : node_(std::make_shared<Node>(Node{Kind::kLiteral, "", static_cast<double>(value), {}})) {}

  static SymExpr Var(std::string name) { return Make(Kind::kVar, std::move(name), {}); }
  // fn(args...) with fn the C math function's double name ("exp"); the printer picks the type's.
  static SymExpr Call(std::string fn, std::vector<SymExpr> args) {
    return Make(Kind::kCall, std::move(fn), std::move(args));
  }
  // a op b for op one of + - * / < <= > >= == !=. a * 1 and a / 1 are a (exact in IEEE
  // arithmetic); a + 0 is not folded, as -0 + 0 is +0.
  static SymExpr Binary(const std::string& op, SymExpr a, SymExpr b) {
    if ((op == "*" || op == "/") && b.IsLiteral(1)) return a;
    if (op == "*" && a.IsLiteral(1)) return b;
    return Make(Kind::kBinary, op, {std::move(a), std::move(b)});
  }
  static SymExpr Neg(SymExpr a) {
    if (a.kind() == Kind::kLiteral) return SymExpr(-a.value());
    return Make(Kind::kNeg, "-", {std::move(a)});
  }
  static SymExpr Select(SymExpr cond, SymExpr a, SymExpr b) {
    return Make(Kind::kSelect, "", {std::move(cond), std::move(a), std::move(b)});
  }

  Kind kind() const { return node_->kind; }
  // The variable's name, the operator or the function name.
  const std::string& text() const { return node_->text; }
  double value() const { return node_->value; }
  const std::vector<SymExpr>& args() const { return node_->args; }
  bool IsLiteral(double v) const { return kind() == Kind::kLiteral && value() == v; }

 private:
  struct Node {
    Kind kind;
    std::string text;
    double value = 0;
    std::vector<SymExpr> args;
  };
  explicit SymExpr(std::shared_ptr<const Node> node) : node_(std::move(node)) {}
  static SymExpr Make(Kind kind, std::string text, std::vector<SymExpr> args) {
    return SymExpr(std::make_shared<Node>(Node{kind, std::move(text), 0, std::move(args)}));
  }

  std::shared_ptr<const Node> node_;
};

inline SymExpr operator-(const SymExpr& a) { return SymExpr::Neg(a); }
#define KILN_SYM_BINARY(op)                                        \
  inline SymExpr operator op(const SymExpr& a, const SymExpr& b) { \
    return SymExpr::Binary(#op, a, b);                             \
  }
KILN_SYM_BINARY(+)
KILN_SYM_BINARY(-)
KILN_SYM_BINARY(*)
KILN_SYM_BINARY(/)
KILN_SYM_BINARY(<)
KILN_SYM_BINARY(<=)
KILN_SYM_BINARY(>)
KILN_SYM_BINARY(>=)
KILN_SYM_BINARY(==)
KILN_SYM_BINARY(!=)
#undef KILN_SYM_BINARY

}  // namespace kiln::ops
