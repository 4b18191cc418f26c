"""Contact with terrain checked against physics: MuJoCo (C) on the same ground built from planes and
boxes (``evaluate.mujoco_terrain``), Coulomb's analytic answers on a slope, and gradients against
finite differences at a step's edge."""

import jax
import jax.numpy as jnp
import mujoco
import numpy as np
import pytest
from fakes import sled

from smoothloco.measure.mujoco_terrain import add_terrain, slope_quaternion
from smoothloco.robot import RobotSpec, anymal_c
from smoothloco.robot_side.testbench import stiff_contact
from smoothloco.sim import SimState, initial_state, make_sim, rollout
from smoothloco.sim.terrain import Boxes, Slope, stairs

G = 9.81
RADIUS = 0.05
STEP = Boxes(((1.0, 0.0, 0.075, 1.0, 1.0, 0.075),))  # a 15 cm step whose riser faces -x at x = 0


def ball() -> RobotSpec:
    """A free solid sphere of 1 kg: rolls."""
    xml = f"""<mujoco><worldbody><body name="ball" pos="0 0 {RADIUS}"><freejoint/>
      <geom name="ball" type="sphere" size="{RADIUS}" mass="1"/></body></worldbody></mujoco>"""
    nothing = np.zeros(0)
    return RobotSpec(xml=xml, joint_names=(), foot_geoms=("ball",), knee_bodies=(), foot_radius=RADIUS,
                     default_pose=nothing, base_height=RADIUS, joint_lower=nothing, joint_upper=nothing)  # fmt: skip


def _mujoco(spec: RobotSpec, ground, dt: float, friction: float, q: np.ndarray, v: np.ndarray, steps: int):
    """MuJoCo's trajectory (q, v and the first contact's normal, away from the ground, per step) of
    ``spec`` on ``ground``, with the MuJoCo player's stiff contact."""
    model_spec = mujoco.MjSpec.from_string(spec.xml)
    model_spec.worldbody.add_geom(name="floor", type=mujoco.mjtGeom.mjGEOM_PLANE, size=[0, 0, 1])
    add_terrain(model_spec, ground)
    model = model_spec.compile()
    stiff_contact(model, dt)
    model.geom_friction[:, 0] = friction
    data = mujoco.MjData(model)
    data.qpos[:], data.qvel[:] = q, v
    qs, vs, normals = [], [], []
    for _ in range(steps):
        mujoco.mj_step(model, data)
        qs.append(data.qpos.copy())
        vs.append(data.qvel.copy())
        # geom1 is the ground (the world's geoms come first), and the frame's normal points to geom2
        normals.append(data.contact.frame[0][:3].copy() if data.ncon else np.zeros(3))
    return np.array(qs), np.array(vs), np.array(normals)


def _ours(spec: RobotSpec, model: str, ground, dt: float, friction: float, q: np.ndarray, v: np.ndarray, steps: int):
    sim = make_sim(spec, model, dt=dt, friction=friction, terrain=ground)
    state = SimState(q=jnp.asarray(q, jnp.float32), v=jnp.asarray(v, jnp.float32))
    _, (traj, info) = jax.jit(lambda s: rollout(sim, s, jnp.zeros((steps, 0)), 2000.0))(state)
    return np.asarray(traj.q, np.float64), np.asarray(traj.v, np.float64), np.asarray(info.gap)


def _downhill(slope: Slope) -> np.ndarray:
    angle, heading = np.radians(slope.degrees), np.radians(slope.heading)
    return -np.array([np.cos(heading) * np.cos(angle), np.sin(heading) * np.cos(angle), np.sin(angle)])


def _acceleration(speed: np.ndarray, dt: float, skip: int = 50) -> float:
    return float((speed[-1] - speed[skip]) / ((len(speed) - 1 - skip) * dt))


