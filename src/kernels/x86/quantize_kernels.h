// Element kernels of the quantization ops, vectorized with run-time ISA dispatch (AVX-512BW,
// AVX2, a baseline build): bit for bit the ONNX reference's arithmetic for the float32 and 8- or
// 16-bit cases, which the ops take here and leave the other types to their general loops.
// Kernels only: no framework types beyond DType.
#pragma once

#include <cstdint>

#include "ir/tensor.h"
#include "kernels/reference/reference_kernels.h"

namespace kiln::ops {

// The integer types these kernels write and read: int8, uint8, int16, uint16.
bool IsSmallQuantType(DType t);

// y = saturate(round_half_even(x / scale) + zp) into y_type's range, the division in float32;
// NaN gives zp. y_type: IsSmallQuantType.
void QuantizeF32(const float* x, int64_t n, float scale, int32_t zp, DType y_type, void* y);

// The smallest and largest of 0 and the n values of x (NaN skipped); whether x holds a NaN.
void MinMaxF32(const float* x, int64_t n, float* lo, float* hi, bool* has_nan);

// y = (x - zp) * scale in float32. x_type: IsSmallQuantType.
void DequantizeToF32(const void* x, DType x_type, int64_t n, int32_t zp, float scale, float* y);

// y[i] = round_half_even(acc[i] * mul[i % mul_count] + zp) computed in double, then saturated
// into y_type's range or (wrap) reduced modulo its size; mul_count is 1 or n (a multiplier per
// column of a row). y_type: int8 or uint8. False (nothing written) where a result might leave
// int32 (a |mul| >= 0.5 or not finite): the caller's general loop takes those.
bool RequantizeInt32(const int32_t* acc, int64_t n, const double* mul, int64_t mul_count,
                     int32_t zp, bool wrap, DType y_type, void* y);

// y[i] = the fixed-point requantization of acc[i] (kernels/reference/requant.c's
// kiln_requant_fixed, as the generated C computes it) by mult[i] and shift[i] where per_element,
// else by mult[0] and shift[0], plus zp, saturated to y_type (int8 or uint8).
void RequantizeFixed(const int32_t* acc, int64_t n, const int32_t* mult, const int32_t* shift,
                     bool per_element, int32_t zp, DType y_type, void* y);

// y[i] = kernels/reference/qadd.c's kiln_qadd(a[i], b[i], &p): n values of A and B, int8 where
// is_signed, else uint8; y's type is p's range's.
void QAdd(const void* a, const void* b, bool is_signed, int64_t n, const kiln_qadd_params& p,
          void* y);

// sums[r] = sum of the k 8-bit values of row r (rows `lda` bytes apart), int8 when `is_signed`.
void RowSums8(const void* a, bool is_signed, int64_t rows, int64_t k, int64_t lda, int32_t* sums);

// The zero-point terms of an integer product, modulo 2^32 as int32 arithmetic wraps, for rows
// [0, rows) of acc [rows, n]: acc[r][j] += bias[j] - col_zp[j] * row_u[r] - row_zp[r] * col_sum[j]
// (bias may be null). With A' = A - a_zp and B' = B - b_zp over k terms, the raw sum of A B plus
// these terms is the sum of A' B' when row_u[r] = sum_k A[r] - k a_zp[r].
void AddZeroPointTerms(int32_t* acc, int64_t rows, int64_t n, const int32_t* row_u,
                       const int32_t* row_zp, const int32_t* col_zp, const int32_t* col_sum,
                       const int32_t* bias);

}  // namespace kiln::ops
