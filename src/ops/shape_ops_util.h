// Byte-moving helpers shared by the shape and indexing families. These ops only move elements,
// so they work on element sizes (1/2/4/8 bytes) rather than on every dtype: one instantiation
// per size keeps compile time small and covers bool, the 16-bit floats and everything else.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "ops/common.h"

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
// Transpose, Slice, Expand, Tile, DepthToSpace and SpaceToDepth.
inline void StridedCopy(const Dims& out, const Dims& strides, int64_t base, const void* src,
                        void* dst, size_t elem_size) {
  const int64_t total = NumElements(out);
  if (total == 0) return;
  // Drop size-1 axes and merge axes that are contiguous with their inner neighbour, so the
  // inner loop runs long (a plain reshape becomes a single memcpy).
  Dims d, s;
  for (size_t i = 0; i < out.size(); ++i) {
    if (out[i] == 1) continue;
    if (!d.empty() && s.back() == strides[i] * out[i]) {
      d.back() *= out[i];
      s.back() = strides[i];
    } else {
      d.push_back(out[i]);
      s.push_back(strides[i]);
    }
  }
  if (d.empty()) {
    d.push_back(1);
    s.push_back(1);
  }
  const int rank = static_cast<int>(d.size());
  const int64_t inner = d[rank - 1], istride = s[rank - 1];
  // A transpose inside: an outer axis t reads consecutive source elements while the inner one
  // strides. Copy it in 16 x 16 tiles of (t, inner), so that each source line brought in serves
  // 16 outputs rather than one (vit_tiny's [197, 3, 64] -> [3, 64, 197]: 3x faster).
  int t = -1;
  for (int k = 0; k + 1 < rank; ++k)
    if (s[k] == 1) t = k;
  if (istride != 1 && t >= 0 && inner >= 8 && d[t] >= 8) {
    Dims ostride(rank, 1);
    for (int k = rank - 2; k >= 0; --k) ostride[k] = ostride[k + 1] * d[k + 1];
    Dims od, os, oo;  // the other axes: sizes, source and output strides
    for (int k = 0; k + 1 < rank; ++k)
      if (k != t) {
        od.push_back(d[k]);
        os.push_back(s[k]);
        oo.push_back(ostride[k]);
      }
    constexpr int64_t kTile = 16;
    const int64_t rows = d[t], out_row = ostride[t];
    BySize(elem_size, [&]<class U>() {
      const U* in = static_cast<const U*>(src) + base;
      U* o = static_cast<U*>(dst);
      std::vector<int64_t> idx(od.size(), 0);
      int64_t off = 0, out = 0;
      for (int64_t n = 0; n < total; n += rows * inner) {
        for (int64_t i0 = 0; i0 < rows; i0 += kTile)
          for (int64_t j0 = 0; j0 < inner; j0 += kTile) {
            const int64_t i1 = std::min(rows, i0 + kTile), j1 = std::min(inner, j0 + kTile);
            for (int64_t i = i0; i < i1; ++i)
              for (int64_t j = j0; j < j1; ++j)
                o[out + i * out_row + j] = in[off + i + j * istride];
          }
        for (int k = static_cast<int>(od.size()) - 1; k >= 0; --k) {
          off += os[k];
          out += oo[k];
          if (++idx[k] < od[k]) break;
          off -= os[k] * od[k];
          out -= oo[k] * od[k];
          idx[k] = 0;
        }
      }
    });
    return;
  }
  BySize(elem_size, [&]<class U>() {
    const U* in = static_cast<const U*>(src) + base;
    U* o = static_cast<U*>(dst);
    std::vector<int64_t> idx(rank, 0);
    int64_t off = 0;
    for (int64_t n = 0; n < total; n += inner) {
      if (istride == 1) {
        std::memcpy(o + n, in + off, static_cast<size_t>(inner) * sizeof(U));
      } else {
        const U* p = in + off;
        for (int64_t j = 0; j < inner; ++j) o[n + j] = p[j * istride];
      }
      for (int k = rank - 2; k >= 0; --k) {
        off += s[k];
        if (++idx[k] < d[k]) break;
        off -= s[k] * d[k];
        idx[k] = 0;
      }
    }
  });
}

// Reads an integer index tensor element (int32/int64 fast, any integer dtype otherwise).
inline int64_t IndexAt(const Tensor& t, int64_t i) {
  if (t.dtype() == DType::kInt64) return t.data<int64_t>()[i];
  if (t.dtype() == DType::kInt32) return t.data<int32_t>()[i];
  return t.GetInt(i);
}

inline bool IsIndexDType(DType t) { return t == DType::kInt32 || t == DType::kInt64; }

// Normalizes index `v` against an axis of size `dim`: negative values count from the end.
// False when out of range.
inline bool WrapIndex(int64_t& v, int64_t dim) {
  if (v < -dim || v >= dim) return false;
  if (v < 0) v += dim;
  return true;
}

inline std::string Str(int64_t v) { return std::to_string(v); }

}  // namespace kiln::ops::moves
