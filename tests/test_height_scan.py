"""The height scan: the base's height above the terrain around it, turned with its heading, read
alike by the training simulator and by the MuJoCo bench on the same ground."""

import functools

import jax
import jax.numpy as jnp
import mujoco
import numpy as np
import pytest

from smoothloco.measure.mujoco_terrain import terrain_model
from smoothloco.robot import load_robot
from smoothloco.robot_side.testbench import NO_GROUND, height_scan
from smoothloco.tasks import HeightScanConfig, VelocityTask, VelocityTaskConfig, controller

STAIRS = "stairs:rise=0.15,run=0.3,start=1.0"  # the first riser at x = 1.0, treads every 0.3 m
# Forward offsets in the middle of treads when the base is at x = 0.85: 0.7 (ground), 1.15, 1.45, 1.75.
SCAN = HeightScanConfig(x=(-0.15, 0.3, 0.6, 0.9), y=(-0.2, 0.2))


def _task(**changes) -> VelocityTask:
    return VelocityTask(VelocityTaskConfig(terrain=STAIRS, height_scan=SCAN, **changes))


def _pose(task: VelocityTask, x: float, y: float, yaw_deg: float, height: float = 0.55) -> np.ndarray:
    """The robot's standing configuration with its base at (x, y, height), turned by ``yaw_deg``."""
    q = np.asarray(task.robot.init_qpos(), np.float64).copy()
    half = np.deg2rad(yaw_deg) / 2
    q[:3], q[3:7] = (x, y, height), (np.cos(half), 0.0, 0.0, np.sin(half))
    return q


@functools.cache
def _physics(task: VelocityTask):
    return jax.jit(task.reset)(jax.random.PRNGKey(0)).pipeline_state


def _ours(task: VelocityTask, q: np.ndarray) -> np.ndarray:
    """The simulator's scan of ``task`` with the robot at configuration ``q``."""
    physics = _physics(task)
    return np.asarray(task.height_scan(physics.replace(q=jnp.asarray(q, physics.q.dtype))))


def test_the_scan_reads_the_steps_ahead_and_turns_with_the_base():
    task = _task()
    facing_the_stairs = _ours(task, _pose(task, 0.85, 0.0, 0.0))
    # x-major: two lateral points per forward offset; each tread up reads 0.15 m less
    np.testing.assert_allclose(facing_the_stairs, np.repeat(0.55 - np.array([0.0, 0.15, 0.30, 0.45]), 2), atol=1e-5)
    turned_back = _ours(task, _pose(task, 0.85, 0.0, 180.0))  # forward points now lie behind: flat ground
    np.testing.assert_allclose(turned_back[2:], 0.55, atol=1e-5)
    # turned left, the forward offsets run along +y, across the staircase: one reading per lateral
    # offset, -0.2 m (right: x = 1.05, on the first tread) and 0.2 m (left: x = 0.65, the ground)
    turned_left = _ours(task, _pose(task, 0.85, 0.0, 90.0)).reshape(4, 2)
    np.testing.assert_allclose(turned_left[:, 0], 0.40, atol=1e-5)
    np.testing.assert_allclose(turned_left[:, 1], 0.55, atol=1e-5)


def test_the_observation_carries_the_scan_relative_to_the_standing_height_and_clipped():
    task = _task()
    layout = controller.full_layout(task.config)
    assert layout[-1] == (
        controller.HEIGHT_SCAN_TERM, 8, controller.HEIGHT_SCAN_SCALE, controller.HEIGHT_SCAN_NOISE
    )  # fmt: skip
    blind = VelocityTask(VelocityTaskConfig(terrain=STAIRS))
    assert task.observation_size == blind.observation_size + 8
    sensors = controller.Sensors(
        joint_pos=np.asarray(task.robot.default_pose, np.float32),
        joint_vel=np.zeros(12, np.float32),
        base_ang_vel=np.zeros(3, np.float32),
        gravity=np.array([0.0, 0.0, -1.0], np.float32),
        base_lin_vel=np.zeros(3, np.float32),
        height_scan=np.array([0.52, 0.37, 5.0, -3.0, 0.52, 0.52, 0.52, 0.52], np.float32),
    )
    config = controller.ControllerConfig.from_task(task.config, task.robot)
    state = controller.initial_state(config)
    measured = controller.measurement(config, sensors, np.zeros(3, np.float32), state)
    scan = np.asarray(measured[-8:])
    np.testing.assert_allclose(scan[:4], [0.0, -0.15, 1.0, -1.0], atol=1e-6)  # standing height 0.52 reads 0


@pytest.mark.parametrize("yaw_deg", [0.0, 30.0])
def test_the_bench_scan_in_mujoco_equals_the_simulators(yaw_deg: float):
    """The MuJoCo bench casts rays through the robot's own geoms onto the staircase's boxes; the
    simulator evaluates the terrain's height; the same state reads the same scan."""
    task = _task()
    model = terrain_model(load_robot(task.config.robot).xml, task.config.ground, extent=4.0)
    data = mujoco.MjData(model)
    for x in (0.85, 1.9):
        q = _pose(task, x, 0.1, yaw_deg)
        data.qpos[:] = q
        mujoco.mj_forward(model, data)
        points = np.asarray(SCAN.points)
        np.testing.assert_allclose(height_scan(points, data), _ours(task, q), atol=2e-3)


def test_the_bench_scan_passes_through_the_robot_and_reads_a_drop_where_there_is_no_ground():
    task = _task()
    model = terrain_model(load_robot(task.config.robot).xml, task.config.ground, extent=4.0)
    data = mujoco.MjData(model)
    data.qpos[:] = _pose(task, -1.0, 0.0, 0.0)
    mujoco.mj_forward(model, data)
    under_the_base = height_scan(np.zeros((1, 2)), data)  # straight down through the trunk
    np.testing.assert_allclose(under_the_base, 0.55, atol=1e-6)
    no_ground = mujoco.MjModel.from_xml_string(
        "<mujoco><worldbody><body><freejoint/><geom type='sphere' size='0.1'/></body></worldbody></mujoco>"
    )
    nothing = mujoco.MjData(no_ground)
    mujoco.mj_forward(no_ground, nothing)
    assert height_scan(np.zeros((1, 2)), nothing)[0] == NO_GROUND


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"x": (0.1, 0.2)}, "must both list offsets"),
        ({"x": (0.1, 4.0), "y": (0.0,)}, "within 3 m"),
        ({"x": tuple(np.linspace(-1, 1, 21)), "y": tuple(np.linspace(-1, 1, 21))}, "21 x 21 points; at most 400"),
        ({"x": (float("nan"),), "y": (0.0,)}, "task.height_scan.x must be finite"),
    ],
)
def test_a_bad_scan_is_refused_with_what_is_accepted(changes: dict, message: str):
    with pytest.raises(ValueError, match=message):
        HeightScanConfig(**changes)
