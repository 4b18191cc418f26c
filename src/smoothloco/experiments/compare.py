"""``smoothloco compare``: SHAC against Brax's PPO on the same task, seeds and evaluation schedule.

Every run is an ordinary training run (``runner.train``) in ``OUT/<algo>-seed<k>``. Both
algorithms are evaluated with the same command-grid evaluation every ``eval_interval`` environment
steps (a common multiple of one SHAC and one PPO iteration); PPO gets ``ppo_factor`` times SHAC's
environment steps, since it is expected to need more. Two thresholds, each reached at the first
evaluation that meets it:

- ``walking`` (the headline): a walking policy on the grid, linear error <= 0.15 m/s, yaw-rate
  error <= 0.2 rad/s, no falls; per seed, then the mean and spread over seeds;
- ``return``: 90 % of SHAC's final evaluation return, on the seed-mean return curve.

The tables say how many environment steps and how much training wall-clock (evaluation time
left out, compilation included) each algorithm needs, and their PPO / SHAC ratios. PPO can run
in several settings (``--ppo-variants``: legged_gym's, and variants that spend each sample on
more gradient steps); the headline ratio uses the one that walks in the fewest environment
steps on every seed, and the table lists them all.
"""

from __future__ import annotations

import argparse
import csv
import json
import math
import shutil
import sys
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any, Callable

from smoothloco.argtypes import positive_int
from smoothloco.experiments.compare_report import markdown, plot, seed_curves, summarize, with_variants
from smoothloco.train.checkpoint import CHECKPOINT_NAME
from smoothloco.train.ppo import PPOConfig
from smoothloco.train.run_folder import CONFIG_NAME, SUMMARY_NAME, RunFolderError, run_lock
from smoothloco.train.runner import interrupted, train
from smoothloco.train.runs import RunConfig, TrainConfig, check_same_settings
from smoothloco.train.shac import SHACConfig
from smoothloco.validation import one_line


@dataclass(frozen=True)
class Budget:
    num_envs: int | None  # both algorithms' environments; None: each algorithm's default
    evals: int  # SHAC evaluations; PPO runs ppo_factor times SHAC's steps on the same schedule
    interval_multiple: int  # eval interval = this * lcm(SHAC iteration, PPO iteration) env steps
    ppo_factor: int
    eval_seconds: float
    seeds: int
    # PPO is evaluated at every this-many of SHAC's evaluation steps: its steps to walking are
    # many times SHAC's, and a fine grain there would cost more evaluation than training.
    ppo_eval_stride: int = 1

    def __post_init__(self) -> None:
        if (self.evals * self.ppo_factor) % self.ppo_eval_stride:
            raise ValueError(
                f"PPO's {self.evals * self.ppo_factor} evaluation steps (SHAC's {self.evals} x the PPO factor "
                f"{self.ppo_factor}) must be a multiple of its evaluation stride {self.ppo_eval_stride}"
            )


# quick is bound by compilation (SHAC's update, PPO's epoch and the evaluation, per seed) and
# trains no walking policy. full uses both algorithms' default settings: SHAC 1,020 iterations
# (1.04M steps, an evaluation every 61,440; the default run has 1,024), PPO 8x its steps (8.4M,
# where legged_gym's settings walked from about 6M), evaluated every 245,760 steps.
BUDGETS = {
    "quick": Budget(num_envs=64, evals=6, interval_multiple=1, ppo_factor=4, eval_seconds=2.0, seeds=2),
    "full": Budget(
        num_envs=None, evals=17, interval_multiple=10, ppo_factor=8, eval_seconds=5.0, seeds=3, ppo_eval_stride=4
    ),
}

