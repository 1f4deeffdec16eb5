#!/usr/bin/python3
"""Client helpers for `kiln serve` (DESIGN.md 2.6), shared by tests/gym, examples/gym and bench.

- load_stubs(proto): runs protoc with Debian's grpc_python_plugin on compiler_gym_service.proto
  into a temporary folder and imports the generated modules (pb2, pb2_grpc).
- KilnServer: starts `kiln serve --address 127.0.0.1:0 ...` as a subprocess, waits for its ready
  line `kiln serve: listening on ADDRESS` on stderr, and stops it with SIGTERM (or kill()).
- GymClient: a stub plus the spaces, with actions and observation spaces looked up by name.

Needs /usr/bin/python3 with python3-grpcio and python3-protobuf, and protoc
(protobuf-compiler) with /usr/bin/grpc_python_plugin (protobuf-compiler-grpc).
Import it by path from elsewhere (sys.path.insert(0, DIR)); it writes no bytecode.
"""
import atexit
import importlib
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time

sys.dont_write_bytecode = True

import grpc  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
DEFAULT_PROTO = os.path.join(REPO, "src", "gym", "compiler_gym_service.proto")
GRPC_PLUGIN = "/usr/bin/grpc_python_plugin"
READY_RE = re.compile(r"kiln serve: listening on (\S+)")

_stubs = {}


def load_stubs(proto=DEFAULT_PROTO, out_dir=None):
    """Generates and imports the Python stubs of `proto`; returns (pb2, pb2_grpc)."""
    proto = os.path.abspath(proto)
    if proto in _stubs:
        return _stubs[proto]
    if out_dir is None:
        out_dir = tempfile.mkdtemp(prefix="kiln_gym_stubs_")
        atexit.register(shutil.rmtree, out_dir, True)
    os.makedirs(out_dir, exist_ok=True)
    protoc = shutil.which("protoc")
    if protoc is None:
        raise RuntimeError("protoc not found (Debian: protobuf-compiler)")
    if not os.path.exists(GRPC_PLUGIN):
        raise RuntimeError(GRPC_PLUGIN + " not found (Debian: protobuf-compiler-grpc)")
    cmd = [protoc, "-I" + os.path.dirname(proto), "--python_out=" + out_dir,
           "--grpc_python_out=" + out_dir, "--plugin=protoc-gen-grpc_python=" + GRPC_PLUGIN,
           os.path.basename(proto)]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError("protoc failed: " + " ".join(cmd) + "\n" + r.stderr)
    base = os.path.splitext(os.path.basename(proto))[0]
    if out_dir not in sys.path:
        sys.path.insert(0, out_dir)
    pb2 = importlib.import_module(base + "_pb2")
    pb2_grpc = importlib.import_module(base + "_pb2_grpc")
    _stubs[proto] = (pb2, pb2_grpc)
    return pb2, pb2_grpc


class KilnServer:
    """One `kiln serve` subprocess on a free port of 127.0.0.1."""

    def __init__(self, kiln, args=(), ready_timeout=60.0, stats_file=None):
        self.kiln = kiln
        self.args = list(args)
        if stats_file:
            self.args += ["--stats-file", stats_file]
        self.stats_file = stats_file
        self.ready_timeout = ready_timeout
        self.proc = None
        self.address = None
        self.stderr_lines = []
        self._ready = threading.Event()
        self._reader = None

    def start(self):
        cmd = [self.kiln, "serve", "--address", "127.0.0.1:0", *self.args]
        self.proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                     stderr=subprocess.PIPE, text=True, bufsize=1)
        self._reader = threading.Thread(target=self._read_stderr, daemon=True)
        self._reader.start()
        if not self._ready.wait(self.ready_timeout) or self.address is None:
            rc = self.proc.poll()
            self.kill()
            raise RuntimeError("kiln serve did not print its ready line (rc=%s): %s\nstderr:\n%s"
                               % (rc, " ".join(cmd), "".join(self.stderr_lines)))
        return self

    def _read_stderr(self):
        for line in self.proc.stderr:
            self.stderr_lines.append(line)
            if self.address is None:
                m = READY_RE.search(line)
                if m:
                    self.address = m.group(1)
                    self._ready.set()
        self._ready.set()  # EOF: the process ended (maybe before the ready line)

    def channel(self):
        return grpc.insecure_channel(self.address, options=[
            ("grpc.max_receive_message_length", 256 << 20),
            ("grpc.max_send_message_length", 256 << 20)])

    def stop(self, timeout=30.0):
        """SIGTERM, then waits; returns the exit status (None if it had to be killed)."""
        if self.proc is None or self.proc.poll() is not None:
            return None if self.proc is None else self.proc.returncode
        self.proc.send_signal(signal.SIGTERM)
        try:
            rc = self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            return None
        if self._reader:
            self._reader.join(5)
        return rc

    def kill(self):
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()


