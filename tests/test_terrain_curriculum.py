"""The terrain curriculum: a stairs course's surface against its boxes (and so MuJoCo's), and
episodes promoted and demoted across its levels by how far the robot got."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from brax.envs.base import State

from smoothloco.measure.mujoco_terrain import terrain_model
from smoothloco.sim.terrain import StairsCourse, parse_terrain
from smoothloco.tasks import VelocityTask, VelocityTaskConfig
from smoothloco.tasks.config import HeightScanConfig
from smoothloco.train.runs import TrainConfig
from smoothloco.train.shac import start_episodes

COURSE = StairsCourse(levels=4, rise=0.16, run=0.3, steps=3, landing=1.0, tile=4.0, columns=2)


def _points_near_the_stairs(course: StairsCourse, count: int, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    level, column = rng.integers(0, course.levels, count), rng.integers(0, course.columns, count)
    half = 0.5 * course.tile - 0.1
    x = (level + 0.5) * course.tile + rng.uniform(-half, half, count)
    y = (column + 0.5 - 0.5 * course.columns) * course.tile + rng.uniform(-half, half, count)
    ground = np.asarray(jax.vmap(course)(jnp.asarray(np.stack([x, y], 1), jnp.float32)))
    return np.stack([x, y, ground + rng.uniform(-0.02, 0.1, count)], 1)


def _centre_of(xy: np.ndarray) -> np.ndarray:
    """The centre of the test course's tile under each point."""
    return (np.floor(xy / COURSE.tile) + 0.5) * COURSE.tile


@pytest.mark.parametrize("course", [COURSE, StairsCourse()])
def test_course_is_the_surface_of_its_boxes_at_the_cost_of_four(course):
    """Heights, distances and normals of the course (four boxes a point) equal those of the union
    of all its boxes, on every level: the lowest steps (1.6 and 1.8 cm) included, where the
    blend reaches two treads down."""
    points = _points_near_the_stairs(course, 3000)
    boxes = course.as_boxes()
    assert len(boxes.boxes) == course.levels * course.columns * course.steps
    xy = jnp.asarray(points[:, :2], jnp.float32)
    np.testing.assert_allclose(jax.vmap(course)(xy), jax.vmap(boxes)(xy), atol=1e-6)
    ours = jax.jit(jax.vmap(course.distance))(jnp.asarray(points, jnp.float32))
    union = jax.jit(jax.vmap(boxes.distance))(jnp.asarray(points, jnp.float32))
    np.testing.assert_allclose(ours[0], union[0], atol=5e-5)
    np.testing.assert_allclose(ours[1], union[1], atol=1e-2)
    assert np.mean(np.asarray(ours[0]) < 0) > 0.05  # some points touch the stairs


def test_course_rises_level_by_level_and_starts_robots_on_its_pyramids_tops_and_at_their_feet():
    for level in range(COURSE.levels):
        rise = COURSE.rise * (level + 1) / COURSE.levels
        centre_x = (level + 0.5) * COURSE.tile
        profile = jnp.array([[centre_x + dx, -2.0] for dx in (0.0, 0.45, 0.55, 0.85, 1.15, 1.5, -1.5, 2.5)])
        # top (landing 1 m), two steps down each side over 0.3 m treads, flat ground around
        np.testing.assert_allclose(COURSE(profile), np.array([3, 3, 2, 1, 0, 0, 0, 0]) * rise, atol=1e-6)
        spawns = jax.vmap(COURSE.spawn, in_axes=(None, 0))(
            jnp.asarray(level), jax.random.split(jax.random.PRNGKey(level), 64)
        )
        heights = np.asarray(COURSE(spawns))
        on_top, at_foot = np.isclose(heights, 3 * rise, atol=1e-6), np.isclose(heights, 0.0)
        assert np.all(on_top | at_foot) and 16 < on_top.sum() < 48  # about half and half
        assert np.all((level * COURSE.tile < spawns[:, 0]) & (spawns[:, 0] < (level + 1) * COURSE.tile))
        # at the foot: on the flat strip beside the pyramid, its lowest step within the strip's width
        foot = np.asarray(spawns)[at_foot]
        distance = np.max(np.abs(foot - _centre_of(foot)), axis=1)
        assert np.all((COURSE.base_half < distance) & (distance < 0.5 * COURSE.tile))
    assert float(COURSE(jnp.array([-3.0, 0.0]))) == 0.0 and float(COURSE(jnp.array([50.0, 9.0]))) == 0.0