# PPO settings the comparison can run. legged_gym's is the default; the others spend each sample
# on more gradient steps, PPO's usual levers of sample efficiency: 4x the minibatch updates per
# batch, or half the batch (so twice the updates per sample).
PPO_VARIANTS: dict[str, Callable[[PPOConfig], PPOConfig]] = {
    "legged_gym": lambda c: c,
    "more_epochs": lambda c: replace(
        c, num_updates_per_batch=2 * c.num_updates_per_batch, num_minibatches=2 * c.num_minibatches
    ),
    "half_batch": lambda c: replace(c, num_envs=c.num_envs // 2),
}

Trainer = Callable[[TrainConfig], list[dict]]  # a finished run's metrics rows


def check_variants(variants: tuple[str, ...]) -> None:
    """A ``ValueError`` naming the accepted variants for an unknown (or no) PPO variant."""
    unknown = [v for v in variants if v not in PPO_VARIANTS]
    if unknown or not variants:
        raise ValueError(
            f"unknown PPO variant(s) {', '.join(unknown) or '(none given)'}; accepted: {', '.join(PPO_VARIANTS)}"
        )


def run_name(variant: str) -> str:
    """The run (and folder prefix) of a PPO variant: ``ppo`` for legged_gym's settings."""
    return "ppo" if variant == "legged_gym" else f"ppo-{variant}"


def run_configs(
    budget: Budget, seed: int, out: Path, variants: tuple[str, ...] = ("legged_gym",)
) -> dict[str, TrainConfig]:
    """SHAC and each PPO variant's config, keyed by run name, all evaluated on the same
    environment steps."""
    check_variants(variants)
    envs = {} if budget.num_envs is None else {"num_envs": budget.num_envs}
    shac = SHACConfig(seed=seed, **envs)
    ppos = {run_name(v): PPO_VARIANTS[v](PPOConfig(seed=seed, **envs)) for v in variants}
    per_iteration = {"shac": shac.num_envs * shac.horizon, **{name: c.steps_per_iteration for name, c in ppos.items()}}
    interval = math.lcm(*per_iteration.values()) * budget.interval_multiple
    stride = {name: 1 if name == "shac" else budget.ppo_eval_stride for name in per_iteration}
    every = {name: stride[name] * interval // steps for name, steps in per_iteration.items()}
    shac = replace(shac, iterations=every["shac"] * budget.evals)
    configs = {}
    for name in every:
        run = RunConfig(
            out=str(out / f"{name}-seed{seed}"),
            eval_every=every[name],
            checkpoint_every=every[name],
            eval_seconds=budget.eval_seconds,
            deploy=False,
        )
        if name == "shac":
            configs[name] = TrainConfig(algo="shac", shac=shac, ppo=next(iter(ppos.values())), run=run)
        else:
            ppo = replace(ppos[name], iterations=every[name] * budget.evals * budget.ppo_factor // stride[name])
            configs[name] = TrainConfig(algo="ppo", shac=shac, ppo=ppo, run=run)
    return configs


def default_trainer(config: TrainConfig) -> list[dict]:
    """Train in ``config.run.out``, or take up what an earlier call left there, saying which: a
    finished run is reused and an interrupted SHAC run continues from its checkpoint, both only
    when trained with this very configuration; an interrupted PPO run (Brax's loop cannot
    continue) starts again from scratch. A run of other settings there (a quick comparison's,
    asked for a full one) is a ``ValueError`` before anything is touched."""
    run_dir = Path(config.run.out)
    if (run_dir / CONFIG_NAME).is_file():
        check_same_settings(run_dir, config)
    finished = finished_history(run_dir)
    if finished is not None:
        print(f"reusing the finished run in {run_dir} (trained with the same settings)", flush=True)
        return finished
    resume = (run_dir / CHECKPOINT_NAME).is_file()
    if resume and config.algo != "shac":
        print(f"restarting the interrupted {config.algo} run in {run_dir} from scratch (Brax's PPO cannot continue "
              "from a checkpoint)", flush=True)  # fmt: skip
        with run_lock(run_dir, create=False):  # never under a training that still runs there
            (run_dir / CHECKPOINT_NAME).unlink()
            shutil.rmtree(run_dir / "tensorboard", ignore_errors=True)  # its curves would mix with the new ones
        resume = False
    elif resume:
        print(f"continuing the interrupted run in {run_dir} from its checkpoint", flush=True)
    history = train(config, resume=resume)[2]
    if interrupted(config, history):
        raise ComparisonInterrupted(f"{run_dir} stopped at iteration {history[-1]['iteration']}")
    return history


def finished_history(run_dir: Path) -> list[dict] | None:
    """A finished run's metrics rows as numbers (its ``summary.json`` marks it finished), else None."""
    if not (run_dir / SUMMARY_NAME).is_file():
        return None
    with (run_dir / "metrics.csv").open() as f:
        return [{k: float(v) for k, v in row.items() if v != ""} for row in csv.DictReader(f)]


class ComparisonInterrupted(RuntimeError):
    """A training was stopped by SIGINT/SIGTERM; its checkpoint continues it on the next call."""


def compare(
    out: Path,
    budget: Budget,
    seeds: int,
    trainer: Trainer = default_trainer,
    variants: tuple[str, ...] = ("legged_gym",),
) -> dict:
    """Train SHAC and each PPO variant on ``seeds`` seeds and write ``compare.json``,
    ``compare.md`` and ``compare.png`` to ``out``; returns what ``compare.json`` holds."""
    if seeds < 1:
        raise ValueError(f"--seeds must be >= 1, got {seeds}")
    out.mkdir(parents=True, exist_ok=True)
    evaluations: dict[str, list[list[dict]]] = {}
    for seed in range(seeds):
        for name, config in run_configs(budget, seed, out, variants).items():
            history = trainer(config)
            evaluations.setdefault(name, []).append([row for row in history if "eval/episode_return" in row])
    curves = {name: seed_curves(runs) for name, runs in evaluations.items()}
    configs = run_configs(budget, 0, out, variants)
    summaries = {
        v: summarize(
            {"shac": curves["shac"], "ppo": curves[run_name(v)]},
            asdict(budget),
            seeds,
            _ppo_settings(configs[run_name(v)]),
        )
        for v in variants
    }
    shac_config = {k: v for k, v in asdict(configs["shac"].shac).items() if k != "seed"}
    result = {**with_variants(summaries), "shac_config": shac_config, "curves": curves}  # curves keyed by run name
    (out / "compare.json").write_text(json.dumps(result, indent=2))
    (out / "compare.md").write_text(markdown(result))
    plot(out / "compare.png", curves, result["thresholds"]["return"]["value"])
    return result


def _ppo_settings(config: TrainConfig) -> dict[str, Any]:
    return {k: v for k, v in asdict(config.ppo).items() if k != "seed"}


def add_parser(sub) -> None:
    parser = sub.add_parser(
        "compare",
        allow_abbrev=False,
        help="train SHAC and PPO on the same seeds and compare sample efficiency (figure + table)",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--out", required=True, metavar="DIR", help="folder for the runs, compare.png/.json/.md")
    parser.add_argument(
        "--budget",
        choices=sorted(BUDGETS),
        default="quick",
        help="quick: minutes, no walking policies; full: each algorithm at its defaults, SHAC 1.04M and PPO 8.4M steps, about 20 min per seed (legged_gym PPO) on an idle 2-core CPU (default quick)",
    )
    parser.add_argument("--seeds", type=positive_int, metavar="N", help="seeds per algorithm (default: the budget's)")
    parser.add_argument(
        "--ppo-variants",
        type=variant_list,
        default=("legged_gym",),
        metavar="NAME[,NAME...]",
        help=f"PPO settings to run, each on every seed: {', '.join(PPO_VARIANTS)} (default legged_gym)",
    )
    parser.add_argument(
        "--ppo-factor",
        type=positive_int,
        metavar="N",
        help="PPO's environment steps as a multiple of SHAC's (default: the budget's, full 8)",
    )
    parser.set_defaults(func=run_compare)


def variant_list(text: str) -> tuple[str, ...]:
    names = tuple(dict.fromkeys(text.split(",")))
    try:
        check_variants(names)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    return names


def run_compare(args: argparse.Namespace) -> int:
    budget = BUDGETS[args.budget]
    if args.ppo_factor:
        budget = replace(budget, ppo_factor=args.ppo_factor)
    try:
        compare(Path(args.out), budget, args.seeds or budget.seeds, variants=args.ppo_variants)
    except (RunFolderError, ValueError) as exc:
        print(f"error: {one_line(exc)}", file=sys.stderr)
        return 2
    except ComparisonInterrupted as exc:
        print(f"interrupted ({exc}); the same command continues it (SHAC from its checkpoint, PPO from scratch)",
              file=sys.stderr)  # fmt: skip
        return 130
    print((Path(args.out) / "compare.md").read_text())
    return 0
