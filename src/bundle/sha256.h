// SHA-256 (FIPS 180-4) through OpenSSL's libcrypto (SHA-NI / AVX2 where the CPU has them): the
// source-model hash a .kiln program records and the integrity digests programs and bundles carry.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace kiln::bundle {

using Digest = std::array<uint8_t, 32>;

class Sha256 {
 public:
  Sha256();
  ~Sha256();
  Sha256(const Sha256&) = delete;
  Sha256& operator=(const Sha256&) = delete;
  void Update(const void* data, size_t size);
  // Feeds `size` zero bytes (a digest field hashed as if blank).
  void UpdateZeros(size_t size);
  Digest Finish();

 private:
  struct Context;
  std::unique_ptr<Context> ctx_;
};

// The SHA-256 of one byte range.
Digest Sha256Of(const void* data, size_t size);

// The SHA-256 of a byte range in which the 32-byte fields at `blanks` (disjoint, inside the range)
// are read as zeros: how a file's digest covers the file that holds it.
Digest Sha256WithBlanks(const uint8_t* data, size_t size, std::vector<size_t> blanks);

// Lower-case hex of the bytes.
std::string HexString(const uint8_t* data, size_t size);

}  // namespace kiln::bundle
