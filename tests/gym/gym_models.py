#!/usr/bin/python3
"""Small ONNX models built with python3-onnx for the gym tests, the example and the bench.

small_model(): Conv/BatchNormalization/Relu/Add/MatMul with an Identity, a duplicate Relu (CSE),
a constant Add of two initializers (fold-constants), a Transpose pair (cancel-transposes), a
MatMul+Add (fuse-matmul-add) and a dead Relu (eliminate-dead-nodes), fixed dims.
other_model(): a different small MLP (for benchmark replacement).
symbolic_model(): an input with a symbolic dim (AddBenchmark must refuse it).
chain_model(n): n nodes in a chain of MatMul/Add/Relu/Identity blocks on [1, 64] (the bench).
"""
import sys

sys.dont_write_bytecode = True

import numpy as np  # noqa: E402
import onnx  # noqa: E402
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

OPSET = 13


def _init(name, arr):
    return numpy_helper.from_array(np.asarray(arr), name)


def _model(nodes, inputs, outputs, inits, name):
    g = helper.make_graph(nodes, name, inputs, outputs, inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", OPSET)],
                          producer_name="kiln-gym-tests")
    m.ir_version = 8
    onnx.checker.check_model(m)
    return m


def small_model(seed=0):
    rng = np.random.default_rng(seed)
    f = np.float32
    C = 4
    inits = [
        _init("w1", rng.standard_normal((C, 3, 3, 3)).astype(f) * 0.2),
        _init("b1", rng.standard_normal(C).astype(f)),
        _init("w2", rng.standard_normal((C, C, 1, 1)).astype(f) * 0.2),
        _init("bn_scale", (rng.random(C) + 0.5).astype(f)),
        _init("bn_bias", rng.standard_normal(C).astype(f)),
        _init("bn_mean", rng.standard_normal(C).astype(f) * 0.1),
        _init("bn_var", (rng.random(C) + 0.5).astype(f)),
        _init("k1", rng.standard_normal((C, 1, 1)).astype(f)),
        _init("k2", rng.standard_normal((C, 1, 1)).astype(f)),
        _init("flat_shape", np.array([1, C * 8 * 8], dtype=np.int64)),
        _init("wm", rng.standard_normal((C * 8 * 8, 10)).astype(f) * 0.05),
        _init("bm", rng.standard_normal(10).astype(f)),
    ]
    nodes = [
        helper.make_node("Conv", ["x", "w1", "b1"], ["c1"], name="conv1", pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c1"], ["r1"], name="relu1"),
        helper.make_node("Relu", ["c1"], ["r1b"], name="relu1_dup"),
        helper.make_node("Identity", ["r1"], ["i1"], name="ident1"),
        helper.make_node("Add", ["i1", "r1b"], ["a1"], name="add1"),
        helper.make_node("Add", ["k1", "k2"], ["kb"], name="const_add"),
        helper.make_node("Add", ["a1", "kb"], ["a2"], name="add2"),
        helper.make_node("Conv", ["a2", "w2"], ["c2"], name="conv2"),
        helper.make_node("BatchNormalization", ["c2", "bn_scale", "bn_bias", "bn_mean", "bn_var"],
                         ["bn"], name="bn"),
        helper.make_node("Relu", ["bn"], ["r2"], name="relu2"),
        helper.make_node("Reshape", ["r2", "flat_shape"], ["flat"], name="flatten"),
        helper.make_node("Transpose", ["flat"], ["t1"], name="t1", perm=[1, 0]),
        helper.make_node("Transpose", ["t1"], ["t2"], name="t2", perm=[1, 0]),
        helper.make_node("MatMul", ["t2", "wm"], ["mm"], name="fc"),
        helper.make_node("Add", ["mm", "bm"], ["y"], name="fc_bias"),
        helper.make_node("Relu", ["x"], ["dead"], name="dead_relu"),
    ]
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 8, 8])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 10])
    return _model(nodes, [x], [y], inits, "gym_small")


def other_model(seed=1):
    rng = np.random.default_rng(seed)
    f = np.float32
    inits = [_init("w", rng.standard_normal((16, 32)).astype(f)),
             _init("b", rng.standard_normal(32).astype(f)),
             _init("w2", rng.standard_normal((32, 4)).astype(f))]
    nodes = [helper.make_node("MatMul", ["x", "w"], ["h"], name="mm1"),
             helper.make_node("Add", ["h", "b"], ["hb"], name="bias1"),
             helper.make_node("Relu", ["hb"], ["r"], name="relu"),
             helper.make_node("MatMul", ["r", "w2"], ["y"], name="mm2")]
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 16])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 4])
    return _model(nodes, [x], [y], inits, "gym_other")


def symbolic_model():
    nodes = [helper.make_node("Relu", ["x"], ["y"], name="relu")]
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 8])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 8])
    return _model(nodes, [x], [y], [], "gym_symbolic")


def chain_model(n=100, width=64, seed=2):
    """Exactly n nodes: blocks of MatMul, Add, Relu, Identity (then the remainder of a block)."""
    rng = np.random.default_rng(seed)
    f = np.float32
    nodes, inits = [], []
    cur = "x"
    kinds = ["MatMul", "Add", "Relu", "Identity"]
    for i in range(n):
        k = kinds[i % 4]
        out = "v%d" % i
        if k == "MatMul":
            w = "w%d" % i
            inits.append(_init(w, rng.standard_normal((width, width)).astype(f) * (1.0 / width)))
            nodes.append(helper.make_node("MatMul", [cur, w], [out], name="n%d" % i))
        elif k == "Add":
            b = "b%d" % i
            inits.append(_init(b, rng.standard_normal(width).astype(f)))
            nodes.append(helper.make_node("Add", [cur, b], [out], name="n%d" % i))
        else:
            nodes.append(helper.make_node(k, [cur], [out], name="n%d" % i))
        cur = out
    nodes[-1].output[0] = "y"
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, width])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, width])
    return _model(nodes, [x], [y], inits, "gym_chain%d" % n)


def to_bytes(m):
    return m.SerializeToString()
