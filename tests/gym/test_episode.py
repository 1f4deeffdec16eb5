#!/usr/bin/python3
"""kiln serve end to end through a client generated from the seed proto (DESIGN.md 2.6, issue 6).

Usage: /usr/bin/python3 tests/gym/test_episode.py KILN [--proto src/gym/compiler_gym_service.proto]

Checks (each prints one line; exits non-zero on any failure):
- GetSpaces: the action space "kiln" (passes, planner:*, schedule:*), the observation spaces by
  name with their shapes and deterministic / platform_dependent flags; GetVersion; GetBenchmarks
  (the deprecated RPC) lists the built-in and the added benchmarks.
- An episode on a model built here (Conv/BatchNormalization/Relu/Add/MatMul with an Identity, a
  duplicate Relu, a constant Add, a Transpose pair, a dead node): every pass in turn until
  end_of_session; action_had_no_effect agrees with IrSha1 and with every deterministic
  observation; each pass the model was built for had an effect; after the end no pass changes
  the IR; the Pipeline observation names the passes that changed it.
- Fork: the fork stepped differently differs (IrSha1, ArenaBytes), the parent is unchanged, and
  the other way round.
- Every error path with its exact grpc.StatusCode (NOT_FOUND, OUT_OF_RANGE with the session
  unchanged, INVALID_ARGUMENT, RESOURCE_EXHAUSTED on a server started with small limits), and
  the server still serves afterwards with the right remaining_sessions. INTERNAL (a failing
  pass) has no client-side trigger: the passes leave alone what they cannot evaluate.
- 8 client threads with many sessions at once give the serial run's observations.
- A file:// benchmark; replacing a benchmark uri (old sessions keep their model).
- The Pipeline observation written to a file P: `kiln plan MODEL --pipeline P --json`
  arena_bytes and the KILN_NAME_WORKSPACE_SIZE of `kiln compile MODEL --target c --pipeline P`
  equal the session's ArenaBytes.
"""
import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import threading

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import grpc  # noqa: E402

import gym_client  # noqa: E402
import gym_models  # noqa: E402
from checks import Checks  # noqa: E402

SC = grpc.StatusCode
BUILTINS = ["benchmark://kiln-v0/kws_cnn", "benchmark://kiln-v0/mlp_field"]
SMALL = "benchmark://gym-test/small"
DEFAULT_PASSES = ["fold-constants", "eliminate-identities", "eliminate-common-subexpressions",
                  "cancel-transposes", "eliminate-dead-nodes"]
# The passes small_model() was built to give work to.
SMALL_MODEL_PASSES = DEFAULT_PASSES + ["fold-batchnorm", "fuse-matmul-add"]
SCALARS = ["ArenaBytes", "ArenaLowerBoundBytes", "ParamBytes", "CodeSizeBytes"]
SHAPES = {"Ir": "string_size_range", "IrSha1": "string_size_range", "OpCount": "int64_range_list",
          "Features": "int64_range_list", "ArenaBytes": "scalar_int64_range",
          "ArenaLowerBoundBytes": "scalar_int64_range", "ParamBytes": "scalar_int64_range",
          "CodeSizeBytes": "scalar_int64_range", "Runtime": "scalar_double_range",
          "Pipeline": "string_size_range", "CortexM4Instructions": "scalar_int64_range"}
VALUE_KIND = {"Ir": str, "IrSha1": str, "OpCount": list, "Features": list, "ArenaBytes": int,
              "ArenaLowerBoundBytes": int, "ParamBytes": int, "CodeSizeBytes": int,
              "Runtime": float, "Pipeline": str, "CortexM4Instructions": int}
# What the episode observes after every step (CodeSizeBytes and Runtime compile / run: once).
CHEAP = ["IrSha1", "ArenaBytes", "ArenaLowerBoundBytes", "ParamBytes", "OpCount", "Features", "Pipeline"]


