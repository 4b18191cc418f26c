"""Tracking on a fixed grid of commands, each held for several seconds, no pushes."""

from __future__ import annotations

from typing import Any, Callable

import jax
import jax.numpy as jnp
import numpy as np

from smoothloco.measure import metrics
from smoothloco.measure.record import trajectory_sample
from smoothloco.tasks import VelocityTask, VelocityTaskConfig

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
    """``evaluate(params, progress=None)`` for ``make_policy(params) -> policy``, compiled on its
    first call and reused: parameters and the training progress (0 to 1; default 0, a fresh
    reset's) are arguments of the jitted rollout, not constants baked into it, so a training
    evaluates in the contact its task has reached (``VelocityTask.with_training_progress``)."""
    config = task_config.quiet()
    task = VelocityTask(config)
    steps = int(round(seconds / config.control_dt))
    settle = int(round(settle_seconds / config.control_dt))
    if not 0 <= settle < steps:
        raise ValueError(f"evaluation of {seconds} s must last longer than its {settle_seconds} s settling time")
    command_array = jnp.asarray(commands, jnp.float32)
    keys = jax.random.split(jax.random.PRNGKey(0), len(commands))

    def run(params, progress: jax.Array, command: jax.Array, key: jax.Array):
        policy = make_policy(params)
        state = task.with_training_progress(task.reset_commanded(key, command), progress)

        def body(carry, _):
            state, fallen, ret = carry
            obs = jax.tree.map(lambda x: x[None], state.obs)
            next_state, contact = task.step_with_contact(state, policy(obs)[0])
            ret = ret + jnp.where(fallen, 0.0, next_state.reward)  # the falling step counts, later ones not
            fallen = fallen | (next_state.done > 0)
            return (next_state, fallen, ret), {**trajectory_sample(state, contact), "fallen": fallen}

        init = (state, jnp.array(False), jnp.zeros(()))
        (_, _, ret), records = jax.lax.scan(body, init, None, length=steps)
        return ret, records

    rollout = jax.jit(jax.vmap(run, in_axes=(None, None, 0, 0)))
    times = np.arange(steps) * config.control_dt
    mass = task.robot.mass

    def evaluate(params, progress: float | None = None) -> dict:
        progress = jnp.asarray(0.0 if progress is None else progress, jnp.float32)
        returns, records = jax.device_get(rollout(params, progress, command_array, keys))
        rows = []
        for i, command in enumerate(commands):
            traj = {k: np.asarray(v[i], np.float64) for k, v in records.items() if k not in ("done", "fallen")}
            traj.update(time=times, command=np.tile(np.asarray(command, np.float64), (steps, 1)))
            traj["fallen"] = np.asarray(records["fallen"][i], bool)
            rows.append({"command": list(command), **gait_metrics(traj, mass, settle_seconds)})
        return {
            "lin_vel_error": float(np.mean([r["lin_vel_error"] for r in rows])),
            "yaw_rate_error": float(np.mean([r["yaw_rate_error"] for r in rows])),
            "fall_rate": float(np.mean([r["fell"] for r in rows])),
            "episode_return": float(np.mean(returns)),
            "per_command": rows,
        }

    return evaluate


def gait_metrics(traj: metrics.Trajectory, mass: float, settle_seconds: float = 1.0) -> dict:
    """Tracking and how the robot gets there, for one command held: stepping (air time,
    clearance, steps per second), foot slip, cost of transport and base speed. A fall before the
    command settled tracks with the error of standing still (``metrics.lin_vel_error``)."""
    return {
        "lin_vel_error": metrics.lin_vel_error(traj, settle_seconds),
        "yaw_rate_error": metrics.yaw_rate_error(traj, settle_seconds),
        "fell": metrics.fell(traj),
        "foot_air_time": metrics.foot_air_time(traj, settle_seconds),
        "foot_clearance": metrics.foot_clearance(traj, settle_seconds),
        "steps_per_second": metrics.steps_per_second(traj, settle_seconds),
        "foot_slip": metrics.foot_slip(traj),
        "cost_of_transport": metrics.cost_of_transport(traj, mass, settle_seconds),
        "base_speed": metrics.base_speed(traj, settle_seconds),
    }
