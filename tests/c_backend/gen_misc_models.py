#!/usr/bin/env python3
"""Writes small ONNX JSON models (DESIGN 2.2) for the C backend's misc emitters (emit_misc.cc):
GridSample (modes, paddings, align_corners, 4-D / 5-D, dtypes), AffineGrid, DFT / STFT (lengths
that are and are not powers of two, onesided, inverse, axis, windows), MelWeightMatrix with run-time
edges, Det, Trilu / ReverseSequence with run-time k / sequence_lens, and the ai.onnx.ml ops.
Inputs are random (kiln test-onnx: ints in [0, 16), floats in [-1, 1)); the host executor is the
reference. Values outside [-1, 1), NaN and infinities come from nodes (Mul, Div of casts).
Usage: gen_misc_models.py OUT_DIR"""
import base64, json, math, os, struct, sys

OUT = sys.argv[1]
os.makedirs(OUT, exist_ok=True)
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from onnx_json import T, PACK, Tn, f16bits, tensor, init, vi, attr, node, write_model  # noqa: E402,F401

def ml(op, ins, outs, **attrs):
    return node(op, ins, outs, domain="ai.onnx.ml", **attrs)

def model(name, nodes, inputs, outputs, inits=(), opset=19, ml_opset=None):
    write_model(OUT, name, nodes, inputs, outputs, inits, opset, ml_opset)

def scaled(src, dst, t, k):
    """dst = src * k (a constant), to reach values outside [-1, 1)."""
    return [node("Mul", [src, dst + "_k"], [dst])], [init(dst + "_k", t, [], [k])]

def odd_floats(a, b, dst, t='f32'):
    """dst = float(a) / float(b) for int inputs a, b: fractions, NaN (0 / 0) and infinities."""
    return [node("Cast", [a], [a + "_f"], to=T[t]), node("Cast", [b], [b + "_f"], to=T[t]),
            node("Div", [a + "_f", b + "_f"], [dst])]

# ---- GridSample
for mode16, mode20 in (("nearest", "nearest"), ("bilinear", "linear"), ("bicubic", "cubic")):
    for pad in ("zeros", "border", "reflection"):
        for align in (0, 1):
            nodes, inits = scaled("g", "gs", "f32", 1.7)
            model("gs2d_%s_%s_a%d" % (mode20, pad, align),
                  nodes + [node("GridSample", ["x", "gs"], ["y"], mode=mode16, padding_mode=pad, align_corners=align)],
                  [vi("x", "f32", [2, 3, 5, 4]), vi("g", "f32", [2, 6, 7, 2])], [vi("y", "f32")], inits, opset=16)
            if mode20 != "cubic":
                nodes, inits = scaled("g", "gs", "f32", 1.5)
                model("gs3d_%s_%s_a%d" % (mode20, pad, align),
                      nodes + [node("GridSample", ["x", "gs"], ["y"], mode=mode20, padding_mode=pad, align_corners=align)],
                      [vi("x", "f32", [1, 2, 3, 4, 5]), vi("g", "f32", [1, 2, 3, 4, 3])], [vi("y", "f32")], inits, opset=20)
for t, gt in (("f64", "f64"), ("f16", "f32"), ("f32", "f16")):
    nodes, inits = scaled("g", "gs", gt, 1.3)
    model("gs2d_%s_grid_%s" % (t, gt), nodes + [node("GridSample", ["x", "gs"], ["y"], mode="linear", padding_mode="reflection")],
          [vi("x", t, [1, 2, 4, 4]), vi("g", gt, [1, 3, 5, 2])], [vi("y", t)], inits, opset=20)
# infinities and NaN in the grid
model("gs2d_inf_grid", odd_floats("a", "b", "g") + [node("GridSample", ["x", "g"], ["y"], mode="bilinear", padding_mode="reflection")],
      [vi("x", "f32", [1, 2, 3, 3]), vi("a", "i32", [1, 4, 4, 2]), vi("b", "i32", [1, 4, 4, 2])], [vi("y", "f32")], opset=16)