class Sessions:
    """The sessions this test holds open on one server, to check remaining_sessions."""

    def __init__(self, ck, client):
        self.ck, self.c, self.open = ck, client, set()

    def start(self, benchmark):
        sid = self.c.start(benchmark)
        self.ck.check(sid not in self.open, "StartSession(%s) gives a new session id %d" % (benchmark, sid))
        self.open.add(sid)
        return sid

    def fork(self, sid):
        f = self.c.fork(sid)
        self.ck.check(f not in self.open, "ForkSession(%d) gives a new session id %d" % (sid, f))
        self.open.add(f)
        return f

    def end(self, sid):
        self.open.discard(sid)
        left = self.c.end(sid)
        self.ck.equal(left, len(self.open), "EndSession(%d) remaining_sessions" % sid)


def spaces_section(ck, c):
    ck.equal(len(c.spaces.action_space_list), 1, "one action space")
    ck.equal(c.action_space.name, "kiln", "action space name")
    acts = c.actions
    ck.equal(len(set(acts)), len(acts), "action names are distinct")
    for a in DEFAULT_PASSES + ["planner:default", "schedule:min-peak", "schedule:file-order"]:
        ck.check(a in acts, "action %s" % a)
    for p in ["none", "tflm", "greedy-size", "greedy-conflicts", "coloring", "anneal"]:
        ck.check("planner:" + p in acts, "action planner:%s" % p)
    passes = c.pass_actions()
    ck.check(len(passes) >= 5, "%d pass actions: %s" % (len(passes), ", ".join(passes)))
    first_choice = min(i for i, a in enumerate(acts) if a.startswith(("planner:", "schedule:")))
    ck.check(all(not a.startswith(("planner:", "schedule:")) for a in acts[:first_choice]) and
             all(a.startswith(("planner:", "schedule:")) for a in acts[first_choice:]),
             "the passes come first, then planner and schedule choices")
    names = c.obs_names
    ck.equal(len(set(names)), len(names), "observation space names are distinct")
    for name, shape in SHAPES.items():
        if not ck.check(name in names, "observation space %s" % name):
            continue
        s = c.obs_spaces[c.obs(name)]
        ck.equal(s.WhichOneof("shape"), shape, "%s shape" % name)
        if name == "Runtime":
            ck.check(not s.deterministic and s.platform_dependent,
                     "Runtime: deterministic=false platform_dependent=true",
                     "deterministic=%s platform_dependent=%s" % (s.deterministic, s.platform_dependent))
        else:
            ck.check(s.deterministic, "%s is deterministic" % name)
        if s.HasField("default_value"):
            dv = s.default_value.WhichOneof("value")
            want = {"string_size_range": "string_value", "int64_range_list": "int64_list",
                    "scalar_int64_range": "scalar_int64", "scalar_double_range": "scalar_double"}[shape]
            ck.equal(dv, want, "%s default_value kind" % name)


def version_section(ck, c):
    v = c.version()
    ck.check(v.service_version != "", "GetVersion service_version %r" % v.service_version)
    ck.check(v.compiler_version != "", "GetVersion compiler_version %r" % v.compiler_version)


def benchmarks_section(ck, c, added):
    have = c.benchmarks()
    for b in BUILTINS + added:
        ck.check(b in have, "GetBenchmarks (deprecated) lists %s" % b)
    ck.equal(len(set(have)), len(have), "GetBenchmarks lists each uri once")


