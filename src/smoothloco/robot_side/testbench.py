"""The MuJoCo test bench of an export: the robot-side controller (``loop.Controller``) driving
``robot.xml`` in MuJoCo (C), with what a real robot adds (``Imperfections``), recorded at the
control rate (``recording``). Imports only numpy, mujoco, onnxruntime and its own folder.

At every control period (``timing.control_dt``) the bench reads the sensors from the MuJoCo state
and calls the controller graph; at every bench step it applies PD torques ``kp (target - q) - kd q̇``
clipped at the torque limit. The bench steps at the training step (``timing.sim_dt``) or, where
that is coarser than ``MAX_BENCH_DT``, at the largest whole fraction of the control period within
it: a real drive runs its PD far faster than any training step, so a policy trained at a coarse
step is judged on the same fine physics as one trained at a fine step. Torques enter as generalized joint
forces (``qfrc_applied``), so no actuator setting of ``robot.xml`` (gear, control range) stands
between the contract's torque limit and the joint.

Contact is MuJoCo's own, with the full collision geometry of ``robot.xml``, made stiff:

- ``opt.cone = mjCONE_ELLIPTIC``: the Coulomb cone itself, not its pyramid approximation.
- ``opt.impratio = 100``: ratio of friction to normal constraint impedance, so a sticking foot
  does not creep (MuJoCo's advice with elliptic cones).
- ``solref = (2 * bench_dt, 1)``: critically damped with the shortest time constant MuJoCo keeps
  stable at the bench step (its documentation asks for at least two steps); 10 ms at 5 ms.
- ``solimp = (0.99, 0.999, 0.001, 0.5, 2)``: impedance close to 1 (little constraint softness)
  reached within 1 mm of penetration.

With the bundled robot standing, feet rest 0.05 mm in the ground and sink at most 1.1 mm when
it lands from its initial 1 cm drop.

Typical use (the API the evaluation relies on)::

    player = Player(export_dir)            # validates everything; raises PolicyContractError
    traj = player.run(commands=[(0.0, 0.5, 0.0, 0.0)], seconds=10.0, pushes=[(5.0, 0.0, 0.8)])
"""

from __future__ import annotations

import collections
import copy
import math
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import NamedTuple

import mujoco
import numpy as np

from .contract import Contract, PolicyContractError
from .loop import Controller
from .recording import GRAVITY, empty_trajectory, record, to_body

FRAME_RATE = 30.0  # Hz, calls of ``frame_callback`` (video)
# Imperfections.bumps: an egg-crate ground h = bumps/2 sin(2πx/λ) sin(2πy/λ), sampled every
# BUMP_CELL m over ±BUMP_HALF_SIZE m (a walk of 10 s at 1 m/s stays on it)
BUMP_PERIOD, BUMP_CELL, BUMP_HALF_SIZE = 1.0, 0.02, 12.0
SOLREF_STEPS = 2.0  # contact time constant in simulation steps
MAX_BENCH_DT = 0.005  # s, the coarsest step the bench takes (the default training step)
SOLIMP = (0.99, 0.999, 0.001, 0.5, 2.0)
IMPRATIO = 100.0
# The height scan's rays start this far above the base (m), and a point with no ground under it
# reads as this deep (m)
SCAN_RAY_START, NO_GROUND = 1.0, 10.0
DOWN = np.array([0.0, 0.0, -1.0])


def stiff_contact(model: mujoco.MjModel, sim_dt: float) -> None:
    """Give ``model`` the player's step and stiff contact (the module docstring says why)."""
    model.opt.timestep = sim_dt
    model.opt.cone = mujoco.mjtCone.mjCONE_ELLIPTIC
    model.opt.impratio = IMPRATIO
    model.geom_solref[:] = (SOLREF_STEPS * sim_dt, 1.0)
    model.geom_solimp[:] = SOLIMP


Command = tuple[float, float, float, float]  # (start time s, vx m/s, vy m/s, yaw rate rad/s)
Push = tuple[float, float, float]  # (time s, vx m/s, vy m/s) added to the base velocity
FrameCallback = Callable[[mujoco.MjModel, mujoco.MjData, np.ndarray], None]
# A command per control period instead of a schedule: (period index, time s) -> (vx, vy, yaw rate)
CommandSource = Callable[[int, float], Sequence[float]]