model("gs2d_inf_grid_border", odd_floats("a", "b", "g") + [node("GridSample", ["x", "g"], ["y"], mode="nearest", padding_mode="border")],
      [vi("x", "f32", [1, 2, 3, 3]), vi("a", "i32", [1, 4, 4, 2]), vi("b", "i32", [1, 4, 4, 2])], [vi("y", "f32")], opset=16)

# ---- AffineGrid
for r, size in ((2, [2, 3, 4, 5]), (3, [2, 3, 3, 4, 2]), (2, [1, 1, 1, 6])):
    for align in (0, 1):
        for t in ("f32", "f64"):
            model("affine%dd_%s_a%d_%s" % (r, "x".join(map(str, size)), align, t),
                  [node("AffineGrid", ["theta", "size"], ["y"], align_corners=align)],
                  [vi("theta", t, [size[0], r, r + 1])], [vi("y", t)], [init("size", "i64", [len(size)], size)], opset=20)

# ---- DFT (opset 17 axis attribute, opset 20 axis input)
for t in ("f32", "f64", "f16"):
    for n in (8, 6, 5):
        for c in (1, 2):
            for inv, one in ((0, 0), (0, 1), (1, 0), (1, 1)):
                if one and c == 2 and not inv: continue  # onesided needs a real input
                name = "dft_%s_n%d_c%d_inv%d_one%d" % (t, n, c, inv, one)
                model(name, [node("DFT", ["x"], ["y"], axis=1, inverse=inv, onesided=one)],
                      [vi("x", t, [2, n, 3, c])], [vi("y", t)], opset=17)
for L in (4, 12, 16):
    model("dft_len%d" % L, [node("DFT", ["x", "len"], ["y"], axis=2)], [vi("x", "f32", [2, 3, 7, 2])], [vi("y", "f32")],
          [init("len", "i64", [], [L])], opset=17)
    model("dft20_len%d_axis0" % L, [node("DFT", ["x", "len", "axis"], ["y"], onesided=1)], [vi("x", "f32", [9, 2, 1])],
          [vi("y", "f32")], [init("len", "i64", [], [L]), init("axis", "i64", [], [0])], opset=20)
model("dft20_default", [node("DFT", ["x"], ["y"], inverse=1)], [vi("x", "f32", [3, 10, 2])], [vi("y", "f32")], opset=20)
model("dft20_irfft_len", [node("DFT", ["x", "len", "axis"], ["y"], inverse=1, onesided=1)], [vi("x", "f32", [2, 5, 2])],
      [vi("y", "f32")], [init("len", "i64", [], [7]), init("axis", "i64", [], [-2])], opset=20)

# ---- STFT
for t in ("f32", "f64"):
    for c in (1, 2):
        for one in (0, 1):
            if one and c == 2: continue
            model("stft_win_%s_c%d_one%d" % (t, c, one), [node("STFT", ["x", "step", "w"], ["y"], onesided=one)],
                  [vi("x", t, [2, 20, c]), vi("w", t, [8])], [vi("y", t)], [init("step", "i64", [], [3])], opset=17)
            model("stft_len_%s_c%d_one%d" % (t, c, one), [node("STFT", ["x", "step", "", "len"], ["y"], onesided=one)],
                  [vi("x", t, [1, 17, c])], [vi("y", t)], [init("step", "i64", [], [4]), init("len", "i64", [], [6])], opset=17)
model("stft_short_window", [node("STFT", ["x", "step", "w", "len"], ["y"])], [vi("x", "f32", [1, 16, 1]), vi("w", "f32", [5])],
      [vi("y", "f32")], [init("step", "i64", [], [2]), init("len", "i64", [], [7])], opset=17)
model("stft_hann", [node("HannWindow", ["n"], ["w"]), node("STFT", ["x", "step", "w"], ["y"])], [vi("x", "f32", [2, 32, 1])],
      [vi("y", "f32")], [init("n", "i64", [], [16]), init("step", "i64", [], [8])], opset=17)

# ---- windows (constant size: folded or evaluated), MelWeightMatrix with run-time edges
for op in ("HannWindow", "HammingWindow", "BlackmanWindow"):
    for per in (0, 1):
        for dt in (1, 11, 7):
            model("%s_p%d_t%d" % (op.lower(), per, dt), [node(op, ["n"], ["w"], periodic=per, output_datatype=dt),
                  node("Identity", ["w"], ["y"])], [vi("x", "f32", [1])], [vi("y", [k for k, v in T.items() if v == dt][0])],
                  [init("n", "i64", [], [10])], opset=17)
