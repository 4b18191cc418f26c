"""Typed configuration of the velocity-tracking task, validated on construction."""

from __future__ import annotations

import math
from dataclasses import dataclass, field, fields, replace
from functools import lru_cache

from smoothloco.robot import DEFAULT_ROBOT, check_robot_name, load_robot
from smoothloco.sim import CONTACT_MODELS, DEFAULT_SHARPNESS
from smoothloco.sim.check import stand_in_mujoco
from smoothloco.sim.terrain import RollingHills, Terrain, parse_terrain
from smoothloco.validation import require_finite, setting, with_settings

Range = tuple[float, float]
MIN_SIM_DT, MAX_CONTROL_DT = 1e-5, 1.0  # s
# The robot the task's defaults were tuned on; another robot's task scales from it what depends
# on size (``VelocityTaskConfig.for_robot``).
REFERENCE_ROBOT = DEFAULT_ROBOT


@dataclass(frozen=True)
class Size:
    """A robot's size relative to ``REFERENCE_ROBOT``: standing heights (MuJoCo, under PD at the
    default pose) and masses."""

    length: float
    mass: float


@lru_cache(maxsize=1)
def reference_standing_height() -> float:
    """``REFERENCE_ROBOT``'s standing height in MuJoCo, m: what another robot's height is scaled by."""
    return stand_in_mujoco(load_robot(REFERENCE_ROBOT)).height


def robot_size(robot: str) -> Size:
    spec, reference = load_robot(robot), load_robot(REFERENCE_ROBOT)
    if spec.model_hash == reference.model_hash:
        return Size(1.0, 1.0)
    return Size(stand_in_mujoco(spec).height / reference_standing_height(), spec.mass / reference.mass)


def _check_range(name: str, value: Range, lower_bound: float | None = None) -> None:
    low, high = value
    if not low <= high:
        raise ValueError(f"{name} must be (low, high) with low <= high, got {value}")
    if lower_bound is not None and low < lower_bound:
        raise ValueError(f"{name} must not go below {lower_bound}, got {value}")


# Weights multiply each term and the control period (legged_gym convention), so returns
# are per simulated second. Positive terms are rewards, negative are penalties.
DEFAULT_REWARD_WEIGHTS: dict[str, float] = {
    "alive": 0.5,
    "tracking_lin_vel": 1.0,
    "tracking_ang_vel": 0.5,
    "lin_vel_z": -2.0,
    "ang_vel_xy": -0.05,
    "orientation": -5.0,
    "torques": -2.0e-5,
    "action_rate": -0.01,
    "joint_limits": -10.0,
    "foot_slip": -0.1,
    "base_height": -30.0,
    "feet_air_time": 0.0,
    # The gait: follow the clock's foot heights while moving, keep the standing pose at a zero
    # command. With them and no generator SHAC finds its own trot (docs/own-gait.md).
    "feet_swing_height": 3.0,
    "stand_still": -1.0,
}


@dataclass(frozen=True)
class CommandConfig:
    lin_vel_x: Range = setting((-1.0, 1.0), "range low,high of the commanded forward velocity, m/s")
    lin_vel_y: Range = setting((-1.0, 1.0), "range low,high of the commanded sideways velocity, m/s")
    yaw_rate: Range = setting((-1.0, 1.0), "range low,high of the commanded turning rate, rad/s")
    resample_seconds: Range = setting((4.0, 10.0), "a new command is drawn after a time uniform in low,high seconds")
    # share of stand-still commands; 0.1 left the self-stepping policy stepping in place at zero
    zero_probability: float = setting(0.2, "share of the commands that are zero (stand still)")

    def __post_init__(self) -> None:
        require_finite("task.commands", self)
        for name in ("lin_vel_x", "lin_vel_y", "yaw_rate"):
            _check_range(f"commands.{name}", getattr(self, name))
        _check_range("commands.resample_seconds", self.resample_seconds, lower_bound=1e-6)
        if not 0.0 <= self.zero_probability <= 1.0:
            raise ValueError(f"commands.zero_probability must be in [0, 1], got {self.zero_probability}")


