"""The PPO baseline: Brax's own ``ppo.train`` on exactly the task SHAC trains on.

Same ``VelocityTask`` (observations, rewards, termination, pushes), same domain randomization
(``tasks.randomize`` as Brax's ``randomization_fn``), same evaluation and run folder: the driver
only translates ``PPOConfig`` into Brax's arguments and reports through Brax's ``policy_params_fn``
and ``progress_fn`` hooks, which Brax calls after every training epoch. Here one epoch is
``run.eval_every`` iterations, so PPO is evaluated and checkpointed on the SHAC schedule.
"""

from __future__ import annotations

import functools
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

import jax
import numpy as np
from brax.training.acme import running_statistics, specs
from brax.training.agents.ppo import networks as ppo_networks
from flax import linen

from smoothloco.tasks import VelocityTask, VelocityTaskConfig, randomize
from smoothloco.train import checkpoint
from smoothloco.validation import require_finite

if TYPE_CHECKING:
    from smoothloco.train.runner import RunLog, TrainConfig


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

    num_envs: int = 256  # legged_gym 4096
    unroll_length: int = 24  # legged_gym num_steps_per_env
    num_minibatches: int = 4  # each of num_envs / num_minibatches whole unrolls
    num_updates_per_batch: int = 5  # epochs over each batch
    # Rollout + update rounds; env steps = iterations * num_envs * unroll_length. 600 (3.7M steps)
    # took 4.3 min on 2 CPU cores at ~16,500 env steps/s (forward-only rollouts, no gradient
    # through the simulator), evaluations included.
    iterations: int = 600
    learning_rate: float = 1e-3
    adaptive_kl: bool = True  # rsl_rl's schedule: adapt the learning rate to the KL target
    desired_kl: float = 0.01
    entropy_cost: float = 0.01
    discounting: float = 0.99
    gae_lambda: float = 0.95
    clipping_epsilon: float = 0.2
    clipping_epsilon_value: float = 0.2  # rsl_rl's clipped value loss
    vf_loss_coefficient: float = 1.0
    max_grad_norm: float = 1.0
    normalize_observations: bool = True
    policy_hidden: tuple[int, ...] = (128, 64, 32)  # legged_gym anymal_c_flat actor
    value_hidden: tuple[int, ...] = (128, 64, 32)
    episode_length: int = 1000  # control steps (20 s at 50 Hz), as SHAC
    seed: int = 0

    def __post_init__(self) -> None:
        require_finite("ppo", self)
        for name in (
            "num_envs", "unroll_length", "num_minibatches", "num_updates_per_batch", "iterations", "episode_length"
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


class _Stop(Exception):
    """Raised from a Brax hook to leave ``ppo.train`` after a checkpoint (SIGINT/SIGTERM)."""


def train_ppo(config: TrainConfig, log: RunLog, ckpt_path: Path) -> tuple[Callable, tuple, bool]:
    """Run Brax PPO, reporting each epoch to ``log``. Returns ``(make_policy, params, stopped)``
    with params = (normalizer, policy params, value params), Brax's order."""
    from brax.training.agents.ppo import train as brax_ppo

    c = config.ppo
    epochs = c.iterations // (config.run.eval_every or c.iterations)  # TrainConfig checked it divides
    latest: dict[str, Any] = {}

    def policy_params_fn(step: int, make_policy: Callable, params: tuple) -> None:
        if step == 0:  # Brax also calls this before training; SHAC is not evaluated there either
            return
        row = log.row(step // c.steps_per_iteration, step)  # timed before the evaluation
        row.update(log.evaluate(make_policy, params))
        checkpoint.save(ckpt_path, _checkpoint_tree(params, row["iteration"], step))
        latest.update(make_policy=make_policy, params=params, row=row)

    def progress_fn(step: int, metrics: dict) -> None:
        row = latest["row"]
        row.update({k: float(v) for k, v in metrics.items() if k.startswith("training/") and k != "training/walltime"})
        log.record(row, c.iterations)
        if log.stop_requested and step < c.iterations * c.steps_per_iteration:
            raise _Stop

    try:
        make_policy, params, _ = brax_ppo.train(
            environment=VelocityTask(config.task),
            num_timesteps=c.iterations * c.steps_per_iteration,
            num_evals=epochs + 1,  # Brax: one call before training, then one per epoch
            run_evals=False,  # Brax's evaluator runs whole episodes; ours is the command grid
            num_eval_envs=2,  # built (its reset compiled) even when unused: keep it small
            episode_length=c.episode_length,
            num_envs=c.num_envs,
            batch_size=c.num_envs // c.num_minibatches,
            num_minibatches=c.num_minibatches,
            unroll_length=c.unroll_length,
            num_updates_per_batch=c.num_updates_per_batch,
            learning_rate=c.learning_rate,
            learning_rate_schedule="ADAPTIVE_KL" if c.adaptive_kl else None,
            desired_kl=c.desired_kl,
            entropy_cost=c.entropy_cost,
            discounting=c.discounting,
            gae_lambda=c.gae_lambda,
            clipping_epsilon=c.clipping_epsilon,
            clipping_epsilon_value=c.clipping_epsilon_value,
            vf_loss_coefficient=c.vf_loss_coefficient,
            max_grad_norm=c.max_grad_norm,
            normalize_observations=c.normalize_observations,
            network_factory=network_factory(c),
            randomization_fn=randomization_fn(config.task),
            policy_params_fn=policy_params_fn,
            progress_fn=progress_fn,
            seed=c.seed,
        )
    except _Stop:
        return latest["make_policy"], latest["params"], True
    return make_policy, params, False


def _checkpoint_tree(params: tuple, iteration: int, env_steps: int) -> dict:
    normalizer, policy, value = params
    return {
        "normalizer": normalizer,
        "policy_params": policy,
        "value_params": value,
        "iteration": np.int64(iteration),
        "env_steps": np.int64(env_steps),
    }


def load_policy(config: TrainConfig, raw: dict, ckpt_path: Path) -> tuple[Callable, tuple, int, int]:
    """From a PPO checkpoint (``ckpt_path``) read with ``checkpoint.load_raw``: Brax's
    ``make_policy``, ``(normalizer, policy params)``, iteration and env steps. KeyError/ValueError
    or ``checkpoint.CheckpointMismatch`` if it does not match the config."""
    from flax import serialization

    c = config.ppo
    task = VelocityTask(config.task)
    size = task.observation_size  # an int, or a dict of shapes with a privileged critic
    if isinstance(size, dict):
        obs_spec = {k: specs.Array(v, np.float32) for k, v in size.items()}
    else:
        obs_spec = specs.Array((size,), np.float32)
    normalize = running_statistics.normalize if c.normalize_observations else (lambda x, y: x)
    networks = network_factory(c)(size, task.action_size, preprocess_observations_fn=normalize)
    make_policy = ppo_networks.make_inference_fn(networks)
    policy_template = networks.policy_network.init(jax.random.PRNGKey(0))
    normalizer_template = running_statistics.init_state(obs_spec)
    for key, template in (("normalizer", normalizer_template), ("policy_params", policy_template)):
        checkpoint.check_matches(ckpt_path, raw[key], template, where=key, what="config.json")
    params = (
        serialization.from_state_dict(normalizer_template, raw["normalizer"]),
        serialization.from_state_dict(policy_template, raw["policy_params"]),
    )
    return make_policy, params, int(raw["iteration"]), int(raw["env_steps"])
