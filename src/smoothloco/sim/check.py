"""``smoothloco robot NAME_OR_PATH``: the checks to run on a new robot before training it.

1. Dynamics: our mass matrix, bias forces and foot Jacobians against MuJoCo (C) at random states
   (a wrong inertia or joint axis in the MJCF shows up in both, but a model our dynamics reads
   differently from MuJoCo does not pass).
2. Standing: PD at the default pose on flat ground, in MuJoCo and in our simulator (hard and
   smooth contact): the robot must stand upright and come to rest, both simulators at the same
   height. That height is the PD-loaded standing height, the value for ``task.base_height_target``.
3. What training ignores, in one table: the geoms that collide in MuJoCo (the judge and the
   deployed player) but never in training, where only the foot spheres touch the ground, and
   any property of the model our simulator cannot take. A property that changes the motion
   everywhere (tendons, equality constraints, fluid forces, gravity compensation) fails the
   check; joint damping, friction loss, springs and armature are modelled.
"""

from __future__ import annotations

from dataclasses import dataclass

import jax
import jax.numpy as jnp
import mujoco
import numpy as np

from smoothloco.robot import RobotSpec
from smoothloco.robot_side.testbench import stiff_contact
from smoothloco.sim.dynamics import dynamics, point_jacobians, rigid_tree
from smoothloco.sim.step import initial_state, make_sim, rollout

DYNAMICS_TOLERANCE = 1e-4  # relative to each quantity's largest entry; float32 against float64
STANDING_SECONDS = 4.0
HEIGHT_AGREEMENT = 0.02  # m, MuJoCo against our hard contact
AT_REST = 0.1  # m/s or rad/s: largest generalized velocity over the last second
UPRIGHT = 0.99  # z of the base's z axis
SMOOTH_SHARPNESS = 1000.0  # 1/m, where the default training schedule ends


@dataclass(frozen=True)
class Standing:
    height: float  # m, base height at the end
    drift: float  # m, horizontal distance from the start
    speed: float  # largest |generalized velocity| over the last second
    upright: float  # z of the base's z axis at the end

    def problems(self, where: str, stance_height: float) -> list[str]:
        if self.upright < UPRIGHT or self.height < 0.5 * stance_height:
            return [f"{where}: does not stand (height {self.height:.3f} m, upright {self.upright:.3f})"]
        return []

    def notes(self, where: str) -> list[str]:
        if self.speed > AT_REST:
            return [f"{where}: still moving after {STANDING_SECONDS:g} s (speed {self.speed:.3f}): the PD is lightly "
                    "damped, so the policy has to damp the stance (or raise kd)"]  # fmt: skip
        return []


def dynamics_errors(robot: RobotSpec, states: int = 3, seed: int = 0) -> dict[str, float]:
    """Largest relative error of our mass matrix, bias forces and foot Jacobians against
    MuJoCo's at ``states`` random states."""
    model, data = robot.mj_model(), None
    tree = rigid_tree(model)
    feet = np.array([model.geom(g).id for g in robot.foot_geoms])
    rng = np.random.default_rng(seed)
    errors = {"mass_matrix": 0.0, "bias": 0.0, "foot_jacobian": 0.0}
    for _ in range(states):
        q = robot.init_qpos()
        quat = rng.normal(size=4)
        q[3:7] = quat / np.linalg.norm(quat)
        q[7:] += rng.normal(0.0, 0.5, q.size - 7)
        v = rng.normal(0.0, 1.5, model.nv)
        data = mujoco.MjData(model)
        data.qpos[:], data.qvel[:] = q, v
        mujoco.mj_forward(model, data)
        mass = np.zeros((model.nv, model.nv))
        mujoco.mj_fullM(model, data, mass)
        dyn = dynamics(tree, jnp.asarray(q, jnp.float32), jnp.asarray(v, jnp.float32))
        linear, _ = point_jacobians(
            tree, dyn.frames, model.geom_bodyid[feet], jnp.asarray(data.geom_xpos[feet], jnp.float32)
        )
        reference = np.zeros((len(feet), 3, model.nv))
        for i, geom in enumerate(feet):
            mujoco.mj_jacGeom(model, data, reference[i], None, geom)
        for key, ours, theirs in (("mass_matrix", dyn.mass_matrix, mass), ("bias", dyn.bias, data.qfrc_bias),
                                  ("foot_jacobian", linear, reference)):  # fmt: skip
            error = np.abs(np.asarray(ours) - theirs).max() / max(np.abs(theirs).max(), 1e-9)
            errors[key] = max(errors[key], float(error))
    return errors


