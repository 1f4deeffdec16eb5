#!/usr/bin/python3
"""Builds the small models kiln ships in models/ (committed, so running kiln needs no Python).

Weights are seeded random values: the models exercise real architectures, not trained behaviour.
  kws_cnn.onnx    keyword-spotting CNN (DS-CNN style) on a 49x10 MFCC map, 12 classes
  mlp_field.onnx  neural-field MLP: sin/cos positional encoding of a 3-D point, 4x64 hidden, RGB+density
Run: /usr/bin/python3 scripts/make_models.py  (needs Debian's python3-onnx and python3-numpy)
"""
import os
import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "models")
rng = np.random.default_rng(1234)


def init(name, shape, scale=None):
    fan_in = int(np.prod(shape[1:])) if len(shape) > 1 else shape[0]
    scale = scale if scale is not None else (2.0 / fan_in) ** 0.5
    return numpy_helper.from_array((rng.standard_normal(shape) * scale).astype(np.float32), name)


def kws_cnn():
    nodes, inits = [], []
    x = "mfcc"
    ch = 64
    inits += [init("conv1.weight", [ch, 1, 10, 4]), init("conv1.bias", [ch], 0.01)]
    nodes.append(helper.make_node("Conv", [x, "conv1.weight", "conv1.bias"], ["conv1"],
                                  name="conv1", strides=[2, 2], pads=[4, 1, 5, 2]))
    nodes.append(helper.make_node("Relu", ["conv1"], ["relu1"], name="relu1"))
    x = "relu1"
    for i in range(4):
        dw, pw = f"block{i}.dw", f"block{i}.pw"
        inits += [init(dw + ".weight", [ch, 1, 3, 3]), init(dw + ".bias", [ch], 0.01),
                  init(pw + ".weight", [ch, ch, 1, 1]), init(pw + ".bias", [ch], 0.01)]
        nodes.append(helper.make_node("Conv", [x, dw + ".weight", dw + ".bias"], [dw], name=dw,
                                      group=ch, pads=[1, 1, 1, 1]))
        nodes.append(helper.make_node("Relu", [dw], [dw + ".relu"], name=dw + ".relu"))
        nodes.append(helper.make_node("Conv", [dw + ".relu", pw + ".weight", pw + ".bias"], [pw],
                                      name=pw))
        nodes.append(helper.make_node("Relu", [pw], [pw + ".relu"], name=pw + ".relu"))
        x = pw + ".relu"
    nodes.append(helper.make_node("GlobalAveragePool", [x], ["pool"], name="pool"))
    nodes.append(helper.make_node("Flatten", ["pool"], ["flat"], name="flatten", axis=1))
    inits += [init("fc.weight", [12, ch]), init("fc.bias", [12], 0.01)]
    nodes.append(helper.make_node("Gemm", ["flat", "fc.weight", "fc.bias"], ["logits"], name="fc",
                                  transB=1))
    nodes.append(helper.make_node("Softmax", ["logits"], ["probs"], name="softmax", axis=1))
    graph = helper.make_graph(
        nodes, "kws_cnn",
        [helper.make_tensor_value_info("mfcc", TensorProto.FLOAT, [1, 1, 49, 10])],
        [helper.make_tensor_value_info("probs", TensorProto.FLOAT, [1, 12])], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)],
                             producer_name="kiln scripts/make_models.py")


def mlp_field():
    nodes, inits = [], []
    freqs = (2.0 ** np.arange(6) * np.pi).astype(np.float32)  # 6 octaves
    inits.append(numpy_helper.from_array(np.repeat(freqs, 3).reshape(1, 18).astype(np.float32), "enc.freqs"))
    nodes.append(helper.make_node("Tile", ["xyz", "enc.reps"], ["xyz6"], name="enc.tile"))
    inits.append(numpy_helper.from_array(np.array([1, 6], dtype=np.int64), "enc.reps"))
    nodes.append(helper.make_node("Mul", ["xyz6", "enc.freqs"], ["enc.scaled"], name="enc.scale"))
    nodes.append(helper.make_node("Sin", ["enc.scaled"], ["enc.sin"], name="enc.sin"))
    nodes.append(helper.make_node("Cos", ["enc.scaled"], ["enc.cos"], name="enc.cos"))
    nodes.append(helper.make_node("Concat", ["xyz", "enc.sin", "enc.cos"], ["enc"], name="enc.concat", axis=1))
    x, width = "enc", 3 + 36
    for i in range(4):
        inits += [init(f"fc{i}.weight", [width, 64]), init(f"fc{i}.bias", [64], 0.01)]
        nodes.append(helper.make_node("MatMul", [x, f"fc{i}.weight"], [f"fc{i}.mm"], name=f"fc{i}"))
        nodes.append(helper.make_node("Add", [f"fc{i}.mm", f"fc{i}.bias"], [f"fc{i}.out"], name=f"fc{i}.bias"))
        nodes.append(helper.make_node("Relu", [f"fc{i}.out"], [f"fc{i}.relu"], name=f"fc{i}.relu"))
        x, width = f"fc{i}.relu", 64
    inits += [init("head.weight", [64, 4]), init("head.bias", [4], 0.01)]
    nodes.append(helper.make_node("Gemm", [x, "head.weight", "head.bias"], ["head"], name="head"))
    nodes.append(helper.make_node("Sigmoid", ["head"], ["rgba"], name="head.sigmoid"))
    graph = helper.make_graph(
        nodes, "mlp_field",
        [helper.make_tensor_value_info("xyz", TensorProto.FLOAT, ["batch", 3])],
        [helper.make_tensor_value_info("rgba", TensorProto.FLOAT, ["batch", 4])], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)],
                             producer_name="kiln scripts/make_models.py")


if __name__ == "__main__":
    os.makedirs(OUT, exist_ok=True)
    for name, fn in [("kws_cnn", kws_cnn), ("mlp_field", mlp_field)]:
        m = fn()
        onnx.checker.check_model(m, full_check=True)
        path = os.path.join(OUT, name + ".onnx")
        onnx.save(m, path)
        print(f"wrote {path} ({os.path.getsize(path)} bytes)")
