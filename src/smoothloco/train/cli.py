"""``smoothloco train``: every config field is a flag, ``--<section>.<field>``, generated from
the typed dataclasses so the command line and the configs cannot drift apart.

``--resume RUN`` continues a run with its recorded settings; only the flags of
``runner.RESUME_SETTINGS`` may come with it (to extend the run or change its evaluation and checkpoint cadence), any other flag is
refused by name.

Exit status: 0 when the run finished (or a resumed run had already finished), 2 for a usage or
run-folder error (nothing trained), ``EXIT_INTERRUPTED`` when SIGINT/SIGTERM stopped it (the
checkpoint resumes it)."""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
import typing
from pathlib import Path

from smoothloco.tasks import DEFAULT_REWARD_WEIGHTS, VelocityTaskConfig
from smoothloco.train.ppo import PPOConfig
from smoothloco.train.shac import SHACConfig

SECTIONS = (("task", VelocityTaskConfig), ("shac", SHACConfig), ("ppo", PPOConfig))
EXIT_INTERRUPTED = 130  # 128 + SIGINT, the shell's convention; a SIGTERM-stopped run also exits with it

HELP = {
    "task.contact": "contact model of the training simulator: hard, smooth or soft",
    "task.sharpness": "smooth contact sigmoid sharpness s in 1/m (weight = 1/(1+exp(s*gap)))",
    "task.sim_dt": "simulation step in seconds",
    "task.control_dt": "control period in seconds (a whole number of sim steps)",
    "task.action_scale": "radians of joint-target offset per unit action",
    "task.obs_noise": "multiplier of the per-signal sensor noise levels (0 = none)",
    "task.gait.frequency": "gait clock in cycles per second, observed by the policy and timing the swing-height "
    "reward (0 = no clock)",
    "task.gait.hip_amplitude": "trot generator (PMTG-style) hip flexion at mid-swing in rad, added open-loop to the "
    "policy's joint targets; the knee flexes twice as much (0 = off: the policy steps by itself)",
    "task.gait.swing_height": "peak foot height in m that the feet_swing_height reward asks of a swinging foot",
    "task.privileged_critic": "give the critic privileged observations (friction, mass, contacts)",
    "shac.num_envs": "parallel environments (split over all devices)",
    "shac.horizon": "control steps per SHAC window (backpropagation length)",
    "shac.iterations": "training iterations; environment steps = iterations * num_envs * horizon. With --resume: "
    "train to this iteration (>= the checkpoint's; more than a finished run's extends it). The learning-rate decay "
    "and the sharpness schedule end at the last iteration, so extending a run moves their end point",
    "shac.env_grad_clip": "clip each environment's actor gradient at this multiple of the batch median norm (0 = off)",
    "shac.seed": "random seed",
    "ppo.num_envs": "parallel environments (split over all devices)",
    "ppo.iterations": "rollout + update rounds; environment steps = iterations * num_envs * unroll_length",
    "ppo.seed": "random seed",
    "run.out": "run folder (config, metrics, checkpoints, plots, summary)",
    "run.checkpoint_every": "iterations between checkpoints (may change with --resume)",
    "run.eval_every": "iterations between evaluations on the fixed command grid (0 = only at the end; may change "
    "with --resume)",
    "run.eval_seconds": "seconds per command of each evaluation; longer than its 1 s settling time",
    "run.compile_cache": "persistent compilation cache; each host CPU gets its own folder inside (empty: no cache)",
}


def _flags(prefix: str, cls) -> list[tuple[str, type, object]]:
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


def _parse_value(kind, text: str):
    origin = typing.get_origin(kind)
    if kind is bool:
        if text.lower() in ("1", "true", "yes", "on"):
            return True
        if text.lower() in ("0", "false", "no", "off"):
            return False
        raise argparse.ArgumentTypeError(f"expected true or false, got {text!r}")
    if origin is tuple:
        item = typing.get_args(kind)[0]
        return tuple(item(x) for x in text.split(","))
    return kind(text)


