#!/usr/bin/python3
"""Random search over kiln's optimization service (`kiln serve`, the CompilerGym protocol).

Usage:
  /usr/bin/python3 examples/gym/random_search.py [MODEL_OR_URI] [--kiln build/kiln]
      [--address HOST:PORT] [--episodes 20] [--steps 12] [--seed 0]

MODEL_OR_URI is a built-in benchmark (default benchmark://kiln-v0/kws_cnn) or a path to an .onnx
model with fixed input dims (added with AddBenchmark). Without --address the script starts its
own `kiln serve` on a free port and stops it at the end.

Rewards are computed here, on the client side, from observations: for an observation o
(ArenaBytes, CodeSizeBytes) and the baseline b = o after kiln's default pipeline
(fold-constants, eliminate-identities, eliminate-common-subexpressions, cancel-transposes,
eliminate-dead-nodes with planner:default),

    reward_t = (o_{t-1} - o_t) / b

so an episode's return is (o_0 - o_T) / b, and o_T beats the default pipeline when
o_T < b, i.e. when the return exceeds (o_0 - b) / b. The script prints, per objective, the best
action sequence found, its return and its gain over the default pipeline, 1 - o_T / b.
"""
import argparse
import os
import random
import sys

sys.dont_write_bytecode = True
HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(REPO, "tests", "gym"))

import gym_client  # noqa: E402  (stub generation and the kiln serve subprocess)

DEFAULT_PIPELINE = ["fold-constants", "eliminate-identities", "eliminate-common-subexpressions",
                    "cancel-transposes", "eliminate-dead-nodes", "planner:default"]
OBJECTIVES = ["ArenaBytes", "CodeSizeBytes"]


def run_search(c, benchmark, episodes, steps, seed):
    rng = random.Random(seed)
    # The baseline: the observations after the default pipeline.
    sid = c.start(benchmark)
    init = c.observe(sid, *OBJECTIVES)
    _, base = c.step(sid, DEFAULT_PIPELINE, OBJECTIVES)
    c.end(sid)
    print("benchmark %s" % benchmark)
    for o in OBJECTIVES:
        print("  %-14s initial %9d   after the default pipeline (baseline) %9d" % (o, init[o], base[o]))

    # objective -> (actions, return); the empty sequence (the initial state) has return 0.
    best = {o: ([], 0.0) for o in OBJECTIVES}
    for ep in range(episodes):
        sid = c.start(benchmark)
        prev = dict(init)
        ret = {o: 0.0 for o in OBJECTIVES}
        actions = []
        choices = c.actions
        for _ in range(steps):
            a = rng.choice(choices)
            r, obs = c.step(sid, [a], OBJECTIVES)
            if not r.action_had_no_effect:  # the service knows this action changed nothing
                actions.append(a)
            for o in OBJECTIVES:
                reward = (prev[o] - obs[o]) / max(1, base[o])
                ret[o] += reward
                # The best prefix of any episode: a higher return, or as high with fewer actions.
                b_actions, b_ret = best[o]
                if ret[o] > b_ret + 1e-12 or (abs(ret[o] - b_ret) <= 1e-12 and len(actions) < len(b_actions)):
                    best[o] = (list(actions), ret[o])
            prev = obs
            if r.end_of_session:
                # No pass can change the IR any more; kiln keeps the planner and schedule
                # choices selectable (they change the plan only), so go on with those.
                choices = [x for x in c.actions if x.startswith(("planner:", "schedule:"))]
        c.end(sid)
        print("  episode %2d: %2d actions with an effect, return ArenaBytes %+.4f CodeSizeBytes %+.4f"
              % (ep, len(actions), ret["ArenaBytes"], ret["CodeSizeBytes"]))

    print()
    for o in OBJECTIVES:
        actions, ret = best[o]
        final = init[o] - ret * max(1, base[o])
        gain = 1.0 - final / max(1, base[o])
        print("best for %s: return %+.4f, %s %d vs %d after the default pipeline (gain %+.2f%%)"
              % (o, ret, o, round(final), base[o], 100.0 * gain))
        print("  actions: " + (" ".join(actions) if actions else "(none: no sequence beat the initial state)"))
    return best


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("model", nargs="?", default="benchmark://kiln-v0/kws_cnn",
                    help="a benchmark uri or an .onnx path")
    ap.add_argument("--kiln", default=os.path.join(REPO, "build", "kiln"))
    ap.add_argument("--address", help="use a running kiln serve instead of starting one")
    ap.add_argument("--proto", default=gym_client.DEFAULT_PROTO)
    ap.add_argument("--episodes", type=int, default=20)
    ap.add_argument("--steps", type=int, default=12)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()

    server = None
    if args.address:
        class Running:  # the part of KilnServer that connect() uses
            address = args.address
            channel = gym_client.KilnServer.channel
        server = Running()
    else:
        server = gym_client.KilnServer(args.kiln).start()
    try:
        c = gym_client.connect(server, args.proto)
        benchmark = args.model
        if not benchmark.startswith("benchmark://"):
            path = os.path.abspath(benchmark)
            benchmark = "benchmark://random-search/" + os.path.splitext(os.path.basename(path))[0]
            with open(path, "rb") as fh:
                c.add_benchmark(benchmark, contents=fh.read())
        run_search(c, benchmark, args.episodes, args.steps, args.seed)
    finally:
        if isinstance(server, gym_client.KilnServer):
            server.stop()


if __name__ == "__main__":
    main()
