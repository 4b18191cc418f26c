"""What a spec file leaves out, taken from what the MJCF already says: the standing pose from a
keyframe, torque limits from motor actuators' ranges, PD gains from position actuators.

Our PD drives the joints (in training, and in MuJoCo as generalized forces), so the model's
actuators only state numbers. A position actuator would also pull its joint toward its (zero)
control in MuJoCo, against the PD: it becomes a motor of the same force range. An actuator of
any other kind is refused. A value the spec gives overrides the model's, except a PD gain that
differs from a position actuator's: which of the two the user meant is unclear, so it is refused.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import mujoco
import numpy as np

from smoothloco.robot.spec import FREE_BODY, RobotSpecError

POSE, GAINS, LIMIT = "default_pose", ("kp", "kd"), "torque_limit"


def _kind(model: mujoco.MjModel, actuator: int) -> str:
    """The actuator's kind: motor, position, or other (activation dynamics, a gain that is not
    fixed, any other bias)."""
    if model.actuator_dyntype[actuator] != mujoco.mjtDyn.mjDYN_NONE or (
        model.actuator_gaintype[actuator] != mujoco.mjtGain.mjGAIN_FIXED
    ):
        return "other"
    gain, bias = model.actuator_gainprm[actuator, 0], model.actuator_biasprm[actuator, :3]
    if model.actuator_biastype[actuator] == mujoco.mjtBias.mjBIAS_NONE:
        return "motor"
    if model.actuator_biastype[actuator] == mujoco.mjtBias.mjBIAS_AFFINE and bias[0] == 0 and bias[1] == -gain:
        return "position"  # force = kp (ctrl - length) - kv velocity
    return "other"


def _actuators(model: mujoco.MjModel, joint_names: Sequence[str]) -> dict[str, tuple[int, str]]:
    """Joint name -> (actuator id, kind); refuses an actuator we cannot take over, by name."""
    joints = {model.joint(name).id: name for name in joint_names}
    found: dict[str, tuple[int, str]] = {}
    for actuator in range(model.nu):
        label = model.actuator(actuator).name or f"#{actuator}"
        joint = int(model.actuator_trnid[actuator, 0])
        if model.actuator_trntype[actuator] != mujoco.mjtTrn.mjTRN_JOINT:
            raise RobotSpecError(f"actuator {label!r} does not drive a joint; the PD drives the joints: remove it")
        if joint not in joints:
            continue  # an unlisted hinge: make_spec refuses it by name
        kind = _kind(model, actuator)
        if kind == "other":
            raise RobotSpecError(
                f"actuator {label!r} on {joints[joint]} is neither a motor nor a position actuator (fixed gain, no "
                "activation dynamics); it would act against the PD in MuJoCo: make it a <motor> (its ctrlrange gives "
                "the torque limit) or a <position> (its kp and kv give the PD gains)"
            )
        if joints[joint] in found:
            raise RobotSpecError(f"joint {joints[joint]} is driven by two actuators; keep one")
        found[joints[joint]] = (actuator, kind)
    return found


def _torque_limit(model: mujoco.MjModel, actuator: int, kind: str) -> float:
    """The largest joint torque the actuator gives (inf where unlimited): its force range, and
    for a motor its control range times the gain, times the gear."""
    limits = [np.inf]
    if model.actuator_forcelimited[actuator]:
        limits.append(np.abs(model.actuator_forcerange[actuator]).max())
    if kind == "motor" and model.actuator_ctrllimited[actuator]:
        limits.append(np.abs(model.actuator_ctrlrange[actuator]).max() * abs(model.actuator_gainprm[actuator, 0]))
    return float(min(limits) * abs(model.actuator_gear[actuator, 0]))


def keyframe_pose(model: mujoco.MjModel, keyframe: str, joint_names: Sequence[str]) -> np.ndarray:
    """The joint positions of the model's keyframe ``keyframe``, in the order of ``joint_names``."""
    key = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_KEY, keyframe)
    if key < 0:
        names = [model.key(k).name for k in range(model.nkey)]
        raise RobotSpecError(f"keyframe: the model has no keyframe {keyframe!r}; its keyframes: {names}")
    qpos = model.key_qpos[key]
    return np.array([qpos[model.jnt_qposadr[model.joint(name).id]] for name in joint_names])


