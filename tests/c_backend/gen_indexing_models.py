#!/usr/bin/env python3
"""Writes small ONNX JSON models (DESIGN 2.2) for the C backend's indexing, resize and quantization
emitters: run-time indices, every scatter reduction per dtype, Resize per dtype and mode with
constant scales / sizes / roi, Upsample, the quantization layouts and precisions. Inputs are
random (kiln test-onnx: ints in [0, 16), floats in [-1, 1)); the host executor is the reference.
Usage: gen_indexing_models.py OUT_DIR"""
import base64, json, os, struct, sys

OUT = sys.argv[1]
os.makedirs(OUT, exist_ok=True)
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from onnx_json import T, PACK, Tn, f16bits, tensor, init, vi, attr, node, write_model  # noqa: E402,F401

def model(name, nodes, inputs, outputs, inits=(), opset=19):
    write_model(OUT, name, nodes, inputs, outputs, inits, opset)

# ---- GatherElements / GatherND with run-time indices (random ints in [0, 16))
for it in ('i32', 'i64'):
    model("ge_axis1_" + it, [node("GatherElements", ["d", "i"], ["y"], axis=1)],
          [vi("d", "f32", [3, 16, 2]), vi("i", it, [3, 5, 2])], [vi("y", "f32")])
model("ge_axis0_f16", [node("GatherElements", ["d", "i"], ["y"], axis=-3)],
      [vi("d", "f16", [16, 3, 2]), vi("i", "i64", [4, 2, 2])], [vi("y", "f16")])
model("gnd_b0", [node("GatherND", ["d", "i"], ["y"])],
      [vi("d", "i8", [16, 16, 3]), vi("i", "i64", [5, 2])], [vi("y", "i8")])
model("gnd_b1", [node("GatherND", ["d", "i"], ["y"], batch_dims=1)],
      [vi("d", "f32", [2, 16, 4]), vi("i", "i64", [2, 3, 1])], [vi("y", "f32")])

# ---- Scatter family
for t in ('f32', 'f16', 'i8', 'u16', 'i64', 'b', 'f64'):
    for red in ('none', 'add', 'mul', 'max', 'min'):
        model("se_%s_%s" % (t, red), [node("ScatterElements", ["d", "i", "u"], ["y"], axis=1, reduction=red)],
              [vi("d", t, [3, 16]), vi("i", "i64", [3, 4]), vi("u", t, [3, 4])], [vi("y", t)], opset=18)
        model("snd_%s_%s" % (t, red), [node("ScatterND", ["d", "i", "u"], ["y"], reduction=red)],
              [vi("d", t, [16, 3]), vi("u", t, [2, 3])], [vi("y", t)],
              [init("i", "i64", [2, 1], [3, 9])], opset=18)
model("scatter_old", [node("Scatter", ["d", "i", "u"], ["y"], axis=0)],
      [vi("d", "f32", [16, 3]), vi("i", "i32", [2, 3]), vi("u", "f32", [2, 3])], [vi("y", "f32")], opset=9)
model("snd_k2", [node("ScatterND", ["d", "i", "u"], ["y"])],
      [vi("d", "f32", [16, 16, 2]), vi("i", "i64", [3, 2]), vi("u", "f32", [3, 2])], [vi("y", "f32")])

# ---- OneHot with run-time indices of several types
for it in ('f32', 'i32', 'i64', 'u8', 'f16'):
    model("onehot_" + it, [node("OneHot", ["i", "depth", "v"], ["y"], axis=1)],
          [vi("i", it, [2, 3]), vi("v", "f32", [2])], [vi("y", "f32")],
          [init("depth", "i64", [], [10])], opset=11)

# ---- Range (too large to fold), EyeLike
model("range_big_f32", [node("Range", ["s", "l", "d"], ["y"])], [], [vi("y", "f32")],
      [init("s", "f32", [], [1.5]), init("l", "f32", [], [20001.5]), init("d", "f32", [], [0.75])], opset=11)