def check_values(ck, c, vals, where):
    """One check: the observations are well-formed (types, IrSha1, arena bounds, list lengths, JSON)."""
    bad = []
    for name, v in vals.items():
        if not isinstance(v, VALUE_KIND[name]):
            bad.append("%s is %s, not %s" % (name, type(v).__name__, VALUE_KIND[name].__name__))
    if "IrSha1" in vals and re.fullmatch(r"[0-9a-f]{40}", str(vals["IrSha1"])) is None:
        bad.append("IrSha1 %r is not 40 hex digits" % vals["IrSha1"])
    if "ArenaBytes" in vals and "ArenaLowerBoundBytes" in vals and \
            not vals["ArenaBytes"] >= vals["ArenaLowerBoundBytes"] >= 0:
        bad.append("ArenaBytes %r < ArenaLowerBoundBytes %r" % (vals["ArenaBytes"], vals["ArenaLowerBoundBytes"]))
    for name in ("OpCount", "Features"):
        if name in vals and isinstance(vals[name], list):
            n = len(c.obs_spaces[c.obs(name)].int64_range_list.range)
            if len(vals[name]) != n:
                bad.append("%s has %d elements, its space %d" % (name, len(vals[name]), n))
    if "Pipeline" in vals:
        try:
            p = json.loads(vals["Pipeline"])
            if not (isinstance(p, dict) and "passes" in p and "planner" in p):
                bad.append("Pipeline is not a pipeline file: %r" % vals["Pipeline"])
        except ValueError as e:
            bad.append("Pipeline is not JSON: %s" % e)
    ck.check(not bad, "%s: %s well-formed" % (where, "/".join(vals)), "; ".join(bad))


def episode_section(ck, c, ss):
    sid = ss.start(SMALL)
    init = c.observe(sid, *c.obs_names)
    check_values(ck, c, init, "initial state")
    ck.check(init["Runtime"] > 0, "Runtime %.4f ms > 0" % init["Runtime"])
    ck.check(init["CodeSizeBytes"] > 0, "CodeSizeBytes %d > 0" % init["CodeSizeBytes"])
    ck.check(init["CortexM4Instructions"] > 0,
             "CortexM4Instructions %d > 0" % init["CortexM4Instructions"])
    ck.check("Conv" in init["Ir"] and "BatchNormalization" in init["Ir"], "Ir prints the model's ops")
    ck.equal(json.loads(init["Pipeline"]).get("passes"), [], "initial Pipeline has no passes")
    again = c.observe(sid, *CHEAP)
    ck.check(all(again[k] == init[k] for k in CHEAP), "observing twice gives the same values")
    ck.check(sum(init["OpCount"]) == init["Features"][0] == 16,
             "OpCount sums to 16 nodes, Features[0] too", (sum(init["OpCount"]), init["Features"][:2]))

    passes = c.pass_actions()
    prev = init
    effective, had_effect = [], set()
    ended, steps = False, 0
    limit = 10 * len(passes)
    i = 0
    while steps < limit:
        a = passes[i % len(passes)]
        i += 1
        r, vals = c.step(sid, [a], CHEAP)
        steps += 1
        changed = vals["IrSha1"] != prev["IrSha1"]
        if r.action_had_no_effect:
            same = [k for k in CHEAP if vals[k] != prev[k]]
            ck.check(not same, "step %d %s: no effect, every observation unchanged" % (steps, a),
                     "changed: %s" % same)
        else:
            ck.check(changed, "step %d %s: had an effect, IrSha1 changed" % (steps, a))
            effective.append(a)
            had_effect.add(a)
        check_values(ck, c, vals, "step %d" % steps)
        prev = vals
        if r.end_of_session:
            ended = True
            break
    ck.check(ended, "end_of_session within %d steps (took %d)" % (limit, steps))
    for p in SMALL_MODEL_PASSES:
        if p in passes:
            ck.check(p in had_effect, "pass %s had an effect on the test model" % p)
    pipe = json.loads(prev["Pipeline"])
    ck.equal(pipe.get("passes"), effective, "Pipeline passes = the passes that had an effect, in order")
    ck.check(sum(prev["OpCount"]) < sum(init["OpCount"]),
             "fewer nodes after the episode (%d -> %d)" % (sum(init["OpCount"]), sum(prev["OpCount"])))

    # After the end: no pass changes the IR (tried one at a time in a fork).
    f = ss.fork(sid)
    for a in passes:
        r, vals = c.step(f, [a], ["IrSha1"])
        ck.check(r.action_had_no_effect and r.end_of_session and vals["IrSha1"] == prev["IrSha1"],
                 "after end_of_session %s has no effect and the session stays ended" % a,
                 "no_effect=%s end=%s" % (r.action_had_no_effect, r.end_of_session))
    # Planner and schedule choices stay selectable and change only the plan.
    r, vals = c.step(f, ["planner:none"], ["IrSha1", "ArenaBytes"])
    ck.check(vals["IrSha1"] == prev["IrSha1"], "planner:none keeps the IR")
    ck.check(vals["ArenaBytes"] > prev["ArenaBytes"],
             "planner:none arena %d > default's %d" % (vals["ArenaBytes"], prev["ArenaBytes"]))
    ck.check(not r.action_had_no_effect, "planner:none, which changed ArenaBytes, is not 'no effect'")
    r, vals = c.step(f, ["planner:default"], ["ArenaBytes"])
    ck.equal(vals["ArenaBytes"], prev["ArenaBytes"], "planner:default gives the default arena back")
    r, vals = c.step(f, ["schedule:file-order", "schedule:min-peak"], ["ArenaBytes", "IrSha1"])
    ck.check(vals["ArenaBytes"] == prev["ArenaBytes"] and vals["IrSha1"] == prev["IrSha1"],
             "schedule:file-order then schedule:min-peak: back to the same plan")
    ss.end(f)
    ss.end(sid)
    return prev


