"""The PPO baseline: Brax's own ``ppo.train`` on exactly the task SHAC trains on.

Same ``VelocityTask`` (observations, rewards, termination, pushes), same domain randomization
(``tasks.randomize`` as Brax's ``randomization_fn``), same evaluation and run folder. This module
holds the algorithm's side: ``PPOConfig``, the networks and the randomization hook. The driver
that translates ``PPOConfig`` into Brax's arguments and reports through Brax's
``policy_params_fn`` and ``progress_fn`` hooks is the training loop's (``ppo_loop.train_ppo``);
reading a PPO checkpoint back is the run's (``runs.load_run``).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import asdict, dataclass

import jax
import jax.numpy as jnp
from brax import envs
from brax.training.agents.ppo import networks as ppo_networks
from flax import linen

from smoothloco.tasks import VelocityTaskConfig, randomize
from smoothloco.train.shac import make_env, start_episodes
from smoothloco.validation import require_finite, setting


@dataclass(frozen=True)
class PPOConfig:
    """legged_gym's ANYmal-C flat PPO (rsl_rl), in Brax's terms, sized for a 2-core CPU.

    Changed from legged_gym: 256 environments instead of 4096 (a CPU simulates a few thousand
    steps per second, not a million), so one update sees 6,144 transitions instead of 98,304;
    Brax's tanh-squashed Gaussian instead of rsl_rl's plain one. MuJoCo Playground's Go1/ANYmal
    joystick PPO (Brax, 8,192 envs, lr 3e-4 fixed, gamma 0.97, clip 0.3, (512, 256, 128) swish)
    is the other tuned reference; legged_gym's is kept because its task, rewards and ANYmal-C
    match ours. ELU MLPs as in legged_gym and our actor: the deterministic policy is
    ``tanh`` of the first ``action_size`` outputs of an ELU MLP (the ONNX exporter relies on it).
    """

    num_envs: int = setting(256, "parallel environments (split over all devices)")
    # legged_gym num_steps_per_env
    unroll_length: int = setting(24, "control steps each environment runs per rollout")
    # each of num_envs / num_minibatches whole unrolls
    num_minibatches: int = setting(4, "minibatches per pass over a rollout batch; must divide num_envs")
    num_updates_per_batch: int = setting(5, "passes over each rollout batch")
    # Rollout + update rounds; env steps = iterations * num_envs * unroll_length. 600 (3.7M steps)
    # took 4.3 min on 2 CPU cores at ~16,500 env steps/s (forward-only rollouts, no gradient
    # through the simulator), evaluations included.
    iterations: int = setting(600, "rollout + update rounds; environment steps = iterations * num_envs * unroll_length")
    learning_rate: float = setting(1e-3, "learning rate (Adam; the starting one when adaptive_kl is on)")
    adaptive_kl: bool = setting(True, "adapt the learning rate to keep each update's policy change near desired_kl")
    desired_kl: float = setting(0.01, "KL divergence per update that adaptive_kl aims at")
    entropy_cost: float = setting(0.01, "weight of the entropy bonus")
    discounting: float = setting(0.99, "discount factor per control step")
    gae_lambda: float = setting(0.95, "lambda of the generalized advantage estimate")
    clipping_epsilon: float = setting(0.2, "clip range of the policy probability ratio")
    # rsl_rl's clipped value loss
    clipping_epsilon_value: float = setting(0.2, "clip range of the value function's change per update")
    vf_loss_coefficient: float = setting(1.0, "weight of the value loss")
    max_grad_norm: float = setting(1.0, "clip the global gradient norm at this value")
    normalize_observations: bool = setting(True, "normalize observations with running mean and standard deviation")
    # legged_gym anymal_c_flat actor
    policy_hidden: tuple[int, ...] = setting((128, 64, 32), "hidden layer sizes of the policy network")
    value_hidden: tuple[int, ...] = setting((128, 64, 32), "hidden layer sizes of the value network")
    episode_length: int = setting(
        1000, "control steps before an episode is cut off (bootstrapped, not a fall); 1000 = 20 s at 50 Hz"
    )
    # Brax's auto-reset puts back each environment's first physics state and observation and
    # keeps the task's info (command, controller memory) of the episode that ended; a full
    # reset draws a new episode as SHAC's does (a reset of every environment each step).
    full_reset: bool = setting(
        False,
        "start each new episode from a fresh reset (new start, command and controller memory, as SHAC does) instead "
        "of Brax's auto-reset to the environment's first state",
    )
    seed: int = setting(0, "random seed")

    def __post_init__(self) -> None:
        require_finite("ppo", self)
        for name in (
            "num_envs",
            "unroll_length",
            "num_minibatches",
            "num_updates_per_batch",
            "iterations",
            "episode_length",
        ):
            if getattr(self, name) < 1:
                raise ValueError(f"ppo.{name} must be >= 1, got {getattr(self, name)}")
        for name in ("discounting", "gae_lambda"):
            if not 0.0 <= getattr(self, name) <= 1.0:
                raise ValueError(f"ppo.{name} must be in [0, 1], got {getattr(self, name)}")
        for name in ("learning_rate", "desired_kl", "clipping_epsilon", "clipping_epsilon_value", "max_grad_norm"):
            if not getattr(self, name) > 0:
                raise ValueError(f"ppo.{name} must be > 0, got {getattr(self, name)}")
        if self.num_envs % self.num_minibatches:
            raise ValueError(
                f"ppo.num_envs ({self.num_envs}) must be a multiple of ppo.num_minibatches ({self.num_minibatches})"
            )
        if not self.policy_hidden or not self.value_hidden:
            raise ValueError("ppo.policy_hidden and ppo.value_hidden need at least one layer")

    @property
    def steps_per_iteration(self) -> int:
        return self.num_envs * self.unroll_length

    def to_dict(self) -> dict:
        return asdict(self)


def network_factory(c: PPOConfig) -> Callable[..., ppo_networks.PPONetworks]:
    """Brax's PPO networks with our sizes and ELU; with a privileged critic the policy reads
    ``state`` and the value ``privileged_state`` (array observations ignore the keys)."""
    return functools.partial(
        ppo_networks.make_ppo_networks,
        policy_hidden_layer_sizes=c.policy_hidden,
        value_hidden_layer_sizes=c.value_hidden,
        activation=linen.elu,
        policy_obs_key="state",
        value_obs_key="privileged_state",
    )


def randomization_fn(task_config: VelocityTaskConfig) -> Callable | None:
    """``(sim, rng) -> (batched sim, in_axes)`` for Brax, or None when randomization is off."""
    if not task_config.randomization.enabled:
        return None
    return functools.partial(randomize, config=task_config.randomization)


class FullResetWrapper(envs.Wrapper):
    """Brax's ``AutoResetWrapper`` with whole new episodes: where a step ends an episode, the
    next state is a fresh reset of that environment — physics, observation and the task's info —
    from a key each environment carries. The step's ``done``, metrics and ``truncation`` stay,
    so the transition that ended the episode is learned from as Brax's wrapper leaves it."""

    def reset(self, rng: jax.Array) -> envs.State:
        state = self.env.reset(rng)
        state.info["reset_key"] = jax.vmap(jax.random.fold_in, in_axes=(0, None))(rng, 1)
        return state

    def step(self, state: envs.State, action: jax.Array) -> envs.State:
        if "steps" in state.info:  # the episode counter restarts after an ended episode
            state.info.update(steps=jnp.where(state.done, jnp.zeros_like(state.info["steps"]), state.info["steps"]))
        keys = jax.vmap(jax.random.split)(state.info["reset_key"])
        stepped = self.env.step(state.replace(done=jnp.zeros_like(state.done)), action)
        stepped.info["reset_key"] = keys[:, 0]
        fresh = self.env.reset(keys[:, 1])
        fresh.info.update(reset_key=keys[:, 0], truncation=stepped.info["truncation"])
        kept = fresh.replace(done=stepped.done, reward=stepped.reward, metrics=stepped.metrics)
        return start_episodes(self.env, stepped.done, stepped, kept)


def wrap_for_training(full_reset: bool) -> Callable | None:
    """Brax's ``wrap_env_fn``: its own wrapping, with ``FullResetWrapper`` in place of its
    auto-reset when ``full_reset`` (None: Brax's default wrapping)."""
    if not full_reset:
        return None

    def wrap(env, episode_length: int, action_repeat: int, randomization_fn: Callable | None = None) -> envs.Env:
        if action_repeat != 1:
            raise ValueError(f"the full reset wraps one control step per action, got action_repeat {action_repeat}")
        return FullResetWrapper(make_env(env, episode_length, randomization_fn))

    return wrap
