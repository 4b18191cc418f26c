"""``smoothloco eval RUN --sim {mujoco,hard,smooth,soft}``: the standard evaluation of a run's policy.

Our simulators roll the run's JAX policy in ``VelocityTask`` with the chosen contact model, all
scenarios at once (``vmap`` over scenarios, ``scan`` over steps, one compile). MuJoCo goes only
through the deployment artifacts: the exported ONNX policy in the standalone player. Both give
the trajectory dicts of ``smoothloco.measure.metrics``, so every number is computed the same way.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import jax
import jax.numpy as jnp
import numpy as np

from smoothloco import plotting
from smoothloco.deploy.export import exported
from smoothloco.measure import metrics
from smoothloco.measure.record import trajectory_sample
from smoothloco.measure.scenarios import Scenario, run_scenarios
from smoothloco.robot import load_robot
from smoothloco.robot_side.testbench import Command, Imperfections, Player, Push, command_schedule
from smoothloco.sim import CONTACT_MODELS
from smoothloco.tasks import CommandConfig, VelocityTask
from smoothloco.tasks.randomization import set_physics
from smoothloco.train.run_folder import CONFIG_NAME
from smoothloco.train.runs import load_run, read_config

SIMS = ("mujoco", *CONTACT_MODELS)
Trajectory = dict[str, np.ndarray]


class TrajectoryPlayer(Protocol):
    """What the evaluation needs of ``smoothloco.robot_side.testbench.Player``."""

    def run(self, commands, seconds, pushes, friction, added_base_mass, imperfections) -> Trajectory: ...


# -- rollouts --------------------------------------------------------------------------------
@dataclass(frozen=True)
class Script:
    """What a scripted rollout follows (a ``Scenario`` provides the same fields): commands
    ``(t, vx, vy, yaw_rate)`` and pushes ``(t, vx, vy)`` in time order, ground friction (None:
    nominal) and added base mass."""

    commands: tuple[Command, ...]
    seconds: float
    pushes: tuple[Push, ...] = ()
    friction: float | None = None
    added_base_mass: float = 0.0


def rollout_ours(run, contact: str, scenarios: Sequence[Scenario | Script]) -> list[Trajectory]:
    """Trajectories of ``run``'s deterministic JAX policy (a ``LoadedRun``) in our simulator with
    ``contact``: no random commands, pushes, noise or randomization; the scenarios' own pushes,
    friction and base mass. A push at ``t`` is in the state the policy sees at ``t``, as in the
    MuJoCo player. The initial joint pose carries the task's reset jitter (±0.05 rad, the same
    key for every scenario). Samples carry ``qpos``/``qvel`` besides the metrics' fields."""
    if contact not in CONTACT_MODELS:
        raise ValueError(f"unknown contact model {contact!r}; accepted: {', '.join(CONTACT_MODELS)}")
    config = run.config.task
    task = VelocityTask(
        config.quiet(
            contact=contact,
            sharpness=(run.config.final_sharpness,) * 2,  # what the policy finally trained on, fixed
            commands=CommandConfig(resample_seconds=(1e9, 1e9), zero_probability=1.0),  # reset stands still
        )
    )
    dt = task.config.control_dt
    lengths = [max(1, round(s.seconds / dt)) for s in scenarios]
    steps = max(lengths)
    times = np.arange(steps + 1) * dt
    commands = np.stack([command_schedule(s.commands, times) for s in scenarios]).astype(np.float32)
    kicks = np.zeros((len(scenarios), steps, 2), np.float32)  # kicks[:, k] lands at the end of step k
    for i, s in enumerate(scenarios):
        for t, vx, vy in s.pushes:
            if t < steps * dt:  # later ones would land after the end, as in the player
                kicks[i, max(round(t / dt), 1) - 1] += (vx, vy)
    nominal = float(task.sys.friction)
    sims, sim_axes = set_physics(
        task.sys,
        jnp.array([nominal if s.friction is None else s.friction for s in scenarios]),
        jnp.array([s.added_base_mass for s in scenarios]),
    )
    make_policy = run.make_policy

    def scenario(params, sim, next_commands, kicks):
        env = copy.copy(task)
        env.sys = sim  # this scenario's physics, as Brax's DomainRandomizationVmapWrapper does
        policy = make_policy(params, deterministic=True)

        def body(state, inputs):
            next_command, kick = inputs
            action = policy(state.obs, None)[0]
            state_info = {**state.info, "command": next_command}  # the next observation carries it
            next_state, contact = env.step_with_contact(state.replace(info=state_info), action, kick)
            q, v = state.pipeline_state.q, state.pipeline_state.v
            return next_state, {"qpos": q, "qvel": v, **trajectory_sample(state, contact)}

        return jax.lax.scan(body, env.reset(jax.random.PRNGKey(0)), (next_commands, kicks))[1]

    rollout = jax.jit(jax.vmap(scenario, in_axes=(None, sim_axes, 0, 0)))
    records = jax.device_get(rollout(run.params, sims, commands[:, 1:], kicks))
    out = []
    for i, n in enumerate(lengths):
        traj = {k: np.asarray(v[i, :n], np.float64) for k, v in records.items() if k != "done"}
        traj.update(
            time=times[:n],
            command=commands[i, :n].astype(np.float64),
            fallen=np.logical_or.accumulate(np.asarray(records["done"][i, :n], bool)),
        )
        out.append(traj)
    return out


