"""Foot contact models behind one interface: ``hard``, ``smooth`` and ``soft``.

All three map foot gaps, the contact-space Delassus matrix and the free contact velocity to
contact-frame impulses (normal, tangent1, tangent2 per foot) for one time step.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import jax
import jax.numpy as jnp

from smoothloco.sim.linalg import inv3

ContactModel = Literal["hard", "smooth", "soft"]
CONTACT_MODELS: tuple[str, ...] = ("hard", "smooth", "soft")


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


def gauss_seidel(
    delassus: jax.Array, free_velocity: jax.Array, weight: jax.Array, friction: jax.Array, iterations: int
) -> jax.Array:
    """Projected block Gauss-Seidel over feet with a fixed number of sweeps.

    Each foot solves its own block given the other feet's weighted impulses; the applied
    impulse is the weighted one, so a foot with weight w_i pushes back with w_i times the
    impulse that would stop it.

    Args:
      delassus: (n*3, n*3) contact-space inverse inertia J M^-1 J^T.
      free_velocity: (n*3,) contact-space velocity before contact.
      weight: (n,) participation of each foot.
      friction: Coulomb coefficient.
    Returns:
      (n, 3) applied impulses in each foot's contact frame.
    """
    n = weight.shape[0]
    blocks = delassus.reshape(n, 3, n, 3).transpose(0, 2, 1, 3)  # [i, j] -> G_ij (3, 3)
    diag = blocks[jnp.arange(n), jnp.arange(n)]
    diag_inv = inv3(diag)
    velocity = free_velocity.reshape(n, 3)
    impulse = jax.vmap(_solve_foot, in_axes=(0, 0, 0, None))(diag, diag_inv, velocity, friction)

    def solve_foot(i: jax.Array, impulse: jax.Array) -> jax.Array:
        applied = weight[:, None] * impulse
        others = jnp.einsum("jab,jb->a", blocks[i], applied) - diag[i] @ applied[i]
        return impulse.at[i].set(_solve_foot(diag[i], diag_inv[i], velocity[i] + others, friction))

    # Feet in sequence (Gauss-Seidel), sweeps repeated a fixed number of times; one loop body
    # keeps the compiled program, and so the compile time of gradients, small.
    impulse = jax.lax.fori_loop(0, iterations * n, lambda k, p: solve_foot(k % n, p), impulse)
    return weight[:, None] * impulse


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
    blocks = delassus.reshape(n, 3, n, 3)[jnp.arange(n), :, jnp.arange(n), :]  # (n, 3, 3) diagonal blocks
    tangent_velocity = free_velocity.reshape(n, 3)[:, 1:] + blocks[:, 1:, 0] * impulse_n[:, None]
    impulse_t = -jnp.linalg.solve(blocks[:, 1:, 1:], tangent_velocity[..., None])[..., 0]
    return project_to_cone(jnp.concatenate([impulse_n[:, None], impulse_t], axis=-1), friction)
