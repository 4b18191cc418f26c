"""``smoothloco study contact``: the contact-model study behind the claims that hard contact
misleads learning, soft contact does not transfer and smoothed contact does both (docs/design.md).

SHAC trains with ``hard``, ``soft`` and ``smooth`` contact on one budget (several seeds each);
every policy is evaluated in its own simulator, in ``hard`` and in MuJoCo (through the export);
the gradient-quality measurement (``evaluate.gradients``) runs for each contact model. Written
to ``DIR``: ``study.json``, ``study.md``, ``transfer.png``, ``gradients.png`` and ``runs/``.

Training, evaluation and the gradient measurement are arguments of ``run_contact_study`` so
the pipeline can be tested with stand-ins. A full study takes about an hour on 2 CPU cores:
``--resume`` continues an interrupted one, keeping every finished training (its
``summary.json``) and evaluation (``eval-<sim>/summary.json``) and resuming an unfinished
training from its checkpoint.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np

from smoothloco import plotting
from smoothloco.argtypes import positive_int
from smoothloco.evaluate.gradients import GradientSettings, contact_gradient_quality
from smoothloco.evaluate.metrics import nanmean
from smoothloco.evaluate.scenarios import standard_scenarios
from smoothloco.evaluate.transfer import evaluate_run, write_report
from smoothloco.tasks import VelocityTaskConfig
from smoothloco.train.checkpoint import CHECKPOINT_NAME, CheckpointError
from smoothloco.train.runner import interrupted, train
from smoothloco.train.runs import LoadedRun, RunConfig, TrainConfig, load_run
from smoothloco.train.shac import SHACConfig

MODELS = ("hard", "soft", "smooth")
EVAL_SIMS = ("hard", "mujoco")  # besides each policy's own simulator
# The penalty model diverges at the 5 ms step with random actions and runs at 2.5 ms (README,
# physics notes); it gets the smaller step, the impulse models the task's default.
TASK_OVERRIDES: dict[str, dict[str, Any]] = {"soft": {"sim_dt": 0.0025}}


@dataclass(frozen=True)
class StudyBudget:
    """SHAC settings shared by every run, and the gradient measurement's size."""

    shac: dict[str, Any]
    gradients: GradientSettings = field(default_factory=GradientSettings)
    seeds: int = 2
    scenarios: dict[str, Any] = field(default_factory=dict)  # arguments of ``standard_scenarios``


BUDGETS: dict[str, StudyBudget] = {
    # Compilation-bound: per contact model SHAC ~2.5 min, the training's grid evaluation, our
    # evaluation rollout ~1 min and the gradient Jacobian ~3 min (CPU time measured on 2 cores);
    # estimated 20-25 min in all on an idle 2-core machine, less with a warm .jax_cache. The
    # runs train 12 x 1,024 steps: enough to exercise the pipeline, not to learn to walk.
    "quick": StudyBudget(
        shac={"num_envs": 64, "horizon": 16, "iterations": 12},
        gradients=GradientSettings(windows=(4, 8, 16), batches=3, envs=8, warmup=10, directions=4, samples=8),
        # 19 of the 47 standard scenarios: the MuJoCo player takes ~1 s of CPU per scenario.
        scenarios={"push_speeds": (1.0,), "push_directions": 4, "mismatches": ((0.5, 5.0), (1.25, -5.0))},
    ),
    # The default SHAC run (~12 min each on 2 CPU cores, soft at half the step ~25 min): 2 h 14 min measured.
    "full": StudyBudget(shac={}, gradients=GradientSettings()),
}

class StudyInterrupted(RuntimeError):
    """A training of the study was stopped by SIGINT/SIGTERM (its checkpoint resumes it)."""


TrainFn = Callable[..., tuple]  # (TrainConfig, resume=bool) -> (make_policy, params, history)
EvaluateFn = Callable[[Path, str, tuple], dict]  # (run folder, sim, scenarios) -> evaluation summary
GradientFn = Callable[[Sequence[str], GradientSettings], dict]


def train_config(model: str, seed: int, budget: StudyBudget, runs_dir: Path) -> TrainConfig:
    return TrainConfig(
        task=replace(VelocityTaskConfig(), contact=model, **TASK_OVERRIDES.get(model, {})),
        shac=replace(SHACConfig(), seed=seed, **budget.shac),
        run=RunConfig(out=str(runs_dir / f"{model}-seed{seed}"), eval_every=0, deploy=False),
    )


