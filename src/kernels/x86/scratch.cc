#include "kernels/x86/scratch.h"

#include <sys/mman.h>

#include <algorithm>
#include <cstdlib>
#include <memory>
#include <new>

namespace kiln::ops {
namespace {

struct Buffer {
  LargeBuffer data;
  size_t bytes = 0;
};

}  // namespace

void FreeDeleter::operator()(void* p) const { std::free(p); }

LargeBuffer AllocateLarge(size_t bytes) {
  constexpr size_t kHuge = size_t{2} << 20;
  const size_t align = bytes >= kHuge ? kHuge : 64;
  void* p = nullptr;
  if (posix_memalign(&p, align, std::max<size_t>(bytes, 1)) != 0) throw std::bad_alloc();
#ifdef MADV_HUGEPAGE
  // Huge pages for the whole 2 MiB pages inside the buffer only: rounding the buffer up to one
  // would make the rest of its last page resident too (20 MB more on a ResNet-50).
  if (align == kHuge) madvise(p, bytes / kHuge * kHuge, MADV_HUGEPAGE);  // a hint
#endif
  return LargeBuffer(p);
}

void* ScratchBytes(ScratchSlot slot, size_t bytes) {
  thread_local Buffer buffers[static_cast<int>(ScratchSlot::kCount)];
  Buffer& b = buffers[static_cast<int>(slot)];
  if (bytes > b.bytes) {
    // Grow by at least half again, rounded to 4 KiB, so that growing shapes settle quickly.
    size_t want = std::max(bytes, b.bytes + b.bytes / 2);
    want = (want + 4095) / 4096 * 4096;
    b.data.reset();
    b.data = AllocateLarge(want);
    b.bytes = want;
  }
  return b.data.get();
}

}  // namespace kiln::ops
