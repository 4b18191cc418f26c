"""Standalone MuJoCo player for an exported policy: ``policy.json`` + ``policy.onnx`` + ``robot.xml``.

This file is the deployment contract's reference reader. It imports only numpy, mujoco,
onnxruntime and the standard library (no JAX, no other smoothloco module), so it can be copied
next to an export and run on a machine that has never seen this package.

What it does at every control period (``timing.control_dt``): build the observation from the
MuJoCo state exactly like ``smoothloco.tasks.velocity`` (same terms, order and scales), run the
ONNX policy, set joint targets ``default_pose + action.scale * action + gait offset``; at every simulation
step (``timing.sim_dt``) apply PD torques ``kp (target - q) - kd q̇`` clipped at the torque limit.
Torques enter as generalized joint forces (``qfrc_applied``), so no actuator setting of
``robot.xml`` (gear, control range) stands between the contract's torque limit and the joint.

Contact is MuJoCo's own, with the full collision geometry of ``robot.xml``, made stiff:

- ``opt.cone = mjCONE_ELLIPTIC``: the Coulomb cone itself, not its pyramid approximation.
- ``opt.impratio = 100``: ratio of friction to normal constraint impedance, so a sticking foot
  does not creep (MuJoCo's advice with elliptic cones).
- ``solref = (2 * sim_dt, 1)``: critically damped with the shortest time constant MuJoCo keeps
  stable at step ``sim_dt`` (its documentation asks for at least two steps); 10 ms at 5 ms.
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
import hashlib
import json
import math
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, NamedTuple
from xml.etree import ElementTree

import mujoco
import numpy as np
import onnxruntime

CONTRACT_FORMAT = "smoothloco-policy"
# 2: the gait clock observation and the "gait" section; 3: the clock hidden when standing;
# 4: the "motors" section (torque-speed envelope); 5: gait.recovery_speed; 6: observation.history;
# 7: observation.velocity_error_window; 8: observation.velocity_trim
CONTRACT_VERSION = 8
FRAME_RATE = 30.0  # Hz, calls of ``frame_callback`` (video)
# Imperfections.bumps: an egg-crate ground h = bumps/2 sin(2πx/λ) sin(2πy/λ), sampled every
# BUMP_CELL m over ±BUMP_HALF_SIZE m (a walk of 10 s at 1 m/s stays on it)
BUMP_PERIOD, BUMP_CELL, BUMP_HALF_SIZE = 1.0, 0.02, 12.0

MIN_VELOCITY_LIMIT = 0.01  # rad/s; a motor's no-load speed is tens of rad/s, and 1/limit must stay a number
MAX_OBSERVATION_SCALE = 1e6  # the task's are 0.05-2; far beyond, float32 observations overflow
SOLREF_STEPS = 2.0  # contact time constant in simulation steps
SOLIMP = (0.99, 0.999, 0.001, 0.5, 2.0)
IMPRATIO = 100.0


def stiff_contact(model: mujoco.MjModel, sim_dt: float) -> None:
    """Give ``model`` the player's step and stiff contact (the module docstring says why)."""
    model.opt.timestep = sim_dt
    model.opt.cone = mujoco.mjtCone.mjCONE_ELLIPTIC
    model.opt.impratio = IMPRATIO
    model.geom_solref[:] = (SOLREF_STEPS * sim_dt, 1.0)
    model.geom_solimp[:] = SOLIMP


# policy.json, field by field: a nested dict is a section, a type is a leaf. Anything else in
# the file is an error, so a typo or a newer contract is refused instead of ignored.
Schema = dict[str, Any]
CONTRACT_SCHEMA: Schema = {
    "format": str,
    "version": int,
    # The policy's input is the last ``history`` observations (each ``size`` entries, built from
    # ``terms``) concatenated, newest first; at the first control period the first one fills them.
    # velocity_error_window (s): the time constant of the velocity_error_average term's moving
    # average (0 where the policy does not observe it). velocity_trim: the outer velocity loop
    # (``Player.velocity_trim_update``) whose trim the command term adds (rate 0: none)
    "observation": {
        "size": int,
        "terms": list,
        "history": int,
        "velocity_error_window": float,
        "velocity_trim": {"rate": float, "hold": float, "freeze": float, "limit": float},
    },
    "action": {"size": int, "scale": float},
    # The gait clock and the trot generator on it: the phase advances frequency * control_dt
    # cycles per control period from 0 (frequency 0: a constant clock); the offsets add to the
    # joint targets (``gait_offset``). All-zero offsets: a clock-only policy that steps by itself.
    # With hide_clock_when_standing the gait_clock observation is (0, 0) while the command's norm
    # is at most standing_command (the phase keeps running) and, if recovery_speed > 0, the base's
    # horizontal speed in its own frame (m/s) is at most recovery_speed: a pushed robot steps.
    "gait": {
        "frequency": float,
        "swing_offsets": list,
        "hide_clock_when_standing": bool,
        "standing_command": float,
        "recovery_speed": float,
    },
    "joints": {"names": list[str], "default_pose": list, "kp": list, "kd": list, "torque_limit": list},
    # The motors' DC torque-speed envelope where the robot states one (empty lists where not):
    # driving torque falls linearly from saturation_torque at rest to 0 at velocity_limit (rad/s),
    # within torque_limit. A policy trained with it runs with it; others get it as an imperfection.
    "motors": {"saturation_torque": list, "velocity_limit": list, "trained_with_envelope": bool},
    "timing": {"control_dt": float, "sim_dt": float},
    "termination": {
        "min_base_height": float, "max_tilt_deg": float, "min_knee_height": float, "knee_bodies": list[str]
    },
    "robot": {"file": str, "model_hash": str, "base_body": str, "foot_geoms": list[str], "initial_base_height": float},
    "policy": {"file": str, "input": str, "output": str},
    # where the policy came from (run, checkpoint, ...): informational, except onnx_sha256, which
    # is required and policy.onnx must match
    "source": dict,
}
TERM_SCHEMA: Schema = {"name": str, "size": int, "scale": list, "description": str}

