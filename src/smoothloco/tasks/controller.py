"""The robot-side controller, defined once: sensor readings, command and memory in, joint
position targets and memory out.

Everything the robot runs around the policy network lives here: the gait phase clock (and
hiding it while standing, with the recovery-speed rule), the exponential average of the
velocity error, the velocity trim (restart, hold, freeze, clip), the observation history, the
last action, per-entry observation scaling, the action scale, the default pose and the trot
generator's offsets, in the order they update. The task runs it in training and evaluation
(``observe`` before the policy, ``act`` after it, as a Brax ``Env`` must split it), and the
export converts ``step`` (``observe``, the network, ``act``) into the ONNX graph itself, so the
robot holds no copy of this logic.

The memory is a ``ControllerState`` of float32 arrays. An all-zero state is the reset state:
its first ``observe`` fills the history with the first frame and starts the trim for the
command it sees, without averaging or trimming.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from smoothloco.robot import RobotSpec
from smoothloco.tasks import gait
from smoothloco.tasks.config import VelocityTaskConfig

# Actor observation: (name, size, scale, noise level before scaling), in order; a task without a
# velocity_error_window leaves velocity_error_average out, and an actor without the base
# velocity both terms that need it (``observation_layout``).
OBS_LAYOUT: tuple[tuple[str, int, float, float], ...] = (
    ("base_lin_vel", 3, 2.0, 0.1),
    ("base_ang_vel", 3, 0.25, 0.2),
    ("projected_gravity", 3, 1.0, 0.05),
    ("command", 3, 1.0, 0.0),  # plus the velocity trim where it is on (VelocityTrimConfig)
    ("joint_pos", 12, 1.0, 0.01),
    ("joint_vel", 12, 0.05, 1.5),
    ("last_action", 12, 1.0, 0.0),
    ("gait_clock", 2, 1.0, 0.0),  # sin, cos of the trot phase; (0, 0) while standing if the gait hides it
    # command minus measured (vx, vy, yaw rate), averaged over task.velocity_error_window
    ("velocity_error_average", 3, 2.0, 0.02),
)
# A command (vx, vy, yaw rate) shorter than this asks the robot to stand: all feet down.
STANDING_COMMAND = 0.1
# The height scan term: the base's height above the ground at each scan point minus the standing
# height (0 on flat ground at the target height; a step up reads negative), clipped to ±1 m, as
# legged_gym's measured heights; ``HeightScanConfig``. Scale and noise level as its.
HEIGHT_SCAN_TERM, HEIGHT_SCAN_SCALE, HEIGHT_SCAN_NOISE, HEIGHT_SCAN_CLIP = "height_scan", 5.0, 0.1, 1.0
VELOCITY_TERMS = ("base_lin_vel", "velocity_error_average")  # what a robot without a velocity estimator lacks

Layout = tuple[tuple[str, int, float, float], ...]


def full_layout(config: VelocityTaskConfig | None = None) -> Layout:
    """The terms of ``OBS_LAYOUT`` that ``config``'s task measures (the privileged critic sees
    all), then its height scan where it has one."""
    config = config or VelocityTaskConfig()
    error_average = config.velocity_error_window > 0
    layout = tuple(term for term in OBS_LAYOUT if error_average or term[0] != "velocity_error_average")
    scan = len(config.height_scan.points)
    return layout + (((HEIGHT_SCAN_TERM, scan, HEIGHT_SCAN_SCALE, HEIGHT_SCAN_NOISE),) if scan else ())


def observation_layout(config: VelocityTaskConfig | None = None) -> Layout:
    """The terms of ``OBS_LAYOUT`` that the actor of ``config``'s task observes."""
    keep_velocity = (config or VelocityTaskConfig()).observe_base_lin_vel
    return tuple(term for term in full_layout(config) if keep_velocity or term[0] not in VELOCITY_TERMS)


def observation_slice(config: VelocityTaskConfig | None, name: str) -> slice:
    """Where term ``name`` sits in one frame of the actor's observation of ``config``'s task."""
    layout, start = observation_layout(config), 0
    for term, size, *_ in layout:
        if term == name:
            return slice(start, start + size)
        start += size
    raise ValueError(f"the actor of this task does not observe {name!r}; it observes {[t for t, *_ in layout]}")