model("range_big_i32", [node("Range", ["s", "l", "d"], ["y"])], [], [vi("y", "i32")],
      [init("s", "i32", [], [7]), init("l", "i32", [], [-60000]), init("d", "i32", [], [-3])], opset=11)
# a Range in front of a consumer so there is a graph input
model("range_big_i64_add", [node("Range", ["s", "l", "d"], ["r"]), node("Add", ["r", "x"], ["y"])],
      [vi("x", "i64", [1])], [vi("y", "i64")],
      [init("s", "i64", [], [7]), init("l", "i64", [], [100007]), init("d", "i64", [], [11])], opset=11)
for t, k in (('f32', 0), ('i32', 2), ('f16', -1), ('b', 1), ('f64', -5), ('u8', 9)):
    model("eyelike_%s_%d" % (t, k), [node("EyeLike", ["x"], ["y"], k=k)], [vi("x", t, [4, 6])], [vi("y", t)], opset=9)

# ---- Resize: more dtypes, 3-D / 5-D, scales as constants, opset 10 and Upsample
for t in ('f32', 'f16', 'f64', 'u8', 'i32', 'i8'):
    for mode in ('nearest', 'linear', 'cubic'):
        model("resize_%s_%s" % (t, mode), [node("Resize", ["x", "", "s"], ["y"], mode=mode)],
              [vi("x", t, [1, 2, 5, 7])], [vi("y", t)], [init("s", "f32", [4], [1.0, 1.0, 1.7, 0.6])])
model("resize_linear_5d", [node("Resize", ["x", "", "s"], ["y"], mode="linear", coordinate_transformation_mode="align_corners")],
      [vi("x", "f32", [2, 3, 4, 5, 6])], [vi("y", "f32")], [init("s", "f32", [5], [1.0, 1.0, 1.5, 2.0, 0.5])])
model("resize_nearest_3d_sizes", [node("Resize", ["x", "", "", "sz"], ["y"], mode="nearest", nearest_mode="ceil")],
      [vi("x", "f32", [3, 9, 4])], [vi("y", "f32")], [init("sz", "i64", [3], [3, 4, 11])], opset=13)
model("resize_cubic_aa_u8", [node("Resize", ["x", "", "s"], ["y"], mode="cubic", antialias=1, exclude_outside=1)],
      [vi("x", "u8", [1, 1, 16, 12])], [vi("y", "u8")], [init("s", "f32", [4], [1.0, 1.0, 0.3, 0.45])], opset=18)
model("resize_tf_crop_nearest", [node("Resize", ["x", "roi", "s"], ["y"], mode="nearest",
                                       coordinate_transformation_mode="tf_crop_and_resize", extrapolation_value=7.5)],
      [vi("x", "i16", [1, 1, 6, 6])], [vi("y", "i16")],
      [init("roi", "f32", [8], [0, 0, -0.2, 0.3, 1, 1, 1.3, 0.9]), init("s", "f32", [4], [1.0, 1.0, 1.5, 1.25])], opset=13)
model("resize_tf_crop_linear_f16", [node("Resize", ["x", "roi", "s"], ["y"], mode="linear",
                                          coordinate_transformation_mode="tf_crop_and_resize", extrapolation_value=-2.0)],
      [vi("x", "f16", [1, 1, 6, 6])], [vi("y", "f16")],
      [init("roi", "f32", [8], [0, 0, -0.2, 0.3, 1, 1, 1.3, 0.9]), init("s", "f32", [4], [1.0, 1.0, 1.5, 1.25])], opset=13)
model("resize_op10", [node("Resize", ["x", "s"], ["y"], mode="linear")],
      [vi("x", "f32", [1, 2, 3, 4])], [vi("y", "f32")], [init("s", "f32", [4], [1.0, 1.0, 2.0, 2.5])], opset=10)
model("upsample_op7", [node("Upsample", ["x"], ["y"], mode="nearest", scales=[1.0, 1.0, 2.0, 3.0])],
      [vi("x", "f32", [1, 2, 3, 4])], [vi("y", "f32")], opset=7)