Command = tuple[float, float, float, float]  # (start time s, vx m/s, vy m/s, yaw rate rad/s)
Push = tuple[float, float, float]  # (time s, vx m/s, vy m/s) added to the base velocity
FrameCallback = Callable[[mujoco.MjModel, mujoco.MjData, np.ndarray], None]


class Imperfections(NamedTuple):
    """What a real robot adds to the nominal simulation, for robustness checks (all off by
    default): a control delay before joint targets reach the motors (s, applied at the
    simulation step), uniform observation noise (per observation entry, in observation units),
    motor strength (torque and its limit scaled), MuJoCo's default contact (pyramidal cone,
    impratio 1) instead of the stiff settings, the motors' torque-speed envelope for a policy
    trained without it, uneven ground: bumps of the given peak-to-trough height (m) in an
    egg-crate pattern of period ``BUMP_PERIOD`` (a heightfield instead of the flat floor), and
    joint friction (N·m, MuJoCo's frictionloss), viscous joint damping (N·m·s/rad) and rotor
    armature (kg·m², the motor's reflected inertia) added to every driven joint, as geared
    drives add. (A
    NamedTuple, not a dataclass: the player must load from its file alone, without being
    registered as a module.)"""

    action_delay: float = 0.0
    obs_noise: np.ndarray | None = None
    motor_strength: float = 1.0
    default_contact: bool = False
    motor_envelope: bool = False
    bumps: float = 0.0
    joint_friction: float = 0.0
    joint_damping: float = 0.0
    rotor_armature: float = 0.0
    seed: int = 0


class VelocityTrim(NamedTuple):
    """The outer velocity loop's memory: its trim (vx, vy, yaw rate), the command it belongs to
    and the control periods since that command began."""

    trim: np.ndarray
    command: np.ndarray
    steps: int


class PolicyContractError(ValueError):
    """The export folder does not describe a policy this player can run."""


class _State:
    """What an observation term may read: the MuJoCo state plus the controller's own memory."""

    def __init__(
        self,
        player: Player,
        data: mujoco.MjData,
        command: np.ndarray,
        last_action: np.ndarray,
        phase: float = 0.0,
        velocity_error_average: np.ndarray | None = None,
        velocity_trim: np.ndarray | None = None,
    ):
        self.player, self.data, self.command, self.last_action = player, data, command, last_action
        self.phase = phase
        self.velocity_error_average = np.zeros(3) if velocity_error_average is None else velocity_error_average
        self.velocity_trim = np.zeros(3) if velocity_trim is None else velocity_trim

    def velocity_error(self) -> np.ndarray:
        """Command minus measured (vx, vy in the base frame, m/s; yaw rate, rad/s)."""
        return self.command - np.array([*self.base_lin_vel()[:2], self.data.qvel[5]])

    def base_lin_vel(self) -> np.ndarray:
        """The base's linear velocity in its own frame (m/s)."""
        return self.to_body(self.data.qvel[0:3])

    def to_body(self, world: np.ndarray) -> np.ndarray:
        """A world-frame vector in the base frame."""
        inverse = np.empty(4)
        mujoco.mju_negQuat(inverse, self.data.qpos[3:7])
        out = np.empty(3)
        mujoco.mju_rotVecQuat(out, np.asarray(world, np.float64), inverse)
        return out


class Term(NamedTuple):
    meaning: str
    size: int | None  # entries; None: one per joint
    build: Callable[[_State], np.ndarray]


