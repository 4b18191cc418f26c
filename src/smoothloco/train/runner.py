"""A training run, SHAC or PPO: run folder, live progress, metrics (CSV + TensorBoard),
checkpoints, periodic evaluation, plots and a summary. Returns ``(make_policy, params, metrics)``.

Both algorithms report into one ``RunLog``, so their folders, evaluations and timings are the
same kind of thing and can be compared (``smoothloco compare``).

A run folder is held with an exclusive lock while it trains, and ``metrics.csv`` is only ever
appended to (a resume first drops the rows written after its checkpoint), so neither a second
training nor a ``kill -9`` can mix up or lose its rows."""

from __future__ import annotations

import contextlib
import csv
import fcntl
import functools
import gc
import hashlib
import io
import json
import os
import platform
import signal
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import jax
import numpy as np

from brax.training.acme import running_statistics, specs

from smoothloco import plotting
from smoothloco.evaluate import command_evaluator
from smoothloco.parallel import replicated, shard_batch
from smoothloco.tasks import VelocityTask, VelocityTaskConfig, randomize
from smoothloco.train import checkpoint, ppo
from smoothloco.train.networks import actor_obs as actor_obs_of
from smoothloco.train.networks import make_policy_factory
from smoothloco.train.ppo import PPOConfig
from smoothloco.train.shac import SHAC, SHACConfig, make_env
from smoothloco.validation import require_finite

ProgressFn = Callable[[int, dict], None]
ALGORITHMS = ("shac", "ppo")
LOCK_NAME = ".train.lock"  # held (flock) by the training in the folder; never deleted, see _run_lock
# The training-time evaluation (``command_evaluator``'s default) scores a command only after it
# has held this long, so a shorter evaluation would have nothing to score.
EVAL_SETTLE_SECONDS = 1.0


class RunFolderError(RuntimeError):
    """The run folder cannot be trained in: another training holds it, it is not a run folder,
    or its ``metrics.csv`` cannot be continued."""


@dataclass(frozen=True)
class RunConfig:
    out: str = "runs/default"
    checkpoint_every: int = 20  # iterations (SHAC; PPO saves at every evaluation, when Brax hands out parameters)
    eval_every: int = 50  # iterations; 0 = only at the end
    eval_seconds: float = 5.0
    compile_cache: str = ".jax_cache"
    deploy: bool = True  # export the policy and render a short MuJoCo video at the end

    def __post_init__(self) -> None:
        require_finite("run", self)
        if not str(self.out).strip():  # an empty path would be the working directory
            raise ValueError("run.out must name a folder, got an empty string")
        if self.checkpoint_every < 1:
            raise ValueError(f"run.checkpoint_every must be >= 1, got {self.checkpoint_every}")
        if self.eval_every < 0:
            raise ValueError(f"run.eval_every must be >= 0 (0 = only at the end), got {self.eval_every}")
        if not self.eval_seconds > EVAL_SETTLE_SECONDS:
            raise ValueError(
                f"run.eval_seconds must be longer than the evaluation's {EVAL_SETTLE_SECONDS:g} s settling time, "
                f"got {self.eval_seconds}"
            )


