"""A training run, SHAC or PPO: live progress, metrics, checkpoints, periodic evaluation, plots
and a summary, in a run folder (``run_folder``: its lock, ``config.json``, ``metrics.csv``).
Returns ``(make_policy, params, metrics)``.

Both algorithms report into one ``RunLog``, so their folders, evaluations and timings are the
same kind of thing and can be compared (``smoothloco compare``). A resumed run continues the
previous sessions' rows and clocks, so its metrics, plots and summary cover the whole run.

The configuration (``TrainConfig``) and reading a finished run back (``load_run``) are in
``runs``; exporting the policy after training is the ``smoothloco train`` command's last step
(``deploy.play.deploy_after_training``), not this loop's."""

from __future__ import annotations

import contextlib
import functools
import gc
import hashlib
import json
import platform
import signal
import time
from pathlib import Path
from typing import Any, Callable

import jax
import numpy as np
from brax.training.agents.ppo import train as brax_ppo

from smoothloco import plotting
from smoothloco.evaluate.grid import command_evaluator
from smoothloco.parallel import replicated, shard_batch
from smoothloco.quiet import quiet_cache_loads
from smoothloco.tasks import VelocityTask, randomize
from smoothloco.train import checkpoint, ppo
from smoothloco.train.networks import make_policy_factory
from smoothloco.train.run_folder import (
    CONFIG_NAME,
    SUMMARY_NAME,
    MetricsLog,
    RunAlreadyFinished,
    RunFolderError,
    TrainingDiverged,
    check_new_run_folder,
    parsed_row,
    read_metrics,
    run_lock,
    write_config,
)
from smoothloco.train.runs import RESUME_SETTINGS, TrainConfig, load_run
from smoothloco.train.shac import SHAC, make_env

ProgressFn = Callable[[int, dict], None]


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
    try:
        saved = _check_resumable(run_dir, ckpt_path, config) if resume else None
    except RunAlreadyFinished:
        if not (run_dir / SUMMARY_NAME).is_file():  # killed after its last checkpoint, before its summary
            with run_lock(run_dir, create=False):
                write_missing_summary(run_dir)
        raise
    if not resume:
        check_new_run_folder(run_dir)
    with run_lock(run_dir, create=not resume):
        if not resume and ckpt_path.exists():
            raise FileExistsError(f"{run_dir} already holds a run; use --resume {run_dir} or choose another --out")
        jax.config.update("jax_compilation_cache_dir", host_compile_cache(config.run.compile_cache))
        quiet_cache_loads()  # XLA's false machine-mismatch lines on every cache hit (smoothloco.quiet)
        # A resume records what it changed once it trains (its checkpoint loaded, its first
        # update done), so a resume that fails leaves config.json as it was.
        record_changes = functools.partial(_record_resume_settings, run_dir, saved, config) if resume else None
        if not resume:
            write_config(run_dir, config.to_dict())
        # The first iteration compiles for about a minute without a line of output: say so,
        # and where the run writes.
        starting = f"resuming {config.algo} in" if resume else f"training {config.algo} into"
        print(f"{starting} {run_dir}", flush=True)
        print(_compiling_note(config.run.compile_cache), flush=True)

        with _StopRequested() as stop:
            log = RunLog(run_dir, config, stop, progress_fn, resume, on_first_row=record_changes)
            try:
                if config.algo == "shac":
                    make_policy, params, stopped = _train_shac(config, log, ckpt_path, resume)
                else:
                    make_policy, params, stopped = _train_ppo(config, log, ckpt_path)
            finally:
                log.close()
        if stopped:
            print(f"stopped at iteration {log.history[-1]['iteration']}; checkpoint in {ckpt_path}", flush=True)
        else:
            _finish(run_dir, config, log.run_history, log.evaluation, log.first_iteration_s)
    return make_policy, params, log.run_history


def _compiling_note(cache: str) -> str:
    """What the silent first iteration is doing, and how long it takes (measured on a 2-core
    CPU; an accelerator or a compilation cache hit is faster)."""
    cached = f"; cached in {cache} for later runs" if cache else ""
    return f"compiling the training step (about a minute on a 2-core CPU{cached}) ..."


