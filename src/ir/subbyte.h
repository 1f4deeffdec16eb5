// The sub-byte element types: UINT4, INT4, FLOAT4E2M1 (4 bits) and UINT2, INT2 (2 bits). Files
// (TensorProto) hold them packed, the lowest index in the lowest bits; kiln holds them one element
// per byte, the integers sign- (INT4, INT2) or zero-extended, FLOAT4E2M1 as its code
// (ir/small_float.h).
#pragma once

#include <cstdint>

#include "ir/dtype.h"

namespace kiln {

inline bool IsSubByteDType(DType t) {
  return t == DType::kUInt4 || t == DType::kInt4 || t == DType::kFloat4E2M1 || t == DType::kUInt2 ||
         t == DType::kInt2;
}
inline bool IsSubByteIntDType(DType t) { return IsSubByteDType(t) && t != DType::kFloat4E2M1; }
// Bits per element: 4 or 2.
inline int SubByteBits(DType t) { return t == DType::kUInt2 || t == DType::kInt2 ? 2 : 4; }
// The one-byte type a sub-byte type is held in: INT8 for INT4 / INT2, UINT8 for the others.
inline DType SubByteStorage(DType t) {
  return t == DType::kInt4 || t == DType::kInt2 ? DType::kInt8 : DType::kUInt8;
}
// Bytes of n packed elements.
inline int64_t PackedBytes(DType t, int64_t n) {
  const int per_byte = 8 / SubByteBits(t);
  return (n + per_byte - 1) / per_byte;
}
// Unpacks n elements of `packed` into one byte each.
void UnpackSubByte(DType t, const uint8_t* packed, int64_t n, uint8_t* out);
// Packs n elements held one per byte into PackedBytes(t, n) bytes (the rest of the last byte 0).
void PackSubByte(DType t, const uint8_t* held, int64_t n, uint8_t* packed);
// An integer wrapped into a sub-byte integer type's bits, as Cast wraps: two's complement for INT4
// and INT2.
int64_t WrapToSubByte(DType t, int64_t v);
// The range QuantizeLinear saturates to.
void SubByteIntRange(DType t, int64_t* lo, int64_t* hi);

}  // namespace kiln
