"""One differentiable time step of the floating-base quadruped (docs/design.md, "One time step").

Smooth multibody dynamics (mass matrix, bias forces, Jacobians) come from ``sim.dynamics`` for
the robot's MuJoCo model; contact is ours (``smoothloco.sim.contact``). Stepping is Moreau-Jean
midpoint: evaluate everything at q_m = q + h/2 v, solve foot impulses, then q+ = q_m + h/2 v+.

The joints' passive forces (``joint_passive``: spring, damping, friction loss) are dissipative
and can be stiff, so the step takes the dissipative part linearly implicitly, as MuJoCo's Euler
integrator takes damping: with f(v) the passive force and K = -∂f/∂v ≥ 0 (diagonal),
(M + hK)(v+ - v) = h(τ - c + f(v)) + Jᵀλ. For damping alone this is exactly MuJoCo's
(M + hD) v̇ = τ - c - Dv; the spring stays explicit, as in MuJoCo.
"""

from __future__ import annotations

from functools import partial

import jax
import jax.numpy as jnp
import mujoco
import numpy as np
from flax import struct

from smoothloco.robot import RobotSpec
from smoothloco.sim import terrain as terrain_lib
from smoothloco.sim.contact import (
    CONTACT_IMPULSE,
    DEFAULT_SHARPNESS,
    ContactConfig,
    contact_weights,
    gauss_seidel,
    penalty_impulses,
)
from smoothloco.sim.dynamics import Dynamics, RigidTree, dynamics, point_jacobians, rigid_tree
from smoothloco.sim.linalg import SPD_FACTOR, SPD_SOLUTION, spd_solve
from smoothloco.sim.rotation import quat_integrate

FREE_QPOS, FREE_DOF = 7, 6
# rad/s; the joint friction's tanh reaches 76 % of its value here. Below it, friction acts like
# damping of friction / this speed, taken implicitly, so any friction is stable; MuJoCo's friction
# loss holds a joint still instead. At 0.1 a standing Go2 with friction loss settles as in MuJoCo
# (tests/test_sim_joint_passive.py); at 0.03 gradients through 1 N·m of it on a Go2 calf grew
# to 10⁴ and left their finite differences, at 0.5 the robot still crept at 0.03 m/s.
JOINT_FRICTION_SPEED = 0.1


@struct.dataclass
class SimState:
    """Generalized positions (base xyz, base quaternion wxyz, joints) and velocities
    (base linear velocity in the world frame, base angular velocity in the body frame, joints),
    MuJoCo's free-joint convention."""

    q: jax.Array
    v: jax.Array


@struct.dataclass
class StepInfo:
    """What contact did during the step; used for rewards, metrics and tests."""

    gap: jax.Array  # (n_feet,) signed distance from each foot sphere to the terrain at the midpoint
    weight: jax.Array  # (n_feet,) contact participation
    impulse: jax.Array  # (n_feet, 3) applied impulse, contact frame [normal, t1, t2]
    foot_velocity: jax.Array  # (n_feet, 3) contact-point velocity after the step, contact frame
    torque: jax.Array  # (n_joints,) applied joint torques
    # () the motors' mechanical power over the step, Σ|τ·(q̇ + q̇_new)/2| (W): with positions
    # advanced by the mean of the two velocities, exactly the work each joint's torque did / dt
    power: jax.Array
    knee_height: jax.Array  # (n_knees,) knee joints' signed distances to the terrain at the midpoint
    finite: jax.Array  # () whether the new state is finite


@struct.dataclass
class Sim:
    """A differentiable simulator: the robot's rigid-body tree plus runtime physical parameters.

    Array fields are pytree leaves, so domain randomization can batch them with ``vmap``;
    the rest is static and fixed at trace time.
    """

    tree: RigidTree
    foot_offset: jax.Array  # (n_feet, 3) sphere centres in their bodies' frames
    friction: jax.Array  # () Coulomb coefficient, foot on ground
    kp: jax.Array  # (n_joints,)
    kd: jax.Array  # (n_joints,)
    motor_strength: jax.Array  # (n_joints,) multiplies the PD torque
    # The joints' passive forces (``joint_passive``), the MJCF's values by default. (n_joints,)
    # N·m, Coulomb friction against the joint's motion (MuJoCo's frictionloss), smoothed as
    # tanh(q̇ / JOINT_FRICTION_SPEED) so that it has a gradient
    joint_friction: jax.Array
    joint_damping: jax.Array  # (n_joints,) N·m·s/rad, viscous (MuJoCo's damping)
    joint_stiffness: jax.Array  # (n_joints,) N·m/rad, a spring toward joint_spring_ref (MuJoCo's stiffness)
    joint_spring_ref: jax.Array  # (n_joints,) rad (MuJoCo's springref)
    torque_limit: jax.Array  # (n_joints,)
    # (n_joints,) the motors' torque-speed envelope (``RobotSpec``); an infinite velocity limit
    # leaves the torque limit alone
    saturation_torque: jax.Array
    velocity_limit: jax.Array
    dt: float = struct.field(pytree_node=False)
    contact: ContactConfig = struct.field(pytree_node=False)
    foot_body_ids: tuple[int, ...] = struct.field(pytree_node=False)
    foot_radius: float = struct.field(pytree_node=False)
    knee_body_ids: tuple[int, ...] = struct.field(pytree_node=False, default=())
    terrain: terrain_lib.Terrain = struct.field(pytree_node=False, default=terrain_lib.flat)

    @property
    def n_feet(self) -> int:
        return len(self.foot_body_ids)