def evaluate_and_report(run_dir: Path, sim: str, scenarios: tuple) -> dict:
    """The evaluation on ``scenarios``, its report written to ``RUN/eval-<sim>/``."""
    summary, trajectories = evaluate_run(run_dir, sim, scenarios)
    write_report(run_dir / f"eval-{sim}", sim, summary, scenarios, trajectories)
    return summary


def measure_gradients(models: Sequence[str], settings: GradientSettings, run: LoadedRun | None = None) -> dict:
    return contact_gradient_quality(models, settings, lambda m: TASK_OVERRIDES.get(m, {}), run=run)


def separations(gradients: dict, key: str = "batch_cosine") -> dict[str, list[dict[str, float]]]:
    """Per pair of contact models and window: the difference of ``key`` and whether the 95 %
    intervals leave it measured (|difference| > the two half-widths together)."""
    out = {}
    names = list(gradients)
    for i, a in enumerate(names):
        for b in names[i + 1 :]:
            rows = []
            for k, window in enumerate(gradients[a]["windows"]):
                diff = gradients[a][key][k] - gradients[b][key][k]
                margin = gradients[a][f"{key}_ci95"][k] + gradients[b][f"{key}_ci95"][k]
                rows.append({"window": window, "difference": diff, "margin": margin, "separated": abs(diff) > margin})
            out[f"{a} - {b}"] = rows
    return out


def run_gradient_study(
    out: Path, run_dir: Path, settings: GradientSettings, models: Sequence[str] = MODELS, measure=measure_gradients
) -> dict:
    """Gradient quality through each contact model at the initial actor and at ``run_dir``'s
    trained one; writes ``gradients.json``, ``gradients.md`` and one figure per policy."""
    out.mkdir(parents=True, exist_ok=True)
    run = load_run(run_dir)
    tic = time.perf_counter()
    result: dict[str, Any] = {"run": str(run_dir), "run_iteration": run.iteration, "settings": settings.__dict__}
    for policy, measured in (("initial", measure(models, settings)), ("trained", measure(models, settings, run))):
        result[policy] = {"gradients": measured, "separations": separations(measured)}
        plot_gradients(measured, out / f"gradients-{policy}.png", f"{policy} policy")
    result["wall_s"] = time.perf_counter() - tic
    (out / "gradients.json").write_text(json.dumps(result, indent=2, default=float))
    lines = ["# Gradient quality through each contact model", "",
             f"Initial actor and the trained actor of `{run_dir}` (iteration {run.iteration}); {settings.batches} batches of "
             f"{settings.envs} environments, {settings.samples} zeroth-order samples in {settings.directions} directions; "
             f"{result['wall_s'] / 60:.0f} min.", ""]  # fmt: skip
    for policy in ("initial", "trained"):
        lines += gradient_table(result[policy]["gradients"], f"{policy} policy") + [""]
        lines += ["| pair | window | batch-cosine difference | ± margin | separated |", "|---|---:|---:|---:|---|"]
        for pair, rows in result[policy]["separations"].items():
            lines += [f"| {pair} | {r['window']} | {r['difference']:+.3f} | {r['margin']:.3f} | "
                      f"{'yes' if r['separated'] else 'no'} |" for r in rows]  # fmt: skip
        lines += ["", f"![{policy}](gradients-{policy}.png)", ""]
    (out / "gradients.md").write_text("\n".join(lines))
    return result


