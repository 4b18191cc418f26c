"""SHAC end to end: learning on a tiny fake, then exact resume and device-count invariance on the task."""

from pathlib import Path

import jax
import numpy as np
import pytest
from fakes import PointMassTracking

from smoothloco.parallel import replicated, shard_batch
from smoothloco.tasks import PushConfig, RandomizationConfig, VelocityTask, VelocityTaskConfig
from smoothloco.train import checkpoint
from smoothloco.train.networks import make_policy_factory
from smoothloco.train.shac import SHAC, SHACConfig, make_env

# One configuration for every test here, so the point mass's update compiles once for all.
CONFIG = SHACConfig(
    num_envs=32, horizon=16, iterations=40, critic_epochs=2, critic_minibatches=4,
    actor_hidden=(32, 32), critic_hidden=(32, 32), episode_length=64,
)  # fmt: skip


@pytest.fixture(scope="module", params=["point_mass", pytest.param("velocity_task", marks=pytest.mark.slow)])
def algo(request):
    """SHAC on the tiny fake (compiles in seconds: the default run) and on the locomotion task,
    whose state holds the task's whole memory (compiles in about a minute: the slow run)."""
    if request.param == "point_mass":
        task = PointMassTracking()
    else:
        no_pushes, fixed = PushConfig(enabled=False), RandomizationConfig(enabled=False)
        task = VelocityTask(VelocityTaskConfig(pushes=no_pushes, randomization=fixed))
    shac = SHAC(make_env(task, CONFIG.episode_length), CONFIG)
    return shac, jax.jit(shac.init), jax.jit(shac.update)


def _leaves_close(a, b, atol):
    for x, y in zip(jax.tree.leaves(a), jax.tree.leaves(b)):
        np.testing.assert_allclose(np.asarray(x), np.asarray(y), atol=atol, rtol=0)


def _relative_difference(a, b) -> float:
    diff = sum(
        float(np.sum((np.asarray(x) - np.asarray(y)) ** 2)) for x, y in zip(jax.tree.leaves(a), jax.tree.leaves(b))
    )
    norm = sum(float(np.sum(np.asarray(x) ** 2)) for x in jax.tree.leaves(a))
    return (diff / norm) ** 0.5


def _deterministic_return(algo: SHAC, ts, env, steps: int = 50) -> float:
    """Mean reward per step of the deterministic policy from fixed start states."""
    policy = make_policy_factory(algo.actor)((ts.normalizer, ts.actor_params))
    state = env.reset(jax.random.split(jax.random.PRNGKey(1234), 64))

    def step(state, _):
        state = env.step(state, policy(state.obs, None)[0])
        return state, state.reward

    return float(np.mean(jax.lax.scan(step, state, None, length=steps)[1]))


def test_shac_improves_return():
    """SHAC's mechanics (actor window, critic, normalizer, clipping) on a tiny differentiable
    fake, on both devices as training runs, judged by the deterministic policy from fixed start
    states. Measured on this machine over seeds 0-4: 0.07-0.10 before and 0.89-0.93 after 40
    iterations (gains 0.80-0.85); the threshold asks for less than half the smallest gain."""
    task = PointMassTracking()
    shac = SHAC(make_env(task, CONFIG.episode_length), CONFIG)
    evaluation_env = make_env(task, 64)
    update = jax.jit(shac.update)
    ts, env_state = _on_all_devices(*jax.jit(shac.init)(jax.random.PRNGKey(0)))
    before = _deterministic_return(shac, ts, evaluation_env)
    for _ in range(CONFIG.iterations):
        ts, env_state, _ = update(ts, env_state)
    after = _deterministic_return(shac, ts, evaluation_env)
    print(f"reward per step of the deterministic policy: before {before:.3f}, after {after:.3f}")
    assert int(ts.skipped_updates) == 0
    assert after - before > 0.35


def _on_all_devices(ts, env_state):
    """The placement training uses (and the device test's second update, so they share one compile)."""
    return jax.device_put(ts, replicated()), shard_batch(env_state)


def test_resume_gives_the_identical_next_update(algo, tmp_path: Path):
    _, init, update = algo
    ts, env_state = update(*_on_all_devices(*init(jax.random.PRNGKey(1))))[:2]
    checkpoint.save(tmp_path / "ckpt.msgpack", (ts, env_state))
    straight, _, _ = update(ts, env_state)

    template = init(jax.random.PRNGKey(99))
    restored_ts, restored_env = checkpoint.load(tmp_path / "ckpt.msgpack", template)
    resumed, _, _ = update(*_on_all_devices(restored_ts, restored_env))
    _leaves_close(straight, resumed, atol=0.0)


def test_corrupt_checkpoint_is_refused(algo, tmp_path: Path):
    _, init, _ = algo
    path = tmp_path / "ckpt.msgpack"
    path.write_bytes(b"not a checkpoint")
    with pytest.raises(checkpoint.CheckpointError, match="corrupt"):
        checkpoint.load(path, init(jax.random.PRNGKey(0)))
    assert path.read_bytes() == b"not a checkpoint"
    with pytest.raises(checkpoint.CheckpointError, match="no checkpoint"):
        checkpoint.load(tmp_path / "missing.msgpack", init(jax.random.PRNGKey(0)))


def test_one_and_two_devices_give_the_same_update(algo):
    assert jax.local_device_count() == 2, "tests run with two host devices (conftest)"
    _, init, update = algo
    ts, env_state = init(jax.random.PRNGKey(2))
    one = jax.devices()[:1]
    ts1, _, _ = update(jax.device_put(ts, replicated(one)), shard_batch(env_state, one))
    ts2, _, _ = update(*_on_all_devices(ts, env_state))
    # Sharding changes the order of float32 reductions; on the task 64 contact-rich simulation
    # steps amplify that in a few entries (measured: 1 of 3072 actor weights off by 2e-3, the
    # rest < 1e-4), so the check is on the whole update: relative difference < 1e-3.
    for one_dev, two_dev in ((ts1.actor_params, ts2.actor_params), (ts1.critic_params, ts2.critic_params)):
        assert _relative_difference(one_dev, two_dev) < 1e-3
    updated = _relative_difference(ts1.actor_params, ts.actor_params)
    assert updated > 1e-3  # the update itself is much larger than the device discrepancy
