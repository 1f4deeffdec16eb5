// Helpers shared by the kernel families: dtype dispatch, axis handling, strides, broadcasting.
#pragma once

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <type_traits>
#include <vector>

#include "ir/half.h"
#include "ir/tensor.h"
#include "ops/op.h"
#include "ops/op_traits.h"

namespace kiln::ops {

// Maps a dtype to its C++ element type. Bool is stored as one byte (uint8_t semantics via bool).
template <DType D>
struct CType;
template <>
struct CType<DType::kFloat32> {
  using type = float;
};
template <>
struct CType<DType::kFloat64> {
  using type = double;
};
template <>
struct CType<DType::kFloat16> {
  using type = Float16;
};
template <>
struct CType<DType::kBFloat16> {
  using type = BFloat16;
};
template <>
struct CType<DType::kInt8> {
  using type = int8_t;
};
template <>
struct CType<DType::kInt16> {
  using type = int16_t;
};
template <>
struct CType<DType::kInt32> {
  using type = int32_t;
};
template <>
struct CType<DType::kInt64> {
  using type = int64_t;
};
template <>
struct CType<DType::kUInt8> {
  using type = uint8_t;
};
template <>
struct CType<DType::kUInt16> {
  using type = uint16_t;
};
template <>
struct CType<DType::kUInt32> {
  using type = uint32_t;
};
template <>
struct CType<DType::kUInt64> {
  using type = uint64_t;
};
template <>
struct CType<DType::kBool> {
  using type = bool;
};

template <class T>
constexpr bool kIsHalfLike = std::is_same_v<T, Float16> || std::is_same_v<T, BFloat16>;
template <class T>
constexpr bool kIsFloat = std::is_floating_point_v<T> || kIsHalfLike<T>;

// The arithmetic type to compute T in: float for the 16-bit floats, T otherwise.
template <class T>
using Acc = std::conditional_t<kIsHalfLike<T>, float, T>;

// Calls fn.template operator()<T>() for the C++ type of `t`; returns false when `t` is not
// among the listed groups (ops::DispatchGroup). Usage:
// Dispatch<kAllTypes>(dt, [&]<class T>() { ... });
template <unsigned Groups, class F>
bool Dispatch(DType t, F&& fn) {
#define KILN_DISPATCH_CASE(G, D)                         \
  case D:                                                \
    if constexpr ((Groups & (G)) != 0) {                 \
      fn.template operator()<typename CType<D>::type>(); \
      return true;                                       \
    }                                                    \
    return false;
  switch (t) {
    KILN_DISPATCH_CASE(kFloatTypes, DType::kFloat32)
    KILN_DISPATCH_CASE(kFloatTypes, DType::kFloat64)
    KILN_DISPATCH_CASE(kFloatTypes, DType::kFloat16)
    KILN_DISPATCH_CASE(kFloatTypes, DType::kBFloat16)
    KILN_DISPATCH_CASE(kSignedIntTypes, DType::kInt8)
    KILN_DISPATCH_CASE(kSignedIntTypes, DType::kInt16)
    KILN_DISPATCH_CASE(kSignedIntTypes, DType::kInt32)
    KILN_DISPATCH_CASE(kSignedIntTypes, DType::kInt64)
    KILN_DISPATCH_CASE(kUnsignedIntTypes, DType::kUInt8)
    KILN_DISPATCH_CASE(kUnsignedIntTypes, DType::kUInt16)
    KILN_DISPATCH_CASE(kUnsignedIntTypes, DType::kUInt32)
    KILN_DISPATCH_CASE(kUnsignedIntTypes, DType::kUInt64)
    KILN_DISPATCH_CASE(kBoolType, DType::kBool)
    default:
      return false;
  }
#undef KILN_DISPATCH_CASE
}

// Row-major strides in elements.
inline Dims Strides(const Dims& dims) {
  Dims s(dims.size(), 1);
  for (int i = static_cast<int>(dims.size()) - 2; i >= 0; --i) s[i] = s[i + 1] * dims[i + 1];
  return s;
}

// Normalizes a possibly negative axis into [0, rank); false when out of range.
inline bool NormalizeAxis(int64_t& axis, int64_t rank) {
  if (axis < -rank || axis >= rank) return false;
  if (axis < 0) axis += rank;
  return true;
}

// Copies element i of src into element j of *dst, of the same dtype (strings by value).
inline void CopyElement(const Tensor& src, int64_t i, Tensor* dst, int64_t j) {
  if (src.is_string()) {
    dst->strings()[j] = src.strings()[i];
    return;
  }
  const size_t es = DTypeSize(src.dtype());
  std::memcpy(static_cast<uint8_t*>(dst->raw()) + j * es,
              static_cast<const uint8_t*>(src.raw()) + i * es, es);
}

// Numpy-style multidirectional broadcast of two shapes; false when incompatible.
inline bool BroadcastDims(const Dims& a, const Dims& b, Dims* out) {
  size_t r = std::max(a.size(), b.size());
  out->assign(r, 1);
  for (size_t i = 0; i < r; ++i) {
    int64_t da = i < r - a.size() ? 1 : a[i - (r - a.size())];
    int64_t db = i < r - b.size() ? 1 : b[i - (r - b.size())];
    if (da == db || db == 1)
      (*out)[i] = da;
    else if (da == 1)
      (*out)[i] = db;
    else
      return false;
  }
  return true;
}

// Strides (in elements) for reading a tensor of `in` dims as if broadcast to `out` dims: 0 on
// broadcast axes. `in` must broadcast to `out`.
inline Dims BroadcastStrides(const Dims& in, const Dims& out) {
  Dims s(out.size(), 0);
  Dims is = Strides(in);
  size_t off = out.size() - in.size();
  for (size_t i = 0; i < in.size(); ++i) s[off + i] = in[i] == 1 ? 0 : is[i];
  return s;
}

// Calls fn(out_index, offsets...) for every element of `out` dims, where offsets[k] is the element
// offset into input k given its broadcast strides. Inner loop is kept tight for the common case.
template <size_t N, class F>
void ForEachBroadcast(const Dims& out, const std::array<Dims, N>& strides, F&& fn) {
  const int rank = static_cast<int>(out.size());
  const int64_t total = NumElements(out);
  if (total == 0) return;
  if (rank == 0) {
    std::array<int64_t, N> off{};
    fn(int64_t{0}, off);
    return;
  }
  std::vector<int64_t> idx(rank, 0);
  std::array<int64_t, N> off{};
  const int64_t inner = out[rank - 1];
  std::array<int64_t, N> inner_stride;
  for (size_t k = 0; k < N; ++k) inner_stride[k] = strides[k][rank - 1];
  for (int64_t o = 0; o < total; o += inner) {
    std::array<int64_t, N> p = off;
    for (int64_t j = 0; j < inner; ++j) {
      fn(o + j, p);
      for (size_t k = 0; k < N; ++k) p[k] += inner_stride[k];
    }
    // advance the outer index
    for (int d = rank - 2; d >= 0; --d) {
      ++idx[d];
      for (size_t k = 0; k < N; ++k) off[k] += strides[k][d];
      if (idx[d] < out[d]) break;
      for (size_t k = 0; k < N; ++k) off[k] -= strides[k][d] * out[d];
      idx[d] = 0;
    }
  }
}

// Infer helper: output i has the dtype and dims of input j.
inline Status SameAsInput(InferContext& ctx, int out = 0, int in = 0) {
  ctx.set_output(out, ctx.input_dtype(in), ctx.input_dims(in));
  return OkStatus();
}

// Reads an optional int64 tensor input (shape, axes, pads...) as a vector; nullopt when the
// input is omitted. At infer time the value may be unknown: `known` is set false then.
inline std::vector<int64_t> InputInts(const InferContext& ctx, int i, bool* known) {
  const Tensor* t = ctx.input_value(i);
  *known = t != nullptr;
  return t ? t->ToInt64Vector() : std::vector<int64_t>{};
}

// Converts between any two element types with ONNX Cast semantics for the numeric types.
template <class To, class From>
inline To ConvertValue(From v) {
  if constexpr (std::is_same_v<To, bool>) {
    return static_cast<float>(v) != 0.0f || (!kIsFloat<From> && v != From{});
  } else if constexpr (kIsHalfLike<To>) {
    return To(static_cast<float>(v));
  } else if constexpr (kIsHalfLike<From>) {
    return static_cast<To>(static_cast<float>(v));
  } else {
    return static_cast<To>(v);
  }
}

}  // namespace kiln::ops
