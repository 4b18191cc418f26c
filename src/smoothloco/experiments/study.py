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

from smoothloco.argtypes import positive_int
from smoothloco.evaluate.transfer import evaluate_run, write_report
from smoothloco.experiments.compare import ComparisonInterrupted
from smoothloco.experiments.frontier import run_frontier_command
from smoothloco.experiments.gradients import GradientSettings, contact_gradient_quality
from smoothloco.experiments.study_report import (
    claims,
    gradient_table,
    plot_gradients,
    plot_transfer,
    study_markdown,
    study_table,
)
from smoothloco.measure.scenarios import standard_scenarios
from smoothloco.tasks import VelocityTaskConfig
from smoothloco.train.checkpoint import CHECKPOINT_NAME, CheckpointError
from smoothloco.train.run_folder import CONFIG_NAME, RunFolderError
from smoothloco.train.runner import interrupted, train
from smoothloco.train.runs import LoadedRun, RunConfig, TrainConfig, check_same_settings, load_run
from smoothloco.train.shac import SHACConfig
from smoothloco.validation import one_line

EVAL_SIMS = ("hard", "mujoco")  # besides each policy's own simulator
# The task's penalty spring and damper: damping ratio ~0.2 on a foot's ~0.1 kg effective mass.
DEFAULT_SOFT_STIFFNESS, DEFAULT_SOFT_DAMPING = VelocityTaskConfig.soft_stiffness, VelocityTaskConfig.soft_damping
# The penalty model is explicit in its spring: the largest step measured stable with random
# actions (no divergence over 5 s in 64 environments, docs/results.md) per stiffness bound.
# 1e4 N/m diverged at 5 ms, 2e4 at 5 ms, 4e4 at 2.5 ms.
SOFT_STABLE_STEPS: tuple[tuple[float, float], ...] = ((5.0e3, 0.005), (2.0e4, 0.0025), (4.0e4, 0.002))


@dataclass(frozen=True)
class Arm:
    """One arm of the study: a contact model and the task settings it trains under."""

    name: str
    contact: str
    task: dict[str, Any] = field(default_factory=dict)

    @property
    def settings(self) -> dict[str, Any]:
        """The task settings of the arm, its contact model included."""
        return {"contact": self.contact, **self.task}


def soft_arm(stiffness: float) -> Arm:
    """The penalty model with spring ``stiffness`` (N/m), at the default's damping ratio
    (damping scaled with the square root of the stiffness) and its largest stable step. The
    default stiffness is the arm ``soft``; others are named by stiffness (``soft-5k``)."""
    steps = [dt for bound, dt in SOFT_STABLE_STEPS if stiffness <= bound]
    if not (stiffness > 0 and steps):
        raise ValueError(
            f"soft stiffness {stiffness:g} N/m has no measured stable step; accepted: > 0 and up to "
            f"{SOFT_STABLE_STEPS[-1][0]:g} N/m"
        )
    damping = DEFAULT_SOFT_DAMPING * (stiffness / DEFAULT_SOFT_STIFFNESS) ** 0.5
    name = "soft" if stiffness == DEFAULT_SOFT_STIFFNESS else f"soft-{stiffness / 1000:g}k"
    return Arm(name, "soft", {"sim_dt": steps[0], "soft_stiffness": stiffness, "soft_damping": damping})


def study_arms(soft_stiffnesses: Sequence[float] = (DEFAULT_SOFT_STIFFNESS,)) -> tuple[Arm, ...]:
    """``hard``, one ``soft`` arm per stiffness (softest first) and ``smooth``; the impulse models
    at the task's default step."""
    return (Arm("hard", "hard"), *(soft_arm(k) for k in sorted(set(soft_stiffnesses))), Arm("smooth", "smooth"))


ARMS = study_arms()


