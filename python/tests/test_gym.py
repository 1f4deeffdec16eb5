"""kiln.gym: the service's actions and observations in this process, in Gymnasium's shape."""
import os

import pytest

import kiln
from conftest import MODELS, conv_bn_model


def test_gymnasium_shape_and_rewards():
    env = kiln.gym.make("benchmark://kiln-v0/kws_cnn", observation_space="Features",
                        reward_space="ArenaBytes", max_episode_steps=6)
    assert "benchmark://kiln-v0/kws_cnn" in env.builtin_benchmarks
    assert env.action_space.n == len(env.action_space.names) > 0
    obs, info = env.reset(seed=3)
    assert env.observation_space.contains(obs)
    baseline = info["reward_baseline"]
    assert baseline > 0
    total, start = 0.0, env.observe("ArenaBytes")
    for t in range(6):
        obs, reward, terminated, truncated, info = env.step(env.action_space.sample())
        assert env.observation_space.contains(obs)
        assert isinstance(reward, float) and isinstance(terminated, bool)
        assert truncated == (t == 5)
        total += reward
    # The rewards sum to the drop of the observation, over its value after the default pipeline.
    assert total == pytest.approx((start - env.observe("ArenaBytes")) / baseline)


def test_actions_by_name_fork_and_pipeline_replay():
    env = kiln.gym.Env(conv_bn_model(), reward_space="ArenaBytes")  # an onnx.ModelProto
    env.reset()
    before = env.observe("ArenaBytes")
    _, _, _, _, info = env.step("fold-batchnorm")
    assert not info["action_had_no_effect"]
    fork = env.fork()
    fork.step("planner:anneal")
    assert env.pipeline["planner"] == "default" and fork.pipeline["planner"] == "anneal"
    assert env.pipeline["passes"] == ["fold-batchnorm"]
    assert env.observe("ArenaBytes") <= before
    # The pipeline reproduces the state: kiln.plan with it reports the observed arena.
    plan = kiln.plan(conv_bn_model(), pipeline=write(env.pipeline))
    assert plan["arena_bytes"] == env.observe("ArenaBytes")


def write(pipeline):
    import json
    import tempfile

    f = tempfile.NamedTemporaryFile("w", suffix=".json", delete=False)
    json.dump(pipeline, f)
    f.close()
    return f.name


def test_errors():
    with pytest.raises(kiln.KilnError):
        kiln.gym.make("benchmark://kiln-v0/nope")
    with pytest.raises(kiln.KilnError):
        kiln.gym.make(b"garbage")
    with pytest.raises(kiln.KilnError):
        kiln.gym.make(observation_space="Nope")
    with pytest.raises(kiln.KilnError):
        kiln.gym.make(reward_space="Ir")  # not a number
    env = kiln.gym.make(os.path.join(MODELS, "mlp_field.onnx"))
    with pytest.raises(kiln.KilnError):
        env.step(0)  # before reset
    env.reset()
    with pytest.raises(kiln.KilnError):
        env.step(env.action_space.n)
    with pytest.raises(kiln.KilnError):
        env.step("no-such-pass")
    env.step(0)  # the environment still works