@dataclass(frozen=True)
class PushConfig:
    enabled: bool = setting(True, "kick the base at random times during training")
    # m/s, horizontal velocity kick on the base, uniform in [0, max_speed]; legged_gym's 1.0 left
    # the robustness suite's 1.5 m/s test pushes untrained (docs/history/robustness.md)
    max_speed: float = setting(1.5, "largest horizontal velocity kick of the base, m/s")
    interval_seconds: Range = setting((5.0, 10.0), "time between kicks, uniform in low,high seconds")

    def __post_init__(self) -> None:
        require_finite("task.pushes", self)
        if self.max_speed < 0:
            raise ValueError(f"pushes.max_speed must be >= 0, got {self.max_speed}")
        _check_range("pushes.interval_seconds", self.interval_seconds, lower_bound=1e-6)


@dataclass(frozen=True)
class RandomizationConfig:
    """Physical parameters drawn per environment. The defaults reach past the nominal robot
    toward a worn one on a wet floor (weak motors, stiff gearboxes, slippery ground): trained on
    the nominal ranges, the default policy tracked 0.111-0.120 m/s in MuJoCo's "all combined",
    with them 0.088-0.097 (docs/results.md). The gearbox terms scale with each joint's torque
    limit, so they fit any robot."""

    enabled: bool = setting(True, "randomize the physics of each environment within the ranges below")
    # down to wet tiles: from 0.5 the policy fell on 0.3 in a third of the tests; from 0.3 it tracked
    # 0.21 m/s on 0.4 with weak motors in MuJoCo (its feet slip)
    friction: Range = setting((0.2, 1.25), "range low,high of the ground friction coefficient")
    added_base_mass: Range = setting((-5.0, 5.0), "range low,high of the mass added to the base, kg")
    base_com_offset: float = setting(0.05, "shift of the base's centre of mass, uniform in [-x, x] on each axis, m")
    kp_scale: Range = setting((0.9, 1.1), "range low,high of the factor on the joints' PD stiffness")
    # up to the PD's damping plus a gearbox's viscous damping
    kd_scale: Range = setting((0.9, 1.5), "range low,high of the factor on the joints' PD damping")
    motor_strength: Range = setting((0.8, 1.1), "range low,high of the factor on the joint torques")
    # s; per-environment delay before new joint targets reach the motors (a robot's
    # communication and driver latency), a whole number of simulation steps up to control_dt;
    # trained without it, a 20 ms delay doubled the tracking error in MuJoCo
    action_delay: Range = setting(
        (0.0, 0.02),
        "range low,high of the delay before joint targets reach the motors, s (whole simulation steps, at most "
        "task.control_dt)",
    )
    # kg·m² per N·m of the joint's torque limit, added to every driven joint's rotor inertia
    # (armature), one draw per environment: a geared drive's reflected inertia, which a link-only
    # model leaves out (rotor inertia x gear ratio², and the torque grows with the ratio too);
    # 6.25e-4 is 0.05 kg·m² for ANYmal's 80 N·m drives
    rotor_armature_per_torque: Range = setting(
        (0.0, 6.25e-4),
        "range low,high of the rotor inertia added to every driven joint per N·m of its torque limit, kg·m²/(N·m) (a "
        "geared drive's reflected inertia)",
    )
    # Coulomb friction in every driven joint as a share of its torque limit, one draw per
    # environment (a gearbox's losses; sim.Sim.joint_friction); 0.025 is 2 N·m for ANYmal
    joint_friction_share: Range = setting(
        (0.0, 0.025),
        "range low,high of the joints' Coulomb friction as a share of their torque limit (a gearbox's losses)",
    )
    # fraction of environments that get every range at its harder end at once (least friction and
    # motor strength, most mass, armature and joint friction, softest kp, stiffest kd): the
    # combination independent draws almost never make, and the one a worn robot on a wet floor meets
    hard_corner_fraction: float = setting(
        0.0, "fraction of environments with every range above at its harder end at once"
    )

    def __post_init__(self) -> None:
        require_finite("task.randomization", self)
        if not 0.0 <= self.hard_corner_fraction <= 1.0:
            raise ValueError(f"randomization.hard_corner_fraction must be in [0, 1], got {self.hard_corner_fraction}")
        _check_range("randomization.rotor_armature_per_torque", self.rotor_armature_per_torque, lower_bound=0.0)
        _check_range("randomization.joint_friction_share", self.joint_friction_share, lower_bound=0.0)
        _check_range("randomization.action_delay", self.action_delay, lower_bound=0.0)
        _check_range("randomization.friction", self.friction, lower_bound=0.0)
        _check_range("randomization.added_base_mass", self.added_base_mass)
        for name in ("kp_scale", "kd_scale", "motor_strength"):
            _check_range(f"randomization.{name}", getattr(self, name), lower_bound=0.0)
        if self.base_com_offset < 0:
            raise ValueError(f"randomization.base_com_offset must be >= 0, got {self.base_com_offset}")