class Imperfections(NamedTuple):
    """What a real robot adds to the nominal simulation, for robustness checks (all off by
    default): a control delay before joint targets reach the motors (s, applied at the
    simulation step), uniform sensor noise (± level per sensor input, in its units), motor
    strength (torque and its limit scaled), MuJoCo's default contact (pyramidal cone,
    impratio 1) instead of the stiff settings, the motors' torque-speed envelope for a policy
    trained without it, uneven ground: bumps of the given peak-to-trough height (m) in an
    egg-crate pattern of period ``BUMP_PERIOD`` (a heightfield instead of the flat floor), and
    joint friction (N·m, MuJoCo's frictionloss), viscous joint damping (N·m·s/rad) and rotor
    armature (kg·m², the motor's reflected inertia) added to every driven joint, as geared
    drives add."""

    action_delay: float = 0.0
    sensor_noise: Mapping[str, float] | None = None
    motor_strength: float = 1.0
    default_contact: bool = False
    motor_envelope: bool = False
    bumps: float = 0.0
    joint_friction: float = 0.0
    joint_damping: float = 0.0
    rotor_armature: float = 0.0
    seed: int = 0


class Ground(NamedTuple):
    """Other ground than the robot model's flat floor: ``model``, the robot's model on it (its
    own bodies and geoms first and in order, as ``smoothloco.measure.mujoco_terrain`` builds it;
    the bench gives it its stiff contact), and ``height``, the ground's height (n,) under (n, 2)
    points (x, y), from which the start and the fall test measure."""

    model: mujoco.MjModel
    height: Callable[[np.ndarray], np.ndarray]


def read_sensors(contract: Contract, data: mujoco.MjData) -> dict[str, np.ndarray]:
    """The controller's sensor inputs from the MuJoCo state (what a robot's encoders, IMU, state
    estimator and height map give)."""
    readings = {
        "joint_pos": data.qpos[contract.qpos_ids].copy(),
        "joint_vel": data.qvel[contract.dof_ids].copy(),
        "base_ang_vel": data.qvel[3:6].copy(),
        "gravity": to_body(data, GRAVITY),
        "base_lin_vel": to_body(data, data.qvel[0:3]),
    }
    if len(contract.scan_points):
        readings["height_scan"] = height_scan(contract.scan_points, data)
    return readings


def height_scan(points: np.ndarray, data: mujoco.MjData) -> np.ndarray:
    """The base's height above the ground at ``points`` ((n, 2) offsets in the base's heading
    frame), each by a ray cast down onto the scene's static geometry (welded to the world)
    through any moving geom (the robot's own), as a height map from a depth sensor gives it.
    Where no ground lies under a point, the reading is ``NO_GROUND`` m (deeper than the
    controller looks)."""
    model = data.model
    forward = np.zeros(3)
    mujoco.mju_rotVecQuat(forward, np.array([1.0, 0.0, 0.0]), data.qpos[3:7])
    cos, sin = forward[:2] / max(float(np.hypot(*forward[:2])), 1e-12)
    world = data.qpos[:2] + points @ np.array([[cos, -sin], [sin, cos]]).T
    base_z, hit_geom = data.qpos[2], np.zeros(1, np.int32)
    heights = np.full(len(points), NO_GROUND)
    for i, (x, y) in enumerate(world):
        origin = np.array([x, y, base_z + SCAN_RAY_START])
        for _ in range(2 * model.ngeom + 1):  # each pass goes through one of the robot's geoms (in, out)
            distance = mujoco.mj_ray(model, data, origin, DOWN, None, 1, -1, hit_geom)
            if hit_geom[0] < 0:
                break
            ground = origin[2] - distance
            if model.body_weldid[model.geom_bodyid[hit_geom[0]]] == 0:  # fixed to the world: the ground
                heights[i] = base_z - ground
                break
            origin[2] = ground - 1e-6
    return heights


