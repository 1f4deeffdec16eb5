#include "frontend/safetensors.h"

#include <fstream>
#include <nlohmann/json.hpp>

namespace kiln::frontend {
namespace {

struct StType {
  const char* name;
  DType dtype;
};
constexpr StType kStTypes[] = {
    {"F32", DType::kFloat32},
    {"F64", DType::kFloat64},
    {"F16", DType::kFloat16},
    {"BF16", DType::kBFloat16},
    {"I8", DType::kInt8},
    {"I16", DType::kInt16},
    {"I32", DType::kInt32},
    {"I64", DType::kInt64},
    {"U8", DType::kUInt8},
    {"U16", DType::kUInt16},
    {"U32", DType::kUInt32},
    {"U64", DType::kUInt64},
    {"BOOL", DType::kBool},
    // The 8-bit floats safetensors names: E4M3 is the FN kind (no infinities), as in PyTorch.
    {"F8_E4M3", DType::kFloat8E4M3FN},
    {"F8_E5M2", DType::kFloat8E5M2},
};

}  // namespace

std::string SafetensorsDTypeName(DType t) {
  for (const auto& s : kStTypes)
    if (s.dtype == t) return s.name;
  return "";
}

Expected<SafetensorsFile> SafetensorsFile::Open(const std::string& path) {
  KILN_ASSIGN_OR_RETURN(auto file, MappedFile::Open(path));
  return Parse(std::move(file));
}

Expected<SafetensorsFile> SafetensorsFile::Parse(std::shared_ptr<MappedFile> file) {
  const std::string& path = file->path();
  if (file->size() < 8) return Error(path + ": not a safetensors file (shorter than its header)");
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | file->data()[i];
  if (n > file->size() - 8)
    return Error(path + ": safetensors header length " + std::to_string(n) +
                 " exceeds the file size " + std::to_string(file->size()));
  SafetensorsFile st;
  st.data_start_ = 8 + static_cast<size_t>(n);
  st.data_size_ = file->size() - st.data_start_;
  nlohmann::json header;
  try {
    header = nlohmann::json::parse(file->data() + 8, file->data() + 8 + n);
  } catch (const std::exception& e) {
    return Error(path + ": safetensors header is not valid JSON");
  }
  if (!header.is_object()) return Error(path + ": safetensors header is not a JSON object");
  for (auto it = header.begin(); it != header.end(); ++it) {
    if (it.key() == "__metadata__") continue;
    std::string at = path + ": tensor '" + it.key() + "'";
    const auto& e = it.value();
    if (!e.is_object() || !e.contains("dtype") || !e.contains("shape") ||
        !e.contains("data_offsets") || !e["dtype"].is_string() || !e["shape"].is_array() ||
        !e["data_offsets"].is_array() || e["data_offsets"].size() != 2)
      return Error(at + ": needs dtype, shape and data_offsets [begin, end]");
    SafetensorsEntry entry;
    std::string dt = e["dtype"].get<std::string>();
    for (const auto& s : kStTypes)
      if (dt == s.name) entry.dtype = s.dtype;
    if (entry.dtype == DType::kUndefined) return Error(at + ": unsupported dtype '" + dt + "'");
    int64_t count = 1;
    for (const auto& d : e["shape"]) {
      if (!d.is_number_unsigned()) return Error(at + ": shape must hold non-negative integers");
      uint64_t v = d.get<uint64_t>();
      if (v > (uint64_t{1} << 40) ||
          (v > 0 && count > (int64_t{1} << 40) / static_cast<int64_t>(v)))
        return Error(at + ": shape is too large");
      count *= static_cast<int64_t>(v);
      entry.dims.push_back(static_cast<int64_t>(v));
    }
    const auto& off = e["data_offsets"];
    if (!off[0].is_number_unsigned() || !off[1].is_number_unsigned())
      return Error(at + ": data_offsets must be non-negative integers");
    uint64_t b = off[0].get<uint64_t>(), en = off[1].get<uint64_t>();
    if (b > en || en > st.data_size_)
      return Error(at + ": data_offsets [" + std::to_string(b) + ", " + std::to_string(en) +
                   "] lie outside the " + std::to_string(st.data_size_) + "-byte data section");
    if (en - b != static_cast<uint64_t>(count) * DTypeSize(entry.dtype))
      return Error(at + ": data_offsets span " + std::to_string(en - b) +
                   " bytes, its shape needs " + std::to_string(count * DTypeSize(entry.dtype)));
    entry.begin = static_cast<size_t>(b);
    entry.end = static_cast<size_t>(en);
    st.entries_[it.key()] = entry;
  }
  st.file_ = std::move(file);
  return st;
}

Expected<Tensor> SafetensorsFile::Slice(DType dtype, const Dims& dims, size_t begin, size_t end,
                                        const std::string& label) const {
  if (begin > end || end > data_size_)
    return Error(label + ": data_offsets [" + std::to_string(begin) + ", " + std::to_string(end) +
                 "] lie outside the " + std::to_string(data_size_) + "-byte data section of " +
                 path());
  size_t need = static_cast<size_t>(NumElements(dims)) * DTypeSize(dtype);
  if (end - begin != need)
    return Error(label + ": data_offsets span " + std::to_string(end - begin) +
                 " bytes, the tensor needs " + std::to_string(need));
  const uint8_t* p = data() + begin;
  if (reinterpret_cast<uintptr_t>(p) % 16 == 0)
    return Tensor::View(dtype, dims, const_cast<uint8_t*>(p), file_);
  return Tensor::Copy(dtype, dims, p);
}

Status WriteSafetensors(const std::string& path,
                        const std::vector<std::pair<std::string, Tensor>>& tensors,
                        std::vector<std::pair<size_t, size_t>>* offsets) {
  nlohmann::ordered_json header = nlohmann::ordered_json::object();
  header["__metadata__"] = {{"format", "pt"}, {"producer", "kiln"}};
  size_t pos = 0;
  offsets->clear();
  for (const auto& [name, t] : tensors) {
    std::string dt = SafetensorsDTypeName(t.dtype());
    if (dt.empty())
      return Error(name + ": dtype " + std::string(DTypeName(t.dtype())) +
                   " has no safetensors code");
    // Keep every tensor 16-byte aligned in the data section so readers can borrow it.
    pos = (pos + 15) / 16 * 16;
    header[name] = {{"dtype", dt}, {"shape", t.dims()}, {"data_offsets", {pos, pos + t.nbytes()}}};
    offsets->push_back({pos, pos + t.nbytes()});
    pos += t.nbytes();
  }
  std::string h = header.dump();
  // Pad the header so the data section starts 16-byte aligned too.
  while ((8 + h.size()) % 16 != 0) h += ' ';
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) return Error(path + ": cannot open for writing");
  uint64_t n = h.size();
  for (int i = 0; i < 8; ++i) out.put(static_cast<char>((n >> (8 * i)) & 0xff));
  out.write(h.data(), static_cast<std::streamsize>(h.size()));
  size_t written = 0;
  std::string zeros(16, '\0');
  for (size_t i = 0; i < tensors.size(); ++i) {
    out.write(zeros.data(), static_cast<std::streamsize>((*offsets)[i].first - written));
    out.write(static_cast<const char*>(tensors[i].second.raw()),
              static_cast<std::streamsize>(tensors[i].second.nbytes()));
    written = (*offsets)[i].second;
  }
  if (!out) return Error(path + ": write failed");
  return OkStatus();
}

}  // namespace kiln::frontend
