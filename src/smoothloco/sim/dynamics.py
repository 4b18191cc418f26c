"""Rigid-body dynamics of a floating-base tree of hinge joints: poses, point Jacobians, the
mass matrix and the bias forces, in MuJoCo's coordinates (free joint: world-frame linear
velocity, body-frame angular velocity).

Why not MJX's ``kinematics``/``crb``/``rne``: they serve every MuJoCo model (all joint types,
sparse trees, mocap bodies), and their reverse pass dominated both the cost and the compile
time of SHAC's gradient window. A quadruped is a 13-body tree of one free joint and
hinges, so the whole computation fits in a few dense ``(bodies, 3, dofs)`` arrays: poses level
by level down the tree, Jacobians from joint axes, ``M = Σ m JᵥᵀJᵥ + JωᵀIJω``, and the bias
forces from the time derivative of the Jacobians. Checked against MuJoCo (C) in
``tests/test_dynamics.py``.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import mujoco
import numpy as np
from flax import struct

from smoothloco.robot.spec import FREE_BODY, check_tree
from smoothloco.sim.rotation import quat_to_mat, skew


@struct.dataclass
class RigidTree:
    """The inertial and kinematic parameters of a MuJoCo model, indexed by MuJoCo body id (0 is
    the world). Arrays are pytree leaves, so domain randomization can batch, e.g., ``body_mass``."""

    body_pos: jax.Array  # (nbody, 3) body frame in its parent's frame
    body_quat: jax.Array  # (nbody, 4)
    body_ipos: jax.Array  # (nbody, 3) centre of mass in the body frame
    body_iquat: jax.Array  # (nbody, 4) principal axes of inertia in the body frame
    body_mass: jax.Array  # (nbody,)
    body_inertia: jax.Array  # (nbody, 3) principal moments
    hinge_axis: jax.Array  # (nbody, 3) the body's hinge axis in its frame (unused for world and base)
    hinge_pos: jax.Array  # (nbody, 3) the hinge anchor in the body frame
    dof_armature: jax.Array  # (nv,)
    gravity: jax.Array  # (3,)
    parent: tuple[int, ...] = struct.field(pytree_node=False)
    levels: tuple[tuple[int, ...], ...] = struct.field(pytree_node=False)  # hinge bodies by depth
    hinge_qpos: tuple[int, ...] = struct.field(pytree_node=False)  # qpos index of each body's hinge
    dof_body: tuple[int, ...] = struct.field(pytree_node=False)  # body each dof moves


@struct.dataclass
class Frames:
    """World poses of the bodies and world axes and anchors of the dofs at one configuration."""

    xpos: jax.Array  # (nbody, 3)
    xmat: jax.Array  # (nbody, 3, 3)
    dof_axis: jax.Array  # (nv, 3)
    dof_anchor: jax.Array  # (nv, 3) a point on each rotational dof's axis (unused for translations)

    def point(self, bodies: np.ndarray, local: jax.Array) -> jax.Array:
        """World positions (n, 3) of points given in the frames of ``bodies`` (n,)."""
        return _body_points(self.xpos, self.xmat, bodies, local)


def _body_points(xpos: jax.Array, xmat: jax.Array, bodies: np.ndarray, local: jax.Array) -> jax.Array:
    return xpos[bodies] + jnp.einsum("bij,bj->bi", xmat[bodies], local)


N_FREE_DOF = 6


def rigid_tree(model: mujoco.MjModel) -> RigidTree:
    """The tree of ``model``; raises ``RobotSpecError`` (a ``ValueError``) unless body 1 is a
    free-floating base and every other body hangs from it by exactly one hinge."""
    check_tree(model)
    hinge_axis = np.zeros((model.nbody, 3))
    hinge_pos = np.zeros((model.nbody, 3))
    hinge_qpos = [-1] * model.nbody
    depth = [0] * model.nbody
    for body in range(FREE_BODY + 1, model.nbody):
        joint = model.body_jntadr[body]
        hinge_axis[body], hinge_pos[body] = model.jnt_axis[joint], model.jnt_pos[joint]
        hinge_qpos[body] = int(model.jnt_qposadr[joint])
        depth[body] = depth[model.body_parentid[body]] + 1
    hinged = range(FREE_BODY + 1, model.nbody)
    levels = tuple(tuple(b for b in hinged if depth[b] == k) for k in range(1, max(depth) + 1))
    return RigidTree(
        body_pos=jnp.asarray(model.body_pos, jnp.float32),
        body_quat=jnp.asarray(model.body_quat, jnp.float32),
        body_ipos=jnp.asarray(model.body_ipos, jnp.float32),
        body_iquat=jnp.asarray(model.body_iquat, jnp.float32),
        body_mass=jnp.asarray(model.body_mass, jnp.float32),
        body_inertia=jnp.asarray(model.body_inertia, jnp.float32),
        hinge_axis=jnp.asarray(hinge_axis, jnp.float32),
        hinge_pos=jnp.asarray(hinge_pos, jnp.float32),
        dof_armature=jnp.asarray(model.dof_armature, jnp.float32),
        gravity=jnp.asarray(model.opt.gravity, jnp.float32),
        parent=tuple(int(p) for p in model.body_parentid),
        levels=levels,
        hinge_qpos=tuple(hinge_qpos),
        dof_body=tuple(int(b) for b in model.dof_bodyid),
    )


def _axis_angle_to_mat(axis: jax.Array, angle: jax.Array) -> jax.Array:
    """Rodrigues' formula for unit ``axis`` (..., 3) and ``angle`` (...)."""
    k = skew(axis)
    s, c = jnp.sin(angle)[..., None, None], jnp.cos(angle)[..., None, None]
    return jnp.eye(3, dtype=axis.dtype) + s * k + (1 - c) * (k @ k)


