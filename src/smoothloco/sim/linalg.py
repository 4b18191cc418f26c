"""Small dense linear algebra of the time step, written for cheap reverse-mode derivatives.

On a CPU a batched LAPACK call runs once per matrix of the batch, and JAX differentiates a
factorisation through more such calls. The time step's matrices are tiny (18x18 mass matrix,
3x3 contact blocks), so both functions here avoid that: one factorisation reused by the reverse
pass, and closed-form 3x3 inverses that compile to elementwise code.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from jax.scipy.linalg import cho_factor, cho_solve


@jax.custom_vjp
def spd_solve(matrix: jax.Array, rhs: jax.Array) -> jax.Array:
    """``matrix⁻¹ rhs`` for a symmetric positive-definite ``matrix`` (n, n) and ``rhs`` (n, k).

    The reverse pass reuses the forward Cholesky factor: rhs̄ = matrix⁻¹ x̄ and
    matrix̄ = -sym(rhs̄ xᵀ), one more pair of triangular solves, where JAX's own rules would
    differentiate the factorisation itself. Only a symmetric ``matrix`` is meaningful (the
    factorisation reads its lower triangle), so the matrix cotangent is symmetric too.
    """
    return cho_solve(cho_factor(matrix), rhs)


def _spd_solve_forward(matrix: jax.Array, rhs: jax.Array) -> tuple[jax.Array, tuple]:
    factor = cho_factor(matrix)
    solution = cho_solve(factor, rhs)
    return solution, (factor, solution)


def _spd_solve_backward(residuals: tuple, solution_bar: jax.Array) -> tuple[jax.Array, jax.Array]:
    factor, solution = residuals
    rhs_bar = cho_solve(factor, solution_bar)
    outer = rhs_bar @ solution.T
    return -0.5 * (outer + outer.T), rhs_bar


spd_solve.defvjp(_spd_solve_forward, _spd_solve_backward)


def inv3(matrix: jax.Array) -> jax.Array:
    """Inverses of invertible (..., 3, 3) matrices: the adjugate (cross products of rows) over the determinant."""
    r0, r1, r2 = matrix[..., 0, :], matrix[..., 1, :], matrix[..., 2, :]
    adjugate = jnp.stack([jnp.cross(r1, r2), jnp.cross(r2, r0), jnp.cross(r0, r1)], axis=-1)
    determinant = jnp.sum(r0 * adjugate[..., 0], axis=-1)
    return adjugate / determinant[..., None, None]
