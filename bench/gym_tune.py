#!/usr/bin/python3
"""kiln tune on real models against kiln's default pipeline, and a check that every tuned pipeline
is faithful: `kiln plan --pipeline` reproduces the arena the tuner reported, and the model compiled
with the tuned pipeline computes what the file's graph computes (host executor, rel-L2 <= 1e-4).

The models are exported from Debian's PyTorch the way many exporters leave them: in inference mode
with BatchNormalization kept as its own node and weights behind Identity nodes
(torch.onnx.TrainingMode.PRESERVE). The default pipeline only runs exact passes, so folding
BatchNormalization into the convolution (a rounding change) is the tuner's to find.

Usage: /usr/bin/python3 bench/gym_tune.py [--kiln build/kiln] [--work build/gym_tune] [--budget 60]
Needs: python3-torch, python3-torchvision, python3-onnx (Debian). Prints one table.
"""
import argparse
import json
import os
import subprocess
import sys
import time

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import real_models  # noqa: E402  (the model definitions)

# (model, objectives). CodeSizeBytes compiles the generated C, parameters included: small models only.
PLAN = [
    ("kws_cnn", ["arena", "codesize", "latency"]),
    ("mlp_sincos", ["arena", "codesize", "latency"]),
    ("transformer_block", ["arena", "latency"]),
    ("resnet18", ["arena", "latency"]),
    ("mobilenet_v2", ["arena", "latency"]),
]


def export(name, work):
    module, shape, _ = real_models.models()[name]
    module.eval()
    path = os.path.join(work, name + ".onnx")
    if not os.path.exists(path):
        torch.onnx.export(module, (torch.randn(*shape),), path, input_names=["input"], output_names=["output"],
                          opset_version=17, training=torch.onnx.TrainingMode.PRESERVE)
    return path


def run(args, **kw):
    r = subprocess.run(args, capture_output=True, text=True, **kw)
    if r.returncode != 0:
        raise RuntimeError(" ".join(args) + ": " + (r.stderr.strip() or r.stdout.strip()))
    return r.stdout


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--kiln", default="build/kiln")
    ap.add_argument("--work", default="build/gym_tune")
    ap.add_argument("--budget", type=int, default=60)
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("names", nargs="*")
    args = ap.parse_args()
    kiln = os.path.abspath(args.kiln)
    os.makedirs(args.work, exist_ok=True)
    print(f"{'model':18} {'objective':9} {'default':>12} {'tuned':>12} {'gain':>7} {'s':>6}  "
          f"{'faithful':9} pipeline passes / planner")
    failures = 0
    for name, objectives in PLAN:
        if args.names and name not in args.names:
            continue
        model = export(name, args.work)
        for obj in objectives:
            out = os.path.join(args.work, f"{name}.{obj}.pipeline.json")
            t0 = time.time()
            text = run([kiln, "tune", model, "--objective", obj, "--budget", str(args.budget), "--jobs",
                        str(args.jobs), "--seed", "1", "-q", "-o", out])
            secs = time.time() - t0
            head = text.splitlines()[0]
            default = float(head.split("default pipeline ")[1].split()[0])
            best = float(head.split("best ")[1].split()[0])
            pipe = json.load(open(out))
            faithful = "yes"
            try:
                if obj == "arena":
                    plan = json.loads(run([kiln, "plan", model, "--pipeline", out, "--json"]))
                    if plan["arena_bytes"] != int(best):
                        faithful = f"arena {plan['arena_bytes']}"
                run([kiln, "test-onnx", model, "--reference", "host", "--pipeline", out])
            except RuntimeError as e:
                faithful = "NO"
                print("  ", e, file=sys.stderr)
            failures += faithful != "yes"
            gain = (default - best) / default * 100 if default else 0.0
            unit = "ms" if obj == "latency" else "B"
            fmt = (lambda v: f"{v:.3f} {unit}") if obj == "latency" else (lambda v: f"{int(v)} {unit}")
            print(f"{name:18} {obj:9} {fmt(default):>12} {fmt(best):>12} {gain:6.2f}% {secs:6.1f}  {faithful:9} "
                  f"{' '.join(pipe['passes']) or '-'} / {pipe['planner']}{'' if pipe['reorder'] else ' file-order'}")
            sys.stdout.flush()
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