def run_contact_study(
    out: Path,
    budget: StudyBudget,
    models: Sequence[str] = MODELS,
    train_fn: TrainFn = train,
    evaluate_fn: EvaluateFn = evaluate_and_report,
    gradient_fn: GradientFn = measure_gradients,
    resume: bool = False,
) -> dict:
    """Train, evaluate, measure gradients; write the study files and return ``study.json``'s content.

    With ``resume``, finished trainings and evaluations in ``out`` are reused, not repeated."""
    out.mkdir(parents=True, exist_ok=True)
    scenarios = standard_scenarios(**budget.scenarios)
    runs = []
    for model in models:
        for seed in range(budget.seeds):
            config = train_config(model, seed, budget, out / "runs")
            tic = time.perf_counter()
            run_dir = Path(config.run.out)
            row = {"model": model, "seed": seed, "run": str(run_dir), **_trained(run_dir, config, train_fn, resume)}
            for sim in dict.fromkeys((model, *EVAL_SIMS)):
                evaluation = _saved(run_dir / f"eval-{sim}" / "summary.json", resume)
                evaluation = evaluation or evaluate_fn(run_dir, sim, scenarios)
                row[sim] = {k: v for k, v in evaluation.items() if k not in ("scenarios", "sim")}
            row["seconds"] = time.perf_counter() - tic
            runs.append(row)
            print(f"study: {model} seed {seed} done in {row['seconds']:.0f} s", flush=True)
    gradients = gradient_fn(models, budget.gradients)
    study = {
        "budget": {
            "shac": budget.shac,
            "seeds": budget.seeds,
            "gradients": budget.gradients.__dict__,
            "scenarios": [s.name for s in scenarios],
        },
        "task_overrides": {m: TASK_OVERRIDES.get(m, {}) for m in models},
        "runs": runs,
        "table": study_table(runs, models),
        "claims": claims(runs),
        "gradients": gradients,
    }
    (out / "study.json").write_text(json.dumps(study, indent=2, default=float) + "\n")
    (out / "study.md").write_text(study_markdown(study))
    plot_transfer(study["table"], out / "transfer.png")
    plot_gradients(gradients, out / "gradients.png")
    return study


def _saved(path: Path, resume: bool) -> dict | None:
    return json.loads(path.read_text()) if resume and path.exists() else None


def _trained(run_dir: Path, config, train_fn: TrainFn, resume: bool) -> dict[str, float]:
    """Train (or, resuming, reuse or continue) one run; its final return and environment steps."""
    summary = _saved(run_dir / "summary.json", resume)
    if summary is None:
        history = train_fn(config, resume=resume and (run_dir / CHECKPOINT_NAME).exists())[2]
        if interrupted(config, history):  # SIGINT/SIGTERM: neither evaluate the half-trained policy nor go on
            raise StudyInterrupted(f"{run_dir} stopped at iteration {history[-1]['iteration']}")
        return {"train_return": _final(history, "eval/episode_return"), "env_steps": _final(history, "env_steps")}
    print(f"study: reusing the finished training in {run_dir}", flush=True)
    return {"train_return": float(summary["episode_return"]), "env_steps": float(summary["env_steps"])}


def _final(history: list[dict], key: str) -> float:
    values = [row[key] for row in history if key in row]
    return float(values[-1]) if values else float("nan")


def _stats(values) -> dict[str, float]:
    values = np.asarray(list(values), float)
    finite = values[np.isfinite(values)]
    return {"mean": nanmean(values), "std": float(finite.std()) if finite.size else float("nan"), "n": int(finite.size)}


# (column, where in a run row, metric): the table of the claim.
TABLE_COLUMNS: tuple[tuple[str, str, str], ...] = (
    ("train_return", "", "train_return"),
    ("lin_vel_error_own", "own", "lin_vel_error"),
    ("lin_vel_error_hard", "hard", "lin_vel_error"),
    ("lin_vel_error_mujoco", "mujoco", "lin_vel_error"),
    ("yaw_rate_error_mujoco", "mujoco", "yaw_rate_error"),
    ("fall_rate_hard", "hard", "fall_rate"),
    ("fall_rate_mujoco", "mujoco", "fall_rate"),
    ("push_survival_hard", "hard", "push_survival"),
    ("push_survival_mujoco", "mujoco", "push_survival"),
)


def _value(run: dict, where: str, metric: str) -> float:
    if not where:
        return run[metric]
    return run[run["model"] if where == "own" else where][metric]


def study_table(runs: list[dict], models: Sequence[str]) -> dict[str, dict[str, dict[str, float]]]:
    """Mean, std and count over seeds of every column, per contact model."""
    return {
        m: {col: _stats(_value(r, where, metric) for r in runs if r["model"] == m) for col, where, metric in TABLE_COLUMNS}
        for m in models
    }


def claims(runs: list[dict]) -> dict[str, float]:
    """The study's numbers: how much soft-trained policies lose in MuJoCo, how far hard-trained
    ones stay behind smooth-trained ones, and how much smooth-trained ones lose in MuJoCo."""

    def mean(model: str, where: str, metric: str) -> float:
        return nanmean(_value(r, where, metric) for r in runs if r["model"] == model)

    return {
        "soft_mujoco_lin_vel_error_increase": mean("soft", "mujoco", "lin_vel_error") - mean("soft", "own", "lin_vel_error"),
        "soft_mujoco_fall_rate_increase": mean("soft", "mujoco", "fall_rate") - mean("soft", "own", "fall_rate"),
        "smooth_mujoco_lin_vel_error_increase": mean("smooth", "mujoco", "lin_vel_error")
        - mean("smooth", "own", "lin_vel_error"),
        "hard_learning_gap_return": mean("smooth", "", "train_return") - mean("hard", "", "train_return"),
        "hard_learning_gap_lin_vel_error": mean("hard", "own", "lin_vel_error") - mean("smooth", "own", "lin_vel_error"),
    }


