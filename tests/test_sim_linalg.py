"""The time step's small linear algebra: values against NumPy, derivatives against finite differences."""

import jax
import jax.numpy as jnp
import numpy as np
from jax.test_util import check_grads

from smoothloco.sim.linalg import inv3, spd_solve


def _spd(rng: np.random.Generator, n: int) -> np.ndarray:
    a = rng.normal(size=(n, n))
    return a @ a.T + n * np.eye(n)


def test_spd_solve_value_and_gradients():
    rng = np.random.default_rng(0)
    with jax.enable_x64(True):
        matrix, rhs = jnp.asarray(_spd(rng, 6)), jnp.asarray(rng.normal(size=(6, 3)))
        np.testing.assert_allclose(spd_solve(matrix, rhs), np.linalg.solve(matrix, rhs), rtol=1e-12)
        # Symmetric perturbations only: the factorisation reads one triangle of the matrix.
        symmetric_solve = lambda m, b: spd_solve(0.5 * (m + m.T), b)  # noqa: E731
        check_grads(symmetric_solve, (matrix, rhs), order=1, modes=["fwd", "rev"])
        # The same reverse pass as JAX's own rules for a general solve.
        cotangent = jnp.asarray(rng.normal(size=(6, 3)))
        ours = jax.vjp(symmetric_solve, matrix, rhs)[1](cotangent)
        reference = jax.vjp(lambda m, b: jnp.linalg.solve(0.5 * (m + m.T), b), matrix, rhs)[1](cotangent)
        for a, b in zip(ours, reference):
            np.testing.assert_allclose(a, b, rtol=1e-10, atol=1e-12)


def test_inv3_value_and_gradients():
    rng = np.random.default_rng(1)
    matrices = rng.normal(size=(5, 3, 3)) + 3 * np.eye(3)
    with jax.enable_x64(True):
        np.testing.assert_allclose(inv3(jnp.asarray(matrices)), np.linalg.inv(matrices), rtol=1e-10)
        check_grads(inv3, (jnp.asarray(matrices),), order=1, modes=["fwd", "rev"])
