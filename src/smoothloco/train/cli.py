"""``smoothloco train``: every config field is a flag, ``--<section>.<field>``, generated from
the typed dataclasses so the command line and the configs cannot drift apart.

``--config FILE`` starts from a saved ``config.json`` (a run's, to reproduce it) instead of
the defaults; flags given with it override it. ``--resume RUN`` continues a run with its
recorded settings; only the flags of ``runs.RESUME_SETTINGS`` may come with it (to extend the
run or change its evaluation and checkpoint cadence), any other flag is refused by name.

Exit status: 0 when the run finished (or a resumed run had already finished), 1 when the run
folder could not be written (a full disk), 2 for a usage or run-folder error (nothing trained),
``EXIT_DIVERGED`` when SHAC stopped on non-finite updates, ``EXIT_INTERRUPTED`` when
SIGINT/SIGTERM stopped it (the checkpoint resumes it)."""

from __future__ import annotations

import argparse
import dataclasses
import shutil
import sys
import typing
from pathlib import Path

from smoothloco.argtypes import config_value, describe, metavar
from smoothloco.deploy.play import deploy_after_training
from smoothloco.robot import BUNDLED_ROBOTS, DEFAULT_ROBOT
from smoothloco.robot.loading import is_spec_path
from smoothloco.tasks import VelocityTaskConfig
from smoothloco.train.checkpoint import CheckpointError
from smoothloco.train.ppo import PPOConfig
from smoothloco.train.run_folder import CONFIG_NAME, RunAlreadyFinished, RunFolderError, TrainingDiverged
from smoothloco.train.runner import check_divides_over_devices, interrupted, train
from smoothloco.train.runs import ALGORITHMS, RESUME_SETTINGS, RunConfig, TrainConfig, read_config
from smoothloco.train.shac import SHACConfig
from smoothloco.validation import one_line, with_settings

SECTIONS = (("task", VelocityTaskConfig), ("shac", SHACConfig), ("ppo", PPOConfig), ("run", RunConfig))
EXIT_INTERRUPTED = 130  # 128 + SIGINT, the shell's convention; a SIGTERM-stopped run also exits with it
EXIT_DIVERGED = 3  # SHAC stopped after run.max_skipped_iterations non-finite iterations in a row
_ENVS = "parallel environments (split over all devices)"
_EPISODE = "control steps before an episode is cut off (bootstrapped, not a fall); 1000 = 20 s at 50 Hz"

