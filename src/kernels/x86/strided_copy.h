// The one strided copy loop of the element-moving kernels, on element sizes (1/2/4/8 bytes)
// rather than dtypes: one instantiation per size covers bool, the 16-bit floats and the rest.
#pragma once

#include <cstddef>
#include <cstdint>

#include "ir/tensor.h"

namespace kiln::ops::moves {

// Calls fn.template operator()<U>() with U an unsigned integer type of `elem_size` bytes.
template <class F>
bool BySize(size_t elem_size, F&& fn) {
  switch (elem_size) {
    case 1:
      fn.template operator()<uint8_t>();
      return true;
    case 2:
      fn.template operator()<uint16_t>();
      return true;
    case 4:
      fn.template operator()<uint32_t>();
      return true;
    case 8:
      fn.template operator()<uint64_t>();
      return true;
    default:
      return false;
  }
}

// dst[i] = src[base + sum_k idx_k * strides[k]] for every index of `out` dims, in row-major
// order. Strides may be zero (broadcast) or negative (reversed slices). This one loop serves
// Transpose, Slice, Expand, Tile, DepthToSpace and SpaceToDepth (kernels/x86/strided_copy.cc), over
// up to `threads` threads for large copies.
void StridedCopy(const Dims& out, const Dims& strides, int64_t base, const void* src, void* dst,
                 size_t elem_size, int threads = 1);

}  // namespace kiln::ops::moves
