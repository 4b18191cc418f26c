"""The robustness suite: every condition reaches the player, is judged with the standard
metrics, and a policy that degrades shows it; the player's imperfections act as specified."""

from pathlib import Path

import numpy as np
import pytest
from fakes import FakePlayer, write_untrained_run

from smoothloco.deploy.export import export_run
from smoothloco.evaluate import robustness
from smoothloco.robot_side.testbench import Imperfections, Player
from smoothloco.train.shac import SHACConfig


def test_every_condition_is_run_and_judged(tmp_path: Path):
    result = robustness.evaluate_robustness(FakePlayer(), mass=45.0, push_directions=2)
    assert list(result) == list(robustness.CONDITIONS)
    # The stand-in falls after pushes of 1 m/s or more: every condition pushes at least that hard.
    assert result["nominal"] == {"lin_vel_error": 0.0, "yaw_rate_error": 0.0, "fall_rate": 0.0, "push_survival": 0.0}
    speeds = {
        name: {s.push_speed for s in robustness.condition_scenarios(c) if s.pushes}
        for name, c in robustness.CONDITIONS.items()
    }
    assert speeds["nominal"] == {1.0} and speeds["pushes 1.5 m/s"] == speeds["all combined"] == {1.5}
    assert result["control delay 20 ms"]["lin_vel_error"] > result["control delay 10 ms"]["lin_vel_error"] > 0
    assert result["friction 0.3"]["fall_rate"] == 1.0
    assert result["all combined"]["fall_rate"] == 1.0
    robustness.plot(result, tmp_path / "robustness.png", "test")
    assert (tmp_path / "robustness.png").stat().st_size > 0
    # Falling at once tracks nothing: the error of standing still, not 0.
    assert "| friction 0.3 | 0.389 | 0.167 | 1.00 | 0.00 |" in robustness.markdown(result)


@pytest.fixture(scope="module")
def player(tmp_path_factory) -> Player:
    run = tmp_path_factory.mktemp("robust") / "run"
    write_untrained_run(run, SHACConfig(num_envs=4, horizon=2, critic_minibatches=2))
    return Player(export_run(run))


def test_weaker_motors_and_a_control_delay_change_the_torque_as_specified(player: Player):
    command = [(0.0, 0.5, 0.0, 0.0)]
    nominal = player.run(command, seconds=0.1)
    weak = player.run(command, seconds=0.1, imperfections=Imperfections(motor_strength=0.5))
    np.testing.assert_allclose(weak["torque"][0], 0.5 * nominal["torque"][0])
    # A delay of one control period: the first period's torque is the standing pose's PD torque.
    delayed = player.run(command, seconds=0.1, imperfections=Imperfections(action_delay=player.control_dt))
    standing = np.clip(-player.kd * 0.0 + player.kp * (player.default_pose - player.initial_qpos()[7:]), -80, 80)
    np.testing.assert_allclose(delayed["torque"][0], standing, atol=1e-9)
    assert not np.allclose(delayed["torque"][0], nominal["torque"][0])
    with pytest.raises(ValueError, match="motor_strength must be > 0"):
        player.run(command, seconds=0.1, imperfections=Imperfections(motor_strength=0.0))


def test_sensor_noise_follows_the_policy_observation():
    from smoothloco.tasks import GaitConfig, VelocityTaskConfig

    blind_task = VelocityTaskConfig(observe_base_lin_vel=False, gait=GaitConfig(recovery_speed=0.0))
    full, blind = robustness.sensor_noise(), robustness.sensor_noise(blind_task)
    # legged_gym's levels in the sensors' own units; the base velocity goes with the observation of it
    assert full == {"base_lin_vel": 0.1, "base_ang_vel": 0.2, "gravity": 0.05, "joint_pos": 0.01, "joint_vel": 1.5}
    assert blind == {k: v for k, v in full.items() if k != "base_lin_vel"}
    assert robustness.conditions(blind_task)["all combined"].imperfections.sensor_noise == blind