class Player(Contract):
    """Runs an export in MuJoCo; construction validates the whole export folder."""

    def __init__(self, export_dir: str | Path):
        super().__init__(export_dir)
        self.bench_steps = max(self.substeps, math.ceil(self.control_dt / MAX_BENCH_DT - 1e-9))
        self.bench_dt = self.control_dt / self.bench_steps
        stiff_contact(self.mj_model, self.bench_dt)
        self._bumpy_models: dict[float, mujoco.MjModel] = {}
        self.controller = Controller(self)
        # the base and the feet, (x, y) relative to the base at the start: a start on other
        # ground stands clear of the highest ground under any of them
        data = mujoco.MjData(self.mj_model)
        data.qpos[:] = self.initial_qpos()
        mujoco.mj_kinematics(self.mj_model, data)
        self._footprint = np.vstack([[0.0, 0.0], data.geom_xpos[self.foot_geoms, :2] - data.qpos[:2]])

    def initial_qpos(self, ground: Ground | None = None) -> np.ndarray:
        """Standing at the default pose at the origin, a little above the ground (on ``ground``,
        above the highest ground under the base and the feet), as the task resets."""
        qpos = self.mj_model.qpos0.copy()
        qpos[0:7] = (0.0, 0.0, self.initial_base_height, 1.0, 0.0, 0.0, 0.0)
        qpos[self.qpos_ids] = self.default_pose
        if ground is not None:
            qpos[2] += float(np.max(ground.height(self._footprint)))
        return qpos

    def model(
        self,
        friction: float | None = None,
        added_base_mass: float = 0.0,
        bumps: float = 0.0,
        ground: Ground | None = None,
    ) -> mujoco.MjModel:
        """A copy of the simulation model with ground friction set, mass added to the base and,
        with ``bumps`` (m), the bumpy ground of ``Imperfections.bumps``, or ``ground``'s model."""
        if not (math.isfinite(bumps) and bumps >= 0):
            raise ValueError(f"bumps must be a height >= 0 m, got {bumps}")
        if ground is not None:
            if bumps:
                raise ValueError("bumps replace the flat floor, as another ground does: ask for one of them")
            model = copy.copy(ground.model)
            if model.nq != self.mj_model.nq or model.ngeom < self.mj_model.ngeom:
                raise ValueError("the ground's model must be the robot's own with the ground's geoms added")
            stiff_contact(model, self.bench_dt)
        else:
            model = copy.copy(self._bumpy_model(bumps) if bumps else self.mj_model)
        if friction is not None:
            if not (math.isfinite(friction) and friction > 0):
                raise ValueError(f"friction must be a positive number, got {friction}")
            model.geom_friction[:, 0] = friction  # every geom: a contact uses the larger (or the prioritized foot's)
        if not (math.isfinite(added_base_mass) and model.body_mass[self.base_body] + added_base_mass > 0):
            raise ValueError(f"added_base_mass {added_base_mass} kg would leave the base without positive mass")
        model.body_mass[self.base_body] += added_base_mass
        return model

    def _bumpy_model(self, height: float) -> mujoco.MjModel:
        """The robot's model with an egg-crate heightfield (mean height 0) for its floor."""
        if height not in self._bumpy_models:
            spec = mujoco.MjSpec.from_string(self.xml)
            cells = round(2 * BUMP_HALF_SIZE / BUMP_CELL) + 1
            x = np.linspace(-BUMP_HALF_SIZE, BUMP_HALF_SIZE, cells)
            wave = np.sin(2 * np.pi * x / BUMP_PERIOD)
            normalized = 0.5 + 0.5 * np.outer(wave, wave)  # rows along y; 0..1 of the bump height
            spec.add_hfield(name="bumps", size=[BUMP_HALF_SIZE, BUMP_HALF_SIZE, height, 0.05], nrow=cells, ncol=cells,
                            userdata=normalized.ravel().tolist())  # fmt: skip
            # The floor plane becomes the heightfield, so every geom keeps its index.
            planes = [g for g in spec.worldbody.geoms if g.type == mujoco.mjtGeom.mjGEOM_PLANE]
            for floor in planes:
                floor.type, floor.hfieldname, floor.pos = mujoco.mjtGeom.mjGEOM_HFIELD, "bumps", [0.0, 0.0, -height / 2]
            model = spec.compile()
            if not planes or model.ngeom != self.mj_model.ngeom:
                raise PolicyContractError("bumps: the robot model needs exactly its floor plane in the world body")
            stiff_contact(model, self.bench_dt)
            self._bumpy_models[height] = model
        return self._bumpy_models[height]

    def run(
        self,
        commands: Sequence[Command] | CommandSource = (),
        seconds: float = 10.0,
        pushes: Sequence[Push] = (),
        friction: float | None = None,
        added_base_mass: float = 0.0,
        frame_callback: FrameCallback | None = None,
        imperfections: Imperfections = Imperfections(),
        ground: Ground | None = None,
    ) -> dict[str, np.ndarray]:
        """Run the controller from standing for ``seconds`` and return the trajectory at the control rate.

        ``commands`` are ``(start time, vx, vy, yaw rate)``, in time order; each holds until the
        next (zero before the first); or a function of the period's index and time (a joystick).
        ``pushes`` add ``(vx, vy)`` m/s to the world-frame base velocity at their time.
        ``frame_callback(model, data, command)`` is called at ~30 Hz. ``imperfections`` perturb
        the robot (see ``Imperfections``); ``ground`` replaces the flat floor. Sample ``k`` is the
        state at ``k * control_dt``, the torque applied right then, and the controller's inputs,
        state and joint targets then.
        """
        kicks = sorted(_numbers(p, 3, "push (t, vx, vy)") for p in pushes)
        if not (math.isfinite(seconds) and seconds > 0):
            raise ValueError(f"seconds must be > 0, got {seconds}")
        model = self._perturbed_model(friction, added_base_mass, imperfections, ground)
        noise = dict(imperfections.sensor_noise or {})
        unknown = sorted(set(noise) - set(self.controller.sensors))
        if unknown:
            raise ValueError(f"sensor_noise names {unknown}; the controller reads {self.controller.sensors}")
        rng = np.random.default_rng(imperfections.seed)
        delay_steps = round(imperfections.action_delay / self.bench_dt)
        data = mujoco.MjData(model)
        data.qpos[:] = self.initial_qpos(ground)
        steps = max(1, round(seconds / self.control_dt))
        times = np.arange(steps) * self.control_dt
        if callable(commands):
            schedule = np.array(
                [_numbers(commands(k, t), 3, "command (vx, vy, yaw_rate)") for k, t in enumerate(times)]
            )
        else:
            schedule = command_schedule(commands, times)
        traj = {"time": times, "command": schedule, **empty_trajectory(steps, len(self.dof_ids), len(self.foot_geoms))}
        traj.update(
            controller_state=np.zeros((steps, self.state_size), np.float32),
            joint_target=np.zeros((steps, len(self.dof_ids)), np.float32),
        )
        if len(self.scan_points):  # the height map's readings, as the controller got them
            traj["height_scan"] = np.zeros((steps, len(self.scan_points)))
        self.controller.reset()
        fallen = False
        next_frame = 0.0
        strength = imperfections.motor_strength
        envelope = self.trained_with_envelope or imperfections.motor_envelope
        # Joint targets in flight to the motors, one per simulation step: a delay of d steps
        # applies the target computed d steps earlier (the standing pose before the first).
        in_flight = collections.deque([self.default_pose.copy()] * delay_steps)
        for k in range(steps):
            t, command = times[k], traj["command"][k]
            while kicks and kicks[0][0] <= t + 1e-9:
                data.qvel[0:2] += kicks.pop(0)[1:]
            mujoco.mj_step1(model, data)  # kinematics and contacts of the current state
            sensors = read_sensors(self, data)
            for name, level in noise.items():
                sensors[name] = sensors[name] + level * rng.uniform(-1.0, 1.0, sensors[name].shape)
            if "height_scan" in traj:
                traj["height_scan"][k] = sensors["height_scan"]
            traj["controller_state"][k] = self.controller.state
            target = traj["joint_target"][k] = self.controller(sensors, command)
            fallen = fallen or self._fallen(data, ground)
            applied = in_flight[0] if delay_steps else target
            record(traj, k, self, model, data, self._torque(data, applied, strength, envelope), fallen)
            for substep in range(self.bench_steps):
                if substep:
                    mujoco.mj_step1(model, data)
                if delay_steps:
                    in_flight.append(target)
                    applied = in_flight.popleft()
                torque = self._torque(data, applied, strength, envelope)
                data.qfrc_applied[self.dof_ids] = torque
                if frame_callback is not None and data.time >= next_frame - 1e-9:
                    frame_callback(model, data, command)
                    next_frame += 1.0 / FRAME_RATE
                mujoco.mj_step2(model, data)
                # The motors' mechanical power, averaged over the control period (the simulator's
                # StepInfo.power): Euler moves the joints by the new velocity, so this is their work / dt.
                traj["power"][k] += np.sum(np.abs(torque * data.qvel[self.dof_ids])) / self.bench_steps
        return traj

    def _perturbed_model(
        self, friction: float | None, added_base_mass: float, imperfections: Imperfections, ground: Ground | None = None
    ) -> mujoco.MjModel:
        """The model with the ground, the base's mass and the drives of ``imperfections``."""
        model = self.model(friction, added_base_mass, imperfections.bumps, ground)
        for name in ("joint_friction", "joint_damping", "rotor_armature"):
            if not (math.isfinite(getattr(imperfections, name)) and getattr(imperfections, name) >= 0):
                raise ValueError(f"{name} must be >= 0, got {getattr(imperfections, name)}")
        model.dof_frictionloss[self.dof_ids] += imperfections.joint_friction
        model.dof_damping[self.dof_ids] += imperfections.joint_damping
        model.dof_armature[self.dof_ids] += imperfections.rotor_armature
        if imperfections.default_contact:
            model.opt.cone, model.opt.impratio = mujoco.mjtCone.mjCONE_PYRAMIDAL, 1.0
        if not (math.isfinite(imperfections.action_delay) and imperfections.action_delay >= 0):
            raise ValueError(f"action_delay must be >= 0 s, got {imperfections.action_delay}")
        if not (math.isfinite(imperfections.motor_strength) and imperfections.motor_strength > 0):
            raise ValueError(f"motor_strength must be > 0, got {imperfections.motor_strength}")
        if imperfections.motor_envelope and self.velocity_limit is None:
            raise ValueError(
                "motor_envelope: policy.json states no torque-speed envelope (motors.velocity_limit is empty)"
            )
        return model

    def _torque(self, data: mujoco.MjData, target: np.ndarray, strength: float, envelope: bool) -> np.ndarray:
        """PD torque scaled by motor strength, within the torque limit or the motors' envelope."""
        velocity = data.qvel[self.dof_ids]
        raw = strength * (self.kp * (target - data.qpos[self.qpos_ids]) - self.kd * velocity)
        if not envelope:
            return np.clip(raw, -strength * self.torque_limit, strength * self.torque_limit)
        # The simulator's envelope (sim.step.motor_torque_bounds), stated here for a player that
        # runs without smoothloco installed.
        ratio = velocity / self.velocity_limit
        upper = np.clip(self.saturation_torque * (1.0 - ratio), 0.0, self.torque_limit)
        lower = np.clip(self.saturation_torque * (-1.0 - ratio), -self.torque_limit, 0.0)
        return np.clip(raw, strength * lower, strength * upper)

    def _fallen(self, data: mujoco.MjData, ground: Ground | None = None) -> bool:
        """The task's termination: base low, tilted, a knee at the ground, or a diverged
        simulation; heights above the ground under the base and each knee."""
        limits = self.termination
        diverged = data.warning[mujoco.mjtWarning.mjWARN_BADQACC].number > 0 or not np.all(np.isfinite(data.qvel))
        if diverged:
            return True
        tilted = to_body(data, GRAVITY)[2] > -math.cos(math.radians(limits["max_tilt_deg"]))
        points = np.vstack([data.qpos[None, 0:3], data.xpos[self.knee_bodies]])
        heights = points[:, 2] - (ground.height(points[:, :2]) if ground is not None else 0.0)
        low = heights[0] < limits["min_base_height"]
        knee_down = bool(np.any(heights[1:] < limits["min_knee_height"]))
        return bool(tilted or low or knee_down)


