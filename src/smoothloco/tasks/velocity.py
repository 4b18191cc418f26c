"""Velocity tracking for a quadruped (``VelocityTaskConfig.robot``), as a Brax ``Env``.

``reset``/``step`` are pure functions of a ``brax.envs.base.State`` whose ``pipeline_state`` is
our ``SimState``, so Brax's wrappers and agents run on it unchanged, and ``jax.grad`` goes
through ``step`` for SHAC. Time limits and automatic resets are left to Brax's
``EpisodeWrapper``/``AutoResetWrapper`` as in every Brax environment.

What the robot itself runs (observation, memory, joint targets) is ``tasks.controller``: the
task observes through its ``observe`` at the end of a step and turns the agent's action into
joint targets through its ``act``, so training, evaluation and the exported graph share it.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from brax.envs.base import Env, State

from smoothloco.robot import load_robot
from smoothloco.sim import ContactConfig, Sim, SimState, StepInfo, make_sim, terrain
from smoothloco.sim import step as sim_step
from smoothloco.sim.rotation import rotate, rotate_inverse
from smoothloco.tasks import controller, gait
from smoothloco.tasks.config import VelocityTaskConfig
from smoothloco.tasks.controller import (
    ControllerState,
    Sensors,
    observation_layout,
)
from smoothloco.tasks.rewards import REWARD_TERMS, RewardInputs

TERRAIN_SPAWN = 5.0  # m; off flat ground, each episode starts at a random (x, y) within ±this
# On a stairs course a run's first episodes start on the lower levels, up to this fraction of
# them (legged_gym starts on its 5 easiest of 10); later ones where the curriculum sends them.
CURRICULUM_START = 0.5
# An episode on a stairs course earns the next level when the robot walked at least this share of
# the path its commands asked for (and left its pyramid), and the level below when under half.
CURRICULUM_TRACKED = 0.8
PRIVILEGED_EXTRA = 10  # friction, base mass offset, foot gaps (4), foot contact weights (4)


OBS_SIZE = sum(size for _, size, *_ in observation_layout(VelocityTaskConfig()))  # the default actor's


class VelocityTask(Env):
    """Follow a commanded forward, lateral and yaw velocity; pushed and randomized."""

    def __init__(self, config: VelocityTaskConfig | None = None):
        self.config = config or VelocityTaskConfig()
        self.robot = load_robot(self.config.robot)
        contact = ContactConfig(
            self.config.contact, soft_stiffness=self.config.soft_stiffness, soft_damping=self.config.soft_damping
        )
        ground = self.config.ground
        envelope = self.config.motor_envelope and self.robot.velocity_limit is not None
        self.sys: Sim = make_sim(self.robot, contact, dt=self.config.sim_dt, terrain=ground, motor_envelope=envelope)
        self._nominal_base_mass = float(self.robot.mj_model().body_mass[1])
        self._default_pose = jnp.asarray(self.robot.default_pose, jnp.float32)
        self._joint_lower = jnp.asarray(np.maximum(self.robot.joint_lower, -1e3), jnp.float32)
        self._joint_upper = jnp.asarray(np.minimum(self.robot.joint_upper, 1e3), jnp.float32)
        self.controller = controller.ControllerConfig.from_task(self.config, self.robot)
        measured = self.controller.measured
        self._obs_noise = jnp.asarray(controller.per_entry(measured, 3), jnp.float32)
        self._measured_size = sum(size for _, size, *_ in measured)
        self._phase_shifts = jnp.asarray(gait.leg_phase_shifts(self.robot), jnp.float32)
        # the base and the feet, (x, y) in the base frame at the default pose: a spawn stands
        # clear of the highest ground under any of them
        self._footprint = jnp.asarray(np.vstack([[0.0, 0.0], self.robot.foot_positions()[:, :2]]), jnp.float32)
        self._course = ground if isinstance(ground, terrain.StairsCourse) else None

    # -- Brax Env interface -------------------------------------------------------------
    @property
    def observation_size(self):
        actor = self.controller.frame_size * self.config.obs_history
        if self.config.privileged_critic:
            return {"state": (actor,), "privileged_state": (self._measured_size + PRIVILEGED_EXTRA,)}
        return actor

    @property
    def action_size(self) -> int:
        return len(self.robot.joint_names)

    @property
    def backend(self) -> str:
        return "smoothloco"

    @property
    def control_steps_per_second(self) -> float:
        return 1.0 / self.config.control_dt

    def reset(self, rng: jax.Array) -> State:
        delay_key = jax.random.fold_in(rng, 1)  # apart from the split below, whose streams predate the delay
        rng, pose_key, command_key, push_key, phase_key = jax.random.split(rng, 5)
        q = jnp.asarray(self.robot.init_qpos(), jnp.float32)
        q = q.at[7:].add(jax.random.uniform(pose_key, (12,), minval=-0.05, maxval=0.05))
        level = None
        if self._course is not None:  # on a pyramid of one of the easier levels
            level_key, spawn_key = jax.random.split(jax.random.fold_in(rng, 3))
            level = jax.random.randint(level_key, (), 0, max(1, round(CURRICULUM_START * self._course.levels)))
            q = self._placed(q, self._course.spawn(level, spawn_key))
        elif self.sys.terrain != terrain.flat:  # start anywhere, at the standing height above the ground
            xy = jax.random.uniform(jax.random.fold_in(rng, 2), (2,), minval=-TERRAIN_SPAWN, maxval=TERRAIN_SPAWN)
            q = self._placed(q, xy)
        physics = SimState(q=q, v=jnp.zeros(q.shape[0] - 1, jnp.float32))
        command, command_countdown = self._sample_command(command_key)
        phase = jax.random.uniform(phase_key) if self.config.gait.frequency > 0 else 0.0
        info = {
            "rng": rng,
            "command": command,
            "command_countdown": command_countdown,
            "push_countdown": self._sample_push_interval(push_key),
            "air_time": jnp.zeros(4),
            "sharpness": jnp.asarray(self.config.sharpness[0], jnp.float32),  # with_training_progress moves it
            "pushes": jnp.zeros((), jnp.int32),
            "command_changes": jnp.zeros((), jnp.int32),
            "joint_target": jnp.asarray(self.robot.default_pose, jnp.float32),  # what the motors last received
            "action_delay_steps": self._sample_action_delay(delay_key),
            "controller": controller.initial_state(self.controller, phase),  # the robot-side memory
        }
        if level is not None:
            info.update(self._curriculum_start(level, q))
        obs, info["controller"] = self._first_observation(physics, info)
        metrics = {f"reward/{name}": jnp.zeros(()) for name in self._active_terms()}
        metrics.update(lin_vel_error=jnp.zeros(()), yaw_rate_error=jnp.zeros(()))
        if level is not None:
            metrics["terrain_level"] = jnp.zeros(())
        return State(physics, obs, jnp.zeros(()), jnp.zeros(()), metrics, info)

    def reset_commanded(self, rng: jax.Array, command: jax.Array) -> State:
        """``reset`` with ``command`` (vx, vy, yaw rate) in force, for scripted evaluations: the
        first observation, and the history it fills, show it."""
        state = self.reset(rng)
        info = {**state.info, "command": command}
        obs, info["controller"] = self._first_observation(state.pipeline_state, info)
        return state.replace(obs=obs, info=info)

    def next_episode(self, ended: State, fresh: State) -> State:
        """The episode after ``ended`` (one environment's states): ``fresh``, moved on a stairs
        course to the level ``ended`` earned, as legged_gym's curriculum: one up when the robot
        left its pyramid (ended farther from its start than the pyramid's half width) and walked
        at least ``CURRICULUM_TRACKED`` of the path its commands asked for; one down when it fell
        or walked less than half of it; a random level for one that climbs past the last.
        Commands turn the robot (a yaw rate) and change every few seconds, so the path walked,
        not the distance from the start, is what is compared with the commands. Trainers call it
        where they start new episodes."""
        course = self._course
        if course is None:
            return fresh
        info = ended.info
        left = jnp.linalg.norm(ended.pipeline_state.q[:2] - info["spawn_xy"]) > course.base_half
        walked, asked = info["walked_path"], info["commanded_path"]
        up = left & (walked >= CURRICULUM_TRACKED * asked) & (info["fell"] == 0)
        down = (info["fell"] > 0) | (walked < 0.5 * asked)
        level = info["terrain_level"] + up.astype(jnp.int32) - down.astype(jnp.int32)
        level_key, spawn_key = jax.random.split(jax.random.fold_in(fresh.info["rng"], 4))
        level = jnp.where(level >= course.levels, jax.random.randint(level_key, (), 0, course.levels), level)
        level = jnp.maximum(level, 0)
        q = self._placed(fresh.pipeline_state.q, course.spawn(level, spawn_key))
        physics = fresh.pipeline_state.replace(q=q)
        info = {**fresh.info, **self._curriculum_start(level, q)}
        obs, info["controller"] = self._first_observation(physics, info)
        return fresh.replace(pipeline_state=physics, obs=obs, info=info)

    def _placed(self, q: jax.Array, xy: jax.Array) -> jax.Array:
        """``q`` moved to ``xy``, standing at the robot's height above the ground there."""
        return q.at[:2].set(xy).at[2].set(float(self.robot.init_qpos()[2]) + self._spawn_height(xy))

    @staticmethod
    def _curriculum_start(level: jax.Array, q: jax.Array) -> dict:
        """What an episode on a stairs course keeps for its curriculum: its level, where it
        started, the paths its commands asked for and the base walked so far, and whether it fell."""
        zero = jnp.zeros(())
        return {"terrain_level": jnp.asarray(level, jnp.int32), "spawn_xy": q[:2], "commanded_path": zero,
                "walked_path": zero, "fell": zero}  # fmt: skip

    def with_training_progress(self, state: State, progress: jax.Array | float) -> State:
        """``state`` (one environment's or a batch's) at ``progress`` through training, 0 at the
        start and 1 at the end: the smooth contact's sharpness moves geometrically from
        ``config.sharpness[0]`` to ``config.sharpness[1]``. A trainer calls it before its steps and
        after its resets; a state fresh from ``reset`` is at the start."""
        start, end = self.config.sharpness
        sharpness = start * (end / start) ** jnp.clip(progress, 0.0, 1.0)
        return state.replace(info={**state.info, "sharpness": jnp.full_like(state.info["sharpness"], sharpness)})

    def step(self, state: State, action: jax.Array) -> State:
        return self.step_with_contact(state, action)[0]

    def step_with_contact(
        self, state: State, action: jax.Array, kick: jax.Array | None = None
    ) -> tuple[State, StepInfo]:
        """``step`` that also returns the contact of its last simulation step (torques, foot
        velocities, gaps), for evaluation. ``kick`` (m/s, world x/y) is a scripted push added to
        the base velocity where random pushes land: after the physics, before the observation."""
        cfg = self.config
        info = dict(state.info)
        rng, noise_key, command_key, push_key, push_dir_key = jax.random.split(info["rng"], 5)
        last_action = info["controller"].last_action
        target, memory = controller.act(self.controller, action, info["controller"])

        def substep(physics: SimState, k: jax.Array) -> tuple[SimState, StepInfo]:
            # The motors keep the previous target for the environment's action delay.
            applied = jnp.where(k < info["action_delay_steps"], info["joint_target"], target)
            return sim_step(self.sys, physics, applied, info["sharpness"])

        physics, contacts = jax.lax.scan(substep, state.pipeline_state, jnp.arange(cfg.substeps))
        # The last simulation step's contact, with the motors' power averaged over the control
        # step: one simulation step's would sample the PD transient at one phase of it.
        contact = jax.tree.map(lambda x: x[-1], contacts).replace(power=jnp.mean(contacts.power))
        # A non-finite step keeps the last good state and ends the episode, so no NaN reaches
        # observations, rewards or gradients.
        physics = jax.tree.map(lambda new, old: jnp.where(contact.finite, new, old), physics, state.pipeline_state)

        # The clock at the end of the step, when the feet are measured.
        rewards_in, air_time = self._reward_inputs(physics, info, contact, action, last_action, memory.phase)
        weights = cfg.reward_weights
        terms = {name: weights[name] * REWARD_TERMS[name](rewards_in) * cfg.control_dt for name in self._active_terms()}
        reward = sum(terms.values())

        done = self._terminated(physics, contact, rewards_in.gravity)
        info.update(rng=rng, air_time=air_time, joint_target=target, controller=memory)
        if self._course is not None:  # what the curriculum judges the episode by (next_episode)
            asked = jnp.linalg.norm(info["command"][:2]) * cfg.control_dt
            walked = jnp.linalg.norm(physics.v[:2]) * cfg.control_dt
            info.update(
                commanded_path=info["commanded_path"] + asked, walked_path=info["walked_path"] + walked, fell=done
            )
        info = self._update_command(info, command_key)
        physics, info = self._maybe_push(physics, info, push_key, push_dir_key)
        if kick is not None:
            physics = physics.replace(v=physics.v.at[:2].add(kick))
        obs, info["controller"] = self._observe(physics, info, contact, noise_key, noise=cfg.obs_noise > 0)
        metrics = dict(state.metrics)  # keep keys that wrappers (Brax's PPO) add
        metrics.update({f"reward/{k}": v for k, v in terms.items()})
        metrics.update(
            lin_vel_error=jnp.linalg.norm(rewards_in.command[:2] - rewards_in.lin_vel[:2]),
            yaw_rate_error=jnp.abs(rewards_in.command[2] - rewards_in.ang_vel[2]),
        )
        if self._course is not None:  # how far up the curriculum the robots are
            metrics["terrain_level"] = info["terrain_level"].astype(jnp.float32)
        state = state.replace(pipeline_state=physics, obs=obs, reward=reward, done=done, metrics=metrics, info=info)
        return state, contact

    def gait_offset(self, phase: jax.Array) -> jax.Array:
        """Joint-target offsets of the trot generator at ``phase`` (zero when it is off)."""
        return controller.gait_offset(self.controller, phase)

    def at_rest(self, command: jax.Array, base_lin_vel: jax.Array) -> jax.Array:
        """Whether the robot should stand (``controller.at_rest``)."""
        return controller.at_rest(self.controller, command, base_lin_vel)

    def swing_target(self, phase: jax.Array, at_rest: jax.Array) -> jax.Array:
        """(n_feet,) foot heights the clock asks for; all zero (stand) ``at_rest``."""
        gait_cfg = self.config.gait
        if gait_cfg.frequency == 0:
            return jnp.zeros(len(self.robot.foot_geoms))
        return ~at_rest * gait_cfg.swing_height * gait.swing_profile(phase, self._phase_shifts)

    # -- pieces ---------------------------------------------------------------------------
    def _first_observation(self, physics: SimState, info: dict) -> tuple[jax.Array | dict, ControllerState]:
        """An episode's first observation (noise-free, feet at rest) and the memory it leaves."""
        return self._observe(physics, info, _resting_contact(physics), jax.random.PRNGKey(0), noise=False)

    def _active_terms(self) -> list[str]:
        return [name for name, w in self.config.reward_weights.items() if w != 0.0]

    def _sample_command(self, key: jax.Array) -> tuple[jax.Array, jax.Array]:
        c = self.config.commands
        kx, ky, kw, kz, kt = jax.random.split(key, 5)
        command = jnp.stack(
            [
                jax.random.uniform(kx, minval=c.lin_vel_x[0], maxval=c.lin_vel_x[1]),
                jax.random.uniform(ky, minval=c.lin_vel_y[0], maxval=c.lin_vel_y[1]),
                jax.random.uniform(kw, minval=c.yaw_rate[0], maxval=c.yaw_rate[1]),
            ]
        )
        command = jnp.where(jax.random.bernoulli(kz, c.zero_probability), 0.0, command)
        seconds = jax.random.uniform(kt, minval=c.resample_seconds[0], maxval=c.resample_seconds[1])
        return command, jnp.maximum(1, jnp.round(seconds / self.config.control_dt)).astype(jnp.int32)

    def _sample_action_delay(self, key: jax.Array) -> jax.Array:
        """Simulation steps by which this environment's motors lag the joint targets (0 without randomization)."""
        r, dt = self.config.randomization, self.config.sim_dt
        if not r.enabled:
            return jnp.zeros((), jnp.int32)
        low, high = round(r.action_delay[0] / dt), round(r.action_delay[1] / dt)
        return jax.random.randint(key, (), low, high + 1)

    def _sample_push_interval(self, key: jax.Array) -> jax.Array:
        p = self.config.pushes
        seconds = jax.random.uniform(key, minval=p.interval_seconds[0], maxval=p.interval_seconds[1])
        return jnp.maximum(1, jnp.round(seconds / self.config.control_dt)).astype(jnp.int32)

    def _update_command(self, info: dict, key: jax.Array) -> dict:
        countdown = info["command_countdown"] - 1
        new_command, new_countdown = self._sample_command(key)
        resample = countdown <= 0
        info["command"] = jnp.where(resample, new_command, info["command"])
        info["command_countdown"] = jnp.where(resample, new_countdown, countdown)
        info["command_changes"] = info["command_changes"] + resample.astype(jnp.int32)
        return info

    def _maybe_push(self, physics: SimState, info: dict, key: jax.Array, dir_key: jax.Array) -> tuple[SimState, dict]:
        p = self.config.pushes
        if not p.enabled:
            return physics, info
        countdown = info["push_countdown"] - 1
        push = countdown <= 0
        angle = jax.random.uniform(dir_key, maxval=2 * jnp.pi)
        speed = jax.random.uniform(key, maxval=p.max_speed)
        kick = push * speed * jnp.array([jnp.cos(angle), jnp.sin(angle)])
        physics = physics.replace(v=physics.v.at[:2].add(kick))
        info["push_countdown"] = jnp.where(push, self._sample_push_interval(key), countdown)
        info["pushes"] = info["pushes"] + push.astype(jnp.int32)
        return physics, info

    def _reward_inputs(
        self,
        physics: SimState,
        info: dict,
        contact: StepInfo,
        action: jax.Array,
        last_action: jax.Array,
        phase: jax.Array,
    ):
        quat = physics.q[3:7]
        lin_vel = rotate_inverse(quat, physics.v[:3])
        at_rest = self.at_rest(info["command"], lin_vel)
        in_contact = contact.weight > 0.5
        air_time = info["air_time"] + self.config.control_dt
        touchdown = in_contact & (info["air_time"] > self.config.control_dt)
        inputs = RewardInputs(
            lin_vel=lin_vel,
            ang_vel=physics.v[3:6],
            gravity=rotate_inverse(quat, jnp.array([0.0, 0.0, -1.0])),
            command=info["command"],
            joint_pos=physics.q[7:],
            joint_lower=self._joint_lower,
            joint_upper=self._joint_upper,
            joint_default=self._default_pose,
            torque=contact.torque,
            action=action,
            last_action=last_action,
            base_height=self._base_height(physics),
            foot_weight=contact.weight,
            foot_slip=jnp.sqrt(jnp.sum(contact.foot_velocity[:, 1:] ** 2, axis=-1) + 1e-8),
            air_time=air_time,
            touchdown=touchdown.astype(jnp.float32),
            foot_height=contact.gap,
            swing_target=self.swing_target(phase, at_rest),
            standing=at_rest.astype(jnp.float32),
            tracking_sigma=self.config.tracking_sigma,
            base_height_target=self.config.base_height_target,
            swing_height=self.config.gait.swing_height,
        )
        return inputs, jnp.where(in_contact, 0.0, air_time)

    def _spawn_height(self, xy: jax.Array) -> jax.Array:
        """The highest ground under the base and the feet of a robot standing unturned at ``xy``:
        on a slope or a step no foot starts inside the ground (the robot drops onto it instead)."""
        return jnp.max(self.sys.terrain(xy + self._footprint))

    def _base_height(self, physics: SimState) -> jax.Array:
        """Height of the base above the ground under it."""
        return physics.q[2] - self.sys.terrain(physics.q[:2])

    def _terminated(self, physics: SimState, contact: StepInfo, gravity: jax.Array) -> jax.Array:
        cfg = self.config
        fallen = self._base_height(physics) < cfg.min_base_height
        knee_down = jnp.any(contact.knee_height < cfg.min_knee_height)
        tilted = gravity[2] > -jnp.cos(jnp.deg2rad(cfg.max_tilt_deg))
        diverged = ~contact.finite | (jnp.max(jnp.abs(physics.v)) > cfg.max_speed)
        return (fallen | knee_down | tilted | diverged).astype(jnp.float32)

    def _observe(
        self, physics: SimState, info: dict, contact: StepInfo, key: jax.Array, noise: bool
    ) -> tuple[jax.Array | dict, ControllerState]:
        """The controller's observation of ``physics`` (with sensor noise if ``noise``) and its
        memory after it; with a privileged critic, the critic's noise-free measurement too."""
        sensors = self.sensors(physics)
        sample = None
        if noise:
            draw = jax.random.uniform(key, (self._measured_size,), minval=-1.0, maxval=1.0)
            sample = self.config.obs_noise * self._obs_noise * draw
        obs, memory = controller.observe(self.controller, sensors, info["command"], info["controller"], sample)
        if not self.config.privileged_critic:
            return obs, memory
        clean = controller.measurement(self.controller, sensors, info["command"], memory)
        extra = jnp.concatenate(
            [
                jnp.atleast_1d(self.sys.friction),
                jnp.atleast_1d(self.sys.tree.body_mass[1] - self._nominal_base_mass),
                jnp.clip(contact.gap, -0.05, 0.2),
                contact.weight,
            ]
        )
        privileged = jnp.concatenate([clean * self.controller.observation_scale, extra])
        return {"state": obs, "privileged_state": privileged}, memory

    def sensors(self, physics: SimState) -> Sensors:
        """What a robot's sensors read of ``physics``: base-frame velocities and gravity, and the
        height scan where the task has one."""
        quat = physics.q[3:7]
        return Sensors(
            joint_pos=physics.q[7:],
            joint_vel=physics.v[6:],
            base_ang_vel=physics.v[3:6],
            gravity=rotate_inverse(quat, jnp.array([0.0, 0.0, -1.0])),
            base_lin_vel=rotate_inverse(quat, physics.v[:3]),
            height_scan=self.height_scan(physics),
        )

    def height_scan(self, physics: SimState) -> jax.Array:
        """The base's height above the ground at each scan point (``HeightScanConfig``), the
        points turned with the base's heading; (0,) without a scan."""
        points = np.asarray(self.config.height_scan.points, np.float32).reshape(-1, 2)
        if not len(points):
            return jnp.zeros(0, physics.q.dtype)
        forward = rotate(physics.q[3:7], jnp.array([1.0, 0.0, 0.0]))[:2]
        cos, sin = forward / jnp.sqrt(jnp.sum(forward**2) + 1e-12)
        heading = jnp.array([[cos, -sin], [sin, cos]])
        return physics.q[2] - self.sys.terrain(physics.q[:2] + points @ heading.T)


def _resting_contact(physics: SimState) -> StepInfo:
    """Placeholder contact for the reset observation: feet on the ground, nothing moving."""
    n = 4
    return StepInfo(
        gap=jnp.zeros(n),
        weight=jnp.ones(n),
        impulse=jnp.zeros((n, 3)),
        foot_velocity=jnp.zeros((n, 3)),
        torque=jnp.zeros(12),
        power=jnp.zeros(()),
        knee_height=jnp.ones(n),
        finite=jnp.array(True),
    )
