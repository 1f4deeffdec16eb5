// Reading files whole or mapped; every failure is a Status naming the path.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "support/status.h"

namespace kiln {

// A read-only memory mapping that stays alive as long as any tensor borrows from it.
class MappedFile {
 public:
  static Expected<std::shared_ptr<MappedFile>> Open(const std::string& path);
  // An in-memory stand-in holding a copy of `bytes` (tests, fuzzing, network payloads).
  static std::shared_ptr<MappedFile> FromBytes(std::string bytes, std::string label);
  ~MappedFile();
  const uint8_t* data() const { return data_; }
  size_t size() const { return size_; }
  const std::string& path() const { return path_; }

 private:
  MappedFile() = default;
  const uint8_t* data_ = nullptr;
  size_t size_ = 0;
  bool mapped_ = false;
  std::string owned_;
  std::string path_;
};

Expected<std::string> ReadFile(const std::string& path);
Status WriteFile(const std::string& path, const void* data, size_t size);
inline Status WriteFile(const std::string& path, const std::string& s) {
  return WriteFile(path, s.data(), s.size());
}

}  // namespace kiln
