// Per-thread working buffers for the host kernels (GEMM panels, im2col columns, padded planes):
// kept between calls so that a kernel neither zero-fills nor page-faults in a fresh allocation
// every time it runs. Each kernel uses its own slot, so a kernel can hold one buffer while it
// calls another (Conv holds kConvColumns while the GEMM packs into kGemmA / kGemmB).
// The memory is uninitialized and 64-byte aligned; it stays valid until the same thread asks the
// same slot again.
#pragma once

#include <cstddef>
#include <memory>

namespace kiln::ops {

enum class ScratchSlot {
  kGemmA,
  kGemmB,
  kConvColumns,
  kPadded,
  kDnnlSrc,
  kDnnlDst,  // a oneDNN primitive's own layout of its input and output
  kDnnlRowsSrc,
  kDnnlRowsDst,     // channels-last copies that a convolution's row parts share
  kDnnlScratchpad,  // a primitive's working memory (dnnl_common::Scratchpad)
  kConvZ,           // a FusedConv's Z, where Y took its bytes and a kernel needs it apart
  kConvRows,        // the direct convolution's input pointers per pixel and tap
  kQuantAcc,        // an integer product's int32 sums before the requantization
  kQuantConvSums,   // an integer convolution's sums for one image and group
  kIntAsFloatA,
  kIntAsFloatC,  // an integer product's operand and sums in float32 (Int8GemmByFloat, IntDepthwise)
  kQuantPlane,   // a depthwise integer convolution's padded plane (qconv_direct)
  kQuantPacked,  // an integer convolution's packed windows (qconv_direct)
  kResizePass0,
  kResizePass1,  // a separable Resize's results between its passes
  kCount
};

void* ScratchBytes(ScratchSlot slot, size_t bytes);

// Memory for large buffers read on every run (oneDNN's reordered weights, the scratch slots):
// from 2 MiB up, 2 MiB-aligned with its whole 2 MiB pages marked for transparent huge pages
// (madvise), so that streaming a ResNet's weights does not miss the TLB on every 4 KiB page;
// below, 64-byte aligned. Uninitialized; never null (throws std::bad_alloc).
struct FreeDeleter {
  void operator()(void* p) const;
};
using LargeBuffer = std::unique_ptr<void, FreeDeleter>;
LargeBuffer AllocateLarge(size_t bytes);

template <class T>
T* Scratch(ScratchSlot slot, size_t count) {
  return static_cast<T*>(ScratchBytes(slot, count * sizeof(T)));
}

}  // namespace kiln::ops
