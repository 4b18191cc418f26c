"""A training run, SHAC or PPO, from start to end: the run folder checked and locked, a resume's
checkpoint and settings checked, SIGINT/SIGTERM turned into a checkpointed stop, the algorithm's
host loop (``shac_loop``, ``ppo_loop``) run into the run log (``run_log``), and the summary
written (``summary``). Returns ``(make_policy, params, metrics)``.

Both algorithms report into one ``RunLog``, so their folders, evaluations and timings are the
same kind of thing and can be compared (``smoothloco compare``). A resumed run continues the
previous sessions' rows and clocks, so its metrics, plots and summary cover the whole run.

The configuration (``TrainConfig``) and reading a finished run back (``load_run``) are in
``runs``; exporting the policy after training is the ``smoothloco train`` command's last step
(``deploy.play.deploy_after_training``), not this loop's."""

from __future__ import annotations

import contextlib
import functools
import json
import signal
from pathlib import Path

import jax

from smoothloco.job import ProcessLost, any_process, describe, is_lead, several, shared_outcome
from smoothloco.train import checkpoint
from smoothloco.train.compile_cache import compiling_note, use_compile_cache
from smoothloco.train.evaluation import TrainingEvaluation
from smoothloco.train.ppo_loop import train_ppo
from smoothloco.train.run_folder import (
    CONFIG_NAME,
    SUMMARY_NAME,
    RunAlreadyFinished,
    RunFolderError,
    check_new_run_folder,
    run_lock,
    write_config,
)
from smoothloco.train.run_log import ProgressFn, RunLog
from smoothloco.train.runs import RESUME_SETTINGS, TrainConfig
from smoothloco.train.shac_loop import train_shac
from smoothloco.train.summary import write_missing_summary, write_summary


def train(config: TrainConfig, resume: bool = False, progress_fn: ProgressFn | None = None):
    """Train in ``config.run.out`` (a new run, or with ``resume`` the run there) and return
    ``(make_policy, params, history)``, ``history`` holding the whole run's metrics rows (a
    resume's earlier sessions' included); ``interrupted(config, history)`` tells a stop on
    SIGINT/SIGTERM (checkpoint saved) from a finished run. Nothing is written into a folder that
    another training holds or that is neither empty nor a run folder (``RunFolderError``).

    A resume trains from the checkpoint's iteration to ``config.iterations``, which may differ
    from the recorded one (``config.json`` is updated, as are ``run.eval_every`` and
    ``run.checkpoint_every``); it must not be below the checkpoint's, and a run already at its
    last iteration raises ``RunAlreadyFinished`` before anything is touched."""
    run_dir = Path(config.run.out)
    ckpt_path = run_dir / checkpoint.CHECKPOINT_NAME
    if resume and config.algo != "shac":
        raise ValueError(f"{run_dir}: only SHAC runs resume; Brax's PPO restarts its optimizer and environments")
    check_divides_over_devices(config)
    lead = is_lead()
    with contextlib.ExitStack() as held:
        # Only the lead (process 0) reads, locks and writes the run folder; its refusal stops
        # the other processes of a job before any of them trains.
        saved, error = None, None
        if lead:
            try:
                saved = _take_run_folder(run_dir, ckpt_path, config, resume, held)
            except Exception as exc:  # shared with the other processes, then raised here too
                error = exc
        shared_outcome(error)
        use_compile_cache(config.run.compile_cache)
        # A resume records what it changed once it trains (its checkpoint loaded, its first
        # update done), so a resume that fails leaves config.json as it was.
        record_changes = functools.partial(_record_resume_settings, run_dir, saved, config) if resume and lead else None
        if lead:
            # The first iteration compiles for about a minute without a line of output: say so,
            # and where the run writes.
            starting = f"resuming {config.algo} in" if resume else f"training {config.algo} into"
            print(f"{starting} {run_dir}", flush=True)
            if several():
                print(describe(), flush=True)
            print(compiling_note(config.run.compile_cache), flush=True)

        with _StopRequested() as stop:
            evaluation = TrainingEvaluation(config)
            # A signal may reach one process alone (Ctrl-C in its terminal): all stop together.
            stop_requested = lambda: any_process(stop.requested)  # noqa: E731
            log = RunLog(run_dir, config, evaluation, stop_requested, progress_fn, resume, record_changes, writes=lead)
            try:
                if config.algo == "shac":
                    make_policy, params, stopped = train_shac(config, log, ckpt_path, resume)
                else:
                    make_policy, params, stopped = train_ppo(config, log, ckpt_path)
            except ProcessLost as exc:
                raise ProcessLost(f"{exc}. {_resumable(run_dir, ckpt_path)}") from exc
            finally:
                log.close()
        if lead:
            if stopped:
                print(f"stopped at iteration {log.history[-1]['iteration']}; checkpoint in {ckpt_path}", flush=True)
            else:
                write_summary(run_dir, config, log.run_history, evaluation.latest, log.first_iteration_s)
    return make_policy, params, log.run_history


