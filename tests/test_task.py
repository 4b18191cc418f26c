"""The velocity task: shapes, stability, events, Brax compatibility, config errors."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from brax.envs.wrappers import training

from smoothloco.sim import step as sim_step
from smoothloco.sim.rotation import rotate_inverse
from smoothloco.tasks import (
    OBS_SIZE,
    GaitConfig,
    PushConfig,
    RandomizationConfig,
    VelocityTask,
    VelocityTaskConfig,
    VelocityTrimConfig,
    controller,
    randomize,
)
from smoothloco.tasks.config import CommandConfig
from smoothloco.tasks.controller import observation_slice

QUIET = dict(pushes=PushConfig(enabled=False), randomization=RandomizationConfig(enabled=False))


def _rollout(env, state, actions):
    def body(s, a):
        s = env.step(s, a)
        return s, (s.obs, s.reward, s.done, s.pipeline_state.q, s.pipeline_state.v, s.info["command"])

    return jax.lax.scan(body, state, actions)


# Slow: each contact model compiles the whole task again (about half a minute each).
@pytest.mark.slow
@pytest.mark.parametrize("contact", ["hard", "smooth", "soft"])
def test_random_actions_stay_finite(contact):
    # The explicit soft penalty needs a smaller step than the impulse models (docs/design.md).
    task = VelocityTask(VelocityTaskConfig(contact=contact, sim_dt=0.0025 if contact == "soft" else 0.005))
    keys = jax.random.split(jax.random.PRNGKey(1), 32)
    env = training.wrap(task, episode_length=1000, randomization_fn=lambda sys: randomize(sys, keys))
    state = jax.jit(env.reset)(jax.random.split(jax.random.PRNGKey(0), 32))
    assert state.obs.shape == (32, OBS_SIZE)
    actions = jax.random.uniform(jax.random.PRNGKey(2), (1000, 32, 12), minval=-1, maxval=1)
    final, (obs, reward, done, q, v, _) = jax.jit(_rollout, static_argnums=0)(env, state, actions)
    print(
        f"{contact}: fall fraction {float(np.asarray(done).mean()):.4f}, max |v| {float(np.abs(np.asarray(v)).max()):.1f}"
    )
    for name, x in (("obs", obs), ("reward", reward), ("q", q), ("v", v)):
        assert np.all(np.isfinite(np.asarray(x))), f"non-finite {name}"
    assert float(np.abs(np.asarray(v)).max()) < 100.0  # no silent blow-up either
    assert 0 < float(np.asarray(done).mean()) < 0.5  # random flailing falls sometimes, not always


@pytest.mark.parametrize("contact", [pytest.param("hard", marks=pytest.mark.slow), "smooth"])
def test_zero_action_stands_ten_seconds(contact):
    task = VelocityTask(VelocityTaskConfig(contact=contact, gait=GaitConfig(frequency=0.0), **QUIET))
    state = task.reset(jax.random.PRNGKey(0))
    _, (_, _, done, q, v, _) = jax.jit(_rollout, static_argnums=0)(task, state, jnp.zeros((500, 12)))
    assert float(np.asarray(done).max()) == 0.0
    assert 0.45 < float(q[-1, 2]) < 0.56
    assert float(np.abs(np.asarray(v[-50:])).max()) < 0.05


def test_trot_generator_lifts_diagonal_pairs_in_turn():
    """Zero actions on the trot generator: LF+RH swing while sin(2 pi phase) > 0, RF+LH while
    it is < 0, and the robot steps in place without falling."""
    task = VelocityTask(VelocityTaskConfig(gait=GaitConfig(frequency=2.0, hip_amplitude=0.3), **QUIET))

    def body(s, _):
        phase = s.info["controller"].phase
        s, contact = task.step_with_contact(s, jnp.zeros(12))
        return s, (phase, contact.gap, s.done)

    _, (phase, gap, done) = jax.jit(lambda s: jax.lax.scan(body, s, None, length=150))(
        task.reset(jax.random.PRNGKey(0))
    )
    assert float(np.asarray(done).max()) == 0.0
    sine, gap = np.sin(2 * np.pi * np.asarray(phase)), np.asarray(gap)  # feet LF, RF, LH, RH
    first, second = gap[:, [0, 3]].mean(axis=1), gap[:, [1, 2]].mean(axis=1)
    late = np.arange(len(sine)) > 25  # after the first half second
    assert first[late & (sine > 0.7)].mean() > 0.03 > second[late & (sine > 0.7)].mean()
    assert second[late & (sine < -0.7)].mean() > 0.03 > first[late & (sine < -0.7)].mean()


def test_without_the_generator_actions_are_the_joint_targets():
    """Clock on, generator off: the joint targets are the default pose plus the scaled action,
    nothing else, at every phase; the clock still runs and the swing targets follow it."""
    task = VelocityTask(VelocityTaskConfig(gait=GaitConfig(frequency=2.0, hip_amplitude=0.0), **QUIET))
    assert not task.config.gait.generator
    phases = jnp.linspace(0.0, 1.0, 17)
    assert float(jnp.abs(jax.vmap(task.gait_offset)(phases)).max()) == 0.0
    walking = jax.vmap(task.swing_target, in_axes=(0, None))(phases, jnp.asarray(False))
    standing = jax.vmap(task.swing_target, in_axes=(0, None))(phases, jnp.asarray(True))
    assert float(jnp.abs(standing).max()) == 0.0  # at rest all feet stay down
    assert float(walking.max()) == pytest.approx(task.config.gait.swing_height)
    # Feet LF, RF, LH, RH: diagonals alternate and never swing together.
    walking = np.asarray(walking)
    np.testing.assert_array_equal(walking[:, 0], walking[:, 3])
    np.testing.assert_array_equal(walking[:, 1], walking[:, 2])
    assert float(np.max(walking[:, 0] * walking[:, 1])) == 0.0


@pytest.mark.slow
def test_a_pushed_robot_at_a_zero_command_steps_only_with_a_recovery_speed():
    """At a zero command the robot stands; with gait.recovery_speed a base moving faster than it
    brings the gait back (clock shown, swing targets, no standing-pose penalty)."""
    still, pushed = jnp.array([0.05, 0.0, 0.0]), jnp.array([0.0, -0.4, 0.0])
    zero, walk = jnp.zeros(3), jnp.array([0.5, 0.0, 0.0])
    plain = VelocityTask(VelocityTaskConfig(gait=GaitConfig(recovery_speed=0.0), **QUIET))
    assert bool(plain.at_rest(zero, pushed)) and not bool(plain.at_rest(walk, still))
    stand = CommandConfig(zero_probability=1.0)
    recovering = VelocityTask(VelocityTaskConfig(gait=GaitConfig(recovery_speed=0.3), commands=stand, **QUIET))
    assert bool(recovering.at_rest(zero, still))
    assert not bool(recovering.at_rest(zero, pushed))
    assert not bool(recovering.at_rest(walk, still))

    state = recovering.reset(jax.random.PRNGKey(0))
    clock = observation_slice(recovering.config, "gait_clock")
    assert float(jnp.abs(state.obs[clock]).max()) == 0.0  # standing at reset: hidden
    kicked = recovering.step_with_contact(state, jnp.zeros(recovering.action_size), kick=jnp.array([0.0, 1.0]))[0]
    assert float(jnp.abs(kicked.obs[clock]).max()) > 0.5  # pushed: the clock is back


def test_recovery_speed_needs_the_base_velocity():
    with pytest.raises(ValueError, match="observe_base_lin_vel"):
        VelocityTaskConfig(observe_base_lin_vel=False, gait=GaitConfig(recovery_speed=0.3))


@pytest.mark.parametrize("delay, lagged", [(0.0, 0), (0.01, 2), (0.02, 4)])
def test_action_delay_holds_the_previous_targets(delay, lagged):
    """A delay of d simulation steps applies the previous control step's joint targets for the
    first d of them: a full-period delay makes a step's action act only in the next step."""
    randomization = RandomizationConfig(
        friction=(0.8, 0.8), added_base_mass=(0.0, 0.0), base_com_offset=0.0, kp_scale=(1.0, 1.0),
        kd_scale=(1.0, 1.0), motor_strength=(1.0, 1.0), action_delay=(delay, delay),
    )  # fmt: skip
    task = VelocityTask(VelocityTaskConfig(pushes=PushConfig(enabled=False), randomization=randomization))
    state = jax.jit(task.reset)(jax.random.PRNGKey(0))
    assert int(state.info["action_delay_steps"]) == lagged
    step = jax.jit(task.step_with_contact)
    kick = jnp.full(task.action_size, 0.8)
    _, kicked = step(state, kick)
    _, still = step(state, jnp.zeros(task.action_size))
    # The last substep's torque: the new target has reached the motors unless the delay is the whole period.
    moved = float(jnp.abs(kicked.torque - still.torque).max())
    assert (moved == 0.0) == (lagged == task.config.substeps)
    after, _ = step(step(state, kick)[0], kick)
    assert np.allclose(after.info["joint_target"], task._default_pose + task.config.action_scale * kick)