def test_the_motor_envelope_caps_driving_torque_by_speed_as_the_simulator_does(player: Player):
    """ANYmal's drives (120 N·m saturation, 7.5 rad/s, 80 N·m limit): full torque up to 2.5 rad/s,
    then linearly less while driving; braking keeps the limit. Player and simulator agree."""
    import jax.numpy as jnp

    from smoothloco.sim.step import motor_torque_bounds

    velocity = np.array([0.0, 2.5, 5.0, 7.5, 10.0, -5.0])
    lower, upper = motor_torque_bounds(80.0, 120.0, 7.5, jnp.asarray(velocity))
    np.testing.assert_allclose(upper, [80, 80, 40, 0, 0, 80], atol=1e-5)
    np.testing.assert_allclose(lower, [-80, -80, -80, -80, -80, -40], atol=1e-5)
    assert player.velocity_limit is not None and player.trained_with_envelope  # the default task trains with it

    class Data:  # the two fields the player's torque reads
        qpos = np.zeros(7 + 12)
        qvel = np.zeros(6 + 12)

    data = Data()
    data.qvel[6:] = np.resize(velocity, 12)
    target = np.full(12, 10.0)  # far away: the PD asks for more than any motor gives
    flat = player._torque(data, target, 1.0, envelope=False)
    capped = player._torque(data, target, 1.0, envelope=True)
    np.testing.assert_allclose(flat, 80.0)
    np.testing.assert_allclose(capped, np.resize(np.asarray(upper), 12), atol=1e-5)
    np.testing.assert_allclose(
        player._torque(data, -target, 0.5, envelope=True), 0.5 * np.resize(np.asarray(lower), 12), atol=1e-5
    )
    assert "motor torque-speed envelope" in robustness.CONDITIONS
    assert robustness.CONDITIONS["all combined"].imperfections.motor_envelope


def test_a_robot_without_an_envelope_gets_none_in_the_suite_or_the_task():
    from dataclasses import replace

    from smoothloco.robot import load_robot
    from smoothloco.sim import make_sim
    from smoothloco.tasks import VelocityTask, VelocityTaskConfig

    go2 = VelocityTaskConfig.for_robot("go2")
    assert "motor torque-speed envelope" not in robustness.conditions(go2)
    assert not robustness.conditions(go2)["all combined"].imperfections.motor_envelope
    with pytest.raises(ValueError, match="states no torque-speed envelope"):
        make_sim(load_robot("go2"), motor_envelope=True)
    anymal = load_robot("anymal_c")
    assert np.all(np.isinf(np.asarray(make_sim(anymal).velocity_limit)))  # off unless the task asks
    assert np.allclose(make_sim(anymal, motor_envelope=True).velocity_limit, 7.5)
    # the task trains with the envelope where the robot states one, without where it does not
    assert np.allclose(VelocityTask(VelocityTaskConfig()).sys.velocity_limit, 7.5)
    assert np.all(np.isinf(np.asarray(VelocityTask(go2).sys.velocity_limit)))
    flat_limit = VelocityTask(replace(VelocityTaskConfig(), motor_envelope=False)).sys.velocity_limit
    assert np.all(np.isinf(np.asarray(flat_limit)))


def test_bumps_replace_the_floor_with_an_egg_crate_heightfield(player: Player):
    import mujoco

    model = player.model(bumps=0.04)
    assert model.ngeom == player.mj_model.ngeom and model.geom_type[0] == mujoco.mjtGeom.mjGEOM_HFIELD
    data = mujoco.MjData(model)
    mujoco.mj_forward(model, data)
    for x, y in [(0.25, 0.25), (0.25, -0.25), (0.1, 0.37)]:
        hit = np.zeros(1, np.int32)
        distance = mujoco.mj_ray(model, data, np.array([x, y, 1.0]), np.array([0.0, 0.0, -1.0]), None, 1, -1, hit)
        assert 1.0 - distance == pytest.approx(0.02 * np.sin(2 * np.pi * x) * np.sin(2 * np.pi * y), abs=1e-3)
    flat = player.run([(0.0, 0.5, 0.0, 0.0)], seconds=0.5)
    bumpy = player.run([(0.0, 0.5, 0.0, 0.0)], seconds=0.5, imperfections=Imperfections(bumps=0.04))
    assert not np.allclose(flat["base_pos"], bumpy["base_pos"])
    with pytest.raises(ValueError, match="bumps must be a height >= 0 m"):
        player.model(bumps=-0.01)