for dt in (1, 11, 6):
    model("mel_runtime_t%d" % dt,
          [node("Mul", ["lo", "k1"], ["lo1"]), node("Add", ["lo1", "k1"], ["lo2"]),
           node("Mul", ["hi", "k2"], ["hi1"]), node("Add", ["hi1", "k3"], ["hi2"]),
           node("MelWeightMatrix", ["nmel", "dl", "rate", "lo2", "hi2"], ["y"], output_datatype=dt)],
          [vi("lo", "f32", []), vi("hi", "f32", [])], [vi("y", [k for k, v in T.items() if v == dt][0])],
          [init("nmel", "i64", [], [8]), init("dl", "i64", [], [64]), init("rate", "i64", [], [8000]),
           init("k1", "f32", [], [100.0]), init("k2", "f32", [], [500.0]), init("k3", "f32", [], [3000.0])], opset=17)

# ---- Det
for t in ("f32", "f64", "f16"):
    for dims in ([3, 3], [2, 4, 4], [5, 1, 1], [2, 2, 6, 6]):
        model("det_%s_%s" % (t, "x".join(map(str, dims))), [node("Det", ["x"], ["y"])], [vi("x", t, dims)], [vi("y", t)])
# a singular matrix (equal rows)
model("det_singular", [node("Concat", ["x", "x"], ["m"], axis=1), node("Det", ["m"], ["y"])], [vi("x", "f32", [3, 2, 4])], [vi("y", "f32")])

# ---- Trilu / ReverseSequence at run time
for upper in (0, 1):
    for t in ("f32", "i64", "u8"):
        model("trilu_rt_u%d_%s" % (upper, t), [node("Sub", ["k", "eight"], ["k2"]), node("Trilu", ["x", "k2"], ["y"], upper=upper)],
              [vi("x", t, [2, 5, 7]), vi("k", "i64", [])], [vi("y", t)], [init("eight", "i64", [], [8])], opset=14)
    model("trilu_const_u%d" % upper, [node("Trilu", ["x", "k"], ["y"], upper=upper)], [vi("x", "f32", [6, 4])], [vi("y", "f32")],
          [init("k", "i64", [], [-1])], opset=14)
    model("trilu_nok_u%d" % upper, [node("Trilu", ["x"], ["y"], upper=upper)], [vi("x", "f16", [3, 3, 5])], [vi("y", "f16")], opset=14)
model("revseq_batch1", [node("ReverseSequence", ["x", "lens"], ["y"], batch_axis=1, time_axis=0)],
      [vi("x", "f32", [16, 4, 3]), vi("lens", "i64", [4])], [vi("y", "f32")])
model("revseq_batch0", [node("ReverseSequence", ["x", "lens"], ["y"], batch_axis=0, time_axis=1)],
      [vi("x", "i16", [3, 16]), vi("lens", "i64", [3])], [vi("y", "i16")])
model("revseq_const", [node("ReverseSequence", ["x", "lens"], ["y"], batch_axis=0, time_axis=1)],
      [vi("x", "f32", [3, 5, 2])], [vi("y", "f32")], [init("lens", "i64", [3], [5, 0, 3])])