CLAIM_TEXT = {
    "soft_mujoco_lin_vel_error_increase": "soft-trained: MuJoCo minus own-sim tracking error (m/s)",
    "soft_mujoco_fall_rate_increase": "soft-trained: MuJoCo minus own-sim fall rate",
    "smooth_mujoco_lin_vel_error_increase": "smooth-trained: MuJoCo minus own-sim tracking error (m/s)",
    "hard_learning_gap_return": "learning gap: smooth-trained minus hard-trained training return",
    "hard_learning_gap_lin_vel_error": "learning gap: hard-trained minus smooth-trained own-sim tracking error (m/s)",
}


def _fmt(s: dict[str, float], fmt: str = ".3f") -> str:
    if not np.isfinite(s["mean"]):
        return "–"
    return f"{s['mean']:{fmt}} ± {s['std']:{fmt}}" if s["n"] > 1 else f"{s['mean']:{fmt}}"


def study_markdown(study: dict) -> str:
    headers = [
        "training return",
        "lin. err. own sim",
        "lin. err. hard",
        "lin. err. MuJoCo",
        "yaw err. MuJoCo",
        "falls hard",
        "falls MuJoCo",
        "push survival hard",
        "push survival MuJoCo",
    ]
    lines = [
        "# Contact-model study",
        "",
        f"SHAC overrides {study['budget']['shac'] or 'none (defaults)'}, {study['budget']['seeds']} seeds per model; "
        "mean ± std over seeds. Errors in m/s and rad/s on the standard evaluation (`smoothloco eval`).",
        "",
        "| contact model | " + " | ".join(headers) + " |",
        "|---|" + "---:|" * len(headers),
    ]
    for model, cols in study["table"].items():
        lines.append(f"| {model} | " + " | ".join(_fmt(cols[c]) for c, *_ in TABLE_COLUMNS) + " |")
    lines += ["", "| claim | value |", "|---|---:|"]
    lines += [f"| {CLAIM_TEXT[k]} | {v:+.3f} |" for k, v in study["claims"].items()]
    lines += ["", *gradient_table(study["gradients"], "initial policy")]
    lines += ["", "![transfer](transfer.png)", "", "![gradients](gradients.png)", ""]
    return "\n".join(lines)


def gradient_table(gradients: dict, policy: str) -> list[str]:
    """Markdown lines: gradient quality per contact model and window, with 95 % intervals."""
    lines = [f"## Gradient quality ({policy}; ± 95 % interval over batches)", ""]
    lines += ["| contact model | window | batch cosine | relative std | cosine with zeroth order |", "|---|---:|---:|---:|---:|"]
    for model, g in gradients.items():
        for i, w in enumerate(g["windows"]):
            lines.append(
                f"| {model} | {w} | {g['batch_cosine'][i]:.3f}{_pm(g, 'batch_cosine_ci95', i)} | {g['relative_std'][i]:.2f} "
                f"| {g['zo_cosine'][i]:.3f}{_pm(g, 'zo_cosine_ci95', i)} |"
            )
    return lines


def _pm(gradients: dict, key: str, i: int) -> str:
    """`` ± half-width`` where the study has it (studies from before the intervals do not)."""
    return f" ± {gradients[key][i]:.3f}" if key in gradients else ""


def plot_transfer(table: dict, path: Path) -> None:
    """Tracking error in the policy's own simulator, in hard and in MuJoCo, per contact model."""
    plt = plotting.pyplot()
    columns = (("lin_vel_error_own", "own sim"), ("lin_vel_error_hard", "hard"), ("lin_vel_error_mujoco", "MuJoCo"))
    fig, ax = plt.subplots(figsize=(6, 3.5))
    x = np.arange(len(table))
    width = 0.8 / len(columns)
    for i, (col, label) in enumerate(columns):
        means = [table[m][col]["mean"] for m in table]
        stds = [np.nan_to_num(table[m][col]["std"]) for m in table]
        ax.bar(x + (i - 1) * width, means, width, yerr=stds, label=label, capsize=3)
    ax.set_xticks(x, [f"trained {m}" for m in table])
    ax.set_ylabel("linear velocity error (m/s)")
    ax.legend()
    ax.set_title("tracking error where each policy is evaluated")
    plotting.save(fig, path, dpi=100)


