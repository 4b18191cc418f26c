"""``smoothloco study frontier``: the SHAC settings that walk in the fewest samples and seconds.

A point of the sweep is the default training with some settings changed; ``--vary
shac.num_envs=32,64,128`` gives one point per value, and several ``--vary`` axes are crossed.
Every point trains ``seeds`` times on the same number of environment steps (its iteration count,
and so its learning-rate decay and sharpness schedule, follow from its batch), and is evaluated
on the command grid at the same environment steps as every other point, so that steps to
walking compare exactly. For each point: environment steps and training wall-clock to walking
(``compare.WALKING``) per seed, and the final grid quality.

Runs live in ``OUT/runs/<point>/seed<k>``. A run already finished there with the same settings
is reused and an interrupted one continues (``compare.default_trainer``), so a sweep is extended
or continued by running the command again on the same ``--out``; ``frontier.json``,
``frontier.md`` and ``frontier.png`` then cover every point asked for so far.
"""

from __future__ import annotations

import argparse
import itertools
import json
import typing
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

from smoothloco import plotting
from smoothloco.argtypes import config_value
from smoothloco.experiments.compare import Trainer, default_trainer, finished_history
from smoothloco.experiments.compare_report import WALKING, first_walking, seed_curves
from smoothloco.train.runs import RunConfig, TrainConfig
from smoothloco.validation import with_settings

POINTS_NAME = "points.json"  # every point asked for in this folder, in order


@dataclass(frozen=True)
class FrontierBudget:
    env_steps: int  # per run
    eval_interval: int  # environment steps between grid evaluations, the same for every point
    eval_seconds: float
    seeds: int


# full: 1,048,576 steps per run (256 environments walked from 1.64M, 64 from about 0.7M), an
# evaluation every 65,536 steps; a point's steps per iteration must divide that interval.
BUDGETS = {
    "quick": FrontierBudget(env_steps=16_384, eval_interval=8_192, eval_seconds=2.0, seeds=1),
    "full": FrontierBudget(env_steps=1_048_576, eval_interval=65_536, eval_seconds=5.0, seeds=2),
}

Point = dict[str, Any]  # dotted setting ("shac.num_envs") -> value


def parse_axis(text: str) -> tuple[str, list[Any]]:
    """``shac.num_envs=32,64`` -> ("shac.num_envs", [32, 64]); a setting whose values are lists
    (``task.sharpness``) separates its values with ``;``. Only the ``task`` and
    ``shac`` sections vary; a value is checked against its field's type here and against its
    range when the point's configuration is built."""
    name, sep, values = text.partition("=")
    if not sep or not values:
        raise ValueError(f"--vary {text!r}: expected SETTING=VALUE,VALUE (e.g. shac.num_envs=64,128)")
    kind = _field_type(name)
    is_list = typing.get_origin(kind) is tuple
    parse = config_value(kind)
    try:
        parsed = [parse(v) for v in values.split(";" if is_list else ",")]
    except argparse.ArgumentTypeError as exc:
        raise ValueError(f"--vary {name}: {exc}") from None
    return name, parsed


def _field_type(name: str) -> Any:
    section, *path = name.split(".")
    cls: Any = {"task": type(TrainConfig().task), "shac": type(TrainConfig().shac)}.get(section)
    if cls is None or not path:
        raise ValueError(f"--vary {name!r}: accepted settings are task.<field> and shac.<field>")
    kind: Any = cls
    for i, part in enumerate(path):
        hints = typing.get_type_hints(kind) if isinstance(kind, type) else {}
        if part not in hints:
            raise ValueError(f"--vary {name!r}: {'.'.join([section, *path[:i]])} has no setting {part!r}")
        kind = hints[part]
        if typing.get_origin(kind) is dict:  # reward weights: every entry a number
            return float
    return kind


def grid(axes: Sequence[tuple[str, list[Any]]]) -> list[Point]:
    """Every combination of the axes' values (one point, the defaults, without axes)."""
    names = [name for name, _ in axes]
    return [dict(zip(names, values)) for values in itertools.product(*(v for _, v in axes))]


def point_name(point: Point) -> str:
    """``num_envs=64,horizon=16``; SHAC's settings without their section, the task's with it."""
    if not point:
        return "default"
    shown = lambda v: ";".join(map(str, v)) if isinstance(v, (tuple, list)) else str(v)  # noqa: E731
    return ",".join(f"{k.removeprefix('shac.')}={shown(v)}" for k, v in point.items())


