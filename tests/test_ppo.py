"""PPO baseline: the same task as SHAC sees, the algorithm choice and its settings."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from brax import envs
from brax.training.agents.ppo import train as brax_ppo
from fakes import PointMassTracking

from smoothloco.commands import main
from smoothloco.tasks import CommandConfig, PushConfig, RandomizationConfig, VelocityTask, VelocityTaskConfig
from smoothloco.train import ppo
from smoothloco.train.runs import TrainConfig
from smoothloco.train.shac import make_env

N, STEPS, EPISODE = 4, 30, 1000


@pytest.mark.slow
def test_ppo_and_shac_see_the_same_observations_rewards_and_dones():
    # Pushes, command changes, sensor noise and randomization all happen within the window.
    task = VelocityTask(
        VelocityTaskConfig(
            obs_noise=1.0,
            pushes=PushConfig(interval_seconds=(0.1, 0.2)),
            commands=CommandConfig(resample_seconds=(0.1, 0.2)),
            # no floor slipperier than 0.3: random actions on the default's 0.2 fall within the
            # window, and steps after a fall are not compared
            randomization=RandomizationConfig(friction=(0.3, 1.25)),
        )
    )
    key_env = jax.random.PRNGKey(7)
    rand = ppo.randomization_fn(task.config)
    # The environment exactly as Brax's ppo.train builds it (its private helper, so that a change
    # in how Brax wraps shows up here), and as SHAC's runner builds it, with the same parameters.
    ppo_env = brax_ppo._maybe_wrap_env(task, True, N, EPISODE, 1, 1, key_env, None, rand)
    shac_env = make_env(task, EPISODE, lambda sys: rand(sys, rng=jax.random.split(key_env, N)))
    actions = 0.5 * jax.random.normal(jax.random.PRNGKey(1), (STEPS, N, 12))

    @jax.jit
    def rollouts(keys):
        def run(env):
            def body(state, action):
                state = env.step(state, action)
                return state, (state.obs, state.reward, state.done)

            first = env.reset(keys)
            return first.obs, jax.lax.scan(body, first, actions)[1]

        return run(ppo_env), run(shac_env)

    (ppo_first, (ppo_obs, ppo_reward, ppo_done)), (shac_first, (shac_obs, shac_reward, shac_done)) = rollouts(
        jax.random.split(jax.random.PRNGKey(0), N)
    )
    np.testing.assert_array_equal(ppo_first, shac_first)
    # After an episode ends Brax's auto-reset starts a new one and SHAC resets on its own: compare
    # up to and including each environment's first done (its pre-reset observation differs by design).
    live = np.cumsum(np.asarray(shac_done), axis=0) - np.asarray(shac_done) == 0
    assert live.sum() > 0.9 * live.size
    np.testing.assert_array_equal(np.asarray(ppo_done)[live], np.asarray(shac_done)[live])
    np.testing.assert_array_equal(np.asarray(ppo_reward)[live], np.asarray(shac_reward)[live])
    live_obs = live & (np.asarray(shac_done) == 0)
    np.testing.assert_array_equal(np.asarray(ppo_obs)[live_obs], np.asarray(shac_obs)[live_obs])
    assert float(jnp.abs(jnp.diff(shac_obs[:, 0, :3], axis=0)).max()) > 0  # the window did move


def test_unknown_algorithm_is_rejected_with_the_accepted_ones(capsys):
    with pytest.raises(SystemExit):
        main(["train", "--algo", "dqn"])
    assert "unknown algorithm 'dqn'; accepted: shac, ppo" in capsys.readouterr().err
    with pytest.raises(ValueError, match="accepted: shac, ppo"):
        TrainConfig(algo="dqn")


@pytest.mark.parametrize(
    "argv,message",
    [
        (["--ppo.num_envs", "6", "--ppo.num_minibatches", "4"], "multiple of ppo.num_minibatches"),
        (["--ppo.iterations", "5", "--run.eval_every", "2"], "multiple of run.eval_every"),
        (["--ppo.discounting", "1.5"], "ppo.discounting must be in"),
    ],
)
def test_bad_ppo_settings_are_rejected(argv, message, capsys):
    assert main(["train", "--algo", "ppo", *argv]) == 2
    assert message in capsys.readouterr().err


def test_a_full_reset_starts_a_whole_new_episode_where_brax_s_keeps_the_task_info():
    """An episode of 3 steps on the point mass: after the step that ends it, Brax's auto-reset
    puts back the first velocity and observation but keeps the command; the full reset draws a
    new command, different in every environment, and restarts the counters. Both keep the step's
    done and truncation, which PPO learns the last transition from."""
    task, keys, n = PointMassTracking(), jax.random.split(jax.random.PRNGKey(0), 4), 4
    full, brax = ppo.wrap_for_training(True)(task, 3, 1), envs.training.wrap(task, 3)
    push = jnp.ones((n, 2))
    ends = {}
    for name, env in (("full", full), ("brax", brax)):
        state = env.reset(keys)
        first_command = state.info["command"]
        for _ in range(3):
            state = jax.jit(env.step)(state, push)
        ends[name] = (first_command, state)
        assert np.all(np.asarray(state.done) == 1) and np.all(np.asarray(state.info["truncation"]) == 1)
        np.testing.assert_array_equal(np.asarray(state.pipeline_state), 0.0)  # the first velocity, at rest
        after = jax.jit(env.step)(state, push)
        assert np.all(np.asarray(after.done) == 0) and np.all(np.asarray(after.info["steps"]) == 1)
    first, state = ends["brax"]
    np.testing.assert_array_equal(state.info["command"], first)
    first, state = ends["full"]
    command = np.asarray(state.info["command"])
    assert np.all(np.abs(command - np.asarray(first)) > 1e-6) and len(np.unique(command[:, 0])) == n
    np.testing.assert_array_equal(np.asarray(state.obs)[:, 2:], command)  # the observation is the new episode's
