"""What the task, the simulator and a deployment need to know about a quadruped (``RobotSpec``),
and how one is made from an MJCF model and checked against what the simulator can take.

A robot is an MJCF model plus a few facts the model does not state: which joints the policy
drives and in which order, which sphere geoms are the feet, which bodies end an episode when
they touch down (the knees), the standing pose, the PD gains and the torque limits, and the task
settings that scale with the robot (``task_defaults``, e.g. the standing height the reward
holds). ``robot.loading`` reads these from a TOML file next to the MJCF; the bundled robots
are made the same way.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from types import MappingProxyType

import mujoco
import numpy as np

from smoothloco.validation import shown

FREE_BODY = 1  # the floating base: body 1, right below the world
JOINTS_PER_LEG = 3  # abduction, hip flexion, knee: in this order, from the base to the foot
N_LEGS = 4


class RobotSpecError(ValueError):
    """The robot description cannot be used: what is wrong, where, and what is accepted."""


@dataclass(frozen=True)
class RobotSpec:
    """A quadruped as the task and the deployment contract see it. ``kp``, ``kd`` and
    ``torque_limit`` are per joint (a single number is broadcast).

    The motors' DC torque–speed envelope, where the robot states one (``velocity_limit``): the
    torque a motor can drive with falls linearly from ``saturation_torque`` at rest to zero at
    ``velocity_limit``, and never exceeds ``torque_limit`` (Isaac Lab's ``DCMotor`` model)."""

    xml: str
    joint_names: tuple[str, ...]
    foot_geoms: tuple[str, ...]
    knee_bodies: tuple[str, ...]
    foot_radius: float
    default_pose: np.ndarray = field(repr=False)
    base_height: float  # base height at which the lowest foot touches flat ground at the default pose
    kp: np.ndarray | float = 80.0
    kd: np.ndarray | float = 2.0
    torque_limit: np.ndarray | float = 80.0
    saturation_torque: np.ndarray | float | None = None  # N·m, the torque_limit where not given
    velocity_limit: np.ndarray | float | None = None  # rad/s; None: no envelope, the torque limit only
    joint_lower: np.ndarray = field(default=None, repr=False)  # type: ignore[assignment]
    joint_upper: np.ndarray = field(default=None, repr=False)  # type: ignore[assignment]
    name: str = "robot"
    # What was taken from the model rather than the spec, one line each (``robot.from_model``)
    from_model: tuple[str, ...] = ()
    # Task settings for this robot, as nested tables of ``VelocityTaskConfig`` fields; applied
    # over the task's defaults by ``VelocityTaskConfig.for_robot``.
    task_defaults: Mapping = field(default_factory=dict, repr=False)

    def __post_init__(self) -> None:
        n = len(self.joint_names)
        if self.saturation_torque is None:
            object.__setattr__(self, "saturation_torque", self.torque_limit)
        for gain in ("kp", "kd", "torque_limit", "saturation_torque", "velocity_limit"):
            value = getattr(self, gain)
            if value is not None:
                object.__setattr__(self, gain, np.broadcast_to(np.asarray(value, float), (n,)).copy())
        object.__setattr__(self, "task_defaults", MappingProxyType(dict(self.task_defaults)))

    @property
    def model_hash(self) -> str:
        return hashlib.sha256(self.xml.encode()).hexdigest()[:16]

    def mj_model(self) -> mujoco.MjModel:
        return mujoco.MjModel.from_xml_string(self.xml)

    @property
    def mass(self) -> float:
        """Total mass (kg), for the cost of transport."""
        return float(self.mj_model().body_mass.sum())

    def init_qpos(self) -> np.ndarray:
        """Standing configuration: base a little above the nominal stance height."""
        return np.concatenate([[0.0, 0.0, self.base_height + 0.01, 1.0, 0.0, 0.0, 0.0], self.default_pose])

    def foot_positions(self) -> np.ndarray:
        """(n_feet, 3) foot centres in the base frame at the default pose."""
        model = self.mj_model()
        data = mujoco.MjData(model)
        data.qpos[:] = np.concatenate([[0, 0, 0, 1, 0, 0, 0], self.default_pose])
        mujoco.mj_kinematics(model, data)
        return np.array([data.geom_xpos[model.geom(g).id] for g in self.foot_geoms])


def check_tree(model: mujoco.MjModel) -> None:
    """Raise ``RobotSpecError`` unless body 1 is a free-floating base and every other body hangs
    from it by exactly one hinge: the only trees the simulator's dynamics take."""
    types = model.jnt_type
    free = model.nbody > 1 and model.body_jntnum[FREE_BODY] == 1
    if not (free and types[model.body_jntadr[FREE_BODY]] == mujoco.mjtJoint.mjJNT_FREE):
        raise RobotSpecError(
            "expected body 1 to be the floating base with a single free joint (<freejoint/> in the first body of "
            "<worldbody>)"
        )
    for body in range(FREE_BODY + 1, model.nbody):
        name = model.body(body).name or f"#{body}"
        count, first = model.body_jntnum[body], model.body_jntadr[body]
        if model.body_parentid[body] == 0:
            raise RobotSpecError(f"body {name!r} is a second body under <worldbody>; the robot must be one tree")
        if count != 1 or types[first] != mujoco.mjtJoint.mjJNT_HINGE:
            kinds = [mujoco.mjtJoint(types[first + k]).name.removeprefix("mjJNT_").lower() for k in range(count)]
            raise RobotSpecError(
                f"body {name!r} must hang from the base's tree by exactly one hinge joint, has "
                f"{kinds or 'none (a welded body: merge it into its parent)'}"
            )


def make_spec(
    xml: str,
    joint_names: Sequence[str],
    foot_geoms: Sequence[str],
    knee_bodies: Sequence[str],
    default_pose: Sequence[float],
    kp: float | Sequence[float],
    kd: float | Sequence[float],
    torque_limit: float | Sequence[float],
    name: str = "robot",
    saturation_torque: float | Sequence[float] | None = None,
    velocity_limit: float | Sequence[float] | None = None,
    task_defaults: Mapping | None = None,
    from_model: Sequence[str] = (),
) -> RobotSpec:
    """A checked ``RobotSpec``: the model loads, is a tree the simulator takes, has a ground
    plane, and the names, sizes and values given fit it. ``RobotSpecError`` says what does not."""
    try:
        model = mujoco.MjModel.from_xml_string(xml)
    except ValueError as exc:
        hint = ""
        if "file" in str(exc).lower():  # a file the text refers to: only a model read from its file can
            hint = "; a model given as text must be self-contained: load it from its file (a spec's mjcf)"
        raise RobotSpecError(f"MuJoCo could not load the MJCF: {' '.join(str(exc).split())}{hint}") from exc
    check_tree(model)
    joint_names, foot_geoms, knee_bodies = tuple(joint_names), tuple(foot_geoms), tuple(knee_bodies)
    n = len(joint_names)
    _check_joints(model, joint_names)
    radius = _check_feet(model, joint_names, foot_geoms)
    for body in knee_bodies:
        if mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_BODY, body) < 0:
            raise RobotSpecError(f"knees: no body named {body!r} in the model")
    if not np.any((model.geom_bodyid == 0) & (model.geom_type == mujoco.mjtGeom.mjGEOM_PLANE)):
        raise RobotSpecError('the model has no ground: add <geom type="plane" size="0 0 0.05"/> to <worldbody>')
    pose = _numbers("default_pose", default_pose, n)
    if saturation_torque is not None and velocity_limit is None:
        raise RobotSpecError("saturation_torque: the torque-speed envelope needs velocity_limit (rad/s) too")
    gains = {key: _numbers(key, value, n, positive=True) for key, value in
             (("kp", kp), ("kd", kd), ("torque_limit", torque_limit), ("saturation_torque", saturation_torque),
              ("velocity_limit", velocity_limit)) if value is not None}  # fmt: skip
    lower, upper = _joint_ranges(model, joint_names)
    outside = [f"{j} = {p:g} not in [{lo:g}, {hi:g}]" for j, p, lo, hi in zip(joint_names, pose, lower, upper)
               if not lo <= p <= hi]  # fmt: skip
    if outside:
        raise RobotSpecError(f"default_pose outside the joint ranges of the model: {'; '.join(outside)}")
    spec = RobotSpec(
        xml=xml,
        joint_names=joint_names,
        foot_geoms=foot_geoms,
        knee_bodies=knee_bodies,
        foot_radius=radius,
        default_pose=pose,
        base_height=0.0,
        joint_lower=lower,
        joint_upper=upper,
        name=name,
        from_model=tuple(from_model),
        task_defaults=task_defaults or {},
        **gains,
    )
    lowest = float(np.min(spec.foot_positions()[:, 2]))
    return replace(spec, base_height=radius - lowest)


