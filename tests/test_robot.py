"""Robots: the bundled ones match their public numbers and stand, and a user's spec file is
loaded or refused with an error that says what is wrong."""

import json
import re
import shutil
from dataclasses import replace
from pathlib import Path

import mujoco
import numpy as np
import pytest

from smoothloco.commands import main
from smoothloco.robot import BUNDLED_ROBOTS, RobotSpecError, anymal_c, load_robot, load_spec_file
from smoothloco.robot.loading import ASSETS
from smoothloco.sim.check import check_robot, stand_in_mujoco
from smoothloco.tasks import VelocityTaskConfig
from smoothloco.tasks.config import robot_size
from smoothloco.tasks.gait import leg_phase_shifts


def test_anymal_structure_matches_reference():
    robot = anymal_c()
    model = robot.mj_model()
    assert (model.nq, model.nv, model.nu) == (19, 18, 12)
    assert abs(sum(model.body_mass) - 44.97) < 0.01
    assert abs(robot.base_height - 0.549) < 0.005  # legged_gym stance height from the reference
    assert robot.joint_lower[0] == -0.72 and robot.joint_upper[3] == 0.72


def test_go2_structure_matches_public_numbers():
    robot = load_robot("go2")
    model = robot.mj_model()
    assert (model.nq, model.nv, model.nu) == (19, 18, 12)
    assert abs(sum(model.body_mass) - 15.02) < 0.01  # 6.921 kg trunk + 4 x (0.678 + 1.152 + 0.154 + 0.04)
    np.testing.assert_allclose(robot.torque_limit, [23.7, 23.7, 45.43] * 4)
    np.testing.assert_allclose(model.dof_armature[6:], 0.01)
    # thigh and calf 0.213 m each: the calf's origin (the knee) sits 0.213 m below the thigh's
    assert np.allclose(model.body_pos[model.body("FL_calf").id], [0, 0, -0.213])
    assert 0.30 < robot.base_height < 0.34


@pytest.mark.parametrize("name", list(BUNDLED_ROBOTS))
def test_trot_pairs_are_diagonal(name):
    robot = load_robot(name)
    shifts, feet = leg_phase_shifts(robot), robot.foot_positions()
    for i in range(4):
        for j in range(i + 1, 4):
            diagonal = np.sign(feet[i, 0]) != np.sign(feet[j, 0]) and np.sign(feet[i, 1]) != np.sign(feet[j, 1])
            assert (shifts[i] == shifts[j]) == diagonal


@pytest.mark.parametrize("name, height", [("anymal_c", (0.45, 0.56)), ("go2", (0.25, 0.29))])
def test_stands_in_mujoco_under_pd(name, height):
    robot = load_robot(name)
    model = robot.mj_model()
    data = mujoco.MjData(model)
    data.qpos[:] = robot.init_qpos()
    for _ in range(int(6.0 / model.opt.timestep)):
        torque = robot.kp * (robot.default_pose - data.qpos[7:]) - robot.kd * data.qvel[6:]
        data.ctrl[:] = np.clip(torque, -robot.torque_limit, robot.torque_limit)
        mujoco.mj_step(model, data)
    assert height[0] < data.qpos[2] < height[1]
    assert np.linalg.norm(data.qpos[:2]) < 0.1
    assert np.abs(data.qvel).max() < 0.05
    upright = 1 - 2 * (data.qpos[4] ** 2 + data.qpos[5] ** 2)  # z of the body z-axis
    assert upright > 0.99


def test_the_bundled_robots_train_with_the_scaled_recipe():
    go2, default = VelocityTaskConfig.for_robot("go2"), VelocityTaskConfig()
    assert go2 == replace(default, robot="go2").scaled(robot_size("go2")) and go2.robot == "go2"
    assert go2.min_base_height == 0.155 and go2.base_height_target == 0.268
    assert go2.randomization.friction == default.randomization.friction  # shared, not scaled
    assert VelocityTaskConfig.for_robot("anymal_c") == default


# -- a user's spec file ------------------------------------------------------------------------
@pytest.fixture
def user_robot(tmp_path: Path) -> Path:
    """A copy of the bundled Go2 spec and MJCF where a user would keep theirs."""
    for name in ("go2.toml", "go2.xml"):
        shutil.copy(ASSETS / name, tmp_path / name)
    return tmp_path / "go2.toml"


def _edit(path: Path, old: str, new: str, count: int = 1) -> None:
    text = path.read_text()
    assert text.count(old) >= count, old
    path.write_text(text.replace(old, new, count))


def test_a_spec_file_loads_like_the_bundled_robot(user_robot: Path):
    mine, bundled = load_spec_file(user_robot), load_robot("go2")
    assert mine.model_hash == bundled.model_hash and mine.joint_names == bundled.joint_names
    assert replace(VelocityTaskConfig.for_robot(str(user_robot)), robot="go2") == VelocityTaskConfig.for_robot("go2")