@pytest.mark.parametrize("model", ["hard", "smooth", "soft", "mujoco"])
@pytest.mark.parametrize("mu", [0.2, 0.6])
def test_sled_on_a_slope_sticks_or_slides_at_g_sin_minus_mu_cos(model, mu):
    """A sled on four sphere feet on a 20° slope rising toward 30°: it stays put where μ >
    tan 20° = 0.36, and slides down at g (sin θ − μ cos θ) where μ is less, in ours as in MuJoCo."""
    slope, dt, steps = Slope(20.0, heading=30.0), 0.002, 250
    quat = np.array(slope_quaternion(slope))
    sink = {"hard": 0.0005, "smooth": 0.0025, "soft": 0.00025, "mujoco": 0.0005}[model]  # each model's resting sink
    position = np.zeros(3)
    mujoco.mju_rotVecQuat(position, np.array([0.0, 0.0, 0.05 + 0.02 - sink]), quat)  # feet on the plane
    q, v = np.concatenate([position, quat]), np.zeros(6)
    run = _mujoco if model == "mujoco" else lambda *a: _ours(a[0], model, *a[1:])
    qs, vs, _ = run(sled(), slope, dt, mu, q, v, steps)
    acceleration = _acceleration(vs[:, :3] @ _downhill(slope), dt)
    angle = np.radians(slope.degrees)
    expected = max(G * (np.sin(angle) - mu * np.cos(angle)), 0.0)
    print(f"{model} mu={mu}: downhill acceleration {acceleration:.4f} m/s², Coulomb {expected:.4f}")
    # the soft model's explicit spring rings as on flat ground (test_sliding_sled_decelerates_at_mu_g)
    tolerance = {"soft": 0.05, "mujoco": 0.01}.get(model, 0.002) * G
    assert abs(acceleration - expected) < tolerance


@pytest.mark.parametrize("model", ["hard", "smooth", "mujoco"])
def test_ball_rolls_down_a_slope_at_five_sevenths_g_sin(model):
    """A solid sphere rolls without slipping down a 15° slope that descends toward 140°: a =
    5/7 g sin θ along the fall line, and nowhere else."""
    slope, dt, steps = Slope(15.0, heading=-40.0), 0.002, 250
    gx, gy = slope.gradient
    normal = np.array([-gx, -gy, 1.0]) / np.linalg.norm([-gx, -gy, 1.0])
    q = np.concatenate([normal * (RADIUS - (0.0025 if model == "smooth" else 0.0005)), [1.0, 0, 0, 0]])
    run = _mujoco if model == "mujoco" else lambda *a: _ours(a[0], model, *a[1:])
    qs, vs, _ = run(ball(), slope, dt, 0.8, q, np.zeros(6), steps)
    down = _downhill(slope)
    acceleration = _acceleration(vs[:, :3] @ down, dt)
    expected = 5.0 / 7.0 * G * np.sin(np.radians(slope.degrees))
    print(f"{model}: rolling acceleration {acceleration:.4f} m/s², 5/7 g sin θ {expected:.4f}")
    assert abs(acceleration - expected) < 0.002 * expected
    late = vs[50:, :3]  # after the start's settling
    assert np.abs(late - np.outer(late @ down, down)).max() < 0.01


def test_ball_dropped_on_a_step_edge_is_pushed_off_it_as_in_mujoco():
    """A ball falls onto a 15 cm step's nose with its centre 2.5 cm beyond the edge: the contact
    normal is the edge-to-centre direction (30° from vertical, not the tread's), and the ball
    leaves the edge and lands below as in MuJoCo's sphere-box contact."""
    dt, steps = 0.002, 200
    q, v = np.array([-0.025, 0.0, 0.35, 1.0, 0, 0, 0]), np.zeros(6)
    qs_mj, vs_mj, normals_mj = _mujoco(ball(), STEP, dt, 0.8, q, v, steps)
    first_mj = int(np.argmax(np.linalg.norm(normals_mj, axis=1) > 0))
    normal_mj = -normals_mj[first_mj]  # from the ground toward the ball
    for model in ("hard", "smooth"):
        qs, vs, gaps = _ours(ball(), model, STEP, dt, 0.8, q, v, steps)
        first = int(np.argmax(gaps[:, 0] < 0))
        normal = np.asarray(STEP.distance(jnp.asarray(qs[first, :3], jnp.float32))[1])
        after = first + round(0.03 / dt)
        angle = np.degrees(np.arccos(np.clip(normal @ normal_mj, -1, 1)))
        print(f"{model}: first contact step {first} (MuJoCo {first_mj}); normal {np.round(normal, 3)}, MuJoCo "
              f"{np.round(normal_mj, 3)} ({angle:.2f}° apart); velocity 30 ms later {np.round(vs[after, [0, 2]], 3)}, "
              f"MuJoCo {np.round(vs_mj[first_mj + round(0.03 / dt), [0, 2]], 3)}; at 0.4 s x, z {np.round(qs[-1, [0, 2]], 3)}, "
              f"MuJoCo {np.round(qs_mj[-1, [0, 2]], 3)}")  # fmt: skip
        assert abs(first - first_mj) <= 1
        assert angle < 2.0 and normal[0] < -0.45  # tilted away from the step, as the geometry says (-0.5)
        np.testing.assert_allclose(vs[after, [0, 2]], vs_mj[first_mj + round(0.03 / dt), [0, 2]], atol=0.06)
        np.testing.assert_allclose(qs[-1, [0, 2]], qs_mj[-1, [0, 2]], atol=0.01)