def _numbers(values: Sequence[float], size: int, what: str) -> tuple[float, ...]:
    out = tuple(float(v) for v in values)
    if len(out) != size or not all(math.isfinite(v) for v in out):
        raise ValueError(f"each {what} needs {size} finite numbers, got {tuple(values)}")
    return out


def command_schedule(commands: Sequence[Command], times: np.ndarray) -> np.ndarray:
    """(len(times), 3) command in force at each time: the last one started, zero before the first."""
    schedule = [_numbers(c, 4, "command (t, vx, vy, yaw_rate)") for c in commands]
    starts = np.array([c[0] for c in schedule])
    if np.any(np.diff(starts) < 0):
        raise ValueError(f"commands must be in time order, got start times {starts.tolist()}")
    table = np.vstack([np.zeros(3)] + [c[1:] for c in schedule])
    return table[np.searchsorted(starts, np.asarray(times) + 1e-9, side="right")]


class SimulatedRobot:
    """The bench's MuJoCo model as a ``loop.Robot``: sensors read from the state, the drives' PD
    stepped at the bench step (nominal: no imperfection)."""

    def __init__(self, player: Player):
        self.player, self.model = player, player.model()
        self.data = mujoco.MjData(self.model)
        self.data.qpos[:] = player.initial_qpos()
        mujoco.mj_forward(self.model, self.data)

    def sensors(self) -> dict[str, np.ndarray]:
        return read_sensors(self.player, self.data)

    def drive(self, targets: np.ndarray, seconds: float) -> None:
        for _ in range(round(seconds / self.player.bench_dt)):
            torque = self.player._torque(self.data, targets, 1.0, self.player.trained_with_envelope)
            self.data.qfrc_applied[self.player.dof_ids] = torque
            mujoco.mj_step(self.model, self.data)
