#!/usr/bin/python3
"""Several `kiln serve` replicas behind one client that spreads sessions round-robin.

Usage: /usr/bin/python3 tests/gym/test_replicas.py KILN [--proto PROTO] [--replicas 3]

Checks (exits non-zero on any failure):
- every replica answers the same GetSpaces and GetVersion;
- a benchmark added through the client reaches every replica;
- sessions started round-robin land on every replica in turn;
- the same episode on each replica gives the same deterministic observations (every space the
  server flags deterministic, CodeSizeBytes included), step by step, and the same
  action_had_no_effect / end_of_session;
- killing one replica (SIGKILL) leaves the others serving: its sessions answer UNAVAILABLE, the
  client drops it, new sessions go round-robin over the rest, the other replicas' sessions go on,
  and each remaining replica's remaining_sessions is right; the survivors exit 0 on SIGTERM.
"""
import argparse
import json
import os
import tempfile
import subprocess
import sys

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import grpc  # noqa: E402

import gym_client  # noqa: E402
import gym_models  # noqa: E402
from checks import Checks  # noqa: E402

SMALL = "benchmark://gym-test/small"
EPISODE = ["fold-constants", "eliminate-identities", "planner:greedy-conflicts",
           "eliminate-common-subexpressions", "fold-batchnorm", "planner:anneal", "cancel-transposes",
           "fuse-matmul-add", "eliminate-dead-nodes", "schedule:file-order", "planner:coloring"]


class RoundRobin:
    """Sessions spread over replicas in turn; a session's calls go to the replica that holds it."""

    def __init__(self, clients):
        self.clients = list(clients)   # GymClient per replica
        self.alive = list(range(len(self.clients)))
        self.next = 0
        self.where = {}                # (replica, session id) handle -> replica
        self.open = {i: set() for i in range(len(self.clients))}

    def add_benchmark(self, uri, contents):
        for i in self.alive:
            self.clients[i].add_benchmark(uri, contents=contents)

    def start(self, benchmark):
        while self.alive:
            i = self.alive[self.next % len(self.alive)]
            self.next += 1
            try:
                sid = self.clients[i].start(benchmark)
            except grpc.RpcError as e:
                if e.code() == grpc.StatusCode.UNAVAILABLE:
                    self.drop(i)
                    continue
                raise
            self.open[i].add(sid)
            return (i, sid)
        raise RuntimeError("no replica left")

    def drop(self, i):
        if i in self.alive:
            self.alive.remove(i)

    def step(self, h, actions, observations):
        try:
            return self.clients[h[0]].step(h[1], actions, observations)
        except grpc.RpcError as e:
            if e.code() == grpc.StatusCode.UNAVAILABLE:
                self.drop(h[0])
                self.open[h[0]].clear()
            raise

    def end(self, h):
        self.open[h[0]].discard(h[1])
        return self.clients[h[0]].end(h[1])


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("kiln")
    ap.add_argument("--proto", default=gym_client.DEFAULT_PROTO)
    ap.add_argument("--replicas", type=int, default=3)
    args = ap.parse_args()
    kiln = os.path.abspath(args.kiln)
    ck = Checks()
    n = args.replicas
    servers = []
    try:
        for _ in range(n):
            servers.append(gym_client.KilnServer(kiln).start())
        print("replicas at " + ", ".join(s.address for s in servers))
        clients = [gym_client.connect(s, args.proto) for s in servers]
        rr = RoundRobin(clients)
        ck.section("same spaces", same_spaces, ck, clients)
        ck.section("benchmarks everywhere", benchmarks_everywhere, ck, rr)
        ck.section("same episode on each replica", same_episode, ck, rr, n)
        ck.section("kiln tune across the replicas", tune_across, ck, kiln, servers)
        ck.section("kill one replica", kill_one, ck, rr, servers, n)
    finally:
        rcs = []
        for k, s in enumerate(servers):
            if s.proc is not None and s.proc.poll() is None:
                rcs.append((k, s.stop()))
        ck.section_name = "shutdown"
        print("== shutdown")
        for k, rc in rcs:
            ck.equal(rc, 0, "replica %d exits 0 on SIGTERM" % k)
    ck.finish()


def same_spaces(ck, clients):
    first = clients[0]
    for k, c in enumerate(clients[1:], 1):
        ck.check(c.spaces == first.spaces, "replica %d: the same GetSpaces as replica 0" % k)
        ck.check(c.version() == first.version(), "replica %d: the same GetVersion as replica 0" % k)


def benchmarks_everywhere(ck, rr):
    rr.add_benchmark(SMALL, gym_models.to_bytes(gym_models.small_model()))
    for k in rr.alive:
        ck.check(SMALL in rr.clients[k].benchmarks(), "replica %d lists %s" % (k, SMALL))


