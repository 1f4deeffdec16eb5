#include "ir/dtype.h"

namespace kiln {
namespace {
struct DTypeInfo {
  DType type;
  std::string_view name;
  size_t size;
};
constexpr DTypeInfo kInfos[] = {
    {DType::kUndefined, "UNDEFINED", 0},
    {DType::kFloat32, "FLOAT", 4},
    {DType::kUInt8, "UINT8", 1},
    {DType::kInt8, "INT8", 1},
    {DType::kUInt16, "UINT16", 2},
    {DType::kInt16, "INT16", 2},
    {DType::kInt32, "INT32", 4},
    {DType::kInt64, "INT64", 8},
    {DType::kString, "STRING", 0},
    {DType::kBool, "BOOL", 1},
    {DType::kFloat16, "FLOAT16", 2},
    {DType::kFloat64, "DOUBLE", 8},
    {DType::kUInt32, "UINT32", 4},
    {DType::kUInt64, "UINT64", 8},
    {DType::kComplex64, "COMPLEX64", 8},
    {DType::kComplex128, "COMPLEX128", 16},
    {DType::kBFloat16, "BFLOAT16", 2},
    {DType::kFloat8E4M3FN, "FLOAT8E4M3FN", 1},
    {DType::kFloat8E4M3FNUZ, "FLOAT8E4M3FNUZ", 1},
    {DType::kFloat8E5M2, "FLOAT8E5M2", 1},
    {DType::kFloat8E5M2FNUZ, "FLOAT8E5M2FNUZ", 1},
    {DType::kUInt4, "UINT4", 1},
    {DType::kInt4, "INT4", 1},
    {DType::kFloat4E2M1, "FLOAT4E2M1", 1},
    {DType::kFloat8E8M0, "FLOAT8E8M0", 1},
    {DType::kUInt2, "UINT2", 1},
    {DType::kInt2, "INT2", 1},
};
const DTypeInfo* Find(DType t) {
  for (const auto& i : kInfos)
    if (i.type == t) return &i;
  return nullptr;
}
}  // namespace

size_t DTypeSize(DType t) {
  const DTypeInfo* i = Find(t);
  return i ? i->size : 0;
}

std::string_view DTypeName(DType t) {
  const DTypeInfo* i = Find(t);
  return i ? i->name : "UNKNOWN";
}

DType DTypeFromName(std::string_view name) {
  for (const auto& i : kInfos)
    if (i.name == name) return i.type;
  return DType::kUndefined;
}

bool IsSupportedDType(DType t) {
  switch (t) {
    case DType::kFloat32:
    case DType::kFloat64:
    case DType::kFloat16:
    case DType::kBFloat16:
    case DType::kInt8:
    case DType::kInt16:
    case DType::kInt32:
    case DType::kInt64:
    case DType::kUInt8:
    case DType::kUInt16:
    case DType::kUInt32:
    case DType::kUInt64:
    case DType::kBool:
      return true;
    default:
      return false;
  }
}

}  // namespace kiln
