#include "ir/subbyte.h"

namespace kiln {

void UnpackSubByte(DType t, const uint8_t* packed, int64_t n, uint8_t* out) {
  const int bits = SubByteBits(t), per_byte = 8 / bits;
  const unsigned mask = (1u << bits) - 1;
  const bool sign_extend = t == DType::kInt4 || t == DType::kInt2;
  for (int64_t i = 0; i < n; ++i) {
    unsigned v = (packed[i / per_byte] >> ((i % per_byte) * bits)) & mask;
    if (sign_extend && (v >> (bits - 1))) v |= ~mask;
    out[i] = static_cast<uint8_t>(v);
  }
}

void PackSubByte(DType t, const uint8_t* held, int64_t n, uint8_t* packed) {
  const int bits = SubByteBits(t), per_byte = 8 / bits;
  const unsigned mask = (1u << bits) - 1;
  for (int64_t b = 0; b < PackedBytes(t, n); ++b) packed[b] = 0;
  for (int64_t i = 0; i < n; ++i)
    packed[i / per_byte] |= static_cast<uint8_t>((held[i] & mask) << ((i % per_byte) * bits));
}

int64_t WrapToSubByte(DType t, int64_t v) {
  const int bits = SubByteBits(t);
  const int64_t m = int64_t{1} << bits;
  int64_t w = v & (m - 1);
  if ((t == DType::kInt4 || t == DType::kInt2) && w >= m / 2) w -= m;
  return w;
}

void SubByteIntRange(DType t, int64_t* lo, int64_t* hi) {
  const int bits = SubByteBits(t);
  if (t == DType::kInt4 || t == DType::kInt2) {
    *lo = -(int64_t{1} << (bits - 1));
    *hi = (int64_t{1} << (bits - 1)) - 1;
  } else {
    *lo = 0;
    *hi = (int64_t{1} << bits) - 1;
  }
}

}  // namespace kiln