@pytest.mark.slow
def test_ball_rolling_into_a_riser_is_stopped_by_it_and_climbs_it_as_in_mujoco():
    """A ball rolling at 1 m/s into a 15 cm riser stops against it, in ours as in MuJoCo; still
    spinning, it climbs some cm up the riser on friction and falls back, as MuJoCo's does. The
    riser's normal is horizontal, so no ball rides over the step. With the exact distance (blend
    0), the ball in the corner meets one face per step and stays wedged there: printed."""
    dt, steps = 0.002, 250
    v = np.array([1.0, 0.0, 0.0, 0.0, 1.0 / RADIUS, 0.0])  # rolling toward +x
    qs_mj, _, _ = _mujoco(ball(), STEP, dt, 0.8, np.array([-0.3, 0, RADIUS - 0.0005, 1.0, 0, 0, 0]), v, steps)
    for model, sink in (("hard", 0.0005), ("smooth", 0.0025)):
        for ground in (Boxes(STEP.boxes, blend=0.0), STEP):
            qs, _, _ = _ours(ball(), model, ground, dt, 0.8, np.array([-0.3, 0, RADIUS - sink, 1.0, 0, 0, 0]), v, steps)
            print(f"{model}, blend {ground.blend}: furthest x {qs[:, 0].max():.4f} m (MuJoCo {qs_mj[:, 0].max():.4f}), highest "
                  f"centre {qs[:, 2].max():.4f} m (MuJoCo {qs_mj[:, 2].max():.4f}), final x {qs[-1, 0]:.4f} (MuJoCo {qs_mj[-1, 0]:.4f})")  # fmt: skip
            assert -RADIUS - 0.001 < qs[:, 0].max() < -RADIUS + 0.005 and qs[:, 2].max() < 0.15  # stopped, not over
        assert abs(qs[:, 2].max() - qs_mj[:, 2].max()) < 0.03 and abs(qs[-1, 0] - qs_mj[-1, 0]) < 0.015
    assert -RADIUS - 0.001 < qs_mj[:, 0].max() < -RADIUS + 0.005 and qs_mj[:, 2].max() < 0.15


@pytest.mark.parametrize(
    "offset", [pytest.param(0.01, marks=pytest.mark.slow), pytest.param(-0.01, marks=pytest.mark.slow), -0.03]
)
def test_smooth_gradient_at_a_step_edge_matches_central_differences(offset):
    """float64, smooth contact: a ball resting on a step's nose with its centre ``offset`` m from
    the edge (on the tread, just beyond the edge, and far beyond it, where the contact normal is
    tilted 12° and 37°), 40 steps of 2 ms as it rolls off. d(final state)/d(initial x) from
    reverse mode against central differences."""
    with jax.enable_x64(True):
        sim = make_sim(ball(), "smooth", dt=0.002, terrain=STEP)
        touching = RADIUS - 0.003
        height = 0.15 + (np.sqrt(touching**2 - offset**2) if offset < 0 else touching)
        weights = jnp.asarray(np.random.default_rng(4).normal(size=13))

        def loss(x):
            q = jnp.array([x, 0.0, height, 1.0, 0.0, 0.0, 0.0])
            final, _ = rollout(sim, SimState(q=q, v=jnp.zeros(6)), jnp.zeros((40, 0)), 1000.0)
            return jnp.concatenate([final.q, final.v]) @ weights

        loss = jax.jit(loss)
        analytic = float(jax.jit(jax.grad(loss))(offset))
        eps = 1e-6
        numeric = (float(loss(offset + eps)) - float(loss(offset - eps))) / (2 * eps)
    print(f"offset {offset}: analytic {analytic:.6e}, central difference {numeric:.6e}")
    assert abs(numeric) > 1e-3
    assert abs(analytic - numeric) < 1e-4 * abs(numeric)


