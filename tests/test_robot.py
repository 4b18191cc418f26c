import mujoco
import numpy as np

from smoothloco.robot import anymal_c


def test_model_structure_matches_reference():
    robot = anymal_c()
    model = robot.mj_model()
    assert (model.nq, model.nv, model.nu) == (19, 18, 12)
    assert abs(sum(model.body_mass) - 44.97) < 0.01
    assert abs(robot.base_height - 0.549) < 0.005  # legged_gym stance height from the reference
    assert robot.joint_lower[0] == -0.72 and robot.joint_upper[3] == 0.72


def test_stands_in_mujoco_under_pd():
    robot = anymal_c()
    model = robot.mj_model()
    data = mujoco.MjData(model)
    data.qpos[:] = robot.init_qpos()
    for _ in range(int(3.0 / model.opt.timestep)):
        torque = robot.kp * (robot.default_pose - data.qpos[7:]) - robot.kd * data.qvel[6:]
        data.ctrl[:] = np.clip(torque, -robot.torque_limit, robot.torque_limit)
        mujoco.mj_step(model, data)
    assert 0.45 < data.qpos[2] < 0.56
    assert np.linalg.norm(data.qpos[:2]) < 0.01
    assert np.abs(data.qvel).max() < 0.05
    upright = 1 - 2 * (data.qpos[4] ** 2 + data.qpos[5] ** 2)  # z of the body z-axis
    assert upright > 0.999
