"""Watch a run's policy: in MuJoCo through the exported artifacts (``sim="mujoco"``), or in our
own simulator with one of its contact models, as a trajectory file and a captioned video; and
the export + short video that ``smoothloco train`` makes of a finished run."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from smoothloco.deploy.export import EXPORT_DIR, exported
from smoothloco.deploy.render import Clip, render_video
from smoothloco.evaluate.terrain_course import ground_with_xml
from smoothloco.evaluate.transfer import SIMS, Script, rollout_ours
from smoothloco.robot import load_robot
from smoothloco.robot_side.testbench import FRAME_RATE, Command, Player, Push
from smoothloco.sim.terrain import parse_terrain
from smoothloco.train.runs import load_run

TRAINING_VIDEO_SECONDS = 5.0
# Stand, walk forward, side-step, turn: a few seconds of everything the task trains.
DEFAULT_COMMANDS: tuple[Command, ...] = (
    (0.0, 0.0, 0.0, 0.0),
    (1.0, 0.5, 0.0, 0.0),
    (4.0, 0.0, 0.3, 0.0),
    (7.0, 0.0, 0.0, 0.5),
)


@dataclass(frozen=True)
class PlayResult:
    trajectory: Path  # .npz of the trajectory arrays
    video: Path | None  # None when offscreen rendering is unavailable


def play(
    run_dir: str | Path,
    sim: str = "mujoco",
    commands: Sequence[Command] = DEFAULT_COMMANDS,
    pushes: Sequence[Push] = (),
    seconds: float = 10.0,
    out: str | Path | None = None,
    terrain: str | None = None,
) -> PlayResult:
    """Run the policy of ``run_dir`` and write ``out`` (default ``RUN/play-<sim>.mp4``) and a ``.npz``;
    in MuJoCo ``run_dir`` may also be an export folder, and ``terrain`` (``parse_terrain``'s
    form, e.g. ``stairs:rise=0.15``) replaces the flat floor."""
    if sim not in SIMS:
        raise ValueError(f"unknown simulator {sim!r}; accepted: {', '.join(SIMS)}")
    if terrain is not None and sim != "mujoco":
        raise ValueError(
            f"a terrain is played in MuJoCo only (--sim mujoco); in {sim} the run's training ground is used"
        )
    if terrain is not None:
        parse_terrain(terrain)  # refused before anything runs, with what is accepted
    run_dir = Path(run_dir)
    out = Path(out) if out is not None else run_dir / f"play-{sim}.mp4"
    if sim == "mujoco":
        trajectory, clip = _play_mujoco(run_dir, commands, pushes, seconds, terrain)
    else:
        trajectory, clip = _play_ours(run_dir, sim, commands, pushes, seconds)
    out.parent.mkdir(parents=True, exist_ok=True)
    trajectory_file = out.with_suffix(".npz")
    np.savez(trajectory_file, **trajectory)
    return PlayResult(trajectory_file, render_video(clip, out))


def deploy_after_training(run_dir: str | Path) -> None:
    """Export and a short MuJoCo video of a finished run (``smoothloco train`` ends with it); a
    failure is reported, not raised, since the run itself (checkpoint, metrics, summary) is
    already complete."""
    run_dir = Path(run_dir)
    try:
        result = play(run_dir, "mujoco", seconds=TRAINING_VIDEO_SECONDS)
    except Exception as exc:  # noqa: BLE001 - whatever breaks here must not fail a finished run
        print(f"export/video failed: {type(exc).__name__}: {exc} (retry with `smoothloco play {run_dir}`)", flush=True)
        return
    print(f"exported {run_dir / EXPORT_DIR}; video {result.video or 'not rendered'}", flush=True)


def caption(sim: str, t: float, command: np.ndarray) -> str:
    vx, vy, yaw = command
    return f"{sim}  t {t:4.1f} s   command vx {vx:+.2f} m/s  vy {vy:+.2f} m/s  yaw {yaw:+.2f} rad/s"


def _play_mujoco(
    run_dir: Path, commands: Sequence[Command], pushes: Sequence[Push], seconds: float, terrain: str | None
) -> tuple[dict, Clip]:
    # An export folder plays alone, whatever became of its run or robot spec.
    export_dir = run_dir if (run_dir / "policy.json").is_file() else exported(run_dir)
    player = Player(export_dir)
    qpos, captions = [], []

    def grab(model, data, command) -> None:
        qpos.append(data.qpos.copy())
        captions.append(caption("mujoco", data.time, command))

    # long enough for a walk at up to 1 m/s, as far as any command reaches in time
    ground, ground_xml = (None, None) if terrain is None else ground_with_xml(player, terrain, length=seconds)
    trajectory = player.run(commands=commands, seconds=seconds, pushes=pushes, frame_callback=grab, ground=ground)
    xml = ground_xml or (export_dir / player.contract["robot"]["file"]).read_text()
    return trajectory, Clip(xml, np.array(qpos), captions, FRAME_RATE)


def _play_ours(
    run_dir: Path, contact: str, commands: Sequence[Command], pushes: Sequence[Push], seconds: float
) -> tuple[dict, Clip]:
    """The JAX policy in ``VelocityTask`` with ``contact``, scripted as the evaluation scripts it
    (``evaluate.transfer.rollout_ours``). The trajectory has the MuJoCo player's fields plus
    ``qpos``/``qvel``."""
    run = load_run(run_dir)
    script = Script(commands=tuple(commands), seconds=seconds, pushes=tuple(pushes))
    trajectory = rollout_ours(run, contact, [script])[0]
    dt, steps = run.config.task.control_dt, len(trajectory["time"])
    frames = np.minimum(np.round(np.arange(0.0, seconds, 1.0 / FRAME_RATE) / dt).astype(int), steps - 1)
    captions = [caption(contact, trajectory["time"][i], trajectory["command"][i]) for i in frames]
    xml = load_robot(run.config.task.robot).xml
    return trajectory, Clip(xml, trajectory["qpos"][frames], captions, FRAME_RATE)
