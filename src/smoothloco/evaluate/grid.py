"""Tracking on a fixed grid of commands, each held for several seconds, no pushes."""

from __future__ import annotations

from dataclasses import replace
from typing import Callable

import jax
import jax.numpy as jnp
import numpy as np

from smoothloco.tasks import PushConfig, RandomizationConfig, VelocityTask, VelocityTaskConfig
from smoothloco.tasks.config import CommandConfig

# (vx m/s, vy m/s, yaw rad/s): forward, lateral and turning, both signs, and standing still.
EVAL_COMMANDS: tuple[tuple[float, float, float], ...] = (
    (0.0, 0.0, 0.0),
    (0.5, 0.0, 0.0),
    (1.0, 0.0, 0.0),
    (-0.5, 0.0, 0.0),
    (0.0, 0.5, 0.0),
    (0.0, -0.5, 0.0),
    (0.0, 0.0, 0.5),
    (0.0, 0.0, -0.5),
    (0.5, 0.0, 0.5),
)


def evaluate_commands(
    task_config: VelocityTaskConfig,
    policy: Callable[[jax.Array], jax.Array],
    commands: tuple[tuple[float, float, float], ...] = EVAL_COMMANDS,
    seconds: float = 5.0,
    settle_seconds: float = 1.0,
) -> dict[str, float]:
    """Mean tracking errors after ``settle_seconds`` and the share of runs that fell.

    ``policy`` maps a batch of observations to actions (deterministic).
    """
    config = replace(
        task_config,
        pushes=PushConfig(enabled=False),
        randomization=RandomizationConfig(enabled=False),
        commands=replace(task_config.commands, resample_seconds=(1e6, 1e6)),
    )
    task = VelocityTask(config)
    steps = int(round(seconds / config.control_dt))
    settle = int(round(settle_seconds / config.control_dt))
    command_array = jnp.asarray(commands, jnp.float32)

    def run(command: jax.Array, key: jax.Array):
        state = task.reset(key)
        state = state.replace(info={**state.info, "command": command})
        state = state.replace(obs=task._observe(state.pipeline_state, state.info, _contact_placeholder(), key, False))

        def body(carry, _):
            state, fallen = carry
            obs = jax.tree.map(lambda x: x[None], state.obs)
            action = policy(obs)[0]
            state = task.step(state, action)
            fallen = fallen | (state.done > 0)
            return (state, fallen), (state.metrics["lin_vel_error"], state.metrics["yaw_rate_error"], fallen)

        (_, fallen), (lin, yaw, fallen_t) = jax.lax.scan(body, (state, jnp.array(False)), None, length=steps)
        upright = 1.0 - fallen_t[settle:].astype(jnp.float32)
        denom = jnp.maximum(jnp.sum(upright), 1.0)
        return jnp.sum(lin[settle:] * upright) / denom, jnp.sum(yaw[settle:] * upright) / denom, fallen

    keys = jax.random.split(jax.random.PRNGKey(0), len(commands))
    lin, yaw, fell = jax.jit(jax.vmap(run))(command_array, keys)
    lin, yaw, fell = np.asarray(lin), np.asarray(yaw), np.asarray(fell)
    return {
        "lin_vel_error": float(lin.mean()),
        "yaw_rate_error": float(yaw.mean()),
        "fall_rate": float(fell.mean()),
        "per_command": [
            {"command": list(c), "lin_vel_error": float(a), "yaw_rate_error": float(b), "fell": bool(f)}
            for c, a, b, f in zip(commands, lin, yaw, fell)
        ],
    }


def _contact_placeholder():
    from smoothloco.tasks.velocity import _resting_contact

    return _resting_contact(None)