def rollout_player(
    player: TrajectoryPlayer, scenarios: Sequence[Scenario], imperfections: Imperfections = Imperfections()
) -> list[Trajectory]:
    """Trajectories of an exported policy in the MuJoCo player, one scenario after another,
    with the robot's ``imperfections`` (none by default)."""
    return [
        player.run(
            commands=list(s.commands),
            seconds=s.seconds,
            pushes=list(s.pushes),
            friction=s.friction,
            added_base_mass=s.added_base_mass,
            imperfections=imperfections,
        )
        for s in scenarios
    ]


# -- summary -----------------------------------------------------------------------------------
def robot_mass(robot: str) -> float:
    """Total mass (kg) of ``robot`` (a bundled name or a spec file), for the cost of transport."""
    return load_robot(robot).mass


def scenario_row(scenario: Scenario, traj: Trajectory, mass: float) -> dict[str, Any]:
    """Every metric of one scenario (NaN where it does not apply)."""
    pushed = bool(scenario.pushes)
    return {
        "name": scenario.name,
        "kind": scenario.kind,
        "lin_vel_error": metrics.lin_vel_error(traj),
        "yaw_rate_error": metrics.yaw_rate_error(traj),
        "fell": metrics.fell(traj),
        "survived_push": metrics.survived_after(traj, scenario.pushes[0][0]) if pushed else None,
        "push_speed": scenario.push_speed if pushed else None,
        "push_direction_deg": scenario.push_direction_deg,
        "friction": scenario.friction,
        "added_base_mass": scenario.added_base_mass,
        "foot_slip": metrics.foot_slip(traj),
        "mean_penetration": metrics.mean_penetration(traj),
        "cost_of_transport": metrics.cost_of_transport(traj, mass + scenario.added_base_mass),
        "foot_air_time": metrics.foot_air_time(traj),
        "foot_clearance": metrics.foot_clearance(traj),
        "steps_per_second": metrics.steps_per_second(traj),
        "base_speed": metrics.base_speed(traj),
    }


def summarize(scenarios: Sequence[Scenario], trajectories: Sequence[Trajectory], mass: float) -> dict[str, Any]:
    """Aggregate metrics: tracking, falls, slip, penetration and cost of transport over the
    unpushed scenarios (command grid and model mismatch); survival over the pushed ones."""
    if len(scenarios) != len(trajectories):
        raise ValueError(f"{len(scenarios)} scenarios but {len(trajectories)} trajectories")
    rows = [scenario_row(s, t, mass) for s, t in zip(scenarios, trajectories)]
    calm = [r for r in rows if r["kind"] != "push"]
    walking = [r for s, r in zip(scenarios, rows) if r["kind"] != "push" and _walking(s)]
    standing = [r for s, r in zip(scenarios, rows) if s.kind == "command" and not _walking(s)]
    pushed = [r for r in rows if r["kind"] == "push"]
    mean = lambda key, rs: metrics.nanmean(r[key] for r in rs)  # noqa: E731
    speeds = sorted({r["push_speed"] for r in pushed})
    return {
        "lin_vel_error": mean("lin_vel_error", calm),
        "yaw_rate_error": mean("yaw_rate_error", calm),
        "fall_rate": float(np.mean([r["fell"] for r in calm])) if calm else float("nan"),
        "push_survival": float(np.mean([r["survived_push"] for r in pushed])) if pushed else float("nan"),
        "push_survival_by_speed": {
            f"{v:g}": float(np.mean([r["survived_push"] for r in pushed if r["push_speed"] == v])) for v in speeds
        },
        "foot_slip": mean("foot_slip", calm),
        "mean_penetration": mean("mean_penetration", calm),
        "cost_of_transport": mean("cost_of_transport", calm),
        # How it walks (scenarios with a moving command) and how still it stands (zero command).
        "foot_air_time": mean("foot_air_time", walking),
        "foot_clearance": mean("foot_clearance", walking),
        "steps_per_second": mean("steps_per_second", walking),
        "standing_base_speed": mean("base_speed", standing),
        "standing_steps_per_second": mean("steps_per_second", standing),
        "scenarios": rows,
    }


