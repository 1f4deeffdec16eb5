// The unary element-wise ops y = f(x) that are a formula, each declared once, here. Every
// backend reads this one definition:
//   - the host executor runs operator() with V = the compute type (ops/activation.cc), and the
//     float32 vector kernel Float32() where the op has one;
//   - the generated C and CUDA run operator() with V = SymExpr and print the formula
//     (codegen/c/emit_elementwise.cc);
//   - the traits table (ops/op_traits.cc) takes kTraits: in-place planning, channels-last, CUDA.
// An op is a struct with kName, kTypes (the dtypes it accepts, ops::DispatchGroup), kTraits, a
// constructor from the node (its attributes; the default constructor gives ONNX's defaults), and
// the formula written with V(...) literals and the functions of ops/formula.h. Optional: Float32(x,
// y, n), kOtherDomain (a second domain it is registered in) and Invalid(node) (a message for
// attribute values the spec forbids). Add the struct to UnaryFormulaOps at the end, then its gym
// OpCount position (gym/op_count_order.cc). docs/adding_an_op.md walks through it.
#pragma once

#include <cstdint>
#include <string>

#include "ir/graph.h"
#include "kernels/x86/vector_math.h"
#include "ops/formula.h"
#include "ops/op_traits.h"

namespace kiln::ops::unary {

// --- Activations. --------------------------------------------------------------------------------

constexpr unsigned U = kUnaryElementwise, W = kWritesWholeOutputs, C = kCudaUnary;

struct Relu {
  static constexpr const char* kName = "Relu";
  static constexpr unsigned kTypes = kNumericTypes, kTraits = U | W | C;
  Relu() = default;
  explicit Relu(const ir::Node&) {}
  template <class V>
  V operator()(V x) const {
    return Select(x > V(0), x, V(0));
  }
  void Float32(const float* x, float* y, int64_t n) const { ReluF32(x, y, n); }
};

struct LeakyRelu {
  static constexpr const char* kName = "LeakyRelu";
  static constexpr unsigned kTypes = kFloatTypes, kTraits = U | W | C;
  float alpha = 0.01f;
  LeakyRelu() = default;
  explicit LeakyRelu(const ir::Node& n) { alpha = n.attr_float("alpha", alpha); }
  template <class V>
  V operator()(V x) const {
    return Select(x < V(0), V(alpha) * x, x);
  }
  void Float32(const float* x, float* y, int64_t n) const { LeakyReluF32(x, y, n, alpha); }
};

struct Elu {
  static constexpr const char* kName = "Elu";
  static constexpr unsigned kTypes = kFloatTypes, kTraits = U | C;
  float alpha = 1.0f;
  Elu() = default;
  explicit Elu(const ir::Node& n) { alpha = n.attr_float("alpha", alpha); }
  template <class V>
  V operator()(V x) const {
    return Select(
        x < V(0), [&] { return V(alpha) * Expm1(x); }, x);
  }
  void Float32(const float* x, float* y, int64_t n) const { EluF32(x, y, n, alpha); }
};

struct Selu {
  static constexpr const char* kName = "Selu";
  static constexpr unsigned kTypes = kFloatTypes, kTraits = U | C;
  float alpha = 1.67326319217681884765625f, gamma = 1.05070102214813232421875f;
  Selu() = default;
  explicit Selu(const ir::Node& n) {
    alpha = n.attr_float("alpha", alpha);
    gamma = n.attr_float("gamma", gamma);
  }
  template <class V>
  V operator()(V x) const {
    return Select(x > V(0), V(gamma) * x, [&] { return V(gamma) * V(alpha) * Expm1(x); });
  }
  void Float32(const float* x, float* y, int64_t n) const { SeluF32(x, y, n, alpha, gamma); }
};

struct Celu {
  static constexpr const char* kName = "Celu";
  static constexpr unsigned kTypes = kFloatTypes, kTraits = U | C;
  float alpha = 1.0f;
  Celu() = default;
  explicit Celu(const ir::Node& n) { alpha = n.attr_float("alpha", alpha); }
  template <class V>
  V operator()(V x) const {
    return Select(x > V(0), x, [&] { return V(alpha) * Expm1(x / V(alpha)); });
  }
  void Float32(const float* x, float* y, int64_t n) const { CeluF32(x, y, n, alpha); }
};

struct SigmoidOp {
  static constexpr const char* kName = "Sigmoid";
  static constexpr unsigned kTypes = kFloatTypes, kTraits = U | W | C;
  SigmoidOp() = default;
  explicit SigmoidOp(const ir::Node&) {}
  template <class V>
  V operator()(V x) const {
    return Sigmoid(x);
  }
  void Float32(const float* x, float* y, int64_t n) const { SigmoidF32(x, y, n); }
};

struct HardSigmoid {
  static constexpr const char* kName = "HardSigmoid";
  static constexpr unsigned kTypes = kFloatTypes, kTraits = U | C;
  float alpha = 0.2f, beta = 0.5f;
  HardSigmoid() = default;
  explicit HardSigmoid(const ir::Node& n) {
    alpha = n.attr_float("alpha", alpha);
    beta = n.attr_float("beta", beta);
  }
  template <class V>
  V operator()(V x) const {
    return Max(V(0), Min(V(1), V(alpha) * x + V(beta)));
  }
  void Float32(const float* x, float* y, int64_t n) const { HardSigmoidF32(x, y, n, alpha, beta); }
};

struct HardSwish {
  static constexpr const char* kName = "HardSwish";
  static constexpr unsigned kTypes = kFloatTypes, kTraits = U | C;
  HardSwish() = default;
  explicit HardSwish(const ir::Node&) {}
  template <class V>
  V operator()(V x) const {
    return x * Max(V(0), Min(V(1), x / V(6) + V(0.5)));
  }
  void Float32(const float* x, float* y, int64_t n) const { HardSwishF32(x, y, n); }
};

struct SoftplusOp {
  static constexpr const char* kName = "Softplus";
  static constexpr unsigned kTypes = kFloatTypes, kTraits = U | C;
  SoftplusOp() = default;
  explicit SoftplusOp(const ir::Node&) {}
  template <class V>
  V operator()(V x) const {
    return Softplus(x);
  }
  void Float32(const float* x, float* y, int64_t n) const { SoftplusF32(x, y, n); }
};

struct Softsign {
  static constexpr const char* kName = "Softsign";
  static constexpr unsigned kTypes = kFloatTypes, kTraits = U | C;
  Softsign() = default;
  explicit Softsign(const ir::Node&) {}
  template <class V>
  V operator()(V x) const {
    return x / (V(1) + Fabs(x));
  }
};

struct ThresholdedRelu {
  static constexpr const char* kName = "ThresholdedRelu";
  static constexpr unsigned kTypes = kFloatTypes, kTraits = U;
  float alpha = 1.0f;
  ThresholdedRelu() = default;
  explicit ThresholdedRelu(const ir::Node& n) { alpha = n.attr_float("alpha", alpha); }
  template <class V>
  V operator()(V x) const {
    return Select(x > V(alpha), x, V(0));
  }
};

struct Mish {
  static constexpr const char* kName = "Mish";
  static constexpr unsigned kTypes = kFloatTypes, kTraits = U | C;
  Mish() = default;
  explicit Mish(const ir::Node&) {}
  template <class V>
  V operator()(V x) const {
    return x * Tanh(Softplus(x));
  }
  void Float32(const float* x, float* y, int64_t n) const { MishF32(x, y, n); }
};

struct Swish {
  static constexpr const char* kName = "Swish";
  static constexpr unsigned kTypes = kFloatTypes, kTraits = U | C;
  float alpha = 1.0f;
  Swish() = default;
  explicit Swish(const ir::Node& n) { alpha = n.attr_float("alpha", alpha); }
  template <class V>
  V operator()(V x) const {
    return x * Sigmoid(V(alpha) * x);
  }
  void Float32(const float* x, float* y, int64_t n) const { SwishF32(x, y, n, alpha); }
};

// Also com.microsoft Gelu (ONNX Runtime's contrib op: always the erf form, no attribute), which
// passes/fuse_gelu writes for models before opset 20.
struct Gelu {
  static constexpr const char* kName = "Gelu";
  static constexpr const char* kOtherDomain = "com.microsoft";
  static constexpr unsigned kTypes = kFloatTypes, kTraits = U | C;
  bool tanh_approx = false;
  Gelu() = default;
  explicit Gelu(const ir::Node& n) : tanh_approx(n.attr_string("approximate", "none") == "tanh") {}
  static std::string Invalid(const ir::Node& n) {
    std::string a = n.attr_string("approximate", "none");
    if (a == "none" || a == "tanh") return "";
    return "approximate must be \"none\" or \"tanh\", got \"" + a + "\"";
  }
  template <class V>
  V operator()(V x) const {
    if (tanh_approx)
      return V(0.5) * x * (V(1) + Tanh(V(0.79788456080286535588) * (x + V(0.044715) * x * x * x)));
    return V(0.5) * x * (V(1) + Erf(x * V(0.70710678118654752440)));
  }
  void Float32(const float* x, float* y, int64_t n) const { GeluF32(x, y, n, tanh_approx); }
};

// --- Math functions: float types, no attributes. -------------------------------------------------

struct Reciprocal {
  static constexpr const char* kName = "Reciprocal";
  static constexpr unsigned kTypes = kFloatTypes, kTraits = U | C;
  Reciprocal() = default;
  explicit Reciprocal(const ir::Node&) {}
  template <class V>
  V operator()(V x) const {
    return V(1) / x;
  }
};

#define KILN_MATH_OP_BODY(Name, fn, traits)       \
  static constexpr const char* kName = #Name;     \
  static constexpr unsigned kTypes = kFloatTypes; \
  static constexpr unsigned kTraits = traits;     \
  Name##Op() = default;                           \
  explicit Name##Op(const ir::Node&) {}           \
  template <class V>                              \
  V operator()(V x) const {                       \
    return fn(x);                                 \
  }
#define KILN_MATH_OP(Name, fn, traits)  \
  struct Name##Op {                     \
    KILN_MATH_OP_BODY(Name, fn, traits) \
  };
