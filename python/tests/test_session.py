"""kiln.InferenceSession: ONNX Runtime's calls, NumPy in and out, and the same outputs as
`kiln run`."""
import glob
import os

import numpy as np
import pytest
from onnx import TensorProto, helper

import kiln
from conftest import CONFORMANCE, MODELS


def random_feeds(sess, seed=0, batch=1):
    rng = np.random.default_rng(seed)
    feeds = {}
    for arg in sess.get_inputs():
        dims = [d if isinstance(d, int) else batch for d in arg.shape]
        assert arg.type == "tensor(float)"
        feeds[arg.name] = rng.standard_normal(dims).astype(np.float32)
    return feeds


def kiln_run_outputs(kiln_cli, model, feeds, tmp_path, *extra):
    args = ["run", model, "--output-dir", tmp_path / "out"] + list(extra)
    for name, a in feeds.items():
        path = tmp_path / ("%s.npy" % name.replace("/", "_"))
        np.save(path, a)
        args += ["--input", "%s=%s" % (name, path)]
    kiln_cli(*args)
    return [np.load(p) for p in sorted(glob.glob(str(tmp_path / "out" / "output_*.npy")),
                                       key=lambda p: int(p.rsplit("_", 1)[1][:-4]))]


@pytest.mark.parametrize("model", ["kws_cnn.onnx", "mlp_field.onnx"])
def test_outputs_equal_kiln_run(kiln_cli, tmp_path, model):
    path = os.path.join(MODELS, model)
    sess = kiln.InferenceSession(path)
    feeds = random_feeds(sess, batch=3)
    got = sess.run(None, feeds)
    want = kiln_run_outputs(kiln_cli, path, feeds, tmp_path)
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert g.dtype == w.dtype and g.shape == w.shape
        np.testing.assert_array_equal(g, w)


@pytest.mark.skipif(not os.path.isdir(CONFORMANCE), reason="no conformance suite")
@pytest.mark.parametrize("case", ["test_conv_with_strides_padding", "test_lstm_defaults",
                                  "test_softmax_axis_1", "test_gemm_default_scalar_bias"])
def test_conformance_models_equal_kiln_run(kiln_cli, tmp_path, case):
    from onnx import numpy_helper, TensorProto as TP

    model = os.path.join(CONFORMANCE, case, "model.onnx")
    sess = kiln.InferenceSession(model, threads=2)
    feeds = {}
    for i, arg in enumerate(sess.get_inputs()):
        t = TP()
        with open(os.path.join(CONFORMANCE, case, "test_data_set_0", "input_%d.pb" % i), "rb") as f:
            t.ParseFromString(f.read())
        feeds[arg.name] = numpy_helper.to_array(t)
    got = sess.run(None, feeds)
    want = kiln_run_outputs(kiln_cli, model, feeds, tmp_path, "--threads", "2")
    for g, w in zip(got, want):
        np.testing.assert_array_equal(g, w)


def test_symbolic_dims_follow_each_runs_arrays():
    sess = kiln.InferenceSession(os.path.join(MODELS, "mlp_field.onnx"))
    arg = sess.get_inputs()[0]
    assert any(not isinstance(d, int) for d in arg.shape)
    rows = {}
    table = np.linspace(-1, 1, 300 * 3, dtype=np.float32).reshape(300, 3)
    for n in (1, 5, 300):  # 300 rows stream in tiles, as `kiln run` does
        x = table[:n]
        (y,) = sess.run(None, {arg.name: x})
        assert y.shape[0] == n
        rows[n] = y
    # One row runs on the matrix-vector kernel, more on the GEMM: they may round apart by an ulp.
    np.testing.assert_allclose(rows[5][0], rows[1][0], rtol=1e-6)
    np.testing.assert_array_equal(rows[300][:5], rows[5])


def test_inputs_are_read_in_place_and_never_written():
    # Relu could run in place; the caller's array must keep its values.
    graph = helper.make_graph(
        [helper.make_node("Relu", ["x"], ["r"]), helper.make_node("Neg", ["r"], ["y"])], "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, 8])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4, 8])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    sess = kiln.InferenceSession(model)  # an onnx.ModelProto
    x = np.linspace(-2, 2, 32, dtype=np.float32).reshape(4, 8)
    before = x.copy()
    (y,) = sess.run(["y"], {"x": x})
    np.testing.assert_array_equal(x, before)
    np.testing.assert_array_equal(y, -np.maximum(before, 0))
    # Outputs own their bytes: the next run does not change an earlier result.
    (y2,) = sess.run(None, {"x": -x})
    np.testing.assert_array_equal(y, -np.maximum(before, 0))
    assert not np.shares_memory(y, y2)
    # A non-contiguous array is accepted (copied to C order).
    (y3,) = sess.run(None, {"x": np.asfortranarray(x)})
    np.testing.assert_array_equal(y3, y)


def test_bytes_shapes_pipeline_and_output_names():
    with open(os.path.join(MODELS, "mlp_field.onnx"), "rb") as f:
        data = f.read()
    name = kiln.InferenceSession(data).get_inputs()[0].name
    sess = kiln.InferenceSession(data, shapes={name: [7, 3]}, threads=2,
                                 pipeline={"kiln_pipeline": 1, "passes": ["fold-constants"],
                                           "planner": "greedy-size", "reorder": True})
    assert sess.get_inputs()[0].shape == [7, 3]
    out_name = sess.get_outputs()[0].name
    x = np.ones((7, 3), np.float32)
    (a,) = sess.run([out_name], {name: x})
    (b,) = kiln.InferenceSession(data, kernels="reference").run(None, {name: x})
    np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-5)