# ---- ai.onnx.ml
for t in ("f32", "f64", "i64", "i32"):
    model("binarizer_%s" % t, [ml("Binarizer", ["x"], ["y"], threshold=0.25 if t[0] == "f" else 7.5)],
          [vi("x", t, [3, 4])], [vi("y", t)], ml_opset=1)
    model("scaler_%s" % t, [ml("Scaler", ["x"], ["y"], offset=[0.5, -1.0, 2.0], scale=[2.0, 0.25, -1.5])],
          [vi("x", t, [4, 3])], [vi("y", "f32")], ml_opset=1)
    model("scaler1_%s" % t, [ml("Scaler", ["x"], ["y"], offset=[0.5], scale=[3.0])], [vi("x", t, [2, 5])], [vi("y", "f32")], ml_opset=1)
    for norm in ("MAX", "L1", "L2"):
        model("normalizer_%s_%s" % (norm, t), [ml("Normalizer", ["x"], ["y"], norm=norm)], [vi("x", t, [3, 5])], [vi("y", "f32")], ml_opset=1)
    for post in ("NONE", "SOFTMAX", "LOGISTIC", "SOFTMAX_ZERO"):
        model("linreg_%s_%s" % (post.lower(), t), [ml("LinearRegressor", ["x"], ["y"], targets=3, post_transform=post,
              coefficients=[0.1 * i - 0.4 for i in range(12)], intercepts=[0.5, -0.25, 0.0])],
              [vi("x", t, [2, 4])], [vi("y", "f32")], ml_opset=1)
    model("afe_%s" % t, [ml("ArrayFeatureExtractor", ["x", "i"], ["y"])], [vi("x", t, [2, 3, 16]), vi("i", "i64", [5])],
          [vi("y", t)], ml_opset=1)
model("linreg_probit", [node("Mul", ["x", "k"], ["xs"]), ml("LinearRegressor", ["xs"], ["y"], targets=2, post_transform="PROBIT",
      coefficients=[0.1, 0.2, -0.1, 0.05], intercepts=[0.5, 0.4])], [vi("x", "f32", [3, 2])], [vi("y", "f32")],
      [init("k", "f32", [], [1.0])], ml_opset=1)
model("linreg_1d", [ml("LinearRegressor", ["x"], ["y"], coefficients=[0.5, -1.0, 2.0])], [vi("x", "f32", [3])], [vi("y", "f32")], ml_opset=1)
model("imputer_f32_nan", odd_floats("a", "b", "x") + [ml("Imputer", ["x"], ["y"], imputed_value_floats=[1.5, -2.0, 3.25])],
      [vi("a", "i32", [4, 3]), vi("b", "i32", [4, 3])], [vi("y", "f32")], ml_opset=1)
model("imputer_f32_value", [node("Cast", ["a"], ["x"], to=1), ml("Imputer", ["x"], ["y"], imputed_value_floats=[9.0], replaced_value_float=3.0)],
      [vi("a", "i32", [4, 3])], [vi("y", "f32")], ml_opset=1)
model("imputer_i64", [ml("Imputer", ["x"], ["y"], imputed_value_int64s=[100, 200, 300], replaced_value_int64=5)],
      [vi("x", "i64", [5, 3])], [vi("y", "i64")], ml_opset=1)
# LabelEncoder: int64 -> float, float -> int64 (NaN / inf keys), tensor keys / values
model("labelenc_i64_f32", [ml("LabelEncoder", ["x"], ["y"], keys_int64s=[3, 1, 4, 1, 5, 9, 2, 6], values_floats=[0.5, 1.5, 2.5, 3.5, 4.5, 5.5, 6.5, 7.5],
      default_float=-7.0)], [vi("x", "i64", [4, 4])], [vi("y", "f32")], ml_opset=2)
model("labelenc_f32_i64", odd_floats("a", "b", "x") + [ml("LabelEncoder", ["x"], ["y"],
      keys_tensor=Tn("f32", [0.5, 1.0, 2.0, float("inf"), float("nan"), 0.0, 3.0]), values_int64s=[10, 20, 30, 40, 50, 60, 70])],
      [vi("a", "i32", [4, 4]), vi("b", "i32", [4, 4])], [vi("y", "i64")], ml_opset=2)
model("labelenc_f32_nodefault_nan", odd_floats("a", "b", "x") + [ml("LabelEncoder", ["x"], ["y"], keys_floats=[1.0, 2.0], values_floats=[-1.0, -2.0])],
      [vi("a", "i32", [3, 4]), vi("b", "i32", [3, 4])], [vi("y", "f32")], ml_opset=2)
model("labelenc_tensor_i32_f64", [ml("LabelEncoder", ["x"], ["y"], keys_tensor=Tn("i32", [0, 2, 4, 6, 8]), values_tensor=Tn("f64", [0.1, 0.2, 0.3, 0.4, 0.5]),
      default_tensor=Tn("f64", [9.5]))], [vi("x", "i32", [10])], [vi("y", "f64")], ml_opset=4)