// With a float32 vector kernel fn(x, y, n) (kernels/x86/vector_math.h).
#define KILN_MATH_OP_F32(Name, fn, traits, kernel)                               \
  struct Name##Op {                                                              \
    KILN_MATH_OP_BODY(Name, fn, traits)                                          \
    void Float32(const float* x, float* y, int64_t n) const { kernel(x, y, n); } \
  };
KILN_MATH_OP_F32(Floor, Floor, U | C, FloorF32)
KILN_MATH_OP_F32(Ceil, Ceil, U | C, CeilF32)
KILN_MATH_OP_F32(Round, Nearbyint, U, RoundF32)
KILN_MATH_OP_F32(Sqrt, Sqrt, U | C, SqrtF32)
KILN_MATH_OP_F32(Exp, Exp, U | C, ExpF32)
KILN_MATH_OP_F32(Log, Log, U | C, LogF32)
KILN_MATH_OP_F32(Sin, Sin, U | C, SinF32)
KILN_MATH_OP_F32(Cos, Cos, U | C, CosF32)
KILN_MATH_OP_F32(Tan, Tan, U | C, TanF32)
KILN_MATH_OP_F32(Asin, Asin, U, AsinF32)
KILN_MATH_OP_F32(Acos, Acos, U, AcosF32)
KILN_MATH_OP_F32(Atan, Atan, U | C, AtanF32)
KILN_MATH_OP_F32(Sinh, Sinh, U, SinhF32)
KILN_MATH_OP_F32(Cosh, Cosh, U, CoshF32)
KILN_MATH_OP_F32(Tanh, Tanh, U | C, TanhF32)
KILN_MATH_OP(Asinh, Asinh, U)
KILN_MATH_OP(Acosh, Acosh, U)
KILN_MATH_OP(Atanh, Atanh, U)
KILN_MATH_OP_F32(Erf, Erf, U | C, ErfF32)
#undef KILN_MATH_OP_F32
#undef KILN_MATH_OP
#undef KILN_MATH_OP_BODY

