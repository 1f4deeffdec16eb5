#!/usr/bin/python3
"""Builds the MLPerf Tiny architectures kiln's MCU benchmark runs beside models/kws_cnn.onnx (the
DS-CNN keyword spotter), with seeded random weights (real architectures, not trained behaviour).
They are not committed: bench/mcu_int8.py --mlperf-tiny makes them in a scratch folder.
  vww_mobilenet.onnx   visual wake words: MobileNetV1 (width 0.25) on 96x96x3, 2 classes; TF's
                       "same" padding (stride-2 layers pad only after)
  resnet8.onnx         image classification: ResNet-8 on 32x32x3 CIFAR-10, 10 classes (three
                       residual stacks of 16, 32, 64 channels, 1x1 stride-2 shortcuts)
  fc_autoencoder.onnx  anomaly detection: the dense autoencoder on 640 values (128 x4, 8, 128 x4,
                       640; ReLU), MatMul + Add as Keras exports its Dense layers
Run: /usr/bin/python3 scripts/make_mlperf_tiny.py OUT_DIR  (Debian's python3-onnx, python3-numpy)
"""
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

rng = np.random.default_rng(2024)


class Net:
    def __init__(self):
        self.nodes, self.inits = [], []

    def weight(self, name, shape, scale=None):
        fan_in = int(np.prod(shape[1:])) if len(shape) > 1 else shape[0]
        scale = scale if scale is not None else (2.0 / fan_in) ** 0.5
        self.inits.append(numpy_helper.from_array(
            (rng.standard_normal(shape) * scale).astype(np.float32), name))
        return name

    def node(self, op, inputs, name, **attrs):
        self.nodes.append(helper.make_node(op, inputs, [name], name=name, **attrs))
        return name

    def conv(self, x, name, cin, cout, k, stride=1, pads=None, group=1, relu=True):
        w = self.weight(name + ".weight", [cout, cin // group, k, k])
        b = self.weight(name + ".bias", [cout], 0.01)
        pads = pads if pads is not None else [k // 2] * 4
        y = self.node("Conv", [x, w, b], name, strides=[stride, stride], pads=pads, group=group)
        return self.node("Relu", [y], name + ".relu") if relu else y

    def classifier(self, x, channels, classes):
        """Average pool, flatten, a fully connected layer, softmax: "probs"."""
        x = self.node("Flatten", [self.node("GlobalAveragePool", [x], "pool")], "flat", axis=1)
        w = self.weight("fc.weight", [classes, channels])
        b = self.weight("fc.bias", [classes], 0.01)
        self.node("Softmax", [self.node("Gemm", [x, w, b], "logits", transB=1)], "probs", axis=1)

    def model(self, name, x_shape, y_name, y_shape):
        graph = helper.make_graph(
            self.nodes, name, [helper.make_tensor_value_info("x", TensorProto.FLOAT, x_shape)],
            [helper.make_tensor_value_info(y_name, TensorProto.FLOAT, y_shape)], self.inits)
        return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)],
                                 producer_name="kiln scripts/make_mlperf_tiny.py")


def vww_mobilenet():
    n = Net()
    same_s2 = [0, 0, 1, 1]  # TF "same" at stride 2 on an even size: one row and column after
    x = n.conv("x", "conv0", 3, 8, 3, 2, same_s2)
    c = 8
    blocks = [(16, 1), (32, 2), (32, 1), (64, 2), (64, 1), (128, 2)] + [(128, 1)] * 5 + \
        [(256, 2), (256, 1)]
    for i, (out, stride) in enumerate(blocks):
        x = n.conv(x, f"b{i}.dw", c, c, 3, stride, same_s2 if stride == 2 else None, group=c)
        x = n.conv(x, f"b{i}.pw", c, out, 1, 1, [0, 0, 0, 0])
        c = out
    n.classifier(x, c, 2)
    return n.model("vww_mobilenet", [1, 3, 96, 96], "probs", [1, 2])


def resnet8():
    n = Net()
    x = n.conv("x", "conv0", 3, 16, 3)
    c = 16
    for i, out in enumerate([16, 32, 64]):
        stride = 1 if i == 0 else 2
        y = n.conv(x, f"s{i}.a", c, out, 3, stride, [1, 1, 1, 1] if stride == 1 else [0, 0, 1, 1])
        y = n.conv(y, f"s{i}.b", out, out, 3, relu=False)
        short = x if stride == 1 else n.conv(x, f"s{i}.short", c, out, 1, 2, [0, 0, 0, 0],
                                             relu=False)
        x = n.node("Relu", [n.node("Add", [y, short], f"s{i}.add")], f"s{i}.relu")
        c = out
    n.classifier(x, c, 10)
    return n.model("resnet8", [1, 3, 32, 32], "probs", [1, 10])


def fc_autoencoder():
    n = Net()
    x, width = "x", 640
    sizes = [128] * 4 + [8] + [128] * 4 + [640]
    for i, out in enumerate(sizes):
        w = n.weight(f"fc{i}.weight", [width, out], (2.0 / width) ** 0.5)
        b = n.weight(f"fc{i}.bias", [out], 0.01)
        x = n.node("Add", [n.node("MatMul", [x, w], f"fc{i}"), b], f"fc{i}.out")
        if i + 1 < len(sizes):
            x = n.node("Relu", [x], f"fc{i}.relu")
        width = out
    return n.model("fc_autoencoder", [1, 640], x, [1, 640])


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    os.makedirs(sys.argv[1], exist_ok=True)
    for name, fn in [("vww_mobilenet", vww_mobilenet), ("resnet8", resnet8),
                     ("fc_autoencoder", fc_autoencoder)]:
        m = fn()
        onnx.checker.check_model(m, full_check=True)
        path = os.path.join(sys.argv[1], name + ".onnx")
        onnx.save(m, path)
        print(f"wrote {path} ({os.path.getsize(path)} bytes)")
