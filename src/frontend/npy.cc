#include "frontend/npy.h"

#include <algorithm>
#include <cstring>
#include <vector>

#include "ir/small_float.h"
#include "ir/subbyte.h"
#include "support/file_io.h"
#include "support/utf8.h"

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

// NumPy's fixed-width text: '<U<n>' holds n UTF-32 code units per element, '|S<n>' n bytes;
// both end early at a zero. 0 when `descr` is neither.
int64_t TextWidth(const std::string& descr, int64_t* unit) {
  if (descr.size() < 3 || (descr.compare(0, 2, "<U") != 0 && descr.compare(0, 2, "|S") != 0))
    return 0;
  int64_t n = 0;
  for (size_t i = 2; i < descr.size(); ++i) {
    if (descr[i] < '0' || descr[i] > '9' || n > (int64_t{1} << 30)) return 0;
    n = n * 10 + (descr[i] - '0');
  }
  *unit = descr[1] == 'U' ? 4 : 1;
  return n;
}

// The elements of a text array as a STRING tensor (UTF-8).
Expected<Tensor> ReadTextElements(const uint8_t* p, size_t size, const Dims& dims, int64_t width,
                                  int64_t unit, const std::string& label) {
  const int64_t count = NumElements(dims);
  // (Width 0 would let a header claim any number of strings with no bytes behind them.)
  if (width == 0 && count > 0)
    return Error(label + ": .npy text of width 0 holds no characters; expected '<U1' or wider");
  if (width > 0 && static_cast<uint64_t>(count) > size / static_cast<uint64_t>(width * unit))
    return Error(label + ": .npy data has " + std::to_string(size) + " bytes, too few for shape " +
                 DimsToString(dims));
  if (size != static_cast<size_t>(count * width * unit))
    return Error(label + ": .npy data has " + std::to_string(size) + " bytes, expected " +
                 std::to_string(count * width * unit) + " for shape " + DimsToString(dims));
  Tensor t(DType::kString, dims);
  for (int64_t i = 0; i < count; ++i, p += width * unit) {
    std::string& s = t.strings()[i];
    for (int64_t k = 0; k < width; ++k) {
      uint32_t c = 0;
      for (int64_t b = unit - 1; b >= 0; --b) c = (c << 8) | p[k * unit + b];
      if (c == 0) break;
      if (unit == 1)
        s.push_back(static_cast<char>(c));
      else if (c > 0x10FFFF || (c >= 0xD800 && c <= 0xDFFF))
        return Error(label + ": .npy text element " + std::to_string(i) +
                     " holds an invalid code point");
      else
        AppendUtf8(c, &s);
    }
  }
  return t;
}

// A STRING tensor as '<U<n>' (n the longest element in code points, at least 1).
std::string TextElements(const Tensor& t, std::string* descr) {
  std::vector<std::u32string> text(static_cast<size_t>(t.size()));
  size_t width = 1;
  for (int64_t i = 0; i < t.size(); ++i) {
    text[i] = DecodeUtf8(t.strings()[i]);
    width = std::max(width, text[i].size());
  }
  *descr = "<U" + std::to_string(width);
  std::string out(text.size() * width * 4, '\0');
  for (size_t i = 0; i < text.size(); ++i)
    for (size_t k = 0; k < text[i].size(); ++k)
      for (int b = 0; b < 4; ++b)
        out[(i * width + k) * 4 + b] = static_cast<char>((text[i][k] >> (8 * b)) & 0xff);
  return out;
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
  int64_t text_unit = 0;
  const int64_t text_width = TextWidth(descr, &text_unit);
  if (text_unit > 0) dt = DType::kString;
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
  size_t offset = header_start + header_len;
  if (dt == DType::kString)
    return ReadTextElements(p + offset, size - offset, dims, text_width, text_unit, label);
  size_t nbytes = static_cast<size_t>(total) * DTypeSize(dt);
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
  std::string descr = "<f4", text;
  for (const auto& k : kTypes)
    if (k.dtype == held) descr = k.descr;
  if (t.is_string()) text = TextElements(t, &descr);
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
  if (t.is_string())
    out += text;
  else
    out.append(static_cast<const char*>(t.raw()), t.nbytes());
  return out;
}

}  // namespace kiln::frontend