def make_sim(
    robot: RobotSpec,
    contact: ContactConfig | str = "smooth",
    dt: float = 0.005,
    friction: float = 0.8,
    terrain: terrain_lib.Terrain = terrain_lib.flat,
    motor_envelope: bool = False,
) -> Sim:
    """Build a simulator for ``robot``; raises ``ValueError`` on a bad step or a missing foot.
    ``motor_envelope`` applies the robot's torque-speed envelope (an error where it has none)."""
    if isinstance(contact, str):
        contact = ContactConfig(model=contact)
    if not (np.isfinite(dt) and dt > 0):
        raise ValueError(f"time step dt must be a positive number of seconds, got {dt}")
    if not friction >= 0:
        raise ValueError(f"friction must be >= 0, got {friction}")
    model = robot.mj_model()
    geom_names = [model.geom(i).name for i in range(model.ngeom)]
    missing = [f for f in robot.foot_geoms if f not in geom_names]
    if missing:
        raise ValueError(f"model has no foot geom named {missing}; named geoms: {[g for g in geom_names if g]}")
    foot_ids = [model.geom(f).id for f in robot.foot_geoms]
    n = len(robot.joint_names)
    if motor_envelope and robot.velocity_limit is None:
        raise ValueError(f"robot {robot.name!r} states no torque-speed envelope (velocity_limit); accepted: "
                         "motor_envelope false, or a robot spec with velocity_limit")  # fmt: skip
    velocity_limit = robot.velocity_limit if motor_envelope else np.full(n, np.inf)
    return Sim(
        tree=rigid_tree(model),
        foot_offset=jnp.asarray(model.geom_pos[foot_ids], jnp.float32),
        friction=jnp.asarray(float(friction)),  # default float dtype (float32, or float64 under x64), as the gains
        kp=jnp.asarray(robot.kp),
        kd=jnp.asarray(robot.kd),
        motor_strength=jnp.ones(n),
        **_joint_passive_parameters(model),
        torque_limit=jnp.asarray(robot.torque_limit),
        saturation_torque=jnp.asarray(robot.saturation_torque),
        velocity_limit=jnp.asarray(velocity_limit, jnp.asarray(robot.torque_limit).dtype),
        dt=float(dt),
        contact=contact,
        foot_body_ids=tuple(int(model.geom_bodyid[g]) for g in foot_ids),
        foot_radius=robot.foot_radius,
        knee_body_ids=tuple(model.body(b).id for b in robot.knee_bodies),
        terrain=terrain,
    )


def _joint_passive_parameters(model: mujoco.MjModel) -> dict[str, jax.Array]:
    """The MJCF's friction loss, damping and spring of the hinge joints, in dof order."""
    hinge_dofs, hinge_joints = slice(FREE_DOF, None), model.dof_jntid[FREE_DOF:]
    values = {
        "joint_friction": model.dof_frictionloss[hinge_dofs],
        "joint_damping": model.dof_damping[hinge_dofs],
        "joint_stiffness": model.jnt_stiffness[hinge_joints],
        "joint_spring_ref": model.qpos_spring[FREE_QPOS:],
    }
    return {key: jnp.asarray(np.asarray(value, float)) for key, value in values.items()}  # the gains' dtype


def joint_passive(sim: Sim, joint_position: jax.Array, joint_velocity: jax.Array) -> tuple[jax.Array, jax.Array]:
    """The joints' passive torques f = -k (q - q_ref) - d q̇ - μ tanh(q̇ / JOINT_FRICTION_SPEED)
    and their damping -∂f/∂q̇ = d + μ (1 - tanh²) / JOINT_FRICTION_SPEED (≥ 0), each (n_joints,)."""
    slip = jnp.tanh(joint_velocity / JOINT_FRICTION_SPEED)
    force = (
        -sim.joint_stiffness * (joint_position - sim.joint_spring_ref)
        - sim.joint_damping * joint_velocity
        - sim.joint_friction * slip
    )
    return force, sim.joint_damping + sim.joint_friction * (1.0 - slip**2) / JOINT_FRICTION_SPEED