def plot_gradients(gradients: dict, path: Path, policy: str = "initial policy") -> None:
    """Batch cosine, relative spread and zeroth-order agreement against the window length."""
    plt = plotting.pyplot()
    panels = (
        ("batch_cosine", "cosine between batch gradients"),
        ("relative_std", "relative std of batch gradients"),
        ("zo_cosine", "cosine with zeroth-order estimate"),
    )
    fig, axes = plt.subplots(1, len(panels), figsize=(4 * len(panels), 3.2))
    for ax, (key, label) in zip(axes, panels):
        for model, g in gradients.items():
            ax.errorbar(g["windows"], g[key], yerr=g.get(f"{key}_ci95"), fmt="o-", capsize=3, label=model)
        ax.set_xscale("log", base=2)
        ax.set_xlabel("window (control steps)")
        ax.set_title(label, fontsize=10)
        if key == "relative_std":
            ax.set_yscale("log")
    axes[0].legend()
    fig.suptitle(f"policy-gradient quality through each contact model ({policy}; bars: 95 % intervals)")
    plotting.save(fig, path, dpi=100)


# -- command line ------------------------------------------------------------------------------
def add_parser(sub) -> None:
    parser = sub.add_parser(
        "study",
        allow_abbrev=False,
        help="the contact-model study: train SHAC with hard/soft/smooth, evaluate in hard and MuJoCo, gradient quality",
        description="Train SHAC with each contact model on one budget, evaluate every policy in its own simulator, "
        "in hard contact and in MuJoCo, measure policy-gradient quality per contact model, and write study.json, "
        "study.md and figures.",
    )
    parser.add_argument(
        "topic",
        choices=["contact", "gradients"],
        help="which study (contact: the contact-model study; gradients: gradient quality through each contact model "
        "at the initial actor and at --run's trained one)",
    )
    parser.add_argument("--run", metavar="RUN", help="gradients: the SHAC run whose trained actor is measured")
    parser.add_argument(
        "--batches", type=positive_int, default=8, help="gradients: independent batches behind each interval (default 8)"
    )
    parser.add_argument("--out", metavar="DIR", required=True, help="study folder (must not hold a study yet)")
    parser.add_argument(
        "--budget", choices=list(BUDGETS), default="quick", help="quick: ~20-25 min on 2 CPU cores, untrained-quality policies; full: ~1 h (52 min measured on 2 CPU cores)"
    )
    parser.add_argument("--seeds", type=positive_int, help="seeds per contact model (default 2)")
    parser.add_argument(
        "--resume",
        action="store_true",
        help="continue an interrupted study in --out with the same --budget and --seeds: finished trainings and "
        "evaluations are kept, an unfinished training continues from its checkpoint",
    )
    parser.set_defaults(func=run_study)


def run_study(args: argparse.Namespace) -> int:
    out = Path(args.out)
    if args.topic == "gradients":
        if not args.run:
            print("error: study gradients needs --run RUN (a trained SHAC run)", file=sys.stderr)
            return 2
        settings = replace(GradientSettings(), batches=args.batches)
        try:
            run_gradient_study(out, Path(args.run), settings)
        except (CheckpointError, ValueError) as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 2
        print((out / "gradients.md").read_text())
        return 0
    if args.resume and not (out / "runs").exists():
        print(f"error: {out} holds no study to resume (no {out / 'runs'})", file=sys.stderr)
        return 2
    if not args.resume and ((out / "study.json").exists() or (out / "runs").exists()):
        print(f"error: {out} already holds a study; continue it with --resume or choose another --out", file=sys.stderr)
        return 2
    budget = BUDGETS[args.budget]
    if args.seeds:
        budget = replace(budget, seeds=args.seeds)
    try:
        run_contact_study(out, budget, resume=args.resume)
    except StudyInterrupted as exc:
        print(f"interrupted ({exc}); continue the study with --resume --out {out}", file=sys.stderr)
        return 130
    print((out / "study.md").read_text().split("\n## ")[0])
    print(f"wrote {out / 'study.json'}, {out / 'study.md'}, figures and runs/ in {out}")
    return 0
