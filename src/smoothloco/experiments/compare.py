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

import numpy as np

from smoothloco import plotting
from smoothloco.argtypes import positive_int
from smoothloco.train.checkpoint import CHECKPOINT_NAME
from smoothloco.train.ppo import PPOConfig
from smoothloco.train.run_folder import CONFIG_NAME, SUMMARY_NAME, RunFolderError, run_lock
from smoothloco.train.runner import interrupted, train
from smoothloco.train.runs import ALGORITHMS, RunConfig, TrainConfig, check_same_settings
from smoothloco.train.shac import SHACConfig
from smoothloco.validation import one_line

THRESHOLD_FRACTION = 0.9
METRICS = ("episode_return", "lin_vel_error", "yaw_rate_error", "fall_rate")
# A walking policy on the evaluation grid.
WALKING = {"lin_vel_error": 0.15, "yaw_rate_error": 0.2, "fall_rate": 0.0}


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
    "full": Budget(num_envs=None, evals=17, interval_multiple=10, ppo_factor=8, eval_seconds=5.0, seeds=3, ppo_eval_stride=4),
}

# PPO settings the comparison can run. legged_gym's is the default; the others spend each sample
# on more gradient steps, PPO's usual levers of sample efficiency: 4x the minibatch updates per
# batch, or half the batch (so twice the updates per sample).
PPO_VARIANTS: dict[str, Callable[[PPOConfig], PPOConfig]] = {
    "legged_gym": lambda c: c,
    "more_epochs": lambda c: replace(c, num_updates_per_batch=2 * c.num_updates_per_batch, num_minibatches=2 * c.num_minibatches),
    "half_batch": lambda c: replace(c, num_envs=c.num_envs // 2),
}

Trainer = Callable[[TrainConfig], list[dict]]  # a finished run's metrics rows


def check_variants(variants: tuple[str, ...]) -> None:
    """A ``ValueError`` naming the accepted variants for an unknown (or no) PPO variant."""
    unknown = [v for v in variants if v not in PPO_VARIANTS]
    if unknown or not variants:
        raise ValueError(f"unknown PPO variant(s) {', '.join(unknown) or '(none given)'}; accepted: {', '.join(PPO_VARIANTS)}")


def run_name(variant: str) -> str:
    """The run (and folder prefix) of a PPO variant: ``ppo`` for legged_gym's settings."""
    return "ppo" if variant == "legged_gym" else f"ppo-{variant}"


def run_configs(budget: Budget, seed: int, out: Path, variants: tuple[str, ...] = ("legged_gym",)) -> dict[str, TrainConfig]:
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
    out: Path, budget: Budget, seeds: int, trainer: Trainer = default_trainer, variants: tuple[str, ...] = ("legged_gym",)
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
        v: _summarize({"shac": curves["shac"], "ppo": curves[run_name(v)]}, budget, seeds, _ppo_settings(configs[run_name(v)]))
        for v in variants
    }
    shac_config = {k: v for k, v in asdict(configs["shac"].shac).items() if k != "seed"}
    result = {**_with_variants(summaries), "shac_config": shac_config, "curves": curves}  # curves keyed by run name
    (out / "compare.json").write_text(json.dumps(result, indent=2))
    (out / "compare.md").write_text(_markdown(result))
    _plot(out / "compare.png", curves, result["thresholds"]["return"]["value"])
    return result


def _ppo_settings(config: TrainConfig) -> dict[str, Any]:
    return {k: v for k, v in asdict(config.ppo).items() if k != "seed"}


def _with_variants(summaries: dict[str, dict]) -> dict:
    """The headline: the variant that walks in the fewest environment steps on every seed (the
    first listed when none does), with every variant's thresholds and ratios beside it."""
    walking = {v: s["thresholds"]["walking"]["ppo"] for v, s in summaries.items()}
    reached = [v for v in summaries if walking[v]["reached_threshold"]]
    best = min(reached, key=lambda v: walking[v]["env_steps"]) if reached else next(iter(summaries))
    table = {}
    for variant, s in summaries.items():
        table[variant] = {"ppo_config": s["ppo_config"], "ppo": s["ppo"]}
        for kind, t in s["thresholds"].items():
            ratios = {k: v for k, v in t.items() if "ratio" in k}
            table[variant][kind] = {**ratios, **{f"ppo_{k}": v for k, v in t["ppo"].items()}}
    return {**summaries[best], "ppo_variant": best, "ppo_variants": table}


