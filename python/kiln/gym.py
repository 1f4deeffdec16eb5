"""kiln.gym: kiln's optimization environment (the actions and observations of `kiln serve`'s
CompilerGym service) in this process, without gRPC, in Gymnasium's shape.

    env = kiln.gym.make("benchmark://kiln-v0/kws_cnn", reward_space="ArenaBytes")
    obs, info = env.reset(seed=0)
    obs, reward, terminated, truncated, info = env.step(env.action_space.sample())

Actions are the pass registry's passes, then the planner and schedule choices (their names are
env.action_space.names). The reward, as in examples/gym, is the drop of the reward observation
normalised by its value after kiln's default pipeline: (o_{t-1} - o_t) / baseline. An episode
terminates when no pass can change the model any more (the planner and schedule choices stay
selectable) and is truncated after max_episode_steps steps, when given.
"""
import json
import random

from . import _kiln
from ._models import model_arg




class Discrete:
    """A choice of n actions (Gymnasium's spaces.Discrete), with their names."""

    def __init__(self, names, seed=None):
        self.names = list(names)
        self.n = len(self.names)
        self.shape = ()
        self._rng = random.Random(seed)

    def seed(self, seed=None):
        self._rng.seed(seed)

    def sample(self):
        return self._rng.randrange(self.n)

    def contains(self, x):
        return isinstance(x, int) and 0 <= x < self.n

    def __contains__(self, x):
        return self.contains(x)

    def __repr__(self):
        return "Discrete(%d)" % self.n


class ObservationSpace:
    """One observation space: its name, kind (int64 / double scalars, int64_list, double_list,
    string, binary), list length, bounds and whether it is deterministic."""

    def __init__(self, info):
        self.name = info["name"]
        self.kind = info["kind"]
        self.shape = (info["length"],) if info["kind"].endswith("_list") else ()
        self.low = info["min"]
        self.high = info["max"]
        self.deterministic = info["deterministic"]
        self.platform_dependent = info["platform_dependent"]
        self.description = info["description"]

    def contains(self, x):
        if self.kind in ("string",):
            return isinstance(x, str)
        if self.kind == "binary":
            return isinstance(x, bytes)
        if self.shape:
            return len(x) == self.shape[0] and all(self.low <= v <= self.high for v in x)
        return self.low <= x <= self.high

    def __repr__(self):
        return "ObservationSpace(%r, %s%s)" % (self.name, self.kind,
                                              ", %d" % self.shape[0] if self.shape else "")


class Env:
    """The environment on one benchmark (a built-in benchmark://kiln-v0/NAME, a model path, ONNX
    bytes or an onnx.ModelProto; symbolic input dims are fixed at 1)."""

    metadata = {"render_modes": []}

    def __init__(self, benchmark="benchmark://kiln-v0/kws_cnn", observation_space="Features",
                 reward_space="ArenaBytes", max_episode_steps=None, planner_steps=2000, cc="cc",
                 runtime_runs=5):
        self._env = _kiln.GymEnvironment(planner_steps, cc, runtime_runs)
        self.spaces = {s["name"]: ObservationSpace(s) for s in self._env.observation_spaces}
        for name in (observation_space, reward_space):
            if name is not None and name not in self.spaces:
                raise _kiln.KilnError("no observation space '%s' (the spaces: %s)"
                                      % (name, ", ".join(self.spaces)))
        if reward_space is not None and self.spaces[reward_space].kind not in ("int64", "double"):
            raise _kiln.KilnError("reward space '%s' is not a number" % reward_space)
        self.observation_space_name = observation_space
        self.reward_space_name = reward_space
        self.observation_space = self.spaces[observation_space] if observation_space else None
        self.action_space = Discrete(self._env.actions)
        self.max_episode_steps = max_episode_steps
        self.benchmark = self._add(benchmark)
        self._session = None
        self._baseline = None

    def _add(self, benchmark):
        if isinstance(benchmark, str) and benchmark.startswith("benchmark://kiln-v0/"):
            return self._env.add_benchmark(benchmark)
        m = model_arg(benchmark)
        uri = "benchmark://user/" + (m if isinstance(m, str) else "model")
        return self._env.add_benchmark(uri, m)

    @property
    def builtin_benchmarks(self):
        return self._env.builtin_benchmarks()

    def observe(self, space):
        """The current state's observation `space` (any of self.spaces)."""
        return self._require_session().observe(space)

    def _require_session(self):
        if self._session is None:
            raise _kiln.KilnError("call reset() first")
        return self._session

    def _observation(self):
        name = self.observation_space_name
        return self._session.observe(name) if name else None

    def reset(self, seed=None, options=None):
        """Starts an episode on the benchmark (options={"benchmark": ...} switches to another);
        returns (observation, info)."""
        if seed is not None:
            self.action_space.seed(seed)
        if options and "benchmark" in options:
            self.benchmark = self._add(options["benchmark"])
            self._baseline = None
        self._session = _kiln.GymSession(self._env, self.benchmark)
        self._steps = 0
        info = {"benchmark": self.benchmark}
        if self.reward_space_name:
            if self._baseline is None:
                base = _kiln.GymSession(self._env, self.benchmark)
                base.step([self.action_space.names.index(a)
                           for a in _kiln.default_pipeline_actions()])
                self._baseline = base.observe(self.reward_space_name)
            self._previous = self._session.observe(self.reward_space_name)
            info["reward_baseline"] = self._baseline
        return self._observation(), info

    def step(self, action):
        """Applies action (an index into action_space, or its name); returns (observation,
        reward, terminated, truncated, info)."""
        session = self._require_session()
        if isinstance(action, str):
            if action not in self.action_space.names:
                raise _kiln.KilnError("no action '%s'" % action)
            action = self.action_space.names.index(action)
        end, no_effect = session.step([int(action)])
        self._steps += 1
        reward = 0.0
        if self.reward_space_name:
            value = session.observe(self.reward_space_name)
            reward = (self._previous - value) / max(1, abs(self._baseline))
            self._previous = value
        truncated = self.max_episode_steps is not None and self._steps >= self.max_episode_steps
        info = {"action_had_no_effect": no_effect, "end_of_session": end}
        return self._observation(), reward, end, truncated, info

    def fork(self):
        """An independent copy of this environment in the same state."""
        other = object.__new__(Env)
        other.__dict__.update(self.__dict__)
        other.action_space = Discrete(self.action_space.names)
        other._session = self._require_session().fork()
        return other

    @property
    def pipeline(self):
        """The passes that changed the model and the planner choice, as a pipeline dict
        (kiln.InferenceSession(pipeline=...), `kiln compile --pipeline`)."""
        return json.loads(self._require_session().pipeline())

    @property
    def actions(self):
        """The action indices applied in this episode, in order."""
        return list(self._require_session().actions_applied)

    def close(self):
        self._session = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def make(benchmark="benchmark://kiln-v0/kws_cnn", **kwargs):
    """Env(benchmark, **kwargs), as gymnasium.make would."""
    return Env(benchmark, **kwargs)
