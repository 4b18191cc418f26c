"""Our rigid-body dynamics against MuJoCo (C) on the bundled robots at random states."""

import jax
import jax.numpy as jnp
import mujoco
import numpy as np
import pytest

from smoothloco.robot import BUNDLED_ROBOTS, load_robot
from smoothloco.sim.dynamics import dynamics, point_jacobians, rigid_tree


def _random_state(robot, rng):
    q = robot.init_qpos().astype(float)
    quat = rng.normal(size=4)
    q[3:7] = quat / np.linalg.norm(quat)
    q[7:] += rng.normal(0.0, 0.5, 12)
    return q, rng.normal(0.0, 1.5, 18)


@pytest.mark.parametrize("robot_name", list(BUNDLED_ROBOTS))
@pytest.mark.parametrize("seed", [0, 1])
def test_poses_mass_matrix_bias_and_jacobians_equal_mujoco(seed, robot_name):
    """float32 against MuJoCo's float64: agreement to ~1e-5 of each quantity's scale."""
    robot = load_robot(robot_name)
    model = robot.mj_model()
    q, v = _random_state(robot, np.random.default_rng(seed))
    data = mujoco.MjData(model)
    data.qpos[:], data.qvel[:] = q, v
    mujoco.mj_forward(model, data)
    mass_matrix = np.zeros((model.nv, model.nv))
    mujoco.mj_fullM(model, data, mass_matrix)

    tree = rigid_tree(model)
    dyn = jax.jit(dynamics)(tree, jnp.asarray(q, jnp.float32), jnp.asarray(v, jnp.float32))
    np.testing.assert_allclose(dyn.frames.xpos, data.xpos, atol=1e-5)
    np.testing.assert_allclose(np.asarray(dyn.frames.xmat).reshape(-1, 9), data.xmat, atol=1e-5)
    np.testing.assert_allclose(dyn.mass_matrix, mass_matrix, atol=1e-5 * np.abs(mass_matrix).max())
    np.testing.assert_allclose(dyn.bias, data.qfrc_bias, atol=1e-5 * np.abs(data.qfrc_bias).max())

    feet = [model.geom(name).id for name in robot.foot_geoms]
    points = jnp.asarray(data.geom_xpos[feet], jnp.float32)
    linear, angular = point_jacobians(tree, dyn.frames, model.geom_bodyid[feet], points)
    for i, geom in enumerate(feet):
        jac_lin, jac_ang = np.zeros((3, model.nv)), np.zeros((3, model.nv))
        mujoco.mj_jacGeom(model, data, jac_lin, jac_ang, geom)
        np.testing.assert_allclose(linear[i], jac_lin, atol=1e-5)
        np.testing.assert_allclose(angular[i], jac_ang, atol=1e-5)


@pytest.mark.parametrize(
    "body, message",
    [
        ('<body><joint type="slide"/><geom size="0.1"/></body>', "floating base"),
        (
            '<body><freejoint/><geom size="0.1"/><body><joint type="ball"/><geom size="0.1"/></body></body>',
            "exactly one hinge",
        ),
    ],
)
def test_unsupported_trees_are_rejected(body, message):
    model = mujoco.MjModel.from_xml_string(f"<mujoco><worldbody>{body}</worldbody></mujoco>")
    with pytest.raises(ValueError, match=message):
        rigid_tree(model)