def file_values(
    xml: str, joint_names: Sequence[str], given: Mapping[str, object], keyframe: str | None = None
) -> tuple[str, dict[str, object], tuple[str, ...]]:
    """``given`` (default_pose, kp, kd, torque_limit: None where the spec is silent) completed
    from the model: the model text (its position actuators turned into motors), the values, and
    one line per value taken from the model."""
    try:
        model = mujoco.MjModel.from_xml_string(xml)
    except ValueError:
        return xml, dict(given), ()  # make_spec says what is wrong
    if model.nbody <= FREE_BODY or any(mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_JOINT, j) < 0 for j in joint_names):
        return xml, dict(given), ()  # make_spec says what is wrong
    values, lines = dict(given), []
    if keyframe is not None:
        pose = keyframe_pose(model, keyframe, joint_names)
        if values.get(POSE) is None:
            values[POSE] = pose
            lines.append(f"default_pose: keyframe {keyframe!r}")
    if values.get(POSE) is None:
        raise RobotSpecError("default_pose: give it (rad, one per joint) or name a keyframe of the model (keyframe)")
    actuators = _actuators(model, joint_names)
    # Joint space: a position actuator's force kp (ctrl - gear q) - kv gear q̇ acts on the joint times gear
    gear_squared = {name: model.actuator_gear[a, 0] ** 2 for name, (a, kind) in actuators.items() if kind == "position"}
    limits = {name: _torque_limit(model, a, kind) for name, (a, kind) in actuators.items()}
    file = {
        "kp": {name: model.actuator_gainprm[actuators[name][0], 0] * g2 for name, g2 in gear_squared.items()},
        "kd": {name: -model.actuator_biasprm[actuators[name][0], 2] * g2 for name, g2 in gear_squared.items()},
        LIMIT: {name: limit for name, limit in limits.items() if np.isfinite(limit)},
    }
    for key in GAINS:
        _refuse_fighting(key, values.get(key), file[key], joint_names)
    for key, source in (("kp", "position actuators' kp × gear²"), ("kd", "position actuators' kv × gear²"),
                        (LIMIT, "actuators' ranges × gear")):  # fmt: skip
        if values.get(key) is not None:
            continue
        missing = [name for name in joint_names if name not in file[key]]
        if missing:
            where = "position actuator" if key in GAINS else "limited motor or position actuator"
            raise RobotSpecError(f"{key}: give it in the spec; the model has no {where} on {missing}")
        values[key] = [float(file[key][name]) for name in joint_names]
        lines.append(f"{key}: the {source}")
    if gear_squared:
        xml = _position_to_motors(xml, [actuators[name][0] for name in gear_squared], model)
        lines.append(f"position actuators on {len(gear_squared)} joints: made motors, the PD drives the joints")
    return xml, values, tuple(lines)


def _refuse_fighting(key: str, value: object, file: Mapping[str, float], joint_names: Sequence[str]) -> None:
    """A spec gain that differs from the position actuator's on the same joint is refused."""
    if value is None or not file:
        return
    try:
        spec = np.broadcast_to(np.asarray(value, float), (len(joint_names),))
    except (TypeError, ValueError):
        return  # not one number per joint: make_spec says what is wrong
    differ = [f"{name} {spec[i]:g} vs {file[name]:g}" for i, name in enumerate(joint_names)
              if name in file and not np.isclose(spec[i], file[name], rtol=1e-6)]  # fmt: skip
    if differ:
        raise RobotSpecError(
            f"{key}: the spec's differs from the model's position actuators' (spec vs model: {'; '.join(differ[:3])}"
            f"{'; ...' if len(differ) > 3 else ''}); both would drive the joints: leave {key} out of the spec to take "
            "the actuators', or make them <motor> actuators"
        )


def _position_to_motors(xml: str, actuators: Sequence[int], model: mujoco.MjModel) -> str:
    """``xml`` with the given position actuators made motors of the same force range: in
    MuJoCo, where the PD's torques are generalized forces, a motor at zero control does nothing."""
    spec = mujoco.MjSpec.from_string(xml)
    for actuator in actuators:
        motor = (
            spec.actuator(model.actuator(actuator).name) if model.actuator(actuator).name else spec.actuators[actuator]
        )
        limit = _torque_limit(model, actuator, "position") / abs(model.actuator_gear[actuator, 0])
        motor.gaintype, motor.biastype = mujoco.mjtGain.mjGAIN_FIXED, mujoco.mjtBias.mjBIAS_NONE
        motor.gainprm[:3], motor.biasprm[:3] = [1.0, 0.0, 0.0], [0.0, 0.0, 0.0]
        if np.isfinite(limit):
            motor.ctrllimited = motor.forcelimited = mujoco.mjtLimited.mjLIMITED_TRUE
            motor.ctrlrange = motor.forcerange = [-limit, limit]
        else:
            motor.ctrllimited = mujoco.mjtLimited.mjLIMITED_FALSE
    return spec.to_xml()
