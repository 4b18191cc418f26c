"""The Gauss-Seidel contact solver: a fixed point, and implicit derivatives against finite differences."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.test_util import check_grads

from smoothloco.sim.contact import _fixed_point_map, _unweighted_impulses, gauss_seidel

FRICTION = 0.8
CONVERGED = 200  # sweeps; the implicit derivative is exact for a converged solve


def _problem() -> tuple[jax.Array, jax.Array, jax.Array]:
    """Four feet of a random 18-dof body: Delassus J M⁻¹ Jᵀ and free velocities into the ground.
    Feet 0 and 1 barely slip and stick; feet 2 and 3 slip fast and slide."""
    rng = np.random.default_rng(1)
    a = rng.normal(size=(18, 18))
    mass_matrix = a @ a.T + 18 * np.eye(18)
    jac = rng.normal(size=(12, 18))
    delassus = jac @ np.linalg.solve(mass_matrix, jac.T)
    velocity = np.array([[-0.61, -0.05, -0.05], [-0.53, 0.02, 0.03], [-0.43, 2.65, -0.73], [-0.57, 0.14, -1.06]])
    return jnp.asarray(delassus), jnp.asarray(velocity.reshape(-1)), jnp.asarray([1.0, 0.7, 0.9, 0.5])


def test_converged_solution_is_a_fixed_point_with_sticking_and_sliding_feet():
    with jax.enable_x64(True):
        delassus, velocity, weight = _problem()
        impulse = _unweighted_impulses(delassus, velocity, weight, jnp.asarray(FRICTION), CONVERGED)
        again = _fixed_point_map(impulse, delassus, velocity, weight, jnp.asarray(FRICTION))
        np.testing.assert_allclose(again, impulse, atol=1e-10)
        tangential, normal = np.linalg.norm(impulse[:, 1:], axis=1), np.asarray(impulse[:, 0])
        assert np.all(normal > 0.0)
        np.testing.assert_array_less(tangential[:2], 0.9 * FRICTION * normal[:2])  # sticking
        np.testing.assert_allclose(tangential[2:], FRICTION * normal[2:], rtol=1e-9)  # sliding


@pytest.mark.slow
def test_implicit_derivatives_match_finite_differences():
    """Forward and reverse mode, with respect to every input, against central differences of
    the converged solver (the problem is away from stick-slip switches)."""
    with jax.enable_x64(True):
        delassus, velocity, weight = _problem()
        solve = lambda g, u, w, mu: gauss_seidel(g, u, w, mu, CONVERGED)  # noqa: E731
        check_grads(solve, (delassus, velocity, weight, jnp.asarray(FRICTION)), order=1, modes=["fwd", "rev"], eps=1e-6)


def test_implicit_derivative_of_a_truncated_solve_is_close():
    """With the default 8 sweeps the derivative treats the result as converged; on this problem
    it stays within 1 % of the truncated solver's finite differences."""
    with jax.enable_x64(True):
        delassus, velocity, weight = _problem()
        direction = jnp.asarray(np.random.default_rng(2).normal(size=velocity.shape))
        along = lambda t: jnp.sum(gauss_seidel(delassus, velocity + t * direction, weight, FRICTION, 8) ** 2)  # noqa: E731
        analytic = float(jax.grad(along)(0.0))
        eps = 1e-6
        numeric = (float(along(eps)) - float(along(-eps))) / (2 * eps)
    print(f"8 sweeps: implicit {analytic:.6e}, central difference {numeric:.6e}")
    assert abs(analytic - numeric) < 0.01 * abs(numeric)