def add_parser(sub) -> None:
    from smoothloco.train.runner import ALGORITHMS, RunConfig

    parser = sub.add_parser(
        "train",
        help="train a velocity-tracking policy with SHAC or PPO (defaults: SHAC, smooth contact, pushes, "
        "randomization)",
        description="Train with SHAC (ours) or PPO (Brax's) on the same task. Every setting is a flag; values shown "
        "are the defaults; only the chosen algorithm's section is used. Write negative values as --flag=-0.5.",
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
        "--algo",
        type=_algorithm,
        default=None,  # None: not given (shac), so that --resume can refuse it
        metavar="|".join(ALGORITHMS),
        help="training algorithm: ours (shac) or Brax's PPO (ppo) (default shac)",
    )
    for prefix, cls in (*SECTIONS, ("run", RunConfig)):
        for name, kind, default in _flags(prefix, cls):
            shown = ",".join(map(str, default)) if isinstance(default, tuple) else default
            parser.add_argument(
                f"--{name}",
                dest=name,
                metavar=kind.__name__ if isinstance(kind, type) else "A,B",
                type=lambda t, k=kind: _parse_value(k, t),
                help=f"{HELP.get(name, '')} (default {shown})".strip(),
            )
    parser.set_defaults(func=run_train)


def _algorithm(text: str) -> str:
    from smoothloco.train.runner import ALGORITHMS

    if text not in ALGORITHMS:
        raise argparse.ArgumentTypeError(f"unknown algorithm {text!r}; accepted: {', '.join(ALGORITHMS)}")
    return text


def config_from_args(args: argparse.Namespace):
    from smoothloco.train.runner import RunConfig, TrainConfig

    given = {k: v for k, v in vars(args).items() if "." in k and v is not None}

    def build(prefix: str, cls):
        kwargs = {}
        for f in dataclasses.fields(cls):
            name = f"{prefix}.{f.name}"
            default = f.default if f.default is not dataclasses.MISSING else f.default_factory()  # type: ignore[misc]
            if dataclasses.is_dataclass(default):
                kwargs[f.name] = build(name, type(default))
            elif isinstance(default, dict):
                kwargs[f.name] = {k: given.get(f"{name}.{k}", v) for k, v in default.items()}
            elif name in given:
                kwargs[f.name] = given[name]
        return cls(**kwargs)

    sections = {prefix: build(prefix, cls) for prefix, cls in (*SECTIONS, ("run", RunConfig))}
    return TrainConfig(algo=getattr(args, "algo", None) or "shac", **sections)


def _given_flags(args: argparse.Namespace) -> dict[str, object]:
    """The config flags given on the command line, by destination (``shac.iterations``, ``algo``)."""
    given = {k: v for k, v in vars(args).items() if "." in k and v is not None}
    if getattr(args, "algo", None) is not None:
        given["algo"] = args.algo
    return given


def _flag_name(dest: str) -> str:
    return "--out" if dest == "run.out" else f"--{dest}"


def resume_config(run_dir: Path, args: argparse.Namespace):
    """The config of the run in ``run_dir``, training there (wherever it was made), with the
    flags of ``RESUME_SETTINGS`` given in ``args`` applied. ValueError (one line) for a folder
    that is not a resumable run or for any other flag."""
    from smoothloco.train.runner import RESUME_SETTINGS, TrainConfig

    resumable = [f"{section}.{key}" for section, key in RESUME_SETTINGS]
    given = _given_flags(args)
    refused = [_flag_name(k) for k in given if k not in resumable]
    if refused:
        allowed = ", ".join(_flag_name(k) for k in resumable)
        raise ValueError(
            f"--resume {run_dir} continues the run with its recorded settings; it takes only {allowed}, "
            f"not {', '.join(refused)}"
        )
    config_file = run_dir / "config.json"
    if not config_file.is_file():
        raise ValueError(f"--resume {run_dir}: no config.json there (not a run folder)")
    try:
        config = TrainConfig.from_dict(json.loads(config_file.read_text()))
    except (KeyError, TypeError, ValueError) as exc:  # JSONDecodeError is a ValueError
        raise ValueError(f"--resume {run_dir}: {config_file} is not a readable run configuration: {exc!r}") from exc
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
    from smoothloco.train.checkpoint import CheckpointError
    from smoothloco.train.run_folder import RunAlreadyFinished, RunFolderError
    from smoothloco.train.runner import interrupted, train

    try:
        config = resume_config(Path(args.resume), args) if args.resume else config_from_args(args)
    except (ValueError, TypeError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    try:
        _, _, history = train(config, resume=bool(args.resume))
    except RunAlreadyFinished as done:
        print(done, flush=True)
        return 0
    except (CheckpointError, FileExistsError, RunFolderError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:  # before the training loop took over SIGINT (start-up), or after it
        print(f"interrupted; {config.run.out} keeps its last checkpoint, if it has one", file=sys.stderr)
        return EXIT_INTERRUPTED
    return EXIT_INTERRUPTED if interrupted(config, history) else 0


__all__ = ["add_parser", "DEFAULT_REWARD_WEIGHTS"]