def integrate_positions(q: jax.Array, v: jax.Array, dt: float) -> jax.Array:
    """q ⊕ dt·v for a free base followed by hinge joints."""
    pos = q[:3] + dt * v[:3]
    quat = quat_integrate(q[3:7], v[3:6], dt)
    joints = q[FREE_QPOS:] + dt * v[FREE_DOF:]
    return jnp.concatenate([pos, quat, joints])


def pd_torque(sim: Sim, q: jax.Array, v: jax.Array, joint_target: jax.Array) -> jax.Array:
    """Joint PD on position targets, scaled by motor strength and clipped to what the motors
    can give at their speed (``motor_torque_bounds``)."""
    joint_velocity = v[FREE_DOF:]
    raw = sim.kp * (joint_target - q[FREE_QPOS:]) - sim.kd * joint_velocity
    lower, upper = motor_torque_bounds(sim.torque_limit, sim.saturation_torque, sim.velocity_limit, joint_velocity)
    return jnp.clip(sim.motor_strength * raw, lower, upper)


def motor_torque_bounds(torque_limit, saturation_torque, velocity_limit, joint_velocity):
    """The DC motor's envelope: driving torque (same sign as the velocity) falls linearly from
    the saturation torque at rest to zero at the velocity limit, braking torque is not reduced,
    both within the torque limit. (The standalone MuJoCo player states it again in numpy; a
    test holds the two equal.)"""
    ratio = joint_velocity / velocity_limit
    upper = (saturation_torque * (1.0 - ratio)).clip(0.0, torque_limit)
    lower = (saturation_torque * (-1.0 - ratio)).clip(-torque_limit, 0.0)
    return lower, upper


def _heights_above_terrain(sim: Sim, points: jax.Array) -> jax.Array:
    """Signed distances (n,) of ``points`` (n, 3) to the terrain's surface."""
    return jax.vmap(sim.terrain.distance)(points)[0]


def _foot_contacts(sim: Sim, dyn: Dynamics) -> tuple[jax.Array, jax.Array]:
    """Foot gaps (n,) and contact Jacobians (n*3, nv) with rows [normal, t1, t2] per foot: each
    foot sphere against the nearest point of the terrain, which may be a riser or an edge."""
    bodies = np.array(sim.foot_body_ids)
    centers = dyn.frames.point(bodies, sim.foot_offset)
    distances, normals = jax.vmap(sim.terrain.distance)(centers)
    frames = jax.vmap(terrain_lib.contact_frame)(normals)
    gaps = distances - sim.foot_radius
    jacp, _ = point_jacobians(sim.tree, dyn.frames, bodies, centers - sim.foot_radius * normals)  # (n, 3, nv)
    jac = jnp.einsum("fab,fbv->fav", frames, jacp)
    return gaps, jac.reshape(-1, jac.shape[-1])


def step(
    sim: Sim, state: SimState, joint_target: jax.Array, sharpness: jax.Array | float = DEFAULT_SHARPNESS
) -> tuple[SimState, StepInfo]:
    """Advance one step of ``sim.dt`` with PD control toward ``joint_target``.

    ``sharpness`` (1/m) sets the ``smooth`` model's sigmoid and may change between calls
    without recompiling; the other models ignore it.
    """
    _check_sharpness(sharpness)
    return _step(sim, state, joint_target, sharpness)


# Reverse mode through a scan of steps would otherwise keep every intermediate of every step
# (mass matrices, Jacobians, solver state) and stream it back from memory; recomputing a step
# from its inputs during the backward pass costs less than that traffic. Measured on the 2-core
# CPU (interleaved A/B): gradient/forward 0.14-0.16 -> 0.19-0.21, SHAC ~20 % more env steps/s,
# half the peak memory. Three small results are kept instead of recomputed, because they are
# the expensive ones to redo: the Cholesky factor of M, M⁻¹[τ - bias, Jᵀ] (~0.5k floats per
# step and environment), and the contact solution, whose implicit derivative then needs none
# of the solver's sweeps (with the Plücker-form Jacobians of ``dynamics``: gradient/forward 0.19 -> 0.27 in
# ``smoothloco bench sim``). Forward-only runs are unaffected: the checkpoint only changes how a
# derivative is computed.
_KEPT_FOR_REVERSE = jax.checkpoint_policies.save_only_these_names(SPD_FACTOR, SPD_SOLUTION, CONTACT_IMPULSE)


