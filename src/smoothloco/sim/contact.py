"""Foot contact models behind one interface: ``hard``, ``smooth`` and ``soft``.

All three map foot gaps, the contact-space Delassus matrix and the free contact velocity to
contact-frame impulses (normal, tangent1, tangent2 per foot) for one time step.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial
from typing import Literal

import jax
import jax.numpy as jnp
from jax.ad_checkpoint import checkpoint_name

from smoothloco.sim.linalg import inv3

ContactModel = Literal["hard", "smooth", "soft"]
CONTACT_MODELS: tuple[str, ...] = ("hard", "smooth", "soft")
CONTACT_IMPULSE = "contact_impulse"  # checkpoint name of the solver's solution
DEFAULT_SHARPNESS = 300.0  # 1/m, smooth contact: a resting foot sinks ~14 mm (~6 mm at 1000)


@dataclass(frozen=True)
class ContactConfig:
    """Static contact settings (changing them recompiles; sharpness and friction do not)."""

    model: str = "smooth"
    iterations: int = 8  # fixed Gauss-Seidel sweeps, so reverse-mode differentiation works
    activation_band: float = 0.05  # m; smooth: feet higher than this above ground take no part
    soft_stiffness: float = 2.0e4  # N/m, dFlex-style penalty k_e
    soft_damping: float = 2.0e2  # N·s/m, k_d

    def __post_init__(self) -> None:
        if self.model not in CONTACT_MODELS:
            raise ValueError(f"unknown contact model {self.model!r}; accepted: {', '.join(CONTACT_MODELS)}")
        if self.iterations < 1:
            raise ValueError(f"contact iterations must be >= 1, got {self.iterations}")
        for name in ("activation_band", "soft_stiffness", "soft_damping"):
            if not getattr(self, name) > 0:
                raise ValueError(f"contact {name} must be > 0, got {getattr(self, name)}")


def _safe_norm(x: jax.Array, axis: int = -1) -> jax.Array:
    return jnp.sqrt(jnp.sum(x * x, axis=axis) + 1e-12)


def project_to_cone(impulse: jax.Array, friction: jax.Array) -> jax.Array:
    """Zero a non-compressive impulse; scale its tangential part onto the Coulomb disk μ·P_n."""
    normal, tangent = impulse[..., :1], impulse[..., 1:]
    normal = jnp.maximum(normal, 0.0)
    limit = friction * normal
    scale = jnp.minimum(1.0, limit / _safe_norm(tangent)[..., None])
    return jnp.concatenate([normal, tangent * scale], axis=-1)


def contact_weights(config: ContactConfig, gap: jax.Array, sharpness: jax.Array) -> jax.Array:
    """How much each foot takes part in contact: 0/1 for ``hard``, a sigmoid of the gap for ``smooth``."""
    if config.model == "hard":
        return (gap <= 0.0).astype(gap.dtype)
    weight = jax.nn.sigmoid(-sharpness * gap)
    return jnp.where(gap < config.activation_band, weight, 0.0)


def _solve_foot(block: jax.Array, block_inv: jax.Array, residual: jax.Array, friction: jax.Array) -> jax.Array:
    """One foot's impulse given the velocity ``residual`` that the other feet leave it.

    A sticking foot takes the exact 3x3 block solution. A sliding one (block solution outside
    the friction cone) gets friction μ·P_n against its slip and the normal impulse that, with
    that friction, stops the normal motion. Clipping the block solution instead would keep the
    normal impulse that the infeasible friction inflated (launching sliding bodies) and point
    friction along G⁻¹·slip rather than against the slip. The normal row is solved jointly with
    its friction (not by alternating), which cannot amplify when friction couples strongly into
    the normal direction; the effective normal stiffness is floored at half of G_nn, where
    exact Coulomb friction has no solution (Painlevé).
    """
    stick = -block_inv @ residual
    sticking = (stick[0] > 0.0) & (_safe_norm(stick[1:]) <= friction * stick[0])
    normal = jnp.maximum(stick[0], 0.0)
    for _ in range(2):  # refine the slip direction once with the sliding normal impulse
        slip = residual[1:] + block[1:, 0] * normal
        direction = slip / _safe_norm(slip)
        effective = jnp.maximum(block[0, 0] - friction * block[0, 1:] @ direction, 0.5 * block[0, 0])
        normal = jnp.maximum(0.0, -residual[0] / effective)
    slide = jnp.concatenate([normal[None], -friction * normal * direction])
    return jnp.where(sticking, stick, slide)


def _blocks(delassus: jax.Array, n: int) -> tuple[jax.Array, jax.Array]:
    """The Delassus matrix as (n, n, 3, 3) foot-pair blocks G_ij, and its (n, 3, 3) diagonal."""
    blocks = delassus.reshape(n, 3, n, 3).transpose(0, 2, 1, 3)
    return blocks, blocks[jnp.arange(n), jnp.arange(n)]


def _foot_residuals(
    impulse: jax.Array, delassus: jax.Array, free_velocity: jax.Array, weight: jax.Array
) -> tuple[jax.Array, jax.Array, jax.Array]:
    """Blocks G_ij, diagonal blocks G_ii, and the (n, 3) velocity each foot has when the other
    feet apply their weighted impulses."""
    n = weight.shape[0]
    blocks, diag = _blocks(delassus, n)
    applied = weight[:, None] * impulse
    others = jnp.einsum("ijab,jb->ia", blocks, applied) - jnp.einsum("iab,ib->ia", diag, applied)
    return blocks, diag, free_velocity.reshape(n, 3) + others


_solve_feet = jax.vmap(_solve_foot, in_axes=(0, 0, 0, None))


def _fixed_point_map(
    impulse: jax.Array, delassus: jax.Array, free_velocity: jax.Array, weight: jax.Array, friction: jax.Array
) -> jax.Array:
    """Every foot's own solution given the others' (weighted) impulses: one Jacobi sweep. A
    converged Gauss-Seidel solution is its fixed point."""
    _, diag, residual = _foot_residuals(impulse, delassus, free_velocity, weight)
    return _solve_feet(diag, inv3(diag), residual, friction)


@partial(jax.custom_jvp, nondiff_argnums=(4,))
def _unweighted_impulses(
    delassus: jax.Array, free_velocity: jax.Array, weight: jax.Array, friction: jax.Array, iterations: int
) -> jax.Array:
    """(n, 3) impulse that would stop each foot given the others', by Gauss-Seidel sweeps."""
    n = weight.shape[0]
    blocks, diag = _blocks(delassus, n)
    diag_inv = inv3(diag)
    velocity = free_velocity.reshape(n, 3)

    def solve_foot(i: jax.Array, impulse: jax.Array) -> jax.Array:
        applied = weight[:, None] * impulse
        others = jnp.einsum("jab,jb->a", blocks[i], applied) - diag[i] @ applied[i]
        return impulse.at[i].set(_solve_foot(diag[i], diag_inv[i], velocity[i] + others, friction))

    # Feet in sequence (Gauss-Seidel), sweeps repeated a fixed number of times; one loop body
    # keeps the compiled program small.
    impulse = _solve_feet(diag, diag_inv, velocity, friction)
    return jax.lax.fori_loop(0, iterations * n, lambda k, p: solve_foot(k % n, p), impulse)


