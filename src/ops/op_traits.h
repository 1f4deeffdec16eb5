// What the planner, the layout choice, the executor and the backends need to know about an op
// beyond its shape rule, declared once per op: in op_traits.cc, or with the op's formula in
// ops/unary_ops.h. The planner reads it without linking the kernels.
#pragma once

#include <string>
#include <vector>

namespace kiln::ops {

enum OpTrait : unsigned {
  // y[i] = f(x[i]) over input 0 (other inputs, if any, are scalars such as Clip's bounds): the
  // kernel runs on any layout, and in place (it reads element i before writing element i).
  kUnaryElementwise = 1u << 0,
  // y = f(a, b) element by element with broadcasting: in place over an operand of y's dims, and
  // on any layout when every operand has y's dims or one element.
  kBinaryElementwise = 1u << 1,
  // Sum / Max / Min / Mean: any layout as the binary ones, never in place (the kernel copies its
  // first operand into the output before reading the others).
  kVariadicElementwise = 1u << 2,
  // Every path of the kernel writes every element of every output, so the executor need not
  // clear them first; its shape rule reads no input values.
  kWritesWholeOutputs = 1u << 3,
  // --target cuda emits it as a device expression: the C backend's (codegen/c UnaryExpr).
  kCudaUnary = 1u << 4,
  // The rows of axis 0 are independent whatever the attributes, so a batch may run in tiles
  // (runtime/batch_tiling.h); shape checks catch a node that moves or reduces axis 0. Every
  // element-wise op has it too.
  kRowwise = 1u << 5,
  // The outputs depend on the inputs' dims only, never their values (Shape, Size): known at
  // compile time wherever the dims are, and never a carrier of sample data.
  kReadsDimsOnly = 1u << 6,
  // Output 0 is input 0's bytes under other dims (Identity, Reshape, Flatten, Squeeze,
  // Unsqueeze): the planner makes it an alias of its input, a backend a copy where it cannot.
  kView = 1u << 7,
  // The op reads or writes STRING tensors (their elements are std::string, not bytes); the
  // registry refuses strings to every other op with one error (OpRegistry::Register).
  kTakesStrings = 1u << 8,
  // Every output element is a copy of an input element, chosen by the other inputs and the
  // attributes (Gather, Concat, Transpose, Where...): the registry runs it on strings through
  // int64 stand-ins for their elements (OpRegistry::Register).
  kMovesElements = 1u << 9,
};

// The element types an op accepts, as groups (ops::Dispatch reads them).
enum DispatchGroup : unsigned {
  kFloatTypes = 1,        // float, double, float16, bfloat16
  kSignedIntTypes = 2,    // int8..int64
  kUnsignedIntTypes = 4,  // uint8..uint64
  kBoolType = 8,
  kIntTypes = kSignedIntTypes | kUnsignedIntTypes,
  kNumericTypes = kFloatTypes | kIntTypes,
  kAllTypes = kNumericTypes | kBoolType,
  // Strings, for the few kernels that take them (kTakesStrings); Dispatch never picks them.
  kStringType = 16,
};

// The traits of (domain, op_type); "" and "ai.onnx" are the same domain. 0 for unknown ops.
unsigned OpTraits(const std::string& domain, const std::string& op_type);
inline bool HasTrait(const std::string& domain, const std::string& op_type, OpTrait t) {
  return (OpTraits(domain, op_type) & t) != 0;
}
// The output may take the bytes of an input with its dims and type that dies at this node.
inline bool RunsInPlace(const std::string& domain, const std::string& op_type) {
  return (OpTraits(domain, op_type) & (kUnaryElementwise | kBinaryElementwise)) != 0;
}
// Rows of axis 0 pass through independently (kRowwise, or element-wise).
inline bool IsRowwise(const std::string& domain, const std::string& op_type) {
  return (OpTraits(domain, op_type) &
          (kRowwise | kUnaryElementwise | kBinaryElementwise | kVariadicElementwise)) != 0;
}
inline bool ReadsDimsOnly(const std::string& domain, const std::string& op_type) {
  return HasTrait(domain, op_type, kReadsDimsOnly);
}
// Every op with trait t, "domain:op" outside the default domain; for backends building tables.
std::vector<std::string> OpsWithTrait(OpTrait t);

}  // namespace kiln::ops
