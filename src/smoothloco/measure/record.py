"""One control step of our simulator as a sample of an evaluation trajectory.

The fields are those of ``smoothloco.measure.metrics`` (the MuJoCo player records the same), so
the training-time grid and the transfer evaluation compute every metric one way.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from brax.envs.base import State

from smoothloco.sim import StepInfo
from smoothloco.sim.rotation import rotate_inverse


def trajectory_sample(state: State, contact: StepInfo) -> dict[str, jax.Array]:
    """The sample of ``state`` (the state at the start of a control step) and the ``contact`` of
    that step's last simulation step (torques, feet; the motors' power averaged over the step). ``done`` is the state's own flag."""
    q, v = state.pipeline_state.q, state.pipeline_state.v
    touching = contact.gap < 0  # the task's in-contact test (weight > 0.5) for every model
    depth = jnp.sum(jnp.where(touching, -contact.gap, 0.0)) / jnp.maximum(jnp.sum(touching), 1)
    return {
        "base_pos": q[:3],
        "base_lin_vel": rotate_inverse(q[3:7], v[:3]),
        "base_ang_vel": v[3:6],
        "gravity": rotate_inverse(q[3:7], jnp.array([0.0, 0.0, -1.0])),
        "joint_pos": q[7:],
        "joint_vel": v[6:],
        "torque": contact.torque,
        "foot_slip": jnp.where(touching, jnp.linalg.norm(contact.foot_velocity[:, 1:], axis=-1), 0.0),
        "foot_height": contact.gap,
        "penetration": depth,
        "power": contact.power,
        "done": state.done > 0,
    }
