#include "frontend/npy.h"

#include <cstring>

#include "ir/small_float.h"
#include "ir/subbyte.h"
#include "support/file_io.h"

namespace kiln::frontend {
namespace {

struct NpyType {
  const char* descr;
  DType dtype;
};
constexpr NpyType kTypes[] = {
    {"<f4", DType::kFloat32},
    {"<f8", DType::kFloat64},
    {"<f2", DType::kFloat16},
    {"|i1", DType::kInt8},
    {"<i2", DType::kInt16},
    {"<i4", DType::kInt32},
    {"<i8", DType::kInt64},
    {"|u1", DType::kUInt8},
    {"<u2", DType::kUInt16},
    {"<u4", DType::kUInt32},
    {"<u8", DType::kUInt64},
    {"|b1", DType::kBool},
    // bfloat16 has no NumPy code; ml_dtypes writes it as a 2-byte void with this tag.
    {"<V2", DType::kBFloat16},
};

// Extracts the value text following 'key': in the header dict.
bool FindField(const std::string& h, const std::string& key, std::string* out) {
  size_t k = h.find("'" + key + "'");
  if (k == std::string::npos) return false;
  size_t colon = h.find(':', k);
  if (colon == std::string::npos) return false;
  size_t p = colon + 1;
  while (p < h.size() && h[p] == ' ') ++p;
  if (p >= h.size()) return false;
  size_t end;
  if (h[p] == '\'') {
    end = h.find('\'', p + 1);
    if (end == std::string::npos) return false;
    *out = h.substr(p + 1, end - p - 1);
  } else if (h[p] == '(') {
    end = h.find(')', p);
    if (end == std::string::npos) return false;
    *out = h.substr(p + 1, end - p - 1);
  } else {
    end = h.find_first_of(",}", p);
    if (end == std::string::npos) return false;
    *out = h.substr(p, end - p);
  }
  return true;
}

}  // namespace

Expected<Tensor> ParseNpy(const void* data, size_t size, const std::string& label) {
  const uint8_t* p = static_cast<const uint8_t*>(data);
  if (size < 10 || std::memcmp(p, "\x93NUMPY", 6) != 0)
    return Error(label + ": not a .npy file (bad magic)");
  int major = p[6];
  size_t header_len, header_start;
  if (major == 1) {
    header_len = p[8] | (p[9] << 8);
    header_start = 10;
  } else if (major == 2 || major == 3) {
    if (size < 12) return Error(label + ": truncated .npy header");
    header_len = p[8] | (p[9] << 8) | (size_t(p[10]) << 16) | (size_t(p[11]) << 24);
    header_start = 12;
  } else {
    return Error(label + ": unsupported .npy version " + std::to_string(major));
  }
  if (header_len > size - header_start) return Error(label + ": truncated .npy header");
  std::string h(reinterpret_cast<const char*>(p + header_start), header_len);
  std::string descr, order, shape;
  if (!FindField(h, "descr", &descr) || !FindField(h, "fortran_order", &order) ||
      !FindField(h, "shape", &shape))
    return Error(label + ": malformed .npy header");
  if (order.find("True") != std::string::npos)
    return Error(label + ": Fortran-order arrays are not supported");
  DType dt = DType::kUndefined;
  if (descr == "<b1") descr = "|b1";
  if (descr == "<i1") descr = "|i1";
  if (descr == "<u1") descr = "|u1";
  for (const auto& t : kTypes)
    if (descr == t.descr) dt = t.dtype;
  if (dt == DType::kUndefined) return Error(label + ": unsupported .npy dtype '" + descr + "'");
  Dims dims;
  size_t i = 0;
  int64_t total = 1;
  while (i < shape.size()) {
    while (i < shape.size() && (shape[i] == ' ' || shape[i] == ',')) ++i;
    if (i >= shape.size()) break;
    if (shape[i] < '0' || shape[i] > '9') return Error(label + ": malformed .npy shape");
    int64_t d = 0;
    while (i < shape.size() && shape[i] >= '0' && shape[i] <= '9') {
      d = d * 10 + (shape[i] - '0');
      if (d > (int64_t{1} << 40)) return Error(label + ": .npy dimension too large");
      ++i;
    }
    if (d > 0 && total > (int64_t{1} << 40) / d) return Error(label + ": .npy array too large");
    total *= d;
    dims.push_back(d);
  }
  size_t nbytes = static_cast<size_t>(total) * DTypeSize(dt);
  size_t offset = header_start + header_len;
  if (size - offset != nbytes)
    return Error(label + ": .npy data has " + std::to_string(size - offset) + " bytes, expected " +
                 std::to_string(nbytes) + " for shape " + DimsToString(dims));
  return Tensor::Copy(dt, dims, p + offset);
}

Expected<Tensor> LoadNpyFile(const std::string& path) {
  KILN_ASSIGN_OR_RETURN(auto file, MappedFile::Open(path));
  return ParseNpy(file->data(), file->size(), path);
}

std::string SerializeNpy(const Tensor& t) {
  // The 8-bit floats have no NumPy type (ml_dtypes writes all four as the same 1-byte void):
  // their values, exact in float32, are written as float32.
  if (IsSmallFloatDType(t.dtype())) return SerializeNpy(SmallFloatToFloat32(t));
  // The sub-byte integers as the byte type they are held in (ir/subbyte.h).
  const DType held = IsSubByteDType(t.dtype()) ? SubByteStorage(t.dtype()) : t.dtype();
  const char* descr = "<f4";
  for (const auto& k : kTypes)
    if (k.dtype == held) descr = k.descr;
  std::string shape = "(";
  for (size_t i = 0; i < t.dims().size(); ++i) shape += std::to_string(t.dims()[i]) + ",";
  if (t.dims().size() > 1) shape.pop_back();
  shape += ")";
  std::string dict =
      std::string("{'descr': '") + descr + "', 'fortran_order': False, 'shape': " + shape + ", }";
  size_t total = 10 + dict.size() + 1;
  dict.append((64 - total % 64) % 64, ' ');
  dict += '\n';
  std::string out("\x93NUMPY\x01\x00", 8);
  out += static_cast<char>(dict.size() & 0xff);
  out += static_cast<char>((dict.size() >> 8) & 0xff);
  out += dict;
  out.append(static_cast<const char*>(t.raw()), t.nbytes());
  return out;
}

}  // namespace kiln::frontend
