"""What the MuJoCo test bench records at every control period: the base, the joints, the
torques, the feet (height, slip, penetration) and falls, as the evaluation's metrics read them
(``smoothloco.measure.metrics``)."""

from __future__ import annotations

import mujoco
import numpy as np

from .contract import Contract

GRAVITY = np.array([0.0, 0.0, -1.0])


def to_body(data: mujoco.MjData, world: np.ndarray) -> np.ndarray:
    """A world-frame vector in the base frame (the free joint's orientation)."""
    inverse = np.empty(4)
    mujoco.mju_negQuat(inverse, data.qpos[3:7])
    out = np.empty(3)
    mujoco.mju_rotVecQuat(out, np.asarray(world, np.float64), inverse)
    return out


def empty_trajectory(steps: int, joints: int, feet: int) -> dict[str, np.ndarray]:
    """The arrays ``record`` fills, one row per control period."""
    return {
        "base_pos": np.zeros((steps, 3)),
        "base_lin_vel": np.zeros((steps, 3)),
        "base_ang_vel": np.zeros((steps, 3)),
        "gravity": np.zeros((steps, 3)),
        "joint_pos": np.zeros((steps, joints)),
        "joint_vel": np.zeros((steps, joints)),
        "torque": np.zeros((steps, joints)),
        "foot_slip": np.zeros((steps, feet)),
        "foot_height": np.zeros((steps, feet)),
        "penetration": np.zeros(steps),
        "fallen": np.zeros(steps, bool),
        "power": np.zeros(steps),
    }


def record(
    traj: dict, k: int, contract: Contract, model: mujoco.MjModel, data: mujoco.MjData, torque: np.ndarray, fallen: bool
) -> None:
    """Row ``k`` of ``traj``: the state in ``data`` and the torque applied then."""
    slip, depth = foot_contacts(contract, model, data)
    traj["base_pos"][k] = data.qpos[0:3]
    traj["base_lin_vel"][k] = to_body(data, data.qvel[0:3])
    traj["base_ang_vel"][k] = data.qvel[3:6]
    traj["gravity"][k] = to_body(data, GRAVITY)
    traj["joint_pos"][k] = data.qpos[contract.qpos_ids]
    traj["joint_vel"][k] = data.qvel[contract.dof_ids]
    traj["torque"][k] = torque
    traj["foot_slip"][k] = slip
    traj["foot_height"][k] = foot_heights(contract, model, data)
    traj["penetration"][k] = depth
    traj["fallen"][k] = fallen


def foot_heights(contract: Contract, model: mujoco.MjModel, data: mujoco.MjData) -> np.ndarray:
    """Height of each foot sphere's lowest point above the floor (flat ground, as trained on)."""
    floor = min(data.geom_xpos[g, 2] for g in contract.floor_geoms)
    return data.geom_xpos[contract.foot_geoms, 2] - model.geom_size[contract.foot_geoms, 0] - floor


def foot_contacts(contract: Contract, model: mujoco.MjModel, data: mujoco.MjData) -> tuple[np.ndarray, float]:
    """Tangential speed of each foot touching the ground (else 0) and their mean penetration."""
    feet_geoms = contract.foot_geoms
    slip = np.zeros(len(feet_geoms))
    depth = np.zeros(len(feet_geoms))
    touching = np.zeros(len(feet_geoms), bool)
    contacts = data.contact
    twist = np.zeros(6)
    for c in np.flatnonzero((contacts.dist <= 0) & np.isin(contacts.geom, contract.floor_geoms).any(axis=1)):
        feet = np.flatnonzero(np.isin(feet_geoms, contacts.geom[c]))
        if not feet.size:
            continue
        i, geom = feet[0], feet_geoms[feet[0]]
        # The foot's twist (world frame, [angular, linear] at its centre) moved to the contact point.
        mujoco.mj_objectVelocity(model, data, mujoco.mjtObj.mjOBJ_GEOM, geom, twist, 0)
        point = twist[3:] + np.cross(twist[:3], contacts.pos[c] - data.geom_xpos[geom])
        normal = contacts.frame[c, :3]
        slip[i] = np.linalg.norm(point - np.dot(point, normal) * normal)
        depth[i] = max(depth[i], -contacts.dist[c])
        touching[i] = True
    return slip, float(depth[touching].mean()) if touching.any() else 0.0