@partial(jax.checkpoint, policy=_KEPT_FOR_REVERSE)
def _step(
    sim: Sim, state: SimState, joint_target: jax.Array, sharpness: jax.Array | float
) -> tuple[SimState, StepInfo]:
    h = sim.dt
    q_mid = integrate_positions(state.q, state.v, 0.5 * h)
    dyn = dynamics(sim.tree, q_mid, state.v)
    torque = pd_torque(sim, q_mid, state.v, joint_target)
    passive, passive_damping = joint_passive(sim, q_mid[FREE_QPOS:], state.v[FREE_DOF:])
    free_base = jnp.zeros(FREE_DOF, torque.dtype)
    generalized_force = jnp.concatenate([free_base, torque + passive]) - dyn.bias
    # The dissipative passive forces taken implicitly (module docstring): M + hK for M throughout.
    mass_matrix = dyn.mass_matrix + jnp.diag(h * jnp.concatenate([free_base, passive_damping]))

    gap, jac = _foot_contacts(sim, dyn)
    # One factorisation of M + hK for both right-hand sides: the free acceleration and (M + hK)⁻¹Jᵀ.
    solved = spd_solve(mass_matrix, jnp.concatenate([generalized_force[:, None], jac.T], axis=1))
    v_free = state.v + h * solved[:, 0]
    minv_jt = solved[:, 1:]
    free_contact_velocity = jac @ v_free

    delassus = jac @ minv_jt
    if sim.contact.model == "soft":
        weight = (gap < 0).astype(gap.dtype)
        velocity = (jac @ state.v).reshape(-1, 3)
        impulse = penalty_impulses(sim.contact, gap, velocity, delassus, free_contact_velocity, sim.friction, h)
    else:
        weight = contact_weights(sim.contact, gap, jnp.asarray(sharpness, gap.dtype))
        impulse = gauss_seidel(delassus, free_contact_velocity, weight, sim.friction, sim.contact.iterations)

    v_new = v_free + minv_jt @ impulse.reshape(-1)
    q_new = integrate_positions(q_mid, v_new, 0.5 * h)
    finite = jnp.all(jnp.isfinite(q_new)) & jnp.all(jnp.isfinite(v_new))
    info = StepInfo(
        gap=gap,
        weight=weight,
        impulse=impulse,
        foot_velocity=(jac @ v_new).reshape(-1, 3),
        torque=torque,
        power=jnp.sum(jnp.abs(torque * 0.5 * (state.v[FREE_DOF:] + v_new[FREE_DOF:]))),
        knee_height=_heights_above_terrain(sim, dyn.frames.xpos[np.array(sim.knee_body_ids, int)]),
        finite=finite,
    )
    return SimState(q=q_new, v=v_new), info


def _check_sharpness(sharpness: jax.Array | float) -> None:
    """Reject a concrete non-positive sharpness; traced values are the caller's to schedule."""
    if isinstance(sharpness, jax.core.Tracer):
        return
    if not np.all(np.asarray(sharpness) > 0):
        raise ValueError(f"contact sharpness s must be > 0 (1/m), got {sharpness}")


def rollout(
    sim: Sim, state: SimState, joint_targets: jax.Array, sharpness: jax.Array | float = DEFAULT_SHARPNESS
) -> tuple[SimState, tuple[SimState, StepInfo]]:
    """Scan ``step`` over a (T, n_joints) sequence of targets; returns the final state and the trajectory."""

    def body(s: SimState, target: jax.Array) -> tuple[SimState, tuple[SimState, StepInfo]]:
        s, info = step(sim, s, target, sharpness)
        return s, (s, info)

    return jax.lax.scan(body, state, joint_targets)


def initial_state(robot: RobotSpec, dtype=jnp.float32) -> SimState:
    """Standing pose slightly above the ground, at rest."""
    q = jnp.asarray(robot.init_qpos(), dtype)
    return SimState(q=q, v=jnp.zeros(q.shape[0] - 1, dtype))


def check_state(state: SimState) -> None:
    """Raise ``ValueError`` for a concrete state with non-finite or malformed entries."""
    q, v = np.asarray(state.q), np.asarray(state.v)
    if q.shape[-1] != v.shape[-1] + 1:
        raise ValueError(f"state q has {q.shape[-1]} entries and v {v.shape[-1]}; expected nq = nv + 1 (free base)")
    if not (np.all(np.isfinite(q)) and np.all(np.isfinite(v))):
        raise ValueError("state contains NaN or infinite values")