# Observation terms the player knows how to build, by name. The names and meanings are those of
# ``smoothloco.tasks.velocity.OBS_LAYOUT``; the exporter refuses a task term missing here, and a
# test checks the values against the task's observation.
OBSERVATION_TERMS: dict[str, Term] = {
    "base_lin_vel": Term("base linear velocity, base frame (m/s)", 3, lambda s: s.base_lin_vel()),
    "base_ang_vel": Term("base angular velocity, base frame (rad/s)", 3, lambda s: s.data.qvel[3:6]),
    "projected_gravity": Term(
        "unit gravity direction, base frame", 3, lambda s: s.to_body(np.array([0.0, 0.0, -1.0]))
    ),
    "command": Term(
        "commanded vx, vy (m/s) and yaw rate (rad/s) plus observation.velocity_trim's trim",
        3,
        lambda s: s.command + s.velocity_trim,
    ),
    "joint_pos": Term(
        "joint angles minus joints.default_pose (rad)",
        None,
        lambda s: s.data.qpos[s.player.qpos_ids] - s.player.default_pose,
    ),
    "joint_vel": Term("joint velocities (rad/s)", None, lambda s: s.data.qvel[s.player.dof_ids]),
    "last_action": Term("the policy's previous output", None, lambda s: s.last_action),
    "gait_clock": Term(
        "sin and cos of 2 pi times the gait phase (cycles; see the gait section)",
        2,
        lambda s: s.player.clock_observation(s.phase, s.command, s.base_lin_vel()),
    ),
    "velocity_error_average": Term(
        "command minus measured vx, vy (base frame, m/s) and yaw rate (rad/s), exponential moving "
        "average with time constant observation.velocity_error_window, updated each control step",
        3,
        lambda s: s.velocity_error_average,
    ),
}


def _check_fields(value: Any, schema: Schema, where: str) -> None:
    """Raise on a missing, unknown or mistyped field of ``value`` against ``schema``."""
    if not isinstance(value, dict):
        raise PolicyContractError(f"policy.json: {where or 'the file'} must be an object, got {type(value).__name__}")
    prefix = f"{where}." if where else ""
    missing = [k for k in schema if k not in value]
    if missing:
        raise PolicyContractError(
            f"policy.json: missing field {prefix}{missing[0]}; expected fields: {', '.join(schema)}"
        )
    unknown = [k for k in value if k not in schema]
    if unknown:
        raise PolicyContractError(
            f"policy.json: unknown field {prefix}{_plain(unknown[0])}; expected fields: {', '.join(schema)}"
        )
    for key, kind in schema.items():
        if isinstance(kind, dict):
            _check_fields(value[key], kind, prefix + key)
            continue
        if kind == list[str]:  # names: of joints, bodies, geoms
            if not (isinstance(value[key], list) and all(isinstance(v, str) for v in value[key])):
                shown = _shown(value[key])
                raise PolicyContractError(f"policy.json: {prefix}{key} must be a list of names, got {shown}")
            continue
        ok = isinstance(value[key], kind) and (kind is bool or not isinstance(value[key], bool))
        if kind is float:  # JSON writes 1.0 as 1
            ok = _finite_number(value[key])
        if not ok:
            raise PolicyContractError(f"policy.json: {prefix}{key} must be {kind.__name__}, got {_shown(value[key])}")