@dataclass(frozen=True)
class TrainConfig:
    algo: str = "shac"  # one of ALGORITHMS; only its section is used
    task: VelocityTaskConfig = field(default_factory=VelocityTaskConfig)
    shac: SHACConfig = field(default_factory=SHACConfig)
    ppo: PPOConfig = field(default_factory=PPOConfig)
    run: RunConfig = field(default_factory=RunConfig)

    def __post_init__(self) -> None:
        if self.algo not in ALGORITHMS:
            raise ValueError(f"unknown algorithm {self.algo!r}; accepted: {', '.join(ALGORITHMS)}")
        every = self.run.eval_every
        if self.algo == "ppo" and every and self.ppo.iterations % every:
            # Brax's PPO hands out parameters only between equal epochs.
            raise ValueError(f"ppo.iterations ({self.ppo.iterations}) must be a multiple of run.eval_every ({every})")
        dt = self.task.control_dt  # the evaluation counts whole control steps
        if round(self.run.eval_seconds / dt) <= round(EVAL_SETTLE_SECONDS / dt):
            raise ValueError(
                f"run.eval_seconds ({self.run.eval_seconds}) must exceed the evaluation's {EVAL_SETTLE_SECONDS:g} s "
                f"settling time by at least one control step ({dt} s)"
            )

    @property
    def iterations(self) -> int:
        return self.shac.iterations if self.algo == "shac" else self.ppo.iterations

    @property
    def steps_per_iteration(self) -> int:
        return self.shac.num_envs * self.shac.horizon if self.algo == "shac" else self.ppo.steps_per_iteration

    def to_dict(self) -> dict:
        return {
            "algo": self.algo,
            "task": self.task.to_dict(),
            "shac": self.shac.to_dict(),
            "ppo": self.ppo.to_dict(),
            "run": self.run.__dict__,
        }

    @classmethod
    def from_dict(cls, saved: dict) -> "TrainConfig":
        """Inverse of ``to_dict`` (JSON turns tuples into lists; the configs validate again)."""
        from smoothloco.tasks.config import CommandConfig, GaitConfig, PushConfig, RandomizationConfig

        untuple = lambda d: {k: tuple(v) if isinstance(v, list) else v for k, v in d.items()}  # noqa: E731
        task = untuple(saved["task"])
        # Runs from before the trot generator have no "gait" section: they trained without one.
        absent = {"gait": {"frequency": 0.0}}
        sections = (("commands", CommandConfig), ("pushes", PushConfig), ("gait", GaitConfig), ("randomization", RandomizationConfig))
        for key, sub in sections:
            task[key] = sub(**untuple(saved["task"].get(key, absent.get(key, {}))))
        return cls(  # runs from before PPO existed have no "algo" and "ppo"
            algo=saved.get("algo", "shac"),
            task=VelocityTaskConfig(**task),
            shac=SHACConfig(**untuple(saved["shac"])),
            ppo=PPOConfig(**untuple(saved.get("ppo", {}))),
            run=RunConfig(**saved["run"]),
        )


@dataclass(frozen=True)
class LoadedRun:
    """A finished or interrupted run, read back from its folder: what export, play and eval need."""

    run_dir: Path
    config: TrainConfig
    make_policy: Callable
    params: tuple  # (observation normalizer, actor parameters): SHAC's actor or Brax's PPO policy
    iteration: int
    env_steps: int

    def policy(self, deterministic: bool = True) -> Callable:
        return self.make_policy(self.params, deterministic=deterministic)


def load_run(run_dir: str | Path) -> LoadedRun:
    """Read ``config.json`` and the policy part of ``checkpoint.msgpack`` (SHAC or PPO) without
    building the training environment; a clear error if the folder is not a run."""
    run_dir = Path(run_dir)
    config_file, ckpt_path = run_dir / "config.json", run_dir / checkpoint.CHECKPOINT_NAME
    if not config_file.is_file():
        raise checkpoint.CheckpointError(f"{run_dir} is not a run folder: no config.json")
    config = TrainConfig.from_dict(json.loads(config_file.read_text()))
    raw = checkpoint.load_raw(ckpt_path)
    try:
        load = _load_shac_policy if config.algo == "shac" else ppo.load_policy
        make_policy, params, iteration, env_steps = load(config, raw)
    except (KeyError, ValueError, TypeError) as exc:
        raise checkpoint.CheckpointError(f"checkpoint {ckpt_path} does not match {config_file}: {exc}") from exc
    return LoadedRun(run_dir, config, make_policy, params, iteration, env_steps)


