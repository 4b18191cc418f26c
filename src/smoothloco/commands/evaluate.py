"""``smoothloco eval RUN --sim {mujoco,hard,smooth,soft} [--robustness] [--terrain [TERRAINS]]``."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from smoothloco.deploy.export import ExportError, exported
from smoothloco.evaluate import robustness, terrain_course
from smoothloco.evaluate.transfer import SIMS, evaluate_run, rollout_player, summarize, write_report
from smoothloco.measure.scenarios import Scenario, run_scenarios, standard_scenarios, training_mismatches
from smoothloco.robot_side.contract import Contract, PolicyContractError
from smoothloco.robot_side.testbench import Player
from smoothloco.tasks import RandomizationConfig
from smoothloco.train.checkpoint import CheckpointError
from smoothloco.train.run_folder import CONFIG_NAME
from smoothloco.train.runs import read_config
from smoothloco.validation import one_line


def add_parser(sub) -> None:
    parser = sub.add_parser(
        "eval",
        allow_abbrev=False,
        help="standard evaluation of a run's policy: command grid, pushes, friction/mass mismatch",
        description="Evaluate a run's policy on the standard scenarios (command grid, 0.5 and 1.0 m/s pushes from "
        "8 directions, friction 0.5-1.25 and base mass ±5 kg). mujoco runs the exported ONNX policy in the "
        "standalone player; hard/smooth/soft run the JAX policy in our simulator.",
    )
    parser.add_argument(
        "run",
        metavar="RUN",
        help="run folder (holds config.json and checkpoint.msgpack), or an export folder alone (MuJoCo)",
    )
    parser.add_argument("--sim", choices=SIMS, default="mujoco", help="simulator to evaluate in (default mujoco)")
    parser.add_argument("--json", metavar="FILE", help="also write the summary JSON here")
    parser.add_argument("--out", metavar="DIR", help="report folder (default RUN/eval-<sim>)")
    parser.add_argument(
        "--robustness",
        action="store_true",
        help="also run the robustness suite in MuJoCo (control delay, sensor noise, weaker motors, the motors' "
        "torque-speed envelope, joint friction and damping, rotor armature, friction 0.3, 5 cm bumps, MuJoCo's default contact, 1.5 m/s pushes, all combined): "
        "summary.json 'robustness', robustness.png",
    )
    parser.add_argument(
        "--terrain",
        nargs="?",
        const="",
        metavar="TERRAINS",
        help="also walk the terrain courses in MuJoCo, straight ahead at 0.5, 0.75 and 1 m/s from standing: flat for "
        "reference, 15 cm stairs up and down, slopes of 10 and 25 degrees up and down, 8 cm rough ground; or, given, "
        "these terrains separated by ';' (e.g. 'stairs:rise=0.17;ramp:degrees=30'): summary.json 'terrain'",
    )
    parser.set_defaults(func=run_eval)


def export_scenarios(export: Contract) -> tuple[Scenario, ...]:
    """The standard set for an export alone: judged at the corners of the ranges it trained on."""
    source = export.contract["source"]
    ranges = {k: tuple(source[f"trained_{k}"]) for k in ("friction", "added_base_mass") if f"trained_{k}" in source}
    return standard_scenarios(mismatches=training_mismatches(RandomizationConfig(**ranges)))


def run_eval(args: argparse.Namespace) -> int:
    for flag, asked in (("--robustness", args.robustness), ("--terrain", args.terrain is not None)):
        if asked and args.sim != "mujoco":
            print(f"error: {flag} runs in MuJoCo (--sim mujoco), not --sim {args.sim}", file=sys.stderr)
            return 2
    alone = (Path(args.run) / "policy.json").is_file()  # an export folder: its contract says all
    if alone and args.sim != "mujoco":
        print(f"error: an export folder runs in MuJoCo (--sim mujoco), not --sim {args.sim}", file=sys.stderr)
        return 2
    try:
        courses = terrain_course.courses_of(args.terrain) if args.terrain is not None else ()
        if alone:
            player = Player(args.run)
            scenarios = export_scenarios(player)
            trajectories = rollout_player(player, scenarios)
            summary = summarize(scenarios, trajectories, player.mass)
        else:
            task = read_config(Path(args.run) / CONFIG_NAME).task
            scenarios = run_scenarios(task)
            summary, trajectories = evaluate_run(args.run, args.sim, scenarios)
        if args.robustness or courses:
            player = player if alone else Player(exported(Path(args.run)))
        if args.robustness:
            suite = robustness.export_conditions(player) if alone else robustness.conditions(task)
            summary["robustness"] = robustness.evaluate_robustness(player, player.mass, suite)
        if courses:
            summary["terrain"] = terrain_course.evaluate_courses(player, courses)
    except (CheckpointError, ExportError, PolicyContractError, ValueError) as exc:
        print(f"error: {one_line(exc)}", file=sys.stderr)
        return 2
    out = Path(args.out) if args.out else Path(args.run) / f"eval-{args.sim}"
    files = write_report(out, args.sim, summary, scenarios, trajectories)
    if args.robustness:
        files["robustness"] = out / "robustness.png"
        robustness.plot(summary["robustness"], files["robustness"], f"policy in {args.sim}: robustness")
        with files["markdown"].open("a") as f:
            f.write("\n" + robustness.markdown(summary["robustness"]))
    if courses:
        with files["markdown"].open("a") as f:
            f.write("\n" + terrain_course.markdown(summary["terrain"]))
    if args.json:
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json).write_text(files["json"].read_text())
    print("\n\n".join(files["markdown"].read_text().split("\n\n")[:2]))  # title and summary table
    if args.robustness:
        print(robustness.markdown(summary["robustness"]))
    if courses:
        print(terrain_course.markdown(summary["terrain"]))
    print(f"wrote {', '.join(str(p) for p in files.values())}")
    return 0
