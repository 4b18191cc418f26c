"""The trot generator of ``GaitConfig``: a phase clock and the joint offsets it adds.

Kept apart from the task because the exported policy bakes the same offsets into its graph
(``deploy.export``), so the deployed controller and the training task cannot disagree.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from smoothloco.robot import RobotSpec

# Diagonal pairs swing in turn: LF with RH, then RF with LH.
FIRST_DIAGONAL = ("LF", "RH")


def swing_offsets(robot: RobotSpec, hip_amplitude: float) -> np.ndarray:
    """(2, n_joints): joint offsets at mid-swing of the first and of the second diagonal pair.

    Each swinging leg flexes its hip by ``hip_amplitude`` and its knee twice as much in the
    direction of its standing bend, which lifts the foot roughly straight up under the hip
    (thigh and shank are about equally long)."""
    offsets = np.zeros((2, len(robot.joint_names)))
    for i, name in enumerate(robot.joint_names):
        leg, joint = name.split("_")
        bend = np.sign(robot.default_pose[i])
        pair = 0 if leg in FIRST_DIAGONAL else 1
        if joint == "HFE":
            offsets[pair, i] = bend * hip_amplitude
        elif joint == "KFE":
            offsets[pair, i] = bend * 2.0 * hip_amplitude
    return offsets


def leg_phase_shifts(robot: RobotSpec) -> np.ndarray:
    """(n_feet,) phase shift of each foot's swing, in cycles: 0 for the first diagonal pair,
    0.5 for the second, so each pair swings while the other stands (a trot)."""
    return np.array([0.0 if leg.split("_")[0] in FIRST_DIAGONAL else 0.5 for leg in robot.foot_geoms])


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