def _load_shac_policy(config: TrainConfig, raw: dict) -> tuple[Callable, tuple, int, int]:
    from flax import serialization

    from smoothloco.train.networks import Actor

    c = config.shac
    task = VelocityTask(config.task)
    actor = Actor(c.actor_hidden, task.action_size, c.init_log_std)
    size = task.observation_size
    obs = {k: np.zeros(v, np.float32) for k, v in size.items()} if isinstance(size, dict) else np.zeros(size, np.float32)
    actor_template = actor.init(jax.random.PRNGKey(0), actor_obs_of(obs))
    normalizer_template = running_statistics.init_state(jax.tree.map(lambda x: specs.Array(x.shape, np.float32), obs))
    train_state = raw["0"]  # the checkpoint is (train_state, env_state)
    params = (
        serialization.from_state_dict(normalizer_template, train_state["normalizer"]),
        serialization.from_state_dict(actor_template, train_state["actor_params"]),
    )
    return make_policy_factory(actor), params, int(train_state["iteration"]), int(train_state["env_steps"])


@contextlib.contextmanager
def _gc_paused():
    """Tracing the update creates millions of short-lived Python objects, and the cyclic garbage
    collector kept rescanning them: pausing it halved trace-and-lower time of the default update
    (20.5 s to 10.9 s measured). Nothing that lives long is created meanwhile."""
    gc.collect()
    gc.freeze()
    gc.disable()
    try:
        yield
    finally:
        gc.enable()
        gc.unfreeze()


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


def _cpu_description() -> str:
    """The host CPU's model and instruction-set flags (Linux), else what ``platform`` knows."""
    with contextlib.suppress(OSError):
        lines = Path("/proc/cpuinfo").read_text().splitlines()
        wanted = [line for line in lines if line.startswith(("model name", "flags", "Features"))]
        if wanted:
            return "\n".join(dict.fromkeys(wanted))  # every core repeats them
    return f"{platform.processor()} {platform.machine()}"


def host_compile_cache(root: str) -> str:
    """A folder of ``root`` for this host's CPU; an empty ``root`` (no cache) stays empty.
    XLA:CPU compiles for the host's instruction set, and JAX's cache key does not include it, so
    one cache shared by different machines (a network home, a copied repository) could hand a
    machine code for a CPU it does not have."""
    if not root:
        return ""
    digest = hashlib.sha256(_cpu_description().encode()).hexdigest()[:12]
    return str(Path(root) / f"{platform.machine()}-{digest}")


def train(config: TrainConfig, resume: bool = False, progress_fn: ProgressFn | None = None):
    """Train in ``config.run.out`` (a new run, or with ``resume`` the run there) and return
    ``(make_policy, params, history)``; ``interrupted(config, history)`` tells a stop on
    SIGINT/SIGTERM (checkpoint saved) from a finished run. Nothing is written into a folder that
    another training holds or that is neither empty nor a run folder (``RunFolderError``)."""
    run_dir = Path(config.run.out)
    ckpt_path = run_dir / checkpoint.CHECKPOINT_NAME
    if resume and config.algo != "shac":
        raise ValueError(f"{run_dir}: only SHAC runs resume; Brax's PPO restarts its optimizer and environments")
    if not resume:
        _check_new_run_folder(run_dir)
    with _run_lock(run_dir, create=not resume):
        if not resume and ckpt_path.exists():
            raise FileExistsError(f"{run_dir} already holds a run; use --resume {run_dir} or choose another --out")
        jax.config.update("jax_compilation_cache_dir", host_compile_cache(config.run.compile_cache))
        if not resume:
            (run_dir / "config.json").write_text(json.dumps(config.to_dict(), indent=2))

        with _StopRequested() as stop:
            log = RunLog(run_dir, config, stop, progress_fn, resume)
            try:
                if config.algo == "shac":
                    make_policy, params, stopped = _train_shac(config, log, ckpt_path, resume)
                else:
                    make_policy, params, stopped = ppo.train_ppo(config, log, ckpt_path)
            finally:
                log.close()
        if stopped:
            print(f"stopped at iteration {log.history[-1]['iteration']}; checkpoint in {ckpt_path}", flush=True)
        else:
            _finish(run_dir, config, log.history, log.evaluation, log.first_iteration_s)
    return make_policy, params, log.history


