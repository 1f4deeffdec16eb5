#include "passes/compress_constants.h"

#include <cstring>
#include <string_view>
#include <unordered_map>

namespace kiln::passes {
namespace {

bool IsNumeric(DType t) { return IsSupportedDType(t) && t != DType::kBool; }

// Writes `v` converted to t's element type into `out` (DTypeSize(t) bytes).
void Store(DType t, double v, void* out) {
  Tensor tmp(t, {1});
  switch (t) {
    case DType::kFloat32:
      tmp.data<float>()[0] = static_cast<float>(v);
      break;
    case DType::kFloat64:
      tmp.data<double>()[0] = v;
      break;
    case DType::kFloat16:
      tmp.data<Float16>()[0] = Float16(static_cast<float>(v));
      break;
    case DType::kBFloat16:
      tmp.data<BFloat16>()[0] = BFloat16(static_cast<float>(v));
      break;
    case DType::kInt8:
      tmp.data<int8_t>()[0] = static_cast<int8_t>(v);
      break;
    case DType::kInt16:
      tmp.data<int16_t>()[0] = static_cast<int16_t>(v);
      break;
    case DType::kInt32:
      tmp.data<int32_t>()[0] = static_cast<int32_t>(v);
      break;
    case DType::kInt64:
      tmp.data<int64_t>()[0] = static_cast<int64_t>(v);
      break;
    case DType::kUInt8:
      tmp.data<uint8_t>()[0] = static_cast<uint8_t>(v);
      break;
    case DType::kUInt16:
      tmp.data<uint16_t>()[0] = static_cast<uint16_t>(v);
      break;
    case DType::kUInt32:
      tmp.data<uint32_t>()[0] = static_cast<uint32_t>(v);
      break;
    case DType::kUInt64:
      tmp.data<uint64_t>()[0] = static_cast<uint64_t>(v);
      break;
    default:
      break;
  }
  std::memcpy(out, tmp.raw(), DTypeSize(t));
}

// True when every element is reproduced bit-exactly by start + i * step in the element type.
bool IsProgression(const Tensor& t, double* start, double* step) {
  const int64_t n = t.size();
  if (n < 3 || !IsNumeric(t.dtype())) return false;
  *start = t.GetDouble(0);
  *step = t.GetDouble(1) - *start;
  if (*step == 0) return false;
  const size_t es = DTypeSize(t.dtype());
  const uint8_t* p = static_cast<const uint8_t*>(t.raw());
  uint8_t buf[8];
  for (int64_t i = 0; i < n; ++i) {
    Store(t.dtype(), *start + static_cast<double>(i) * *step, buf);
    if (std::memcmp(buf, p + i * es, es) != 0) return false;
  }
  return true;
}

bool IsSplat(const Tensor& t) {
  const int64_t n = t.size();
  const size_t es = DTypeSize(t.dtype());
  if (n < 2 || es == 0) return false;
  const uint8_t* p = static_cast<const uint8_t*>(t.raw());
  for (int64_t i = 1; i < n; ++i)
    if (std::memcmp(p, p + i * es, es) != 0) return false;
  return true;
}

}  // namespace

ConstantReport CompressConstants(ir::Graph& g) {
  ConstantReport r;
  // Bytes -> earlier constants with exactly those bytes (views stay valid: storage is shared).
  std::unordered_map<std::string_view, std::vector<int>> seen;
  for (size_t v = 0; v < g.values.size(); ++v) {
    // (Strings are not bytes: a string constant keeps its own storage.)
    if (!g.values[v].constant || g.values[v].constant->is_string()) continue;
    Tensor& t = *g.values[v].constant;
    ConstantEncoding e;
    e.value = static_cast<int>(v);
    const size_t bytes = t.nbytes();
    r.bytes_before += bytes;
    std::string_view data(static_cast<const char*>(t.raw()), bytes);
    int first = -1;
    auto it = seen.find(data);
    if (it != seen.end())
      for (int o : it->second)
        if (g.values[o].constant->dtype() == t.dtype() && g.values[o].constant->dims() == t.dims())
          first = o;
    if (first >= 0) {
      e.kind = ConstantEncoding::Kind::kDuplicate;
      e.duplicate_of = first;
      t = *g.values[first].constant;  // share the first copy's storage
      ++r.duplicates;
    } else if (IsSplat(t)) {
      e.kind = ConstantEncoding::Kind::kSplat;
      e.start = IsNumeric(t.dtype()) ? t.GetDouble(0) : 0;
      e.stored_bytes = DTypeSize(t.dtype());
      ++r.splats;
    } else if (IsProgression(t, &e.start, &e.step)) {
      e.kind = ConstantEncoding::Kind::kArithmetic;
      e.stored_bytes = 2 * DTypeSize(t.dtype());
      ++r.progressions;
    } else {
      e.stored_bytes = bytes;
    }
    if (e.kind != ConstantEncoding::Kind::kDuplicate) seen[data].push_back(static_cast<int>(v));
    r.bytes_after += e.stored_bytes;
    r.encodings.push_back(e);
  }
  return r;
}

}  // namespace kiln::passes