def test_course_in_mujoco_is_the_same_ground():
    """MuJoCo's model of the course holds its boxes: a ray cast straight down meets our height."""
    import mujoco

    world = '<mujoco><worldbody><geom name="floor" type="plane" size="0 0 1"/></worldbody></mujoco>'
    model = terrain_model(world, COURSE)
    data = mujoco.MjData(model)
    mujoco.mj_forward(model, data)
    points = _points_near_the_stairs(COURSE, 200, seed=1)
    geom = np.zeros(1, np.int32)
    for x, y, _ in points:
        depth = mujoco.mj_ray(model, data, np.array([x, y, 2.0]), np.array([0.0, 0.0, -1.0]), None, 1, -1, geom)
        assert abs((2.0 - depth) - float(COURSE(jnp.array([x, y])))) < 1e-6


def test_course_parameters_are_named_and_bad_ones_refused():
    assert parse_terrain("course:levels=4,rise=0.16,steps=3,landing=1,tile=4,columns=2,run=0.3") == COURSE
    with pytest.raises(ValueError, match="levels must be an integer"):
        parse_terrain("course:levels=2.5")
    with pytest.raises(ValueError, match="must hold its pyramid"):
        StairsCourse(steps=20)
    with pytest.raises(ValueError, match="levels, steps and columns >= 1"):
        StairsCourse(columns=0)
    with pytest.raises(ValueError, match="rise, run, landing, tile > 0"):
        StairsCourse(rise=float("nan"))


def test_ppo_on_a_curriculum_needs_the_full_reset():
    task = VelocityTaskConfig(terrain="course")
    with pytest.raises(ValueError, match="--ppo.full_reset true"):
        TrainConfig(algo="ppo", task=task)
    TrainConfig(algo="ppo", task=task, ppo=TrainConfig().ppo.__class__(full_reset=True))
    TrainConfig(algo="shac", task=task)


@pytest.fixture(scope="module")
def course_task() -> VelocityTask:
    terrain = "course:levels=4,rise=0.16,steps=3,landing=1,tile=4,columns=2"
    return VelocityTask(VelocityTaskConfig(terrain=terrain, height_scan=HeightScanConfig(x=(0.1, 0.2), y=(0.0,))))