def per_entry(layout: Layout, column: int) -> np.ndarray:
    """One value per observation entry: each term's ``column`` (2: scale, 3: noise level) repeated."""
    return np.concatenate([np.full(term[1], term[column]) for term in layout])


def observation_scales(config: VelocityTaskConfig | None = None) -> np.ndarray:
    """Scale of each entry of the actor's observation frame."""
    return per_entry(observation_layout(config), 2)


def observation_noise(config: VelocityTaskConfig | None = None) -> np.ndarray:
    """legged_gym's sensor noise level of each observation entry, before scaling (``task.obs_noise``
    multiplies them)."""
    return per_entry(observation_layout(config), 3)


def standing(command: jax.Array) -> jax.Array:
    """Whether ``command`` (vx, vy, yaw rate) asks the robot to stand still."""
    return jnp.linalg.norm(command) <= STANDING_COMMAND


class Sensors(NamedTuple):
    """What the robot measures at a control period, SI units: joint angles (rad) and velocities
    (rad/s) in ``RobotSpec.joint_names`` order; the base's angular velocity (rad/s), the unit
    gravity direction and the base's linear velocity (m/s), all in the base frame; with a height
    scan, the base's height above the ground at each scan point (m, ``HeightScanConfig``)."""

    joint_pos: jax.Array
    joint_vel: jax.Array
    base_ang_vel: jax.Array
    gravity: jax.Array
    base_lin_vel: jax.Array
    height_scan: jax.Array = np.zeros(0, np.float32)  # no scan: a blind policy


class ControllerState(NamedTuple):
    """The controller's memory (all float32; all zeros is the reset state)."""

    phase: jax.Array  # (), gait phase in cycles, [0, 1)
    last_action: jax.Array  # (n_joints,), the network's previous output
    error_average: jax.Array  # (3,), command minus measured (vx, vy, yaw rate), averaged
    trim: jax.Array  # (3,), the velocity trim added to the command the network sees
    trim_command: jax.Array  # (3,), the command the trim was started for
    trim_steps: jax.Array  # (), control periods since then, saturating at the hold
    started: jax.Array  # (), 0 before the first ``act`` of an episode, 1 after
    frames: jax.Array  # (history, frame size), the last observation frames, newest first


@dataclass(frozen=True)
class ControllerConfig:
    """What the controller's arithmetic needs of the task and the robot (constants of the graph)."""

    control_dt: float
    action_scale: float
    default_pose: np.ndarray  # (n_joints,) rad
    swing_offsets: np.ndarray  # (2, n_joints) rad, zero without the trot generator
    gait_frequency: float  # Hz
    hide_clock_when_standing: bool
    recovery_speed: float  # m/s, 0: the command alone decides standing
    history: int  # observation frames the network sees
    measured: Layout  # the terms measured (``full_layout``); the actor sees ``actor_entries`` of them
    actor_entries: np.ndarray
    velocity_error_window: float  # s, 0: no average
    trim_rate: float  # 1/s, 0: no trim
    trim_hold_steps: int
    trim_freeze: float
    trim_limit: float
    trim_restart: float  # command change (norm, m/s and rad/s) that restarts the trim
    standing_height: float  # m, the base's height that a flat-ground height scan reads as 0

    @classmethod
    def from_task(
        cls, config: VelocityTaskConfig, robot: RobotSpec, closed_loop: bool | None = None
    ) -> ControllerConfig:
        """The controller of ``config``'s task on ``robot``; ``closed_loop`` (default: the task's
        ``velocity_trim.closed_loop``) says whether the trim runs, as it does when deployed."""
        trim = config.velocity_trim
        closed = trim.closed_loop if closed_loop is None else closed_loop
        measured = full_layout(config)
        kept = {name for name, *_ in observation_layout(config)}
        starts = np.cumsum([0] + [size for _, size, *_ in measured])
        return cls(
            control_dt=config.control_dt,
            action_scale=config.action_scale,
            default_pose=np.asarray(robot.default_pose, np.float32),
            swing_offsets=(gait.swing_offsets(robot, config.gait.hip_amplitude) * config.gait.generator).astype(
                np.float32
            ),
            gait_frequency=config.gait.frequency,
            hide_clock_when_standing=config.gait.hide_clock_when_standing,
            recovery_speed=config.gait.recovery_speed,
            history=config.obs_history,
            measured=measured,
            actor_entries=np.concatenate(
                [np.arange(start, start + size) for (name, size, *_), start in zip(measured, starts) if name in kept]
            ),
            velocity_error_window=config.velocity_error_window,
            trim_rate=trim.rate if closed and config.trims_command else 0.0,
            trim_hold_steps=round(trim.hold / config.control_dt),
            trim_freeze=trim.freeze,
            trim_limit=trim.limit,
            trim_restart=trim.restart_tolerance,
            standing_height=config.base_height_target,
        )

    @property
    def n_joints(self) -> int:
        return len(self.default_pose)

    @property
    def frame_size(self) -> int:
        return len(self.actor_entries)

    @property
    def observation_scale(self) -> np.ndarray:
        """Scale of each measured entry (``measured``'s order)."""
        return per_entry(self.measured, 2).astype(np.float32)