def _walking(scenario: Scenario) -> bool:
    """Whether any of the scenario's commands asks the robot to move."""
    return any(np.linalg.norm(c[1:]) >= metrics.MOVING_SPEED for c in scenario.commands)


SUMMARY_COLUMNS = (
    ("lin_vel_error", "lin. vel. error (m/s)", ".3f"),
    ("yaw_rate_error", "yaw rate error (rad/s)", ".3f"),
    ("fall_rate", "fall rate", ".2f"),
    ("push_survival", "push survival", ".2f"),
    ("foot_slip", "foot slip (m/s)", ".3f"),
    ("mean_penetration", "penetration (mm)", ".2f"),
    ("cost_of_transport", "cost of transport", ".2f"),
    ("foot_air_time", "air time (s)", ".2f"),
    ("foot_clearance", "clearance (cm)", ".1f"),
    ("standing_base_speed", "standing speed (m/s)", ".3f"),
)


def _cell(value, fmt: str, scale: float = 1.0) -> str:
    if value is None or (isinstance(value, float) and not np.isfinite(value)):
        return "–"
    return f"{value * scale:{fmt}}"


def markdown(summary: dict, title: str) -> str:
    """The summary table, then one table per kind of scenario."""
    scale = {"mean_penetration": 1e3, "foot_clearance": 1e2}
    lines = [f"## {title}", "", "| " + " | ".join(label for _, label, _ in SUMMARY_COLUMNS) + " |"]
    lines.append("|" + "---:|" * len(SUMMARY_COLUMNS))
    lines.append("| " + " | ".join(_cell(summary[k], f, scale.get(k, 1.0)) for k, _, f in SUMMARY_COLUMNS) + " |")
    rows = summary["scenarios"]
    lines += [
        "",
        "| scenario | lin. err. (m/s) | yaw err. (rad/s) | fell | survived push | CoT | air time (s) | clearance (cm) "
        "| slip (m/s) |",
        "|---|---:|---:|:-:|:-:|---:|---:|---:|---:|",
    ]
    for r in rows:
        survived = "–" if r["survived_push"] is None else ("yes" if r["survived_push"] else "no")
        lines.append(
            f"| {r['name']} | {_cell(r['lin_vel_error'], '.3f')} | {_cell(r['yaw_rate_error'], '.3f')} "
            f"| {'yes' if r['fell'] else 'no'} | {survived} | {_cell(r['cost_of_transport'], '.2f')} "
            f"| {_cell(r['foot_air_time'], '.2f')} | {_cell(r['foot_clearance'], '.1f', 1e2)} | {_cell(r['foot_slip'], '.3f')} |"
        )
    return "\n".join(lines) + "\n"