@pytest.mark.slow
def test_rotor_armature_is_randomized_per_environment_and_slows_the_joints():
    task = VelocityTask(VelocityTaskConfig(**QUIET))
    keys = jax.random.split(jax.random.PRNGKey(0), 8)
    sims, axes = randomize(task.sys, keys, RandomizationConfig(rotor_armature_per_torque=(2.5e-4, 6.25e-4)))
    armature = np.asarray(sims.tree.dof_armature)
    assert armature.shape == (8, task.sys.tree.dof_armature.shape[0]) and axes.tree.dof_armature == 0
    np.testing.assert_array_equal(armature[:, :6], 0.0)  # the floating base has no rotor
    # ANYmal's 80 N·m drives: 0.02-0.05 kg·m²
    assert np.all((armature[:, 6:] >= 0.02) & (armature[:, 6:] <= 0.05))
    assert np.ptp(armature[:, 6]) > 0.005
    unchanged, _ = randomize(task.sys, keys)  # the other parameters keep their random streams
    np.testing.assert_array_equal(np.asarray(unchanged.friction), np.asarray(sims.friction))

    state = task.reset(jax.random.PRNGKey(0))
    kick = jnp.full(task.action_size, 0.5)
    light = task.step(state, kick)
    task.sys = task.sys.replace(tree=task.sys.tree.replace(dof_armature=task.sys.tree.dof_armature.at[6:].add(0.2)))
    heavy = task.step(state, kick)
    speed = lambda s: float(jnp.abs(s.pipeline_state.v[6:]).mean())  # noqa: E731
    assert speed(heavy) < 0.8 * speed(light)