def frames(tree: RigidTree, q: jax.Array) -> Frames:
    """Forward kinematics, one vectorized step per level of the tree."""
    nbody = len(tree.parent)
    xpos = jnp.zeros((nbody, 3), q.dtype).at[FREE_BODY].set(q[:3])
    xmat = jnp.tile(jnp.eye(3, dtype=q.dtype), (nbody, 1, 1)).at[FREE_BODY].set(quat_to_mat(q[3:7]))
    for level in tree.levels:
        ids = np.array(level)
        parents = np.array([tree.parent[b] for b in level])
        rot = xmat[parents] @ quat_to_mat(tree.body_quat[ids])
        pos = _body_points(xpos, xmat, parents, tree.body_pos[ids])
        # Rotate about the hinge axis through the hinge anchor (MuJoCo's hinge kinematics).
        anchor = pos + jnp.einsum("bij,bj->bi", rot, tree.hinge_pos[ids])
        rot = rot @ _axis_angle_to_mat(tree.hinge_axis[ids], q[np.array([tree.hinge_qpos[b] for b in level])])
        pos = anchor - jnp.einsum("bij,bj->bi", rot, tree.hinge_pos[ids])
        xpos, xmat = xpos.at[ids].set(pos), xmat.at[ids].set(rot)
    hinge_bodies = np.array(tree.dof_body[N_FREE_DOF:], int)
    hinge_axis = jnp.einsum("bij,bj->bi", xmat[hinge_bodies], tree.hinge_axis[hinge_bodies])
    hinge_anchor = _body_points(xpos, xmat, hinge_bodies, tree.hinge_pos[hinge_bodies])
    base_pos = jnp.broadcast_to(xpos[FREE_BODY], (3, 3))
    dof_axis = jnp.concatenate([jnp.eye(3, dtype=q.dtype), xmat[FREE_BODY].T, hinge_axis])
    dof_anchor = jnp.concatenate([base_pos, base_pos, hinge_anchor])
    return Frames(xpos=xpos, xmat=xmat, dof_axis=dof_axis, dof_anchor=dof_anchor)


def _moves(tree: RigidTree) -> np.ndarray:
    """(nbody, nv) whether each dof moves each body (the dof's body is the body or an ancestor)."""
    moves = np.zeros((len(tree.parent), len(tree.dof_body)), bool)
    for body in range(1, len(tree.parent)):
        ancestor = body
        while ancestor != 0:
            moves[body] |= np.array(tree.dof_body) == ancestor
            ancestor = tree.parent[ancestor]
    return moves


def _rotational(tree: RigidTree) -> np.ndarray:
    """(nv,) whether each dof rotates; the free joint's three translations come first."""
    return np.arange(len(tree.dof_body)) >= 3


def _column_moments(tree: RigidTree, f: Frames, origin: jax.Array) -> tuple[jax.Array, jax.Array]:
    """Each dof's motion as a Plücker pair about ``origin``: rotation axis ω_k (zero for a
    translation) and moment μ_k, so that a point p (relative to ``origin``) fixed to a body the
    dof moves gets velocity ω_k × p + μ_k per unit dof velocity. For a rotation about a_k through
    o_k that is a_k × (p - o_k), so μ_k = o_k × a_k; for a translation along a_k, μ_k = a_k."""
    rotational = jnp.asarray(_rotational(tree), origin.dtype)[:, None]
    axis = rotational * f.dof_axis
    moment = jnp.where(rotational > 0, jnp.cross(f.dof_anchor - origin, f.dof_axis), f.dof_axis)
    return axis, moment