def interrupted(config: TrainConfig, history: list[dict]) -> bool:
    """Whether ``train`` returned ``history`` after a SIGINT/SIGTERM stopped it before its last
    iteration (its checkpoint resumes it), rather than at the end of the run."""
    return bool(history) and history[-1]["iteration"] < config.iterations


def _is_run_folder(run_dir: Path) -> bool:
    """Whether ``run_dir`` holds a ``config.json`` written by ``train`` (a JSON object with its sections)."""
    try:
        saved = json.loads((run_dir / "config.json").read_text())
    except (OSError, ValueError):
        return False
    return isinstance(saved, dict) and {"task", "shac", "run"} <= saved.keys()


def _check_new_run_folder(run_dir: Path) -> None:
    """Refuse, before anything is written, a folder that a new run must not write into: a file,
    or a non-empty folder that is not a run folder (its own ``config.json`` would be overwritten)."""
    if not run_dir.exists():
        return
    if not run_dir.is_dir():
        raise RunFolderError(f"{run_dir} is a file, not a folder; choose another --out")
    if {p.name for p in run_dir.iterdir()} - {LOCK_NAME} and not _is_run_folder(run_dir):
        raise RunFolderError(
            f"{run_dir} is not empty and not a run folder (no config.json from smoothloco train); "
            "refusing to write into it: choose a new or empty --out"
        )


@contextlib.contextmanager
def _run_lock(run_dir: Path, create: bool):
    """Hold an exclusive lock on ``run_dir`` while the block runs, so a second training there is
    refused instead of mixing its files with this one's. ``flock`` on a file inside the folder:
    the kernel releases it when the process ends, however it ends (kill -9 included), so the
    file is left in place and a stale lock cannot exist. The holder's pid goes into the file for
    the refusal message. With ``create`` the folder is made first (a new run)."""
    try:
        if create:
            run_dir.mkdir(parents=True, exist_ok=True)
        fd = os.open(run_dir / LOCK_NAME, os.O_RDWR | os.O_CREAT, 0o644)
    except OSError as exc:
        raise RunFolderError(f"cannot use {run_dir} as a run folder: {exc.strerror or exc}") from exc
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 32, 0).decode(errors="replace").strip() or "unknown"
            raise RunFolderError(
                f"{run_dir} is in use by another training (pid {holder}); wait for it to end or choose another folder"
            ) from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        yield
    finally:
        os.close(fd)  # releases the lock


def _train_shac(config: TrainConfig, log: RunLog, ckpt_path: Path, resume: bool) -> tuple[Callable, tuple, bool]:
    c = config.shac
    task = VelocityTask(config.task)
    rand_fn = None
    if config.task.randomization.enabled:
        keys = jax.random.split(jax.random.PRNGKey(c.seed + 1), c.num_envs)
        rand_fn = functools.partial(randomize, rng=keys, config=config.task.randomization)
    algo = SHAC(make_env(task, c.num_envs, c.episode_length, rand_fn), c)
    make_policy = make_policy_factory(algo.actor)

    with _gc_paused():
        train_state, env_state = jax.jit(algo.init)(jax.random.PRNGKey(c.seed))
    if resume:
        train_state, env_state = checkpoint.load(ckpt_path, (train_state, env_state))
        print(f"resumed {ckpt_path} at iteration {int(train_state.iteration)}", flush=True)
    train_state = jax.device_put(train_state, replicated())
    env_state = shard_batch(env_state)
    update = jax.jit(algo.update, donate_argnums=(1,))

    first = int(train_state.iteration)
    for it in range(first, c.iterations):
        with _gc_paused() if it == first else contextlib.nullcontext():  # the call that compiles
            train_state, env_state, metrics = update(train_state, env_state)
        metrics = {k: float(v) for k, v in jax.device_get(metrics).items()}
        row = {**log.row(it + 1, int(train_state.env_steps)), **metrics}
        done = it + 1 == c.iterations
        if config.run.eval_every and ((it + 1) % config.run.eval_every == 0) or done:
            row.update(log.evaluate(make_policy, (train_state.normalizer, train_state.actor_params)))
        log.record(row, c.iterations)
        if (it + 1) % config.run.checkpoint_every == 0 or done or log.stop_requested:
            log.sync()  # the rows up to this checkpoint reach the disk before it does
            checkpoint.save(ckpt_path, (train_state, env_state))
        if log.stop_requested and not done:
            return make_policy, (train_state.normalizer, train_state.actor_params), True
    return make_policy, (train_state.normalizer, train_state.actor_params), False


