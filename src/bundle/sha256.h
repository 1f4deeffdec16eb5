// SHA-256 (FIPS 180-4), for the source-model hash a .kiln program records.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>

namespace kiln::bundle {

class Sha256 {
 public:
  Sha256();
  void Update(const void* data, size_t size);
  std::array<uint8_t, 32> Finish();

 private:
  void Block(const uint8_t* p);
  uint32_t h_[8];
  uint8_t buf_[64];
  size_t buf_len_ = 0;
  uint64_t total_ = 0;
};

// Lower-case hex of the bytes.
std::string HexString(const uint8_t* data, size_t size);

}  // namespace kiln::bundle
