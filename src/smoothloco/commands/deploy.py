"""``smoothloco export RUN`` and ``smoothloco play RUN``."""

from __future__ import annotations

import argparse
import sys

from smoothloco.argtypes import seconds_up_to
from smoothloco.deploy.export import EXPORT_FILES, ExportError, export_run
from smoothloco.evaluate.play import DEFAULT_COMMANDS, SIMS, play
from smoothloco.robot_side.contract import PolicyContractError
from smoothloco.train.checkpoint import CheckpointError
from smoothloco.validation import one_line

# An hour of 50 Hz samples (~180k) is a few hundred MB of trajectory and video frames.
MAX_PLAY_SECONDS = 3600.0


def _tuples(text: str, size: int) -> list[tuple[float, ...]]:
    """``"a,b,c;d,e,f"`` -> ``[(a, b, c), (d, e, f)]`` with ``size`` numbers per group (argparse
    puts the flag's name before the message)."""
    groups = []
    for group in filter(None, (g.strip() for g in text.split(";"))):
        try:
            numbers = tuple(float(x) for x in group.split(","))
        except ValueError:
            numbers = ()
        if len(numbers) != size:
            raise argparse.ArgumentTypeError(f"expected {size} comma-separated numbers per group, got {group!r}")
        groups.append(numbers)
    return groups


def _format(groups) -> str:
    return ";".join(",".join(f"{x:g}" for x in g) for g in groups)


def add_parser(sub) -> None:
    export = sub.add_parser(
        "export",
        allow_abbrev=False,
        help="write RUN/export/: controller.onnx, policy.json (the deployment contract), robot.xml, reference.npz",
        description="Export a run's controller (observation, memory and network) as one ONNX graph with its contract, checked against the JAX controller step.",
    )
    export.add_argument("run", metavar="RUN", help="run folder (holds config.json and checkpoint.msgpack)")
    export.add_argument("--out", metavar="DIR", help="export folder (default RUN/export)")
    export.set_defaults(func=run_export)

    play_parser = sub.add_parser(
        "play",
        allow_abbrev=False,
        help="run a policy and render a captioned video (MuJoCo through the export, or our simulator)",
        description="Run a run's policy from standing and write a video (MP4, GIF fallback) and a trajectory (.npz).",
    )
    play_parser.add_argument("run", metavar="RUN", help="run folder (with --sim mujoco also an export folder alone)")
    play_parser.add_argument(
        "--sim",
        choices=SIMS,
        default="mujoco",
        help="mujoco: the exported ONNX policy in MuJoCo (C); hard/smooth/soft: the JAX policy in our simulator",
    )
    play_parser.add_argument(
        "--commands",
        metavar="T,VX,VY,YAW;...",
        type=lambda t: _tuples(t, 4),
        default=list(DEFAULT_COMMANDS),
        help=f"command schedule, start times in s (default {_format(DEFAULT_COMMANDS)!r})",
    )
    play_parser.add_argument(
        "--push",
        metavar="T,VX,VY;...",
        type=lambda t: _tuples(t, 3),
        default=[],
        help="base velocity kicks in m/s at times in s (default none)",
    )
    play_parser.add_argument(
        "--seconds",
        type=seconds_up_to(MAX_PLAY_SECONDS),
        default=10.0,
        help=f"simulated seconds, at most {MAX_PLAY_SECONDS:g}: the trajectory is kept in memory (default 10)",
    )
    play_parser.add_argument(
        "--out", metavar="FILE", help="video file (default RUN/play-<sim>.mp4; the trajectory goes beside it as .npz)"
    )
    play_parser.add_argument(
        "--terrain",
        metavar="TERRAIN",
        help="MuJoCo only: the ground instead of the flat floor, as --task.terrain writes it (e.g. "
        "'stairs:rise=0.15,run=0.3', 'slope:degrees=25')",
    )
    play_parser.set_defaults(func=run_play)


def run_export(args: argparse.Namespace) -> int:
    try:
        out = export_run(args.run, args.out)
    except (CheckpointError, ExportError, PolicyContractError) as exc:
        print(f"error: {one_line(exc)}", file=sys.stderr)
        return 2
    print(f"wrote {out}: {', '.join(EXPORT_FILES)}")
    return 0


def run_play(args: argparse.Namespace) -> int:
    try:
        result = play(args.run, args.sim, args.commands, args.push, args.seconds, args.out, args.terrain)
    except (CheckpointError, ExportError, PolicyContractError, ValueError) as exc:
        print(f"error: {one_line(exc)}", file=sys.stderr)
        return 2
    print(f"wrote {result.trajectory}" + (f" and {result.video}" if result.video else ""))
    return 0