def fork_section(ck, c, ss):
    p = ss.start(SMALL)
    c.step(p, ["fold-constants", "eliminate-identities"])
    p0 = c.observe(p, "IrSha1", "ArenaBytes", "Pipeline")
    f = ss.fork(p)
    f_init = c.observe(f, "IrSha1", "ArenaBytes", "Pipeline")
    ck.check(f_init == p0, "the fork starts in the parent's state (IrSha1, ArenaBytes, Pipeline)")
    _, f1 = c.step(f, ["eliminate-common-subexpressions", "planner:none"], ["IrSha1", "ArenaBytes", "Pipeline"])
    ck.check(f1["IrSha1"] != p0["IrSha1"], "the fork stepped differently has another IrSha1")
    ck.check(f1["ArenaBytes"] != p0["ArenaBytes"],
             "the fork has another ArenaBytes (%d vs %d)" % (f1["ArenaBytes"], p0["ArenaBytes"]))
    ck.equal(json.loads(f1["Pipeline"]).get("passes"),
             ["fold-constants", "eliminate-identities", "eliminate-common-subexpressions"],
             "the fork's Pipeline continues the parent's")
    p1 = c.observe(p, "IrSha1", "ArenaBytes", "Pipeline")
    ck.check(p1 == p0, "the parent is unchanged by the fork's step (IrSha1, ArenaBytes, Pipeline)")
    # And the other way round.
    c.step(p, ["cancel-transposes", "planner:tflm"])
    p2 = c.observe(p, "IrSha1")
    ck.check(p2 != p0["IrSha1"], "the parent steps on")
    f2 = c.observe(f, "IrSha1", "ArenaBytes", "Pipeline")
    ck.check(f2 == f1, "the fork is unchanged by the parent's step")
    # A fork of a fork, ended before its parent.
    ff = ss.fork(f)
    ck.check(c.observe(ff, "IrSha1", "ArenaBytes") == {k: f1[k] for k in ("IrSha1", "ArenaBytes")},
             "a fork of the fork has the fork's state (planner choice included)")
    ss.end(ff)
    ss.end(f)
    ck.check(c.observe(p, "IrSha1") == p2, "the parent outlives its ended forks")
    ss.end(p)


