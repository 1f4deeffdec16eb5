"""Shared by the package's tests: where the repository, its models and the kiln executable are,
and small models made with onnx.helper."""
import os
import subprocess

import numpy as np
import pytest

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
MODELS = os.path.join(REPO, "models")
CONFORMANCE = os.path.join(os.path.dirname(REPO), "shared", "conformance", "onnx-node")
KILN = os.environ.get("KILN", os.path.join(REPO, "build", "kiln"))


@pytest.fixture
def kiln_cli():
    """Runs the kiln executable; returns its CompletedProcess."""
    def run(*args, check=True):
        r = subprocess.run([KILN] + [str(a) for a in args], capture_output=True, text=True)
        if check and r.returncode != 0:
            raise AssertionError("kiln %s: %s" % (" ".join(map(str, args)), r.stderr))
        return r
    return run


def conv_bn_model(channels=8, size=16, blocks=2):
    """Conv -> BatchNormalization -> Relu blocks, as PyTorch exports them in training-preserving
    mode: folding BatchNormalization (not in kiln's default pipeline) is the tuner's to find."""
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(0)
    nodes, inits = [], []
    x = "x"
    for b in range(blocks):
        w = rng.standard_normal((channels, channels if b else 3, 3, 3)).astype(np.float32) * 0.2
        inits.append(numpy_helper.from_array(w, "w%d" % b))
        for p, v in (("scale", 1.0), ("bias", 0.1), ("mean", 0.05), ("var", 1.5)):
            inits.append(numpy_helper.from_array(np.full(channels, v, np.float32), "%s%d" % (p, b)))
        nodes += [
            helper.make_node("Conv", [x, "w%d" % b], ["c%d" % b], pads=[1, 1, 1, 1]),
            helper.make_node("BatchNormalization", ["c%d" % b, "scale%d" % b, "bias%d" % b,
                                                    "mean%d" % b, "var%d" % b], ["n%d" % b]),
            helper.make_node("Relu", ["n%d" % b], ["r%d" % b]),
        ]
        x = "r%d" % b
    graph = helper.make_graph(
        nodes, "conv_bn",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, size, size])],
        [helper.make_tensor_value_info(x, TensorProto.FLOAT, [1, channels, size, size])], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def pytest_configure(config):
    # Debian 12's tornado (under Dask) warns about its own event-loop call.
    config.addinivalue_line("filterwarnings", "ignore:make_current is deprecated:DeprecationWarning")