model("upsample_op9_bilinear", [node("Upsample", ["x", "s"], ["y"], mode="linear")],
      [vi("x", "f32", [1, 2, 3, 4])], [vi("y", "f32")], [init("s", "f32", [4], [1.0, 1.0, 2.0, 2.0])], opset=9)
model("resize_identity", [node("Resize", ["x", "", "s"], ["y"], mode="linear")],
      [vi("x", "f32", [1, 2, 3, 4])], [vi("y", "f32")], [init("s", "f32", [4], [1.0, 1.0, 1.0, 1.0])])
model("resize_axes", [node("Resize", ["x", "", "", "sz"], ["y"], mode="cubic", axes=[3, 1], keep_aspect_ratio_policy="not_larger")],
      [vi("x", "f32", [2, 5, 3, 8])], [vi("y", "f32")], [init("sz", "i64", [2], [5, 8])], opset=19)

# ---- Quantization
for xt in ('f32', 'f16', 'f64', 'i32', 'bf16'):
    for st in ('f32', 'f16', 'f64'):
        for yt in ('u8', 'i8', 'i16', 'u16'):
            model("q_%s_%s_%s" % (xt, st, yt), [node("QuantizeLinear", ["x", "s", "z"], ["y"])],
                  [vi("x", xt, [3, 4]), vi("s", st, []), vi("z", yt, [])], [vi("y", yt)], opset=21)
model("q_axis", [node("QuantizeLinear", ["x", "s", "z"], ["y"], axis=1)],
      [vi("x", "f32", [2, 3, 4])], [vi("y", "i8")], [init("s", "f32", [3], [0.01, 0.02, 0.005]), init("z", "i8", [3], [1, -3, 0])], opset=13)
model("q_blocked_nozp", [node("QuantizeLinear", ["x", "s"], ["y"], axis=0, block_size=2)],
      [vi("x", "f32", [5, 3]), vi("s", "f32", [3, 3])], [vi("y", "u8")], opset=21)
for prec in (1, 11, 10, 16):
    model("q_prec_%d" % prec, [node("QuantizeLinear", ["x", "s", "z"], ["y"], precision=prec)],
          [vi("x", "f32", [3, 4])], [vi("y", "i16")], [init("s", "f32", [], [0.003]), init("z", "i16", [], [5])], opset=23)
for xt in ('u8', 'i8', 'i16', 'u16', 'i32'):
    for st in ('f32', 'f16', 'f64'):
        model("dq_%s_%s" % (xt, st), [node("DequantizeLinear", ["x", "s", "z"], ["y"])],
              [vi("x", xt, [3, 4]), vi("s", st, []), vi("z", xt, [])], [vi("y", st)], opset=21)
model("dq_axis_out_f16", [node("DequantizeLinear", ["x", "s", "z"], ["y"], axis=-1, output_dtype=10)],
      [vi("x", "u8", [2, 3, 4])], [vi("y", "f16")], [init("s", "f32", [4], [0.1, 0.2, 0.3, 0.4]), init("z", "u8", [4], [1, 2, 3, 4])], opset=23)
model("dq_blocked", [node("DequantizeLinear", ["x", "s"], ["y"], axis=1, block_size=3)],
      [vi("x", "i8", [2, 7]), vi("s", "f32", [2, 3])], [vi("y", "f32")], opset=21)
model("dynq", [node("DynamicQuantizeLinear", ["x"], ["y", "s", "z"])],
      [vi("x", "f32", [3, 5])], [vi("y", "u8"), vi("s", "f32"), vi("z", "u8")], opset=11)
model("dynq_pos", [node("Relu", ["x"], ["r"]), node("DynamicQuantizeLinear", ["r"], ["y", "s", "z"])],
      [vi("x", "f32", [3, 5])], [vi("y", "u8"), vi("s", "f32"), vi("z", "u8")], opset=11)