# Help of each flag. A field without an entry gets one made from its name and type
# (``flag_help``); the reward weights all get theirs that way.
HELP = {
    "task.robot": "robot: a bundled one (anymal_c, go2) or the path of a robot spec file (docs/own-robot.md); "
    "the task settings its spec states replace the defaults below",
    "task.contact": "contact model of the training simulator: hard, smooth or soft",
    "task.sharpness": "smooth contact: sigmoid sharpness s in 1/m (contact weight 1/(1+exp(s*gap)))",
    "task.sim_dt": "simulation step in seconds",
    "task.soft_stiffness": "soft contact: penalty spring stiffness in N/m (stiffer needs a smaller task.sim_dt)",
    "task.soft_damping": "soft contact: penalty damping in N·s/m",
    "task.control_dt": "control period in seconds (a whole number of simulation steps)",
    "task.action_scale": "radians of joint-target offset per unit action",
    "task.obs_noise": "multiplier of the per-signal sensor noise levels (0 = none)",
    "task.privileged_critic": "give the critic privileged observations (friction, mass, contacts)",
    "task.motor_envelope": "limit the torque by the robot's DC-motor torque-speed envelope where its spec states one "
    "(less torque the faster a joint turns) instead of a flat torque limit",
    "task.hills_height": "height of the rolling hills to train on, trough to crest, m (0 = flat ground)",
    "task.hills_wavelength": "length of the hills' middle wave, m (the other two are 0.69 and 1.31 times it)",
    "task.observe_base_lin_vel": "the actor observes the base's linear velocity (false: proprioception and IMU only, "
    "as on a robot without a velocity estimator; needs task.gait.recovery_speed 0)",
    "task.obs_history": "observation frames the actor sees, newest first (1 = the current one only)",
    "task.velocity_error_window": "s; > 0: the actor also observes command minus measured velocity averaged over "
    "about this long (integral action against a steady shortfall); 0 = not observed",
    "task.velocity_trim.rate": "outer velocity loop while walking: the actor observes the command plus a trim that "
    "integrates the average velocity error at this rate, 1/s (0 = off; needs task.velocity_error_window > 0)",
    "task.velocity_trim.hold": "s after each new command before the trim moves (it restarts from zero)",
    "task.velocity_trim.freeze": "the trim holds still while the planar average velocity error exceeds this, m/s",
    "task.velocity_trim.restart_tolerance": "a command this far (norm, m/s and rad/s) from the one the trim started "
    "for restarts it; smaller changes (a joystick's) keep it",
    "task.velocity_trim.limit": "largest trim on each axis, m/s and rad/s",
    "task.velocity_trim.closed_loop": "train inside the loop too (default: the policy learns to track on its own; "
    "the loop closes around it in evaluations and at deployment)",
    "task.min_base_height": "an episode ends when the base is lower than this, m",
    "task.min_knee_height": "an episode ends when a knee is lower than this above the ground, m",
    "task.max_tilt_deg": "an episode ends when the base tilts more than this from upright, degrees",
    "task.max_speed": "an episode ends when any base or joint velocity exceeds this (the simulation diverged)",
    "task.base_height_target": "standing height of the base in m that the base_height reward term holds",
    "task.tracking_sigma": "width of the velocity-tracking rewards exp(-error^2/sigma); smaller is stricter",
    "task.commands.lin_vel_x": "range low,high of the commanded forward velocity, m/s",
    "task.commands.lin_vel_y": "range low,high of the commanded sideways velocity, m/s",
    "task.commands.yaw_rate": "range low,high of the commanded turning rate, rad/s",
    "task.commands.resample_seconds": "a new command is drawn after a time uniform in low,high seconds",
    "task.commands.zero_probability": "share of the commands that are zero (stand still)",
    "task.pushes.enabled": "kick the base at random times during training",
    "task.pushes.max_speed": "largest horizontal velocity kick of the base, m/s",
    "task.pushes.interval_seconds": "time between kicks, uniform in low,high seconds",
    "task.gait.frequency": "gait clock in cycles per second, observed by the policy and timing the swing-height "
    "reward (0 = no clock)",
    "task.gait.hip_amplitude": "trot generator: hip flexion at mid-swing in rad, added open-loop to the policy's "
    "joint targets; the knee flexes twice as much (0 = off: the policy steps by itself)",
    "task.gait.swing_height": "peak foot height in m that the feet_swing_height reward asks of a swinging foot",
    "task.gait.recovery_speed": "at a zero command the gait still runs while the base moves faster than this, m/s, "
    "so that a push is answered with steps (0 = the command alone decides)",
    "task.gait.hide_clock_when_standing": "the gait clock observation reads (0, 0) while the command asks to stand "
    "(its norm at most 0.1)",
    "task.randomization.enabled": "randomize the physics of each environment within the ranges below",
    "task.randomization.friction": "range low,high of the ground friction coefficient",
    "task.randomization.added_base_mass": "range low,high of the mass added to the base, kg",
    "task.randomization.base_com_offset": "shift of the base's centre of mass, uniform in [-x, x] on each axis, m",
    "task.randomization.kp_scale": "range low,high of the factor on the joints' PD stiffness",
    "task.randomization.kd_scale": "range low,high of the factor on the joints' PD damping",
    "task.randomization.motor_strength": "range low,high of the factor on the joint torques",
    "task.randomization.hard_corner_fraction": "fraction of environments with every range above at its harder end at once",
    "task.randomization.rotor_armature_per_torque": "range low,high of the rotor inertia added to every driven "
    "joint per N·m of its torque limit, kg·m²/(N·m) (a geared drive's reflected inertia)",
    "task.randomization.joint_friction_share": "range low,high of the joints' Coulomb friction as a share of their "
    "torque limit (a gearbox's losses)",
    "task.randomization.action_delay": "range low,high of the delay before joint targets reach the motors, s "
    "(whole simulation steps, at most task.control_dt)",
    "shac.num_envs": _ENVS,
    "shac.horizon": "control steps per SHAC window (how far gradients flow back through the simulator)",
    "shac.iterations": "training iterations; environment steps = iterations * num_envs * horizon. With --resume: "
    "train to this iteration (>= the checkpoint's; more than a finished run's extends it). The learning-rate decay "
    "and the sharpness schedule end at the last iteration, so extending a run moves their end point",
    "shac.gamma": "discount factor per control step",
    "shac.td_lambda": "lambda of the critic's TD(lambda) targets",
    "shac.actor_lr": "actor learning rate (Adam)",
    "shac.critic_lr": "critic learning rate (Adam)",
    "shac.lr_decay": "decay both learning rates linearly to 10 %% over the run",
    "shac.max_grad_norm": "clip the global norm of each actor and critic gradient at this value",
    "shac.env_grad_clip": "clip each environment's actor gradient at this multiple of the batch median norm (0 = off)",
    "shac.env_grad_trim": "leave out this fraction of the environments with the largest actor gradient norms and "
    "rescale the rest to the batch, a trimmed mean (0 = off)",
    "shac.critic_epochs": "passes over each iteration's data when fitting the critic",
    "shac.critic_minibatches": "minibatches per critic pass; must divide num_envs * horizon",
    "shac.target_critic_alpha": "target critic smoothing: target <- alpha * target + (1 - alpha) * critic",
    "shac.actor_hidden": "hidden layer sizes of the actor network",
    "shac.critic_hidden": "hidden layer sizes of the critic network",
    "shac.init_log_std": "initial log standard deviation of the actor's exploration noise",
    "shac.episode_length": _EPISODE,
    "shac.sharpness_schedule": "smooth contact: sharpness start,end in 1/m, geometric over the run; it "
    "overrides task.sharpness (--shac.sharpness_schedule '' keeps task.sharpness throughout)",
    "shac.seed": "random seed",
    "ppo.num_envs": _ENVS,
    "ppo.unroll_length": "control steps each environment runs per rollout",
    "ppo.num_minibatches": "minibatches per pass over a rollout batch; must divide num_envs",
    "ppo.num_updates_per_batch": "passes over each rollout batch",
    "ppo.iterations": "rollout + update rounds; environment steps = iterations * num_envs * unroll_length",
    "ppo.learning_rate": "learning rate (Adam; the starting one when adaptive_kl is on)",
    "ppo.adaptive_kl": "adapt the learning rate to keep each update's policy change near desired_kl",
    "ppo.desired_kl": "KL divergence per update that adaptive_kl aims at",
    "ppo.entropy_cost": "weight of the entropy bonus",
    "ppo.discounting": "discount factor per control step",
    "ppo.gae_lambda": "lambda of the generalized advantage estimate",
    "ppo.clipping_epsilon": "clip range of the policy probability ratio",
    "ppo.clipping_epsilon_value": "clip range of the value function's change per update",
    "ppo.vf_loss_coefficient": "weight of the value loss",
    "ppo.max_grad_norm": "clip the global gradient norm at this value",
    "ppo.normalize_observations": "normalize observations with running mean and standard deviation",
    "ppo.policy_hidden": "hidden layer sizes of the policy network",
    "ppo.value_hidden": "hidden layer sizes of the value network",
    "ppo.episode_length": _EPISODE,
    "ppo.seed": "random seed",
    "run.out": "run folder (config, metrics, checkpoints, plots, summary)",
    "run.checkpoint_every": "iterations between checkpoints (may change with --resume)",
    "run.eval_every": "iterations between evaluations on the fixed command grid (0 = only at the end; may change "
    "with --resume)",
    "run.eval_seconds": "seconds per command of each evaluation; longer than its 1 s settling time",
    "run.compile_cache": "persistent compilation cache; each host CPU gets its own folder inside (empty: no cache)",
    "run.deploy": "once the run has finished, export the policy (ONNX) and render a short MuJoCo video",
    "run.max_skipped_iterations": "SHAC stops with exit status 3 (checkpoint kept) after this many iterations in a row "
    "whose update was skipped as non-finite",
}

