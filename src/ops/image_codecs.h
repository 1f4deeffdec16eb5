// Encoded images to pixels, for ImageDecoder: JPEG (libjpeg-turbo), PNG (libpng), WebP (libwebp),
// TIFF (libtiff) and JPEG 2000 (OpenJPEG) through their libraries; BMP (uncompressed 24 / 32-bit
// and 8-bit palettes) and PNM (P2, P3, P5, P6) read here. The format is told by the stream's magic
// bytes. Bad bytes are an error, never a crash: every library reports through its error hook.
#pragma once

#include <cstdint>
#include <vector>

#include "support/status.h"

namespace kiln::ops {

// 8-bit RGB pixels, row by row.
struct RgbImage {
  int64_t height = 0, width = 0;
  std::vector<uint8_t> rgb;  // height * width * 3
};

// Refuses images of more than this many pixels (a header can claim anything).
constexpr int64_t kMaxImagePixels = int64_t{1} << 28;

Expected<RgbImage> DecodeImage(const uint8_t* data, size_t size);

}  // namespace kiln::ops