class RunLog:
    """What a training loop reports into: timing (with evaluation time kept apart), the shared
    command-grid evaluation, metrics files, progress lines and the stop flag."""

    def __init__(
        self,
        run_dir: Path,
        config: TrainConfig,
        stop: _StopRequested,
        progress_fn: ProgressFn | None,
        resume: bool = False,
    ) -> None:
        self.config = config
        self.history: list[dict] = []
        self.evaluation: dict | None = None  # the latest, with its per-command rows
        self.first_iteration_s: float | None = None
        self._stop = stop
        self._progress_fn = progress_fn
        self._metrics = _MetricsLog(run_dir, resume)
        self._evaluate: Callable | None = None
        self._eval_s = 0.0
        self._start = time.perf_counter()

    @property
    def stop_requested(self) -> bool:
        return self._stop.requested

    def row(self, iteration: int, env_steps: int) -> dict:
        """The start of a metrics row: counters and both clocks. ``train_wall_s`` leaves out the
        time spent evaluating, so the algorithms' speeds compare whatever the evaluation schedule."""
        wall = time.perf_counter() - self._start
        self.first_iteration_s = self.first_iteration_s or wall
        return {"iteration": iteration, "env_steps": env_steps, "wall_s": wall, "train_wall_s": wall - self._eval_s}

    def evaluate(self, make_policy: Callable, params) -> dict:
        """The deterministic policy on the command grid, as ``eval/<metric>`` entries. The
        rollout compiles once per run (``make_policy`` is the same function every time)."""
        tic = time.perf_counter()
        if self._evaluate is None:
            policy_of = lambda p: lambda obs: make_policy(p, deterministic=True)(obs, None)[0]  # noqa: E731
            self._evaluate = command_evaluator(self.config.task, policy_of, seconds=self.config.run.eval_seconds)
        self.evaluation = self._evaluate(params)
        self._eval_s += time.perf_counter() - tic
        return {f"eval/{k}": v for k, v in self.evaluation.items() if k != "per_command"}

    def record(self, row: dict, iterations: int) -> None:
        self._metrics.write(row)
        self.history.append(row)
        _print_progress(row, self.history, iterations, self.config.algo)
        if self._progress_fn:
            self._progress_fn(row["iteration"], row)

    def sync(self) -> None:
        """Make the metrics rows recorded so far durable (fsync), e.g. before a checkpoint."""
        self._metrics.sync()

    def close(self) -> None:
        self._metrics.close()


# (metric, label, format) shown in the progress line when a row has it.
_PROGRESS_FIELDS = (
    ("reward_per_step", "reward/step", "+.4f"),
    ("lin_vel_error", "lin_err", ".3f"),
    ("yaw_rate_error", "yaw_err", ".3f"),
    ("actor_grad_norm", "|g|", ".2f"),
    ("skipped_updates", "skipped", ".0f"),
    ("training/policy_loss", "pi_loss", "+.4f"),
    ("training/v_loss", "v_loss", ".4f"),
    ("training/learning_rate", "lr", ".1e"),
)


