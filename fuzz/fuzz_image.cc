// Any bytes as an encoded image (JPEG, PNG, WebP, TIFF, JPEG 2000, BMP, PNM).
#include "ops/image_codecs.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto image = kiln::ops::DecodeImage(data, size);
  if (image.ok() && !image->rgb.empty()) (void)image->rgb.back();
  return 0;
}