def errors_section(ck, c, ss, tmp):
    pb2 = c.pb2
    live = ss.start(SMALL)
    c.step(live, ["fold-constants"])
    before = c.observe(live, "IrSha1", "ArenaBytes", "Pipeline")
    bad = max(ss.open | {0}) + 1000
    ck.code(lambda: c.step_raw(bad, [], []), SC.NOT_FOUND, "Step(unknown session %d)" % bad)
    ck.code(lambda: c.fork(bad), SC.NOT_FOUND, "ForkSession(unknown session)")
    ck.code(lambda: c.end(bad), SC.NOT_FOUND, "EndSession(unknown session)")
    ck.code(lambda: c.step_raw(-1, [0], []), SC.NOT_FOUND, "Step(session -1)")
    n_act, n_obs = len(c.actions), len(c.obs_names)
    ident = c.action("eliminate-identities")
    arena = c.obs("ArenaBytes")
    cases = [("Step(action=[%d])" % n_act, [n_act], []),
             ("Step(action=[-1])", [-1], []),
             ("Step(action=[eliminate-identities, %d]): a valid action, then a bad one" % (n_act + 5),
              [ident, n_act + 5], []),
             ("Step(observation_space=[%d])" % n_obs, [], [n_obs]),
             ("Step(observation_space=[-1])", [], [-1]),
             ("Step(action=[eliminate-identities], observation_space=[ArenaBytes, %d])" % n_obs,
              [ident], [arena, n_obs])]
    for what, a, o in cases:
        ck.code(lambda a=a, o=o: c.step_raw(live, a, o), SC.OUT_OF_RANGE, what)
        ck.check(c.observe(live, "IrSha1", "ArenaBytes", "Pipeline") == before,
                 "  ... and the session is unchanged")
    ck.code(lambda: c.end(c.start(SMALL, action_space=1)), SC.OUT_OF_RANGE, "StartSession(action_space=1)")
    ck.code(lambda: c.end(c.start(SMALL, action_space=-1)), SC.OUT_OF_RANGE, "StartSession(action_space=-1)")
    ck.code(lambda: c.end(c.start("benchmark://gym-test/no-such-model")), SC.NOT_FOUND,
            "StartSession(unknown benchmark)")
    ck.code(lambda: c.add_benchmark("benchmark://gym-test/garbage", contents=b"\x08\x01 not an onnx model \xff"),
            SC.INVALID_ARGUMENT, "AddBenchmark(malformed bytes)")
    ck.code(lambda: c.add_benchmark("benchmark://gym-test/empty", contents=b""),
            SC.INVALID_ARGUMENT, "AddBenchmark(empty contents)")
    small = gym_models.to_bytes(gym_models.small_model())
    ck.code(lambda: c.add_benchmark("file:///gym-test/small", contents=small), SC.INVALID_ARGUMENT,
            "AddBenchmark(uri with the file:// scheme)")
    ck.code(lambda: c.add_benchmark("gym-test/small", contents=small), SC.INVALID_ARGUMENT,
            "AddBenchmark(uri without a scheme)")
    ck.code(lambda: c.add_benchmark("benchmark://gym-test/missing",
                                    file_uri="file://" + os.path.join(tmp, "no-such-file.onnx")),
            SC.INVALID_ARGUMENT, "AddBenchmark(file:// uri of a missing file)")
    ck.code(lambda: c.add_benchmark("benchmark://gym-test/http", file_uri="http://example.com/m.onnx"),
            SC.INVALID_ARGUMENT, "AddBenchmark(program uri with the http:// scheme)")
    # A symbolic input dim (a batch) is accepted and fixed at 1: one inference is what is planned.
    c.add_benchmark("benchmark://gym-test/symbolic", contents=gym_models.to_bytes(gym_models.symbolic_model()))
    sym = c.start("benchmark://gym-test/symbolic")
    ck.check("FLOAT[1,8]" in c.observe(sym, "Ir"), "a symbolic input dim is fixed at 1")
    c.end(sym)
    ck.code(lambda: c.stub.AddBenchmark(pb2.AddBenchmarkRequest(benchmark=[
        pb2.Benchmark(uri="benchmark://gym-test/no-program")]), timeout=60),
        SC.INVALID_ARGUMENT, "AddBenchmark(benchmark without a program)")
    have = c.benchmarks()
    for u in ["garbage", "empty", "missing", "no-program", "http"]:
        ck.check("benchmark://gym-test/" + u not in have, "refused benchmark %s is not listed" % u)
    for u in ["garbage"]:
        ck.code(lambda u=u: c.end(c.start("benchmark://gym-test/" + u)), SC.NOT_FOUND,
                "StartSession(refused benchmark %s)" % u)
    # The server still serves.
    ck.check(c.observe(live, "IrSha1", "ArenaBytes", "Pipeline") == before, "the live session is untouched")
    s2 = ss.start(SMALL)
    r, v = c.step(s2, ["fold-constants"], ["IrSha1"])
    ck.check(not r.action_had_no_effect and v["IrSha1"] == before["IrSha1"],
             "a new session after the errors steps normally")
    ss.end(s2)
    ss.end(live)


