#!/usr/bin/python3
"""Memory-planner report: arena / lower bound for every planner on real models, against "no
reuse" (planner none) and the TFLite-Micro-style greedy baseline (tflm), plus the live-byte peak
saved by reordering versus the file's own order.

Usage: /usr/bin/python3 bench/planner.py [--kiln build/kiln] [--work build/real_models]
Models: the PyTorch exports of bench/real_models.py (run it first; missing ones are skipped), the
branchy model-zoo CNNs of ../shared/conformance/onnx-light, and the models kiln ships.
"""
import argparse
import glob
import json
import os
import subprocess
import sys
import time

PLANNERS = ["none", "tflm", "greedy-size", "greedy-conflicts", "coloring", "anneal", "default"]


def plan(kiln, model, planner, extra=()):
    t0 = time.time()
    r = subprocess.run([kiln, "plan", model, "--json", "--planner", planner, *extra],
                       capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError(r.stderr.strip())
    return json.loads(r.stdout), time.time() - t0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--kiln", default="build/kiln")
    ap.add_argument("--work", default="build/real_models")
    args = ap.parse_args()
    models = []
    for name in ["resnet18", "mobilenet_v2", "squeezenet1_1", "shufflenet_v2", "efficientnet_b0",
                 "transformer_block", "kws_cnn", "mlp_sincos"]:
        p = os.path.join(args.work, name, "model.onnx")
        if os.path.exists(p):
            extra = ["--shape", "input=1024,3"] if name == "mlp_sincos" else []
            models.append((name, p, extra))
    for p in sorted(glob.glob("../shared/conformance/onnx-light/*/model.onnx")):
        models.append((os.path.basename(os.path.dirname(p)).replace("test_", "zoo_"), p, []))
    models.append(("shipped_kws_cnn", "models/kws_cnn.onnx", []))
    models.append(("shipped_mlp_field", "models/mlp_field.onnx", ["--shape", "xyz=1024,3"]))

    header = f"{'model':22} {'nodes':>5} {'lower KB':>9} " + " ".join(f"{p:>9}" for p in PLANNERS) + \
             f" {'reorder':>8} {'plan s':>6}"
    print("arena / lower bound per planner (lower bound = largest sum of live bytes in the chosen order)")
    print(header)
    ratios = {p: [] for p in PLANNERS}
    for name, path, extra in models:
        try:
            row, lb, secs, nodes = [], None, 0.0, 0
            for p in PLANNERS:
                j, s = plan(args.kiln, path, p, extra)
                lb = j["lower_bound_bytes"]
                nodes = len(j["schedule"])
                r = j["arena_bytes"] / lb if lb else 1.0
                ratios[p].append(r)
                row.append(r)
                if p == "default":
                    secs = s
                    saved = 1 - j["peak_bytes_schedule"] / max(1, j["peak_bytes_file_order"])
            print(f"{name:22} {nodes:>5} {lb / 1024:>9.1f} " + " ".join(f"{r:>9.3f}" for r in row) +
                  f" {saved * 100:>7.1f}% {secs:>6.2f}")
        except Exception as e:
            print(f"{name:22} FAILED: {str(e)[:150]}")
        sys.stdout.flush()
    print(f"{'mean':22} {'':>5} {'':>9} " +
          " ".join(f"{sum(v) / max(1, len(v)):>9.3f}" for v in ratios.values()))
    print(f"{'worst':22} {'':>5} {'':>9} " + " ".join(f"{max(v or [0]):>9.3f}" for v in ratios.values()))


if __name__ == "__main__":
    main()
