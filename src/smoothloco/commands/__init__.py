"""Command line: ``smoothloco train / compare / export / play / eval / study / bench / robot``.

The commands' modules import JAX, but none of them starts a JAX backend when imported
(tests/test_layers.py checks it), so ``main`` can still ask XLA for one host device per core
before anything runs: on a CPU machine every core then gets a device of its own.
"""

from __future__ import annotations

import argparse
import difflib
import json
import sys
from pathlib import Path
from typing import NoReturn

from smoothloco.argtypes import positive_int
from smoothloco.commands import deploy as deploy_cli
from smoothloco.commands import evaluate as eval_cli
from smoothloco.commands import train as train_cli
from smoothloco.experiments import bench, compare, study
from smoothloco.parallel import request_host_devices
from smoothloco.quiet import quiet_cache_loads
from smoothloco.robot import BUNDLED_ROBOTS, load_robot
from smoothloco.robot_side.contract import PolicyContractError
from smoothloco.sim import check
from smoothloco.tasks import VelocityTaskConfig
from smoothloco.validation import one_line


def _bench_controller(args: argparse.Namespace) -> tuple[str, dict]:
    if args.export is None:
        raise ValueError("bench controller needs --export DIR (an export folder)")
    figures = bench.bench_controller(args.export)
    text = (
        f"exported controller step, onnxruntime on 1 thread, batch 1, {figures['calls']} calls: "
        f"median {figures['median_ms']:.3f} ms, p99 {figures['p99_ms']:.3f} ms, max {figures['max_ms']:.3f} ms"
    )
    return text, figures


def _bench_dt(args: argparse.Namespace) -> tuple[str, list]:
    rows = bench.sweep_sim_dt()
    lines = [
        f"hard contact, trot-like gaits, 1 s, against dt = {rows[0]['reference_dt']} s",
        "| dt (ms) | base position RMS (cm) | orientation RMS (rad) | mean penetration (mm) | max penetration (mm) |",
        "|---:|---:|---:|---:|---:|",
    ]
    lines += [
        f"| {r['dt'] * 1e3:g} | {r['base_position_rms_m'] * 100:.2f} | {r['orientation_rms_rad']:.3f} "
        f"| {r['mean_penetration_in_contact_m'] * 1e3:.1f} | {r['max_penetration_m'] * 1e3:.1f} |"
        for r in rows
    ]
    return "\n".join(lines), rows


def _bench_throughput(args: argparse.Namespace) -> tuple[str, dict]:
    if args.target == "sim":
        results = bench.bench_sim(batch=args.batch, steps=args.steps, repeats=args.repeats)
        table = bench.format_table(results, bench.SIM_ROWS)
        ratios = ["smooth_over_mjx_step"] + [f"smooth_over_{name}" for name in bench.MUJOCO_C_SETTINGS]
        ratios += [f"{m}_grad_over_forward" for m in ("smooth", "hard", "soft")]
    else:
        results = bench.bench_task(batch=args.batch, steps=args.steps, repeats=args.repeats)
        table = bench.format_table(results, bench.TASK_ROWS, unit="control steps/s")
        ratios = [k for k in results if k.endswith("_over_forward")]
    lines = [f"batch {results['batch']} over {results['devices']} device(s)", table]
    lines += [f"{key}: {results[key]:.3f}" for key in ratios]
    return "\n".join(lines), results


BENCH_TARGETS = {"controller": _bench_controller, "dt": _bench_dt, "sim": _bench_throughput, "task": _bench_throughput}


def _bench(args: argparse.Namespace) -> int:
    try:
        text, figures = BENCH_TARGETS[args.target](args)
    except (ValueError, PolicyContractError) as exc:
        print(f"error: {one_line(exc)}", file=sys.stderr)
        return 2
    print(text)
    if args.json:
        Path(args.json).write_text(json.dumps(figures, indent=2))
        print(f"wrote {args.json}")
    return 0


def _robot(args: argparse.Namespace) -> int:
    try:
        robot = load_robot(args.robot)
        VelocityTaskConfig.for_robot(args.robot)  # its [task] table, as `train` reads it
    except ValueError as exc:  # RobotSpecError included
        print(f"error: {one_line(exc)}", file=sys.stderr)
        return 2
    report = check.check_robot(robot)
    print(f"{report['robot']}: {report['mass_kg']:.2f} kg, feet {report['feet']} (radius {report['foot_radius_m']} m)")
    for line in report["taken_from_model"]:
        print(f"from the model: {line}")
    print(f"stance height (feet touching, default pose): {report['stance_height_m']:.3f} m")
    errors = ", ".join(f"{k} {v:.1e}" for k, v in report["dynamics_relative_error"].items())
    print(f"dynamics against MuJoCo (largest relative error): {errors}")
    print(f"standing under PD for {check.STANDING_SECONDS:g} s:")
    print("| simulator | height (m) | drift (m) | speed, last 1 s | upright |")
    print("|---|---:|---:|---:|---:|")
    for where, s in report["standing"].items():
        print(f"| {where} | {s['height']:.3f} | {s['drift']:.3f} | {s['speed']:.3f} | {s['upright']:.4f} |")
    print(f"suggested task.base_height_target: {report['suggested_base_height_target_m']} m (MuJoCo's standing height)")
    if report["ignored_in_training"]:
        print("what training ignores (MuJoCo and the deployed player simulate it; training's contact is the feet's):")
        print("| model | in MuJoCo | in training |")
        print("|---|---|---|")
        for row in report["ignored_in_training"]:
            print(f"| {row['what']} | {row['mujoco']} | {row['training']}{' (a problem)' * row['problem']} |")
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=2))
    for note in report["notes"]:
        print(f"note: {note}")
    for problem in report["problems"]:
        print(f"problem: {problem}")
    print("ok: ready to train" if not report["problems"] else f"{len(report['problems'])} problem(s)")
    return 0 if not report["problems"] else 1


