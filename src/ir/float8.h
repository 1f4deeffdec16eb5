// The four 8-bit floats of ONNX (FLOAT8E4M3FN, FLOAT8E4M3FNUZ, FLOAT8E5M2, FLOAT8E5M2FNUZ): one
// byte each, converted to and from wider floats as the ONNX Cast operator defines it.
//
//   E4M3FN    bias 7,  no infinities, NaN S.1111.111, max 448
//   E4M3FNUZ  bias 8,  no infinities, no -0, NaN 0x80, max 240
//   E5M2      bias 15, IEEE-like: infinities S.11111.00, NaN S.11111.xx, max 57344
//   E5M2FNUZ  bias 16, no infinities, no -0, NaN 0x80, max 57344
//
// To 8 bits: round to nearest, ties to even. A finite value that rounds past the largest finite
// one becomes +-max with `saturate` (Cast's default); without it, +-inf for E5M2 and NaN for the
// others; infinities likewise. NaN stays NaN.
#pragma once

#include <cstdint>

#include "ir/dtype.h"
#include "ir/tensor.h"

namespace kiln {

inline bool IsFloat8DType(DType t) {
  return t == DType::kFloat8E4M3FN || t == DType::kFloat8E4M3FNUZ || t == DType::kFloat8E5M2 ||
         t == DType::kFloat8E5M2FNUZ;
}

// `t` must be one of the four (IsFloat8DType).
float Float8ToFloat(DType t, uint8_t bits);
uint8_t FloatToFloat8(DType t, double x, bool saturate);
// The largest finite value of the kind.
float Float8Max(DType t);
// An 8-bit float tensor's values as float32 (exact), for what has no 8-bit float type (NumPy).
Tensor Float8ToFloat32(const Tensor& t);

}  // namespace kiln
