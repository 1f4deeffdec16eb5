// FlatBuffers reads 8-byte scalars in place and kiln borrows constants from the bytes, so a
// buffer must start 16-byte aligned. A mapped file is, and so is a bundle's program field as kiln
// writes it; a forged offset or a caller's buffer may not be. Internal to bundle/.
#pragma once

#include <cstdint>
#include <cstring>
#include <memory>
#include <new>

namespace kiln::bundle::internal {

// `data` itself when it is 16-byte aligned; otherwise a 16-byte aligned copy, which *keep_alive
// then owns.
inline const uint8_t* Aligned16(const uint8_t* data, size_t size,
                                std::shared_ptr<const void>* keep_alive) {
  if (reinterpret_cast<uintptr_t>(data) % 16 == 0) return data;
  std::shared_ptr<uint8_t[]> copy(new (std::align_val_t(16)) uint8_t[size ? size : 1],
                                  [](uint8_t* p) { operator delete[](p, std::align_val_t(16)); });
  if (size > 0) std::memcpy(copy.get(), data, size);
  *keep_alive = std::shared_ptr<const void>(copy, copy.get());
  return copy.get();
}

}  // namespace kiln::bundle::internal
