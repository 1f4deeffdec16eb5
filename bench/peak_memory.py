#!/usr/bin/python3
"""Peak resident memory of kiln's host executor against ONNX Runtime 1.30 on the same models.

Usage: /usr/bin/python3 bench/peak_memory.py [--kiln build/kiln] [--work build/peak_memory]
           [--torchvision convnext_tiny,resnet50,...] [--light DIR] [--iterations 3]

Each model runs `kiln bench MODEL --iterations N` and `node bench/ort_bench.js MODEL --iterations
N` under `/usr/bin/time -f %M` (the peak resident set of the process, load and first run included:
that is when a runtime holds the file, its parsed form and the weights it lays out for its kernels
at once). ONNX Runtime runs inside node, whose own footprint (node with the binding loaded,
measured the same way) is subtracted from its figure; the ratio is kiln / (ORT - node). Models:
torchvision architectures exported here from Debian's torch (opset 17, batch 1, 224 x 224; kept in
WORK/models between runs) and the model-zoo architectures of ../shared/conformance/onnx-light.
The baseline is installed into WORK/node_modules as bench/host_speed.py does. Prints a table;
exits 1 if a model fails on either runtime.
Needs: python3-torch and python3-torchvision (for the exports), node + npm.
"""
import argparse
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from host_speed import ensure_ort  # noqa: E402

DEFAULT_TORCHVISION = ["convnext_tiny", "resnet50", "mobilenet_v3_large", "efficientnet_b0",
                       "regnet_y_800mf", "vit_b_16"]


def peak_kib(cmd):
    """Runs cmd under /usr/bin/time; returns its peak RSS in KiB, or raises with its stderr."""
    r = subprocess.run(["/usr/bin/time", "-f", "PEAK %M", *cmd], capture_output=True, text=True)
    peak = [line for line in r.stderr.splitlines() if line.startswith("PEAK ")]
    if r.returncode != 0 or not peak:
        raise RuntimeError(" ".join(cmd[:2]) + ": " + r.stderr.strip()[-300:])
    return int(peak[-1].split()[1])


def export(names, work):
    out = {}
    todo = [n for n in names if not os.path.exists(os.path.join(work, "models", n + ".onnx"))]
    if todo:
        import torch  # noqa: E402  (Debian's)
        import torchvision  # noqa: E402
        torch.manual_seed(0)
        os.makedirs(os.path.join(work, "models"), exist_ok=True)
        for name in todo:
            print(f"exporting {name}", file=sys.stderr)
            module = getattr(torchvision.models, name)().eval()
            torch.onnx.export(module, (torch.randn(1, 3, 224, 224),),
                              os.path.join(work, "models", name + ".onnx"), opset_version=17,
                              do_constant_folding=True)
    for name in names:
        out[name] = os.path.join(work, "models", name + ".onnx")
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--kiln", default="build/kiln")
    ap.add_argument("--work", default="build/peak_memory")
    ap.add_argument("--torchvision", default=",".join(DEFAULT_TORCHVISION))
    ap.add_argument("--light", default=os.path.join(HERE, "..", "..", "shared", "conformance",
                                                     "onnx-light"))
    ap.add_argument("--iterations", type=int, default=3)
    ap.add_argument("--node", default="node")
    ap.add_argument("--npm", default="npm")
    args = ap.parse_args()
    os.makedirs(args.work, exist_ok=True)
    mods, ort_version = ensure_ort(args.work, args.node, args.npm)
    ort = os.path.join(os.path.abspath(mods), "onnxruntime-node")
    models = export([n for n in args.torchvision.split(",") if n], args.work)
    if args.light and os.path.isdir(args.light):
        for t in sorted(os.listdir(args.light)):
            path = os.path.join(args.light, t, "model.onnx")
            if os.path.exists(path):
                models[t.removeprefix("test_") + " (zoo)"] = path
    node_kib = peak_kib([args.node, "-e", f"require({ort!r})"])
    print(f"ONNX Runtime {ort_version} in node; node with the binding loaded: "
          f"{node_kib / 1024:.0f} MB, subtracted from ORT's figures")
    print(f"{'model':<26}{'file MB':>9}{'kiln MB':>9}{'ORT MB':>9}{'ORT-node':>10}{'kiln/ORT':>10}")
    failed, ratios = 0, []
    n = str(args.iterations)
    for name, path in models.items():
        try:
            k = peak_kib([args.kiln, "bench", path, "--iterations", n])
            o = peak_kib([args.node, os.path.join(HERE, "ort_bench.js"), path, "--iterations", n,
                          "--node-modules", mods])
        except RuntimeError as e:
            print(f"{name:<26} error: {e}")
            failed += 1
            continue
        net = max(o - node_kib, 1)
        ratios.append(k / net)
        print(f"{name:<26}{os.path.getsize(path) / 2**20:>9.0f}{k / 1024:>9.0f}{o / 1024:>9.0f}"
              f"{net / 1024:>10.0f}{k / net:>10.2f}")
    if ratios:
        worst = max(ratios)
        geo = 1.0
        for r in ratios:
            geo *= r ** (1 / len(ratios))
        print(f"worst kiln/(ORT - node) {worst:.2f}, geomean {geo:.2f}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