def _standing(trajectory_q: np.ndarray, trajectory_v: np.ndarray, dt: float) -> Standing:
    last = trajectory_q[-1]
    late = trajectory_v[-max(1, round(1.0 / dt)) :]
    return Standing(
        height=float(last[2]),
        drift=float(np.linalg.norm(last[:2] - trajectory_q[0, :2])),
        speed=float(np.abs(late).max()),
        upright=float(1 - 2 * (last[4] ** 2 + last[5] ** 2)),
    )


def stand_in_mujoco(robot: RobotSpec, seconds: float = STANDING_SECONDS, dt: float = 0.005) -> Standing:
    """PD at the default pose in MuJoCo (C) as the player runs it: its stiff contact, torques
    as generalized forces."""
    model = robot.mj_model()
    stiff_contact(model, dt)
    data = mujoco.MjData(model)
    data.qpos[:] = robot.init_qpos()
    qs, vs = [], []
    for _ in range(round(seconds / model.opt.timestep)):
        torque = robot.kp * (robot.default_pose - data.qpos[7:]) - robot.kd * data.qvel[6:]
        data.qfrc_applied[6:] = np.clip(torque, -robot.torque_limit, robot.torque_limit)
        mujoco.mj_step(model, data)
        qs.append(data.qpos.copy())
        vs.append(data.qvel.copy())
    return _standing(np.array(qs), np.array(vs), model.opt.timestep)


def stand_in_ours(robot: RobotSpec, contact: str, seconds: float = STANDING_SECONDS, dt: float = 0.005) -> Standing:
    """PD at the default pose in our simulator."""
    sim = make_sim(robot, contact, dt=dt)
    steps = round(seconds / dt)
    targets = jnp.tile(jnp.asarray(robot.default_pose, jnp.float32), (steps, 1))
    _, (trajectory, _) = jax.jit(lambda s: rollout(sim, s, targets, SMOOTH_SHARPNESS))(initial_state(robot))
    return _standing(np.asarray(trajectory.q), np.asarray(trajectory.v), dt)


@dataclass(frozen=True)
class Ignored:
    """One thing of the model that MuJoCo simulates and training does not."""

    what: str  # which part of the model
    mujoco: str  # what MuJoCo and the deployed player do with it
    training: str  # what training does instead
    problem: bool = False  # the motion differs everywhere, not only where this part is reached

    def line(self) -> str:
        return f"{self.what}: {self.mujoco} in MuJoCo; in training, {self.training}"


def ignored_geoms(robot: RobotSpec) -> list[Ignored]:
    """One row per body whose geoms collide with the ground in MuJoCo: in training only the
    foot spheres do; a knee body's height ends an episode instead."""
    model = robot.mj_model()
    ground = [g for g in range(model.ngeom) if model.geom_bodyid[g] == 0]
    feet = {model.geom(g).id for g in robot.foot_geoms}
    rows = []
    for body in range(1, model.nbody):
        geoms = [g for g in np.flatnonzero(model.geom_bodyid == body)
                 if g not in feet and any(_collide(model, g, other) for other in ground)]  # fmt: skip
        if not geoms:
            continue
        kinds = [mujoco.mjtGeom(model.geom_type[g]).name.removeprefix("mjGEOM_").lower() for g in geoms]
        name = model.body(body).name
        training = "never collide"
        if name in robot.knee_bodies:
            training += " (the body's origin lower than task.min_knee_height ends the episode)"
        rows.append(Ignored(f"{name}: {len(geoms)} geom{'s' * (len(geoms) > 1)} ({', '.join(kinds)})",
                            "collide with the ground", training))  # fmt: skip
    return rows