def run_config(point: Point, seed: int, budget: FrontierBudget, out: Path) -> TrainConfig:
    """The default training with ``point``'s settings, seed ``seed``, ``budget``'s steps and
    evaluation schedule, in ``out/runs/<point>/seed<seed>``; a ``ValueError`` when the point's
    batch does not divide the budget or its evaluation interval."""
    table: dict[str, Any] = {}
    for name, value in point.items():
        *sections, field = name.split(".")
        node = table
        for section in sections:
            node = node.setdefault(section, {})
        node[field] = list(value) if isinstance(value, tuple) else value
    config = with_settings(TrainConfig(), table, "")
    per_iteration = config.shac.num_envs * config.shac.horizon
    if budget.eval_interval % per_iteration or budget.env_steps % budget.eval_interval:
        raise ValueError(
            f"point {point_name(point)}: {per_iteration} environment steps per iteration must divide the evaluation "
            f"interval {budget.eval_interval}, which must divide the budget {budget.env_steps}"
        )
    shac = replace(config.shac, seed=seed, iterations=budget.env_steps // per_iteration)
    run = RunConfig(
        out=str(out / "runs" / point_name(point) / f"seed{seed}"),
        eval_every=budget.eval_interval // per_iteration,
        checkpoint_every=budget.eval_interval // per_iteration,
        eval_seconds=budget.eval_seconds,
        deploy=False,
    )
    return replace(config, shac=shac, run=run)


def run_frontier(
    out: Path, points: Sequence[Point], budget: FrontierBudget, trainer: Trainer = default_trainer, note: str = ""
) -> dict:
    """Train every point on ``budget.seeds`` seeds (reusing finished runs), then write
    ``frontier.json``, ``frontier.md`` and ``frontier.png`` over every point asked for in ``out``."""
    configs = {point_name(p): _configs_of(p, budget, out) for p in points}
    out.mkdir(parents=True, exist_ok=True)
    asked = _remember_points(out, points)
    histories = {name: [trainer(config) for config in runs] for name, runs in configs.items()}
    rows = []
    for point in asked:  # other calls' points, with the seeds finished so far
        name = point_name(point)
        found = histories.get(name) or [finished_history(Path(c.run.out)) for c in _configs_of(point, budget, out)]
        finished = [h for h in found if h is not None]
        if finished:
            rows.append(summarize_point(point, finished))
    result = {
        "budget": budget.__dict__,
        "walking": WALKING,
        "note": note,
        "points": rows,
    }
    (out / "frontier.json").write_text(json.dumps(result, indent=2))
    (out / "frontier.md").write_text(frontier_markdown(result))
    plot_frontier(result, out / "frontier.png")
    return result


def _configs_of(point: Point, budget: FrontierBudget, out: Path) -> list[TrainConfig]:
    return [run_config(point, s, budget, out) for s in range(budget.seeds)]


def _remember_points(out: Path, points: Sequence[Point]) -> list[Point]:
    """The folder's points so far plus ``points``, saved; tuples come back from JSON as lists."""
    path = out / POINTS_NAME
    known = json.loads(path.read_text()) if path.is_file() else []
    names = {point_name(p) for p in known}
    known += [p for p in points if point_name(p) not in names]
    path.write_text(json.dumps(known, indent=1))
    return known


def summarize_point(point: Point, histories: Sequence[list[dict]]) -> dict:
    """Steps and wall-clock to walking per seed and over seeds, final grid quality, speed."""
    evaluations = [[row for row in h if "eval/episode_return" in row] for h in histories]
    curves = seed_curves(evaluations)
    walking = first_walking(curves)
    final = {m: [r[-1][f"eval/{m}"] for r in evaluations] for m in ("lin_vel_error", "yaw_rate_error", "fall_rate")}
    speeds = [
        (h[-1]["env_steps"] - h[0]["env_steps"]) / (h[-1]["train_wall_s"] - h[0]["train_wall_s"]) for h in histories
    ]
    return {
        "point": point_name(point),
        "settings": point,
        "seeds": len(histories),
        "walking": walking,
        "final": {
            m: {"mean": float(np.mean(v)), "min": float(np.min(v)), "max": float(np.max(v))} for m, v in final.items()
        },
        "env_steps_per_s": float(np.mean(speeds)),
        "curves": {k: curves[k] for k in ("env_steps", "lin_vel_error_mean", "yaw_rate_error_mean", "fall_rate_mean")},
    }


def _spread(values: Sequence[float | None], scale: float = 1.0, fmt: str = ".2f") -> str:
    if any(v is None for v in values):
        reached = [v for v in values if v is not None]
        return f"{len(reached)}/{len(values)} seeds"
    mean = np.mean(values) * scale
    return f"{mean:{fmt}} ({min(values) * scale:{fmt}}-{max(values) * scale:{fmt}})"


def frontier_markdown(result: dict) -> str:
    b = result["budget"]
    lines = [
        "# SHAC's efficiency frontier",
        "",
        f"Each point: the default training with the settings shown, on the seeds counted, {b['env_steps']:,} environment "
        f"steps, evaluated on the command grid every {b['eval_interval']:,} steps ({b['eval_seconds']:g} s per command). "
        f"Walking: linear-velocity error <= {WALKING['lin_vel_error']} m/s, yaw-rate error <= "
        f"{WALKING['yaw_rate_error']} rad/s, no falls. Mean (min-max) over seeds; wall-clock is training time "
        "(evaluations left out, compilation included), comparable only between runs timed alike.",
    ]
    if result["note"]:
        lines += ["", result["note"]]
    lines += [
        "",
        "| point | seeds | env steps to walking (M) | wall-clock to walking (s) | final lin. error (m/s) "
        "| final yaw error (rad/s) | final falls | env steps/s |",
        "|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for row in result["points"]:
        w, f = row["walking"], row["final"]
        lines.append(
            f"| {row['point']} | {row['seeds']} | {_spread(w['per_seed_env_steps'], 1e-6)} | {_spread(w['per_seed_train_wall_s'], 1.0, '.0f')} "
            f"| {f['lin_vel_error']['mean']:.3f} ({f['lin_vel_error']['min']:.3f}-{f['lin_vel_error']['max']:.3f}) "
            f"| {f['yaw_rate_error']['mean']:.3f} | {f['fall_rate']['mean']:.2f} | {row['env_steps_per_s']:,.0f} |"
        )
    return "\n".join(lines) + "\n"


def plot_frontier(result: dict, path: Path) -> None:
    """Environment steps against wall-clock to walking, one marker per point (bars: min-max over
    seeds); points where some seed never walked are listed in the title."""
    fig, ax = plotting.pyplot().subplots(figsize=(7, 5))
    missing = []
    for row in result["points"]:
        steps, walls = row["walking"]["per_seed_env_steps"], row["walking"]["per_seed_train_wall_s"]
        if any(s is None for s in steps):
            missing.append(row["point"])
            continue
        x, y = np.mean(walls), np.mean(steps) / 1e6
        ax.errorbar(
            x, y, xerr=[[x - min(walls)], [max(walls) - x]], yerr=[[y - min(steps) / 1e6], [max(steps) / 1e6 - y]],
            fmt="o", capsize=3,
        )  # fmt: skip
        ax.annotate(row["point"], (x, y), textcoords="offset points", xytext=(5, 5), fontsize=8)
    ax.set_xlabel("training wall-clock to walking (s)")
    ax.set_ylabel("environment steps to walking (millions)")
    title = "SHAC: samples and time to a walking policy"
    if missing:
        title += f"\nnot walking on every seed: {', '.join(missing)}"
    ax.set_title(title, fontsize=10)
    ax.grid(alpha=0.3)
    plotting.save(fig, path, dpi=100)


def run_frontier_command(out: Path, axes: Sequence[str], budget_name: str, seeds: int | None, note: str) -> int:
    """The ``study frontier`` command: parse the axes, sweep, print the table."""
    budget = BUDGETS[budget_name]
    if seeds:
        budget = replace(budget, seeds=seeds)
    points = grid([parse_axis(a) for a in axes])
    for point in points:  # every point's configuration is checked before anything trains
        run_config(point, 0, budget, out)
    result = run_frontier(out, points, budget, note=note)
    print(frontier_markdown(result))
    print(f"wrote {out / 'frontier.json'}, {out / 'frontier.md'}, {out / 'frontier.png'}")
    return 0
