"""The PPO adapter: Brax's ``ppo.train`` run with a ``PPOConfig``, reporting through its hooks
into the run log as SHAC's host loop does, so both algorithms' run folders compare."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable

import numpy as np
from brax.training.agents.ppo import train as brax_ppo

from smoothloco.tasks import VelocityTask
from smoothloco.train import checkpoint, ppo
from smoothloco.train.run_log import RunLog
from smoothloco.train.runs import TrainConfig


class _Stop(Exception):
    """Raised from a Brax hook to leave ``ppo.train`` after a checkpoint (SIGINT/SIGTERM)."""


def train_ppo(config: TrainConfig, log: RunLog, ckpt_path: Path) -> tuple[Callable, tuple, bool]:
    """Run Brax PPO, reporting each epoch to ``log``. Returns ``(make_policy, params, stopped)``
    with params = (normalizer, policy params, value params), Brax's order.

    Brax's ``ppo.train`` does the training; this translates ``PPOConfig`` into its arguments and
    reports through its ``policy_params_fn`` and ``progress_fn`` hooks, which Brax calls after
    every training epoch. One epoch is ``run.eval_every`` iterations, so PPO is evaluated and
    checkpointed on the SHAC schedule."""
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
            network_factory=ppo.network_factory(c),
            randomization_fn=ppo.randomization_fn(config.task),
            wrap_env_fn=ppo.wrap_for_training(c.full_reset),
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