@dataclass(frozen=True)
class VelocityTrimConfig:
    """An outer velocity loop around the policy: while walking, the command the actor observes is
    the command plus a trim that integrates the average velocity error (the observed
    ``velocity_error_average``), as a PI cascade's integrator does. The policy tracks what it is
    asked, but falls short where the world is harder than its training: weak motors on a wet,
    bumpy floor walked at 72-90 % of the command; the trim asks for more until the shortfall is
    gone. Anti-windup: the trim restarts from zero at each new command (one further than
    ``restart_tolerance`` from the command it was started for), waits ``hold`` s (the
    robot's own start-up), and freezes while the average error is above ``freeze`` (a push, a
    stumble). Part of the deployed controller (the contract carries it) where the actor observes
    the average error (task.velocity_error_window > 0 and observe_base_lin_vel); rate 0 turns it
    off."""

    rate: float = setting(
        1.0,
        "outer velocity loop while walking: the actor observes the command plus a trim that integrates the average "
        "velocity error at this rate, 1/s (0 = off; needs task.velocity_error_window > 0)",
    )
    hold: float = setting(0.25, "s after each new command before the trim moves (it restarts from zero)")
    freeze: float = setting(0.4, "the trim holds still while the planar average velocity error exceeds this, m/s")
    limit: float = setting(0.5, "largest trim on each axis, m/s and rad/s")
    # A joystick's command changes a little every period; restarting at every change (0) kept the
    # trim off for it. 0.1 is the standing threshold: smaller than any command a user would call
    # new, far above stick noise.
    restart_tolerance: float = setting(
        0.1,
        "a command this far (norm, m/s and rad/s) from the one the trim started for restarts it; smaller changes "
        "(a joystick's) keep it",
    )
    # Whether this task closes the loop around the policy. Evaluations do (``quiet``), as the
    # deployed controller does; training does not by default: the policy learns to track on its
    # own and the loop removes only what is left in a harder world. Trained inside the loop, the
    # policy leaned on it (MuJoCo nominal 0.065-0.077 m/s with the loop opened) and "all combined"
    # was no better (docs/history/robustness.md, the velocity trim).
    closed_loop: bool = setting(
        False,
        "train inside the loop too (default: the policy learns to track on its own; the loop closes around it in "
        "evaluations and at deployment)",
    )

    def __post_init__(self) -> None:
        require_finite("task.velocity_trim", self)
        for name in ("rate", "hold", "freeze", "limit", "restart_tolerance"):
            if getattr(self, name) < 0:
                raise ValueError(f"velocity_trim.{name} must be >= 0, got {getattr(self, name)}")


# A scan wider than a few metres sees nothing a step needs; more points than legged_gym's 187
# make the observation mostly terrain.
MAX_SCAN_REACH, MAX_SCAN_POINTS = 3.0, 400  # m, points


@dataclass(frozen=True)
class HeightScanConfig:
    """Terrain heights around the base that the actor observes, as legged_gym's measured heights:
    the base's height above the ground at each point of the grid ``x`` x ``y``, offsets in the
    base's heading frame (turned with the base's yaw, level). Without points the policy is blind
    to the terrain and feels it through its legs (the default). A deployed controller needs a
    height map around the robot (a depth camera or lidar and a map): the export lists the points."""

    x: tuple[float, ...] = setting(
        (), "height scan: forward offsets of the scan points in m, heading frame (nothing = no scan, a blind policy)"
    )
    y: tuple[float, ...] = setting((), "height scan: lateral offsets (left positive) of the scan points in m")

    def __post_init__(self) -> None:
        require_finite("task.height_scan", self)
        if bool(self.x) != bool(self.y):
            raise ValueError(
                f"task.height_scan.x and .y must both list offsets (the scan is their grid) or both be empty (no "
                f"scan), got x={self.x}, y={self.y}"
            )
        if any(abs(v) > MAX_SCAN_REACH for v in self.x + self.y):
            raise ValueError(
                f"task.height_scan offsets must be within {MAX_SCAN_REACH:g} m of the base, got x={self.x}, y={self.y}"
            )
        if len(self.x) * len(self.y) > MAX_SCAN_POINTS:
            raise ValueError(
                f"task.height_scan has {len(self.x)} x {len(self.y)} points; at most {MAX_SCAN_POINTS} are accepted"
            )

    @property
    def points(self) -> tuple[tuple[float, float], ...]:
        """The scan points (x, y) in the heading frame, x-major."""
        return tuple((x, y) for x in self.x for y in self.y)