# Slow: each cell compiles the robot's gradient through the stairs again (half a minute each).
@pytest.mark.slow
@pytest.mark.parametrize(("model", "blend"), [("smooth", 0.01), ("hard", 0.01), ("hard", 0.0), ("smooth", 0.0)])
def test_quadruped_sliding_into_stairs_is_stopped_by_the_riser_with_a_gradient(model, blend):
    """ANYmal holding its standing pose slides at 1 m/s into a staircase's first 15 cm riser, 1 cm
    ahead of its front feet: the front feet stop against the riser instead of passing through or
    climbing it, the knees stay clear, and the gradient through the impact is finite. With the
    exact distance (blend 0) a front foot wedged in the riser's corner meets one face per step and
    sinks about 14 mm into the other; rounding the corner by 1 cm keeps it within a few mm."""
    robot = anymal_c()
    model_mj = robot.mj_model()
    data = mujoco.MjData(model_mj)
    data.qpos[:] = robot.init_qpos()
    mujoco.mj_kinematics(model_mj, data)
    front = [model_mj.geom(f).id for f in robot.foot_geoms if data.geom_xpos[model_mj.geom(f).id, 0] > 0]
    riser = float(data.geom_xpos[front[0], 0]) + robot.foot_radius + 0.01
    sim = make_sim(robot, model, terrain=stairs(rise=0.15, run=0.3, steps=3, start=riser, blend=blend))
    start = initial_state(robot)
    start = start.replace(v=start.v.at[0].set(1.0))
    pose = jnp.asarray(robot.default_pose, jnp.float32)
    steps = 60  # 0.3 s
    _, (traj, info) = jax.jit(lambda s: rollout(sim, s, jnp.tile(pose, (steps, 1)), 1000.0))(start)
    reach = []
    for q in np.asarray(traj.q, np.float64):
        data.qpos[:] = q
        mujoco.mj_kinematics(model_mj, data)
        reach.append(data.geom_xpos[front, 0].max() + robot.foot_radius)
    into_riser, deepest = max(reach) - riser, -float(np.asarray(info.gap).min())
    print(f"{model}, blend {blend}: front feet {into_riser * 1000:.1f} mm into the riser's plane, deepest gap "
          f"{deepest * 1000:.1f} mm, lowest knee {np.asarray(info.knee_height).min():.3f} m")  # fmt: skip
    assert into_riser < 0.012 and deepest < (0.02 if blend == 0 else 0.008)
    assert np.asarray(traj.q[:, 2]).min() > 0.45 and np.asarray(info.knee_height).min() > 0.1

    def loss(offsets):
        final, _ = rollout(sim, start, pose + offsets, 1000.0)
        return final.q[0] + final.q[2]

    gradient = np.asarray(jax.jit(jax.grad(loss))(jnp.zeros((32, 12))))
    assert np.all(np.isfinite(gradient)) and np.abs(gradient).max() > 0.0


@pytest.mark.slow
def test_smooth_gradient_in_a_riser_corner_matches_central_differences():
    """float64, smooth contact: a ball on the ground rolls at 0.3 m/s into the foot of a riser,
    where the blended distance rounds the corner, 40 steps of 2 ms; d(final state)/d(initial x)
    from reverse mode against central differences."""
    with jax.enable_x64(True):
        sim = make_sim(ball(), "smooth", dt=0.002, terrain=STEP)
        weights = jnp.asarray(np.random.default_rng(5).normal(size=13))
        velocity = jnp.array([0.3, 0.0, 0.0, 0.0, 0.3 / RADIUS, 0.0])

        def loss(x):
            q = jnp.array([x, 0.0, RADIUS - 0.003, 1.0, 0.0, 0.0, 0.0])
            final, _ = rollout(sim, SimState(q=q, v=velocity), jnp.zeros((40, 0)), 1000.0)
            return jnp.concatenate([final.q, final.v]) @ weights

        loss = jax.jit(loss)
        start = -RADIUS - 0.004
        analytic = float(jax.jit(jax.grad(loss))(start))
        eps = 1e-6
        numeric = (float(loss(start + eps)) - float(loss(start - eps))) / (2 * eps)
    print(f"riser corner: analytic {analytic:.6e}, central difference {numeric:.6e}")
    assert abs(numeric) > 1e-3
    assert abs(analytic - numeric) < 1e-4 * abs(numeric)