@dataclass(frozen=True)
class StudyBudget:
    """SHAC settings shared by every run, and the gradient measurement's size."""

    shac: dict[str, Any]
    gradients: GradientSettings = field(default_factory=GradientSettings)
    seeds: int = 2
    scenarios: dict[str, Any] = field(default_factory=dict)  # arguments of ``standard_scenarios``
    soft_stiffnesses: tuple[float, ...] = (DEFAULT_SOFT_STIFFNESS,)  # N/m, one soft arm each

    @property
    def arms(self) -> tuple[Arm, ...]:
        return study_arms(self.soft_stiffnesses)


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
    # The default SHAC run (~12 min each on 2 CPU cores, soft at 2.5 ms ~20 min) per arm and seed;
    # the penalty model at three stiffnesses spanning dFlex-style springs, each at its stable step.
    "full": StudyBudget(shac={}, gradients=GradientSettings(), soft_stiffnesses=(2.0e3, 5.0e3, 2.0e4)),
}


class StudyInterrupted(RuntimeError):
    """A training of the study was stopped by SIGINT/SIGTERM (its checkpoint resumes it)."""


TrainFn = Callable[..., tuple]  # (TrainConfig, resume=bool) -> (make_policy, params, history)
EvaluateFn = Callable[[Path, str, tuple], dict]  # (run folder, sim, scenarios) -> evaluation summary
GradientFn = Callable[[Sequence[str], GradientSettings], dict]


def train_config(arm: Arm, seed: int, budget: StudyBudget, runs_dir: Path) -> TrainConfig:
    return TrainConfig(
        task=replace(VelocityTaskConfig(), **arm.settings),
        shac=replace(SHACConfig(), seed=seed, **budget.shac),
        run=RunConfig(out=str(runs_dir / f"{arm.name}-seed{seed}"), eval_every=0, deploy=False),
    )


def evaluate_and_report(run_dir: Path, sim: str, scenarios: tuple) -> dict:
    """The evaluation on ``scenarios``, its report written to ``RUN/eval-<sim>/``."""
    summary, trajectories = evaluate_run(run_dir, sim, scenarios)
    write_report(run_dir / f"eval-{sim}", sim, summary, scenarios, trajectories)
    return summary


def measure_gradients(arms: Sequence[Arm], settings: GradientSettings, run: LoadedRun | None = None) -> dict:
    by_name = {arm.name: arm.settings for arm in arms}
    return contact_gradient_quality(list(by_name), settings, by_name.__getitem__, run=run)


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
    out: Path, run_dir: Path, settings: GradientSettings, arms: Sequence[Arm] = ARMS, measure=measure_gradients
) -> dict:
    """Gradient quality through each contact model at the initial actor and at ``run_dir``'s
    trained one; writes ``gradients.json``, ``gradients.md`` and one figure per policy."""
    out.mkdir(parents=True, exist_ok=True)
    run = load_run(run_dir)
    tic = time.perf_counter()
    result: dict[str, Any] = {"run": str(run_dir), "run_iteration": run.iteration, "settings": settings.__dict__}
    for policy, measured in (("initial", measure(arms, settings)), ("trained", measure(arms, settings, run))):
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
    arms: Sequence[Arm] | None = None,
    train_fn: TrainFn = train,
    evaluate_fn: EvaluateFn = evaluate_and_report,
    gradient_fn: GradientFn = measure_gradients,
    resume: bool = False,
) -> dict:
    """Train, evaluate, measure gradients; write the study files and return ``study.json``'s content.

    ``arms`` default to the budget's. With ``resume``, finished trainings and evaluations in
    ``out`` are reused, not repeated."""
    arms = budget.arms if arms is None else arms
    out.mkdir(parents=True, exist_ok=True)
    scenarios = standard_scenarios(**budget.scenarios)
    runs = []
    for arm in arms:
        for seed in range(budget.seeds):
            config = train_config(arm, seed, budget, out / "runs")
            tic = time.perf_counter()
            run_dir = Path(config.run.out)
            trained, reused = _trained(run_dir, config, train_fn, resume)
            row = {"model": arm.name, "contact": arm.contact, "seed": seed, "run": str(run_dir), **trained}
            for sim in dict.fromkeys((arm.contact, *EVAL_SIMS)):
                # A training finished now makes any evaluation left in its folder stale.
                evaluation = _saved(run_dir / f"eval-{sim}" / "summary.json", resume and reused)
                evaluation = evaluation or evaluate_fn(run_dir, sim, scenarios)
                metrics = {k: v for k, v in evaluation.items() if k not in ("scenarios", "sim")}
                if sim == arm.contact:
                    row["own"] = metrics
                if sim in EVAL_SIMS:
                    row[sim] = metrics
            row["seconds"] = time.perf_counter() - tic
            runs.append(row)
            print(f"study: {arm.name} seed {seed} done in {row['seconds']:.0f} s", flush=True)
    gradients = _measured_gradients(out / "gradients-initial.json", arms, budget.gradients, gradient_fn, resume)
    study = {
        "budget": {
            "shac": budget.shac,
            "seeds": budget.seeds,
            "soft_stiffnesses": list(budget.soft_stiffnesses),
            "gradients": budget.gradients.__dict__,
            "scenarios": [s.name for s in scenarios],
        },
        "task_overrides": {arm.name: arm.settings for arm in arms},
        "runs": runs,
        "table": study_table(runs, [arm.name for arm in arms]),
        "claims": claims(runs, [arm.name for arm in arms if arm.contact == "soft"]),
        "gradients": gradients,
    }
    (out / "study.json").write_text(json.dumps(study, indent=2, default=float) + "\n")
    (out / "study.md").write_text(study_markdown(study))
    plot_transfer(study["table"], out / "transfer.png")
    plot_gradients(gradients, out / "gradients.png")
    return study


