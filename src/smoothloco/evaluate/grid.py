"""Tracking on a fixed grid of commands, each held for several seconds, no pushes."""

from __future__ import annotations

from dataclasses import replace
from typing import Any, Callable

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
    """Mean tracking errors after ``settle_seconds``, the share of runs that fell and the mean
    return until a fall (``episode_return``).

    ``policy`` maps a batch of observations to actions (deterministic). To evaluate a policy
    repeatedly during training, ``command_evaluator`` compiles the rollout once instead.
    """
    return command_evaluator(task_config, lambda _: policy, commands, seconds, settle_seconds)(None)


def command_evaluator(
    task_config: VelocityTaskConfig,
    make_policy: Callable[[Any], Callable[[jax.Array], jax.Array]],
    commands: tuple[tuple[float, float, float], ...] = EVAL_COMMANDS,
    seconds: float = 5.0,
    settle_seconds: float = 1.0,
) -> Callable[[Any], dict]:
    """``evaluate(params)`` for ``make_policy(params) -> policy``, compiled on its first call and
    reused: parameters are an argument of the jitted rollout, not constants baked into it."""
    config = replace(
        task_config,
        pushes=PushConfig(enabled=False),
        randomization=RandomizationConfig(enabled=False),
        commands=replace(task_config.commands, resample_seconds=(1e6, 1e6)),
    )
    task = VelocityTask(config)
    steps = int(round(seconds / config.control_dt))
    settle = int(round(settle_seconds / config.control_dt))
    if not 0 <= settle < steps:
        raise ValueError(f"evaluation of {seconds} s must last longer than its {settle_seconds} s settling time")
    command_array = jnp.asarray(commands, jnp.float32)
    keys = jax.random.split(jax.random.PRNGKey(0), len(commands))

    def run(params, command: jax.Array, key: jax.Array):
        policy = make_policy(params)
        state = task.reset(key)
        state = state.replace(info={**state.info, "command": command})
        state = state.replace(obs=task._observe(state.pipeline_state, state.info, _contact_placeholder(), key, False))

        def body(carry, _):
            state, fallen, ret = carry
            obs = jax.tree.map(lambda x: x[None], state.obs)
            action = policy(obs)[0]
            state = task.step(state, action)
            ret = ret + jnp.where(fallen, 0.0, state.reward)  # the falling step counts, later ones not
            fallen = fallen | (state.done > 0)
            return (state, fallen, ret), (state.metrics["lin_vel_error"], state.metrics["yaw_rate_error"], fallen)

        init = (state, jnp.array(False), jnp.zeros(()))
        (_, fallen, ret), (lin, yaw, fallen_t) = jax.lax.scan(body, init, None, length=steps)
        upright = 1.0 - fallen_t[settle:].astype(jnp.float32)
        denom = jnp.maximum(jnp.sum(upright), 1.0)
        return jnp.sum(lin[settle:] * upright) / denom, jnp.sum(yaw[settle:] * upright) / denom, fallen, ret

    rollout = jax.jit(jax.vmap(run, in_axes=(None, 0, 0)))

    def evaluate(params) -> dict:
        lin, yaw, fell, ret = (np.asarray(x) for x in rollout(params, command_array, keys))
        return {
            "lin_vel_error": float(lin.mean()),
            "yaw_rate_error": float(yaw.mean()),
            "fall_rate": float(fell.mean()),
            "episode_return": float(ret.mean()),
            "per_command": [
                {"command": list(c), "lin_vel_error": float(a), "yaw_rate_error": float(b), "fell": bool(f)}
                for c, a, b, f in zip(commands, lin, yaw, fell)
            ],
        }

    return evaluate


def _contact_placeholder():
    from smoothloco.tasks.velocity import _resting_contact

    return _resting_contact(None)