def check_divides_over_devices(config: TrainConfig) -> None:
    """Environments are sharded over every local device; refuse a count that does not split
    evenly before anything is written."""
    devices = jax.local_device_count()
    flag, envs = ("ppo.num_envs", config.ppo.num_envs) if config.algo == "ppo" else ("shac.num_envs", config.shac.num_envs)
    if envs % devices:
        raise ValueError(f"--{flag} {envs} does not split evenly over the {devices} local devices; use a multiple of {devices}")


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
        train_state, env_state = _load_shac_checkpoint(ckpt_path, (train_state, env_state), c.num_envs)
        print(f"resumed {ckpt_path} at iteration {int(train_state.iteration)}", flush=True)
    train_state = jax.device_put(train_state, replicated())
    env_state = shard_batch(env_state)
    update = jax.jit(algo.update, donate_argnums=(1,))

    first = int(train_state.iteration)
    skipped_before, skipping = int(train_state.skipped_updates), 0
    for it in range(first, c.iterations):
        with _gc_paused() if it == first else contextlib.nullcontext():  # the call that compiles
            train_state, env_state, metrics = update(train_state, env_state)
        metrics = {k: float(v) for k, v in jax.device_get(metrics).items()}
        skipping = skipping + 1 if metrics["skipped_updates"] > skipped_before else 0
        skipped_before = metrics["skipped_updates"]
        row = {**log.row(it + 1, int(train_state.env_steps)), **metrics}
        done = it + 1 == c.iterations
        if config.run.eval_every and ((it + 1) % config.run.eval_every == 0) or done:
            params = (train_state.normalizer, train_state.actor_params)
            row.update(log.evaluate(make_policy, params, sharpness=metrics.get("sharpness")))
        log.record(row, c.iterations)
        if (it + 1) % config.run.checkpoint_every == 0 or done or log.stop_requested:
            log.sync()  # the rows up to this checkpoint reach the disk before it does
            checkpoint.save(ckpt_path, (train_state, env_state))
        if skipping >= config.run.max_skipped_iterations and not done:
            log.sync()
            checkpoint.save(ckpt_path, (train_state, env_state))  # skipped updates left the parameters finite
            raise TrainingDiverged(
                f"stopped at iteration {it + 1}: {skipping} iterations in a row skipped their update as non-finite "
                f"(gradients, parameters or observation statistics; {int(skipped_before)} skipped in all), so the "
                f"training diverged. {ckpt_path} holds the last finite parameters; lower the learning rates "
                "or the contact sharpness, or check the task settings"
            )
        if log.stop_requested and not done:
            return make_policy, (train_state.normalizer, train_state.actor_params), True
    return make_policy, (train_state.normalizer, train_state.actor_params), False


def _load_shac_checkpoint(path: Path, template: tuple, num_envs: int) -> tuple:
    """``(train_state, env_state)`` from ``path``; a checkpoint of another environment count is
    named as such (its environment arrays differ in their leading axis alone)."""
    try:
        return checkpoint.load(path, template, names=("train_state", "env_state"))
    except checkpoint.CheckpointMismatch as exc:
        counts = {
            d.saved[0]
            for d in exc.differences
            if d.path.startswith("env_state/") and d.saved and d.expected and d.saved[1:] == d.expected[1:]
        }
        if len(counts) == 1:
            raise checkpoint.CheckpointError(
                f"checkpoint {path} holds {counts.pop()} environments; the configuration asks shac.num_envs {num_envs}"
            ) from exc
        raise


class _Stop(Exception):
    """Raised from a Brax hook to leave ``ppo.train`` after a checkpoint (SIGINT/SIGTERM)."""


