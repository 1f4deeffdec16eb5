#!/usr/bin/python3
"""kiln.tune on a Dask LocalCluster: time-to-best and total time at 1, 2 and 4 worker processes,
against the single-process search (kiln.tune without a client, one thread) in the same run.

Time-to-best is when the search first scored the value it ends with (from kiln.tune's progress
callback); every run uses the same seed, so with a deterministic objective every row must reach
the same best pipeline, which the script checks. The cluster's start is not counted.

The models are the Conv -> BatchNormalization -> Relu stacks PyTorch exports in training-preserving
mode (python/tests/conftest.py makes them with onnx.helper), where CodeSizeBytes rewards folding
BatchNormalization, and models/kws_cnn.onnx.

Usage: PYTHONPATH=build/python /usr/bin/python3 bench/dask_tune.py [--budget 60] [--workers 1,2,4]
Needs: python3-distributed, python3-onnx (Debian). Prints one table.
"""
import argparse
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(REPO, "python", "tests"))

import kiln  # noqa: E402
from conftest import conv_bn_model  # noqa: E402


def timed_tune(model, objective, budget, seed, client=None):
    start = time.perf_counter()
    seen = []  # (seconds, best so far) after each evaluation

    def progress(done, total, best):
        seen.append((time.perf_counter() - start, best))

    r = kiln.tune(model, objective=objective, budget=budget, seed=seed, client=client,
                  progress=progress)
    total = time.perf_counter() - start
    final = min(b for _, b in seen)
    to_best = next(t for t, b in seen if b == final)
    return r, to_best, total


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--budget", type=int, default=60)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--workers", default="1,2,4")
    args = ap.parse_args()
    from distributed import Client, LocalCluster

    cases = [
        ("conv_bn 2x8ch 16x16", conv_bn_model(8, 16, 2), "codesize"),
        ("conv_bn 4x16ch 32x32", conv_bn_model(16, 32, 4), "codesize"),
        ("kws_cnn", os.path.join(REPO, "models", "kws_cnn.onnx"), "codesize"),
    ]
    workers = [int(w) for w in args.workers.split(",")]
    print("| model | objective | evaluations | one process: to best / total s | "
          + " | ".join("%d workers" % w for w in workers) + " |")
    print("|---|---|---:|---:|" + "---:|" * len(workers))
    clusters = {}
    failures = 0
    try:
        for w in workers:
            cluster = LocalCluster(n_workers=w, threads_per_worker=1, processes=True,
                                   dashboard_address=":0")
            clusters[w] = (cluster, Client(cluster))
        for name, model, objective in cases:
            base, b_best, b_total = timed_tune(model, objective, args.budget, args.seed)
            cells = []
            for w in workers:
                r, t_best, t_total = timed_tune(model, objective, args.budget, args.seed,
                                                clusters[w][1])
                same = r["pipeline"] == base["pipeline"]
                failures += not same
                cells.append("%.2f / %.2f (%.2fx)%s" % (t_best, t_total, b_total / t_total,
                                                       "" if same else " DIFFERENT RESULT"))
            print("| %s | %s | %d | %.2f / %.2f | %s |" % (
                name, objective, base["evaluations"], b_best, b_total, " | ".join(cells)),
                flush=True)
    finally:
        for cluster, client in clusters.values():
            client.close()
            cluster.close()
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
