#!/usr/bin/python3
"""Bundles of real models (Debian torch exports, not in the repository) with PyTorch's own outputs.

For each model: export to ONNX, run PyTorch on two random inputs, `kiln bundle` the model with
those inputs (--input) and PyTorch's outputs (--expected), then
  - read the .bpte with a reader `flatc --python` generates from the seed schema and check that it
    holds exactly the given inputs and PyTorch's outputs (same bytes, sizes, identity dim_order,
    16-byte aligned data, a .kiln program, method "forward");
  - `kiln verify` it (rtol 1e-4, atol 1e-5): kiln's host executor against PyTorch, worst errors
    and rel-L2 reported;
  - alter one expected value: `kiln verify` must exit 1 with one line; a truncated copy and a
    mislabelled copy must be refused the same way;
  - with --c: `kiln compile F.bpte --target c --bundle F.bpte`, build NAME_verify.c with strict
    flags and run it on the host; with --m4, small models also on the emulated Cortex-M4.

Usage: /usr/bin/python3 bench/bundle_models.py [--kiln build/kiln] [--work build/bundle_models]
                                                [--c] [--m4] [names...]
Needs: python3-torch, python3-torchvision, python3-onnx, python3-numpy, python3-flatbuffers and
flatc (Debian); gcc for --c; the Cortex-M4 toolchain and qemu (scripts/setup) for --m4.
"""
import argparse
import importlib
import json
import os
import subprocess
import sys

import numpy as np
import torch

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "bench"))
sys.path.insert(0, os.path.join(ROOT, "tests", "bundle"))
import c_backend_models  # noqa: E402  (loop_if and gru beside the shared zoo)
import read_bundle  # noqa: E402  (npy and flatbuffers helpers of the interop test)

STRICT = ["-std=c99", "-Wall", "-Wextra", "-Werror", "-pedantic"]
SMALL = {"kws_cnn", "mlp_sincos", "odd_names", "loop_if", "gru"}


def sh(cmd, **kw):
    return subprocess.run(cmd, capture_output=True, text=True, **kw)


def flatc_reader(work):
    gen = os.path.join(work, "reader")
    r = sh(["flatc", "--python", "-o", gen, os.path.join(ROOT, "src/bundle/bundled_program_schema.fbs"),
            os.path.join(ROOT, "src/bundle/scalar_type.fbs")])
    if r.returncode != 0:
        sys.exit("flatc failed: " + r.stderr)
    sys.path.insert(0, gen)
    return (importlib.import_module("bundled_program_flatbuffer.BundledProgram").BundledProgram,
            importlib.import_module("bundled_program_flatbuffer.ValueUnion").ValueUnion,
            importlib.import_module("bundled_program_flatbuffer.Tensor").Tensor)