@pytest.mark.slow
def test_joint_friction_is_randomized_per_environment_and_resists_motion():
    task = VelocityTask(VelocityTaskConfig(**QUIET))
    keys = jax.random.split(jax.random.PRNGKey(0), 8)
    sims, axes = randomize(task.sys, keys, RandomizationConfig(joint_friction_share=(0.0125, 0.0375)))
    friction = np.asarray(sims.joint_friction)
    assert friction.shape == (8, task.action_size) and axes.joint_friction == 0
    # ANYmal's 80 N·m drives: 1-3 N·m, one draw per environment
    assert np.all((friction >= 1.0) & (friction <= 3.0)) and np.ptp(friction[:, 0]) > 0.1
    np.testing.assert_array_equal(friction, friction[:, :1].repeat(task.action_size, axis=1))  # ANYmal: one limit
    # another robot's drives get friction in proportion to their torque limits
    go2 = VelocityTask(VelocityTaskConfig.for_robot("go2").quiet())
    go2_sims, _ = randomize(go2.sys, keys, RandomizationConfig(joint_friction_share=(0.0125, 0.0375)))
    go2_friction = np.asarray(go2_sims.joint_friction)
    np.testing.assert_allclose(go2_friction / np.asarray(go2.sys.torque_limit), friction / 80.0, rtol=1e-5)
    unchanged, _ = randomize(task.sys, keys)  # the other parameters keep their random streams
    np.testing.assert_array_equal(np.asarray(unchanged.friction), np.asarray(sims.friction))

    # Joints spinning in the air, motors off: friction slows them by about friction x dt / inertia.
    state = task.reset(jax.random.PRNGKey(0))
    physics = state.pipeline_state
    physics = physics.replace(q=physics.q.at[2].set(5.0), v=physics.v.at[6:].set(3.0))
    loose = task.sys.replace(kp=jnp.zeros(12), kd=jnp.zeros(12))
    step = jax.jit(lambda sim: sim_step(sim, physics, jnp.zeros(12), 100.0)[0].v[6:])
    free, braked = step(loose), step(loose.replace(joint_friction=jnp.full(12, 20.0)))
    assert float(jnp.min(free - braked)) > 0.0


def test_hard_corner_environments_get_every_range_at_its_harder_end():
    task = VelocityTask(VelocityTaskConfig(**QUIET))
    ranges = dict(
        friction=(0.3, 1.0),
        added_base_mass=(-2.0, 4.0),
        kp_scale=(0.8, 1.2),
        kd_scale=(0.9, 1.5),
        motor_strength=(0.8, 1.1),
        rotor_armature_per_torque=(0.0, 6.25e-4),
        joint_friction_share=(0.0, 0.025),
    )
    keys = jax.random.split(jax.random.PRNGKey(0), 400)
    sims, _ = randomize(task.sys, keys, RandomizationConfig(hard_corner_fraction=0.25, **ranges))
    hard = np.asarray(sims.friction) == 0.3
    assert 0.15 < hard.mean() < 0.35
    np.testing.assert_allclose(
        np.asarray(sims.tree.body_mass[hard, 1]), float(task.sys.tree.body_mass[1]) + 4.0, rtol=1e-6
    )
    np.testing.assert_allclose(
        np.asarray(sims.kp[hard]), np.broadcast_to(0.8 * task.sys.kp, sims.kp[hard].shape), rtol=1e-6
    )
    np.testing.assert_allclose(
        np.asarray(sims.kd[hard]), np.broadcast_to(1.5 * task.sys.kd, sims.kd[hard].shape), rtol=1e-6
    )
    np.testing.assert_array_equal(np.asarray(sims.motor_strength[hard]), np.float32(0.8))
    np.testing.assert_allclose(np.asarray(sims.tree.dof_armature[hard, 6:]), 0.05, rtol=1e-6)
    np.testing.assert_array_equal(np.asarray(sims.joint_friction[hard]), 2.0)
    # The others keep independent draws, and the base's centre of mass is random in both.
    assert (
        float(np.asarray(sims.motor_strength[~hard]).std()) > 0.05
        and float(np.asarray(sims.friction[~hard]).min()) > 0.3
    )
    assert float(np.ptp(np.asarray(sims.tree.body_ipos[hard, 1, 0]))) > 0.01