def test_episodes_move_up_and_down_the_course_by_how_far_the_robot_got(course_task):
    task = course_task
    course = task.sys.terrain
    reset, next_episode = jax.jit(task.reset), jax.jit(task.next_episode)
    starts = [reset(jax.random.PRNGKey(k)) for k in range(8)]
    assert {int(s.info["terrain_level"]) for s in starts} <= {0, 1}  # the lower half of 4 levels
    standing = float(task.robot.init_qpos()[2])
    for s in starts:
        q = np.asarray(s.pipeline_state.q)
        np.testing.assert_allclose(q[:2], s.info["spawn_xy"])
        np.testing.assert_allclose(q[2], standing + float(jnp.max(course(q[:2] + task._footprint))), atol=1e-6)

    def ended(level: int, moved: float, walked: float, asked: float = 3.0, fell: float = 0.0) -> State:
        s = starts[0]
        q = s.pipeline_state.q.at[0].add(moved)
        info = {**s.info, "terrain_level": jnp.asarray(level, jnp.int32), "walked_path": jnp.asarray(walked),
                "commanded_path": jnp.asarray(asked), "fell": jnp.asarray(fell)}  # fmt: skip
        return s.replace(pipeline_state=s.pipeline_state.replace(q=q), info=info)

    fresh = starts[1]
    # the test course's pyramids are 2.2 m wide: 2.5 m from the start is off it, 1 m is not
    for case, expected in [
        ((1, 2.5, 3.0), 2),  # left its pyramid, walked what was asked: up
        ((2, 2.5, 1.4), 1),  # walked less than half of what was asked: down
        ((2, 1.0, 3.0), 2),  # walked what was asked without leaving its pyramid: stays
        ((2, 2.5, 2.0), 2),  # left it, but walked only two thirds of what was asked: stays
        ((2, 2.5, 3.0, 3.0, 1.0), 1),  # fell: down
        ((0, 0.1, 0.1), 0),  # no level below the first
    ]:
        after = next_episode(ended(*case), fresh)
        assert int(after.info["terrain_level"]) == expected, case
        q = np.asarray(after.pipeline_state.q)
        assert expected * course.tile < q[0] < (expected + 1) * course.tile  # on its level's tile
        ground = float(jnp.max(course(q[:2] + task._footprint)))  # the top, or a foot on the lowest step
        assert ground in (
            0.0,
            pytest.approx(float(course.level_rise(expected))),
            pytest.approx(3 * float(course.level_rise(expected))),
        )
        np.testing.assert_allclose(q[2], standing + ground, atol=1e-5)
        for key in ("commanded_path", "walked_path", "fell"):
            assert float(after.info[key]) == 0.0
        np.testing.assert_allclose(after.info["spawn_xy"], q[:2])
        # the first observation is of the new place (its height scan), the command the fresh one's
        first, _ = task._first_observation(after.pipeline_state, after.info)
        np.testing.assert_allclose(after.obs, first, atol=1e-6)
        np.testing.assert_array_equal(after.info["command"], fresh.info["command"])
    past_the_top = {int(next_episode(ended(3, 2.5, 3.0), starts[k]).info["terrain_level"]) for k in range(8)}
    assert past_the_top <= set(range(4)) and len(past_the_top) > 1  # a random level, as legged_gym


def test_steps_count_the_paths_asked_for_and_walked(course_task):
    task = course_task
    state = jax.jit(task.reset)(jax.random.PRNGKey(3))
    step = jax.jit(task.step)
    speeds = []
    for action in (0.5, -0.5, 0.5):
        state = step(state, jnp.full(task.action_size, action))
        speeds.append(float(jnp.linalg.norm(state.pipeline_state.v[:2])))
    dt = task.config.control_dt
    asked = float(jnp.linalg.norm(state.info["command"][:2]))
    np.testing.assert_allclose(state.info["commanded_path"], 3 * asked * dt, rtol=1e-5)
    np.testing.assert_allclose(state.info["walked_path"], sum(speeds) * dt, rtol=1e-5)
    assert sum(speeds) > 0 and float(state.info["fell"]) == float(state.done)
    assert float(state.metrics["terrain_level"]) == float(state.info["terrain_level"])


def test_off_a_course_a_new_episode_is_the_fresh_one():
    task = VelocityTask(VelocityTaskConfig(terrain="hills:height=0.08"))
    ended, fresh = object(), object()  # not even looked at
    assert task.next_episode(ended, fresh) is fresh


class _CountingEnv:
    """A tiny fake: each next episode starts one past the level the ended one reached."""

    def next_episode(self, ended, fresh):
        return {"level": ended["level"] + 1, "x": fresh["x"]}


def test_new_episodes_start_only_where_done_and_carry_what_the_task_passes_on():
    state = {"level": jnp.array([3, 5, 7]), "x": jnp.array([1.0, 2.0, 3.0])}
    fresh = {"level": jnp.zeros(3, jnp.int32), "x": jnp.array([-1.0, -2.0, -3.0])}
    started = start_episodes(_CountingEnv(), jnp.array([1.0, 0.0, 1.0]), state, fresh)
    np.testing.assert_array_equal(started["level"], [4, 5, 8])
    np.testing.assert_array_equal(started["x"], [-1.0, 2.0, -3.0])
    plain = start_episodes(object(), jnp.array([1.0, 0.0, 1.0]), state, fresh)
    np.testing.assert_array_equal(plain["level"], [0, 5, 0])