# Help sections of the config flags, ``flag_section`` -> (heading, description). A task
# sub-section without an entry is headed by its name; sections appear in the fields' order.
SECTION_HELP = {
    "task": ("task", "the simulated task: robot, contact, observations, when an episode ends"),
    "task.reward_weights": ("task: rewards", "reward term weights per simulated second"),
    "task.randomization": ("task: randomization", "physics drawn per environment"),
    "shac": ("SHAC", "used with --algo shac (the default)"),
    "ppo": ("PPO", "used with --algo ppo"),
    "run": ("run", "the run folder, checkpoints, evaluations"),
}


def _flags(prefix: str, cls) -> list[tuple[str, type, object]]:
    """``(flag name, type, default)`` of every field of ``cls``, nested sections and dict entries included."""
    out = []
    hints = typing.get_type_hints(cls)
    for f in dataclasses.fields(cls):
        default = f.default if f.default is not dataclasses.MISSING else f.default_factory()  # type: ignore[misc]
        name = f"{prefix}.{f.name}"
        if dataclasses.is_dataclass(default):
            out += _flags(name, type(default))
        elif isinstance(default, dict):
            out += [(f"{name}.{k}", float, v) for k, v in default.items()]
        else:
            out.append((name, hints[f.name], default))
    return out


def config_flags() -> list[tuple[str, type, object]]:
    """Every config flag of ``smoothloco train``, as ``(name, type, default)``."""
    return [flag for prefix, cls in SECTIONS for flag in _flags(prefix, cls)]