def _print_progress(row: dict, history: list[dict], iterations: int, algo: str) -> None:
    first = history[0]  # its time includes compilation, so speeds are measured from it on
    done_here = row["iteration"] - first["iteration"]
    seconds = row["train_wall_s"] - first["train_wall_s"]
    steps_per_s = (row["env_steps"] - first["env_steps"]) / seconds if done_here else float("nan")
    if done_here:
        timing = f"ETA {seconds / done_here * (iterations - row['iteration']) / 60:.1f} min"
    else:  # nothing to extrapolate from yet: this row's time is mostly compilation
        timing = f"first iteration after {row['wall_s']:.0f} s (compilation included)"
    fields = " ".join(f"{label} {row[key]:{fmt}}" for key, label, fmt in _PROGRESS_FIELDS if key in row)
    extra = ""
    if "eval/lin_vel_error" in row:
        extra = (
            f" | eval return {row['eval/episode_return']:.2f} lin {row['eval/lin_vel_error']:.3f} "
            f"yaw {row['eval/yaw_rate_error']:.3f} falls {row['eval/fall_rate']:.2f}"
        )
    print(
        f"{algo} it {row['iteration']:4d}/{iterations} steps {row['env_steps']:>9,d} {steps_per_s:7.0f}/s {fields} "
        f"{timing}{extra}",
        flush=True,
    )


class _MetricsLog:
    """``metrics.csv``, one row per iteration, and the same scalars to TensorBoard.

    Rows are appended and flushed one at a time, never rewritten: a kill -9 can at most tear the
    last line, and an iteration costs the same at row 3,000 as at row 3 (rewriting the whole
    file every iteration had slowed a tiny run's iterations from 30 ms to 139 ms). A new run
    starts the file afresh; a resumed one keeps the rows before its first new iteration, so
    the rows written after its checkpoint and a torn last line go. The file is replaced as a
    whole (atomically) only then and when a row brings a new column (the first evaluation)."""

    def __init__(self, run_dir: Path, resume: bool) -> None:
        from tensorboardX import SummaryWriter

        self._resume = resume
        self.csv_path = run_dir / "metrics.csv"
        self.writer = SummaryWriter(str(run_dir / "tensorboard"))
        self._fields: list[str] = []
        self._file: io.TextIOWrapper | None = None

    def write(self, row: dict) -> None:
        if self._file is None:
            kept = _metrics_rows_before(self.csv_path, row["iteration"]) if self._resume else []
            self._replace(list(dict.fromkeys(k for r in (*kept, row) for k in r)), kept)
        elif not row.keys() <= set(self._fields):
            self._file.close()
            self._file = None
            _, rows = _read_metrics(self.csv_path)
            self._replace(list(dict.fromkeys([*self._fields, *row])), rows)
        csv.DictWriter(self._file, self._fields).writerow(row)
        self._file.flush()  # in the kernel's hands: survives the process being killed
        for key, value in row.items():
            if key not in ("iteration", "env_steps"):
                self.writer.add_scalar(key, value, row["env_steps"])

    def _replace(self, fields: list[str], rows: list[dict]) -> None:
        """Write ``fields`` and ``rows`` to a temporary file, fsync, rename it over ``metrics.csv``
        and keep it open for appending: a kill at any point leaves the old file or the new one."""
        tmp = self.csv_path.with_name(self.csv_path.name + ".tmp")
        with tmp.open("w", newline="") as f:
            out = csv.DictWriter(f, fields)
            out.writeheader()
            out.writerows(rows)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, self.csv_path)
        self._fields = fields
        self._file = self.csv_path.open("a", newline="")

    def sync(self) -> None:
        """fsync the rows written so far (``flush`` alone survives a kill, not a power cut)."""
        if self._file is not None:
            self._file.flush()
            os.fsync(self._file.fileno())

    def close(self) -> None:
        if self._file is not None:
            self.sync()
            self._file.close()
        self.writer.close()