def _train_ppo(config: TrainConfig, log: RunLog, ckpt_path: Path) -> tuple[Callable, tuple, bool]:
    """Run Brax PPO, reporting each epoch to ``log``. Returns ``(make_policy, params, stopped)``
    with params = (normalizer, policy params, value params), Brax's order.

    Brax's ``ppo.train`` does the training; this translates ``PPOConfig`` into its arguments and
    reports through its ``policy_params_fn`` and ``progress_fn`` hooks, which Brax calls after
    every training epoch. One epoch is ``run.eval_every`` iterations, so PPO is evaluated and
    checkpointed on the SHAC schedule."""
    c = config.ppo
    epochs = c.iterations // (config.run.eval_every or c.iterations)  # TrainConfig checked it divides
    latest: dict[str, Any] = {}

    def policy_params_fn(step: int, make_policy: Callable, params: tuple) -> None:
        if step == 0:  # Brax also calls this before training; SHAC is not evaluated there either
            return
        row = log.row(step // c.steps_per_iteration, step)  # timed before the evaluation
        row.update(log.evaluate(make_policy, params))
        checkpoint.save(ckpt_path, _checkpoint_tree(params, row["iteration"], step))
        latest.update(make_policy=make_policy, params=params, row=row)

    def progress_fn(step: int, metrics: dict) -> None:
        row = latest["row"]
        row.update({k: float(v) for k, v in metrics.items() if k.startswith("training/") and k != "training/walltime"})
        log.record(row, c.iterations)
        if log.stop_requested and step < c.iterations * c.steps_per_iteration:
            raise _Stop

    try:
        make_policy, params, _ = brax_ppo.train(
            environment=VelocityTask(config.task),
            num_timesteps=c.iterations * c.steps_per_iteration,
            num_evals=epochs + 1,  # Brax: one call before training, then one per epoch
            run_evals=False,  # Brax's evaluator runs whole episodes; ours is the command grid
            num_eval_envs=2,  # built (its reset compiled) even when unused: keep it small
            episode_length=c.episode_length,
            num_envs=c.num_envs,
            batch_size=c.num_envs // c.num_minibatches,
            num_minibatches=c.num_minibatches,
            unroll_length=c.unroll_length,
            num_updates_per_batch=c.num_updates_per_batch,
            learning_rate=c.learning_rate,
            learning_rate_schedule="ADAPTIVE_KL" if c.adaptive_kl else None,
            desired_kl=c.desired_kl,
            entropy_cost=c.entropy_cost,
            discounting=c.discounting,
            gae_lambda=c.gae_lambda,
            clipping_epsilon=c.clipping_epsilon,
            clipping_epsilon_value=c.clipping_epsilon_value,
            vf_loss_coefficient=c.vf_loss_coefficient,
            max_grad_norm=c.max_grad_norm,
            normalize_observations=c.normalize_observations,
            network_factory=ppo.network_factory(c),
            randomization_fn=ppo.randomization_fn(config.task),
            policy_params_fn=policy_params_fn,
            progress_fn=progress_fn,
            seed=c.seed,
        )
    except _Stop:
        return latest["make_policy"], latest["params"], True
    return make_policy, params, False


def _checkpoint_tree(params: tuple, iteration: int, env_steps: int) -> dict:
    normalizer, policy, value = params
    return {
        "normalizer": normalizer,
        "policy_params": policy,
        "value_params": value,
        "iteration": np.int64(iteration),
        "env_steps": np.int64(env_steps),
    }


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
        on_first_row: Callable[[], None] | None = None,
    ) -> None:
        self.config = config
        self.history: list[dict] = []
        self.evaluation: dict | None = None  # the latest, with its per-command rows
        self.first_iteration_s: float | None = None
        self._stop = stop
        self._progress_fn = progress_fn
        self._metrics = MetricsLog(run_dir, resume)
        self._evaluate: Callable | None = None
        self._eval_s = 0.0
        self._start = time.perf_counter()
        # A resume's earlier sessions: their rows (kept in metrics.csv) and where their clocks
        # stopped, which this session's clocks continue from. Known at the first row.
        self.previous: list[dict] = []
        self._clock_offsets: tuple[float, float] | None = None
        self._on_first_row = on_first_row

    @property
    def stop_requested(self) -> bool:
        return self._stop.requested

    @property
    def run_history(self) -> list[dict]:
        """The whole run's rows: the earlier sessions' (read back from metrics.csv) and this one's."""
        return self.previous + self.history

    def row(self, iteration: int, env_steps: int) -> dict:
        """The start of a metrics row: counters and both clocks. ``train_wall_s`` leaves out the
        time spent evaluating, so the algorithms' speeds compare whatever the evaluation schedule.
        A resumed run's clocks continue from the last row its checkpoint kept."""
        session = time.perf_counter() - self._start
        self.first_iteration_s = self.first_iteration_s or session
        if self._clock_offsets is None:
            path = self._metrics.csv_path
            self.previous = [parsed_row(r, path) for r in self._metrics.kept_rows(iteration)]
            last = self.previous[-1] if self.previous else {}
            wall = last.get("wall_s", 0.0)
            self._clock_offsets = (wall, last.get("train_wall_s", wall))
            if self._on_first_row is not None:
                self._on_first_row()
        wall, train_wall = self._clock_offsets
        return {
            "iteration": iteration,
            "env_steps": env_steps,
            "wall_s": wall + session,
            "train_wall_s": train_wall + session - self._eval_s,
        }

    def evaluate(self, make_policy: Callable, params, sharpness: float | None = None) -> dict:
        """The deterministic policy on the command grid, as ``eval/<metric>`` entries, in smooth
        contact at ``sharpness`` (default: the task's). The rollout compiles once per run
        (``make_policy`` is the same function every time)."""
        tic = time.perf_counter()
        if self._evaluate is None:
            self._evaluate = grid_evaluator(self.config, make_policy)
        self.evaluation = self._evaluate(params, sharpness)
        self._eval_s += time.perf_counter() - tic
        return {f"eval/{k}": v for k, v in self.evaluation.items() if k != "per_command"}

    def record(self, row: dict, iterations: int) -> None:
        self._metrics.write(row)
        self.history.append(row)
        _print_progress(row, self.history, iterations, self.config.algo, self.first_iteration_s)
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