def flag_help(name: str, kind) -> str:
    """The flag's ``HELP`` entry, else one made from its name and type."""
    if name in HELP:
        return HELP[name]
    section, _, field_name = name.rpartition(".")
    if section.endswith("reward_weights"):
        return f"weight of the {field_name} reward term per simulated second (> 0 rewards, < 0 penalizes, 0 = off)"
    return f"{field_name.replace('_', ' ')} ({section}; {describe(kind)})"


def flag_section(name: str) -> str:
    """The help section of a config flag: its section, or the task sub-section it belongs to."""
    parts = name.split(".")
    return ".".join(parts[:2]) if len(parts) > 2 else parts[0]


def _section_group(parser: argparse.ArgumentParser, section: str):
    heading, description = SECTION_HELP.get(section, (section.replace(".", ": ").replace("_", " "), None))
    return parser.add_argument_group(f"{heading} (--{section}.*)", description)


def add_parser(sub) -> None:
    parser = sub.add_parser(
        "train",
        allow_abbrev=False,
        # the generated usage lists all the flags (96 lines); the sections below show them
        usage="%(prog)s [--algo {shac,ppo}] [--out DIR] [--robot NAME_OR_PATH]\n"
        f"{' ' * len('usage: smoothloco train ')}[--config FILE | --resume RUN] [--SECTION.FIELD VALUE ...]",
        help="train a velocity-tracking policy with SHAC or PPO (defaults: SHAC, smooth contact, pushes, "
        "randomization)",
        description="Train with SHAC (ours) or PPO (Brax's) on the same task. Every setting is a flag; values shown "
        "are the defaults; only the chosen algorithm's section is used. Write negative values as --flag=-0.5.",
    )
    parser.add_argument(
        "--config",
        metavar="FILE",
        help="start from the settings in FILE (a run's config.json, or the run folder holding it) instead of the "
        "defaults, to reproduce that run; flags given with it override it. Give a new --out: the folder it "
        "names already holds that run",
    )
    parser.add_argument(
        "--resume",
        metavar="RUN",
        help="continue the (SHAC) run in folder RUN from its last checkpoint, in RUN wherever it has been moved, "
        "with its recorded settings; only --shac.iterations (to extend it), --run.eval_every and "
        "--run.checkpoint_every may be given with it",
    )
    parser.add_argument("--out", dest="run.out", metavar="DIR", help="run folder (same as --run.out)")
    parser.add_argument(
        "--robot",
        dest="task.robot",
        metavar="NAME_OR_PATH",
        help=f"same as --task.robot: {', '.join(BUNDLED_ROBOTS)} (default {DEFAULT_ROBOT}) or a robot spec .toml",
    )
    parser.add_argument(
        "--algo",
        type=_algorithm,
        default=None,  # None: not given (shac), so that --resume can refuse it
        metavar="|".join(ALGORITHMS),
        help="training algorithm: ours (shac) or Brax's PPO (ppo) (default shac)",
    )
    groups: dict[str, argparse._ArgumentGroup] = {}
    for name, kind, default in config_flags():
        shown = ",".join(map(str, default)) if isinstance(default, tuple) else default
        section = flag_section(name)
        if section not in groups:
            groups[section] = _section_group(parser, section)
        groups[section].add_argument(
            f"--{name}",
            dest=name,
            metavar=metavar(kind),
            type=config_value(kind),
            help=f"{flag_help(name, kind)} (default {shown})",
        )
    parser.set_defaults(func=run_train)