def _read_metrics(path: Path) -> tuple[list[str], list[dict]]:
    """The header and the complete rows of a ``metrics.csv`` (none if there is no file). A last
    line without its newline is a row torn by a kill and is left out; any other row that does
    not fit the header is a ``RunFolderError`` naming the file and line."""
    if not path.exists():
        return [], []
    with path.open(newline="") as f:
        text = f.read()
    reader = csv.DictReader(io.StringIO(text[: text.rfind("\n") + 1], newline=""))
    rows = list(reader)
    for line, r in enumerate(rows, start=2):
        if None in r or None in r.values() or "iteration" not in r:
            raise RunFolderError(f"{path} line {line} is corrupt (does not match the header); move it away to continue")
    return list(reader.fieldnames or []), rows


def _metrics_rows_before(path: Path, iteration: int) -> list[dict]:
    """The rows of ``path`` for iterations before ``iteration`` (where a resumed run continues)."""
    _, rows = _read_metrics(path)
    try:
        return [r for r in rows if int(r["iteration"]) < iteration]
    except ValueError as exc:
        raise RunFolderError(f"{path} is corrupt: {exc}; move it away to continue") from exc


def _finish(run_dir: Path, config: TrainConfig, history: list[dict], evaluation: dict, first_iteration_s: float) -> None:
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
    (run_dir / "summary.json").write_text(json.dumps(summary, indent=2))
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
    lines += [
        f"| {tuple(p['command'])} | {p['lin_vel_error']:.3f} | {p['yaw_rate_error']:.3f} | {p['fell']} "
        f"| {p['foot_air_time']:.2f} | {100 * p['foot_clearance']:.1f} | {p['steps_per_second']:.2f} "
        f"| {p['foot_slip']:.3f} | {p['cost_of_transport']:.2f} | {p['base_speed']:.3f} |"
        for p in evaluation["per_command"]
    ]
    (run_dir / "summary.md").write_text("\n".join(lines) + "\n")
    _plot(run_dir, history)
    if config.run.deploy:
        from smoothloco.deploy.cli import deploy_after_training

        deploy_after_training(run_dir)


def _plot(run_dir: Path, history: list[dict]) -> None:
    """Training curves (where the algorithm reports them: SHAC does, Brax's PPO does not) and
    the evaluations, against environment steps and wall-clock."""
    plt = plotting.pyplot()

    trained = [h for h in history if "reward_per_step" in h]
    evals = [h for h in history if "eval/lin_vel_error" in h]
    fig, axes = plt.subplots(2, 2, figsize=(10, 7), squeeze=False)
    axes_x = [("env_steps", 1, "environment steps"), ("wall_s", 60, "wall-clock (min)")]
    for col, (key, scale, label) in enumerate(axes_x):
        x = lambda rows: [h[key] / scale for h in rows]  # noqa: E731
        top, bottom = axes[0, col], axes[1, col]
        top.plot(x(evals), [h["eval/episode_return"] for h in evals], "o-", color="C2", label="eval return")
        top.set_ylabel("evaluation return")
        if trained:
            twin = top.twinx()
            twin.plot(x(trained), [h["reward_per_step"] for h in trained], color="C0", alpha=0.6)
            twin.set_ylabel("training reward per control step", color="C0")
            bottom.plot(x(trained), [h["lin_vel_error"] for h in trained], label="linear (m/s)")
            bottom.plot(x(trained), [h["yaw_rate_error"] for h in trained], label="yaw (rad/s)")
        bottom.plot(x(evals), [h["eval/lin_vel_error"] for h in evals], "o-", label="eval linear")
        bottom.plot(x(evals), [h["eval/yaw_rate_error"] for h in evals], "s-", label="eval yaw")
        bottom.set_ylabel("tracking error")
        bottom.set_xlabel(label)
        bottom.legend()
    plotting.save(fig, run_dir / "training.png", dpi=100)
