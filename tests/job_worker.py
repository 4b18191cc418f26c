"""One process of a small SHAC job, for tests/test_job.py: ``python job_worker.py OUT PORT
PROCESSES ID [--lose-at N]``. Trains the point-mass fake on the job's global batch for a few
updates and process 0 writes the parameters to ``OUT`` (.npz); the same ``updates`` runs in the
test's own process as the one-process reference. With ``--lose-at N`` process 1 exits at update
N without a word, and process 0 writes what it raised instead."""

from __future__ import annotations

import os
import sys

import jax
import numpy as np
from fakes import PointMassTracking

from smoothloco import job
from smoothloco.parallel import batch_sharding, replicated, to_host
from smoothloco.train.shac import SHAC, SHACConfig, make_env

CONFIG = SHACConfig(
    num_envs=8, horizon=8, iterations=3, critic_epochs=1, critic_minibatches=2,
    actor_hidden=(16, 16), critic_hidden=(16, 16), episode_length=16,
)  # fmt: skip


def updates(lose_at: int | None = None) -> dict:
    """The actor and critic parameters after ``CONFIG.iterations`` updates over the job's devices."""
    shac = SHAC(make_env(PointMassTracking(), CONFIG.episode_length), CONFIG)
    shardings = (replicated(), batch_sharding())
    ts, env_state = jax.jit(shac.init, out_shardings=shardings)(jax.random.PRNGKey(0))
    update = jax.jit(shac.update, out_shardings=(*shardings, replicated()))
    for it in range(CONFIG.iterations):
        if lose_at == it and jax.process_index() == 1:
            os._exit(9)
        with job.across_processes(f"update {it + 1}"):
            ts, env_state, _ = update(ts, env_state)
    return {"actor": to_host(ts.actor_params), "critic": to_host(ts.critic_params), "env": to_host(env_state.obs)}


def main(out: str, port: str, processes: str, process_id: str, *rest: str) -> None:
    os.environ["XLA_FLAGS"] = "--xla_force_host_platform_device_count=1"  # one device each, before JAX starts
    jax.config.update("jax_platforms", "cpu")
    job.start(f"127.0.0.1:{port}", int(processes), int(process_id))
    lose_at = int(rest[1]) if rest[:1] == ("--lose-at",) else None
    # The lead's refusal stops the other process too; a stop asked on one is seen by both.
    try:
        job.shared_outcome(ValueError("refused by the lead") if job.is_lead() else None)
    except (ValueError, job.JobError) as exc:
        refusal = f"{type(exc).__name__}: {exc}"
    stop = job.any_process(jax.process_index() == 1)
    try:
        params = updates(lose_at)
    except job.ProcessLost as exc:
        np.savez(out, lost=str(exc))
        os._exit(0)  # the distributed runtime's shutdown would wait for the lost process
    if job.is_lead():
        leaves = {jax.tree_util.keystr(k): v for k, v in jax.tree_util.tree_leaves_with_path(params)}
        np.savez(out, refusal=refusal, stop=stop, **leaves)
    else:
        np.savez(f"{out}.other.npz", refusal=refusal, stop=stop)


if __name__ == "__main__":
    main(*sys.argv[1:])