def _print_progress(row: dict, history: list[dict], iterations: int, algo: str, first_iteration_s: float) -> None:
    first = history[0]  # this session's first row: its time includes compilation, so speeds are measured from it on
    done_here = row["iteration"] - first["iteration"]
    seconds = row["train_wall_s"] - first["train_wall_s"]
    steps_per_s = (row["env_steps"] - first["env_steps"]) / seconds if done_here else float("nan")
    if done_here:
        timing = f"ETA {seconds / done_here * (iterations - row['iteration']) / 60:.1f} min"
    else:  # nothing to extrapolate from yet: this row's time is mostly compilation
        timing = f"first iteration after {first_iteration_s:.0f} s (compilation included)"
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


def grid_evaluator(config: TrainConfig, make_policy: Callable) -> Callable:
    """``evaluate(params, sharpness=None)``: the run's deterministic policy on the command grid,
    compiled once (``evaluate.grid.command_evaluator``)."""
    policy_of = lambda p: lambda obs: make_policy(p, deterministic=True)(obs, None)[0]  # noqa: E731
    return command_evaluator(config.task, policy_of, seconds=config.run.eval_seconds)


def write_missing_summary(run_dir: Path) -> None:
    """The summary, report and curves of a run that finished training but was stopped before
    writing them: the final policy evaluated again on the grid (at the schedule's final
    sharpness), the history read from ``metrics.csv``."""
    run = load_run(run_dir)
    history = [parsed_row(r, run_dir / "metrics.csv") for r in read_metrics(run_dir / "metrics.csv")[1]]
    if not history:
        raise RunFolderError(f"{run_dir} has a final checkpoint but no metrics.csv rows to summarize")
    evaluation = grid_evaluator(run.config, run.make_policy)(run.params, run.config.final_sharpness)
    print(f"{run_dir}: training had finished but its summary was missing; evaluated and wrote it", flush=True)
    _finish(run_dir, run.config, history, evaluation, history[0]["wall_s"])  # row 1's clock: the first iteration


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
    (run_dir / SUMMARY_NAME).write_text(json.dumps(summary, indent=2))
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
        lines += ["", "–: nothing to measure (cost of transport needs a walking command, air time and clearance a "
                      "completed swing)."]
    (run_dir / "summary.md").write_text("\n".join(lines) + "\n")
    _plot(run_dir, history)


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
