"""The end of a finished run: ``summary.json`` (written last: a run folder without it has not
finished), the readable ``summary.md`` and the curves in ``training.png``."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from smoothloco import plotting
from smoothloco.train.evaluation import grid_evaluator
from smoothloco.train.run_folder import SUMMARY_NAME, RunFolderError, parsed_row, read_metrics
from smoothloco.train.runs import TrainConfig, load_run


def write_missing_summary(run_dir: Path) -> None:
    """The summary, report and curves of a run that finished training but was stopped before
    writing them: the final policy evaluated again on the grid (at the progress it ended
    training with), the history read from ``metrics.csv``."""
    run = load_run(run_dir)
    history = [parsed_row(r, run_dir / "metrics.csv") for r in read_metrics(run_dir / "metrics.csv")[1]]
    if not history:
        raise RunFolderError(f"{run_dir} has a final checkpoint but no metrics.csv rows to summarize")
    evaluation = grid_evaluator(run.config, run.make_policy)(run.params, run.config.final_progress)
    print(f"{run_dir}: training had finished but its summary was missing; evaluated and wrote it", flush=True)
    write_summary(run_dir, run.config, history, evaluation, history[0]["wall_s"])  # row 1's clock: the first iteration


def write_summary(
    run_dir: Path, config: TrainConfig, history: list[dict], evaluation: dict, first_iteration_s: float
) -> None:
    """The summary files of a run that trained to its last iteration: ``history`` is the whole
    run's metrics rows, ``evaluation`` the grid evaluation of its final policy."""
    last = history[-1]
    summary = {
        "algo": config.algo,
        "episode_return": evaluation["episode_return"],
        "lin_vel_error": evaluation["lin_vel_error"],
        "yaw_rate_error": evaluation["yaw_rate_error"],
        "fall_rate": evaluation["fall_rate"],
        "env_steps": last["env_steps"],
        "wall_seconds": last["wall_s"],
        "first_iteration_seconds": first_iteration_s,
        "contact": config.task.contact,
        "per_command": evaluation["per_command"],
    }
    lines = [
        f"# Training summary: {run_dir.name}",
        "",
        f"{config.algo.upper()} on `{config.task.contact}` contact, {last['env_steps']:,} environment steps in "
        f"{last['wall_s'] / 60:.1f} min (first iteration after {first_iteration_s:.0f} s).",
        "",
        "| metric | value |",
        "|---|---|",
        f"| return on the evaluation grid ({config.run.eval_seconds:g} s per command, until a fall) "
        f"| {evaluation['episode_return']:.3f} |",
        f"| linear-velocity tracking error | {evaluation['lin_vel_error']:.3f} m/s |",
        f"| yaw-rate tracking error | {evaluation['yaw_rate_error']:.3f} rad/s |",
        f"| fall rate (evaluation grid) | {evaluation['fall_rate']:.2f} |",
        "",
        "| command (vx, vy, yaw) | lin err (m/s) | yaw err (rad/s) | fell | air time (s) | clearance (cm) "
        "| steps/s | slip (m/s) | CoT | base speed (m/s) |",
        "|---|---:|---:|---|---:|---:|---:|---:|---:|---:|",
    ]
    # A quantity with no samples to average (cost of transport at a standing or turning-in-place
    # command, air time without a completed swing) is NaN: shown as "–", not "nan".
    cell = lambda value, fmt, scale=1.0: f"{value * scale:{fmt}}" if np.isfinite(value) else "–"  # noqa: E731
    rows = [
        f"| {tuple(p['command'])} | {cell(p['lin_vel_error'], '.3f')} | {cell(p['yaw_rate_error'], '.3f')} "
        f"| {p['fell']} | {cell(p['foot_air_time'], '.2f')} | {cell(p['foot_clearance'], '.1f', 100)} "
        f"| {cell(p['steps_per_second'], '.2f')} | {cell(p['foot_slip'], '.3f')} "
        f"| {cell(p['cost_of_transport'], '.2f')} | {cell(p['base_speed'], '.3f')} |"
        for p in evaluation["per_command"]
    ]
    lines += rows
    if any("–" in row for row in rows):
        lines += [
            "",
            "–: nothing to measure (cost of transport needs a walking command, air time and clearance a "
            "completed swing).",
        ]
    (run_dir / "summary.md").write_text("\n".join(lines) + "\n")
    _plot(run_dir, history)
    (run_dir / SUMMARY_NAME).write_text(json.dumps(summary, indent=2))  # last: the run is complete


def _plot(run_dir: Path, history: list[dict]) -> None:
    """``training.png``: the returns and the tracking errors against environment steps, and the
    steps against wall-clock (how fast the run went), each panel with its own axes' labels.
    Training curves appear where the algorithm reports them (SHAC does, Brax's PPO does not)."""
    plt = plotting.pyplot()

    trained = [h for h in history if "reward_per_step" in h]
    evals = [h for h in history if "eval/lin_vel_error" in h]
    steps = lambda rows: [h["env_steps"] / 1e6 for h in rows]  # noqa: E731
    fig, (returns, errors, speed) = plt.subplots(1, 3, figsize=(15, 4.5))
    fig.suptitle(f"Training of {run_dir.name}: returns, tracking errors and speed")

    returns.plot(steps(evals), [h["eval/episode_return"] for h in evals], "o-", color="C2", label="evaluation return")
    returns.set_ylabel("evaluation return (grid)", color="C2")
    returns.set_title("returns")
    if trained:
        twin = returns.twinx()
        twin.plot(steps(trained), [h["reward_per_step"] for h in trained], color="C0", alpha=0.6)
        twin.set_ylabel("training reward per control step", color="C0")
        for key, color, name in (("lin_vel_error", "C0", "linear (m/s)"), ("yaw_rate_error", "C1", "yaw (rad/s)")):
            errors.plot(steps(trained), [h[key] for h in trained], color=color, alpha=0.6, label=f"training, {name}")
    evaluated = (("lin_vel_error", "o-", "C0", "linear (m/s)"), ("yaw_rate_error", "s-", "C1", "yaw (rad/s)"))
    for key, style, color, name in evaluated:
        errors.plot(steps(evals), [h[f"eval/{key}"] for h in evals], style, color=color, label=f"evaluation, {name}")
    errors.set_ylabel("tracking error")
    errors.set_title("tracking errors")
    errors.legend()
    clocked = [h for h in history if "wall_s" in h]
    speed.plot([h["wall_s"] / 60 for h in clocked], steps(clocked), color="C3")
    speed.set_xlabel("wall-clock (min, compilation and evaluations included)")
    speed.set_ylabel("environment steps (millions)")
    speed.set_title("speed")
    for ax in (returns, errors):
        ax.set_xlabel("environment steps (millions)")
    plotting.save(fig, run_dir / "training.png", dpi=100)
