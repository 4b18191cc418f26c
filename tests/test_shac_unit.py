"""SHAC pieces against hand-computed examples."""

import jax.numpy as jnp
import numpy as np
import optax
import pytest

from smoothloco.train.shac import SHACConfig, _guarded_step, clipped_sum, td_lambda_targets


def test_td_lambda_targets_by_hand():
    gamma, lam = 0.9, 0.5
    # one env, three steps; terminated at step 1 in the second env, truncated at step 0 in the third
    rewards = jnp.array([[1.0, 1.0, 1.0], [2.0, 2.0, 2.0], [3.0, 3.0, 3.0]])
    values = jnp.array([[10.0, 10.0, 10.0], [20.0, 20.0, 20.0], [30.0, 30.0, 30.0]])
    dones = jnp.array([[0.0, 0.0, 1.0], [0.0, 1.0, 0.0], [0.0, 0.0, 0.0]])
    truncs = jnp.array([[0.0, 0.0, 1.0], [0.0, 0.0, 0.0], [0.0, 0.0, 0.0]])
    got = np.asarray(td_lambda_targets(rewards, values, dones, truncs, gamma, lam))

    # env 0: no episode end; G2 = 3 + .9*30 = 30; G1 = 2 + .9*(.5*20 + .5*30) = 24.5; G0 = 1 + .9*(.5*10+.5*24.5) = 16.525
    np.testing.assert_allclose(got[:, 0], [16.525, 24.5, 30.0], rtol=1e-6)
    # env 1: terminated at t=1 -> G1 = 2; G2 = 3 + .9*30 = 30; G0 = 1 + .9*(.5*10 + .5*2) = 6.4
    np.testing.assert_allclose(got[:, 1], [6.4, 2.0, 30.0], rtol=1e-6)
    # env 2: truncated at t=0 -> G0 = 1 + .9*10 = 10 (bootstrap, no lambda mixing across the reset)
    np.testing.assert_allclose(got[:, 2], [10.0, 2 + 0.9 * (0.5 * 20 + 0.5 * 30), 30.0], rtol=1e-6)


def test_per_environment_clipping_by_hand():
    # three environments' gradients of norms 5, 1 and 100 (median 5), split over two leaves
    grads = {"a": jnp.array([[3.0], [0.6], [0.0]]), "b": jnp.array([[4.0, 0.0], [0.8, 0.0], [0.0, 100.0]])}
    plain, norms = clipped_sum(grads, 0.0)
    np.testing.assert_allclose(norms, [5.0, 1.0, 100.0], rtol=1e-6)
    np.testing.assert_allclose(plain["a"], [3.6], rtol=1e-6)  # the plain sum
    np.testing.assert_allclose(plain["b"], [4.8, 100.0], rtol=1e-6)
    clipped, _ = clipped_sum(grads, 1.0)  # at the median, 5: only the outlier shrinks, by 5/100
    np.testing.assert_allclose(clipped["a"], [3.6], rtol=1e-6)
    np.testing.assert_allclose(clipped["b"], [4.8, 5.0], rtol=1e-6)
    clipped, _ = clipped_sum(grads, 0.1)  # at 0.5: scales 0.1, 0.5, 0.005
    np.testing.assert_allclose(clipped["a"], [0.3 + 0.3], rtol=1e-6)
    np.testing.assert_allclose(clipped["b"], [0.4 + 0.4, 0.5], rtol=1e-6)


def test_non_finite_gradient_never_reaches_parameters():
    opt = optax.adam(0.1)
    params = {"w": jnp.ones(3)}
    state = opt.init(params)
    new, _, ok = _guarded_step(opt, {"w": jnp.array([1.0, jnp.nan, 0.0])}, params, state)
    assert not bool(ok)
    np.testing.assert_array_equal(np.asarray(new["w"]), np.ones(3))
    new, _, ok = _guarded_step(opt, {"w": jnp.array([1.0, 1.0, 1.0])}, params, state)
    assert bool(ok) and float(new["w"][0]) < 1.0


@pytest.mark.parametrize("field,value", [("horizon", 0), ("gamma", 1.5), ("actor_lr", 0.0), ("critic_minibatches", 7), ("env_grad_clip", -1.0)])
def test_bad_shac_config(field, value):
    with pytest.raises(ValueError, match=field if field != "critic_minibatches" else "minibatches"):
        SHACConfig(**{field: value})
