"""Small dense linear algebra of the time step, written for cheap reverse-mode derivatives.

On a CPU a batched LAPACK call runs once per matrix of the batch, and JAX differentiates a
factorisation through more such calls. The time step's matrices are tiny (18x18 mass matrix,
3x3 contact blocks), so both functions here avoid that: one factorisation reused by the reverse
pass, and closed-form 3x3 inverses that compile to elementwise code.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from jax.ad_checkpoint import checkpoint_name
from jax.scipy.linalg import cho_factor, cho_solve

# Checkpoint names of the residuals a derivative of ``spd_solve`` needs, so that a
# ``jax.checkpoint`` policy can keep them rather than refactorize during the backward pass.
SPD_FACTOR = "spd_factor"
SPD_SOLUTION = "spd_solution"


@jax.custom_jvp
def spd_solve(matrix: jax.Array, rhs: jax.Array) -> jax.Array:
    """``matrix⁻¹ rhs`` for a symmetric positive-definite ``matrix`` (n, n) and ``rhs`` (n, k).

    The derivative reuses the forward Cholesky factor, d(matrix⁻¹ rhs) = matrix⁻¹ (d rhs -
    d matrix · x), and JAX transposes that into the reverse pass (rhs̄ = matrix⁻¹ x̄,
    matrix̄ = -rhs̄ xᵀ): one more pair of triangular solves, where JAX's own rules would also
    differentiate the factorisation. Only symmetric matrices and perturbations are meaningful
    (the factorisation reads one triangle).
    """
    return cho_solve(cho_factor(matrix), rhs)


@spd_solve.defjvp
def _spd_solve_jvp(primals: tuple, tangents: tuple) -> tuple[jax.Array, jax.Array]:
    (matrix, rhs), (matrix_dot, rhs_dot) = primals, tangents
    factor, lower = cho_factor(matrix)
    factor = checkpoint_name(factor, SPD_FACTOR)
    solution = checkpoint_name(cho_solve((factor, lower), rhs), SPD_SOLUTION)
    return solution, cho_solve((factor, lower), rhs_dot - matrix_dot @ solution)


def inv3(matrix: jax.Array) -> jax.Array:
    """Inverses of invertible (..., 3, 3) matrices: the adjugate (cross products of rows) over the determinant."""
    r0, r1, r2 = matrix[..., 0, :], matrix[..., 1, :], matrix[..., 2, :]
    adjugate = jnp.stack([jnp.cross(r1, r2), jnp.cross(r2, r0), jnp.cross(r0, r1)], axis=-1)
    determinant = jnp.sum(r0 * adjugate[..., 0], axis=-1)
    return adjugate / determinant[..., None, None]
