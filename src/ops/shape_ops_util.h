// Byte-moving helpers shared by the shape and indexing families. These ops only move elements,
// so they work on element sizes (1/2/4/8 bytes) rather than on every dtype: one instantiation
// per size keeps compile time small and covers bool, the 16-bit floats and everything else.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "kernels/x86/strided_copy.h"
#include "ops/common.h"

namespace kiln::ops::moves {

// Reads an integer index tensor element (int32/int64 fast, any integer dtype otherwise).
inline int64_t IndexAt(const Tensor& t, int64_t i) {
  if (t.dtype() == DType::kInt64) return t.data<int64_t>()[i];
  if (t.dtype() == DType::kInt32) return t.data<int32_t>()[i];
  return t.GetInt(i);
}

inline bool IsIndexDType(DType t) { return t == DType::kInt32 || t == DType::kInt64; }

// Normalizes index `v` against an axis of size `dim`: negative values count from the end.
// False when out of range.
inline bool WrapIndex(int64_t& v, int64_t dim) {
  if (v < -dim || v >= dim) return false;
  if (v < 0) v += dim;
  return true;
}

inline std::string Str(int64_t v) { return std::to_string(v); }

}  // namespace kiln::ops::moves