@pytest.mark.parametrize(
    "file, old, new, message",
    [
        ("toml", "kd = 0.5", "kd = 0.5\nkv = 1.0", "unknown keys ['kv']"),
        ("toml", "kd = 0.5\n", "", "kd: give it in the spec; the model has no position actuator on ['FL_hip_joint'"),
        (
            "toml",
            'feet = ["FL_foot"',
            'keyframe = "home"\nfeet = ["FL_foot"',
            "keyframe: the model has no keyframe 'home'",
        ),
        ("toml", "kp = 20.0", "kp = -20.0", "kp: expected one or 12 finite positive numbers"),
        ("toml", "kp = 20.0", 'kp = "stiff"', "kp: expected a number or a list"),
        ("toml", '"FL_calf_joint",', '"FL_knee",', "no hinge joint named ['FL_knee']"),
        (
            "toml",
            '"FL_hip_joint", "FL_thigh_joint"',
            '"FL_thigh_joint", "FL_hip_joint"',
            "do not lead to foot 'FL_foot'",
        ),
        ("toml", '"RR_hip_joint", "RR_thigh_joint", "RR_calf_joint",', "", "got 9; a quadruped here has 4 legs"),
        ("toml", '"FR_hip_joint", "FR_thigh', '"FL_hip_joint", "FR_thigh', "['FL_hip_joint'] listed more than once"),
        (
            "xml",
            '<site name="imu"',
            '<body name="head" pos="0.25 0 0.05"><joint name="neck" axis="0 0 1"/>'
            '<geom type="sphere" size="0.03" mass="0.2"/></body><site name="imu"',
            "hinges ['neck'] are not listed",
        ),
        ("toml", 'feet = ["FL_foot"', 'feet = ["FL_toe"', "no geom named 'FL_toe'"),
        ("toml", 'knees = ["FL_calf"', 'knees = ["FL_knee"', "knees: no body named 'FL_knee'"),
        ("toml", "0.1, 0.8, -1.5,", "0.1, 0.8, -0.5,", "FL_calf_joint = -0.5 not in [-2.7227, -0.83776]"),
        ("toml", 'mjcf = "go2.xml"', 'mjcf = "robot.xml"', "mjcf: cannot read"),
        ("toml", "45.43,\n]\n", "45.43,\n]\n[task]\nmin_base_hight = 0.15\n", "unknown setting 'min_base_hight'"),
        ("toml", "45.43,\n]\n", "45.43,\n]\n[task.gait]\nswing_height = -0.06\n", "gait.swing_height must be >= 0"),
        (
            "xml",
            'class="foot" type="sphere" size="0.022"',
            'class="foot" type="box" size="0.022 0.022 0.022"',
            "geom 'FL_foot' is a box; the simulator's contact takes sphere feet",
        ),
        ("xml", 'size="0.022" pos="0 0 -0.213"/>', 'size="0.025" pos="0 0 -0.213"/>', "one foot radius"),
        (
            "xml",
            '<joint name="FL_calf_joint" class="knee"/>',
            '<joint name="FL_calf_joint" type="ball"/>',
            "body 'FL_calf' must hang from the base's tree by exactly one hinge joint, has ['ball']",
        ),
        ("xml", '<freejoint name="root"/>', "", "floating base with a single free joint"),
        (
            "xml",
            '<geom name="floor" type="plane" size="0 0 0.05"',
            '<geom name="floor" type="sphere" size="0.1"',
            "no ground",
        ),
        ("xml", "<asset>", '<include file="parts.xml"/><asset>', "includes 'parts.xml', which is not a file"),
    ],
)
def test_a_bad_spec_is_refused_with_what_is_wrong(user_robot: Path, file, old, new, message):
    target = user_robot if file == "toml" else user_robot.with_suffix(".xml")
    _edit(target, old, new)
    load_robot.cache_clear()
    with pytest.raises((RobotSpecError, ValueError), match=re.escape(message)) as refused:
        VelocityTaskConfig.for_robot(str(user_robot))
    assert str(user_robot) in str(refused.value)  # names the file


def test_train_refuses_an_unknown_robot_in_one_line(capsys):
    assert main(["train", "--robot", "spot", "--out", "/nonexistent/never-written"]) == 2
    err = capsys.readouterr().err
    assert "robot 'spot' is neither a bundled robot (anymal_c, go2) nor an existing .toml spec file" in err


@pytest.mark.slow
def test_robot_check_passes_go2_and_measures_its_standing_height(tmp_path: Path, capsys):
    assert main(["robot", "go2", "--json", str(tmp_path / "check.json")]) == 0
    report = json.loads((tmp_path / "check.json").read_text())
    assert max(report["dynamics_relative_error"].values()) < 1e-4
    assert abs(report["standing"]["mujoco"]["height"] - report["standing"]["hard"]["height"]) < 0.02
    # the spec's standing-height target is the measured one
    assert abs(report["suggested_base_height_target_m"] - VelocityTaskConfig.for_robot("go2").base_height_target) < 0.01
    assert "ok: ready to train" in capsys.readouterr().out


@pytest.mark.slow
def test_robot_check_fails_a_robot_too_weak_to_stand():
    weak = replace(load_robot("go2"), kp=2.0, kd=0.1)  # 2 N·m/rad cannot hold 15 kg up
    report = check_robot(weak)
    assert any("does not stand" in p for p in report["problems"])


def test_a_spec_states_the_motor_envelope_or_leaves_it_out(tmp_path):
    spec = load_robot("go2")
    assert spec.velocity_limit is None and np.array_equal(spec.saturation_torque, spec.torque_limit)
    text = (ASSETS / "go2.toml").read_text().replace('mjcf = "go2.xml"', f'mjcf = "{ASSETS / "go2.xml"}"')
    top = lambda line: f"{text}{line}\n"  # noqa: E731 (a top-level key)
    (tmp_path / "with.toml").write_text(top("velocity_limit = 30.1"))
    assert np.allclose(load_spec_file(tmp_path / "with.toml").velocity_limit, 30.1)
    (tmp_path / "half.toml").write_text(top("saturation_torque = 30.0"))
    with pytest.raises(RobotSpecError, match="needs velocity_limit"):
        load_spec_file(tmp_path / "half.toml")
    (tmp_path / "bad.toml").write_text(top("velocity_limit = -1.0"))
    with pytest.raises(RobotSpecError, match="velocity_limit: expected one or 12 finite positive numbers"):
        load_spec_file(tmp_path / "bad.toml")
