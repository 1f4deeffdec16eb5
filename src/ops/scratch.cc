#include "ops/scratch.h"

#include <cstdlib>
#include <algorithm>
#include <memory>
#include <new>

namespace kiln::ops {
namespace {

struct FreeDeleter {
  void operator()(void* p) const { std::free(p); }
};

struct Buffer {
  std::unique_ptr<void, FreeDeleter> data;
  size_t bytes = 0;
};

}  // namespace

void* ScratchBytes(ScratchSlot slot, size_t bytes) {
  thread_local Buffer buffers[static_cast<int>(ScratchSlot::kCount)];
  Buffer& b = buffers[static_cast<int>(slot)];
  if (bytes > b.bytes) {
    // Grow by at least half again, rounded to 4 KiB, so that growing shapes settle quickly.
    size_t want = std::max(bytes, b.bytes + b.bytes / 2);
    want = (want + 4095) / 4096 * 4096;
    b.data.reset();
    void* p = std::aligned_alloc(64, want);
    if (!p) throw std::bad_alloc();
    b.data.reset(p);
    b.bytes = want;
  }
  return b.data.get();
}

}  // namespace kiln::ops
