// UTF-8 to and from code points, for the text ops and the .npy unicode type. Strings in ONNX are
// bytes: a byte that does not start a valid UTF-8 sequence decodes as U+FFFD.
#pragma once

#include <string>
#include <string_view>

namespace kiln {

inline constexpr char32_t kReplacementChar = 0xFFFD;

// The code points of `s` (invalid or truncated sequences, overlong forms and surrogates as
// U+FFFD, one per byte skipped).
std::u32string DecodeUtf8(std::string_view s);
// Appends the UTF-8 form of `c` (U+FFFD for a surrogate or a value past U+10FFFF).
void AppendUtf8(char32_t c, std::string* out);
std::string EncodeUtf8(std::u32string_view s);

}  // namespace kiln