def _algorithm(text: str) -> str:
    if text not in ALGORITHMS:
        raise argparse.ArgumentTypeError(f"unknown algorithm {text!r}; accepted: {', '.join(ALGORITHMS)}")
    return text


def _given_flags(args: argparse.Namespace) -> dict[str, object]:
    """The config flags given on the command line, by destination (``shac.iterations``, ``algo``)."""
    given = {k: v for k, v in vars(args).items() if "." in k and v is not None}
    if getattr(args, "algo", None) is not None:
        given["algo"] = args.algo
    return given


def _with_flags(prefix: str, section, given: dict[str, object]):
    """``section`` (a config dataclass) with the flags of ``given`` under ``prefix`` applied
    (``--task.gait.frequency`` is ``{"gait": {"frequency": ...}}`` under ``task``)."""
    table: dict = {}
    for name, value in given.items():
        if name.startswith(f"{prefix}."):
            *path, leaf = name[len(prefix) + 1 :].split(".")
            entry = table
            for key in path:
                entry = entry.setdefault(key, {})
            entry[leaf] = value
    return with_settings(section, table, prefix)  # the sections validate again


def config_file_of(path: str | Path) -> Path:
    """``path`` itself, or ``path/config.json`` when ``path`` is a folder."""
    path = Path(path)
    return path / CONFIG_NAME if path.is_dir() else path


def config_from_args(args: argparse.Namespace) -> TrainConfig:
    """The defaults (the robot's, with ``--robot``), or ``--config``'s settings, with the flags
    given applied. A robot spec file is recorded by its absolute path."""
    given = _given_flags(args)
    robot = given.get("task.robot", DEFAULT_ROBOT)
    if is_spec_path(robot) and Path(robot).suffix == ".toml":
        robot = given["task.robot"] = str(Path(robot).resolve())
    base = TrainConfig(task=VelocityTaskConfig.for_robot(robot))
    if getattr(args, "config", None):
        if "task.robot" in given:
            raise ValueError(
                f"--robot with --config {args.config}: the saved settings are for the robot they name (task.robot); "
                "to train another robot, start from its defaults without --config"
            )
        try:
            base = read_config(config_file_of(args.config))
        except ValueError as exc:
            raise ValueError(f"--config {args.config}: {exc}") from exc
    sections = {prefix: _with_flags(prefix, getattr(base, prefix), given) for prefix, _ in SECTIONS}
    return dataclasses.replace(base, algo=given.get("algo", base.algo), **sections)


def _flag_name(dest: str) -> str:
    return "--out" if dest == "run.out" else f"--{dest}"


