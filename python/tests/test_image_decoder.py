"""ImageDecoder against Pillow's decoding of the same bytes, over the formats and the pixel layouts
each one stores (palettes, grayscale, alpha, 16-bit samples, text PNM, compressed TIFF), and its
refusal of bad streams."""
import io

import numpy as np
import pytest
from onnx import TensorProto, helper

import kiln

PIL = pytest.importorskip("PIL.Image")


def decoder(pixel_format):
    node = helper.make_node("ImageDecoder", ["x"], ["y"], pixel_format=pixel_format)
    graph = helper.make_graph(
        [node], "decode", [helper.make_tensor_value_info("x", TensorProto.UINT8, ["n"])],
        [helper.make_tensor_value_info("y", TensorProto.UINT8, None)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 20)])
    return kiln.InferenceSession(model.SerializeToString())


def picture(mode, size=(19, 13)):
    """A deterministic image with gradients and noise, in PIL's `mode`."""
    rng = np.random.default_rng(7)
    h, w = size[1], size[0]
    rgb = np.stack([np.linspace(0, 255, w)[None, :].repeat(h, 0),
                    np.linspace(255, 0, h)[:, None].repeat(w, 1),
                    rng.integers(0, 256, (h, w))], axis=2).astype(np.uint8)
    return PIL.fromarray(rgb, "RGB").convert(mode)


def encode(image, fmt, **options):
    buf = io.BytesIO()
    image.save(buf, fmt, **options)
    return np.frombuffer(buf.getvalue(), np.uint8)


CASES = [
    ("PNG", "RGB", {}), ("PNG", "L", {}), ("PNG", "P", {}),
    ("BMP", "RGB", {}), ("BMP", "P", {}), ("BMP", "L", {}),
    ("PPM", "RGB", {}), ("PPM", "L", {}),
    ("TIFF", "RGB", {}), ("TIFF", "RGB", {"compression": "tiff_lzw"}), ("TIFF", "L", {}),
    ("JPEG", "RGB", {"quality": 90}), ("JPEG", "L", {}),
    ("WEBP", "RGB", {"lossless": True}), ("WEBP", "RGB", {"quality": 80}),
    ("JPEG2000", "RGB", {}), ("JPEG2000", "RGB", {"irreversible": True}),
]


@pytest.mark.parametrize("fmt,mode,options", CASES, ids=["%s-%s-%d" % (c[0], c[1], i)
                                                         for i, c in enumerate(CASES)])
def test_pixels_equal_pillows(fmt, mode, options):
    stream = encode(picture(mode), fmt, **options)
    want = np.array(PIL.open(io.BytesIO(stream.tobytes())).convert("RGB"))
    (rgb,) = decoder("RGB").run(None, {"x": stream})
    np.testing.assert_array_equal(rgb, want)
    (bgr,) = decoder("BGR").run(None, {"x": stream})
    np.testing.assert_array_equal(bgr, want[:, :, ::-1])
    (gray,) = decoder("Grayscale").run(None, {"x": stream})
    np.testing.assert_array_equal(gray[:, :, 0], np.array(PIL.fromarray(want).convert("L")))


def test_text_and_sixteen_bit_pnm():
    rgb = np.array(picture("RGB"))
    text = "P3\n# a comment\n%d %d\n255\n" % (rgb.shape[1], rgb.shape[0])
    text += " ".join(str(v) for v in rgb.reshape(-1)) + "\n"
    (y,) = decoder("RGB").run(None, {"x": np.frombuffer(text.encode(), np.uint8)})
    np.testing.assert_array_equal(y, rgb)
    wide = (rgb[:, :, 0].astype(">u2") * 257)
    stream = b"P5\n%d %d\n65535\n" % (wide.shape[1], wide.shape[0]) + wide.tobytes()
    (g,) = decoder("Grayscale").run(None, {"x": np.frombuffer(stream, np.uint8)})
    np.testing.assert_array_equal(g[:, :, 0], rgb[:, :, 0])


@pytest.mark.parametrize("fmt", ["PNG", "JPEG", "BMP", "TIFF", "WEBP", "JPEG2000", "PPM"])
def test_truncated_and_foreign_streams_are_errors(fmt):
    stream = encode(picture("RGB", (64, 48)), fmt)
    sess = decoder("RGB")
    with pytest.raises(kiln.KilnError):
        sess.run(None, {"x": stream[: len(stream) // 2].copy()})
    with pytest.raises(kiln.KilnError, match="not a JPEG, PNG"):
        sess.run(None, {"x": np.frombuffer(b"GIF89a....", np.uint8)})
    sess.run(None, {"x": stream})  # the session still works