def obs_value(o):
    """The Python value of an Observation: list, str, bytes, int or float."""
    kind = o.WhichOneof("value")
    if kind == "int64_list":
        return list(o.int64_list.value)
    if kind == "double_list":
        return list(o.double_list.value)
    if kind is None:
        return None
    return getattr(o, kind)


class GymClient:
    """A CompilerGymService stub with the action and observation spaces looked up by name."""

    def __init__(self, channel, pb2, pb2_grpc, timeout=120.0):
        self.channel = channel
        self.pb2 = pb2
        self.stub = pb2_grpc.CompilerGymServiceStub(channel)
        self.timeout = timeout
        spaces = self.stub.GetSpaces(pb2.GetSpacesRequest(), timeout=timeout)
        self.spaces = spaces
        self.action_space = spaces.action_space_list[0]
        self.actions = list(self.action_space.action)
        self.obs_spaces = list(spaces.observation_space_list)
        self.obs_names = [s.name for s in self.obs_spaces]

    def action(self, name):
        if name not in self.actions:
            raise KeyError("no action %r in %s" % (name, self.actions))
        return self.actions.index(name)

    def obs(self, name):
        if name not in self.obs_names:
            raise KeyError("no observation space %r in %s" % (name, self.obs_names))
        return self.obs_names.index(name)

    def pass_actions(self):
        return [a for a in self.actions if not a.startswith(("planner:", "schedule:"))]

    # RPCs ------------------------------------------------------------------------------------
    def add_benchmark(self, uri, contents=None, file_uri=None):
        f = self.pb2.File(contents=contents) if contents is not None else self.pb2.File(uri=file_uri)
        req = self.pb2.AddBenchmarkRequest(benchmark=[self.pb2.Benchmark(uri=uri, program=f)])
        return self.stub.AddBenchmark(req, timeout=self.timeout)

    def start(self, benchmark, action_space=0):
        r = self.stub.StartSession(self.pb2.StartSessionRequest(benchmark=benchmark,
                                                                action_space=action_space),
                                   timeout=self.timeout)
        return r.session_id

    def end(self, session_id):
        return self.stub.EndSession(self.pb2.EndSessionRequest(session_id=session_id),
                                    timeout=self.timeout).remaining_sessions

    def fork(self, session_id):
        return self.stub.ForkSession(self.pb2.ForkSessionRequest(session_id=session_id),
                                     timeout=self.timeout).session_id

    def step_raw(self, session_id, actions=(), observations=()):
        """Step with raw indices; returns the StepReply."""
        return self.stub.Step(self.pb2.StepRequest(session_id=session_id, action=list(actions),
                                                   observation_space=list(observations)),
                              timeout=self.timeout)

    def step(self, session_id, actions=(), observations=()):
        """Step with action / observation names; returns (reply, {name: value})."""
        a = [self.action(x) if isinstance(x, str) else x for x in actions]
        o = [self.obs(x) if isinstance(x, str) else x for x in observations]
        r = self.step_raw(session_id, a, o)
        if len(r.observation) != len(o):
            raise AssertionError("Step asked for %d observations, got %d" % (len(o), len(r.observation)))
        names = [self.obs_names[i] if 0 <= i < len(self.obs_names) else str(i) for i in o]
        return r, {n: obs_value(v) for n, v in zip(names, r.observation)}

    def observe(self, session_id, *names):
        """Observations without actions (a Step with an empty action list)."""
        _, v = self.step(session_id, (), names)
        return v if len(names) != 1 else v[names[0]]

    def benchmarks(self):
        return list(self.stub.GetBenchmarks(self.pb2.GetBenchmarksRequest(),
                                            timeout=self.timeout).benchmark)

    def version(self):
        return self.stub.GetVersion(self.pb2.GetVersionRequest(), timeout=self.timeout)


def connect(server, proto=DEFAULT_PROTO, timeout=120.0):
    pb2, pb2_grpc = load_stubs(proto)
    ch = server.channel()
    grpc.channel_ready_future(ch).result(timeout=30)
    return GymClient(ch, pb2, pb2_grpc, timeout)


def wait_until(pred, timeout=10.0, interval=0.05):
    end = time.time() + timeout
    while time.time() < end:
        if pred():
            return True
        time.sleep(interval)
    return pred()
