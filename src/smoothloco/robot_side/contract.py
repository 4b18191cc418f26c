"""The deployment contract: reading and checking an export folder (``policy.json``,
``controller.onnx``, ``robot.xml``, ``reference.npz``).

The controller itself is the ONNX graph (``tasks.controller`` converted): sensor readings,
command and state in, joint position targets and the next state out. ``policy.json`` says only
what the graph cannot: its sensor inputs with units and frames, the state's size and reset
(all zeros), timing, the drives' PD gains and limits, and the robot model with its hash.

Like every module of ``robot_side`` it imports only numpy, mujoco, onnxruntime, the standard
library and its own folder, so the folder can be copied next to an export.
"""

from __future__ import annotations

import hashlib
import json
import math
from pathlib import Path
from typing import Any
from xml.etree import ElementTree

import mujoco
import numpy as np
import onnxruntime

CONTRACT_FORMAT = "smoothloco-policy"
# 9: the controller graph (sensors, command, state -> joint targets, state) replaces the network
# and the observation, action and gait sections that the robot side had to implement;
# 10: the height scan (its points, and the graph's input where the policy observes the terrain)
CONTRACT_VERSION = 10
MIN_VELOCITY_LIMIT = 0.01  # rad/s; a motor's no-load speed is tens of rad/s, and 1/limit must stay a number
# The graph's inputs and outputs, by name: what each holds (units, frame) and its size (None:
# one per joint, "scan": one per height_scan.points).
SCAN_SIZE = "scan"
SENSOR_INPUTS: dict[str, tuple[str, int | str | None]] = {
    "joint_pos": ("joint angles, joints.names order (rad)", None),
    "joint_vel": ("joint velocities (rad/s)", None),
    "base_ang_vel": ("base angular velocity, base frame (rad/s), the IMU's gyroscope", 3),
    "gravity": ("unit gravity direction, base frame (from the IMU's orientation)", 3),
    "base_lin_vel": (
        "base linear velocity, base frame (m/s), a state estimator's (an input only of a policy that observes it)",
        3,
    ),
    "height_scan": (
        "the base's height above the ground (m) at each of height_scan.points, (x, y) offsets from the base in m in "
        "its heading frame (turned with its yaw, level), from a height map (an input only of a policy that observes "
        "the terrain)",
        SCAN_SIZE,
    ),
}


def sensor_sizes(joints: int, scan_points: int) -> dict[str, int]:
    """Each of ``SENSOR_INPUTS``' size for a robot of ``joints`` joints and a scan of ``scan_points``."""
    per_kind = {None: joints, SCAN_SIZE: scan_points}
    return {name: per_kind.get(size, size) for name, (_, size) in SENSOR_INPUTS.items()}


COMMAND_INPUT = ("command", "commanded vx, vy (m/s, base frame) and yaw rate (rad/s)", 3)
STATE_INPUT, TARGETS_OUTPUT, NEXT_STATE_OUTPUT = "state", "joint_targets", "next_state"

# policy.json, field by field: a nested dict is a section, a type is a leaf. Anything else in
# the file is an error, so a typo or a newer contract is refused instead of ignored.
Schema = dict[str, Any]
CONTRACT_SCHEMA: Schema = {
    "format": str,
    "version": int,
    # The graph: inputs (name, size, meaning) in order, the sensors then the command then the
    # state; outputs joint_targets (rad, joints.names order) and next_state. state_size: the
    # state's entries; an episode starts from all zeros (reset: pass zeros again).
    "controller": {"file": str, "inputs": list, "outputs": list[str], "state_size": int},
    "joints": {"names": list[str], "default_pose": list, "kp": list, "kd": list, "torque_limit": list},
    # The motors' DC torque-speed envelope where the robot states one (empty lists where not):
    # driving torque falls linearly from saturation_torque at rest to 0 at velocity_limit (rad/s),
    # within torque_limit. A policy trained with it runs with it; others get it as an imperfection.
    "motors": {"saturation_torque": list, "velocity_limit": list, "trained_with_envelope": bool},
    # control_dt: the graph's period; sim_dt: the PD's (the simulation step it trained at)
    "timing": {"control_dt": float, "sim_dt": float},
    "termination": {
        "min_base_height": float,
        "max_tilt_deg": float,
        "min_knee_height": float,
        "knee_bodies": list[str],
    },
    # (x, y) offsets of the height scan's points, m, base heading frame; empty: a blind policy
    "height_scan": {"points": list},
    "robot": {"file": str, "model_hash": str, "base_body": str, "foot_geoms": list[str], "initial_base_height": float},
    # recorded inputs, states and outputs of the controller, to check a port against
    "reference": {"file": str},
    # where the policy came from (run, checkpoint, ...): informational, except onnx_sha256, which
    # is required and the controller file must match
    "source": dict,
}
INPUT_SCHEMA: Schema = {"name": str, "size": int, "description": str}


class PolicyContractError(ValueError):
    """The export folder does not describe a controller this reader can run."""


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


def _path(path: Path) -> str:
    """``path`` as written when printable, else quoted (a file name from policy.json may hold a
    line break, and a message is one line)."""
    text = str(path)
    return text if text.isprintable() else repr(text)


def _is_point(value: object) -> bool:
    """An [x, y] pair of finite numbers."""
    return isinstance(value, list) and len(value) == 2 and all(_finite_number(v) for v in value)