def _check_joints(model: mujoco.MjModel, joint_names: tuple[str, ...]) -> None:
    hinges = [model.joint(j).name for j in range(model.njnt) if model.jnt_type[j] == mujoco.mjtJoint.mjJNT_HINGE]
    if len(joint_names) != N_LEGS * JOINTS_PER_LEG:
        raise RobotSpecError(
            f"joints: got {len(joint_names)}; a quadruped here has {N_LEGS} legs of {JOINTS_PER_LEG} joints "
            f"(abduction, hip, knee), {N_LEGS * JOINTS_PER_LEG} in all"
        )
    unknown = [j for j in joint_names if j not in hinges]
    if unknown:
        raise RobotSpecError(f"joints: no hinge joint named {unknown} in the model; its hinges: {hinges}")
    twice = sorted({j for j in joint_names if joint_names.count(j) > 1})
    if twice:
        raise RobotSpecError(f"joints: {twice} listed more than once")
    undriven = [h for h in hinges if h not in joint_names]
    if undriven:
        raise RobotSpecError(f"joints: the model's hinges {undriven} are not listed; every hinge must be driven")


def _check_feet(model: mujoco.MjModel, joint_names: tuple[str, ...], foot_geoms: tuple[str, ...]) -> float:
    """The feet are spheres of one radius, each at the end of its leg's three joints (listed
    from the base down); returns the radius."""
    if len(foot_geoms) != N_LEGS:
        raise RobotSpecError(f"feet: got {len(foot_geoms)} geoms; a quadruped has {N_LEGS}")
    radii = []
    for leg, geom in enumerate(foot_geoms):
        gid = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_GEOM, geom)
        if gid < 0:
            named = [model.geom(g).name for g in range(model.ngeom) if model.geom(g).name]
            raise RobotSpecError(f"feet: no geom named {geom!r} in the model; named geoms: {named}")
        if model.geom_type[gid] != mujoco.mjtGeom.mjGEOM_SPHERE:
            kind = mujoco.mjtGeom(model.geom_type[gid]).name.removeprefix("mjGEOM_").lower()
            raise RobotSpecError(f"feet: geom {geom!r} is a {kind}; the simulator's contact takes sphere feet")
        radii.append(float(model.geom_size[gid, 0]))
        chain, body = [], int(model.geom_bodyid[gid])
        while body > FREE_BODY:
            chain.append(model.joint(model.body_jntadr[body]).name)
            body = int(model.body_parentid[body])
        expected = list(joint_names[leg * JOINTS_PER_LEG : (leg + 1) * JOINTS_PER_LEG])
        if chain[::-1] != expected:
            raise RobotSpecError(
                f"joints {expected} (leg {leg + 1}) do not lead to foot {geom!r}, whose joints from the base down are "
                f"{chain[::-1]}: list each leg's joints base to foot, legs in the order of the feet"
            )
    if max(radii) - min(radii) > 1e-9:
        raise RobotSpecError(f"feet: the simulator takes one foot radius; the feet have radii {radii}")
    return radii[0]


def _numbers(key: str, value: float | Sequence[float], n: int, positive: bool = False) -> np.ndarray:
    kind = "positive numbers" if positive else "numbers"
    refuse = RobotSpecError(f"{key}: expected one or {n} finite {kind} (one per joint), got {shown(value)}")
    try:
        array = np.asarray(value, float)
    except (TypeError, ValueError, OverflowError):  # texts, nested lists, integers beyond any float
        raise refuse from None
    if array.ndim == 0:
        array = np.full(n, float(array))
    if array.shape != (n,) or not np.all(np.isfinite(array)) or (positive and not np.all(array > 0)):
        raise refuse
    return array


def _joint_ranges(model: mujoco.MjModel, joint_names: tuple[str, ...]) -> tuple[np.ndarray, np.ndarray]:
    ids = [model.joint(j).id for j in joint_names]
    lower = np.array([model.jnt_range[j][0] if model.jnt_limited[j] else -np.inf for j in ids])
    upper = np.array([model.jnt_range[j][1] if model.jnt_limited[j] else np.inf for j in ids])
    return lower, upper