def seed_curves(runs: list[list[dict]]) -> dict[str, list[float]]:
    """Seed mean and spread at each evaluation; every seed has the same schedule."""
    length = min(len(r) for r in runs)
    if length == 0:
        raise ValueError("a run finished without any evaluation")
    column = lambda key: np.array([[row[key] for row in r[:length]] for r in runs], float)  # noqa: E731 (seeds, evals)
    curves = {
        "env_steps": [int(x) for x in column("env_steps")[0]],
        "train_wall_s": column("train_wall_s").mean(0).tolist(),
    }
    for metric in METRICS:
        values = column(f"eval/{metric}")
        curves[f"{metric}_mean"] = values.mean(0).tolist()
        curves[f"{metric}_min"] = values.min(0).tolist()
        curves[f"{metric}_max"] = values.max(0).tolist()
    curves["episode_return_per_seed"] = column("eval/episode_return").tolist()
    curves["train_wall_s_per_seed"] = column("train_wall_s").tolist()
    walking = np.all([column(f"eval/{m}") <= limit for m, limit in WALKING.items()], axis=0)
    curves["walking_per_seed"] = walking.tolist()
    return curves


def first_walking(curves: dict) -> dict:
    """Per seed, the environment steps and training wall-clock of its first walking evaluation;
    their mean and range when every seed walks."""
    firsts = [next((i for i, w in enumerate(seed) if w), None) for seed in curves["walking_per_seed"]]
    steps = [None if i is None else curves["env_steps"][i] for i in firsts]
    walls = [None if i is None else curves["train_wall_s_per_seed"][k][i] for k, i in enumerate(firsts)]
    reached = all(i is not None for i in firsts)
    return {
        "reached_threshold": reached,
        "seeds_reached": sum(i is not None for i in firsts),
        "per_seed_env_steps": steps,
        "per_seed_train_wall_s": walls,
        "env_steps": float(np.mean(steps)) if reached else None,
        "env_steps_min_max": [min(steps), max(steps)] if reached else None,
        "train_wall_s": float(np.mean(walls)) if reached else None,
    }


def _first_reach(curves: dict, threshold: float) -> dict:
    mean = np.asarray(curves["episode_return_mean"])
    hits = np.flatnonzero(mean >= threshold)
    per_seed = [
        next((curves["env_steps"][i] for i, v in enumerate(seed) if v >= threshold), None)
        for seed in curves["episode_return_per_seed"]
    ]
    first = hits[0] if hits.size else None
    return {
        "reached_threshold": first is not None,
        "env_steps": None if first is None else curves["env_steps"][first],
        "train_wall_s": None if first is None else curves["train_wall_s"][first],
        "per_seed_env_steps": per_seed,
    }


def _ratios(shac: dict, ppo: dict) -> dict:
    """PPO / SHAC at one threshold; None where either did not reach it, then a lower bound on the
    step ratio from PPO's whole budget when SHAC reached it."""
    both = shac["reached_threshold"] and ppo["reached_threshold"]
    out = {
        "env_steps_ratio_ppo_over_shac": ppo["env_steps"] / shac["env_steps"] if both else None,
        "wall_ratio_ppo_over_shac": ppo["train_wall_s"] / shac["train_wall_s"] if both else None,
    }
    if shac["reached_threshold"] and not ppo["reached_threshold"]:
        out["env_steps_ratio_lower_bound"] = ppo["total_env_steps"] / shac["env_steps"]
    return out


