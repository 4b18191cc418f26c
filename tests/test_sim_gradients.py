"""Gradients through the simulator: finite, correct where smooth, informative where hard is blind."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from fakes import published, sled

from smoothloco.robot import anymal_c, load_spec_file
from smoothloco.sim import SimState, initial_state, make_sim, rollout, step


def _window_loss(sim, start, pose, sharpness):
    def loss(offsets):
        final, (traj, _) = rollout(sim, start, pose + offsets, sharpness)
        return jnp.mean(traj.q[:, 2]) + jnp.mean(traj.q[:, 0]) + 0.1 * jnp.sum(final.v**2)

    return loss


@pytest.mark.slow
@pytest.mark.parametrize("model", ["hard", "smooth", "soft"])
def test_gradient_through_32_steps_is_finite(model):
    robot = anymal_c()
    sim = make_sim(robot, model)
    pose = jnp.asarray(robot.default_pose, jnp.float32)
    start = initial_state(robot)
    start = start.replace(q=start.q.at[2].add(-0.012))  # feet already in contact
    offsets = 0.1 * jax.random.normal(jax.random.PRNGKey(0), (32, 12))
    grad = jax.jit(jax.grad(_window_loss(sim, start, pose, 200.0)))(offsets)
    assert np.all(np.isfinite(np.asarray(grad)))
    assert float(jnp.linalg.norm(grad)) > 0.0


@pytest.mark.slow
def test_smooth_gradient_matches_central_differences():
    """float64, feet in smooth contact: d(loss)/d(theta) for a shared target offset theta."""
    with jax.enable_x64(True):
        robot = anymal_c()
        sim = make_sim(robot, "smooth")
        pose = jnp.asarray(robot.default_pose)
        start = initial_state(robot, jnp.float64)
        start = start.replace(q=start.q.at[2].add(-0.012))
        direction = jax.random.normal(jax.random.PRNGKey(3), (32, 12), jnp.float64)
        loss = _window_loss(sim, start, pose, 200.0)
        along = jax.jit(lambda theta: loss(theta * direction))
        analytic = float(jax.jit(jax.grad(along))(0.0))
        eps = 1e-6
        numeric = (float(along(eps)) - float(along(-eps))) / (2 * eps)
    print(f"analytic {analytic:.6e} central difference {numeric:.6e}")
    assert abs(numeric) > 1e-4
    assert abs(analytic - numeric) < 1e-4 * abs(numeric)


@jax.jit
def _value_and_gradient(sim, start, pose, offsets):
    """One compilation for every model of the same shapes (the sim is an argument)."""
    return jax.value_and_grad(_window_loss(sim, start, pose, 200.0))(offsets)


@pytest.mark.slow
@pytest.mark.parametrize("joint_defaults", ['damping="0.1" frictionloss="0.2"', 'frictionloss="1"'])
def test_gradient_through_joint_damping_and_friction_loss_matches_central_differences(tmp_path, joint_defaults):
    """A Go2 with MuJoCo Menagerie's joint damping and friction loss, then five times the friction
    (its slope below JOINT_FRICTION_SPEED, taken implicitly, is the stiffest term of the step):
    float64, standing in smooth contact, targets moving the joints through rest."""
    with jax.enable_x64(True):
        robot = load_spec_file(published(tmp_path, joint_defaults=joint_defaults))
        sim = make_sim(robot, "smooth")
        start = initial_state(robot, jnp.float64)
        start = start.replace(q=start.q.at[2].add(-0.005))
        pose = jnp.asarray(robot.default_pose)
        direction = jax.random.normal(jax.random.PRNGKey(3), (48, 12), jnp.float64)
        offsets, eps = 0.1 * direction, 1e-6
        gradient = _value_and_gradient(sim, start, pose, offsets)[1]
        ahead, behind = (float(_value_and_gradient(sim, start, pose, offsets + e * direction)[0]) for e in (eps, -eps))
        analytic, numeric = float(jnp.sum(gradient * direction)), (ahead - behind) / (2 * eps)
        norm = float(jnp.linalg.norm(gradient))
    print(f"{joint_defaults}: analytic {analytic:.6e} central difference {numeric:.6e}, gradient norm {norm:.3g}")
    assert abs(numeric) > 1e-4
    assert abs(analytic - numeric) < 1e-4 * abs(numeric)
    # Bounded (at a JOINT_FRICTION_SPEED of 0.03 rad/s, 1 N·m of friction gave 10⁴ over 96 steps)
    assert norm < 100.0


@pytest.mark.slow
def test_foot_just_above_ground_hard_is_blind_smooth_is_informative():
    """A sled whose feet hover 5 mm above the ground. How does its vertical velocity after one
    step depend on its height? Hard contact: not at all (no contact yet), so a gradient-based
    learner cannot discover that lowering a foot would give support. Smooth: the support grows
    as the gap closes, and the gradient says so."""
    spec = sled()
    hover = 0.05 + 0.02 + 0.005

    def vertical_velocity(sim, height):
        q = jnp.asarray(spec.init_qpos(), jnp.float32).at[2].set(height)
        new, _ = step(sim, SimState(q=q, v=jnp.zeros(6)), jnp.zeros(0), 300.0)
        return new.v[2]

    hard_sim, smooth_sim = make_sim(spec, "hard"), make_sim(spec, "smooth")
    hard = float(jax.jit(jax.grad(lambda z: vertical_velocity(hard_sim, z)))(hover))
    smooth = float(jax.jit(jax.grad(lambda z: vertical_velocity(smooth_sim, z)))(hover))
    print(f"d v_z / d height at a 5 mm gap: hard {hard:.4g}, smooth {smooth:.4g} 1/s")
    assert hard == 0.0
    assert smooth < -1.0  # lower body -> more upward push: a descent direction toward support
