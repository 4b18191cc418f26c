"""Bad input gets a clear error or a flagged state, never silent garbage."""

from dataclasses import replace

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from smoothloco.robot import anymal_c
from smoothloco.sim import ContactConfig, SimState, check_state, initial_state, make_sim, step


def test_unknown_contact_model_lists_accepted():
    with pytest.raises(ValueError, match="unknown contact model 'rigid'.*hard, smooth, soft"):
        make_sim(anymal_c(), "rigid")


@pytest.mark.parametrize("sharpness", [0.0, -5.0])
def test_non_positive_sharpness(sharpness):
    robot = anymal_c()
    sim = make_sim(robot, "smooth")
    with pytest.raises(ValueError, match="sharpness s must be > 0"):
        step(sim, initial_state(robot), jnp.asarray(robot.default_pose), sharpness)


@pytest.mark.parametrize("dt", [0.0, -0.001, float("nan")])
def test_non_positive_step(dt):
    with pytest.raises(ValueError, match="time step dt must be a positive"):
        make_sim(anymal_c(), "hard", dt=dt)


def test_bad_contact_settings():
    with pytest.raises(ValueError, match="iterations must be >= 1"):
        ContactConfig("hard", iterations=0)
    with pytest.raises(ValueError, match="soft_stiffness must be > 0"):
        ContactConfig("soft", soft_stiffness=-1.0)


def test_model_without_named_feet():
    robot = replace(anymal_c(), foot_geoms=("LF_FOOT", "left_toe"))
    with pytest.raises(ValueError, match=r"no foot geom named \['left_toe'\]"):
        make_sim(robot, "smooth")


def test_non_finite_state_is_flagged_and_rejected():
    robot = anymal_c()
    sim = make_sim(robot, "hard")
    good = initial_state(robot)
    bad = SimState(q=good.q, v=good.v.at[7].set(jnp.nan))
    one_step = jax.jit(lambda s: step(sim, s, jnp.asarray(robot.default_pose), 100.0)[1].finite)
    assert not bool(one_step(bad))
    assert bool(one_step(good))
    with pytest.raises(ValueError, match="NaN or infinite"):
        check_state(bad)
    with pytest.raises(ValueError, match="nq = nv \\+ 1"):
        check_state(SimState(q=good.q, v=np.zeros(5)))