@pytest.mark.slow
def test_the_task_stands_on_rolling_hills_measuring_height_above_them():
    from smoothloco.sim.terrain import RollingHills

    hills = RollingHills(0.08)
    grid = jnp.stack(jnp.meshgrid(jnp.linspace(-10, 10, 401), jnp.linspace(-10, 10, 401)), -1)
    heights = hills(grid)
    assert 0.07 < float(heights.max() - heights.min()) <= 0.08  # trough to crest
    slopes = jax.vmap(jax.vmap(jax.grad(hills)))(grid)
    assert float(jnp.linalg.norm(slopes, axis=-1).max()) < 2.7 * 0.08  # mild: under 12 degrees
    assert hash(hills) == hash(RollingHills(0.08)) and hills == RollingHills(0.08)  # one compiled program
    # half the wavelength: the same ground at half the scale, so twice as steep
    np.testing.assert_allclose(RollingHills(0.08, wavelength=0.65)(grid), hills(2.0 * grid), atol=1e-6)
    with pytest.raises(ValueError, match="task.terrain: hills need a wavelength > 0 m"):
        VelocityTaskConfig(terrain="hills:height=0.08,wavelength=0")

    assert VelocityTaskConfig().ground == hills  # the default ground
    assert VelocityTaskConfig().quiet().terrain == "flat"  # evaluations run on flat ground
    task = VelocityTask(VelocityTaskConfig(**QUIET))
    starts = jax.vmap(task.reset)(jax.random.split(jax.random.PRNGKey(0), 4))
    q = starts.pipeline_state.q
    assert float(jnp.abs(q[:, :2]).max()) > 1.0  # episodes start all over the hills
    # clear of the highest ground under the base and the feet
    footprint = q[:, None, :2] + task._footprint
    np.testing.assert_allclose(q[:, 2] - hills(footprint).max(axis=1), task.robot.init_qpos()[2], atol=1e-6)
    step = jax.jit(jax.vmap(task.step, in_axes=(0, None)))
    state = starts
    for _ in range(25):  # half a second of the standing pose
        state = step(state, jnp.zeros(task.action_size))
    assert not bool(state.done.any())
    above = jax.vmap(task._base_height)(state.pipeline_state)
    assert float(jnp.abs(above - task.config.base_height_target).max()) < 0.03
    with pytest.raises(ValueError, match="task.terrain: hills need a height >= 0 m"):
        VelocityTaskConfig(terrain="hills:height=-0.01")


def test_the_training_ground_is_one_terrain_setting_read_back_from_older_runs():
    from smoothloco.sim.terrain import RollingHills, Slope, flat, stairs
    from smoothloco.train.runs import TrainConfig

    assert VelocityTaskConfig(terrain="slope:degrees=25").ground == Slope(25.0)
    assert VelocityTaskConfig(terrain=" stairs:rise=0.15,run=0.3 ").ground == stairs(rise=0.15, run=0.3)
    assert VelocityTaskConfig.for_robot("go2").ground == RollingHills(0.0412)  # 8 cm scaled to its height
    assert VelocityTaskConfig(terrain="flat").ground == flat
    for text, message in [
        ("pit", "task.terrain: unknown terrain 'pit'.*accepted: flat, hills, slope, ramp, stairs, rough"),
        ("slope", "task.terrain: terrain 'slope' needs degrees=VALUE"),
        ("stairs:riser=0.15", "task.terrain: terrain 'stairs' takes NAME=VALUE with NAME one of rise, run"),
    ]:
        with pytest.raises(ValueError, match=message):
            VelocityTaskConfig(terrain=text)
    # runs saved before the setting named their ground by the hills' height and wavelength
    saved = TrainConfig().to_dict()
    for old, terrain in [({"hills_height": 0.08, "hills_wavelength": 1.3}, "hills:height=0.08,wavelength=1.3"),
                         ({"hills_height": 0.0, "hills_wavelength": 1.3}, "flat"), ({}, "flat")]:  # fmt: skip
        task = {k: v for k, v in saved["task"].items() if k != "terrain"} | old
        read = TrainConfig.from_dict({**saved, "task": task}).task
        assert read.terrain == terrain
    assert TrainConfig.from_dict(saved).task.ground == RollingHills(0.08, 1.3)