model("labelenc_tensor_i64_i16", [ml("LabelEncoder", ["x"], ["y"], keys_tensor=Tn("i64", [1, 3, 5]), values_tensor=Tn("i16", [-100, 200, -300]))],
      [vi("x", "i64", [2, 6])], [vi("y", "i16")], ml_opset=4)

# TreeEnsemble (ml opset 5): two trees over 3 features, every mode, a set membership, NaN routing
def tree_model(name, agg, post, xt="f32", targets=2, scale=1.0, split_t="f32", missing=True, positive=False):
    # node: (feature, mode, split, true_id, true_leaf, false_id, false_leaf)
    nodes = [(0, 0, 0.5, 1, 0, 2, 0),   # 0: x0 <= 0.5
             (1, 1, 0.25, 0, 1, 1, 1),  # 1: x1 < 0.25 -> leaf 0 / leaf 1
             (2, 6, 0.0, 2, 1, 3, 0),   # 2: x2 in {1, 2, 5} -> leaf 2, else node 3
             (1, 4, 2.0, 3, 1, 4, 1),   # 3: x1 == 2 -> leaf 3 / leaf 4
             (2, 2, 1.5, 5, 1, 5, 0),   # 4: x2 >= 1.5 -> leaf 5 / node 5   (tree 2 root)
             (0, 3, -0.5, 6, 1, 6, 0),  # 5: x0 > -0.5 -> leaf 6 / node 6
             (1, 5, 3.0, 7, 1, 8, 1)]   # 6: x1 != 3 -> leaf 7 / leaf 8
    weights = [0.1, -0.2, 0.3, 0.25, -0.15, 0.05, 0.2, -0.1, 0.35]
    if positive: weights = [abs(w) for w in weights]
    model(name, odd_floats("a", "b", "x", xt) + [node("Mul", ["x", "k"], ["xs"]), ml("TreeEnsemble", ["xs"], ["y"],
          nodes_featureids=[n[0] for n in nodes], nodes_modes=Tn("u8", [n[1] for n in nodes]),
          nodes_splits=Tn(split_t, [n[2] for n in nodes]), nodes_truenodeids=[n[3] for n in nodes],
          nodes_trueleafs=[n[4] for n in nodes], nodes_falsenodeids=[n[5] for n in nodes], nodes_falseleafs=[n[6] for n in nodes],
          **({"nodes_missing_value_tracks_true": [1, 0, 0, 1, 0, 1, 0]} if missing else {}),
          membership_values=Tn(split_t, [1.0, 2.0, 5.0, float("nan")]), leaf_targetids=[i % targets for i in range(9)],
          leaf_weights=Tn(split_t, [w * scale for w in weights]), tree_roots=[0, 4], n_targets=targets,
          aggregate_function=agg, post_transform=post)],
          [vi("a", "i32", [6, 3]), vi("b", "i32", [6, 3])], [vi("y", xt)], [init("k", xt, [], [1.0])], ml_opset=5)
for agg in range(4):
    for post in range(5):
        tree_model("tree_agg%d_post%d" % (agg, post), agg, post, positive=post == 4, targets=1 if post == 4 else 2)
tree_model("tree_f64", 1, 0, xt="f64", split_t="f64")
tree_model("tree_f64_splits_f32x", 1, 2, xt="f32", split_t="f64", missing=False)
tree_model("tree_targets3", 3, 1, targets=3)
tree_model("tree_f16", 0, 2, xt="f16", split_t="f32")

# ---- too large to fold (over 65536 elements): evaluated at compile time by the emitter
model("hann_large", [node("HannWindow", ["n"], ["w"]), node("Identity", ["w"], ["y"])], [vi("x", "f32", [1])], [vi("y", "f32")],
      [init("n", "i64", [], [70000])], opset=17)
model("mel_large", [node("MelWeightMatrix", ["nmel", "dl", "rate", "lo", "hi"], ["y"])], [vi("x", "f32", [1])], [vi("y", "f32")],
      [init("nmel", "i64", [], [80]), init("dl", "i64", [], [2048]), init("rate", "i64", [], [16000]),
       init("lo", "f32", [], [20.0]), init("hi", "f32", [], [7600.0])], opset=17)
