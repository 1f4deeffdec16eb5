// Element types, numbered as ONNX TensorProto.DataType so files and generated code agree.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace kiln {

enum class DType : int32_t {
  kUndefined = 0,
  kFloat32 = 1,
  kUInt8 = 2,
  kInt8 = 3,
  kUInt16 = 4,
  kInt16 = 5,
  kInt32 = 6,
  kInt64 = 7,
  kString = 8,
  kBool = 9,
  kFloat16 = 10,
  kFloat64 = 11,
  kUInt32 = 12,
  kUInt64 = 13,
  kComplex64 = 14,
  kComplex128 = 15,
  kBFloat16 = 16,
  kFloat8E4M3FN = 17,
  kFloat8E4M3FNUZ = 18,
  kFloat8E5M2 = 19,
  kFloat8E5M2FNUZ = 20,
  kUInt4 = 21,
  kInt4 = 22,
  kFloat4E2M1 = 23,
  kFloat8E8M0 = 24,
  kUInt2 = 25,
  kInt2 = 26,
};

// Bytes per element in memory; 0 for types kiln cannot hold in a flat buffer (strings). The
// sub-byte types (UINT4, INT4, FLOAT4E2M1, UINT2, INT2) are held one element per byte, the
// integers sign- or zero-extended, FLOAT4E2M1 as its 4-bit code; files hold them packed
// (ir/subbyte.h).
size_t DTypeSize(DType t);
// The ONNX enum name ("FLOAT", "INT64", ...).
std::string_view DTypeName(DType t);
// Parses an ONNX enum name; kUndefined when unknown.
DType DTypeFromName(std::string_view name);
// True for the types the operator library computes with.
bool IsSupportedDType(DType t);
inline bool IsFloatingDType(DType t) {
  return t == DType::kFloat32 || t == DType::kFloat64 || t == DType::kFloat16 ||
         t == DType::kBFloat16;
}
inline bool IsSignedIntDType(DType t) {
  return t == DType::kInt8 || t == DType::kInt16 || t == DType::kInt32 || t == DType::kInt64;
}
inline bool IsUnsignedIntDType(DType t) {
  return t == DType::kUInt8 || t == DType::kUInt16 || t == DType::kUInt32 || t == DType::kUInt64;
}

}  // namespace kiln