def test_swing_height_reward_rewards_following_the_clock():
    from smoothloco.tasks.rewards import feet_swing_height

    task = VelocityTask(VelocityTaskConfig(gait=GaitConfig(frequency=2.0, hip_amplitude=0.0), **QUIET))
    state = task.reset(jax.random.PRNGKey(0))
    target = task.swing_target(jnp.asarray(0.25), jnp.asarray(False))  # LF and RH at mid-swing

    def reward(height):
        return feet_swing_height(_inputs(task, state, foot_height=height, swing_target=target))

    sunk = jnp.where(target > 0, target, -0.03)  # standing feet sunk 3 cm: no penalty
    assert float(reward(sunk)) == pytest.approx(1.0)
    flat = jnp.full(4, -0.03)  # not stepping
    assert float(reward(flat)) < 0.6
    lifted_stance = sunk.at[1].set(0.05)  # a standing foot in the air is a miss
    assert float(reward(lifted_stance)) < 0.9
    # Its gradient lifts the swinging feet and leaves the standing ones alone.
    grad = np.asarray(jax.grad(reward)(flat))
    assert grad[0] > 0 and grad[3] > 0 and grad[1] == 0 and grad[2] == 0


def _inputs(task, state, **override):
    from smoothloco.tasks.rewards import RewardInputs

    zeros3, zeros12 = jnp.zeros(3), jnp.zeros(12)
    fields = dict(
        lin_vel=zeros3,
        ang_vel=zeros3,
        gravity=jnp.array([0.0, 0.0, -1.0]),
        command=zeros3,
        joint_pos=zeros12,
        joint_lower=zeros12 - 1,
        joint_upper=zeros12 + 1,
        joint_default=zeros12,
        torque=zeros12,
        action=zeros12,
        standing=jnp.asarray(0.0),
        last_action=zeros12,
        base_height=jnp.asarray(0.5),
        foot_weight=jnp.ones(4),
        foot_slip=jnp.zeros(4),
        air_time=jnp.zeros(4),
        touchdown=jnp.zeros(4),
        foot_height=jnp.zeros(4),
        swing_target=jnp.zeros(4),
        tracking_sigma=0.25,
        base_height_target=0.52,
        swing_height=task.config.gait.swing_height,
    )
    return RewardInputs(**{**fields, **override})


def test_pushes_and_command_changes_happen_on_schedule():
    config = VelocityTaskConfig(
        pushes=PushConfig(enabled=True, max_speed=1.0, interval_seconds=(0.2, 0.2)),
        commands=CommandConfig(resample_seconds=(0.1, 0.1), zero_probability=0.0),
        randomization=RandomizationConfig(enabled=False),
    )
    task = VelocityTask(config)
    state = task.reset(jax.random.PRNGKey(0))
    state, (_, _, _, _, v, command) = jax.jit(_rollout, static_argnums=0)(task, state, jnp.zeros((20, 12)))
    assert int(state.info["pushes"]) == 2  # every 10 control steps
    assert int(state.info["command_changes"]) == 4  # every 5 control steps
    jump = np.linalg.norm(np.diff(np.asarray(v[:, :2]), axis=0), axis=1)
    assert jump[8] > 10 * np.median(jump)  # the kick at step 10 shows in the base velocity
    assert len({tuple(np.round(c, 5)) for c in np.asarray(command)}) == 5


@pytest.mark.slow
def test_termination_and_truncation():
    tipped = VelocityTask(VelocityTaskConfig(min_base_height=0.7, **QUIET))  # standing counts as fallen
    state = jax.jit(tipped.step)(tipped.reset(jax.random.PRNGKey(0)), jnp.zeros(12))
    assert float(state.done) == 1.0

    env = training.EpisodeWrapper(training.VmapWrapper(VelocityTask(VelocityTaskConfig(**QUIET))), 5, 1)
    state = env.reset(jax.random.split(jax.random.PRNGKey(0), 2))
    step = jax.jit(env.step)
    flags = []
    for _ in range(5):
        state = step(state, jnp.zeros((2, 12)))
        flags.append((float(state.done[0]), float(state.info["truncation"][0])))
    assert flags[:4] == [(0.0, 0.0)] * 4 and flags[4] == (1.0, 1.0)  # time limit is a truncation


@pytest.mark.slow
def test_resets_cut_the_gradient_steps_do_not():
    task = VelocityTask(VelocityTaskConfig(**QUIET))
    state = task.reset(jax.random.PRNGKey(0))

    def reward_after(actions):
        s, (_, r, *_) = _rollout(task, state, actions)
        return r.sum()

    grad = jax.jit(jax.grad(reward_after))(jnp.zeros((2, 12)))
    assert float(jnp.abs(grad).sum()) > 0.0  # rewards depend on actions through the simulator
    fresh = jax.grad(lambda a: task.reset(jax.random.PRNGKey(1)).obs.sum() + 0.0 * a.sum())(jnp.zeros(12))
    assert float(jnp.abs(fresh).sum()) == 0.0


