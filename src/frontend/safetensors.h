// safetensors files: an 8-byte little-endian header length, a JSON header
// {name: {dtype, shape, data_offsets}} (optional "__metadata__"), then the data section.
// Every offset and size is validated when the file is opened.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "ir/tensor.h"
#include "support/file_io.h"
#include "support/status.h"

namespace kiln::frontend {

struct SafetensorsEntry {
  DType dtype = DType::kUndefined;
  Dims dims;
  size_t begin = 0, end = 0;  // offsets into the data section
};

class SafetensorsFile {
 public:
  static Expected<SafetensorsFile> Open(const std::string& path);
  static Expected<SafetensorsFile> Parse(std::shared_ptr<MappedFile> file);

  const std::map<std::string, SafetensorsEntry>& entries() const { return entries_; }
  size_t data_size() const { return data_size_; }
  const uint8_t* data() const { return file_->data() + data_start_; }
  const std::string& path() const { return file_->path(); }
  // Bytes [begin, end) of the data section as a tensor (borrowed when aligned, else copied).
  Expected<Tensor> Slice(DType dtype, const Dims& dims, size_t begin, size_t end,
                         const std::string& label) const;

 private:
  std::shared_ptr<MappedFile> file_;
  size_t data_start_ = 0, data_size_ = 0;
  std::map<std::string, SafetensorsEntry> entries_;
};

// The safetensors dtype code ("F32") of a kiln dtype, or "" when it has none.
std::string SafetensorsDTypeName(DType t);

// Writes tensors (in the order given) into one safetensors file.
Status WriteSafetensors(const std::string& path,
                        const std::vector<std::pair<std::string, Tensor>>& tensors,
                        std::vector<std::pair<size_t, size_t>>* offsets);

}  // namespace kiln::frontend