# -- figures -----------------------------------------------------------------------------------
def plot_tracking(scenarios: Sequence[Scenario], trajectories: Sequence[Trajectory], path: Path, title: str) -> None:
    """Commanded (dashed) and measured vx, vy and yaw rate for every command scenario."""
    plt = plotting.pyplot()

    chosen = [(s, t) for s, t in zip(scenarios, trajectories) if s.kind == "command"]
    if not chosen:
        return
    cols = min(3, len(chosen))
    rows = -(-len(chosen) // cols)
    fig, axes = plt.subplots(rows, cols, figsize=(4.2 * cols, 2.8 * rows), sharex=True, squeeze=False)
    signals = (("vx", "base_lin_vel", 0, "C0"), ("vy", "base_lin_vel", 1, "C1"), ("yaw rate", "base_ang_vel", 2, "C2"))
    for ax, (s, t) in zip(axes.flat, chosen):
        for label, key, i, color in signals:
            ax.plot(t["time"], t[key][:, i], color=color, lw=1, label=label)
            ax.plot(t["time"], t["command"][:, i], color=color, lw=1, ls="--")
        if np.any(t["fallen"]):
            ax.axvline(t["time"][np.argmax(t["fallen"])], color="k", lw=1, ls=":", label="fall")
        ax.set_title(s.name, fontsize=9)
    for ax in axes.flat[len(chosen) :]:
        ax.axis("off")
    axes.flat[0].legend(fontsize=7)
    fig.suptitle(f"{title}: measured (solid) and commanded (dashed), m/s and rad/s")
    fig.supxlabel("time (s)")
    plotting.save(fig, path, dpi=90)


def plot_push_survival(summary: dict, path: Path, title: str) -> None:
    """Share of pushes survived by direction (polar), one series per push speed."""
    plt = plotting.pyplot()

    pushed = [r for r in summary["scenarios"] if r["kind"] == "push"]
    if not pushed:
        return
    fig = plt.figure(figsize=(4.5, 4.5))
    ax = fig.add_subplot(projection="polar")
    speeds = sorted({r["push_speed"] for r in pushed})
    for k, speed in enumerate(speeds):
        directions = sorted({r["push_direction_deg"] for r in pushed if r["push_speed"] == speed})
        share = [
            np.mean([r["survived_push"] for r in pushed if r["push_speed"] == speed and r["push_direction_deg"] == d])
            for d in directions
        ]
        angles = np.deg2rad(directions + directions[:1])
        # Equal shares (often all 1) would hide one series under the other: hollow markers that
        # shrink from series to series, and a line style each, keep every speed visible.
        size = 4 + 4 * (len(speeds) - 1 - k)
        style = ("-", "--", ":", "-.")[k % 4]
        ax.plot(angles, share + share[:1], style, marker="o", ms=size, mfc="none", mew=1.5, label=f"{speed:g} m/s")
    ax.set_ylim(0, 1.05)
    ax.set_title(f"{title}: push survival by direction\n(0° = forward at the start)", fontsize=9)
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(-0.2, 1.1))
    plotting.save(fig, path, dpi=90)


# -- the evaluation ----------------------------------------------------------------------------
def evaluate_run(
    run_dir: str | Path,
    sim: str,
    scenarios: Sequence[Scenario] | None = None,
    player_factory: Callable[[Path], TrajectoryPlayer] | None = None,
    exporter: Callable[[Path], Path] | None = None,
) -> tuple[dict, list[Trajectory]]:
    """Summary and trajectories of the run's policy in ``sim``. For MuJoCo the run is exported
    (``exporter``, default: only when the export is missing or stale) and played by
    ``player_factory`` (default ``Player``); both are arguments so tests can stand in for them."""
    if sim not in SIMS:
        raise ValueError(f"unknown simulator {sim!r}; accepted: {', '.join(SIMS)}")
    run_dir = Path(run_dir)
    task = read_config(run_dir / CONFIG_NAME).task
    scenarios = tuple(run_scenarios(task) if scenarios is None else scenarios)
    if sim == "mujoco":
        exporter = exporter or exported
        player_factory = player_factory or Player
        trajectories = rollout_player(player_factory(exporter(run_dir)), scenarios)
    else:
        trajectories = rollout_ours(load_run(run_dir), sim, scenarios)
    return summarize(scenarios, trajectories, robot_mass(task.robot)), trajectories


def write_report(
    out_dir: Path, sim: str, summary: dict, scenarios: Sequence[Scenario], trajectories: Sequence[Trajectory]
) -> dict[str, Path]:
    """``summary.json``, ``summary.md``, ``tracking.png``, ``push_survival.png`` and
    ``trajectories.npz`` (fields prefixed by scenario index) in ``out_dir``."""
    out_dir.mkdir(parents=True, exist_ok=True)
    title = f"policy in {sim}"
    files = {
        "json": out_dir / "summary.json",
        "markdown": out_dir / "summary.md",
        "tracking": out_dir / "tracking.png",
        "push_survival": out_dir / "push_survival.png",
        "trajectories": out_dir / "trajectories.npz",
    }
    files["json"].write_text(json.dumps({"sim": sim, **summary}, indent=2, default=_jsonable) + "\n")
    files["markdown"].write_text(markdown(summary, title))
    plot_tracking(scenarios, trajectories, files["tracking"], title)
    plot_push_survival(summary, files["push_survival"], title)
    np.savez_compressed(
        files["trajectories"], **{f"{i}/{k}": v for i, t in enumerate(trajectories) for k, v in t.items()}
    )
    return files


def _jsonable(value):
    if isinstance(value, (np.floating, np.integer, np.bool_)):
        return value.item()
    raise TypeError(f"not JSON serializable: {type(value).__name__}")
