"""Reward terms: small named functions of one control step, each logged on its own.

All are smooth in the state and action, so SHAC can differentiate through them.
"""

from __future__ import annotations

from typing import Callable

import jax
import jax.numpy as jnp
from flax import struct


@struct.dataclass
class RewardInputs:
    lin_vel: jax.Array  # (3,) base linear velocity, body frame
    ang_vel: jax.Array  # (3,) base angular velocity, body frame
    gravity: jax.Array  # (3,) unit gravity direction, body frame
    command: jax.Array  # (3,) vx, vy, yaw rate
    joint_pos: jax.Array  # (12,)
    joint_lower: jax.Array
    joint_upper: jax.Array
    joint_default: jax.Array  # (12,) the standing pose
    torque: jax.Array  # (12,)
    action: jax.Array
    last_action: jax.Array
    base_height: jax.Array  # ()
    foot_weight: jax.Array  # (4,) contact participation
    foot_slip: jax.Array  # (4,) tangential foot speed
    air_time: jax.Array  # (4,) seconds each foot has been off the ground
    touchdown: jax.Array  # (4,) 1 where a foot landed this step
    foot_height: jax.Array  # (4,) foot sphere height above the ground (negative: sunk in)
    swing_target: jax.Array  # (4,) foot height the gait clock asks for (0: stand)
    standing: jax.Array  # () 1 when the robot should stand still (VelocityTask.at_rest)
    tracking_sigma: float = struct.field(pytree_node=False)
    base_height_target: float = struct.field(pytree_node=False)
    swing_height: float = struct.field(pytree_node=False)  # m, peak of the swing target


def alive(x: RewardInputs) -> jax.Array:
    """Constant per surviving step: with mostly negative shaping terms, ending an episode early
    must not look attractive to the critic."""
    return jnp.ones_like(x.base_height)


def tracking_lin_vel(x: RewardInputs) -> jax.Array:
    error = jnp.sum((x.command[:2] - x.lin_vel[:2]) ** 2)
    return jnp.exp(-error / x.tracking_sigma)


def tracking_ang_vel(x: RewardInputs) -> jax.Array:
    return jnp.exp(-((x.command[2] - x.ang_vel[2]) ** 2) / x.tracking_sigma)


def lin_vel_z(x: RewardInputs) -> jax.Array:
    return x.lin_vel[2] ** 2


def ang_vel_xy(x: RewardInputs) -> jax.Array:
    return jnp.sum(x.ang_vel[:2] ** 2)


def orientation(x: RewardInputs) -> jax.Array:
    return jnp.sum(x.gravity[:2] ** 2)


def torques(x: RewardInputs) -> jax.Array:
    return jnp.sum(x.torque**2)


def action_rate(x: RewardInputs) -> jax.Array:
    return jnp.sum((x.action - x.last_action) ** 2)


def joint_limits(x: RewardInputs) -> jax.Array:
    margin = 0.05
    over = jax.nn.relu(x.joint_pos - (x.joint_upper - margin)) + jax.nn.relu((x.joint_lower + margin) - x.joint_pos)
    return jnp.sum(over)


def foot_slip(x: RewardInputs) -> jax.Array:
    return jnp.sum(x.foot_weight * x.foot_slip**2)


def base_height(x: RewardInputs) -> jax.Array:
    return (x.base_height - x.base_height_target) ** 2


def feet_air_time(x: RewardInputs) -> jax.Array:
    """Event term (legged_gym): reward steps longer than 0.5 s at touchdown, only when moving."""
    moving = jnp.linalg.norm(x.command[:2]) > 0.1
    return moving * jnp.sum((x.air_time - 0.5) * x.touchdown)


def feet_swing_height(x: RewardInputs) -> jax.Array:
    """How well the feet follow the gait clock's heights: lift each swinging foot to its target,
    keep the standing ones down. Differentiable in the joint angles through the foot positions,
    so the gradient says how to step, not only that stepping pays.

    A kernel, not a penalty: bounded and positive, it can never make ending an episode look
    better than staying up. A standing foot is only held to "not above the ground": how far it
    sinks is the contact model's business (~3 cm at s = 300 1/m in smooth contact)."""
    swinging = x.swing_target > 0
    miss = jnp.where(swinging, x.foot_height - x.swing_target, jax.nn.relu(x.foot_height))
    return jnp.exp(-jnp.sum(miss**2) / (SWING_SIGMA * max(x.swing_height, MIN_SWING_HEIGHT) ** 2))


def stand_still(x: RewardInputs) -> jax.Array:
    """While standing, distance (L1) of the joints from the standing pose (legged_gym's
    term): the swing kernel barely notices a foot lifted a centimetre, this does."""
    return x.standing * jnp.sum(jnp.abs(x.joint_pos - x.joint_default))


# The kernel width in squared swing heights, so the term reads the same on a small robot as on
# a large one: 0.02 m^2 for 0.08 m swings. Not stepping at all (0.08 m swings, feet sunk 3 cm)
# scores about 0.5, where the kernel's slope is still large.
SWING_SIGMA = 3.125
MIN_SWING_HEIGHT = 0.01  # m; without a swing target (height 0) the kernel holds the feet down at this width


REWARD_TERMS: dict[str, Callable[[RewardInputs], jax.Array]] = {
    f.__name__: f
    for f in (
        alive,
        tracking_lin_vel,
        tracking_ang_vel,
        lin_vel_z,
        ang_vel_xy,
        orientation,
        torques,
        action_rate,
        joint_limits,
        foot_slip,
        base_height,
        feet_air_time,
        feet_swing_height,
        stand_still,
    )
}
