"""``smoothloco train``: every config field is a flag, ``--<section>.<field>``, generated from
the typed dataclasses so the command line and the configs cannot drift apart.

``--config FILE`` starts from a saved ``config.json`` (a run's, to reproduce it) instead of
the defaults; flags given with it override it. ``--resume RUN`` continues a run with its
recorded settings; only the flags of ``runs.RESUME_SETTINGS`` may come with it (to extend the
run or change its evaluation and checkpoint cadence), any other flag is refused by name.

Exit status: 0 when the run finished (or a resumed run had already finished), 1 when the run
folder could not be written (a full disk), 2 for a usage or run-folder error (nothing trained),
``EXIT_DIVERGED`` when SHAC stopped on non-finite updates, ``EXIT_INTERRUPTED`` when
SIGINT/SIGTERM stopped it (the checkpoint resumes it), ``EXIT_PROCESS_LOST`` when a process of
a job of several stopped (the checkpoint resumes it).

``--coordinator``, ``--num-processes`` and ``--process-id`` make the command one process of a
job (``smoothloco.job``, docs/scale-out.md); they describe how it runs, not the run, so they are
not recorded in ``config.json`` and may change from one session of a run to the next."""

from __future__ import annotations

import argparse
import dataclasses
import functools
import os
import shutil
import sys
import typing
from pathlib import Path

from smoothloco import job
from smoothloco.argtypes import config_value, metavar, positive_int
from smoothloco.evaluate.play import deploy_after_training
from smoothloco.robot import BUNDLED_ROBOTS, DEFAULT_ROBOT
from smoothloco.robot.loading import is_spec_path
from smoothloco.tasks import VelocityTaskConfig
from smoothloco.train.checkpoint import CheckpointError
from smoothloco.train.ppo import PPOConfig
from smoothloco.train.run_folder import CONFIG_NAME, RunAlreadyFinished, RunFolderError, TrainingDiverged
from smoothloco.train.runner import check_divides_over_devices, interrupted, train
from smoothloco.train.runs import ALGORITHMS, RESUME_SETTINGS, RunConfig, TrainConfig, read_config
from smoothloco.train.shac import SHACConfig
from smoothloco.validation import help_of, one_line, with_settings

SECTIONS = (("task", VelocityTaskConfig), ("shac", SHACConfig), ("ppo", PPOConfig), ("run", RunConfig))
EXIT_INTERRUPTED = 130  # 128 + SIGINT, the shell's convention; a SIGTERM-stopped run also exits with it
EXIT_DIVERGED = 3  # SHAC stopped after run.max_skipped_iterations non-finite iterations in a row
EXIT_PROCESS_LOST = 4  # another process of the job stopped; the checkpoint resumes the run

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


def _fields(prefix: str, cls) -> list[tuple[str, type, object, str]]:
    """``(flag name, type, default, help)`` of every field of ``cls``, nested sections and dict
    entries included. A field's help is the one ``validation.setting`` keeps beside it; the
    reward weights, entries of one dict, share one made from the term's name."""
    out = []
    hints = typing.get_type_hints(cls)
    for f in dataclasses.fields(cls):
        default = f.default if f.default is not dataclasses.MISSING else f.default_factory()  # type: ignore[misc]
        name = f"{prefix}.{f.name}"
        if dataclasses.is_dataclass(default):
            out += _fields(name, type(default))
        elif isinstance(default, dict):
            out += [(f"{name}.{k}", float, v, _weight_help(k)) for k, v in default.items()]
        elif help_of(f) is None:
            raise TypeError(f"config field {cls.__name__}.{f.name} has no help: declare it with validation.setting")
        else:
            out.append((name, hints[f.name], default, help_of(f)))
    return out


def _weight_help(term: str) -> str:
    return f"weight of the {term} reward term per simulated second (> 0 rewards, < 0 penalizes, 0 = off)"


@functools.cache
def _config_fields() -> tuple[tuple[str, type, object, str], ...]:
    return tuple(entry for prefix, cls in SECTIONS for entry in _fields(prefix, cls))


def config_flags() -> list[tuple[str, type, object]]:
    """Every config flag of ``smoothloco train``, as ``(name, type, default)``."""
    return [(name, kind, default) for name, kind, default, _ in _config_fields()]


def flag_help(name: str) -> str:
    """The help of config flag ``name`` (``shac.horizon``), as declared beside its field."""
    for flag, _, _, text in _config_fields():
        if flag == name:
            return text
    raise KeyError(name)


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
    job = parser.add_argument_group(
        "job of several processes",
        "one process of a job training over many devices or machines (docs/scale-out.md); under SLURM's srun or "
        "Open MPI's mpirun the three are read from the scheduler's environment",
    )
    job.add_argument(
        "--coordinator",
        metavar="HOST:PORT",
        help="address of process 0, where the others join (any free port on its host)",
    )
    job.add_argument("--num-processes", type=positive_int, metavar="N", help="processes in the job (default 1)")
    job.add_argument(
        "--process-id", type=_process_id, metavar="I", help="this process's number, 0 to N-1; 0 writes the run folder"
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
            help=f"{flag_help(name)} (default {shown})".replace("%", "%%"),  # argparse formats help with %
        )
    parser.set_defaults(func=run_train)


def _process_id(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = -1
    if value < 0:
        raise argparse.ArgumentTypeError(f"expected a whole number >= 0, got {text!r}")
    return value


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
        job.start(args.coordinator, args.num_processes, args.process_id)  # before JAX computes anything
        config = resume_config(Path(args.resume), args) if args.resume else config_from_args(args)
        check_divides_over_devices(config)
    except (ValueError, TypeError, job.JobError) as exc:
        print(f"error: {one_line(exc)}", file=sys.stderr)
        return 2
    try:
        _, _, history = train(config, resume=bool(args.resume))
    except RunAlreadyFinished as done:
        print(done, flush=True)
        return 0
    except job.JobError as exc:  # process 0 refused to start: the same exit status as there
        print(f"error: {exc}", file=sys.stderr)
        return 0 if exc.kind == RunAlreadyFinished.__name__ else 2
    except job.ProcessLost as exc:
        print(f"error: {exc}", file=sys.stderr)
        # JAX's shutdown waits for every process of the job and aborts this one with a fatal
        # log when one has gone; the run folder holds all there is to keep.
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(EXIT_PROCESS_LOST)
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
    if not job.is_lead():  # process 0 deploys and says what comes next
        return 0
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
    smoothloco = _command("smoothloco") or f"{python} -m smoothloco.commands"
    logs = run_dir / "tensorboard"
    tensorboard = _command("tensorboard")
    if tensorboard is None:
        tensorboard = f"{python} -m pip install tensorboard && {_beside_python('tensorboard')}"
    return [
        f"finished: {run_dir / 'summary.md'}, {run_dir / 'training.png'}",
        f"the policy in MuJoCo: {smoothloco} eval {run_dir} --sim mujoco",
        f"the curves in TensorBoard: {tensorboard} --logdir {logs}",
    ]
