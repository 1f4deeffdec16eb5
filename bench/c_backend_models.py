#!/usr/bin/python3
"""Real models (Debian torch exports, not in the repository) through kiln's embedded C backend.

Each model is exported to ONNX, compiled with `kiln compile --target c`, built with the strict
flags (-std=c99 -Wall -Wextra -Werror -pedantic) and run by kiln's file driver, an outside
application using only the DESIGN.md 2.4 interface; its outputs are compared with the host
executor on the same random inputs (relative L2 <= 1e-4). Includes models with control flow
(scripted loops and branches: ONNX Loop and If) and tensor names with quotes, slashes, colons and
leading digits. With --m4, the small models also run on the emulated Cortex-M4.

Usage: /usr/bin/python3 bench/c_backend_models.py [--kiln build/kiln] [--work build/c_models] [--m4] [names...]
Needs: python3-torch, python3-torchvision, python3-onnx (Debian); gcc; for --m4 the toolchain and
qemu that scripts/setup installs.
"""
import argparse
import os
import re
import subprocess
import sys
import time

import torch
import torch.nn as nn

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import real_models  # noqa: E402  (the model zoo shared with bench/real_models.py)

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


class LoopResidual(nn.Module):
    """A scripted loop (ONNX Loop with a carried value) and a data-dependent branch (If)."""

    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(32, 32)

    def forward(self, x):
        h = x
        for _ in range(4):
            h = torch.tanh(self.lin(h)) + h
        if bool(h.mean() > 0):
            y = h * 2.0
        else:
            y = h - 1.0
        return y


class GruCell(nn.Module):
    """A recurrent net: the exporter emits an ONNX GRU."""

    def __init__(self):
        super().__init__()
        self.gru = nn.GRU(16, 32, batch_first=True)
        self.out = nn.Linear(32, 4)

    def forward(self, x):
        y, _ = self.gru(x)
        return self.out(y[:, -1])


def models():
    zoo = real_models.models()
    pick = ["kws_cnn", "mlp_sincos", "odd_names", "transformer_block", "squeezenet1_1",
            "shufflenet_v2", "mobilenet_v2"]
    out = {k: zoo[k] for k in pick}
    out["mlp_sincos"] = (out["mlp_sincos"][0], [256, 3], {})  # a fixed batch for the C build
    out["loop_if"] = (torch.jit.script(LoopResidual()), [8, 32], {"scripted": True})
    out["gru"] = (GruCell(), [2, 10, 16], {})
    return out


SMALL = {"kws_cnn", "mlp_sincos", "odd_names", "loop_if", "gru"}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--kiln", default="build/kiln")
    ap.add_argument("--work", default="build/c_models")
    ap.add_argument("--m4", action="store_true", help="also run the small models on the emulated Cortex-M4")
    ap.add_argument("names", nargs="*")
    args = ap.parse_args()
    os.makedirs(args.work, exist_ok=True)
    failures = 0
    print(f"{'model':18} {'target':8} {'result':8} {'rel-L2 vs host':>16} {'seconds':>8}")
    for name, (module, shape, opts) in models().items():
        if args.names and name not in args.names:
            continue
        module.eval()
        d = os.path.join(args.work, name)
        os.makedirs(d, exist_ok=True)
        path = os.path.join(d, "model.onnx")
        in_names, out_names = opts.get("names", (["input"], ["output"]))
        x = torch.randn(*shape)
        kwargs = {}
        if opts.get("scripted"):
            kwargs["example_outputs"] = module(x)
        try:
            torch.onnx.export(module, (x,), path, input_names=in_names, output_names=out_names,
                              opset_version=17, do_constant_folding=True)
        except TypeError:
            torch.onnx.export(module, (x,), path, input_names=in_names, output_names=out_names,
                              opset_version=17)
        targets = [("host-cc", [])]
        if args.m4 and name in SMALL:
            targets.append(("m4", ["--cc", os.path.join(ROOT, "tests/cortex_m4/cc"),
                                   "--c-run", os.path.join(ROOT, "tests/cortex_m4/run")]))
        for target, extra in targets:
            t0 = time.time()
            r = subprocess.run([args.kiln, "test-onnx", "-v", "--backend", "c", "--timeout", "1800",
                                *extra, path], capture_output=True, text=True)
            secs = time.time() - t0
            m = re.search(r"rel-L2 ([0-9.e+-]+)", r.stdout)
            ok = r.returncode == 0 and "1 passed" in r.stdout
            failures += not ok
            err = "" if ok else "  " + (r.stdout + r.stderr).strip().splitlines()[0][:300]
            print(f"{name:18} {target:8} {'ok' if ok else 'FAIL':8} {m.group(1) if m else '-':>16} "
                  f"{secs:>8.1f}{err}")
            sys.stdout.flush()
    print("all models match" if failures == 0 else f"{failures} run(s) failed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