def point_jacobians(tree: RigidTree, f: Frames, bodies: np.ndarray, points: jax.Array) -> tuple[jax.Array, jax.Array]:
    """Linear (n, 3, nv) and angular (n, 3, nv) Jacobians of world ``points`` (n, 3) fixed to ``bodies``.

    Column k at p is ω_k × p + μ_k (``_column_moments``), computed as one product with the skew
    matrices [ω_k]× instead of a cross product per (point, dof) pair: same numbers, and a much
    cheaper reverse pass. Positions are taken relative to the base, so nothing large cancels
    when the robot is far from the world origin.
    """
    origin = f.xpos[FREE_BODY]
    axis, moment = _column_moments(tree, f, origin)
    moves = jnp.asarray(_moves(tree)[np.asarray(bodies)], points.dtype)[:, None, :]
    linear = jnp.einsum("kij,nj->nik", skew(axis), points - origin) + moment.T
    return moves * linear, moves * jnp.broadcast_to(axis.T, linear.shape)


@struct.dataclass
class Dynamics:
    """Everything the time step needs at one configuration."""

    frames: Frames
    mass_matrix: jax.Array  # (nv, nv)
    bias: jax.Array  # (nv,) Coriolis, centrifugal and gravity forces: M v̇ + bias = τ


def _velocity_product_accelerations(
    tree: RigidTree, f: Frames, bodies: np.ndarray, com: jax.Array, lin_vel: jax.Array, ang_vel: jax.Array, v: jax.Array
) -> tuple[jax.Array, jax.Array]:
    """J̇v at the centres of mass ``com`` of ``bodies``: their linear and angular accelerations
    when every generalized acceleration is zero, each (n, 3).

    With Jacobian columns ω_k × p + μ_k (``_column_moments``), a body's point p gets
    Σ_k v_k (ω̇_k × p + ω_k × ṗ + μ̇_k) = α × p + ω × ṗ + Σ_k v_k μ̇_k, where α = Σ_k v_k ω̇_k and
    ω = Σ_k v_k ω_k is the body's angular velocity. A rotational dof's axis a_k and anchor o_k
    are carried by the body B(k) it moves: ȧ_k = ω_B(k) × a_k, ȯ_k = velocity of B(k) at o_k,
    μ̇_k = ȯ_k × a_k + o_k × ȧ_k. Translational dofs (world-frame base velocity) have constant
    columns. Everything is (bodies or dofs, 3): no per-(body, dof) cross products.
    """
    origin = f.xpos[FREE_BODY]  # positions relative to the base, as in ``point_jacobians``
    com, anchor = com - origin, f.dof_anchor - origin
    row = {int(b): i for i, b in enumerate(bodies)}
    owner = np.array([row[b] for b in tree.dof_body])  # row of B(k) for each dof k
    axis_rate = jnp.cross(ang_vel[owner], f.dof_axis)  # (nv, 3) ȧ_k
    anchor_vel = lin_vel[owner] + jnp.cross(ang_vel[owner], anchor - com[owner])  # (nv, 3) ȯ_k
    moment_rate = jnp.cross(anchor_vel, f.dof_axis) + jnp.cross(anchor, axis_rate)  # (nv, 3) μ̇_k
    rate_weight = jnp.asarray(_moves(tree)[bodies] & _rotational(tree), v.dtype) * v  # (n, nv)
    ang_acc = rate_weight @ axis_rate
    return jnp.cross(ang_acc, com) + jnp.cross(ang_vel, lin_vel) + rate_weight @ moment_rate, ang_acc


def dynamics(tree: RigidTree, q: jax.Array, v: jax.Array) -> Dynamics:
    """Mass matrix and bias forces at (q, v).

    The bias is Σ_b Jᵥᵀ m (J̇ᵥ v - g) + Jωᵀ (I J̇ω v + ω × I ω) over the bodies' centres of mass.
    """
    bodies = np.arange(1, len(tree.parent))
    f = frames(tree, q)
    com = f.point(bodies, tree.body_ipos[bodies])
    jac_lin, jac_ang = point_jacobians(tree, f, bodies, com)
    lin_vel, ang_vel = jac_lin @ v, jac_ang @ v
    lin_acc, ang_acc = _velocity_product_accelerations(tree, f, bodies, com, lin_vel, ang_vel, v)
    inertia_axes = f.xmat[bodies] @ quat_to_mat(tree.body_iquat[bodies])
    inertia = jnp.einsum("bij,bj,bkj->bik", inertia_axes, tree.body_inertia[bodies], inertia_axes)  # world frame
    mass = tree.body_mass[bodies]
    mass_matrix = (
        jnp.einsum("b,bin,bim->nm", mass, jac_lin, jac_lin)
        + jnp.einsum("bin,bij,bjm->nm", jac_ang, inertia, jac_ang)
        + jnp.diag(tree.dof_armature)
    )
    momentum = jnp.einsum("bij,bj->bi", inertia, ang_vel)
    momentum_rate = jnp.einsum("bij,bj->bi", inertia, ang_acc) + jnp.cross(ang_vel, momentum)
    force = mass[:, None] * (lin_acc - tree.gravity)
    bias = jnp.einsum("bin,bi->n", jac_lin, force) + jnp.einsum("bin,bi->n", jac_ang, momentum_rate)
    return Dynamics(frames=f, mass_matrix=mass_matrix, bias=bias)
