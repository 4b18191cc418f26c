"""Watch a run's policy: in MuJoCo through the exported artifacts (``sim="mujoco"``), or in our
own simulator with one of its contact models, as a trajectory file and a captioned video; and
the export + short video that ``smoothloco train`` makes of a finished run."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path

import jax
import numpy as np

from smoothloco.deploy.export import EXPORT_DIR, export_run
from smoothloco.deploy.player import FRAME_RATE, Command, Player, Push, command_schedule
from smoothloco.deploy.render import Clip, render_video
from smoothloco.evaluate.record import trajectory_sample
from smoothloco.sim import CONTACT_MODELS
from smoothloco.tasks import CommandConfig, PushConfig, RandomizationConfig, VelocityTask
from smoothloco.train.checkpoint import CHECKPOINT_NAME
from smoothloco.train.runs import load_run

TRAINING_VIDEO_SECONDS = 5.0
SIMS = ("mujoco", *CONTACT_MODELS)
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
) -> PlayResult:
    """Run the policy of ``run_dir`` and write ``out`` (default ``RUN/play-<sim>.mp4``) and a ``.npz``."""
    if sim not in SIMS:
        raise ValueError(f"unknown simulator {sim!r}; accepted: {', '.join(SIMS)}")
    run_dir = Path(run_dir)
    out = Path(out) if out is not None else run_dir / f"play-{sim}.mp4"
    if sim == "mujoco":
        trajectory, clip = _play_mujoco(run_dir, commands, pushes, seconds)
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


def exported(run_dir: Path) -> Path:
    """The run's export folder, written first if missing or older than the checkpoint."""
    folder, checkpoint = run_dir / EXPORT_DIR, run_dir / CHECKPOINT_NAME
    contract = folder / "policy.json"
    if not contract.is_file() or (checkpoint.is_file() and checkpoint.stat().st_mtime > contract.stat().st_mtime):
        export_run(run_dir, folder)
    return folder


def _play_mujoco(
    run_dir: Path, commands: Sequence[Command], pushes: Sequence[Push], seconds: float
) -> tuple[dict, Clip]:
    export_dir = exported(run_dir)
    player = Player(export_dir)
    qpos, captions = [], []

    def grab(model, data, command) -> None:
        qpos.append(data.qpos.copy())
        captions.append(caption("mujoco", data.time, command))

    trajectory = player.run(commands=commands, seconds=seconds, pushes=pushes, frame_callback=grab)
    xml = (export_dir / player.contract["robot"]["file"]).read_text()
    return trajectory, Clip(xml, np.array(qpos), captions, FRAME_RATE)


def _play_ours(
    run_dir: Path, contact: str, commands: Sequence[Command], pushes: Sequence[Push], seconds: float
) -> tuple[dict, Clip]:
    """The JAX policy in ``VelocityTask`` with ``contact``, following ``commands`` and ``pushes``.

    The trajectory has the MuJoCo player's fields (``evaluate.record``) plus ``qpos``/``qvel``.
    """
    run = load_run(run_dir)
    dt = run.config.task.control_dt
    steps = max(1, round(seconds / dt))
    times = np.arange(steps + 1) * dt
    command_t = command_schedule(commands, times).astype(np.float32)
    task = _scripted_task(run.config.task, contact, command_t[0])
    policy = run.policy(deterministic=True)

    def body(state, inputs):
        next_command, kick = inputs
        q, v = state.pipeline_state.q, state.pipeline_state.v
        action = policy(state.obs, None)[0]
        # The kick lands after the policy saw the state, so it shows in the next observation.
        kicked = state.replace(pipeline_state=state.pipeline_state.replace(v=v.at[:2].add(kick)))
        # The command for the next control period goes in before the step, whose observation carries it.
        next_state, contact = task.step_with_contact(kicked.replace(info={**state.info, "command": next_command}), action)
        return next_state, {"qpos": q, "qvel": v, **trajectory_sample(state, contact)}

    def rollout(key, next_commands, kicks):
        return jax.lax.scan(body, task.reset(key), (next_commands, kicks))[1]

    records = jax.device_get(jax.jit(rollout)(jax.random.PRNGKey(0), command_t[1:], _kicks(pushes, steps, dt)))
    trajectory = {k: np.asarray(v, np.float64) for k, v in records.items() if k != "done"}
    trajectory.update(
        time=times[:-1], command=command_t[:-1].astype(np.float64), fallen=np.logical_or.accumulate(records["done"])
    )
    frames = np.minimum(np.round(np.arange(0.0, seconds, 1.0 / FRAME_RATE) / dt).astype(int), steps - 1)
    captions = [caption(contact, times[i], command_t[i]) for i in frames]
    return trajectory, Clip(task.robot.xml, trajectory["qpos"][frames], captions, FRAME_RATE)


def _scripted_task(config, contact: str, first_command: np.ndarray):
    """The run's task with ``contact``, without random commands, pushes, noise or randomization."""
    vx, vy, yaw = (float(c) for c in first_command)
    # Collapsed command ranges make reset start with the first scheduled command; it never resamples.
    fixed = CommandConfig(
        lin_vel_x=(vx, vx), lin_vel_y=(vy, vy), yaw_rate=(yaw, yaw), resample_seconds=(1e9, 1e9), zero_probability=0.0
    )
    return VelocityTask(
        replace(
            config,
            contact=contact,
            obs_noise=0.0,
            commands=fixed,
            pushes=PushConfig(enabled=False),
            randomization=RandomizationConfig(enabled=False),
        )
    )


def _kicks(pushes: Sequence[Push], steps: int, dt: float) -> np.ndarray:
    """(steps, 2) base velocity kick at each control step, m/s."""
    kicks = np.zeros((steps, 2), np.float32)
    for t, vx, vy in pushes:
        if 0 <= t < steps * dt:
            kicks[min(round(t / dt), steps - 1)] += (vx, vy)
    return kicks