@dataclass(frozen=True)
class GaitConfig:
    """A trot clock, and what hangs on it.

    The policy observes the clock (sin, cos of its phase). Two optional uses of it:
    - an open-loop trot generator (PMTG-style) whose joint offsets are added to the policy's
      actions: diagonal leg pairs alternate, each flexing hip and knee through a half-sine swing
      (``hip_amplitude`` > 0); stepping is then there from the first iteration;
    - a swing-height target for each foot (a half sine of ``swing_height`` over its half of the
      cycle, zero while it stands or while the command is zero) that the reward term
      ``feet_swing_height`` tracks; the policy then has to find the stepping itself.
    """

    frequency: float = setting(
        2.0, "gait clock in cycles per second, observed by the policy and timing the swing-height reward (0 = no clock)"
    )
    # rad of HFE flexion at mid-swing, the knee flexes twice as much; 0 (default) turns the
    # generator off. Without generator and swing target SHAC learned to stand (lin. error 0.39
    # m/s); with the swing target alone it walks better than with the generator (docs/own-gait.md).
    hip_amplitude: float = setting(
        0.0,
        "trot generator: hip flexion at mid-swing in rad, added open-loop to the policy's joint targets; the knee "
        "flexes twice as much (0 = off: the policy steps by itself)",
    )
    swing_height: float = setting(
        0.08, "peak foot height in m that the feet_swing_height reward asks of a swinging foot"
    )
    # The clock observation reads (0, 0) while the command asks to stand: standing is then one
    # fixed input, not a clock the policy must learn to ignore. Without it the self-stepping
    # policy kept lifting a diagonal pair 1.5 cm at a zero command in MuJoCo (docs/own-gait.md).
    hide_clock_when_standing: bool = setting(
        True, "the gait clock observation reads (0, 0) while the command asks to stand (its norm at most 0.1)"
    )
    # m/s; at a zero command the gait (clock, swing targets, no standing-pose penalty) still runs
    # while the base's horizontal speed exceeds this, so a push is answered with steps; 0: the
    # command alone decides. Without it a standing robot never stepped after a push and fell at
    # 1.5 m/s sideways (docs/results.md).
    recovery_speed: float = setting(
        0.3,
        "at a zero command the gait still runs while the base moves faster than this, m/s, so that a push is answered "
        "with steps (0 = the command alone decides)",
    )

    def __post_init__(self) -> None:
        require_finite("task.gait", self)
        if not self.recovery_speed >= 0:
            raise ValueError(f"gait.recovery_speed must be >= 0 m/s (0 = off), got {self.recovery_speed}")
        if not self.frequency >= 0:
            raise ValueError(f"gait.frequency must be >= 0 Hz (0 = off), got {self.frequency}")
        if not self.hip_amplitude >= 0:
            raise ValueError(f"gait.hip_amplitude must be >= 0 rad (0 = no generator), got {self.hip_amplitude}")
        if not self.swing_height >= 0:
            raise ValueError(f"gait.swing_height must be >= 0 m, got {self.swing_height}")

    @property
    def generator(self) -> bool:
        """Whether open-loop joint offsets are added to the actions."""
        return self.frequency > 0 and self.hip_amplitude > 0


