"""Robustness beyond the training ranges: the exported policy in MuJoCo (C) with what a real
robot adds (control delay, sensor noise, weaker motors, the motors' torque-speed envelope,
joint friction, damping and rotor inertia, slippery and bumpy ground, MuJoCo's default contact, harder pushes, all at once), each
condition on the same command grid and pushes.

Every condition is judged with the standard evaluation's metrics (``transfer.summarize``), so
``nominal`` reproduces the standard figures on this subset of scenarios.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np

from smoothloco import plotting
from smoothloco.evaluate.transfer import TrajectoryPlayer, rollout_player, summarize
from smoothloco.measure.scenarios import Scenario, standard_scenarios
from smoothloco.robot import load_robot
from smoothloco.robot_side.testbench import Imperfections, Player, SimulatedRobot
from smoothloco.sim.check import STANDING_SECONDS
from smoothloco.tasks import VelocityTaskConfig
from smoothloco.tasks.config import reference_standing_height, robot_size
from smoothloco.tasks.controller import OBS_LAYOUT, observation_layout

METRICS = ("lin_vel_error", "yaw_rate_error", "fall_rate", "push_survival")
ARMATURE_PER_TORQUE = 0.05 / 80.0  # kg·m² per N·m of torque limit


@dataclass(frozen=True)
class Condition:
    """One way the world differs from the nominal simulation."""

    imperfections: Imperfections = field(default_factory=Imperfections)
    friction: float | None = None  # ground friction for every scenario (None: nominal 0.8)
    push_speed: float = 1.0  # m/s


SENSOR_TERMS = {"base_lin_vel": "base_lin_vel", "base_ang_vel": "base_ang_vel", "gravity": "projected_gravity",
                "joint_pos": "joint_pos", "joint_vel": "joint_vel"}  # fmt: skip  # sensor input: its observation term


def sensor_noise(task: VelocityTaskConfig | None = None, sensors: tuple[str, ...] | None = None) -> dict[str, float]:
    """legged_gym's noise level (± uniform, in the sensor's own units) of each sensor the
    controller of ``task`` reads (the default task without one), or of ``sensors`` (an export's)."""
    levels = {name: noise for name, _, _, noise in OBS_LAYOUT}
    observed = {name for name, *_ in observation_layout(task)}
    keep = set(sensors) if sensors is not None else {s for s, term in SENSOR_TERMS.items() if term in observed}
    return {sensor: levels[term] for sensor, term in SENSOR_TERMS.items() if sensor in keep}


def conditions(task: VelocityTaskConfig | None = None) -> dict[str, Condition]:
    """The suite for a policy trained on ``task`` (the default observation without one); the
    motors' torque-speed envelope where its robot states one."""
    task = task or VelocityTaskConfig()
    robot = load_robot(task.robot)
    length = robot_size(task.robot).length
    return suite(sensor_noise(task), robot.torque_limit, robot.kd, robot.velocity_limit is not None, length)


def export_conditions(export: Player) -> dict[str, Condition]:
    """The suite for an export, from its contract alone (its sensors, drives and motors) and the
    height its robot stands at on the bench."""
    standing = SimulatedRobot(export)
    standing.drive(export.default_pose, STANDING_SECONDS)
    length = float(standing.data.qpos[2]) / reference_standing_height()
    return suite(
        sensor_noise(sensors=tuple(export.inputs[:-2])),
        export.torque_limit,
        export.kd,
        export.velocity_limit is not None,
        length,
    )


def suite(
    noise: dict[str, float], torque_limit: np.ndarray, kd: np.ndarray, envelope: bool, length: float = 1.0
) -> dict[str, Condition]:
    """Every condition, for sensors with ``noise``, drives of ``torque_limit`` (N·m) and ``kd``,
    and a robot ``length`` times the reference robot's standing height: the bumps scale with it,
    the pushes with its square root (as the training's pushes, ``VelocityTaskConfig.scaled``),
    from ANYmal's 5 cm and 1.5 m/s."""
    length = round(length, 2)  # the bench's standing height and the task's agree to about 1e-3
    bumps, push = round(0.05 * length, 3), round(1.5 * length**0.5, 2)
    # A plausible gearbox, not a measured one: Coulomb friction of 2.5 % of the torque limit and
    # viscous damping of half the PD's kd (ANYmal: 2 N·m, 1 N·m·s/rad).
    gearbox_friction, gearbox_damping = 0.025 * float(np.mean(torque_limit)), 0.5 * float(np.mean(kd))
    # A geared motor's reflected inertia (rotor inertia x gear ratio²), also not measured: 0.05
    # kg·m² for ANYmal's 80 N·m drives, scaled with the torque limit (both grow with the ratio).
    armature = ARMATURE_PER_TORQUE * float(np.mean(torque_limit))
    return {
        "nominal": Condition(),
        "control delay 10 ms": Condition(Imperfections(action_delay=0.010)),
        "control delay 20 ms": Condition(Imperfections(action_delay=0.020)),
        "sensor noise (legged_gym levels)": Condition(Imperfections(sensor_noise=noise)),
        "motors at 80 %": Condition(Imperfections(motor_strength=0.8)),
        **({"motor torque-speed envelope": Condition(Imperfections(motor_envelope=True))} if envelope else {}),
        "friction 0.3": Condition(friction=0.3),
        f"bumps {100 * bumps:g} cm": Condition(Imperfections(bumps=bumps)),
        "joint friction and damping": Condition(
            Imperfections(joint_friction=gearbox_friction, joint_damping=gearbox_damping)
        ),
        "rotor armature": Condition(Imperfections(rotor_armature=armature)),
        "MuJoCo default contact": Condition(Imperfections(default_contact=True)),
        f"pushes {push:g} m/s": Condition(push_speed=push),
        "all combined": Condition(
            Imperfections(
                action_delay=0.020,
                sensor_noise=noise,
                motor_strength=0.8,
                default_contact=True,
                motor_envelope=envelope,
                bumps=bumps,
                joint_friction=gearbox_friction,
                joint_damping=gearbox_damping,
                rotor_armature=armature,
            ),
            friction=0.4,
            push_speed=push,
        ),
    }


CONDITIONS = conditions()


def condition_scenarios(condition: Condition, push_directions: int = 4) -> tuple[Scenario, ...]:
    """The command grid and pushes (standing and walking) from ``push_directions`` directions at
    the condition's speed, on the condition's ground."""
    scenarios = standard_scenarios(push_speeds=(condition.push_speed,), push_directions=push_directions, mismatches=())
    return tuple(replace(s, friction=condition.friction) for s in scenarios)


def evaluate_robustness(
    player: TrajectoryPlayer,
    mass: float,
    conditions: dict[str, Condition] = CONDITIONS,
    push_directions: int = 4,
) -> dict[str, dict[str, float]]:
    """Per condition, the standard metrics of ``player`` (the exported policy in MuJoCo) for a
    robot of ``mass`` kg."""
    out = {}
    for name, condition in conditions.items():
        scenarios = condition_scenarios(condition, push_directions)
        trajectories = rollout_player(player, scenarios, condition.imperfections)
        summary = summarize(scenarios, trajectories, mass)
        out[name] = {m: summary[m] for m in METRICS}
    return out


def markdown(robustness: dict[str, dict[str, float]]) -> str:
    lines = [
        "## Robustness (MuJoCo, beyond the training ranges)",
        "",
        "| condition | lin. vel. error (m/s) | yaw rate error (rad/s) | fall rate | push survival |",
        "|---|---:|---:|---:|---:|",
    ]
    lines += [
        f"| {name} | {r['lin_vel_error']:.3f} | {r['yaw_rate_error']:.3f} | {r['fall_rate']:.2f} | {r['push_survival']:.2f} |"
        for name, r in robustness.items()
    ]
    return "\n".join(lines) + "\n"


def plot(robustness: dict[str, dict[str, float]], path: Path, title: str) -> None:
    """Tracking error, fall rate and push survival per condition."""
    plt = plotting.pyplot()
    names = list(robustness)
    panels = (
        ("lin_vel_error", "lin. vel. error (m/s)"),
        ("fall_rate", "fall rate (unpushed)"),
        ("push_survival", "push survival"),
    )
    fig, axes = plt.subplots(1, len(panels), figsize=(13, 0.45 * len(names) + 1.5), sharey=True)
    y = np.arange(len(names))
    for ax, (key, label) in zip(axes, panels):
        ax.barh(y, [robustness[n][key] for n in names], color="C0")
        ax.set_xlabel(label)
        ax.grid(axis="x", alpha=0.3)
    axes[0].set_yticks(y, names)
    axes[0].invert_yaxis()
    for ax in axes[1:]:
        ax.set_xlim(0, 1.05)
    fig.suptitle(title)
    plotting.save(fig, path, dpi=90)