def test_the_bench_stands_the_robot_on_other_ground_and_measures_heights_above_it(player: Player):
    """On a staircase's landing (boxes) 60 cm up and at the foot of a slope 2.3 m down (a height
    field), the robot starts above the ground and stands on it as on the flat floor, upright though its
    base is below the world's origin; every geom of the robot keeps its index."""
    from smoothloco.evaluate.terrain_course import ground_of

    flat = player.run([], seconds=0.5)
    grounds = [
        ("stairs:rise=0.15,steps=4,landing=4,start=-2", 0.6, 4),  # four boxes
        ("ramp:degrees=-25,start=-6,length=5", -5 * np.tan(np.radians(25)), 0),  # a height field for the floor plane
    ]
    for terrain, floor, added_geoms in grounds:
        ground = ground_of(player, terrain)
        model = player.model(ground=ground)
        assert model.ngeom == player.mj_model.ngeom + added_geoms
        assert [model.geom(g).name for g in player.foot_geoms] == [
            player.mj_model.geom(g).name for g in player.foot_geoms
        ]
        standing = player.run([], seconds=0.5, ground=ground)
        assert standing["base_pos"][0, 2] > floor + player.initial_base_height - 1e-5  # float32 heights
        np.testing.assert_allclose(
            standing["base_pos"][:, 2] - floor, flat["base_pos"][:, 2], atol=0.01, err_msg=terrain
        )
        assert not standing["fallen"].any()
    with pytest.raises(ValueError, match="bumps replace the flat floor, as another ground does"):
        player.model(bumps=0.04, ground=ground)


def test_joint_friction_and_damping_resist_the_motion_in_mujoco(player: Player):
    command = [(0.0, 0.5, 0.0, 0.0)]
    free = player.run(command, seconds=1.0)
    geared = player.run(command, seconds=1.0, imperfections=Imperfections(joint_friction=20.0, joint_damping=5.0))
    assert np.abs(geared["joint_vel"]).mean() < np.abs(free["joint_vel"]).mean()
    suite = robustness.CONDITIONS["joint friction and damping"].imperfections
    assert (suite.joint_friction, suite.joint_damping) == (2.0, 1.0)  # ANYmal: 2.5 % of 80 N·m, half of kd 2
    with pytest.raises(ValueError, match="joint_damping must be >= 0"):
        player.run(command, seconds=0.1, imperfections=Imperfections(joint_damping=-1.0))


def test_rotor_armature_slows_the_joints_in_mujoco(player: Player):
    command = [(0.0, 0.5, 0.0, 0.0)]
    free = player.run(command, seconds=0.5)
    heavy = player.run(command, seconds=0.5, imperfections=Imperfections(rotor_armature=0.5))
    assert np.abs(heavy["joint_vel"]).mean() < np.abs(free["joint_vel"]).mean()
    assert robustness.CONDITIONS["rotor armature"].imperfections.rotor_armature == pytest.approx(0.05)  # ANYmal
    with pytest.raises(ValueError, match="rotor_armature must be >= 0"):
        player.run(command, seconds=0.1, imperfections=Imperfections(rotor_armature=-0.1))


def test_the_suite_scales_pushes_and_bumps_to_the_robot_s_size():
    """From ANYmal's 1.5 m/s and 5 cm: pushes with the square root of the standing height, bumps
    with it (the Go2 stands 0.52 of ANYmal's height)."""
    from smoothloco.tasks import VelocityTaskConfig
    from smoothloco.tasks.config import robot_size

    assert round(robot_size("go2").length, 2) == 0.52
    suite = robustness.conditions(VelocityTaskConfig.for_robot("go2"))
    assert suite["pushes 1.08 m/s"].push_speed == suite["all combined"].push_speed == 1.08
    assert suite["bumps 2.6 cm"].imperfections.bumps == suite["all combined"].imperfections.bumps == 0.026
    assert "pushes 1.5 m/s" in robustness.CONDITIONS and "bumps 5 cm" in robustness.CONDITIONS