def limits_section(ck, kiln, proto, tmp):
    small = gym_models.to_bytes(gym_models.small_model())
    limit_bytes = len(small) + 100
    big = gym_models.to_bytes(gym_models.chain_model(40))
    assert len(big) > limit_bytes
    srv = gym_client.KilnServer(kiln, ["--max-sessions", "3", "--max-benchmark-bytes", str(limit_bytes)])
    with srv:
        c = gym_client.connect(srv, proto)
        ss = Sessions(ck, c)
        c.add_benchmark(SMALL, contents=small)
        ck.check(True, "AddBenchmark of %d bytes under --max-benchmark-bytes %d" % (len(small), limit_bytes))
        ck.code(lambda: c.add_benchmark("benchmark://gym-test/big", contents=big), SC.RESOURCE_EXHAUSTED,
                "AddBenchmark(%d bytes > --max-benchmark-bytes %d)" % (len(big), limit_bytes))
        path = os.path.join(tmp, "big.onnx")
        with open(path, "wb") as fh:
            fh.write(big)
        ck.code(lambda: c.add_benchmark("benchmark://gym-test/big", file_uri="file://" + path),
                SC.RESOURCE_EXHAUSTED, "AddBenchmark(file:// of %d bytes > the limit)" % len(big))
        ck.check("benchmark://gym-test/big" not in c.benchmarks(), "the refused big benchmark is not listed")
        a = ss.start(SMALL)
        b = ss.start(BUILTINS[0])
        c3 = ss.fork(a)
        ck.code(lambda: c.end(c.start(SMALL)), SC.RESOURCE_EXHAUSTED, "StartSession beyond --max-sessions 3")
        ck.code(lambda: c.end(c.fork(a)), SC.RESOURCE_EXHAUSTED, "ForkSession beyond --max-sessions 3")
        r, _ = c.step(a, ["fold-constants"], ["IrSha1"])
        ck.check(not r.action_had_no_effect, "a session steps normally at the limit")
        ss.end(c3)
        d = ss.start(SMALL)
        ck.check(True, "StartSession works again after EndSession")
        for s in (a, b, d):
            ss.end(s)
        rc = srv.stop()
        ck.equal(rc, 0, "SIGTERM: kiln serve exits 0")


