// ImageDecoder: an encoded image (a 1-D uint8 tensor) to its pixels, [H, W, 3] in RGB or BGR order
// or [H, W, 1] luma (ops/image_codecs.h decodes).
#include "ops/common.h"
#include "ops/image_codecs.h"

namespace kiln::ops {
namespace {

// 0 RGB, 1 BGR, 2 Grayscale; -1 for another name.
int PixelFormat(const ir::Node& n) {
  const std::string f = n.attr_string("pixel_format", "RGB");
  return f == "RGB" ? 0 : f == "BGR" ? 1 : f == "Grayscale" ? 2 : -1;
}

Status ImageDecoderInfer(InferContext& ctx) {
  if (PixelFormat(ctx.node()) < 0) return ctx.error("pixel_format must be RGB, BGR or Grayscale");
  if (ctx.input_dtype(0) != DType::kUInt8 || ctx.input_rank(0) != 1)
    return ctx.error("encoded_stream must be a 1-D uint8 tensor");
  ctx.set_output_dynamic(0, DType::kUInt8);  // the dims are in the stream
  return OkStatus();
}

Status ImageDecoderCompute(ComputeContext& ctx) {
  const Tensor& x = ctx.input(0);
  auto image = DecodeImage(x.data<uint8_t>(), static_cast<size_t>(x.size()));
  if (!image.ok()) return ctx.error(image.status().message());
  const int format = PixelFormat(ctx.node());
  const int64_t pixels = image->height * image->width;
  Tensor& y =
      ctx.allocate_output(0, DType::kUInt8, {image->height, image->width, format == 2 ? 1 : 3});
  const uint8_t* rgb = image->rgb.data();
  uint8_t* out = y.data<uint8_t>();
  for (int64_t i = 0; i < pixels; ++i, rgb += 3) {
    if (format == 2) {  // ITU-R 601-2 luma in PIL's fixed point, as the ONNX reference converts
      out[i] =
          static_cast<uint8_t>((rgb[0] * 19595 + rgb[1] * 38470 + rgb[2] * 7471 + 0x8000) >> 16);
    } else {
      out[3 * i] = rgb[format == 1 ? 2 : 0];
      out[3 * i + 1] = rgb[1];
      out[3 * i + 2] = rgb[format == 1 ? 0 : 2];
    }
  }
  return OkStatus();
}

}  // namespace

void RegisterImageOps(OpRegistry& r) {
  r.Register("ImageDecoder", ImageDecoderInfer, ImageDecoderCompute);
}

}  // namespace kiln::ops