@pytest.mark.parametrize(
    "make,message",
    [
        (lambda: CommandConfig(lin_vel_x=(1.0, -1.0)), "low <= high"),
        (
            lambda: VelocityTaskConfig(reward_weights={"tracking_lin_vel": 1.0, "dance": 2.0}),
            "unknown reward terms \\['dance'\\]",
        ),
        (lambda: VelocityTaskConfig(control_dt=0.02, sim_dt=0.05), "whole number >= 1"),
        (lambda: VelocityTaskConfig(contact="rigid"), "accepted: hard, smooth, soft"),
        (lambda: PushConfig(max_speed=-1.0), "max_speed must be >= 0"),
        (lambda: RandomizationConfig(friction=(-0.1, 1.0)), "must not go below 0"),
        (
            lambda: VelocityTaskConfig(randomization=RandomizationConfig(action_delay=(0.0, 0.04))),
            "must not exceed control_dt",
        ),
        (lambda: VelocityTaskConfig(obs_history=0), "obs_history must be a whole number of frames >= 1"),
        (lambda: VelocityTaskConfig(velocity_error_window=-1.0), "velocity_error_window must be >= 0"),
        (lambda: VelocityTrimConfig(hold=-0.1), "velocity_trim.hold must be >= 0"),
        (lambda: VelocityTrimConfig(rate=float("nan")), "task.velocity_trim"),
        (lambda: RandomizationConfig(hard_corner_fraction=1.5), "hard_corner_fraction must be in \\[0, 1\\]"),
        (lambda: VelocityTaskConfig(sharpness=(300.0, 0.0)), "sharpness must be two values > 0"),
    ],
)
def test_bad_task_config(make, message):
    with pytest.raises(ValueError, match=message):
        make()


def test_quiet_task_is_the_one_evaluations_run():
    noisy = VelocityTaskConfig(obs_noise=1.0, commands=CommandConfig(zero_probability=0.3))
    quiet = noisy.quiet(contact="hard")
    assert not quiet.pushes.enabled and not quiet.randomization.enabled and quiet.obs_noise == 0.0
    assert min(quiet.commands.resample_seconds) >= 1e9 and quiet.commands.zero_probability == 0.3
    assert quiet.contact == "hard" and quiet.reward_weights == noisy.reward_weights


def test_soft_contact_stiffness_comes_from_the_task_config():
    task = VelocityTask(VelocityTaskConfig(contact="soft", sim_dt=0.0025, soft_stiffness=5e3, soft_damping=50.0))
    assert task.sys.contact.soft_stiffness == 5e3 and task.sys.contact.soft_damping == 50.0
    with pytest.raises(ValueError, match="soft_stiffness must be > 0"):
        VelocityTaskConfig(soft_stiffness=0.0)


@pytest.mark.slow
def test_observation_without_base_velocity_drops_the_terms_that_need_it_alone():
    full = VelocityTask(VelocityTaskConfig(**QUIET))
    blind = VelocityTask(VelocityTaskConfig(observe_base_lin_vel=False, gait=GaitConfig(recovery_speed=0.0), **QUIET))
    assert blind.observation_size == full.observation_size - 6  # base_lin_vel and velocity_error_average
    key, action = jax.random.PRNGKey(3), jnp.full(12, 0.3)
    seen = [jax.jit(lambda k, t=task: t.step(t.reset(k), action).obs)(key) for task in (full, blind)]
    assert float(jnp.abs(seen[0][:3]).max()) > 1e-3  # the full observation's velocity is not zero
    average = observation_slice(full.config, "velocity_error_average")
    assert float(jnp.abs(seen[0][average]).min()) > 1e-4 and average.stop == full.observation_size
    np.testing.assert_allclose(seen[1], seen[0][3 : average.start], atol=1e-6)


@pytest.mark.slow
def test_the_average_velocity_error_follows_command_minus_measured():
    window = 0.5
    task = VelocityTask(
        VelocityTaskConfig(
            velocity_error_window=window, obs_noise=0.0, commands=CommandConfig(zero_probability=0.0), **QUIET
        )
    )
    state = jax.jit(task.reset)(jax.random.PRNGKey(1))
    assert float(jnp.abs(state.info["controller"].error_average).max()) == 0.0
    keep, average = np.exp(-task.config.control_dt / window), np.zeros(3)
    step = jax.jit(task.step)
    for _ in range(5):
        state = step(state, jnp.zeros(12))
        physics = state.pipeline_state
        body_velocity = np.asarray(rotate_inverse(physics.q[3:7], physics.v[:3]))
        measured = np.array([body_velocity[0], body_velocity[1], float(physics.v[5])])
        average = keep * average + (1 - keep) * (np.asarray(state.info["command"]) - measured)
    np.testing.assert_allclose(np.asarray(state.info["controller"].error_average), average, atol=1e-5)
    scale = 2.0  # the term's scale in OBS_LAYOUT
    np.testing.assert_allclose(
        np.asarray(state.obs[observation_slice(task.config, "velocity_error_average")]), scale * average, atol=1e-5
    )
    assert np.abs(average).max() > 0.05  # the command is not met from standing: the average sees it