def initial_state(config: ControllerConfig, phase: jax.Array | float = 0.0) -> ControllerState:
    """The reset state: all zeros, but for the gait ``phase`` (cycles) to start from."""
    n = config.n_joints
    return ControllerState(
        phase=jnp.asarray(phase, jnp.float32),
        last_action=jnp.zeros(n, jnp.float32),
        error_average=jnp.zeros(3, jnp.float32),
        trim=jnp.zeros(3, jnp.float32),
        trim_command=jnp.zeros(3, jnp.float32),
        trim_steps=jnp.zeros((), jnp.float32),
        started=jnp.zeros((), jnp.float32),
        frames=jnp.zeros((config.history, config.frame_size), jnp.float32),
    )


def at_rest(config: ControllerConfig, command: jax.Array, base_lin_vel: jax.Array) -> jax.Array:
    """Whether the robot should stand: a zero command and, with a recovery speed, a base
    (velocity in its own frame) no faster than that."""
    rest = standing(command)
    if config.recovery_speed > 0:
        rest &= jnp.linalg.norm(base_lin_vel[:2]) <= config.recovery_speed
    return rest


def gait_offset(config: ControllerConfig, phase: jax.Array) -> jax.Array:
    """Joint-target offsets of the trot generator at ``phase`` (zero when it is off)."""
    if not np.any(config.swing_offsets):
        return jnp.zeros(config.n_joints, jnp.float32)
    return gait.offset_from_clock(jnp.asarray(config.swing_offsets), gait.clock(phase)[0])


def clock_observation(config: ControllerConfig, phase: jax.Array, rest: jax.Array) -> jax.Array:
    """The gait_clock term: sin and cos of the phase, (0, 0) ``rest``ing if the gait hides it."""
    clock = gait.clock(phase)
    return jnp.where(rest, 0.0, clock) if config.hide_clock_when_standing else clock


def velocity_error_update(
    config: ControllerConfig, sensors: Sensors, command: jax.Array, average: jax.Array
) -> jax.Array:
    """The average velocity error one control period on (time constant ``velocity_error_window``)."""
    if config.velocity_error_window == 0:
        return average
    measured = jnp.concatenate([sensors.base_lin_vel[:2], sensors.base_ang_vel[2:3]])
    keep = jnp.exp(-config.control_dt / config.velocity_error_window)
    return keep * average + (1.0 - keep) * (command - measured)


def trim_update(config: ControllerConfig, command: jax.Array, state: ControllerState) -> ControllerState:
    """The velocity trim one control period on, after the average error's update.

    A command further than ``trim_restart`` (norm) from the one the trim was started for starts
    it again from zero for the new command: a joystick's small changes every period keep the
    trim and its reference, a slow drift past the tolerance or a new command restarts it. While
    walking, ``hold`` after that start and with the planar average error within ``freeze``, the
    trim integrates the average error, each axis clipped to ``limit``."""
    if config.trim_rate == 0:
        return state
    new = jnp.linalg.norm(command - state.trim_command) > config.trim_restart
    steps = jnp.where(new, 0.0, jnp.minimum(state.trim_steps + 1.0, config.trim_hold_steps))
    trim = jnp.where(new, 0.0, state.trim)
    average = state.error_average
    moving = (
        ~standing(command) & (steps >= config.trim_hold_steps) & (jnp.linalg.norm(average[:2]) <= config.trim_freeze)
    )
    integrated = jnp.clip(trim + config.trim_rate * config.control_dt * average, -config.trim_limit, config.trim_limit)
    return state._replace(
        trim=jnp.where(moving, integrated, trim),
        trim_command=jnp.where(new, command, state.trim_command),
        trim_steps=steps,
    )