@_unweighted_impulses.defjvp
def _implicit_tangent(iterations: int, primals: tuple, tangents: tuple) -> tuple[jax.Array, jax.Array]:
    """Derivative of the solution p = Φ(p, θ) by the implicit function theorem:
    (I - ∂Φ/∂p) ṗ = ∂Φ/∂θ θ̇, one 3n x 3n linear solve instead of differentiating every sweep.

    It is exact for a converged solve and ignores the remaining error of a truncated one; in
    exchange a gradient needs only the solution (saved under ``CONTACT_IMPULSE``), not the
    intermediates of every sweep. ∂Φ/∂p is block-sparse: foot i's 3x3 solver Jacobian times its
    coupling G_ij w_j to foot j ≠ i.
    """
    delassus, free_velocity, weight, friction = primals
    impulse = checkpoint_name(_unweighted_impulses(*primals, iterations), CONTACT_IMPULSE)
    explicit = jax.jvp(lambda *theta: _fixed_point_map(impulse, *theta), primals, tangents)[1]
    n = weight.shape[0]
    blocks, diag, residual = _foot_residuals(impulse, delassus, free_velocity, weight)
    foot_jacobian = jax.vmap(jax.jacfwd(_solve_foot, argnums=2), in_axes=(0, 0, 0, None))(
        diag, inv3(diag), residual, friction
    )  # (n, 3, 3) ∂Φ_i/∂r_i
    coupling = blocks * (weight[None, :] * (1.0 - jnp.eye(n, dtype=weight.dtype)))[..., None, None]
    sensitivity = jnp.einsum("iab,ijbc->iajc", foot_jacobian, coupling).reshape(3 * n, 3 * n)
    system = jnp.eye(3 * n, dtype=impulse.dtype) - sensitivity
    return impulse, jnp.linalg.solve(system, explicit.reshape(-1)).reshape(n, 3)