def check_bundle(path, reader, sets):
    """The bundle holds `sets` ([(inputs, outputs)] of numpy arrays) as a seed-schema reader sees it."""
    BundledProgram, ValueUnion, TensorT = reader
    buf = bytearray(open(path, "rb").read())
    assert BundledProgram.BundledProgramBufferHasIdentifier(buf, 0), "identifier"
    root = BundledProgram.GetRootAs(buf, 0)
    plan = root.ExecutionPlanTests(0)
    assert plan.MethodName() == b"forward", "method"
    program, at = read_bundle.vector_bytes(root, 8)
    assert program[4:8] == b"KILN" and at % 16 == 0, "program"
    assert plan.TestSetsLength() == len(sets), "test set count"
    for k, (ins, outs) in enumerate(sets):
        s = plan.TestSets(k)
        assert s.InputsLength() == len(ins) and s.ExpectedOutputsLength() == len(outs), "counts"
        values = [s.Inputs(i) for i in range(len(ins))] + [s.ExpectedOutputs(i) for i in range(len(outs))]
        for value, want in zip(values, list(ins) + list(outs)):
            assert value.ValType() == ValueUnion.Tensor
            t = TensorT()
            t.Init(value.Val().Bytes, value.Val().Pos)
            assert t.ScalarType() == 6, "FLOAT"
            assert [t.Sizes(d) for d in range(t.SizesLength())] == list(want.shape), "sizes"
            assert [t.DimOrder(d) for d in range(t.DimOrderLength())] == list(range(want.ndim)), "dim_order"
            data, at = read_bundle.vector_bytes(t, 8)
            assert at % 16 == 0, "alignment"
            assert data == np.ascontiguousarray(want, dtype="<f4").tobytes(), "tensor bytes"
    return len(program)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--kiln", default="build/kiln")
    ap.add_argument("--work", default="build/bundle_models")
    ap.add_argument("--c", action="store_true", help="also build and run NAME_verify.c on the host")
    ap.add_argument("--m4", action="store_true", help="and run the small models' NAME_verify.c on the Cortex-M4")
    ap.add_argument("names", nargs="*")
    a = ap.parse_args()
    kiln = os.path.abspath(a.kiln)
    os.makedirs(a.work, exist_ok=True)
    reader = flatc_reader(a.work)
    failures = 0
    print(f"{'model':18} {'bundle B':>9} {'program B':>9} {'max abs':>9} {'max rel':>9} {'rel-L2':>9} "
          f"{'reader':6} {'verify':6} {'altered':7} {'damaged':7} {'C host':6} {'C m4':6}")
    for name, (module, shape, opts) in c_backend_models.models().items():
        if a.names and name not in a.names:
            continue
        module.eval()
        d = os.path.join(a.work, name)
        os.makedirs(d, exist_ok=True)
        model = os.path.join(d, "model.onnx")
        in_names, out_names = opts.get("names", (["input"], ["output"]))
        torch.manual_seed(1)
        xs = [torch.randn(*shape) for _ in range(2)]
        kwargs = {"example_outputs": module(xs[0])} if opts.get("scripted") else {}
        try:
            torch.onnx.export(module, (xs[0],), model, input_names=in_names, output_names=out_names,
                              opset_version=17, do_constant_folding=True, **kwargs)
        except TypeError:
            torch.onnx.export(module, (xs[0],), model, input_names=in_names, output_names=out_names,
                              opset_version=17)
        args = [kiln, "bundle", model, "-o", os.path.join(d, "model.bpte")]
        sets = []
        for k, x in enumerate(xs):
            with torch.no_grad():
                y = module(x).numpy()
            xn = x.numpy()
            np.save(os.path.join(d, f"x{k}.npy"), xn)
            np.save(os.path.join(d, f"y{k}.npy"), y)
            args += ["--input", f"{in_names[0]}={d}/x{k}.npy", "--expected", f"{out_names[0]}={d}/y{k}.npy"]
            sets.append(([xn], [y]))
        row = {"reader": "-", "verify": "-", "altered": "-", "damaged": "-", "c": "-", "m4": "-"}
        r = sh(args)
        if r.returncode != 0:
            print(f"{name:18} bundle failed: {r.stderr.strip()[:200]}")
            failures += 1
            continue
        bpte = os.path.join(d, "model.bpte")
        size = os.path.getsize(bpte)
        try:
            program = check_bundle(bpte, reader, sets)
            row["reader"] = "ok"
        except AssertionError as e:
            program, row["reader"] = 0, "FAIL:" + str(e)
        r = sh([kiln, "verify", bpte, "--rtol", "1e-4", "--atol", "1e-5", "--json"])
        rep = json.loads(r.stdout) if r.stdout.strip().startswith("{") else {"test_sets": []}
        outs = [o for s in rep["test_sets"] for o in s["outputs"]]
        max_abs = max((o["max_abs_error"] for o in outs), default=float("nan"))
        max_rel = max((o["max_rel_error"] for o in outs), default=float("nan"))
        row["verify"] = "pass" if r.returncode == 0 else "FAIL"
        # kiln's own outputs against PyTorch's, as rel-L2 (bench/real_models.py's measure).
        rl2 = 0.0
        for k, x in enumerate(xs):
            out_dir = os.path.join(d, f"run{k}")
            sh([kiln, "run", bpte, "--input", f"{in_names[0]}={d}/x{k}.npy",
                "--output-dir", out_dir])
            got = np.load(os.path.join(out_dir, "output_0.npy")).astype(np.float64).ravel()
            want = sets[k][1][0].astype(np.float64).ravel()
            rl2 = max(rl2, float(np.linalg.norm(got - want) / max(np.linalg.norm(want), 1e-30)))
        # One expected value altered, a truncated copy, a mislabelled copy: exit 1, one line.
        bad = sets[0][1][0].copy()
        bad.flat[bad.size // 2] += 1.0 + abs(bad.flat[bad.size // 2])
        np.save(os.path.join(d, "bad.npy"), bad)
        alt = args[:]
        alt[alt.index(f"{out_names[0]}={d}/y0.npy")] = f"{out_names[0]}={d}/bad.npy"
        alt[alt.index(bpte)] = os.path.join(d, "bad.bpte")
        sh(alt)
        r = sh([kiln, "verify", os.path.join(d, "bad.bpte")])
        row["altered"] = "exit1" if r.returncode == 1 and r.stderr.count("\n") == 1 else "WRONG"
        raw = open(bpte, "rb").read()
        open(os.path.join(d, "trunc.bpte"), "wb").write(raw[: len(raw) // 2])
        mislabelled = bytearray(raw)
        mislabelled[4:8] = b"XXXX"
        open(os.path.join(d, "label.bpte"), "wb").write(bytes(mislabelled))
        ok = all(sh([kiln, "verify", os.path.join(d, f)]).returncode == 1 for f in ("trunc.bpte", "label.bpte"))
        row["damaged"] = "exit1" if ok else "WRONG"
        if a.c:
            gen = os.path.join(d, "c")
            r = sh([kiln, "compile", bpte, "--target", "c", "--bundle", bpte, "--name", "net", "--out", gen])
            if r.returncode != 0:
                row["c"] = "n/a"  # an op the C backend does not emit yet
            else:
                srcs = ["net.c", "net_params.c", "net_verify.c"]
                b = sh(["gcc", *STRICT, "-O2", "-o", "verify", *srcs, "-lm"], cwd=gen)
                run = sh(["./verify"], cwd=gen) if b.returncode == 0 else b
                row["c"] = "pass" if run.returncode == 0 else "FAIL"
                if a.m4 and name in SMALL:
                    m = sh([os.path.join(ROOT, "scripts/cortex_m4_run"), "--timeout", "600", "--", *srcs], cwd=gen)
                    row["m4"] = "pass" if m.returncode == 0 else f"FAIL({m.returncode})"
        bad_row = (row["reader"] != "ok" or row["verify"] != "pass" or row["altered"] != "exit1" or
                   row["damaged"] != "exit1" or row["c"] == "FAIL" or row["m4"].startswith("FAIL"))
        failures += bad_row
        print(f"{name:18} {size:>9} {program:>9} {max_abs:>9.2e} {max_rel:>9.2e} {rl2:>9.2e} {row['reader']:6} "
              f"{row['verify']:6} {row['altered']:7} {row['damaged']:7} {row['c']:6} {row['m4']:6}")
        sys.stdout.flush()
    print("all bundles check out" if failures == 0 else f"{failures} model(s) failed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