def resume_config(run_dir: Path, args: argparse.Namespace) -> TrainConfig:
    """The config of the run in ``run_dir``, training there (wherever it was made), with the
    flags of ``RESUME_SETTINGS`` given in ``args`` applied. ValueError (one line) for a folder
    that is not a resumable run or for any other flag."""
    resumable = [f"{section}.{key}" for section, key in RESUME_SETTINGS]
    given = _given_flags(args)
    refused = [_flag_name(k) for k in given if k not in resumable]
    if getattr(args, "config", None):
        refused.insert(0, "--config")
    if refused:
        allowed = ", ".join(_flag_name(k) for k in resumable)
        raise ValueError(
            f"--resume {run_dir} continues the run with its recorded settings; it takes only {allowed}, "
            f"not {', '.join(refused)}"
        )
    config_file = run_dir / CONFIG_NAME
    if not config_file.is_file():
        raise ValueError(f"--resume {run_dir}: no config.json there (not a run folder)")
    try:
        config = read_config(config_file)
    except ValueError as exc:
        raise ValueError(f"--resume {run_dir}: {exc}") from exc
    if config.algo != "shac":
        raise ValueError(f"--resume {run_dir}: only SHAC runs resume (Brax's PPO starts afresh)")
    # Train in the folder named, not where config.json says the run was made: a moved or
    # copied run resumes in place, and a relative run.out does not depend on the directory.
    sections = {"shac": config.shac, "run": dataclasses.replace(config.run, out=str(run_dir))}
    for section, key in RESUME_SETTINGS:
        if f"{section}.{key}" in given:
            sections[section] = dataclasses.replace(sections[section], **{key: given[f"{section}.{key}"]})
    return dataclasses.replace(config, **sections)  # each validates again


def run_train(args: argparse.Namespace) -> int:
    try:
        config = resume_config(Path(args.resume), args) if args.resume else config_from_args(args)
        check_divides_over_devices(config)
    except (ValueError, TypeError) as exc:
        print(f"error: {one_line(exc)}", file=sys.stderr)
        return 2
    try:
        _, _, history = train(config, resume=bool(args.resume))
    except RunAlreadyFinished as done:
        print(done, flush=True)
        return 0
    except (CheckpointError, FileExistsError, RunFolderError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except TrainingDiverged as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_DIVERGED
    except OSError as exc:  # a full disk, a read-only folder: checkpoints are written atomically
        where = f" {exc.filename}" if exc.filename else ""
        print(
            f"error: could not write{where}: {exc.strerror or exc}; {config.run.out} keeps its last complete "
            "checkpoint, if it has one (resume with --resume once there is room)",
            file=sys.stderr,
        )
        return 1
    except KeyboardInterrupt:  # before the training loop took over SIGINT (start-up), or after it
        print(f"interrupted; {config.run.out} keeps its last checkpoint, if it has one", file=sys.stderr)
        return EXIT_INTERRUPTED
    if interrupted(config, history):
        return EXIT_INTERRUPTED
    if config.run.deploy:
        deploy_after_training(Path(config.run.out))
    for line in next_steps(Path(config.run.out)):
        print(line, flush=True)
    return 0


def _beside_python(name: str) -> str:
    """The path of program ``name`` in this Python's folder (an unactivated virtual environment's
    ``bin``), relative to here where it is below."""
    path = Path(sys.executable).parent / name
    try:
        return str(path.relative_to(Path.cwd()))  # shorter, and still a path the shell runs
    except ValueError:
        return str(path)


def _command(name: str) -> str | None:
    """How to run program ``name`` from here: by name where it is on the PATH, else by its path
    beside this Python, else None (not installed)."""
    if shutil.which(name):
        return name
    return _beside_python(name) if (Path(sys.executable).parent / name).is_file() else None


def next_steps(run_dir: Path) -> list[str]:
    """The lines that end a finished run: its policy in MuJoCo and its curves in TensorBoard,
    each as a command that works here. TensorBoard itself is not a dependency (tensorboardX only
    writes the logs), so where it is missing the line installs it first."""
    python = _beside_python(Path(sys.executable).name)
    smoothloco = _command("smoothloco") or f"{python} -m smoothloco.cli"
    logs = run_dir / "tensorboard"
    tensorboard = _command("tensorboard")
    if tensorboard is None:
        tensorboard = f"{python} -m pip install tensorboard && {_beside_python('tensorboard')}"
    return [
        f"finished: {run_dir / 'summary.md'}, {run_dir / 'training.png'}",
        f"the policy in MuJoCo: {smoothloco} eval {run_dir} --sim mujoco",
        f"the curves in TensorBoard: {tensorboard} --logdir {logs}",
    ]
