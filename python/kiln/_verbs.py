"""kiln.compile, kiln.plan, kiln.bundle, kiln.verify, kiln.quantize: the command line's verbs,
run in this process, with its options as keyword arguments (`shapes={"x": [1, 3]}` is
`--shape x=1,3`; `no_reorder=True` is `--no-reorder`; a list repeats an option)."""
import contextlib
import json
import os
import tempfile

from . import _kiln
from ._models import model_arg, model_name

_OPTION_NAMES = {"shapes": "shape", "inputs": "input", "dump_ir_after": "dump-ir-after"}


def _options(options):
    args = []
    for key, value in options.items():
        if value is None or value is False:
            continue
        flag = "--" + _OPTION_NAMES.get(key, key.replace("_", "-"))
        if value is True:
            args.append(flag)
        elif isinstance(value, dict):
            for name, v in value.items():
                if isinstance(v, (list, tuple)):
                    v = ",".join(str(int(d)) for d in v)
                args += [flag, "%s=%s" % (name, os.fspath(v) if isinstance(v, os.PathLike) else v)]
        elif isinstance(value, (list, tuple)):
            for v in value:
                args += [flag, str(os.fspath(v) if isinstance(v, os.PathLike) else v)]
        else:
            args += [flag, str(os.fspath(value) if isinstance(value, os.PathLike) else value)]
    return args


def _run(args, json_on_failure=False):
    rc, out, err = _kiln.run_verb([str(a) for a in args])
    out = out.decode("utf-8", "replace")
    if rc != 0:
        if json_on_failure and out.lstrip().startswith("{"):
            return out  # the verb's report says what failed
        lines = [l for l in err.decode("utf-8", "replace").splitlines() if l.strip()]
        msg = lines[-1] if lines else "kiln %s failed (exit code %d)" % (args[0], rc)
        raise _kiln.KilnError(msg[len("kiln: "):] if msg.startswith("kiln: ") else msg)
    return out


@contextlib.contextmanager
def _model_path(model):
    """A path for the model: its own, or a temporary .onnx file holding its bytes."""
    m = model_arg(model)
    if isinstance(m, str):
        yield m
        return
    with tempfile.TemporaryDirectory(prefix="kiln-") as d:
        path = os.path.join(d, "model.onnx")
        with open(path, "wb") as f:
            f.write(m)
        yield path


def compile(model, target="c", name=None, out=None, **options):
    """`kiln compile`: writes the model for `target` (c, cuda or program) into folder `out`
    (default: NAME_TARGET in the current folder); returns that folder."""
    name = name or model_name(model)
    out = os.fspath(out) if out is not None else "%s_%s" % (name, target)
    with _model_path(model) as path:
        _run(["compile", path, "--target", target, "--name", name, "--out", out]
             + _options(options))
    return out


def plan(model, **options):
    """`kiln plan --json`: the memory plan as a dict (arena_bytes, buffers, ...)."""
    with _model_path(model) as path:
        return json.loads(_run(["plan", path, "--json"] + _options(options)))


def bundle(model, output, **options):
    """`kiln bundle`: packs the model with test vectors into the .bpte `output`; returns it."""
    output = os.fspath(output)
    with _model_path(model) as path:
        _run(["bundle", path, "-o", output] + _options(options))
    return output


def verify(bundle, **options):
    """`kiln verify --json`: runs every test set of a .bpte bundle; returns the report (errors
    per test set and output, `passed` and `failed` counts), failing sets included. A bundle that
    cannot be read or run raises KilnError."""
    return json.loads(_run(["verify", os.fspath(bundle), "--json"] + _options(options),
                           json_on_failure=True))


def quantize(model, output, **options):
    """`kiln quantize`: writes the int8 QDQ .onnx `output` (calibration=, random=, method=, ...);
    returns it."""
    output = os.fspath(output)
    with _model_path(model) as path:
        _run(["quantize", path, "-o", output] + _options(options))
    return output
