"""The trot generator of ``GaitConfig``: a phase clock and the joint offsets it adds.

Kept apart from the task because the exported policy bakes the same offsets into its graph
(``deploy.export``), so the deployed controller and the training task cannot disagree.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from smoothloco.robot import RobotSpec
from smoothloco.robot.spec import JOINTS_PER_LEG

HIP, KNEE = 1, 2  # a leg's joints, base to foot: abduction, hip, knee (``RobotSpec``'s order)


def first_diagonal(robot: RobotSpec) -> np.ndarray:
    """(n_feet,) bool: the feet of the pair that swings first, front-left with hind-right, read
    from where the feet stand (front/hind and left/right in the base frame), not from names."""
    feet = robot.foot_positions()
    return np.sign(feet[:, 0]) * np.sign(feet[:, 1]) > 0


def swing_offsets(robot: RobotSpec, hip_amplitude: float) -> np.ndarray:
    """(2, n_joints): joint offsets at mid-swing of the first and of the second diagonal pair.

    Each swinging leg flexes its hip by ``hip_amplitude`` and its knee twice as much in the
    direction of its standing bend, which lifts the foot roughly straight up under the hip
    (thigh and shank are about equally long)."""
    offsets = np.zeros((2, len(robot.joint_names)))
    for leg, first in enumerate(first_diagonal(robot)):
        pair = 0 if first else 1
        for joint, scale in ((HIP, 1.0), (KNEE, 2.0)):
            i = leg * JOINTS_PER_LEG + joint
            offsets[pair, i] = np.sign(robot.default_pose[i]) * scale * hip_amplitude
    return offsets


def leg_phase_shifts(robot: RobotSpec) -> np.ndarray:
    """(n_feet,) phase shift of each foot's swing, in cycles: 0 for the first diagonal pair,
    0.5 for the second, so each pair swings while the other stands (a trot)."""
    return np.where(first_diagonal(robot), 0.0, 0.5)


def swing_profile(phase: jax.Array, shifts: jax.Array) -> jax.Array:
    """(n_feet,) in [0, 1]: how far into its swing each foot should be at ``phase``, a half sine
    over the first half of the foot's own cycle and 0 while it stands (the same timing as the
    generator's offsets)."""
    return jax.nn.relu(jnp.sin(2.0 * jnp.pi * (phase + shifts)))


def clock(phase: jax.Array) -> jax.Array:
    """(2,) [sin, cos] of the gait phase (cycles, in [0, 1)); what the policy observes."""
    angle = 2.0 * jnp.pi * phase
    return jnp.stack([jnp.sin(angle), jnp.cos(angle)])


def offset_from_clock(offsets: jax.Array, sin_phase: jax.Array) -> jax.Array:
    """Joint offsets at a phase given by its sine: the first pair swings while it is positive,
    the second while it is negative, each along a half sine."""
    return jax.nn.relu(sin_phase) * offsets[0] + jax.nn.relu(-sin_phase) * offsets[1]