def _measured_gradients(
    path: Path, arms: Sequence[Arm], settings: GradientSettings, gradient_fn: GradientFn, resume: bool
) -> dict:
    """The initial actor's gradient quality per arm. It depends on neither the trainings nor the
    seeds, so resuming reuses each arm measured before with the same task and settings."""
    saved = _saved(path, resume) or {}
    keys = {arm.name: json.loads(json.dumps({"arm": [arm.contact, arm.task], "settings": settings.__dict__}, default=list))
            for arm in arms}  # fmt: skip
    gradients = {
        name: entry["gradients"] for name, entry in saved.items() if name in keys and entry["key"] == keys[name]
    }
    if gradients:
        print(f"study: reusing the gradient measurement of {', '.join(gradients)} in {path}", flush=True)
    missing = [arm for arm in arms if arm.name not in gradients]
    measured = gradient_fn(missing, settings) if missing else {}
    gradients.update(measured)
    saved.update({name: {"key": keys[name], "gradients": g} for name, g in measured.items()})
    path.write_text(json.dumps(saved, default=float))
    return {arm.name: gradients[arm.name] for arm in arms}


def _saved(path: Path, resume: bool) -> dict | None:
    return json.loads(path.read_text()) if resume and path.exists() else None


def _trained(run_dir: Path, config, train_fn: TrainFn, resume: bool) -> tuple[dict[str, float], bool]:
    """Train (or, resuming, reuse or continue) one run: its final return and environment steps,
    and whether a finished training was reused."""
    if resume and (run_dir / CONFIG_NAME).is_file():  # a run of another budget is neither reused nor continued
        check_same_settings(run_dir, config)
    summary = _saved(run_dir / "summary.json", resume)
    if summary is None:
        history = train_fn(config, resume=resume and (run_dir / CHECKPOINT_NAME).exists())[2]
        if interrupted(config, history):  # SIGINT/SIGTERM: neither evaluate the half-trained policy nor go on
            raise StudyInterrupted(f"{run_dir} stopped at iteration {history[-1]['iteration']}")
        return {
            "train_return": _final(history, "eval/episode_return"),
            "env_steps": _final(history, "env_steps"),
        }, False
    print(f"study: reusing the finished training in {run_dir}", flush=True)
    return {"train_return": float(summary["episode_return"]), "env_steps": float(summary["env_steps"])}, True