class CommandParser(argparse.ArgumentParser):
    """An ``ArgumentParser`` that refuses with the error alone on one line, then one line of
    where to look (the nearest known flag of a misspelled one), instead of argparse's usage
    above the error: ``train``'s usage alone ran to 96 lines and pushed the error out of view.
    Exit status 2, as argparse's. argparse makes subcommand parsers of the parent's class, so
    every command refuses this way."""

    def parse_args(self, args=None, namespace=None):  # type: ignore[override]
        # argparse reports unknown flags from the top-level parser, which knows neither the
        # subcommand's flags nor its name: report them from the subcommand's parser instead.
        parsed, extras = self.parse_known_args(args, namespace)
        if extras:
            chosen = self._chosen_parser(parsed)
            chosen._refuse(f"unrecognized arguments: {' '.join(extras)}", chosen._nearest_flag(extras))
        return parsed

    def error(self, message: str) -> NoReturn:
        self._refuse(message)

    def _refuse(self, message: str, nearest: str | None = None) -> NoReturn:
        hint = f"did you mean {nearest}? (all flags: {self.prog} --help)" if nearest else f"see {self.prog} --help"
        self.exit(2, f"error: {one_line(message)}\n{hint}\n")

    def _chosen_parser(self, parsed: argparse.Namespace) -> argparse.ArgumentParser:
        """The parser of the (sub)command that ``parsed`` came from."""
        for action in self._actions:
            if isinstance(action, argparse._SubParsersAction):
                chosen = action.choices.get(getattr(parsed, action.dest, None))
                if isinstance(chosen, CommandParser):
                    return chosen._chosen_parser(parsed)
        return self

    def _nearest_flag(self, extras: list[str]) -> str | None:
        """The known flag closest to the first unknown one in ``extras``, if one is close."""
        # compared without the dashes, which every flag shares and which would make "--bogus"
        # look close to "--out"
        known = {option[2:]: option for option in self._option_string_actions if option.startswith("--")}
        for extra in extras:
            if extra.startswith("--"):
                close = difflib.get_close_matches(extra[2:].partition("=")[0], list(known), n=1)
                return known[close[0]] if close else None
        return None


def build_parser() -> argparse.ArgumentParser:
    parser = CommandParser(
        prog="smoothloco",
        description="Legged locomotion learned with SHAC through smoothed hard contact: train, compare, export, "
        "play, evaluate, study, benchmark.",
        allow_abbrev=False,
    )
    sub = parser.add_subparsers(dest="command", required=True)

    bench_parser = sub.add_parser(
        "bench", allow_abbrev=False, help="throughput of the simulator or the task, printed as a table"
    )
    bench_parser.add_argument(
        "target",
        choices=list(BENCH_TARGETS),
        help="what to measure (dt: hard-contact accuracy against the step size; controller: the latency of an "
        "exported controller's step, with --export)",
    )
    bench_parser.add_argument("--export", metavar="DIR", help="export folder for bench controller")
    bench_parser.add_argument("--batch", type=positive_int, default=256, help="environments in the batch (default 256)")
    bench_parser.add_argument(
        "--steps", type=positive_int, default=100, help="steps per timed forward rollout (default 100)"
    )
    bench_parser.add_argument(
        "--repeats",
        type=positive_int,
        default=5,
        help="timed repetitions after the compiling call; forward and gradient alternate (default 5)",
    )
    bench_parser.add_argument("--json", metavar="FILE", help="also write the figures as JSON")
    bench_parser.set_defaults(func=_bench)

    robot_parser = sub.add_parser(
        "robot",
        allow_abbrev=False,
        help="check a robot before training it: its spec, dynamics against MuJoCo, standing under PD",
        description="Load a robot (bundled name or spec .toml, docs/own-robot.md), compare our dynamics with MuJoCo "
        "(C) at random states, and stand it under PD in MuJoCo and in our simulator. Exit status 0 when every check "
        "passes, 1 when one fails, 2 when the spec cannot be loaded.",
    )
    robot_parser.add_argument("robot", metavar="NAME_OR_PATH", help=f"{', '.join(BUNDLED_ROBOTS)} or a spec .toml")
    robot_parser.add_argument("--json", metavar="FILE", help="also write the report as JSON")
    robot_parser.set_defaults(func=_robot)

    train_cli.add_parser(sub)
    compare.add_parser(sub)
    deploy_cli.add_parser(sub)
    eval_cli.add_parser(sub)
    study.add_parser(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    request_host_devices()
    quiet_cache_loads()  # XLA's false machine-mismatch lines on every compile-cache hit (smoothloco.quiet)
    args = build_parser().parse_args(argv)
    return args.func(args)
