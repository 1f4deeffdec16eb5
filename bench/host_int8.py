#!/usr/bin/python3
"""Quantized models on the host: kiln's executor against ONNX Runtime on the same QDQ file.

Usage: /usr/bin/python3 bench/host_int8.py [--kiln build/kiln] [--work build/host_speed]
           [--threads 1,2] [--iterations 200] [--rounds 3] [--samples 16] [MODEL.onnx ...]

Models default to models/kws_cnn.onnx and the other MLPerf Tiny architectures that
scripts/make_mlperf_tiny.py makes (visual wake words MobileNetV1-0.25, ResNet-8, the FC
autoencoder). Each float model is quantized by `kiln quantize MODEL --random N` (QDQ: int8
weights per channel, int8 activations, int32 biases), which both runtimes then load: kiln runs
it on fuse-qdq's integer kernels, ORT (onnxruntime-node, installed into WORK/node_modules as
bench/host_speed.py does) on its own QDQ fusions.
1. Outputs: both run on ORT's inputs (ort_bench.js --dump, then `kiln run --input`); the table
   gives the largest |kiln - ORT| in units of the output's quantization step where the graph's
   output comes out of a DequantizeLinear (the two round some values to neighbouring steps:
   kiln's requantization is TFLite's fixed point, ORT's float), else the absolute difference.
2. Speed: `kiln bench` and `node bench/ort_bench.js` at each thread count, alternating, --rounds
   times, pinned to the same CPUs; each side's figure is the median of its per-round medians.
Needs: python3-onnx, python3-numpy (Debian), node + npm.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

import numpy as np
import onnx
from onnx import numpy_helper

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)
import host_speed  # noqa: E402  (its ORT install, pinning and timing helpers)


def output_step(path):
    """The quantization step of the model's first output where a DequantizeLinear writes it with
    a scalar constant scale, else None."""
    m = onnx.load(path)
    consts = {i.name: numpy_helper.to_array(i) for i in m.graph.initializer}
    out = m.graph.output[0].name
    for n in m.graph.node:
        if out in n.output and n.op_type == "DequantizeLinear" and n.input[1] in consts:
            s = consts[n.input[1]]
            if s.size == 1:
                return float(s.reshape(-1)[0])
    return None


def compare(kiln, node, mods, path, work):
    """The largest |kiln - ORT| over the first output on ORT's inputs, in steps or absolute."""
    d = os.path.join(work, "int8_check", os.path.splitext(os.path.basename(path))[0])
    host_speed.run_json([node, os.path.join(HERE, "ort_bench.js"), path, "--iterations", "1",
                         "--node-modules", mods, "--dump", os.path.join(d, "ort")])
    with open(os.path.join(d, "ort", "inputs.json")) as f:
        names = json.load(f)
    feeds = [a for k, n in enumerate(names)
             for a in ("--input", f"{n}={os.path.join(d, 'ort', f'input_{k}.npy')}")]
    subprocess.run([kiln, "run", path, "--output-dir", os.path.join(d, "kiln"), *feeds],
                   check=True, capture_output=True)
    want = np.load(os.path.join(d, "ort", "output_0.npy")).astype(np.float64)
    got = np.load(os.path.join(d, "kiln", "output_0.npy")).astype(np.float64)
    diff = float(np.max(np.abs(got - want))) if want.size else 0.0
    step = output_step(path)
    return (f"{diff / step:.0f} steps" if step else f"{diff:.2g} abs"), diff, step


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("models", nargs="*")
    p.add_argument("--kiln", default=os.path.join(ROOT, "build", "kiln"))
    p.add_argument("--work", default=os.path.join(ROOT, "build", "host_speed"))
    p.add_argument("--threads", default="1,2")
    p.add_argument("--iterations", type=int, default=200)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--samples", type=int, default=16, help="calibration samples (--random)")
    a = p.parse_args()
    node, npm = "node", "npm"
    os.makedirs(a.work, exist_ok=True)
    mods, version = host_speed.ensure_ort(a.work, node, npm)
    threads = [int(t) for t in a.threads.split(",")]
    with tempfile.TemporaryDirectory() as tmp:
        models = list(a.models)
        if not models:
            subprocess.run([sys.executable, os.path.join(ROOT, "scripts", "make_mlperf_tiny.py"),
                            tmp], check=True, capture_output=True)
            models = [os.path.join(ROOT, "models", "kws_cnn.onnx")] + [
                os.path.join(tmp, n + ".onnx")
                for n in ("vww_mobilenet", "resnet8", "fc_autoencoder")]
        print(f"| model | kiln - ORT | " +
              " | ".join(f"kiln ms ({t}t) | ORT ms ({t}t) | kiln/ORT ({t}t)" for t in threads) +
              f" |  (QDQ from kiln quantize; ORT {version}; {host_speed.cpu_model()[0]})")
        print("|---|---|" + "---|---|---|" * len(threads))
        for model in models:
            q = os.path.join(tmp, os.path.basename(model).replace(".onnx", "_int8.onnx"))
            subprocess.run([a.kiln, "quantize", model, "--random", str(a.samples), "-o", q],
                           check=True, capture_output=True)
            shown, _, _ = compare(a.kiln, node, mods, q, a.work)
            cells = []
            for t in threads:
                k_runs, o_runs = [], []
                for _ in range(a.rounds):
                    k_runs.append(host_speed.time_kiln(a.kiln, q, [], [], t, a.iterations))
                    o_runs.append(host_speed.time_ort(node, mods, q, [], [], t, a.iterations))
                k, o = statistics.median(k_runs), statistics.median(o_runs)
                cells += [f"{k:.3f}", f"{o:.3f}", f"{k / o:.2f}"]
            print(f"| {os.path.basename(model)} | {shown} | " + " | ".join(cells) + " |",
                  flush=True)


if __name__ == "__main__":
    main()
