// The narrow floats of ONNX, one code per element: the four 8-bit floats (FLOAT8E4M3FN,
// FLOAT8E4M3FNUZ, FLOAT8E5M2, FLOAT8E5M2FNUZ) and the 4-bit FLOAT4E2M1 (held one code per byte
// in memory, ir/subbyte.h), converted to and from wider floats as the ONNX Cast operator defines.
//
//   E4M3FN    bias 7,  no infinities, NaN S.1111.111, max 448
//   E4M3FNUZ  bias 8,  no infinities, no -0, NaN 0x80, max 240
//   E5M2      bias 15, IEEE-like: infinities S.11111.00, NaN S.11111.xx, max 57344
//   E5M2FNUZ  bias 16, no infinities, no -0, NaN 0x80, max 57344
//   E2M1      bias 1,  no infinities, no NaN, max 6
//
// To the narrow type: round to nearest, ties to even. A finite value that rounds past the largest
// finite one becomes +-max with `saturate` (Cast's default); without it, +-inf for E5M2 and NaN
// for the others; infinities likewise (E2M1, which has neither, always saturates). NaN stays NaN
// (E2M1, which has none: -0, as the ONNX reference gives).
//
// FLOAT8E8M0 (the OCP MX scale type) is an exponent alone: code e is 2^(e - 127), 0xFF is NaN;
// no sign, no zero, no infinity. To it, |x|'s float32 exponent, rounded by Cast's round_mode:
// up (the default: any mantissa bit rounds up), down, or nearest (ties to an even exponent). Past
// 2^127 saturates to 0xFE, else NaN; 0 and values below 2^-127 go to code 0 (2^-127) except with
// round up.
#pragma once

#include <cstdint>

#include "ir/dtype.h"
#include "ir/tensor.h"

namespace kiln {

inline bool IsFloat8DType(DType t) {
  return t == DType::kFloat8E4M3FN || t == DType::kFloat8E4M3FNUZ || t == DType::kFloat8E5M2 ||
         t == DType::kFloat8E5M2FNUZ;
}
inline bool IsSmallFloatDType(DType t) {
  return IsFloat8DType(t) || t == DType::kFloat4E2M1 || t == DType::kFloat8E8M0;
}

// How a value lands on FLOAT8E8M0's powers of two (Cast's round_mode); the other kinds round to
// nearest, ties to even, whatever it says.
enum class E8M0Rounding { kUp, kDown, kNearest };

// `t` must be one of the six (IsSmallFloatDType).
float SmallFloatToFloat(DType t, uint8_t bits);
uint8_t FloatToSmallFloat(DType t, double x, bool saturate, E8M0Rounding e8m0 = E8M0Rounding::kUp);
// The largest finite value of the kind.
float SmallFloatMax(DType t);
// A narrow float tensor's values as float32 (exact), for what has no such type (NumPy).
Tensor SmallFloatToFloat32(const Tensor& t);

}  // namespace kiln