def test_velocity_trim_integrates_the_average_error_after_the_hold():
    trim_config = VelocityTrimConfig(rate=2.0, hold=0.1, freeze=0.4, limit=0.5, restart_tolerance=0.1)
    task = VelocityTask(VelocityTaskConfig(velocity_trim=trim_config, **QUIET).quiet())
    dt, hold_steps = task.config.control_dt, 5
    walk = jnp.array([0.5, 0.0, 0.2])
    before = controller.initial_state(task.controller)._replace(
        trim=jnp.array([0.1, 0.0, 0.0]), trim_command=walk, trim_steps=jnp.array(hold_steps - 1.0)
    )

    def after(command=walk, **changes):
        return controller.trim_update(task.controller, command, before._replace(**changes))

    small, large = jnp.array([0.1, -0.05, 0.3]), jnp.array([0.3, 0.3, 0.0])  # planar norms 0.11, 0.42
    moved = after(error_average=small)
    assert moved.trim_steps == hold_steps
    np.testing.assert_allclose(moved.trim, [0.1 + 2 * dt * 0.1, -2 * dt * 0.05, 2 * dt * 0.3], atol=1e-7)
    held = after(error_average=small, trim_steps=jnp.array(hold_steps - 2.0))  # still within the hold
    np.testing.assert_array_equal(held.trim, before.trim)
    np.testing.assert_array_equal(after(error_average=large).trim, before.trim)  # frozen
    standing_still = after(jnp.array([0.05, 0.0, 0.0]), error_average=small)
    np.testing.assert_array_equal(standing_still.trim, 0.0)  # a new command: restarted, and standing
    assert standing_still.trim_steps == 0
    clipped = after(error_average=small, trim=jnp.array([0.5, -0.5, 0.0]))
    np.testing.assert_allclose(clipped.trim, [0.5, -0.5, 2 * dt * 0.3], atol=1e-7)


def test_the_trim_restarts_for_a_new_command_not_for_a_joystick_s_small_changes():
    """A command within the restart tolerance of the one the trim was started for keeps the trim
    and that reference; one further away restarts it, for itself."""
    task = VelocityTask(VelocityTaskConfig(**QUIET).quiet())
    tolerance = task.config.velocity_trim.restart_tolerance
    walk = jnp.array([0.8, 0.0, 0.0])
    running = controller.initial_state(task.controller)._replace(
        trim=jnp.array([0.1, 0.0, 0.0]), trim_command=walk, trim_steps=jnp.array(100.0), error_average=jnp.full(3, 0.05)
    )
    update = jax.jit(lambda command, state: controller.trim_update(task.controller, command, state))
    jitter = walk + jnp.array([1e-3, -1e-3, 1e-3])
    kept = update(jitter, running)
    np.testing.assert_array_equal(kept.trim_command, walk)  # the reference stays: noise cannot drift it away
    assert float(kept.trim[0]) > 0.1
    near = update(walk + jnp.array([0.9 * tolerance, 0.0, 0.0]), running)
    np.testing.assert_array_equal(near.trim_command, walk)
    far = walk + jnp.array([0.0, 0.8 * tolerance, 0.8 * tolerance])  # norm 1.13 tolerance
    restarted = update(far, running)
    np.testing.assert_array_equal(restarted.trim, 0.0)
    np.testing.assert_array_equal(restarted.trim_command, far)
    assert restarted.trim_steps == 0