def _summarize(curves: dict[str, dict], budget: Budget, seeds: int, ppo_config: dict) -> dict:
    shac_final = curves["shac"]["episode_return_mean"][-1]
    value = shac_final - (1 - THRESHOLD_FRACTION) * abs(shac_final)  # = 0.9 x final when it is positive
    totals, walking, by_return = {}, {}, {}
    for algo, c in curves.items():
        steps, wall = c["env_steps"], c["train_wall_s"]
        totals[algo] = {
            "total_env_steps": steps[-1],
            "total_train_wall_s": wall[-1],
            # The first evaluation's time is mostly compilation; the speed is taken after it.
            "first_eval_train_wall_s": wall[0],
            "env_steps_per_s": (steps[-1] - steps[0]) / (wall[-1] - wall[0]) if len(steps) > 1 else None,
            "final": {m: c[f"{m}_mean"][-1] for m in METRICS},
            "best_return": max(c["episode_return_mean"]),
        }
        walking[algo] = {**first_walking(c), "total_env_steps": steps[-1]}
        by_return[algo] = {**_first_reach(c, value), "total_env_steps": steps[-1]}
    thresholds = {
        "walking": {
            "definition": "first evaluation where a seed's policy walks on the grid: linear-velocity error "
            f"<= {WALKING['lin_vel_error']} m/s, yaw-rate error <= {WALKING['yaw_rate_error']} rad/s, no falls; "
            "steps and wall-clock are means over seeds, reached only when every seed walks",
            "shac": walking["shac"],
            "ppo": walking["ppo"],
            **_ratios(walking["shac"], walking["ppo"]),
        },
        "return": {
            "definition": f"{THRESHOLD_FRACTION:.0%} of SHAC's final evaluation return (mean over seeds); "
            "an algorithm reaches it at the first evaluation where its seed-mean return is at least that",
            "shac_final_return": shac_final,
            "value": value,
            "shac": by_return["shac"],
            "ppo": by_return["ppo"],
            **_ratios(by_return["shac"], by_return["ppo"]),
        },
    }
    headline = thresholds["walking"]
    result = {
        "budget": asdict(budget),
        "seeds": seeds,
        "ppo_config": ppo_config,
        "eval_interval_env_steps": curves["shac"]["env_steps"][0],
        "evaluation": "deterministic policy on the fixed command grid (measure.grid.EVAL_COMMANDS), no pushes or "
        f"randomization, {budget.eval_seconds:g} s per command; return = reward summed until a fall, "
        "mean over commands",
        "threshold_kind": "walking",
        "ppo_reached_threshold": headline["ppo"]["reached_threshold"],
        "env_steps_ratio_ppo_over_shac": headline["env_steps_ratio_ppo_over_shac"],
        "wall_ratio_ppo_over_shac": headline["wall_ratio_ppo_over_shac"],
        "thresholds": thresholds,
        "shac": totals["shac"],
        "ppo": totals["ppo"],
        "curves": curves,
    }
    if "env_steps_ratio_lower_bound" in headline:
        result["env_steps_ratio_lower_bound"] = headline["env_steps_ratio_lower_bound"]
    return result


def _shac_settings(r: dict) -> str:
    shac = r.get("shac_config")
    if shac is None:  # a comparison saved before SHAC's settings were recorded
        return f"{r['budget']['num_envs']} environments"
    return f"{shac['num_envs']} environments x {shac['horizon']} steps, {shac['iterations']} iterations"


