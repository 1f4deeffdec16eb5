#!/usr/bin/python3
"""Latency of kiln's optimization service (`kiln serve`), server side and client round trip.

Usage: /usr/bin/python3 bench/gym_latency.py [--kiln build/kiln] [--steps 400] [--forks 400]
           [--threads 8] [--throughput-steps 200] [--nodes 100]
Needs: python3-grpcio, python3-protobuf, python3-onnx, python3-numpy, protoc + grpc_python_plugin.
Writes nothing into the repository (the model and the stats files go to a temporary folder).

A generated chain model of --nodes nodes (MatMul / Add / Relu / Identity blocks on [1, 64], fixed
dims) is added as a benchmark. Each measurement runs on a fresh `kiln serve --stats-file F`, so the
server-side times in F (per gRPC method: calls, median_us, p90_us) belong to that measurement only:

  (a) Step: one action plus the ArenaBytes observation, alternating planner:greedy-size and
      planner:tflm so that the plan changes every step;
  (a') the same step, cold: every step on a state the server has not seen (the benchmark is
      replaced before each session), so the plan cannot come from an observation cache;
  (b) ForkSession of a session that has stepped;
  (c) throughput: --threads client threads, one session each, doing (a) steps; Steps/s over the
      wall time of all threads.
"""
import argparse
import json
import os
import statistics
import sys
import tempfile
import threading
import time

sys.dont_write_bytecode = True
HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(REPO, "tests", "gym"))

import gym_client  # noqa: E402
import gym_models  # noqa: E402

URI = "benchmark://gym-bench/chain"
PLANNERS = ["planner:greedy-size", "planner:tflm"]


def pct(xs, p):
    xs = sorted(xs)
    if not xs:
        return float("nan")
    k = (len(xs) - 1) * p
    lo, hi = int(k), min(int(k) + 1, len(xs) - 1)
    return xs[lo] + (xs[hi] - xs[lo]) * (k - lo)


class Bench:
    def __init__(self, kiln, proto, model_bytes, tmp):
        self.kiln, self.proto, self.model, self.tmp = kiln, proto, model_bytes, tmp
        self.n = 0

    def serve(self, fn):
        """Runs fn(client) on a fresh server; returns (fn's result, the server's stats)."""
        self.n += 1
        stats = os.path.join(self.tmp, "stats%d.json" % self.n)
        srv = gym_client.KilnServer(self.kiln, ["--max-sessions", "100000"], stats_file=stats).start()
        try:
            c = gym_client.connect(srv, self.proto)
            c.add_benchmark(URI, contents=self.model)
            out = fn(c)
        finally:
            rc = srv.stop()
        if rc != 0:
            raise RuntimeError("kiln serve exited %s:\n%s" % (rc, "".join(srv.stderr_lines)))
        with open(stats) as fh:
            return out, json.load(fh)


def timed_steps(c, sid, n, arena):
    acts = [c.action(p) for p in PLANNERS]
    times = []
    for i in range(n):
        t0 = time.perf_counter()
        c.step_raw(sid, [acts[i % 2]], [arena])
        times.append((time.perf_counter() - t0) * 1e6)
    return times


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--kiln", default=os.path.join(REPO, "build", "kiln"))
    ap.add_argument("--proto", default=gym_client.DEFAULT_PROTO)
    ap.add_argument("--nodes", type=int, default=100)
    ap.add_argument("--steps", type=int, default=400)
    ap.add_argument("--cold-steps", type=int, default=60)
    ap.add_argument("--forks", type=int, default=400)
    ap.add_argument("--threads", type=int, default=8)
    ap.add_argument("--throughput-steps", type=int, default=200, help="steps per thread")
    args = ap.parse_args()
    kiln = os.path.abspath(args.kiln)
    model = gym_models.to_bytes(gym_models.chain_model(args.nodes))
    rows = []

    with tempfile.TemporaryDirectory(prefix="kiln_gym_bench_") as tmp:
        b = Bench(kiln, args.proto, model, tmp)

        def step_warm(c):
            sid = c.start(URI)
            arena = c.obs("ArenaBytes")
            c.step_raw(sid, [], [arena])  # the first plan, out of the timing
            return timed_steps(c, sid, args.steps, arena)

        client, st = b.serve(step_warm)
        rows.append(("(a) Step: planner action + ArenaBytes", st.get("Step"), client, None))

        def step_cold(c):
            arena = c.obs("ArenaBytes")
            acts = [c.action(p) for p in PLANNERS]
            times = []
            for i in range(args.cold_steps):
                c.add_benchmark(URI, contents=model)  # a new state: nothing cached
                sid = c.start(URI)
                t0 = time.perf_counter()
                c.step_raw(sid, [acts[i % 2]], [arena])
                times.append((time.perf_counter() - t0) * 1e6)
                c.end(sid)
            return times

        client, st = b.serve(step_cold)
        rows.append(("(a') Step, cold state (first plan)", st.get("Step"), client, None))

        def fork(c):
            sid = c.start(URI)
            c.step(sid, ["eliminate-identities", PLANNERS[0]], ["ArenaBytes"])
            times = []
            for _ in range(args.forks):
                t0 = time.perf_counter()
                f = c.fork(sid)
                times.append((time.perf_counter() - t0) * 1e6)
                c.end(f)
            return times

        client, st = b.serve(fork)
        rows.append(("(b) ForkSession", st.get("ForkSession"), client, None))

        def throughput(c):
            arena = c.obs("ArenaBytes")
            sids = [c.start(URI) for _ in range(args.threads)]
            for s in sids:
                c.step_raw(s, [], [arena])
            per = [None] * args.threads
            errors = []

            def worker(k):
                try:
                    per[k] = timed_steps(c, sids[k], args.throughput_steps, arena)
                except Exception as e:  # noqa: BLE001
                    errors.append(e)

            ts = [threading.Thread(target=worker, args=(k,)) for k in range(args.threads)]
            t0 = time.perf_counter()
            for t in ts:
                t.start()
            for t in ts:
                t.join()
            wall = time.perf_counter() - t0
            if errors:
                raise errors[0]
            return [x for p in per for x in p], args.threads * args.throughput_steps / wall

        (client, rate), st = b.serve(throughput)
        rows.append(("(c) Step, %d client threads" % args.threads, st.get("Step"), client, rate))

    print("kiln serve, %d-node chain model (%d bytes), %s" % (args.nodes, len(model), kiln))
    hdr = ("measurement", "timed / server calls", "server median us", "server p90 us", "client median us",
           "client p90 us", "Steps/s")
    print("| " + " | ".join(hdr) + " |")
    print("|" + "|".join(["---"] + ["---:"] * (len(hdr) - 1)) + "|")
    for name, srv, client, rate in rows:
        srv = srv or {}
        print("| %s | %d / %s | %s | %s | %.0f | %.0f | %s |" % (
            name, len(client), srv.get("calls", "-"),
            "%.0f" % srv["median_us"] if "median_us" in srv else "-",
            "%.0f" % srv["p90_us"] if "p90_us" in srv else "-",
            statistics.median(client), pct(client, 0.9),
            "%.0f" % rate if rate else "-"))
    print("(server-side: the handler times of --stats-file, which for Step in (c) and (a') covers"
          " every Step of that run; client: the gRPC round trip from Python)")


if __name__ == "__main__":
    main()