def _finite_number(value: object) -> bool:
    """A finite int or float, not a bool (an int beyond any float is not finite either)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return False
    try:
        return math.isfinite(value)
    except OverflowError:
        return False


def _shown(value: object, limit: int = 60) -> str:
    """``repr(value)`` cut to ``limit`` characters: an error message never carries the whole file."""
    text = repr(value)
    return text if len(text) <= limit else f"{text[: limit - 3]}..."


def _plain(text: str) -> str:
    """``text`` as written when short and printable, else quoted and cut (a message is one line)."""
    return text if text.isprintable() and len(text) <= 60 else _shown(text)


def _number_list(values: list, size: int, name: str, above: float | None = None) -> np.ndarray:
    """``values`` as ``size`` finite numbers (a bool is not one), each > ``above`` if given."""
    try:
        if any(isinstance(v, bool) for v in values):
            raise TypeError(name)
        out = np.asarray(values, np.float64)
    except (TypeError, ValueError, OverflowError):
        raise PolicyContractError(f"policy.json: {name} must be a list of numbers, got {_shown(values)}") from None
    if out.shape != (size,) or not np.all(np.isfinite(out)):
        raise PolicyContractError(f"policy.json: {name} must hold {size} finite numbers, got {_shown(values)}")
    if above is not None and not np.all(out > above):
        raise PolicyContractError(f"policy.json: {name} must hold numbers > {above:g}, got {_shown(values)}")
    return out


class Player:
    """Runs an exported policy in MuJoCo; construction validates the whole export folder."""

    def __init__(self, export_dir: str | Path):
        self.export_dir = Path(export_dir)
        contract_file = self.export_dir / "policy.json"
        if not contract_file.is_file():
            raise PolicyContractError(f"{self.export_dir} holds no policy.json (not a smoothloco export)")
        try:
            self.contract = json.loads(contract_file.read_bytes().decode("utf-8"))
        except UnicodeDecodeError as exc:  # its own message quotes the whole file
            raise PolicyContractError(f"{contract_file} is not UTF-8 text (byte {exc.start})") from None
        except json.JSONDecodeError as exc:
            raise PolicyContractError(f"{contract_file} is not valid JSON: {exc}") from None
        _check_fields(self.contract, CONTRACT_SCHEMA, "")
        c = self.contract
        if c["format"] != CONTRACT_FORMAT or c["version"] != CONTRACT_VERSION:
            raise PolicyContractError(
                f"policy.json is {_shown(c['format'])} version {c['version']}; "
                f"this player reads {CONTRACT_FORMAT!r} version {CONTRACT_VERSION}"
            )
        self._load_robot(c["robot"], c["joints"], c["termination"])
        self._load_motors(c["motors"])
        self._load_timing(c["timing"])
        self._load_observation(c["observation"], c["action"])
        self._load_gait(c["gait"])
        sha256 = c["source"].get("onnx_sha256")
        if not (isinstance(sha256, str) and len(sha256) == 64 and all(ch in "0123456789abcdef" for ch in sha256)):
            raise PolicyContractError(
                f"policy.json: source.onnx_sha256 must be the sha256 of the policy file (64 hex digits), got "
                f"{_shown(sha256)}; export the run again"
            )
        self._load_policy(c["policy"], sha256)

    # -- validation ---------------------------------------------------------------------------
    def _load_robot(self, robot: dict, joints: dict, termination: dict) -> None:
        xml_file = self.export_dir / robot["file"]
        if not xml_file.is_file():
            raise PolicyContractError(f"robot model {xml_file} is missing")
        raw = xml_file.read_bytes()
        found = hashlib.sha256(raw).hexdigest()[:16]
        if found != robot["model_hash"]:
            raise PolicyContractError(
                f"model hash mismatch: {xml_file.name} hashes to {found}, policy.json expects robot.model_hash "
                f"{_plain(robot['model_hash'])} (the policy was trained for another robot model)"
            )
        # The hash covers these bytes only: the model is loaded from them, and a file they
        # refer to (an include, a mesh) would be outside it.
        try:
            xml = raw.decode("utf-8")
            referenced = [e.get("file") for e in ElementTree.fromstring(xml).iter() if e.get("file") is not None]
        except (UnicodeDecodeError, ElementTree.ParseError) as exc:
            raise PolicyContractError(f"{xml_file} is not an MJCF model: {exc}") from None
        if referenced:
            raise PolicyContractError(
                f"{xml_file.name} refers to the file {_shown(referenced[0])}, which robot.model_hash does not cover; "
                "an exported model is self-contained"
            )
        try:
            model = mujoco.MjModel.from_xml_string(xml)
        except ValueError as exc:
            raise PolicyContractError(f"MuJoCo cannot load {xml_file}: {' '.join(str(exc).split())}") from None

        names = joints["names"]
        n = len(names)
        self.default_pose = _number_list(joints["default_pose"], n, "joints.default_pose")
        # A PD loop with kp <= 0 or a torque limit <= 0 drives the joints away from their targets
        # (MuJoCo then diverges); kd may be 0.
        self.kp = _number_list(joints["kp"], n, "joints.kp", above=0.0)
        self.kd = _number_list(joints["kd"], n, "joints.kd")
        if not np.all(self.kd >= 0):
            raise PolicyContractError(f"policy.json: joints.kd must hold numbers >= 0, got {_shown(joints['kd'])}")
        self.torque_limit = _number_list(joints["torque_limit"], n, "joints.torque_limit", above=0.0)
        hinges = {model.joint(i).name for i in range(model.njnt) if model.jnt_type[i] == mujoco.mjtJoint.mjJNT_HINGE}
        unknown = [j for j in names if j not in hinges]
        if unknown or n == 0:
            raise PolicyContractError(
                f"joints.names {unknown or names} are not hinge joints of {xml_file.name}; it has {sorted(hinges)}"
            )
        self.qpos_ids = np.array([model.jnt_qposadr[model.joint(j).id] for j in names])
        self.dof_ids = np.array([model.jnt_dofadr[model.joint(j).id] for j in names])
        # The standing pose within each joint's range (a full turn either way where it has none),
        # as the robot spec requires
        ids = [model.joint(j).id for j in names]
        limited = model.jnt_limited[ids].astype(bool)
        lower = np.where(limited, model.jnt_range[ids, 0], -2 * np.pi)
        upper = np.where(limited, model.jnt_range[ids, 1], 2 * np.pi)
        outside = [j for j, q, lo, hi in zip(names, self.default_pose, lower, upper) if not lo - 1e-9 <= q <= hi + 1e-9]
        if outside:
            raise PolicyContractError(
                f"policy.json: joints.default_pose puts {_shown(outside)} outside their range in {xml_file.name}"
            )

        self.base_body = self._named_id(model, "body", robot["base_body"], "robot.base_body")
        if (
            model.body_jntnum[self.base_body] != 1
            or model.jnt_type[model.body_jntadr[self.base_body]] != mujoco.mjtJoint.mjJNT_FREE
        ):
            raise PolicyContractError(f"robot.base_body {robot['base_body']!r} must carry the model's free joint")
        if model.jnt_qposadr[model.body_jntadr[self.base_body]] != 0:
            raise PolicyContractError("the base's free joint must come first in qpos")
        if not robot["foot_geoms"]:  # the feet's heights are recorded and the bumps measured under them
            raise PolicyContractError("policy.json: robot.foot_geoms must name at least one geom")
        self.foot_geoms = np.array(
            [self._named_id(model, "geom", g, "robot.foot_geoms") for g in robot["foot_geoms"]], dtype=int
        )
        self.knee_bodies = np.array(
            [self._named_id(model, "body", b, "termination.knee_bodies") for b in termination["knee_bodies"]], dtype=int
        )
        self.termination = {k: float(termination[k]) for k in ("min_base_height", "max_tilt_deg", "min_knee_height")}
        self.initial_base_height = float(robot["initial_base_height"])
        self.floor_geoms = np.flatnonzero(model.geom_bodyid == 0)
        self._model = model
        self._xml = xml
        self._bumpy_models: dict[float, mujoco.MjModel] = {}

    @staticmethod
    def _named_id(model: mujoco.MjModel, kind: str, name: str, field: str) -> int:
        """Index of the body or geom ``name`` in ``model``; ``field`` names the contract entry."""
        obj = mujoco.mjtObj.mjOBJ_BODY if kind == "body" else mujoco.mjtObj.mjOBJ_GEOM
        index = mujoco.mj_name2id(model, obj, name)
        if index < 0:
            raise PolicyContractError(f"{field}: no {kind} named {_shown(name)} in the robot model")
        return index

    def _load_motors(self, motors: dict) -> None:
        self.trained_with_envelope = motors["trained_with_envelope"]
        self.saturation_torque = self.velocity_limit = None
        if motors["velocity_limit"] or motors["saturation_torque"]:
            n = len(self.kp)
            self.saturation_torque = _number_list(motors["saturation_torque"], n, "motors.saturation_torque", above=0.0)
            self.velocity_limit = _number_list(motors["velocity_limit"], n, "motors.velocity_limit")
            if not np.all(self.velocity_limit >= MIN_VELOCITY_LIMIT):
                raise PolicyContractError(
                    f"policy.json: motors.velocity_limit must be >= {MIN_VELOCITY_LIMIT:g} rad/s, "
                    f"got {_shown(motors['velocity_limit'])}"
                )
        elif self.trained_with_envelope:
            raise PolicyContractError("policy.json: motors.trained_with_envelope is true but the envelope is empty")

    def _load_timing(self, timing: dict) -> None:
        self.control_dt, self.sim_dt = float(timing["control_dt"]), float(timing["sim_dt"])
        # a controller at 1 Hz or faster, a step of at least 10 µs (as the task's): smaller ones
        # make step counts that overflow or never end
        if not (1e-5 <= self.sim_dt and 0 < self.control_dt <= 1.0):
            raise PolicyContractError(
                f"policy.json: timing.sim_dt must be >= 1e-05 s and timing.control_dt in (0, 1] s, got {timing}"
            )
        self.substeps = round(self.control_dt / self.sim_dt)
        if self.substeps < 1 or abs(self.substeps * self.sim_dt - self.control_dt) > 1e-9:
            raise PolicyContractError(
                f"timing: control_dt {self.control_dt} is not a whole number of sim_dt {self.sim_dt}"
            )
        stiff_contact(self._model, self.sim_dt)

    def _load_observation(self, observation: dict, action: dict) -> None:
        n_joints = len(self.qpos_ids)
        self.terms: list[tuple[Callable[[_State], np.ndarray], np.ndarray]] = []
        for i, term in enumerate(observation["terms"]):
            _check_fields(term, TERM_SCHEMA, f"observation.terms[{i}]")
            name = term["name"]
            if name not in OBSERVATION_TERMS:
                raise PolicyContractError(
                    f"policy.json: unknown observation term {_shown(name)}; "
                    f"this player builds: {', '.join(OBSERVATION_TERMS)}"
                )
            spec = OBSERVATION_TERMS[name]
            size = n_joints if spec.size is None else spec.size
            if term["size"] != size:
                raise PolicyContractError(
                    f"policy.json: observation term {name!r} has size {term['size']}; expected {size} for this robot"
                )
            scale = _number_list(term["scale"], size, f"observation term {name!r} scale")
            if not np.all(np.abs(scale) <= MAX_OBSERVATION_SCALE):  # the float32 observation would overflow
                raise PolicyContractError(
                    f"policy.json: observation term {name!r} scale must be within ±{MAX_OBSERVATION_SCALE:g}, "
                    f"got {_shown(term['scale'])}"
                )
            self.terms.append((spec.build, scale))
        total = sum(len(scale) for _, scale in self.terms)
        if observation["size"] != total:
            raise PolicyContractError(
                f"policy.json: observation.size is {observation['size']}, but its terms add up to {total}"
            )
        self.obs_size = total
        if observation["history"] < 1:
            raise PolicyContractError(f"policy.json: observation.history must be >= 1 frames, got {observation['history']}")
        self.history = observation["history"]
        window = observation["velocity_error_window"]
        if not (math.isfinite(window) and window >= 0):
            raise PolicyContractError(f"policy.json: observation.velocity_error_window must be >= 0 s, got {window}")
        # the moving average's weight on its last value, per control step
        self.velocity_error_keep = math.exp(-self.control_dt / window) if window > 0 else 1.0
        trim = observation["velocity_trim"]
        if not all(math.isfinite(v) and v >= 0 for v in trim.values()):
            raise PolicyContractError(f"policy.json: observation.velocity_trim values must be >= 0, got {trim}")
        if trim["rate"] > 0 and window == 0:
            raise PolicyContractError(
                "policy.json: observation.velocity_trim has a rate but velocity_error_window is 0: "
                "there is no average velocity error to integrate"
            )
        self.trim_rate, self.trim_freeze, self.trim_limit = (float(trim[k]) for k in ("rate", "freeze", "limit"))
        if trim["hold"] > 3600.0:  # a step count must stay a number
            raise PolicyContractError(f"policy.json: observation.velocity_trim.hold must be <= 3600 s, got {trim['hold']}")
        self.trim_hold_steps = round(trim["hold"] / self.control_dt)
        if action["size"] != n_joints:
            raise PolicyContractError(
                f"policy.json: action.size is {action['size']}; expected {n_joints} (one per joint)"
            )
        if not action["scale"] > 0:  # a negative scale turns every action around
            raise PolicyContractError(f"policy.json: action.scale must be > 0 rad per action unit, got {action['scale']}")
        self.action_scale = float(action["scale"])

    def _load_gait(self, gait: dict) -> None:
        frequency = gait["frequency"]
        if not (math.isfinite(frequency) and frequency >= 0):
            raise PolicyContractError(f"policy.json: gait.frequency must be >= 0 Hz (0 = none), got {frequency}")
        self.gait_frequency = float(frequency)
        rows = gait["swing_offsets"]
        if len(rows) != 2:
            raise PolicyContractError(f"policy.json: gait.swing_offsets must be 2 rows (one per diagonal pair), got {len(rows)}")
        n = len(self.dof_ids)
        self.swing_offsets = np.stack([_number_list(row, n, f"gait.swing_offsets[{i}]") for i, row in enumerate(rows)])
        self.hide_clock_when_standing = gait["hide_clock_when_standing"]
        self.standing_command = float(gait["standing_command"])
        self.recovery_speed = float(gait["recovery_speed"])

    def _load_policy(self, policy: dict, sha256: str) -> None:
        onnx_file = self.export_dir / policy["file"]
        if not onnx_file.is_file():
            raise PolicyContractError(f"policy network {onnx_file} is missing")
        # Required: a garbled network could otherwise still load and run.
        if hashlib.sha256(onnx_file.read_bytes()).hexdigest() != sha256:
            raise PolicyContractError(
                f"{onnx_file} does not match policy.json source.onnx_sha256 (corrupted or replaced); export the run again"
            )
        options = onnxruntime.SessionOptions()
        options.intra_op_num_threads = 1  # a small MLP: threads cost more than they save
        try:
            self.session = onnxruntime.InferenceSession(str(onnx_file), options, providers=["CPUExecutionProvider"])
        except Exception as exc:  # onnxruntime raises its own untyped errors for a bad file
            raise PolicyContractError(f"onnxruntime cannot load {onnx_file}: {exc}") from exc
        inputs = {i.name: i.shape for i in self.session.get_inputs()}
        outputs = {o.name: o.shape for o in self.session.get_outputs()}
        if list(inputs) != [policy["input"]] or policy["output"] not in outputs:
            raise PolicyContractError(
                f"{onnx_file.name} has inputs {list(inputs)} and outputs {list(outputs)}; "
                f"policy.json expects input {policy['input']!r} and output {policy['output']!r}"
            )
        for what, shape, size in (
            ("input", inputs[policy["input"]], self.history * self.obs_size),
            ("output", outputs[policy["output"]], len(self.dof_ids)),
        ):
            if len(shape) != 2 or shape[1] != size:
                raise PolicyContractError(
                    f"{onnx_file.name} {what} has shape {shape}; expected [N, {size}] from policy.json"
                )
        self.input_name, self.output_name = policy["input"], policy["output"]

    # -- control ------------------------------------------------------------------------------
    def observe(
        self,
        data: mujoco.MjData,
        command: np.ndarray,
        last_action: np.ndarray,
        phase: float = 0.0,
        velocity_error_average: np.ndarray | None = None,
        velocity_trim: np.ndarray | None = None,
    ) -> np.ndarray:
        """The policy's observation for the state in ``data`` (reads only qpos and qvel) and the
        controller's memory."""
        command, last_action = np.asarray(command, np.float64), np.asarray(last_action, np.float64)
        return self._observation(_State(self, data, command, last_action, phase, velocity_error_average, velocity_trim))

    def _observation(self, state: _State) -> np.ndarray:
        return np.concatenate([scale * build(state) for build, scale in self.terms]).astype(np.float32)

    def velocity_error_update(self, average: np.ndarray, state: _State) -> np.ndarray:
        """The velocity_error_average term one control step on, at ``state``."""
        keep = self.velocity_error_keep
        return keep * average + (1.0 - keep) * state.velocity_error()

    def velocity_trim_update(self, previous: VelocityTrim, command: np.ndarray, average: np.ndarray) -> VelocityTrim:
        """The outer velocity loop one control period on, after the average velocity error's
        update (``average``): a new command restarts the trim from zero; while walking (the
        command's norm above gait.standing_command), ``hold`` s after the command began and with
        the planar average error within ``freeze`` m/s, the trim integrates the average error
        at ``rate`` per second, each axis clipped to ±``limit``."""
        new = bool(np.any(command != previous.command))
        steps = 0 if new else previous.steps + 1
        trim = np.zeros(3) if new else previous.trim
        if (
            self.trim_rate > 0
            and np.linalg.norm(command) > self.standing_command
            and steps >= self.trim_hold_steps
            and np.linalg.norm(average[:2]) <= self.trim_freeze
        ):
            trim = np.clip(trim + self.trim_rate * self.control_dt * average, -self.trim_limit, self.trim_limit)
        return VelocityTrim(trim, np.array(command), steps)

    def clock_observation(self, phase: float, command: np.ndarray, base_lin_vel: np.ndarray) -> np.ndarray:
        """The gait_clock observation: sin and cos of the phase, or (0, 0) while standing if the
        contract says so (``base_lin_vel``: the base's velocity in its own frame, m/s)."""
        if self.hide_clock_when_standing and self.at_rest(command, base_lin_vel):
            return np.zeros(2)
        return np.array([math.sin(2.0 * math.pi * phase), math.cos(2.0 * math.pi * phase)])

    def at_rest(self, command: np.ndarray, base_lin_vel: np.ndarray) -> bool:
        """Whether the policy was trained to stand here: a zero command and, with a recovery
        speed, a base moving no faster than it."""
        rest = np.linalg.norm(command) <= self.standing_command
        if self.recovery_speed > 0:
            rest = rest and np.linalg.norm(base_lin_vel[:2]) <= self.recovery_speed
        return bool(rest)

    def gait_offset(self, phase: float) -> np.ndarray:
        """Joint-target offsets of the trot generator: the first diagonal pair swings along a half
        sine while sin(2 pi phase) > 0, the second while it is < 0."""
        sine = math.sin(2.0 * math.pi * phase)
        return max(sine, 0.0) * self.swing_offsets[0] + max(-sine, 0.0) * self.swing_offsets[1]

    def act(self, obs: np.ndarray) -> np.ndarray:
        """The deterministic action for one policy input (``history`` observations, newest first)."""
        return self.session.run([self.output_name], {self.input_name: obs[None]})[0][0].astype(np.float64)

    def initial_qpos(self) -> np.ndarray:
        """Standing at the default pose, a little above the ground, as the task resets."""
        qpos = self._model.qpos0.copy()
        qpos[0:7] = (0.0, 0.0, self.initial_base_height, 1.0, 0.0, 0.0, 0.0)
        qpos[self.qpos_ids] = self.default_pose
        return qpos

    def model(self, friction: float | None = None, added_base_mass: float = 0.0, bumps: float = 0.0) -> mujoco.MjModel:
        """A copy of the simulation model with ground friction set, mass added to the base and,
        with ``bumps`` (m), the bumpy ground of ``Imperfections.bumps``."""
        if not (math.isfinite(bumps) and bumps >= 0):
            raise ValueError(f"bumps must be a height >= 0 m, got {bumps}")
        model = copy.copy(self._bumpy_model(bumps) if bumps else self._model)
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
            spec = mujoco.MjSpec.from_string(self._xml)
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
            if not planes or model.ngeom != self._model.ngeom:
                raise PolicyContractError("bumps: the robot model needs exactly its floor plane in the world body")
            stiff_contact(model, self.sim_dt)
            self._bumpy_models[height] = model
        return self._bumpy_models[height]

    def run(
        self,
        commands: Sequence[Command] = (),
        seconds: float = 10.0,
        pushes: Sequence[Push] = (),
        friction: float | None = None,
        added_base_mass: float = 0.0,
        frame_callback: FrameCallback | None = None,
        imperfections: Imperfections = Imperfections(),
    ) -> dict[str, np.ndarray]:
        """Run the policy from standing for ``seconds`` and return the trajectory at the control rate.

        ``commands`` are ``(start time, vx, vy, yaw rate)``, in time order; each holds until the
        next (zero before the first). ``pushes`` add ``(vx, vy)`` m/s to the world-frame base
        velocity at their time. ``frame_callback(model, data, command)`` is called at ~30 Hz.
        ``imperfections`` perturb the robot (see ``Imperfections``). Sample ``k`` is the state at
        ``k * control_dt`` and the torque applied right then.
        """
        kicks = sorted(_numbers(p, 3, "push (t, vx, vy)") for p in pushes)
        if not (math.isfinite(seconds) and seconds > 0):
            raise ValueError(f"seconds must be > 0, got {seconds}")
        model = self.model(friction, added_base_mass, imperfections.bumps)
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
            raise ValueError("motor_envelope: policy.json states no torque-speed envelope (motors.velocity_limit is empty)")
        rng = np.random.default_rng(imperfections.seed)
        delay_steps = round(imperfections.action_delay / self.sim_dt)
        data = mujoco.MjData(model)
        data.qpos[:] = self.initial_qpos()
        steps = max(1, round(seconds / self.control_dt))
        n = len(self.dof_ids)
        times = np.arange(steps) * self.control_dt
        traj = {
            "time": times,
            "command": command_schedule(commands, times),
            "base_pos": np.zeros((steps, 3)),
            "base_lin_vel": np.zeros((steps, 3)),
            "base_ang_vel": np.zeros((steps, 3)),
            "gravity": np.zeros((steps, 3)),
            "joint_pos": np.zeros((steps, n)),
            "joint_vel": np.zeros((steps, n)),
            "torque": np.zeros((steps, n)),
            "foot_slip": np.zeros((steps, len(self.foot_geoms))),
            "foot_height": np.zeros((steps, len(self.foot_geoms))),
            "penetration": np.zeros(steps),
            "fallen": np.zeros(steps, bool),
            "power": np.zeros(steps),
        }
        last_action = np.zeros(n)
        frames: collections.deque[np.ndarray] = collections.deque(maxlen=self.history)  # newest first
        phase = 0.0
        error_average = np.zeros(3)
        trim = VelocityTrim(np.zeros(3), traj["command"][0], 0)
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
            state = _State(self, data, command, last_action, phase, error_average, trim.trim)
            if k:  # the task's average and trim start at zero and move with every step after the reset
                error_average = state.velocity_error_average = self.velocity_error_update(error_average, state)
                trim = self.velocity_trim_update(trim, command, error_average)
                state.velocity_trim = trim.trim
            obs = self._observation(state)
            if imperfections.obs_noise is not None:
                obs = obs + (imperfections.obs_noise * rng.uniform(-1.0, 1.0, obs.shape)).astype(np.float32)
            frames.extendleft([obs] * (self.history if not frames else 1))
            action = self.act(np.concatenate(frames))
            target = self.default_pose + self.action_scale * action + self.gait_offset(phase)
            fallen = fallen or self._fallen(data, state)
            applied = in_flight[0] if delay_steps else target
            self._record(traj, k, model, data, state, self._torque(data, applied, strength, envelope), fallen)
            for substep in range(self.substeps):
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
                traj["power"][k] += np.sum(np.abs(torque * data.qvel[self.dof_ids])) / self.substeps
            last_action = action
            phase = (phase + self.gait_frequency * self.control_dt) % 1.0
        return traj

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

    def _fallen(self, data: mujoco.MjData, state: _State) -> bool:
        """The task's termination: base low, tilted, a knee at the ground, or a diverged simulation."""
        limits = self.termination
        diverged = data.warning[mujoco.mjtWarning.mjWARN_BADQACC].number > 0 or not np.all(np.isfinite(data.qvel))
        tilted = state.to_body(np.array([0.0, 0.0, -1.0]))[2] > -math.cos(math.radians(limits["max_tilt_deg"]))
        low = data.qpos[2] < limits["min_base_height"]
        knee_down = bool(np.any(data.xpos[self.knee_bodies, 2] < limits["min_knee_height"]))
        return bool(diverged or tilted or low or knee_down)

    def _record(
        self,
        traj: dict,
        k: int,
        model: mujoco.MjModel,
        data: mujoco.MjData,
        state: _State,
        torque: np.ndarray,
        fallen: bool,
    ) -> None:
        joint_vel = data.qvel[self.dof_ids]
        slip, depth = self._foot_contacts(model, data)
        traj["base_pos"][k] = data.qpos[0:3]
        traj["base_lin_vel"][k] = state.to_body(data.qvel[0:3])
        traj["base_ang_vel"][k] = data.qvel[3:6]
        traj["gravity"][k] = state.to_body(np.array([0.0, 0.0, -1.0]))
        traj["joint_pos"][k] = data.qpos[self.qpos_ids]
        traj["joint_vel"][k] = joint_vel
        traj["torque"][k] = torque
        traj["foot_slip"][k] = slip
        traj["foot_height"][k] = self._foot_heights(model, data)
        traj["penetration"][k] = depth
        traj["fallen"][k] = fallen

    def _foot_heights(self, model: mujoco.MjModel, data: mujoco.MjData) -> np.ndarray:
        """Height of each foot sphere's lowest point above the floor (flat ground, as trained on)."""
        floor = min(data.geom_xpos[g, 2] for g in self.floor_geoms)
        return data.geom_xpos[self.foot_geoms, 2] - model.geom_size[self.foot_geoms, 0] - floor

    def _foot_contacts(self, model: mujoco.MjModel, data: mujoco.MjData) -> tuple[np.ndarray, float]:
        """Tangential speed of each foot touching the ground (else 0) and their mean penetration."""
        slip = np.zeros(len(self.foot_geoms))
        depth = np.zeros(len(self.foot_geoms))
        touching = np.zeros(len(self.foot_geoms), bool)
        contacts = data.contact
        twist = np.zeros(6)
        for c in np.flatnonzero((contacts.dist <= 0) & np.isin(contacts.geom, self.floor_geoms).any(axis=1)):
            feet = np.flatnonzero(np.isin(self.foot_geoms, contacts.geom[c]))
            if not feet.size:
                continue
            i, geom = feet[0], self.foot_geoms[feet[0]]
            # The foot's twist (world frame, [angular, linear] at its centre) moved to the contact point.
            mujoco.mj_objectVelocity(model, data, mujoco.mjtObj.mjOBJ_GEOM, geom, twist, 0)
            point = twist[3:] + np.cross(twist[:3], contacts.pos[c] - data.geom_xpos[geom])
            normal = contacts.frame[c, :3]
            slip[i] = np.linalg.norm(point - np.dot(point, normal) * normal)
            depth[i] = max(depth[i], -contacts.dist[c])
            touching[i] = True
        return slip, float(depth[touching].mean()) if touching.any() else 0.0


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