def _take_run_folder(run_dir: Path, ckpt_path: Path, config: TrainConfig, resume: bool, held: contextlib.ExitStack):
    """Check the run folder, lock it for the rest of ``held`` and, for a new run, write its
    ``config.json``. Returns a resume's recorded configuration (None for a new run)."""
    try:
        saved = _check_resumable(run_dir, ckpt_path, config) if resume else None
    except RunAlreadyFinished:
        if not (run_dir / SUMMARY_NAME).is_file():  # killed after its last checkpoint, before its summary
            with run_lock(run_dir, create=False):
                write_missing_summary(run_dir)
        raise
    if not resume:
        check_new_run_folder(run_dir)
    held.enter_context(run_lock(run_dir, create=not resume))
    if not resume and ckpt_path.exists():
        raise FileExistsError(f"{run_dir} already holds a run; use --resume {run_dir} or choose another --out")
    if not resume:
        write_config(run_dir, config.to_dict())
    return saved


def _resumable(run_dir: Path, ckpt_path: Path) -> str:
    """Where a stopped job goes on from, as the lead's checkpoint says (where it is readable)."""
    try:
        done = checkpoint.saved_iteration(ckpt_path)
    except checkpoint.CheckpointError:
        return f"{run_dir} holds no checkpoint yet: start the job again from scratch"
    return f"{run_dir} keeps its checkpoint at iteration {done}: start the job again with --resume {run_dir}"


def check_divides_over_devices(config: TrainConfig) -> None:
    """SHAC's environments are sharded over every device of the job, Brax PPO's over the local
    devices of its one process; refuse a count that does not split evenly, or PPO in a job of
    several processes, before anything is written."""
    if config.algo == "ppo":
        if several():
            raise ValueError(
                "--algo ppo trains in one process (Brax's own loop); a job of several processes trains SHAC"
            )
        flag, envs, devices, where = "ppo.num_envs", config.ppo.num_envs, jax.local_device_count(), "local devices"
    else:
        flag, envs, devices = "shac.num_envs", config.shac.num_envs, jax.device_count()
        where = f"devices of the job's {jax.process_count()} processes" if several() else "local devices"
    if envs % devices:
        raise ValueError(
            f"--{flag} {envs} does not split evenly over the {devices} {where}; use a multiple of {devices}"
        )


def _check_resumable(run_dir: Path, ckpt_path: Path, config: TrainConfig) -> dict:
    """Before anything is written: the recorded ``config.json`` of the run to resume, after
    checking that its checkpoint has iterations left to train up to ``config.iterations``."""
    done = checkpoint.saved_iteration(ckpt_path)
    config_file = run_dir / CONFIG_NAME
    try:
        saved = json.loads(config_file.read_text())
        planned = int(saved["shac"]["iterations"])
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise RunFolderError(f"{config_file} is not a readable run configuration: {exc!r}") from exc
    wanted = config.iterations
    if done > wanted:
        raise RunFolderError(
            f"{run_dir} is checkpointed at iteration {done}, past shac.iterations {wanted}; "
            f"pass --shac.iterations >= {done}"
        )
    if done == wanted:
        if planned <= done:
            raise RunAlreadyFinished(run_dir, done)
        raise RunFolderError(
            f"{run_dir} stopped at iteration {done} of {planned}; shac.iterations {wanted} would leave nothing "
            f"to train: pass more than {done}, or leave it out to train to {planned}"
        )
    return saved


def _record_resume_settings(run_dir: Path, saved: dict, config: TrainConfig) -> None:
    """Write the settings a resume changed (``RESUME_SETTINGS``) into ``config.json``, the rest
    as recorded (``run.out`` included: where the run was made), and say what changed."""
    updated = json.loads(json.dumps(saved))
    changes = []
    for section, key in RESUME_SETTINGS:
        value = getattr(getattr(config, section), key)
        before = updated.setdefault(section, {}).get(key)
        if before != value:
            updated[section][key] = value
            changes.append(f"{section}.{key} {before} -> {value}")
    if changes:
        write_config(run_dir, updated)
        extra = ""
        if any(c.startswith("shac.iterations") for c in changes):
            extra = " (the learning-rate decay and sharpness schedule now end at the new last iteration)"
        print(f"resume: {', '.join(changes)}{extra}", flush=True)


def interrupted(config: TrainConfig, history: list[dict]) -> bool:
    """Whether ``train`` returned ``history`` after a SIGINT/SIGTERM stopped it before its last
    iteration (its checkpoint resumes it), rather than at the end of the run."""
    return bool(history) and history[-1]["iteration"] < config.iterations


class _StopRequested:
    """SIGINT/SIGTERM set a flag; the loop checkpoints and stops between iterations."""

    def __init__(self) -> None:
        self.requested = False
        self._old = {}

    def __enter__(self):
        for sig in (signal.SIGINT, signal.SIGTERM):
            self._old[sig] = signal.signal(sig, self._handle)
        return self

    def _handle(self, signum, frame) -> None:
        self.requested = True
        print(f"\nreceived signal {signum}: finishing this iteration and saving a checkpoint", flush=True)

    def __exit__(self, *exc) -> None:
        for sig, handler in self._old.items():
            signal.signal(sig, handler)
