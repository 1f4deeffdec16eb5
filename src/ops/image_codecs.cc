#include "ops/image_codecs.h"

// clang-format off: jpeglib.h needs stdio.h first
#include <jerror.h>
#include <jpeglib.h>

#include <cstdio>
// clang-format on
#include <openjpeg.h>
#include <png.h>
#include <tiffio.h>
#include <webp/decode.h>

#include <algorithm>
#include <cctype>
#include <csetjmp>
#include <cstdarg>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

namespace kiln::ops {
namespace {

bool StartsWith(const uint8_t* p, size_t n, const char* magic, size_t m) {
  return n >= m && std::memcmp(p, magic, m) == 0;
}

Status CheckPixels(int64_t height, int64_t width, const char* format) {
  if (height <= 0 || width <= 0 || height > kMaxImagePixels / width)
    return Error(std::string(format) + " image of " + std::to_string(width) + " x " +
                 std::to_string(height) + " pixels is empty or too large");
  return OkStatus();
}

Expected<RgbImage> NewImage(int64_t height, int64_t width, const char* format) {
  KILN_RETURN_IF_ERROR(CheckPixels(height, width, format));
  RgbImage img;
  img.height = height;
  img.width = width;
  img.rgb.resize(static_cast<size_t>(height * width * 3));
  return img;
}

// ---- JPEG ---------------------------------------------------------------------------------------

struct JpegError {
  jpeg_error_mgr mgr;
  std::jmp_buf jump;
  char message[JMSG_LENGTH_MAX];
};

[[noreturn]] void JpegFail(j_common_ptr c) {
  auto* e = reinterpret_cast<JpegError*>(c->err);
  (*c->err->format_message)(c, e->message);
  std::longjmp(e->jump, 1);
}

// Warnings pass (as in other decoders), but for data that ends early: no made-up pixels.
void JpegMessage(j_common_ptr c, int level) {
  if (level < 0 && c->err->msg_code == JWRN_JPEG_EOF) JpegFail(c);
}

Expected<RgbImage> DecodeJpeg(const uint8_t* p, size_t n) {
  jpeg_decompress_struct cinfo;
  JpegError err;
  cinfo.err = jpeg_std_error(&err.mgr);
  err.mgr.error_exit = JpegFail;
  err.mgr.emit_message = JpegMessage;
  // The pixels live on the heap behind a pointer set before setjmp: nothing a longjmp skips.
  auto img = std::make_unique<RgbImage>();
  if (setjmp(err.jump)) {
    jpeg_destroy_decompress(&cinfo);
    return Error(std::string("JPEG: ") + err.message);
  }
  jpeg_create_decompress(&cinfo);
  jpeg_mem_src(&cinfo, p, static_cast<unsigned long>(n));
  jpeg_read_header(&cinfo, TRUE);
  cinfo.out_color_space = JCS_RGB;
  Status size = CheckPixels(cinfo.image_height, cinfo.image_width, "JPEG");
  if (!size.ok()) {
    jpeg_destroy_decompress(&cinfo);
    return size;
  }
  jpeg_start_decompress(&cinfo);
  img->height = cinfo.output_height;
  img->width = cinfo.output_width;
  img->rgb.resize(static_cast<size_t>(img->height * img->width * 3));
  while (cinfo.output_scanline < cinfo.output_height) {
    JSAMPROW row = img->rgb.data() + static_cast<size_t>(cinfo.output_scanline) * img->width * 3;
    jpeg_read_scanlines(&cinfo, &row, 1);
  }
  jpeg_finish_decompress(&cinfo);
  jpeg_destroy_decompress(&cinfo);
  return std::move(*img);
}

// ---- PNG, WebP ----------------------------------------------------------------------------------

Expected<RgbImage> DecodePng(const uint8_t* p, size_t n) {
  png_image image;
  std::memset(&image, 0, sizeof(image));
  image.version = PNG_IMAGE_VERSION;
  if (!png_image_begin_read_from_memory(&image, p, n))
    return Error(std::string("PNG: ") + image.message);
  image.format = PNG_FORMAT_RGB;
  auto img = NewImage(image.height, image.width, "PNG");
  if (!img.ok()) {
    png_image_free(&image);
    return img.status();
  }
  if (!png_image_finish_read(&image, nullptr, img->rgb.data(), 0, nullptr))
    return Error(std::string("PNG: ") + image.message);
  return img;
}

Expected<RgbImage> DecodeWebp(const uint8_t* p, size_t n) {
  int width = 0, height = 0;
  if (!WebPGetInfo(p, n, &width, &height)) return Error("WebP: not a valid WebP stream");
  KILN_ASSIGN_OR_RETURN(RgbImage img, NewImage(height, width, "WebP"));
  const int stride = width * 3;
  if (!WebPDecodeRGBInto(p, n, img.rgb.data(), img.rgb.size(), stride))
    return Error("WebP: the stream does not decode");
  return img;
}

// ---- TIFF ---------------------------------------------------------------------------------------

struct MemoryStream {
  const uint8_t* data;
  size_t size, pos;
};

tsize_t TiffRead(thandle_t h, tdata_t buf, tsize_t n) {
  auto* s = static_cast<MemoryStream*>(h);
  const size_t k = std::min(static_cast<size_t>(n), s->size - std::min(s->pos, s->size));
  if (k > 0) std::memcpy(buf, s->data + s->pos, k);
  s->pos += k;
  return static_cast<tsize_t>(k);
}
tsize_t TiffWrite(thandle_t, tdata_t, tsize_t) { return 0; }
toff_t TiffSeek(thandle_t h, toff_t off, int whence) {
  auto* s = static_cast<MemoryStream*>(h);
  const uint64_t base = whence == SEEK_CUR ? s->pos : whence == SEEK_END ? s->size : 0;
  s->pos = static_cast<size_t>(base + off);
  return s->pos;
}
int TiffClose(thandle_t) { return 0; }
toff_t TiffSize(thandle_t h) { return static_cast<MemoryStream*>(h)->size; }
int TiffMap(thandle_t, tdata_t*, toff_t*) { return 0; }
void TiffUnmap(thandle_t, tdata_t, toff_t) {}

// libtiff reports through process-wide handlers: the last error is kept per thread.
thread_local std::string tiff_error;
void TiffError(const char* module, const char* fmt, va_list ap) {
  char buf[256];
  std::vsnprintf(buf, sizeof(buf), fmt, ap);
  tiff_error = buf;
}
void TiffWarning(const char*, const char*, va_list) {}

Expected<RgbImage> DecodeTiff(const uint8_t* p, size_t n) {
  static const bool handlers = [] {
    TIFFSetErrorHandler(TiffError);
    TIFFSetWarningHandler(TiffWarning);
    return true;
  }();
  (void)handlers;
  tiff_error = "the stream does not decode";
  MemoryStream stream{p, n, 0};
  TIFF* tif = TIFFClientOpen("image", "rm", &stream, TiffRead, TiffWrite, TiffSeek, TiffClose,
                             TiffSize, TiffMap, TiffUnmap);
  if (!tif) return Error("TIFF: " + tiff_error);
  std::unique_ptr<TIFF, void (*)(TIFF*)> closer(tif, TIFFClose);
  uint32_t width = 0, height = 0;
  TIFFGetField(tif, TIFFTAG_IMAGEWIDTH, &width);
  TIFFGetField(tif, TIFFTAG_IMAGELENGTH, &height);
  KILN_ASSIGN_OR_RETURN(RgbImage img, NewImage(height, width, "TIFF"));
  std::vector<uint32_t> raster(static_cast<size_t>(width) * height);
  if (!TIFFReadRGBAImageOriented(tif, width, height, raster.data(), ORIENTATION_TOPLEFT, 0))
    return Error("TIFF: " + tiff_error);
  for (size_t i = 0; i < raster.size(); ++i) {
    img.rgb[3 * i] = static_cast<uint8_t>(TIFFGetR(raster[i]));
    img.rgb[3 * i + 1] = static_cast<uint8_t>(TIFFGetG(raster[i]));
    img.rgb[3 * i + 2] = static_cast<uint8_t>(TIFFGetB(raster[i]));
  }
  return img;
}

// ---- JPEG 2000 ----------------------------------------------------------------------------------

OPJ_SIZE_T J2kRead(void* buf, OPJ_SIZE_T n, void* user) {
  auto* s = static_cast<MemoryStream*>(user);
  if (s->pos >= s->size) return static_cast<OPJ_SIZE_T>(-1);
  const size_t k = std::min(static_cast<size_t>(n), s->size - s->pos);
  std::memcpy(buf, s->data + s->pos, k);
  s->pos += k;
  return k;
}
OPJ_OFF_T J2kSkip(OPJ_OFF_T off, void* user) {
  auto* s = static_cast<MemoryStream*>(user);
  const auto to =
      std::clamp<int64_t>(static_cast<int64_t>(s->pos) + off, 0, static_cast<int64_t>(s->size));
  const OPJ_OFF_T moved = to - static_cast<int64_t>(s->pos);
  s->pos = static_cast<size_t>(to);
  return moved;
}
OPJ_BOOL J2kSeek(OPJ_OFF_T off, void* user) {
  auto* s = static_cast<MemoryStream*>(user);
  if (off < 0 || static_cast<uint64_t>(off) > s->size) return OPJ_FALSE;
  s->pos = static_cast<size_t>(off);
  return OPJ_TRUE;
}
void J2kError(const char* msg, void* user) { *static_cast<std::string*>(user) = msg; }
void J2kQuiet(const char*, void*) {}

// A component sample as 8 bits (signed samples shifted to unsigned, wider ones scaled down).
uint8_t J2kSample(const opj_image_comp_t& c, size_t i) {
  int64_t v = c.data[i];
  if (c.sgnd) v += int64_t{1} << (c.prec - 1);
  if (c.prec > 8) v >>= c.prec - 8;
  if (c.prec < 8) v <<= 8 - c.prec;
  return static_cast<uint8_t>(std::clamp<int64_t>(v, 0, 255));
}

Expected<RgbImage> DecodeJpeg2000(const uint8_t* p, size_t n, bool jp2) {
  MemoryStream stream{p, n, 0};
  std::string error = "the stream does not decode";
  using StreamPtr = std::unique_ptr<opj_stream_t, void (*)(opj_stream_t*)>;
  using CodecPtr = std::unique_ptr<opj_codec_t, void (*)(opj_codec_t*)>;
  StreamPtr s(opj_stream_create(OPJ_J2K_STREAM_CHUNK_SIZE, OPJ_TRUE), opj_stream_destroy);
  CodecPtr codec(opj_create_decompress(jp2 ? OPJ_CODEC_JP2 : OPJ_CODEC_J2K), opj_destroy_codec);
  if (!s || !codec) return Error("JPEG 2000: cannot start the decoder");
  opj_stream_set_user_data(s.get(), &stream, nullptr);
  opj_stream_set_user_data_length(s.get(), n);
  opj_stream_set_read_function(s.get(), J2kRead);
  opj_stream_set_skip_function(s.get(), J2kSkip);
  opj_stream_set_seek_function(s.get(), J2kSeek);
  opj_set_error_handler(codec.get(), J2kError, &error);
  opj_set_warning_handler(codec.get(), J2kQuiet, nullptr);
  opj_set_info_handler(codec.get(), J2kQuiet, nullptr);
  opj_dparameters_t params;
  opj_set_default_decoder_parameters(&params);
  if (!opj_setup_decoder(codec.get(), &params)) return Error("JPEG 2000: " + error);
  opj_image_t* raw = nullptr;
  const bool header = opj_read_header(s.get(), codec.get(), &raw);
  std::unique_ptr<opj_image_t, void (*)(opj_image_t*)> image(raw, opj_image_destroy);
  if (!header || !image) return Error("JPEG 2000: " + error);
  KILN_RETURN_IF_ERROR(CheckPixels(static_cast<int64_t>(image->y1) - image->y0,
                                   static_cast<int64_t>(image->x1) - image->x0, "JPEG 2000"));
  if (!opj_decode(codec.get(), s.get(), image.get()) || !opj_end_decompress(codec.get(), s.get()))
    return Error("JPEG 2000: " + error);
  if (image->numcomps < 1) return Error("JPEG 2000: the image has no components");
  const opj_image_comp_t* c = image->comps;
  const int colors = image->numcomps >= 3 ? 3 : 1;
  for (int k = 0; k < colors; ++k)
    if (!c[k].data || c[k].w != c[0].w || c[k].h != c[0].h || c[k].prec < 1 || c[k].prec > 31)
      return Error("JPEG 2000: subsampled or malformed components are not supported");
  KILN_ASSIGN_OR_RETURN(RgbImage img, NewImage(c[0].h, c[0].w, "JPEG 2000"));
  const size_t pixels = static_cast<size_t>(img.height * img.width);
  for (size_t i = 0; i < pixels; ++i)
    for (int k = 0; k < 3; ++k) img.rgb[3 * i + k] = J2kSample(c[colors == 3 ? k : 0], i);
  return img;
}

// ---- BMP, PNM -----------------------------------------------------------------------------------

uint32_t Le(const uint8_t* p, int bytes) {
  uint32_t v = 0;
  for (int i = bytes - 1; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}

Expected<RgbImage> DecodeBmp(const uint8_t* p, size_t n) {
  if (n < 26) return Error("BMP: truncated header");
  const uint32_t pixels_at = Le(p + 10, 4), dib = Le(p + 14, 4);
  const bool core = dib == 12;
  if (!core && (dib < 40 || n < 14 + size_t{dib})) return Error("BMP: unknown header size");
  const int64_t width = core ? Le(p + 18, 2) : static_cast<int32_t>(Le(p + 18, 4));
  const int64_t signed_height = core ? Le(p + 20, 2) : static_cast<int32_t>(Le(p + 22, 4));
  const int bpp = static_cast<int>(core ? Le(p + 24, 2) : Le(p + 28, 2));
  const uint32_t compression = core ? 0 : Le(p + 30, 4);
  const bool bitfields = compression == 3 && bpp == 32 && n >= 66 && Le(p + 54, 4) == 0xFF0000 &&
                         Le(p + 58, 4) == 0xFF00 && Le(p + 62, 4) == 0xFF;
  if ((compression != 0 && !bitfields) ||
      (bpp != 1 && bpp != 4 && bpp != 8 && bpp != 24 && bpp != 32))
    return Error("BMP: only uncompressed 1, 4, 8, 24 and 32-bit images are supported");
  const int64_t height = signed_height < 0 ? -signed_height : signed_height;
  KILN_ASSIGN_OR_RETURN(RgbImage img, NewImage(height, width, "BMP"));
  const uint64_t stride = (static_cast<uint64_t>(width) * bpp + 31) / 32 * 4;
  if (pixels_at > n || stride * height > n - pixels_at) return Error("BMP: truncated pixel data");
  const uint8_t* palette = p + 14 + dib;
  const int entry = core ? 3 : 4;
  uint64_t colors = bpp <= 8 ? (core ? 0 : Le(p + 46, 4)) : 0;
  if (bpp <= 8 && (colors == 0 || colors > (1u << bpp))) colors = 1u << bpp;
  if (bpp <= 8 && palette + colors * entry > p + pixels_at) return Error("BMP: truncated palette");
  for (int64_t y = 0; y < height; ++y) {
    const uint8_t* row = p + pixels_at + stride * (signed_height < 0 ? y : height - 1 - y);
    uint8_t* out = img.rgb.data() + y * width * 3;
    for (int64_t x = 0; x < width; ++x, out += 3) {
      const uint8_t* bgr;
      if (bpp >= 24) {
        bgr = row + x * (bpp / 8);
      } else {
        const uint32_t index = (row[x * bpp / 8] >> (8 - bpp - (x * bpp) % 8)) & ((1u << bpp) - 1);
        if (index >= colors) return Error("BMP: a pixel names a colour past the palette");
        bgr = palette + index * entry;
      }
      out[0] = bgr[2];
      out[1] = bgr[1];
      out[2] = bgr[0];
    }
  }
  return img;
}

// The next header number of a PNM stream (comments skipped); -1 when there is none.
int64_t PnmNumber(const uint8_t* p, size_t n, size_t* at) {
  while (*at < n && (std::isspace(p[*at]) || p[*at] == '#')) {
    if (p[*at] == '#')
      while (*at < n && p[*at] != '\n') ++*at;
    else
      ++*at;
  }
  if (*at >= n || !std::isdigit(p[*at])) return -1;
  int64_t v = 0;
  while (*at < n && std::isdigit(p[*at]) && v < (int64_t{1} << 32)) v = v * 10 + (p[(*at)++] - '0');
  return v;
}

Expected<RgbImage> DecodePnm(const uint8_t* p, size_t n) {
  const char kind = static_cast<char>(p[1]);
  const bool ascii = kind == '2' || kind == '3', color = kind == '3' || kind == '6';
  size_t at = 2;
  const int64_t width = PnmNumber(p, n, &at), height = PnmNumber(p, n, &at);
  const int64_t maxval = PnmNumber(p, n, &at);
  if (width < 0 || height < 0 || maxval < 1 || maxval > 65535) return Error("PNM: bad header");
  KILN_ASSIGN_OR_RETURN(RgbImage img, NewImage(height, width, "PNM"));
  if (!ascii) ++at;  // the one whitespace byte before binary samples
  const int channels = color ? 3 : 1, bytes = maxval > 255 ? 2 : 1;
  const int64_t samples = height * width * channels;
  if (!ascii && (at > n || static_cast<uint64_t>(samples) * bytes > n - at))
    return Error("PNM: truncated pixel data");
  for (int64_t i = 0; i < samples; ++i) {
    int64_t v;
    if (ascii) {
      v = PnmNumber(p, n, &at);
      if (v < 0) return Error("PNM: truncated pixel data");
    } else {
      v = bytes == 2 ? (p[at + 2 * i] << 8) | p[at + 2 * i + 1] : p[at + i];
    }
    const auto value = static_cast<uint8_t>((std::min(v, maxval) * 255 + maxval / 2) / maxval);
    if (color) {
      img.rgb[i] = value;
    } else {
      std::fill_n(img.rgb.data() + 3 * i, 3, value);
    }
  }
  return img;
}

}  // namespace

Expected<RgbImage> DecodeImage(const uint8_t* p, size_t n) {
  if (StartsWith(p, n, "\xFF\xD8\xFF", 3)) return DecodeJpeg(p, n);
  if (StartsWith(p, n, "\x89PNG\r\n\x1A\n", 8)) return DecodePng(p, n);
  if (StartsWith(p, n, "RIFF", 4) && n >= 12 && std::memcmp(p + 8, "WEBP", 4) == 0)
    return DecodeWebp(p, n);
  if (StartsWith(p, n, "II*\0", 4) || StartsWith(p, n, "MM\0*", 4)) return DecodeTiff(p, n);
  if (StartsWith(p, n, "\0\0\0\x0CjP  \r\n\x87\n", 12)) return DecodeJpeg2000(p, n, true);
  if (StartsWith(p, n, "\xFF\x4F\xFF\x51", 4)) return DecodeJpeg2000(p, n, false);
  if (StartsWith(p, n, "BM", 2)) return DecodeBmp(p, n);
  if (n >= 2 && p[0] == 'P' && p[1] >= '2' && p[1] <= '6' && p[1] != '4') return DecodePnm(p, n);
  return Error("not a JPEG, PNG, WebP, TIFF, JPEG 2000, BMP or PNM stream");
}

}  // namespace kiln::ops
