"""Evaluation metrics as pure numpy functions of one trajectory.

A trajectory is a dict of arrays sampled at the control rate, the same from our simulator and
from the MuJoCo player (``smoothloco.robot_side.testbench.Player.run``):

=================  ========  ==========================================================
``time``           (T,)      s
``command``        (T, 3)    commanded vx, vy (m/s), yaw rate (rad/s)
``base_pos``       (T, 3)    world frame, m
``base_lin_vel``   (T, 3)    body frame, m/s
``base_ang_vel``   (T, 3)    body frame, rad/s
``gravity``        (T, 3)    unit gravity direction, body frame
``joint_pos``      (T, 12)   rad
``joint_vel``      (T, 12)   rad/s
``torque``         (T, 12)   N m
``foot_slip``      (T, 4)    tangential foot speed while in contact, else 0 (m/s)
``foot_height``    (T, 4)    foot sphere height above the ground (m; negative: sunk in)
``penetration``    (T,)      mean depth of the touching feet (m), 0 when none touches
``fallen``         (T,)      bool, sticky: true from the first terminating sample on
``power``          (T,)      sum |torque * joint_vel| (W)
=================  ========  ==========================================================
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

Trajectory = Mapping[str, np.ndarray]
GRAVITY = 9.81  # m/s^2
MOVING_SPEED = 0.1  # m/s; commands slower than this count as standing (no cost of transport)
# m; a foot higher than this is in the air. Above the few millimetres a resting foot sinks or
# rocks in any of the contact models, so a foot that stays down never counts as a step.
AIRBORNE_HEIGHT = 0.01
REQUIRED = ("time", "command", "base_lin_vel", "base_ang_vel", "fallen")


def check_trajectory(traj: Trajectory) -> int:
    """Length T of a trajectory; raises ``ValueError`` on a missing field or mismatched lengths."""
    missing = [k for k in REQUIRED if k not in traj]
    if missing:
        raise ValueError(f"trajectory lacks {missing}; it has {sorted(traj)}")
    lengths = {k: len(np.asarray(v)) for k, v in traj.items()}
    if len(set(lengths.values())) != 1:
        raise ValueError(f"trajectory fields differ in length: {lengths}")
    return lengths["time"]


def settled(traj: Trajectory, settle_seconds: float = 1.0) -> np.ndarray:
    """(T,) bool: samples whose command has held for ``settle_seconds`` and that have not fallen,
    the ones tracking is judged on (the transient after each command change is not)."""
    check_trajectory(traj)
    time, command = np.asarray(traj["time"], float), np.asarray(traj["command"], float)
    changed = np.concatenate([[True], np.any(command[1:] != command[:-1], axis=1)])
    since = time - time[np.maximum.accumulate(np.where(changed, np.arange(len(time)), 0))]
    return (since >= settle_seconds - 1e-9) & ~np.asarray(traj["fallen"], bool)


def _mean(values: np.ndarray, mask: np.ndarray) -> float:
    return float(np.mean(values[mask])) if np.any(mask) else float("nan")


def _tracking_error(traj: Trajectory, error: np.ndarray, standing_error: np.ndarray, settle_seconds: float) -> float:
    """Mean ``error`` over the settled samples. A robot that fell before any command settled
    tracked nothing: it scores ``standing_error`` (the error of not moving) over the samples
    whose command had settled, so a fall never reads as perfect tracking. NaN only when no
    command settles within the trajectory."""
    upright = settled(traj, settle_seconds)
    if np.any(upright):
        return float(np.mean(error[upright]))
    return _mean(standing_error, settled({**traj, "fallen": np.zeros(len(error), bool)}, settle_seconds))


def lin_vel_error(traj: Trajectory, settle_seconds: float = 1.0) -> float:
    """Mean |commanded - measured| planar body velocity (m/s) over settled samples (see
    ``_tracking_error`` for a fall before any)."""
    command = np.asarray(traj["command"])[:, :2]
    error = np.linalg.norm(command - np.asarray(traj["base_lin_vel"])[:, :2], axis=1)
    return _tracking_error(traj, error, np.linalg.norm(command, axis=1), settle_seconds)


def yaw_rate_error(traj: Trajectory, settle_seconds: float = 1.0) -> float:
    """Mean |commanded - measured| yaw rate (rad/s) over settled samples (see ``_tracking_error``
    for a fall before any)."""
    command = np.asarray(traj["command"])[:, 2]
    error = np.abs(command - np.asarray(traj["base_ang_vel"])[:, 2])
    return _tracking_error(traj, error, np.abs(command), settle_seconds)


def fell(traj: Trajectory) -> bool:
    check_trajectory(traj)
    return bool(np.any(traj["fallen"]))


def survived_after(traj: Trajectory, t: float) -> bool:
    """Upright at the end, having been upright at ``t`` (a run that fell before its push is not
    a push survival); raises if the trajectory ends before ``t``."""
    time, fallen = np.asarray(traj["time"], float), np.asarray(traj["fallen"], bool)
    if check_trajectory(traj) == 0 or time[-1] < t:
        raise ValueError(f"trajectory ends at {time[-1] if len(time) else 0:.2f} s, before the push at {t} s")
    return not fallen[-1]


def foot_slip(traj: Trajectory) -> float:
    """Mean tangential foot speed (m/s) over feet and upright samples; airborne feet count as 0."""
    upright = ~np.asarray(traj["fallen"], bool)
    return _mean(np.mean(np.asarray(traj["foot_slip"], float), axis=1), upright)


def mean_penetration(traj: Trajectory) -> float:
    """Mean depth (m) of the touching feet over upright samples."""
    return _mean(np.asarray(traj["penetration"], float), ~np.asarray(traj["fallen"], bool))


def cost_of_transport(traj: Trajectory, mass: float, settle_seconds: float = 1.0) -> float:
    """Mean mechanical power / (m g mean planar speed), over settled samples with a walking
    command (planar speed >= ``MOVING_SPEED``); NaN if there are none or the robot did not move."""
    if not mass > 0:
        raise ValueError(f"mass must be > 0 kg, got {mass}")
    walking = settled(traj, settle_seconds) & (
        np.linalg.norm(np.asarray(traj["command"])[:, :2], axis=1) >= MOVING_SPEED
    )
    speed = _mean(np.linalg.norm(np.asarray(traj["base_lin_vel"])[:, :2], axis=1), walking)
    if not speed > 1e-6:
        return float("nan")
    return _mean(np.asarray(traj["power"], float), walking) / (mass * GRAVITY * speed)


def swings(traj: Trajectory, settle_seconds: float = 1.0) -> list[tuple[float, float]]:
    """``(air time s, peak height m)`` of every completed swing: a run of samples with a foot
    above ``AIRBORNE_HEIGHT`` that lies within the settled samples and lands before they end."""
    heights = np.asarray(traj["foot_height"], float)
    ok = settled(traj, settle_seconds)
    dt = float(np.median(np.diff(traj["time"]))) if len(traj["time"]) > 1 else 0.0
    out = []
    for foot in heights.T:
        airborne = foot > AIRBORNE_HEIGHT
        edges = np.flatnonzero(np.diff(airborne.astype(np.int8)))  # last sample before each change
        for lift, land in zip(edges[:-1], edges[1:]):
            if airborne[lift + 1] and ok[lift : land + 2].all():
                out.append(((land - lift) * dt, float(foot[lift + 1 : land + 1].max())))
    return out


def foot_air_time(traj: Trajectory, settle_seconds: float = 1.0) -> float:
    """Mean air time (s) of a completed swing; 0 when no foot left the ground (NaN when no sample
    settled), so standing still reads as 0, not as missing."""
    return _swing_mean(traj, settle_seconds, 0)


def foot_clearance(traj: Trajectory, settle_seconds: float = 1.0) -> float:
    """Mean peak foot height (m) of a completed swing; 0 when no foot left the ground."""
    return _swing_mean(traj, settle_seconds, 1)


def _swing_mean(traj: Trajectory, settle_seconds: float, column: int) -> float:
    if not settled(traj, settle_seconds).any():
        return float("nan")
    found = swings(traj, settle_seconds)
    return float(np.mean([s[column] for s in found])) if found else 0.0


def steps_per_second(traj: Trajectory, settle_seconds: float = 1.0) -> float:
    """Completed swings per foot and settled second (0 while standing still)."""
    ok = settled(traj, settle_seconds)
    if not ok.any():
        return float("nan")
    seconds = ok.sum() * float(np.median(np.diff(traj["time"])))
    return len(swings(traj, settle_seconds)) / (np.asarray(traj["foot_height"]).shape[1] * seconds)


def base_speed(traj: Trajectory, settle_seconds: float = 1.0) -> float:
    """Mean planar base speed (m/s) over settled samples: at a zero command, how still it stands."""
    return _mean(np.linalg.norm(np.asarray(traj["base_lin_vel"], float)[:, :2], axis=1), settled(traj, settle_seconds))


def nanmean(values) -> float:
    """Mean over the finite values (NaN when there are none), without numpy's empty-slice warning."""
    values = np.asarray(list(values), float)
    finite = values[np.isfinite(values)]
    return float(finite.mean()) if finite.size else float("nan")