def _points(values: object) -> np.ndarray:
    """``height_scan.points`` as an (n, 2) array of finite offsets (m)."""
    if not (isinstance(values, list) and all(_is_point(p) for p in values)):
        raise PolicyContractError(
            f"policy.json: height_scan.points must be a list of [x, y] pairs of finite numbers (m), got {_shown(values)}"
        )
    return np.asarray(values, np.float64).reshape(-1, 2)


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


class Contract:
    """An export folder read and checked: ``Contract(export_dir)`` raises ``PolicyContractError``
    naming the first thing it cannot honour."""

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
        if not isinstance(self.contract, dict):
            raise PolicyContractError(f"policy.json: the file must be an object, got {type(self.contract).__name__}")
        version = self.contract.get("version")
        if self.contract.get("format") != CONTRACT_FORMAT or version != CONTRACT_VERSION:
            older = isinstance(version, int) and not isinstance(version, bool) and version < CONTRACT_VERSION
            raise PolicyContractError(
                f"policy.json is {_shown(self.contract.get('format'))} version {_shown(version)}; this reader reads "
                f"{CONTRACT_FORMAT!r} version {CONTRACT_VERSION} (one controller graph)"
                + ("; export the run again with `smoothloco export RUN`" if older else "")
            )
        _check_fields(self.contract, CONTRACT_SCHEMA, "")
        c = self.contract
        self._load_robot(c["robot"], c["joints"], c["termination"])
        self._load_motors(c["motors"])
        self._load_timing(c["timing"])
        self.scan_points = _points(c["height_scan"]["points"])
        sha256 = c["source"].get("onnx_sha256")
        if not (isinstance(sha256, str) and len(sha256) == 64 and all(ch in "0123456789abcdef" for ch in sha256)):
            raise PolicyContractError(
                f"policy.json: source.onnx_sha256 must be the sha256 of the controller file (64 hex digits), got "
                f"{_shown(sha256)}; export the run again"
            )
        self._load_controller(c["controller"], sha256)
        self.reference_file = self.export_dir / c["reference"]["file"]

    def _load_robot(self, robot: dict, joints: dict, termination: dict) -> None:
        xml_file = self.export_dir / robot["file"]
        if not xml_file.is_file():
            raise PolicyContractError(f"robot model {_path(xml_file)} is missing")
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
        self.mj_model = model  # as the file states it: the test bench sets its own step and contact
        self.xml = xml

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

    @property
    def mass(self) -> float:
        """Total mass of the robot model (kg)."""
        return float(self.mj_model.body_mass.sum())

    def _load_controller(self, controller: dict, sha256: str) -> None:
        onnx_file = self.export_dir / controller["file"]
        if not onnx_file.is_file():
            raise PolicyContractError(f"controller graph {_path(onnx_file)} is missing")
        # Required: a garbled graph could otherwise still load and run.
        if hashlib.sha256(onnx_file.read_bytes()).hexdigest() != sha256:
            raise PolicyContractError(
                f"{onnx_file} does not match policy.json source.onnx_sha256 (corrupted or replaced); export the run again"
            )
        self.state_size = controller["state_size"]
        if self.state_size < 1:
            raise PolicyContractError(f"policy.json: controller.state_size must be >= 1, got {self.state_size}")
        n = len(self.dof_ids)
        expected = sensor_sizes(n, len(self.scan_points))
        expected.update({COMMAND_INPUT[0]: COMMAND_INPUT[2], STATE_INPUT: self.state_size})
        self.inputs: list[str] = []
        for i, entry in enumerate(controller["inputs"]):
            _check_fields(entry, INPUT_SCHEMA, f"controller.inputs[{i}]")
            name = entry["name"]
            if name not in expected:
                raise PolicyContractError(
                    f"policy.json: unknown controller input {_shown(name)}; this reader feeds: {', '.join(expected)}"
                )
            if entry["size"] != expected[name]:
                raise PolicyContractError(
                    f"policy.json: controller input {name!r} has size {entry['size']}; expected {expected[name]}"
                )
            self.inputs.append(name)
        if self.inputs[-2:] != [COMMAND_INPUT[0], STATE_INPUT]:
            raise PolicyContractError("policy.json: controller.inputs must end with the command and the state")
        if len(self.scan_points) and "height_scan" not in self.inputs:
            raise PolicyContractError(
                f"policy.json: height_scan.points lists {len(self.scan_points)} points, but no controller input reads "
                "the height scan"
            )
        if controller["outputs"] != [TARGETS_OUTPUT, NEXT_STATE_OUTPUT]:
            raise PolicyContractError(
                f"policy.json: controller.outputs must be {[TARGETS_OUTPUT, NEXT_STATE_OUTPUT]}, got "
                f"{_shown(controller['outputs'])}"
            )
        try:
            session = onnxruntime.InferenceSession(str(onnx_file), providers=["CPUExecutionProvider"])
        except Exception as exc:  # onnxruntime raises its own untyped errors for a bad file
            raise PolicyContractError(f"onnxruntime cannot load {onnx_file}: {exc}") from exc
        found = [(i.name, i.shape) for i in session.get_inputs()]
        wanted = [(name, [expected[name]]) for name in self.inputs]
        outputs = [(o.name, o.shape) for o in session.get_outputs()]
        if found != wanted or outputs != [(TARGETS_OUTPUT, [n]), (NEXT_STATE_OUTPUT, [self.state_size])]:
            raise PolicyContractError(
                f"{onnx_file.name} has inputs {found} and outputs {outputs}; policy.json describes inputs {wanted} "
                f"and outputs {[(TARGETS_OUTPUT, [n]), (NEXT_STATE_OUTPUT, [self.state_size])]}"
            )
        self.onnx_file = onnx_file