def _final(history: list[dict], key: str) -> float:
    values = [row[key] for row in history if key in row]
    return float(values[-1]) if values else float("nan")


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
        choices=["contact", "gradients", "frontier"],
        help="which study (contact: the contact-model study; gradients: gradient quality through each contact model "
        "at the initial actor and at --run's trained one; frontier: SHAC's environment steps and wall-clock to "
        "walking across the settings given with --vary)",
    )
    parser.add_argument(
        "--vary",
        action="append",
        default=[],
        metavar="SETTING=V,V",
        help="frontier: a setting and its values, e.g. shac.num_envs=32,64,128 (a list-valued setting separates its "
        "values with ';'); several --vary are crossed; none: the defaults alone. Again on the same --out, the "
        "sweep grows and finished runs are reused",
    )
    parser.add_argument(
        "--note", default="", help="frontier: a line recorded with the results (how the runs were timed)"
    )
    parser.add_argument("--run", metavar="RUN", help="gradients: the SHAC run whose trained actor is measured")
    parser.add_argument(
        "--batches",
        type=positive_int,
        default=8,
        help="gradients: independent batches behind each interval (default 8)",
    )
    parser.add_argument("--out", metavar="DIR", required=True, help="study folder (must not hold a study yet)")
    parser.add_argument(
        "--budget",
        choices=list(BUDGETS),
        default="quick",
        help="quick: ~20-25 min on 2 CPU cores, untrained-quality policies; full: the default SHAC run "
        "for hard, soft at 2e3/5e3/2e4 N/m and smooth, 10 runs of 10-20 min each on 2 CPU cores (about 2.5 h). "
        "frontier: quick 16k steps a run (a smoke test); full 1.05M steps a run, an evaluation every 65k",
    )
    parser.add_argument(
        "--seeds", type=positive_int, help="seeds per contact model or frontier point (default 2; frontier quick 1)"
    )
    parser.add_argument(
        "--soft-stiffness",
        type=stiffness_list,
        metavar="K[,K...]",
        help="contact: the penalty model's spring stiffnesses in N/m, one soft arm each, each at its stable step "
        f"(up to {SOFT_STABLE_STEPS[-1][0]:g}; default: quick 2e4, full 2e3,5e3,2e4)",
    )
    parser.add_argument(
        "--resume",
        action="store_true",
        help="continue an interrupted study in --out with the same --budget and --seeds: finished trainings and "
        "evaluations are kept, an unfinished training continues from its checkpoint",
    )
    parser.set_defaults(func=run_study)


def stiffness_list(text: str) -> tuple[float, ...]:
    """``2e3,5e3`` -> (2000.0, 5000.0), each with a measured stable step."""
    try:
        values = tuple(float(v) for v in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: not a comma-separated list of numbers") from None
    try:
        for value in values:
            soft_arm(value)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"{text!r}: {exc}") from None
    return values


def run_study(args: argparse.Namespace) -> int:
    out = Path(args.out)
    if args.topic == "frontier":
        try:
            return run_frontier_command(out, args.vary, args.budget, args.seeds, args.note)
        except (CheckpointError, ValueError) as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 2
        except ComparisonInterrupted as exc:
            print(f"interrupted ({exc}); run the same command again to continue", file=sys.stderr)
            return 130
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
    if args.soft_stiffness:
        budget = replace(budget, soft_stiffnesses=args.soft_stiffness)
    try:
        run_contact_study(out, budget, resume=args.resume)
    except (CheckpointError, RunFolderError, ValueError) as exc:
        print(f"error: {one_line(exc)}", file=sys.stderr)
        return 2
    except StudyInterrupted as exc:
        print(f"interrupted ({exc}); continue the study with --resume --out {out}", file=sys.stderr)
        return 130
    print((out / "study.md").read_text().split("\n## Gradient quality")[0])
    print(f"wrote {out / 'study.json'}, {out / 'study.md'}, figures and runs/ in {out}")
    return 0