def _collide(model: mujoco.MjModel, a: int, b: int) -> bool:
    """MuJoCo's contype/conaffinity test for geoms ``a`` and ``b``."""
    return bool(model.geom_contype[a] & model.geom_conaffinity[b] or model.geom_contype[b] & model.geom_conaffinity[a])


def unmodelled_properties(robot: RobotSpec) -> list[Ignored]:
    """The model's properties our simulator cannot take; all but the joint ranges fail the check."""
    model = robot.mj_model()
    rows = []
    limited = [robot.joint_names[i] for i, low in enumerate(robot.joint_lower) if np.isfinite(low)]
    if limited:
        rows.append(Ignored(f"joint ranges of {len(limited)} joints", "enforced as limits",
                            "not enforced: the joint_limits reward term keeps joints inside"))  # fmt: skip
    cannot = "not modelled: remove it from the MJCF, or the policy meets another robot in MuJoCo and on hardware"
    for count, what, mujoco_does in (
        (model.ntendon, "tendons", "couple joints"),
        (model.neq, "equality constraints", "hold"),
        (int(np.count_nonzero(model.body_gravcomp)), "bodies with gravcomp", "gravity compensated"),
    ):
        if count:
            rows.append(Ignored(f"{count} {what}", mujoco_does, cannot, problem=True))
    if model.opt.density > 0 or model.opt.viscosity > 0:
        rows.append(Ignored(f"fluid (density {model.opt.density:g}, viscosity {model.opt.viscosity:g})",
                            "drag and lift", cannot, problem=True))  # fmt: skip
    return rows


def ignored(robot: RobotSpec) -> list[Ignored]:
    """Everything MuJoCo simulates and training does not: geoms, then properties."""
    return ignored_geoms(robot) + unmodelled_properties(robot)


def check_robot(robot: RobotSpec) -> dict:
    """Every check, its figures, the problems found (none: ready to train) and notes."""
    errors = dynamics_errors(robot)
    standing = {"mujoco": stand_in_mujoco(robot), "hard": stand_in_ours(robot, "hard"),
                "smooth": stand_in_ours(robot, "smooth")}  # fmt: skip
    problems = [f"dynamics: {k} differs from MuJoCo's by {v:.1e} (relative)" for k, v in errors.items()
                if v > DYNAMICS_TOLERANCE]  # fmt: skip
    notes = []
    for where, result in standing.items():
        problems += result.problems(where, robot.base_height)
        notes += result.notes(where)
    rows = ignored(robot)
    problems += [row.line() for row in rows if row.problem]
    gap = abs(standing["mujoco"].height - standing["hard"].height)
    if gap > HEIGHT_AGREEMENT:
        problems.append(f"standing height: MuJoCo and our hard contact differ by {gap * 100:.1f} cm")
    return {
        "robot": robot.name,
        "mass_kg": robot.mass,
        "joints": list(robot.joint_names),
        "feet": list(robot.foot_geoms),
        "foot_radius_m": robot.foot_radius,
        "stance_height_m": robot.base_height,
        "dynamics_relative_error": errors,
        "standing": {k: vars(v) for k, v in standing.items()},
        "suggested_base_height_target_m": round(standing["mujoco"].height, 3),
        "taken_from_model": list(robot.from_model),  # what the spec file left to the MJCF
        "ignored_in_training": [vars(row) for row in rows],
        "problems": problems,  # each fails the check
        "notes": notes,  # worth knowing, not failures
    }