def _markdown(r: dict) -> str:
    fmt = lambda x, spec: "not reached" if x is None else format(x, spec)  # noqa: E731
    ppo = r["ppo_config"]
    lines = [
        "# SHAC vs PPO: sample efficiency",
        "",
        f"{r['seeds']} seed(s) each, evaluation every {r['eval_interval_env_steps']:,} environment steps: "
        f"{r['evaluation']}. SHAC: {_shac_settings(r)}. PPO: Brax's PPO with "
        f"{ppo['num_envs']} environments x {ppo['unroll_length']} steps, {ppo['num_updates_per_batch']} epochs x "
        f"{ppo['num_minibatches']} minibatches, learning rate {ppo['learning_rate']:g}"
        f"{' (adaptive KL)' if ppo['adaptive_kl'] else ''}, entropy {ppo['entropy_cost']:g}.",
        "",
        "| algorithm | env steps run | env steps/s (after the first evaluation) | final return "
        "| final lin err (m/s) | final yaw err (rad/s) | final fall rate |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for algo in ALGORITHMS:
        a, f = r[algo], r[algo]["final"]
        lines.append(
            f"| {algo.upper()} | {a['total_env_steps']:,} | {fmt(a['env_steps_per_s'], '.0f')} "
            f"| {f['episode_return']:.3f} | {f['lin_vel_error']:.3f} | {f['yaw_rate_error']:.3f} | {f['fall_rate']:.2f} |"
        )
    for kind, t in r["thresholds"].items():
        lines += ["", f"## Threshold: {kind}", "", t["definition"] + ".", ""]
        lines += ["| algorithm | env steps to threshold | train wall-clock to threshold (s) | per seed (env steps) |"]
        lines += ["|---|---:|---:|---|"]
        for algo in ALGORITHMS:
            a = t[algo]
            per_seed = ", ".join(fmt(x, ",") for x in a["per_seed_env_steps"])
            lines.append(f"| {algo.upper()} | {fmt(a['env_steps'], ',.0f')} | {fmt(a['train_wall_s'], '.0f')} | {per_seed} |")
        lines.append("")
        if t["env_steps_ratio_ppo_over_shac"] is not None:
            lines.append(
                f"PPO / SHAC: **{t['env_steps_ratio_ppo_over_shac']:.1f}x** the environment steps, "
                f"**{t['wall_ratio_ppo_over_shac']:.1f}x** the training wall-clock."
            )
        elif "env_steps_ratio_lower_bound" in t:
            lines.append(
                f"PPO did not reach the threshold on every seed ({t['ppo'].get('seeds_reached', 0)} of {r['seeds']}) "
                f"within {t['ppo']['total_env_steps']:,} steps, so it needs more than "
                f"{t['env_steps_ratio_lower_bound']:.1f}x SHAC's environment steps."
            )
        else:
            lines.append("SHAC did not reach the threshold, so there is no ratio.")
    if len(r["ppo_variants"]) > 1:
        lines += ["", "## PPO settings", "", f"The ratios above use `{r['ppo_variant']}`, the settings that walk in the "
                  "fewest environment steps on every seed. Changes from legged_gym's settings, and each one's ratios:", "",
                  "| PPO settings | changes | env steps to walking (per seed) | PPO / SHAC steps, walking "
                  "| env steps to 90 % return | PPO / SHAC steps, return |", "|---|---|---|---:|---:|---:|"]  # fmt: skip
        envs = r["budget"]["num_envs"]
        legged_gym = asdict(PPOConfig() if envs is None else PPOConfig(num_envs=envs))
        for variant, v in r["ppo_variants"].items():
            walking, by_return = v["walking"], v["return"]
            per_seed = ", ".join(fmt(x, ",") for x in v["walking"]["ppo_per_seed_env_steps"])
            changes = ", ".join(f"{k} {x}" for k, x in v["ppo_config"].items() if x != legged_gym[k] and k != "iterations")
            changes = changes or "none"
            lines.append(
                f"| {variant} | {changes} | {per_seed} | {fmt(walking['env_steps_ratio_ppo_over_shac'], '.1f')} "
                f"| {fmt(by_return['ppo_env_steps'], ',.0f')} | {fmt(by_return['env_steps_ratio_ppo_over_shac'], '.1f')} |"
            )
    return "\n".join(lines) + "\n"


def _plot(path: Path, curves: dict[str, dict], threshold: float) -> None:
    plt = plotting.pyplot()

    fig, axes = plt.subplots(2, 2, figsize=(11, 7.5), sharey="row")
    rows = (("episode_return", "evaluation return"), ("lin_vel_error", "linear-velocity error (m/s)"))
    for col, (x_key, scale, x_label) in enumerate(
        (("env_steps", 1.0, "environment steps"), ("train_wall_s", 60.0, "training wall-clock (min)"))
    ):
        for row, (metric, y_label) in enumerate(rows):
            ax = axes[row, col]
            for i, (algo, c) in enumerate(curves.items()):
                x = np.asarray(c[x_key]) / scale
                ax.plot(x, c[f"{metric}_mean"], "o-", ms=3, color=f"C{i}", label=f"{algo.upper().replace('-', ' ')} (mean)")
                ax.fill_between(x, c[f"{metric}_min"], c[f"{metric}_max"], color=f"C{i}", alpha=0.2)
            if metric == "episode_return":
                ax.axhline(threshold, color="k", ls="--", lw=1, label="threshold")
            ax.set_xlabel(x_label)
            ax.set_ylabel(y_label)
            ax.grid(alpha=0.3)
    axes[0, 0].legend()
    fig.suptitle("SHAC vs PPO on the same task: seed mean, band = min..max over seeds")
    plotting.save(fig, path, dpi=100)


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