def concurrency_section(ck, c, ss):
    seq = ["fold-constants", "eliminate-identities", "planner:greedy-size",
           "eliminate-common-subexpressions", "cancel-transposes", "planner:tflm", "eliminate-dead-nodes"]
    names = ["IrSha1", "ArenaBytes", "OpCount", "Pipeline"]

    def episode(bench):
        sid = c.start(bench)
        out = []
        for a in seq:
            _, v = c.step(sid, [a], names)
            out.append(v)
        f = c.fork(sid)
        _, v = c.step(f, ["planner:none"], ["ArenaBytes"])
        out.append(v)
        c.end(f)
        c.end(sid)
        return out

    want = {b: episode(b) for b in (SMALL, BUILTINS[0], BUILTINS[1])}
    results, errors = [], []
    lock = threading.Lock()

    def worker(k):
        try:
            for j in range(6):
                b = [SMALL, BUILTINS[0], BUILTINS[1]][(k + j) % 3]
                got = episode(b)
                with lock:
                    results.append((b, got))
        except Exception as e:  # noqa: BLE001
            with lock:
                errors.append("thread %d: %s %s" % (k, e, e.details() if isinstance(e, grpc.RpcError) else ""))

    threads = [threading.Thread(target=worker, args=(k,)) for k in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    ck.check(not errors, "8 threads x 6 episodes (with forks) without an error", "; ".join(errors[:3]))
    ck.equal(len(results), 48, "episodes done")
    bad = [b for b, got in results if got != want[b]]
    ck.check(not bad, "every concurrent episode matches the serial one", "%d differ (%s)" % (len(bad), bad[:3]))
    s = c.start(SMALL)
    left = c.end(s)
    ck.equal(left, len(ss.open), "remaining_sessions after the threads")


def file_and_replace_section(ck, c, ss, tmp):
    small_m, other_m = gym_models.small_model(), gym_models.other_model()
    path = os.path.join(tmp, "small.onnx")
    with open(path, "wb") as fh:
        fh.write(gym_models.to_bytes(small_m))
    c.add_benchmark("benchmark://gym-test/small-file", file_uri="file://" + path)
    ck.check("benchmark://gym-test/small-file" in c.benchmarks(), "AddBenchmark(file:// uri) is listed")
    a = ss.start("benchmark://gym-test/small-file")
    b = ss.start(SMALL)
    va, vb = c.observe(a, "IrSha1", "ArenaBytes", "OpCount"), c.observe(b, "IrSha1", "ArenaBytes", "OpCount")
    ck.check(va == vb, "the file:// benchmark has the same state as the same model given as bytes")
    os.remove(path)
    r, _ = c.step(a, ["fold-constants"], ["IrSha1"])
    ck.check(not r.action_had_no_effect, "the file:// benchmark's session works with its file removed")
    ss.end(b)

    uri = "benchmark://gym-test/replaced"
    c.add_benchmark(uri, contents=gym_models.to_bytes(small_m))
    old = ss.start(uri)
    old_v = c.observe(old, "IrSha1", "OpCount")
    ck.equal(old_v["IrSha1"], va["IrSha1"], "before the replacement the uri has the small model")
    c.add_benchmark(uri, contents=gym_models.to_bytes(other_m))
    ck.equal(c.benchmarks().count(uri), 1, "the replaced uri is listed once")
    new = ss.start(uri)
    new_v = c.observe(new, "IrSha1", "OpCount")
    ck.check(new_v["IrSha1"] != old_v["IrSha1"], "a new session of the replaced uri has the new model")
    ck.equal(sum(new_v["OpCount"]), 4, "the new model's node count")
    ck.check(c.observe(old, "IrSha1", "OpCount") == old_v, "the session started before the replacement keeps its model")
    r, _ = c.step(old, ["eliminate-identities"], [])
    ck.check(not r.action_had_no_effect, "and keeps stepping on it")
    ss.end(new)
    ss.end(old)
    ss.end(a)


def kiln_json(cmd):
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError("%s failed (%d): %s" % (" ".join(cmd), r.returncode, r.stderr.strip()))
    return json.loads(r.stdout)


def pipeline_section(ck, c, ss, kiln, tmp):
    small_path = os.path.join(tmp, "small_pipeline.onnx")
    with open(small_path, "wb") as fh:
        fh.write(gym_models.to_bytes(gym_models.small_model()))
    repo_models = os.path.join(gym_client.REPO, "models")
    cases = [
        (SMALL, small_path, ["fold-constants", "eliminate-identities", "eliminate-common-subexpressions",
                             "planner:none"]),
        (SMALL, small_path, ["eliminate-dead-nodes", "fold-batchnorm", "planner:greedy-size",
                             "fuse-matmul-add", "schedule:file-order"]),
        (BUILTINS[0], os.path.join(repo_models, "kws_cnn.onnx"), ["fold-constants", "planner:tflm"]),
        (BUILTINS[0], os.path.join(repo_models, "kws_cnn.onnx"), ["eliminate-dead-nodes", "planner:anneal"]),
        (BUILTINS[0], os.path.join(repo_models, "kws_cnn.onnx"), ["planner:coloring", "schedule:file-order"]),
    ]
    for k, (bench, model, acts) in enumerate(cases):
        acts = [a for a in acts if a in c.actions]
        sid = ss.start(bench)
        _, v = c.step(sid, acts, ["ArenaBytes", "Pipeline"])
        ss.end(sid)
        p = os.path.join(tmp, "pipeline%d.json" % k)
        with open(p, "w") as fh:
            fh.write(v["Pipeline"])
        what = "%s after %s" % (bench.rsplit("/", 1)[-1], " ".join(acts))
        try:
            plan = kiln_json([kiln, "plan", model, "--pipeline", p, "--json"])
            ck.equal(plan["arena_bytes"], v["ArenaBytes"], "%s: kiln plan --pipeline arena_bytes = ArenaBytes" % what)
        except Exception as e:  # noqa: BLE001
            ck.check(False, "%s: kiln plan --pipeline" % what, e)
        out = os.path.join(tmp, "c%d" % k)
        r = subprocess.run([kiln, "compile", model, "--target", "c", "--name", "m", "--out", out,
                            "--pipeline", p], capture_output=True, text=True)
        if not ck.check(r.returncode == 0, "%s: kiln compile --target c --pipeline" % what, r.stderr.strip()):
            continue
        with open(os.path.join(out, "m.h")) as fh:
            m = re.search(r"#define KILN_M_WORKSPACE_SIZE (\d+)", fh.read())
        ck.check(m is not None and int(m.group(1)) == v["ArenaBytes"],
                 "%s: KILN_M_WORKSPACE_SIZE = ArenaBytes %d" % (what, v["ArenaBytes"]),
                 m.group(1) if m else "no KILN_M_WORKSPACE_SIZE")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("kiln")
    ap.add_argument("--proto", default=gym_client.DEFAULT_PROTO)
    args = ap.parse_args()
    kiln = os.path.abspath(args.kiln)
    ck = Checks()
    with tempfile.TemporaryDirectory(prefix="kiln_gym_episode_") as tmp:
        stats = os.path.join(tmp, "stats.json")
        srv = gym_client.KilnServer(kiln, ["--max-sessions", "1000"], stats_file=stats)
        srv.start()
        print("kiln serve at " + srv.address)
        try:
            c = gym_client.connect(srv, args.proto)
            ss = Sessions(ck, c)
            ck.section("GetSpaces", spaces_section, ck, c)
            ck.section("GetVersion", version_section, ck, c)
            c.add_benchmark(SMALL, contents=gym_models.to_bytes(gym_models.small_model()))
            ck.section("GetBenchmarks", benchmarks_section, ck, c, [SMALL])
            ck.section("episode", episode_section, ck, c, ss)
            ck.section("fork", fork_section, ck, c, ss)
            ck.section("errors", errors_section, ck, c, ss, tmp)
            ck.section("8 threads", concurrency_section, ck, c, ss)
            ck.section("file:// and replacement", file_and_replace_section, ck, c, ss, tmp)
            ck.section("pipeline -> kiln compile / plan", pipeline_section, ck, c, ss, kiln, tmp)
            ck.section("GetBenchmarks at the end", benchmarks_section, ck, c,
                       [SMALL, "benchmark://gym-test/small-file", "benchmark://gym-test/replaced"])
        finally:
            rc = srv.stop()
        ck.section_name = "shutdown"
        print("== shutdown")
        ck.equal(rc, 0, "SIGTERM: kiln serve exits 0")
        try:
            with open(stats) as fh:
                st = json.load(fh)
            for m in ("Step", "ForkSession", "StartSession", "EndSession", "AddBenchmark", "GetSpaces"):
                e = st.get(m, {})
                ck.check(e.get("calls", 0) > 0 and "median_us" in e and "p90_us" in e,
                         "--stats-file has %s: %s" % (m, e))
        except (OSError, ValueError) as e:
            ck.check(False, "--stats-file written as JSON", e)
        ck.section("limits", limits_section, ck, kiln, args.proto, tmp)
    ck.finish()


if __name__ == "__main__":
    main()