def measurement(config: ControllerConfig, sensors: Sensors, command: jax.Array, state: ControllerState) -> jax.Array:
    """Every measured term (``config.measured``), unscaled, for ``state``'s memory."""
    terms = {
        "base_lin_vel": sensors.base_lin_vel,
        "base_ang_vel": sensors.base_ang_vel,
        "projected_gravity": sensors.gravity,
        "command": command + state.trim,
        "joint_pos": sensors.joint_pos - config.default_pose,
        "joint_vel": sensors.joint_vel,
        "last_action": state.last_action,
        "gait_clock": clock_observation(config, state.phase, at_rest(config, command, sensors.base_lin_vel)),
        "velocity_error_average": state.error_average,
        HEIGHT_SCAN_TERM: jnp.clip(sensors.height_scan - config.standing_height, -HEIGHT_SCAN_CLIP, HEIGHT_SCAN_CLIP),
    }
    return jnp.concatenate([terms[name] for name, *_ in config.measured])


def observe(
    config: ControllerConfig,
    sensors: Sensors,
    command: jax.Array,
    state: ControllerState,
    noise: jax.Array | None = None,
) -> tuple[jax.Array, ControllerState]:
    """The network's input (the last ``history`` frames, newest first, flat) and the memory it
    leaves: after the first period of an episode the average error and the trim move on; the
    first fills the history and starts the trim for ``command``. ``noise`` (training: sensor
    noise, unscaled, one entry per measured term) adds to the measurement."""
    started = state.started > 0
    moved = state._replace(error_average=velocity_error_update(config, sensors, command, state.error_average))
    moved = trim_update(config, command, moved)
    state = jax.tree.map(lambda after, before: jnp.where(started, after, before), moved, state)
    state = state._replace(trim_command=jnp.where(started, state.trim_command, command))
    raw = measurement(config, sensors, command, state)
    if noise is not None:
        raw = raw + noise
    frame = (raw * config.observation_scale)[config.actor_entries]
    frames = jnp.where(started, jnp.concatenate([frame[None], state.frames[:-1]]), frame[None])
    return frames.reshape(-1), state._replace(frames=frames)


def act(config: ControllerConfig, action: jax.Array, state: ControllerState) -> tuple[jax.Array, ControllerState]:
    """Joint position targets for the network's ``action`` and the memory one period on: the
    clock advances, the action becomes the last action."""
    target = config.default_pose + config.action_scale * action + gait_offset(config, state.phase)
    phase = jnp.mod(state.phase + config.gait_frequency * config.control_dt, 1.0)
    return target, state._replace(phase=phase, last_action=action, started=jnp.ones((), jnp.float32))


Network = Callable[[object, jax.Array], jax.Array]  # (params, flat observation history) -> action


def step(
    config: ControllerConfig,
    network: Network,
    params: object,
    sensors: Sensors,
    command: jax.Array,
    state: ControllerState,
) -> tuple[jax.Array, ControllerState]:
    """One control period: ``observe``, the network's deterministic action, ``act``."""
    obs, state = observe(config, sensors, command, state)
    return act(config, network(params, obs), state)


def state_sizes(config: ControllerConfig) -> dict[str, int]:
    """Entries of each ``ControllerState`` field in the flat state vector, in order."""
    shapes = jax.eval_shape(lambda: initial_state(config))
    return {name: int(np.prod(shape.shape)) for name, shape in zip(ControllerState._fields, shapes)}


def flatten_state(state: ControllerState) -> jax.Array:
    """The memory as one float32 vector (``state_sizes``' order): what the exported graph carries."""
    return jax.lax.concatenate([jnp.ravel(leaf).astype(jnp.float32) for leaf in state], 0)


def unflatten_state(config: ControllerConfig, flat: jax.Array) -> ControllerState:
    """``flatten_state``'s inverse."""
    shapes = jax.eval_shape(lambda: initial_state(config))
    starts = np.cumsum([0] + [int(np.prod(s.shape)) for s in shapes])
    return ControllerState(*(flat[a:b].reshape(s.shape) for a, b, s in zip(starts[:-1], starts[1:], shapes)))
