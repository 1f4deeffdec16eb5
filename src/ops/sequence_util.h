// Helpers shared by the sequence, optional and control-flow ops (sequence.cc, control_flow.cc):
// building sequence/optional types for infer, and handing values to outputs safely.
#pragma once

#include <cstring>
#include <memory>

#include "ops/common.h"

namespace kiln::ops {

// The element dtype of a (possibly nested) sequence or optional type; the dtype of a tensor type.
inline DType ElemDType(const ir::TypeInfo& t) {
  if (t.kind == ir::TypeInfo::Kind::kTensor) return t.dtype;
  if (t.elem) {
    DType d = ElemDType(*t.elem);
    if (d != DType::kUndefined) return d;
  }
  return t.dtype;
}

// A sequence type whose elements have type `elem`.
inline ir::TypeInfo SequenceType(const ir::TypeInfo& elem) {
  ir::TypeInfo t;
  t.kind = ir::TypeInfo::Kind::kSequence;
  t.dtype = ElemDType(elem);
  t.elem = std::make_shared<ir::TypeInfo>(elem);
  return t;
}

// A tensor type of known dtype and unknown shape.
inline ir::TypeInfo UnknownTensorType(DType dt) {
  ir::TypeInfo t;
  t.dtype = dt;
  return t;
}

inline ir::TypeInfo OptionalType(const ir::TypeInfo& elem) {
  ir::TypeInfo t;
  t.kind = ir::TypeInfo::Kind::kOptional;
  t.dtype = ElemDType(elem);
  t.elem = std::make_shared<ir::TypeInfo>(elem);
  return t;
}

// A value that stays valid after the executor recycles the arena: tensors that are plain arena
// views are copied; everything else already owns (or shares immutable) bytes.
inline Tensor Owned(const Tensor& t) { return t.owns_or_keeps_alive() ? t : t.Clone(); }

// Hands `v` to output i: copies into the executor's buffer when one with the same dtype and dims
// was allocated (it may live in the arena), otherwise replaces the output with an owned value.
inline void SetOutputValue(ComputeContext& ctx, int i, const Tensor& v) {
  Tensor& out = ctx.output(i);
  if (v.kind() == Tensor::Kind::kTensor && out.kind() == Tensor::Kind::kTensor && out.defined() &&
      out.dtype() == v.dtype() && out.dims() == v.dims() && out.raw()) {
    if (out.raw() != v.raw() && v.nbytes() > 0) std::memcpy(out.raw(), v.raw(), v.nbytes());
    return;
  }
  out = Owned(v);
}

// Declares the output type for a runtime value that infer already knows (at run time).
inline ir::TypeInfo TypeForOutput(const Tensor& v) { return ir::TypeInfo::Of(v); }

// Reads a scalar (or one-element) integer tensor; false when it is not one.
inline bool ReadScalarInt(const Tensor& t, int64_t* v) {
  if (t.kind() != Tensor::Kind::kTensor || t.size() != 1 || t.rank() > 1) return false;
  if (!IsSignedIntDType(t.dtype()) && !IsUnsignedIntDType(t.dtype()) && t.dtype() != DType::kBool)
    return false;
  *v = t.GetInt(0);
  return true;
}

}  // namespace kiln::ops
