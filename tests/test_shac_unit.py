"""SHAC pieces against hand-computed examples."""

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
from brax.training.acme import running_statistics, specs

from smoothloco.train.shac import SHACConfig, _guarded_normalizer_update, _guarded_step, clipped_sum, td_lambda_targets


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
    trimmed, _ = clipped_sum(grads, 0.0, trim=1 / 3)  # the outlier left out, the two others x 3/2
    np.testing.assert_allclose(trimmed["a"], [1.5 * 3.6], rtol=1e-6)
    np.testing.assert_allclose(trimmed["b"], [1.5 * 4.8, 0.0], rtol=1e-6)


def test_non_finite_gradient_never_reaches_parameters():
    opt = optax.adam(0.1)
    params = {"w": jnp.ones(3)}
    state = opt.init(params)
    new, _, ok = _guarded_step(opt, {"w": jnp.array([1.0, jnp.nan, 0.0])}, params, state)
    assert not bool(ok)
    np.testing.assert_array_equal(np.asarray(new["w"]), np.ones(3))
    new, _, ok = _guarded_step(opt, {"w": jnp.array([1.0, 1.0, 1.0])}, params, state)
    assert bool(ok) and float(new["w"][0]) < 1.0


def test_update_that_overflows_the_parameters_is_skipped():
    # A finite gradient and a huge step: the new parameters would be -inf.
    opt = optax.sgd(3e38)
    params = {"w": jnp.ones(3)}
    new, new_state, ok = jax.jit(lambda g: _guarded_step(opt, g, params, opt.init(params)))({"w": jnp.full(3, 10.0)})
    assert not bool(ok)
    np.testing.assert_array_equal(np.asarray(new["w"]), np.ones(3))


def test_non_finite_observations_leave_the_normalizer_unchanged():
    normalizer = running_statistics.init_state(specs.Array((2,), jnp.float32))
    good = jnp.array([[1.0, 2.0], [3.0, 4.0]])
    normalizer, ok = _guarded_normalizer_update(normalizer, good)
    assert bool(ok)
    np.testing.assert_allclose(np.asarray(normalizer.mean), [2.0, 3.0])
    kept, ok = jax.jit(_guarded_normalizer_update)(normalizer, good.at[0, 1].set(jnp.inf))
    assert not bool(ok)
    for before, after in zip(jax.tree.leaves(normalizer), jax.tree.leaves(kept)):
        np.testing.assert_array_equal(np.asarray(before), np.asarray(after))


@pytest.mark.parametrize(
    "field,value",
    [
        ("horizon", 0),
        ("gamma", 1.5),
        ("actor_lr", 0.0),
        ("critic_minibatches", 7),
        ("env_grad_clip", -1.0),
        ("env_grad_trim", 1.0),
    ],
)
def test_bad_shac_config(field, value):
    with pytest.raises(ValueError, match=field if field != "critic_minibatches" else "minibatches"):
        SHACConfig(**{field: value})


@pytest.mark.parametrize("field", ["gamma", "td_lambda", "actor_lr", "critic_lr", "max_grad_norm", "env_grad_clip",
                                   "target_critic_alpha", "init_log_std"])  # fmt: skip
@pytest.mark.parametrize("value", [float("nan"), float("inf"), -float("inf")])
def test_every_float_of_the_shac_config_must_be_finite(field, value):
    with pytest.raises(ValueError, match=f"shac.{field} must be finite, got {value}"):
        SHACConfig(**{field: value})