def test_a_ramping_jittering_command_keeps_the_trim_working():
    """Over a command that changes every period (a ramp to 0.6 m/s, then ±1e-3 noise), the trim
    integrates as it does for the constant command it settles on; restarting at every change,
    as a zero tolerance does, keeps it at zero."""
    rng = np.random.default_rng(0)
    steps = 150
    ramp = np.minimum(np.arange(steps) * 0.02 / 1.0, 0.6)  # 0.6 m/s after 30 periods
    commands = np.stack([ramp, np.zeros(steps), np.zeros(steps)], axis=1) + rng.uniform(-1e-3, 1e-3, (steps, 3))
    trims = {}
    for tolerance in (0.0, 0.1):
        config = VelocityTaskConfig(velocity_trim=VelocityTrimConfig(restart_tolerance=tolerance), **QUIET).quiet()
        task = VelocityTask(config)
        state = controller.initial_state(task.controller)
        sensors = controller.Sensors(
            joint_pos=jnp.asarray(task.robot.default_pose), joint_vel=jnp.zeros(12), base_ang_vel=jnp.zeros(3),
            gravity=jnp.array([0.0, 0.0, -1.0]), base_lin_vel=jnp.array([0.45, 0.0, 0.0]),
        )  # fmt: skip
        observe = jax.jit(lambda c, s: controller.observe(task.controller, sensors, c, s)[1])
        for command in commands:  # a robot walking at 0.45 m/s whatever it is asked
            state = controller.act(task.controller, jnp.zeros(12), observe(jnp.asarray(command, jnp.float32), state))[1]
        trims[tolerance] = float(state.trim[0])
    assert trims[0.0] == 0.0 < 0.05 < trims[0.1]


@pytest.mark.slow
def test_the_observed_command_carries_the_trim_where_the_loop_is_closed():
    """Training (the default) leaves the loop open; the evaluations' task closes it."""
    command = jnp.array([0.3, 0.0, 0.0])
    training = VelocityTaskConfig(obs_noise=0.0, **QUIET)
    assert training.trims_command and not training.velocity_trim.closed_loop
    for config, closed in ((training, False), (training.quiet(), True)):
        task = VelocityTask(config)
        state = jax.jit(task.reset_commanded)(jax.random.PRNGKey(1), command)
        step = jax.jit(task.step)
        for _ in range(30):  # standing still on a walking command: the average error grows, then the trim
            state = step(state, jnp.zeros(12))
        trim = np.asarray(state.info["controller"].trim)
        assert (trim[0] > 0.01) == closed
        np.testing.assert_allclose(state.obs[observation_slice(config, "command")], command + trim, atol=1e-6)
    assert int(state.info["controller"].trim_steps) == round(config.velocity_trim.hold / config.control_dt)  # saturated
    for off in (dict(velocity_trim=VelocityTrimConfig(rate=0.0)), dict(velocity_error_window=0.0),
                dict(observe_base_lin_vel=False, gait=GaitConfig(recovery_speed=0.0))):  # fmt: skip
        assert not VelocityTaskConfig(**off).trims_command


@pytest.mark.slow
def test_observation_history_stacks_the_last_frames_newest_first():
    task = VelocityTask(VelocityTaskConfig(obs_history=3, **QUIET))
    n = VelocityTask(VelocityTaskConfig(**QUIET)).observation_size
    assert task.observation_size == 3 * n
    state = jax.jit(task.reset)(jax.random.PRNGKey(5))
    seen = [state.obs]
    for action in jax.random.uniform(jax.random.PRNGKey(4), (2, 12), minval=-0.5, maxval=0.5):
        state = jax.jit(task.step)(state, action)
        seen.append(state.obs)
    (f0, *reset_rest), (f1, *first_rest), (f2, *second_rest) = (jnp.split(obs, 3) for obs in seen)
    assert float(jnp.abs(f1 - f0).max()) > 1e-3 and float(jnp.abs(f2 - f1).max()) > 1e-3
    for seen_rest, expected in ((reset_rest, [f0, f0]), (first_rest, [f0, f0]), (second_rest, [f1, f0])):
        np.testing.assert_array_equal(jnp.concatenate(seen_rest), jnp.concatenate(expected))
    command = jnp.array([0.5, 0.0, 0.2])  # a scripted start shows its command in every frame
    frames = jnp.split(jax.jit(task.reset_commanded)(jax.random.PRNGKey(5), command).obs, 3)
    np.testing.assert_array_equal([frame[9:12] for frame in frames], [command] * 3)


def test_training_progress_moves_the_contact_sharpness_from_start_to_end():
    """The task owns its sharpness: a reset is at the start of ``task.sharpness``; a trainer's
    progress (0 to 1) moves it geometrically to the end, on one state or a batch's (the grid
    evaluation checks that the step simulates the contact set)."""
    task = VelocityTask(VelocityTaskConfig(sharpness=(300.0, 1200.0), **QUIET))
    state = jax.jit(task.reset)(jax.random.PRNGKey(0))
    assert float(state.info["sharpness"]) == 300.0
    for progress, expected in ((0.0, 300.0), (0.5, 600.0), (1.0, 1200.0), (2.0, 1200.0)):
        np.testing.assert_allclose(
            float(task.with_training_progress(state, progress).info["sharpness"]), expected, rtol=1e-6
        )
    batch = jax.tree.map(lambda x: jnp.stack([x] * 3), state)
    sharpened = task.with_training_progress(batch, 1.0).info["sharpness"]
    np.testing.assert_allclose(np.asarray(sharpened), np.full(3, 1200.0), rtol=1e-6)