// --- The list every backend iterates. ------------------------------------------------------------

template <class... Ops>
struct OpList {};
using UnaryFormulaOps =
    OpList<Relu, LeakyRelu, Elu, Selu, Celu, SigmoidOp, HardSigmoid, HardSwish, SoftplusOp,
           Softsign, ThresholdedRelu, Mish, Swish, Gelu, Reciprocal, FloorOp, CeilOp, RoundOp,
           SqrtOp, ExpOp, LogOp, SinOp, CosOp, TanOp, AsinOp, AcosOp, AtanOp, SinhOp, CoshOp,
           TanhOp, AsinhOp, AcoshOp, AtanhOp, ErfOp>;

// The optional members of an op.
template <class Op>
concept HasFloat32Kernel = requires(const Op& op, const float* x, float* y) {
  op.Float32(x, y, int64_t{0});
};
// op.Float32(x, y, n) where the op has it. (A function template, so that the call is discarded
// for the others: clang 14 instantiates it in a discarded branch inside a lambda.)
template <class Op>
void RunFloat32Kernel(const Op& op, const float* x, float* y, int64_t n) {
  if constexpr (HasFloat32Kernel<Op>) op.Float32(x, y, n);
}
template <class Op>
concept HasAttributeCheck = requires(const ir::Node& node) {
  Op::Invalid(node);
};
template <class Op>
concept HasOtherDomain = requires {
  Op::kOtherDomain;
};

// Calls fn.template operator()<Op>() for every op of UnaryFormulaOps.
template <class F>
void ForEachUnaryFormulaOp(F&& fn) {
  [&]<class... Ops>(OpList<Ops...>) { (fn.template operator()<Ops>(), ...); }(UnaryFormulaOps{});
}

}  // namespace kiln::ops::unary