def test_errors_are_kiln_errors_with_one_line():
    sess = kiln.InferenceSession(os.path.join(MODELS, "kws_cnn.onnx"))
    name = sess.get_inputs()[0].name
    x = np.zeros((1, 1, 49, 10), np.float32)
    cases = [
        lambda: kiln.InferenceSession(b"not a model"),
        lambda: kiln.InferenceSession("/nonexistent/model.onnx"),
        lambda: kiln.InferenceSession(os.path.join(MODELS, "kws_cnn.onnx"), threads=0),
        lambda: kiln.InferenceSession(os.path.join(MODELS, "kws_cnn.onnx"), shapes={"nope": [1]}),
        lambda: kiln.InferenceSession(os.path.join(MODELS, "kws_cnn.onnx"), kernels="fastest"),
        lambda: sess.run(None, {name: x.astype(np.float64)}),
        lambda: sess.run(None, {name: np.zeros((2, 2), np.float32)}),
        lambda: sess.run(None, {"nope": x}),
        lambda: sess.run(None, {}),
        lambda: sess.run(["nope"], {name: x}),
    ]
    for case in cases:
        with pytest.raises(kiln.KilnError) as e:
            case()
        msg = str(e.value)
        assert msg and "\n" not in msg, msg
    # The session still works after its errors.
    assert sess.run(None, {name: x})[0].shape == (1, 12)


@pytest.mark.skipif(not os.path.isdir(CONFORMANCE), reason="no conformance suite")
def test_eight_bit_floats_go_in_and_out_as_float32():
    cast_to = kiln.InferenceSession(
        os.path.join(CONFORMANCE, "test_cast_FLOAT_to_FLOAT8E4M3FN", "model.onnx"))
    assert cast_to.get_outputs()[0].type == "tensor(float8e4m3fn)"
    x = np.array([[0.5, 465.0, -1e9, np.inf, 1.0625]] * 3, np.float32)
    (y,) = cast_to.run(None, {"input": x})
    assert y.dtype == np.float32
    np.testing.assert_array_equal(y[0], [0.5, 448, -448, 448, 1.0])  # saturated, ties to even
    cast_from = kiln.InferenceSession(
        os.path.join(CONFORMANCE, "test_cast_FLOAT8E4M3FN_to_FLOAT", "model.onnx"))
    (z,) = cast_from.run(None, {cast_from.get_inputs()[0].name: x})
    np.testing.assert_array_equal(z, y)  # float32 input values are rounded as Cast rounds
    with pytest.raises(kiln.KilnError):
        cast_from.run(None, {cast_from.get_inputs()[0].name: x.astype(np.float64)})



@pytest.mark.skipif(not os.path.isdir(CONFORMANCE), reason="no conformance suite")
def test_sub_byte_integers_go_in_and_out_as_their_byte_type():
    sess = kiln.InferenceSession(os.path.join(CONFORMANCE, "test_cast_INT4_to_FLOAT", "model.onnx"))
    assert sess.get_inputs()[0].type == "tensor(int4)"
    x = np.arange(-8, 17, dtype=np.int8).clip(-8, 7).reshape(5, 5)
    (y,) = sess.run(None, {"input": x})
    np.testing.assert_array_equal(y, x.astype(np.float32))
    with pytest.raises(kiln.KilnError):
        sess.run(None, {"input": np.full((5, 5), 8, np.int8)})  # outside INT4
    back = kiln.InferenceSession(os.path.join(CONFORMANCE, "test_cast_FLOAT_to_INT4", "model.onnx"))
    (z,) = back.run(None, {"input": np.array([[-9, -8, 7, 8, 3.0]] * 5, np.float32)})
    assert z.dtype == np.int8
    np.testing.assert_array_equal(z[0], [7, -8, 7, -8, 3])  # Cast wraps into 4 bits


@pytest.mark.skipif(not os.path.isdir(CONFORMANCE), reason="no conformance suite")
def test_strings_go_in_as_str_or_bytes_and_come_out_as_objects(kiln_cli, tmp_path):
    sess = kiln.InferenceSession(os.path.join(CONFORMANCE, "test_string_concat", "model.onnx"))
    assert sess.get_inputs()[0].type == "tensor(string)"
    names = [i.name for i in sess.get_inputs()]
    x = np.array(["caf\u00e9", "\u4e2d"])
    (y,) = sess.run(None, {names[0]: x, names[1]: np.array([b"s", "!"], dtype=object)})
    assert y.dtype == object
    assert y.tolist() == ["caf\u00e9s", "\u4e2d!"]
    with pytest.raises(kiln.KilnError):
        sess.run(None, {names[0]: x, names[1]: np.zeros(2, np.float32)})
    # kiln run reads and writes them as NumPy's unicode arrays.
    np.save(tmp_path / "a.npy", x)
    np.save(tmp_path / "b.npy", np.array(["s", ""]))
    kiln_cli("run", os.path.join(CONFORMANCE, "test_string_concat", "model.onnx"),
             "--input", "%s=%s" % (names[0], tmp_path / "a.npy"),
             "--input", "%s=%s" % (names[1], tmp_path / "b.npy"), "--output-dir", tmp_path / "out")
    out = np.load(tmp_path / "out" / "output_0.npy")
    assert out.tolist() == ["caf\u00e9s", "\u4e2d"]