def same_episode(ck, rr, n):
    c0 = rr.clients[0]
    # Every deterministic space but CortexM4Instructions, which builds for and runs on the
    # emulated board (seconds per step; tests/gym_test.cc covers it).
    det = [s.name for s in c0.obs_spaces if s.deterministic and s.name != "CortexM4Instructions"]
    ck.check("IrSha1" in det and "ArenaBytes" in det and "Runtime" not in det,
             "deterministic spaces: " + ", ".join(det))
    for bench in (SMALL, "benchmark://kiln-v0/kws_cnn"):
        handles = [rr.start(bench) for _ in range(n)]
        ck.equal(sorted(h[0] for h in handles), list(range(n)),
                 "%d sessions of %s round-robin: one per replica" % (n, bench))
        traces = []
        for h in handles:
            trace = [rr.step(h, [], det)[1]]
            for a in EPISODE:
                if a not in c0.actions:
                    continue
                r, v = rr.step(h, [a], det)
                trace.append((a, r.action_had_no_effect, r.end_of_session, v))
            traces.append(trace)
        for k in range(1, n):
            diff = [t[0] if isinstance(t, tuple) else "initial" for t, u in zip(traces[k], traces[0]) if t != u]
            ck.check(not diff, "%s: replica %d's episode = replica 0's (%d steps, every deterministic space)"
                     % (bench, handles[k][0], len(traces[0]) - 1), "differs after: %s" % diff)
        for h in handles:
            left = rr.end(h)
            ck.equal(left, len(rr.open[h[0]]), "replica %d remaining_sessions" % h[0])


def tune_across(ck, kiln, servers):
    """kiln tune spreading its workers over the replicas finds what the in-process tuner finds."""
    with tempfile.TemporaryDirectory() as tmp:
        model = os.path.join(tmp, "m.onnx")
        with open(model, "wb") as f:
            f.write(gym_models.to_bytes(gym_models.small_model()))
        outs = []
        for extra in ([a for s in servers for a in ("--connect", s.address)], []):
            out = os.path.join(tmp, "p%d.json" % len(outs))
            r = subprocess.run([kiln, "tune", model, "--objective", "arena", "--budget", "24", "--jobs",
                                str(len(servers)), "--seed", "3", "-q", "-o", out] + extra,
                               capture_output=True, text=True, timeout=120)
            ck.check(r.returncode == 0, "kiln tune %s exits 0" % ("--connect x%d" % len(servers) if extra else
                                                                  "(in-process)"), r.stderr.strip())
            outs.append(open(out).read() if os.path.exists(out) else None)
        ck.check(outs[0] is not None and outs[0] == outs[1],
                 "the same seed gives the same pipeline across replicas and in-process")


def kill_one(ck, rr, servers, n):
    handles = [rr.start(SMALL) for _ in range(2 * n)]
    for h in handles:
        rr.step(h, ["fold-constants"], [])
    victim = rr.alive[rr.next % len(rr.alive)]  # the replica the next StartSession goes to
    servers[victim].kill()
    print("  killed replica %d (pid %d), the next in turn" % (victim, servers[victim].proc.pid))
    new = [rr.start(SMALL) for _ in range(2 * (n - 1))]
    where = sorted(h[0] for h in new)
    ck.check(victim not in where and len(set(where)) == n - 1 and
             all(where.count(i) == 2 for i in set(where)),
             "StartSession skips the dead replica; new sessions go round-robin over the %d live ones: %s"
             % (n - 1, where))
    ck.check(victim not in rr.alive, "the client dropped the dead replica")
    mine = [h for h in handles if h[0] == victim]
    try:
        rr.step(mine[0], ["eliminate-identities"], ["IrSha1"])
        ck.check(False, "a session of the killed replica answers UNAVAILABLE", "the call succeeded")
    except grpc.RpcError as e:
        ck.equal(e.code(), grpc.StatusCode.UNAVAILABLE, "a session of the killed replica answers")
    others = [h for h in handles if h[0] != victim]
    for h in others:
        r, v = rr.step(h, ["eliminate-identities"], ["IrSha1", "Pipeline"])
        ck.check(not r.action_had_no_effect and json.loads(v["Pipeline"])["passes"] ==
                 ["fold-constants", "eliminate-identities"],
                 "replica %d session %d goes on after the kill" % h)
    for h in new:
        r, _ = rr.step(h, ["fold-constants"], ["ArenaBytes"])
        ck.check(not r.action_had_no_effect, "new session %d on replica %d steps" % (h[1], h[0]))
    for h in others + new:
        left = rr.end(h)
        ck.equal(left, len(rr.open[h[0]]), "replica %d remaining_sessions" % h[0])


if __name__ == "__main__":
    main()
