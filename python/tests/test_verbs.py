"""kiln.compile / plan / bundle / verify / quantize: the command line's verbs in this process,
with the same results and messages."""
import json
import os

import numpy as np
import pytest

import kiln
from conftest import MODELS, conv_bn_model

KWS = os.path.join(MODELS, "kws_cnn.onnx")
MLP = os.path.join(MODELS, "mlp_field.onnx")


def test_plan_is_kiln_plans_json(kiln_cli):
    for target in (None, "c", "host"):
        extra = ["--target", target] if target else []
        want = json.loads(kiln_cli("plan", KWS, "--json", *extra).stdout)
        got = kiln.plan(KWS, target=target)
        assert got == want
    assert kiln.plan(conv_bn_model())["arena_bytes"] > 0  # an onnx.ModelProto


def test_compile_writes_what_the_cli_writes(kiln_cli, tmp_path):
    # The header records the command, --out by its folder name: the same name in both.
    out = kiln.compile(KWS, target="c", name="kws", out=tmp_path / "py" / "kws")
    cli_out = tmp_path / "cli" / "kws"
    kiln_cli("compile", KWS, "--target", "c", "--name", "kws", "--out", cli_out)
    assert sorted(os.listdir(out)) == sorted(os.listdir(cli_out))
    for f in os.listdir(out):
        with open(os.path.join(out, f), "rb") as a, open(cli_out / f, "rb") as b:
            assert a.read() == b.read(), f
    prog = kiln.compile(MLP, target="program", name="mlp", out=tmp_path / "prog",
                        shapes={"xyz": [2, 3]})
    sess = kiln.InferenceSession(os.path.join(prog, "mlp.kiln"))
    x = np.ones((2, 3), np.float32)
    np.testing.assert_array_equal(sess.run(None, {"xyz": x})[0],
                                  kiln.InferenceSession(MLP).run(None, {"xyz": x})[0])


def test_bundle_verify_and_quantize(tmp_path):
    b = kiln.bundle(MLP, tmp_path / "mlp.bpte", shapes={"xyz": [2, 3]}, random=2)
    report = kiln.verify(b)
    assert report["passed"] == 2 and report["failed"] == 0
    q = kiln.quantize(KWS, tmp_path / "kws_int8.onnx", random=4)
    x = np.zeros((1, 1, 49, 10), np.float32)
    (y,) = kiln.InferenceSession(q).run(None, {"mfcc": x})
    assert y.shape == (1, 12)


def test_verb_errors_are_one_line_kiln_errors(tmp_path):
    cases = [
        lambda: kiln.compile(KWS, target="gpu", out=tmp_path / "x"),
        lambda: kiln.plan(b"\x00garbage"),
        lambda: kiln.plan("/nonexistent.onnx"),
        lambda: kiln.verify(tmp_path / "missing.bpte"),
        lambda: kiln.quantize(KWS, tmp_path / "q.onnx"),  # no calibration data
        lambda: kiln.plan(KWS, planner="nope"),
    ]
    for case in cases:
        with pytest.raises(kiln.KilnError) as e:
            case()
        assert str(e.value) and "\n" not in str(e.value)
    with pytest.raises(TypeError):
        kiln.plan(42)


@pytest.mark.parametrize("precision,bound", [("fp8", 0.08), ("fp4", 0.3)])
def test_programs_store_weights_narrow(tmp_path, precision, bound):
    """A .kiln with FP8 / FP4 weights (a scale per output channel) is smaller than the float one
    and, run on the host, within the format's error of the ONNX model."""
    rng = np.random.default_rng(3)
    for model, feeds in (
            ("mlp_field.onnx", {"xyz": rng.uniform(-1, 1, (256, 3)).astype(np.float32)}),
            ("kws_cnn.onnx", None)):
        path = os.path.join(MODELS, model)
        want_sess = kiln.InferenceSession(path)
        if feeds is None:
            arg = want_sess.get_inputs()[0]
            feeds = {arg.name: rng.standard_normal(arg.shape).astype(np.float32)}
        float_dir = kiln.compile(path, target="program", name="m", out=tmp_path / "f32")
        narrow_dir = kiln.compile(path, target="program", name="m", out=tmp_path / precision,
                                  precision=precision)
        narrow = os.path.join(narrow_dir, "m.kiln")
        assert os.path.getsize(narrow) < 0.45 * os.path.getsize(os.path.join(float_dir, "m.kiln"))
        want = want_sess.run(None, feeds)[0]
        got = kiln.InferenceSession(narrow).run(None, feeds)[0]
        err = np.linalg.norm(got - want) / np.linalg.norm(want)
        assert 0 < err < bound, (model, err)