def gauss_seidel(
    delassus: jax.Array, free_velocity: jax.Array, weight: jax.Array, friction: jax.Array, iterations: int
) -> jax.Array:
    """Projected block Gauss-Seidel over feet with a fixed number of sweeps.

    Each foot solves its own block given the other feet's weighted impulses; the applied
    impulse is the weighted one, so a foot with weight w_i pushes back with w_i times the
    impulse that would stop it. Derivatives are implicit (see ``_implicit_tangent``).

    Args:
      delassus: (n*3, n*3) contact-space inverse inertia J M^-1 J^T.
      free_velocity: (n*3,) contact-space velocity before contact.
      weight: (n,) participation of each foot.
      friction: Coulomb coefficient.
    Returns:
      (n, 3) applied impulses in each foot's contact frame.
    """
    delassus, free_velocity, weight = jnp.asarray(delassus), jnp.asarray(free_velocity), jnp.asarray(weight)
    friction = jnp.asarray(friction, delassus.dtype)
    return weight[:, None] * _unweighted_impulses(delassus, free_velocity, weight, friction, iterations)


def penalty_impulses(
    config: ContactConfig,
    gap: jax.Array,
    velocity: jax.Array,
    delassus: jax.Array,
    free_velocity: jax.Array,
    friction: jax.Array,
    dt: float,
) -> jax.Array:
    """Soft contact: explicit spring-damper normal impulse, friction that stops sliding capped at μ·P_n.

    The normal force f_n = -k_e·g - k_d·min(ġ, 0) uses the state at the step start (explicit, so
    it needs small steps at high stiffness). Friction is solved semi-implicitly per foot: the
    tangential impulse that would stop the foot's sliding, given the normal impulse, projected
    onto the Coulomb disk; a purely viscous friction would need gains that are unstable at any
    practical step.

    Args:
      gap: (n,) signed foot heights; velocity: (n, 3) contact-frame foot velocities.
      delassus: (n*3, n*3); free_velocity: (n*3,) contact-frame velocity before contact.
    """
    n = gap.shape[0]
    normal_velocity = velocity[:, 0]
    force_n = -config.soft_stiffness * gap - config.soft_damping * jnp.minimum(normal_velocity, 0.0)
    impulse_n = dt * jnp.where(gap < 0.0, jnp.maximum(force_n, 0.0), 0.0)
    _, blocks = _blocks(delassus, n)  # (n, 3, 3) diagonal blocks
    tangent_velocity = free_velocity.reshape(n, 3)[:, 1:] + blocks[:, 1:, 0] * impulse_n[:, None]
    impulse_t = -jnp.linalg.solve(blocks[:, 1:, 1:], tangent_velocity[..., None])[..., 0]
    return project_to_cone(jnp.concatenate([impulse_n[:, None], impulse_t], axis=-1), friction)
