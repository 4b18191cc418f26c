"""SHAC's host loop: the jitted ``SHAC.update`` once per iteration, with the run's evaluations,
checkpoints, stop requests and the divergence stop around it."""

from __future__ import annotations

import contextlib
import functools
from pathlib import Path
from typing import Callable

import jax

from smoothloco.job import across_processes, is_lead
from smoothloco.parallel import batch_sharding, replicated, to_host
from smoothloco.tasks import VelocityTask, randomize
from smoothloco.train import checkpoint
from smoothloco.train.compile_cache import gc_paused
from smoothloco.train.networks import make_policy_factory
from smoothloco.train.run_folder import TrainingDiverged
from smoothloco.train.run_log import RunLog
from smoothloco.train.runs import TrainConfig
from smoothloco.train.shac import SHAC, make_env


def train_shac(config: TrainConfig, log: RunLog, ckpt_path: Path, resume: bool) -> tuple[Callable, tuple, bool]:
    """Train (from ``ckpt_path`` with ``resume``) to ``shac.iterations``, reporting each
    iteration to ``log``. Returns ``(make_policy, (normalizer, actor params), stopped)``;
    ``TrainingDiverged`` after ``run.max_skipped_iterations`` non-finite iterations in a row."""
    c = config.shac
    task = VelocityTask(config.task)
    rand_fn = None
    if config.task.randomization.enabled:
        keys = jax.random.split(jax.random.PRNGKey(c.seed + 1), c.num_envs)
        rand_fn = functools.partial(randomize, rng=keys, config=config.task.randomization)
    algo = SHAC(make_env(task, c.episode_length, rand_fn), c)
    make_policy = make_policy_factory(algo.actor)

    # The state lives where the update computes: parameters replicated, environments split over
    # the job's devices. Init computes it there, so each environment's reset key comes from the
    # global batch, whatever the number of processes or devices.
    shardings = (replicated(), batch_sharding())
    with gc_paused(), across_processes("the first update"):
        train_state, env_state = jax.jit(algo.init, out_shardings=shardings)(jax.random.PRNGKey(c.seed))
    if resume:
        train_state, env_state = load_shac_checkpoint(ckpt_path, (train_state, env_state), c.num_envs)
        with across_processes("loading the checkpoint"):
            train_state, env_state = (jax.device_put(x, s) for x, s in zip((train_state, env_state), shardings))
        if is_lead():
            print(f"resumed {ckpt_path} at iteration {int(to_host(train_state.iteration))}", flush=True)
    update = jax.jit(algo.update, donate_argnums=(1,), out_shardings=(*shardings, replicated()))

    def save(iteration: int) -> None:
        with across_processes(f"the checkpoint at iteration {iteration}"):
            host = to_host((train_state, env_state))  # every process: it gathers the environments
            if is_lead():
                log.sync()  # the rows up to this checkpoint reach the disk before it does
                checkpoint.save(ckpt_path, host)

    first = int(to_host(train_state.iteration))
    skipped_before, skipping = int(to_host(train_state.skipped_updates)), 0
    for it in range(first, c.iterations):
        with gc_paused() if it == first else contextlib.nullcontext(), across_processes(f"iteration {it + 1}"):
            train_state, env_state, metrics = update(train_state, env_state)  # the first call compiles
            metrics = {k: float(v) for k, v in to_host(metrics).items()}
            stop = log.stop_requested  # read once: every process acts on the same answer
        skipping = skipping + 1 if metrics["skipped_updates"] > skipped_before else 0
        skipped_before = metrics["skipped_updates"]
        row = {**log.row(it + 1, int(to_host(train_state.env_steps))), **metrics}
        done = it + 1 == c.iterations
        if config.run.eval_every and ((it + 1) % config.run.eval_every == 0) or done:
            params = to_host((train_state.normalizer, train_state.actor_params))
            row.update(log.evaluate(make_policy, params, progress=metrics["training_progress"]))
        log.record(row, c.iterations)
        if (it + 1) % config.run.checkpoint_every == 0 or done or stop:
            save(it + 1)
        if skipping >= config.run.max_skipped_iterations and not done:
            save(it + 1)  # skipped updates left the parameters finite
            raise TrainingDiverged(
                f"stopped at iteration {it + 1}: {skipping} iterations in a row skipped their update as non-finite "
                f"(gradients, parameters or observation statistics; {int(skipped_before)} skipped in all), so the "
                f"training diverged. {ckpt_path} holds the last finite parameters; lower the learning rates "
                "or the contact sharpness, or check the task settings"
            )
        if stop and not done:
            return make_policy, to_host((train_state.normalizer, train_state.actor_params)), True
    return make_policy, to_host((train_state.normalizer, train_state.actor_params)), False


def load_shac_checkpoint(path: Path, template: tuple, num_envs: int) -> tuple:
    """``(train_state, env_state)`` from ``path``; a checkpoint of another environment count is
    named as such (its environment arrays differ in their leading axis alone)."""
    try:
        return checkpoint.load(path, template, names=("train_state", "env_state"))
    except checkpoint.CheckpointMismatch as exc:
        counts = {
            d.saved[0]
            for d in exc.differences
            if d.path.startswith("env_state/") and d.saved and d.expected and d.saved[1:] == d.expected[1:]
        }
        if len(counts) == 1:
            raise checkpoint.CheckpointError(
                f"checkpoint {path} holds {counts.pop()} environments; the configuration asks shac.num_envs {num_envs}"
            ) from exc
        raise
