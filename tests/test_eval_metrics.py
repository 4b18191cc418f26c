"""Evaluation metrics on hand-made trajectories with known answers."""

import numpy as np
import pytest

from smoothloco.measure import metrics

DT = 0.02


def trajectory(seconds: float = 4.0, command=(0.5, 0.0, 0.0), lin_vel=(0.5, 0.0, 0.0), yaw_rate: float = 0.0) -> dict:
    """Standing still for 1 s, then ``command`` while the base moves at ``lin_vel``/``yaw_rate``."""
    t = np.arange(round(seconds / DT)) * DT
    walking = (t >= 1.0)[:, None]
    n = len(t)
    return {
        "time": t,
        "command": np.where(walking, command, 0.0),
        "base_pos": np.zeros((n, 3)),
        "base_lin_vel": np.where(walking, lin_vel, 0.0),
        "base_ang_vel": np.where(walking, (0.0, 0.0, yaw_rate), 0.0),
        "gravity": np.tile((0.0, 0.0, -1.0), (n, 1)),
        "joint_pos": np.zeros((n, 12)),
        "joint_vel": np.zeros((n, 12)),
        "torque": np.zeros((n, 12)),
        "foot_slip": np.zeros((n, 4)),
        "foot_height": np.zeros((n, 4)),
        "penetration": np.zeros(n),
        "fallen": np.zeros(n, bool),
        "power": np.zeros(n),
    }


def test_tracking_errors_skip_the_transient_after_a_command_change():
    traj = trajectory(command=(0.5, 0.0, 0.4), lin_vel=(0.2, 0.4, 0.0), yaw_rate=0.1)
    # Wild velocities in the first second after the change must not count.
    traj["base_lin_vel"][(traj["time"] >= 1.0) & (traj["time"] < 2.0)] = 9.0
    assert metrics.lin_vel_error(traj) == pytest.approx(0.5)  # |(0.3, -0.4)|
    assert metrics.yaw_rate_error(traj) == pytest.approx(0.3)
    assert metrics.settled(traj).sum() == round(1.0 / DT) + round(2.0 / DT) - round(1.0 / DT)  # 1 s standing + 2 s


def test_a_fall_is_seen_and_its_samples_leave_the_tracking_error():
    traj = trajectory(lin_vel=(0.5, 0.0, 0.0))
    assert not metrics.fell(traj)
    traj["fallen"][traj["time"] >= 3.0] = True
    traj["base_lin_vel"][traj["time"] >= 3.0] = (-3.0, 2.0, 0.0)  # tumbling
    assert metrics.fell(traj)
    assert metrics.lin_vel_error(traj) == pytest.approx(0.0)


def test_a_fall_before_the_command_settles_scores_standing_still_not_zero():
    traj = trajectory(command=(0.5, 0.0, 0.3), lin_vel=(0.5, 0.0, 0.0), yaw_rate=0.3)
    traj["fallen"][traj["time"] >= 1.5] = True  # the command changed at 1 s and settles at 2 s
    assert metrics.lin_vel_error(traj) == pytest.approx(0.5)
    assert metrics.yaw_rate_error(traj) == pytest.approx(0.3)
    assert np.isnan(metrics.lin_vel_error(trajectory(seconds=1.0)))  # no command ever settles


def test_push_survival_needs_upright_at_the_end():
    traj = trajectory()
    assert metrics.survived_after(traj, 2.0)
    traj["fallen"][traj["time"] >= 2.5] = True
    assert not metrics.survived_after(traj, 2.0)
    with pytest.raises(ValueError, match="before the push"):
        metrics.survived_after(traj, 10.0)


def test_cost_of_transport_is_power_over_weight_times_speed():
    traj = trajectory(command=(1.0, 0.0, 0.0), lin_vel=(0.6, 0.8, 0.0))  # planar speed 1 m/s
    traj["power"][:] = 2 * 9.81 * 50.0  # W, while walking and while standing
    assert metrics.cost_of_transport(traj, mass=50.0) == pytest.approx(2.0)
    standing = trajectory(command=(0.0, 0.0, 0.0), lin_vel=(0.0, 0.0, 0.0))
    assert np.isnan(metrics.cost_of_transport(standing, mass=50.0))
    with pytest.raises(ValueError, match="mass"):
        metrics.cost_of_transport(traj, mass=0.0)


def test_slip_and_penetration_average_over_upright_samples():
    traj = trajectory()
    traj["foot_slip"][:, 0] = 0.4  # one foot of four slides at 0.4 m/s
    traj["penetration"][:] = 0.002
    traj["fallen"][-10:] = True
    traj["foot_slip"][-10:] = 5.0
    assert metrics.foot_slip(traj) == pytest.approx(0.1)
    assert metrics.mean_penetration(traj) == pytest.approx(0.002)


def test_malformed_trajectories_are_refused():
    traj = trajectory()
    del traj["fallen"]
    with pytest.raises(ValueError, match="lacks"):
        metrics.lin_vel_error(traj)
    traj = trajectory()
    traj["command"] = traj["command"][:-1]
    with pytest.raises(ValueError, match="differ in length"):
        metrics.fell(traj)


def test_swings_measure_air_time_clearance_and_rate():
    traj = trajectory(seconds=4.0)
    t = traj["time"]
    # From 2 s on, feet 0 and 3 swing for 0.2 s every 0.5 s, peaking at 6 cm; feet 1, 2 stay down
    # (sunk 2 cm, as a resting foot in smooth contact).
    phase = np.mod(t - 2.0, 0.5)
    lift = (t >= 2.0) & (phase > 1e-9) & (phase < 0.2 - 1e-9)
    height = np.where(lift, 0.06 * np.sin(np.pi * phase / 0.2), 0.0)
    traj["foot_height"] = np.stack([height, np.full_like(t, -0.02), np.full_like(t, -0.02), height], axis=1)
    swings = metrics.swings(traj)
    assert len(swings) == 2 * 4  # 2 s of settled walking, 4 swings each, the one cut off at the end excluded
    assert metrics.foot_air_time(traj) == pytest.approx(0.18)  # the 9 samples of each swing above 1 cm
    assert metrics.foot_clearance(traj) == pytest.approx(0.06, abs=0.002)
    settled_seconds = metrics.settled(traj).sum() * DT
    assert metrics.steps_per_second(traj) == pytest.approx(8 / (4 * settled_seconds))


def test_a_robot_that_keeps_its_feet_down_takes_no_steps():
    traj = trajectory(command=(0.0, 0.0, 0.0), lin_vel=(0.01, 0.0, 0.0))
    traj["foot_height"][:] = 0.004  # rocking within the ground threshold is not stepping
    assert metrics.swings(traj) == []
    assert metrics.foot_air_time(traj) == 0.0
    assert metrics.foot_clearance(traj) == 0.0
    assert metrics.steps_per_second(traj) == 0.0
    assert metrics.base_speed(traj) == pytest.approx(0.01)