@dataclass(frozen=True)
class VelocityTaskConfig:
    """Velocity tracking on flat ground. The defaults are for the default robot; another robot's
    spec changes those that scale with it (``for_robot``)."""

    robot: str = setting(
        DEFAULT_ROBOT,
        "robot: a bundled one (anymal_c, go2) or the path of a robot spec file (docs/own-robot.md); the task settings "
        "its spec states replace the defaults below",
    )
    contact: str = setting("smooth", "contact model of the training simulator: hard, smooth or soft")
    # 1/m, the smooth contact's sharpness at the start and at the end of training, geometric in
    # between (VelocityTask.with_training_progress); equal values keep it fixed. A soft start gives
    # the actor gradients from feet that are still in the air; the sharper end (a resting foot
    # sinks ~6 mm instead of ~14 mm) is what the policy finally trains on, and brought the
    # MuJoCo/own-sim yaw-error ratio of two seeds from 1.36x/1.21x (fixed 300) to 1.18x/1.02x
    # (docs/own-gait.md). A state fresh from reset is at the start.
    sharpness: Range = setting(
        (DEFAULT_SHARPNESS, 1000.0),
        "smooth contact: sigmoid sharpness s in 1/m (contact weight 1/(1+exp(s*gap))) at the start and the end of "
        "training, start,end, geometric in between (equal values keep it fixed; Brax's PPO trains at the start "
        "throughout)",
    )
    # s; the largest tested step whose hard-contact gaits stay within 2.5 cm / 0.05 rad RMS of a
    # 0.25 ms reference over 1 s (`smoothloco bench dt`: 5 ms gives 2.0 cm / 0.039 rad, 10 ms 4.1 cm / 0.056)
    sim_dt: float = setting(0.005, "simulation step in seconds")
    # soft contact: the penalty spring and damper (dFlex-style). Stiffer springs need smaller
    # steps: 2e4 N/m diverged at 5 ms and runs at 2.5 ms (--task.sim_dt 0.0025).
    soft_stiffness: float = setting(
        2.0e4, "soft contact: penalty spring stiffness in N/m (stiffer needs a smaller task.sim_dt)"
    )
    soft_damping: float = setting(2.0e2, "soft contact: penalty damping in N·s/m")
    # the robot's DC-motor torque-speed envelope instead of a flat torque limit, where its spec
    # states one (RobotSpec.velocity_limit): a real drive gives less torque the faster it turns
    motor_envelope: bool = setting(
        True,
        "limit the torque by the robot's DC-motor torque-speed envelope where its spec states one (less torque the "
        "faster a joint turns) instead of a flat torque limit",
    )
    # The ground to train on (sim.terrain.parse_terrain). Base height (reward, termination) is
    # measured above the ground under the base. Trained on friction down to 0.2 on flat ground,
    # the policy fell in 11 % of MuJoCo's 5 cm bumps, on the default 8 cm hills in none
    # (docs/results.md).
    terrain: str = setting(
        "hills:height=0.08",
        "ground to train on: KIND or KIND:NAME=VALUE,... with KIND flat, hills, slope, ramp, stairs, rough or course (a "
        "curriculum: rows of stair pyramids of growing height, each episode on the level the last one earned) (e.g. "
        "flat, hills:height=0.08,wavelength=1.3, slope:degrees=25, stairs:rise=0.15,run=0.3, rough:height=0.05)",
    )
    control_dt: float = setting(0.02, "control period in seconds (a whole number of simulation steps)")
    action_scale: float = setting(0.5, "radians of joint-target offset per unit action")
    # scale of uniform sensor noise (multiplies per-signal noise levels, legged_gym's)
    obs_noise: float = setting(1.0, "multiplier of the per-signal sensor noise levels (0 = none)")
    # observation dict with "privileged_state" for the critic
    privileged_critic: bool = setting(False, "give the critic privileged observations (friction, mass, contacts)")
    # False: the actor observes proprioception and the IMU only, as on a robot without a base
    # velocity estimator; with privileged_critic the critic still sees the velocity
    observe_base_lin_vel: bool = setting(
        True,
        "the actor observes the base's linear velocity (false: proprioception and IMU only, as on a robot without a "
        "velocity estimator; needs task.gait.recovery_speed 0)",
    )
    # observation frames the actor sees, newest first (1: the current one). Past frames show how
    # the joints and the base answered the last actions: slip, a delay, a weak motor, and (for a
    # policy without observe_base_lin_vel) the base velocity, none of which one frame shows.
    obs_history: int = setting(1, "observation frames the actor sees, newest first (1 = the current one only)")
    # s; > 0 adds the command's tracking error (vx, vy, yaw rate) averaged over about this long
    # (an exponential moving average) to the actor's observation where it observes the base
    # velocity: integral action, which lets the policy see, and so learn to remove, a steady
    # shortfall (weak motors on a wet floor walked at 70 % of the command; with it, MuJoCo's "all
    # combined" error fell from 0.193 to 0.120 m/s, docs/results.md); 0: not observed
    velocity_error_window: float = setting(
        1.0,
        "s; > 0: the actor also observes command minus measured velocity averaged over about this long (integral "
        "action against a steady shortfall); 0 = not observed",
    )
    # an outer velocity loop around the policy: without it, most of MuJoCo's "all combined" error
    # was a steady shortfall, which the trim removes (docs/history/robustness.md)
    velocity_trim: VelocityTrimConfig = field(default_factory=VelocityTrimConfig)
    min_base_height: float = setting(0.3, "an episode ends when the base is lower than this, m")
    min_knee_height: float = setting(0.02, "an episode ends when a knee is lower than this above the ground, m")
    max_tilt_deg: float = setting(60.0, "an episode ends when the base tilts more than this from upright, degrees")
    # any generalized velocity above this is a diverged simulation
    max_speed: float = setting(
        50.0, "an episode ends when any base or joint velocity exceeds this (the simulation diverged)"
    )
    base_height_target: float = setting(0.52, "standing height of the base in m that the base_height reward term holds")
    tracking_sigma: float = setting(
        0.25, "width of the velocity-tracking rewards exp(-error^2/sigma); smaller is stricter"
    )
    commands: CommandConfig = field(default_factory=CommandConfig)
    pushes: PushConfig = field(default_factory=PushConfig)
    gait: GaitConfig = field(default_factory=GaitConfig)
    height_scan: HeightScanConfig = field(default_factory=HeightScanConfig)
    randomization: RandomizationConfig = field(default_factory=RandomizationConfig)
    reward_weights: dict[str, float] = field(default_factory=lambda: dict(DEFAULT_REWARD_WEIGHTS))

    def __post_init__(self) -> None:
        require_finite("task", self)
        check_robot_name(self.robot)
        if self.contact not in CONTACT_MODELS:
            raise ValueError(f"unknown contact model {self.contact!r}; accepted: {', '.join(CONTACT_MODELS)}")
        if len(self.sharpness) != 2 or not min(self.sharpness) > 0:
            raise ValueError(f"sharpness must be two values > 0 (start,end in 1/m), got {self.sharpness}")
        # Physical steps: a controller at 1 Hz or faster, a simulation step of at least 10 µs
        # (smaller ones make step counts that overflow or never end).
        if not (MIN_SIM_DT <= self.sim_dt and 0 < self.control_dt <= MAX_CONTROL_DT):
            raise ValueError(
                f"sim_dt must be >= {MIN_SIM_DT:g} s and control_dt in (0, {MAX_CONTROL_DT:g}] s, got "
                f"{self.sim_dt}, {self.control_dt}"
            )
        if self.substeps < 1 or abs(self.substeps * self.sim_dt - self.control_dt) > 1e-9:
            raise ValueError(
                f"control_dt ({self.control_dt}) must be a whole number >= 1 of sim_dt ({self.sim_dt}) substeps"
            )
        if self.randomization.action_delay[1] > self.control_dt + 1e-9:
            raise ValueError(
                f"randomization.action_delay must not exceed control_dt ({self.control_dt} s): "
                f"got {self.randomization.action_delay}"
            )
        if self.gait.recovery_speed > 0 and not self.observe_base_lin_vel:
            raise ValueError(
                "gait.recovery_speed switches the gait on by the base velocity, which a policy with "
                "observe_base_lin_vel false does not have: set gait.recovery_speed 0 or observe_base_lin_vel true "
                "(a blind policy: --task.observe_base_lin_vel false --task.gait.recovery_speed 0)"
            )
        unknown = set(self.reward_weights) - set(DEFAULT_REWARD_WEIGHTS)
        if unknown:
            raise ValueError(f"unknown reward terms {sorted(unknown)}; accepted: {', '.join(DEFAULT_REWARD_WEIGHTS)}")
        if not self.velocity_error_window >= 0:
            raise ValueError(
                f"velocity_error_window must be >= 0 s (0: not observed), got {self.velocity_error_window}"
            )
        if isinstance(self.obs_history, bool) or not (isinstance(self.obs_history, int) and self.obs_history >= 1):
            raise ValueError(
                f"obs_history must be a whole number of frames >= 1 (1: no history), got {self.obs_history}"
            )
        try:
            self.ground
        except (TypeError, ValueError) as exc:
            raise ValueError(f"task.terrain: {exc}") from None
        for name in ("action_scale", "obs_noise", "tracking_sigma", "max_tilt_deg", "soft_stiffness", "soft_damping"):
            if getattr(self, name) < 0 or (name != "obs_noise" and getattr(self, name) == 0):
                raise ValueError(f"{name} must be > 0, got {getattr(self, name)}")

    @classmethod
    def for_robot(cls, robot: str) -> VelocityTaskConfig:
        """The task's defaults scaled to ``robot``'s size (``scaled``), then the ``[task]``
        settings of its spec applied."""
        where = f"robot {robot!r} [task]"
        settings = load_robot(robot).task_defaults
        if "robot" in settings:
            raise ValueError(f"{where}: a robot's spec cannot name another robot (robot = {settings['robot']!r})")
        try:
            return with_settings(cls(robot=robot).scaled(robot_size(robot)), settings, where)
        except (TypeError, ValueError) as exc:  # TypeError: a value of the wrong kind, e.g. text for a number
            message = str(exc)  # an unknown name is already placed; a refused value gets its place
            raise ValueError(message if message.startswith(where) else f"{where}: {message}") from exc

    def scaled(self, size: Size) -> VelocityTaskConfig:
        """This task for a robot of ``size``: lengths (the base's target and fall heights, the
        hills' height, the base's centre-of-mass offset) scale with its standing height, push
        speeds with its square root (the same Froude number: a push upsets robots of any size
        alike), the added base mass with its mass. Everything else (rewards, commands, the gait's
        swing, the other randomization) is shared by every robot. The reference robot's task is
        returned as it is, so that its settings (and its runs' saved ones) stay the same text."""
        if size == Size(1.0, 1.0):
            return self
        ground, length = self.ground, size.length
        terrain = self.terrain
        if isinstance(ground, RollingHills):
            terrain = f"hills:height={ground.height * length:.3g},wavelength={ground.wavelength:g}"
        low, high = self.randomization.added_base_mass
        return replace(
            self,
            base_height_target=round(self.base_height_target * length, 3),
            min_base_height=round(self.min_base_height * length, 3),
            terrain=terrain,
            pushes=replace(self.pushes, max_speed=round(self.pushes.max_speed * math.sqrt(length), 3)),
            randomization=replace(
                self.randomization,
                added_base_mass=(round(low * size.mass, 3), round(high * size.mass, 3)),
                base_com_offset=round(self.randomization.base_com_offset * length, 3),
            ),
        )

    @property
    def trims_command(self) -> bool:
        """Whether the deployed controller adds the velocity trim to the command the actor
        observes (VelocityTrimConfig; this task itself does with ``velocity_trim.closed_loop``)."""
        return self.velocity_trim.rate > 0 and self.velocity_error_window > 0 and self.observe_base_lin_vel

    @property
    def ground(self) -> Terrain:
        """The terrain of ``terrain``."""
        return parse_terrain(self.terrain)

    @property
    def substeps(self) -> int:
        return round(self.control_dt / self.sim_dt)

    def quiet(self, **changes) -> VelocityTaskConfig:
        """This task as the evaluations and the gradient study run it: flat ground (as in
        MuJoCo's scenarios), no random pushes, no domain randomization, no sensor noise, a
        command drawn at reset that is never resampled (scripted rollouts set theirs), and the
        velocity trim's loop closed as the deployed controller closes it; ``changes`` replace
        further fields."""
        quiet = dict(
            terrain="flat",
            pushes=PushConfig(enabled=False),
            randomization=RandomizationConfig(enabled=False),
            obs_noise=0.0,
            commands=replace(self.commands, resample_seconds=(1e9, 1e9)),
            velocity_trim=replace(self.velocity_trim, closed_loop=True),  # the deployed controller
        )
        return replace(self, **{**quiet, **changes})

    def to_dict(self) -> dict:
        out = {}
        for f in fields(self):
            value = getattr(self, f.name)
            out[f.name] = (
                {g.name: getattr(value, g.name) for g in fields(value)}
                if hasattr(value, "__dataclass_fields__")
                else value
            )
        return out
