"""A training run: run folder, live progress, metrics (CSV + TensorBoard), checkpoints,
periodic evaluation, plots and a summary. Returns ``(make_policy, params, metrics)``."""

from __future__ import annotations

import csv
import functools
import json
import signal
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import jax
import numpy as np

from smoothloco.evaluate import evaluate_commands
from smoothloco.parallel import replicated, shard_batch
from smoothloco.tasks import VelocityTask, VelocityTaskConfig, randomize
from smoothloco.train import checkpoint
from brax.training.acme import running_statistics, specs

from smoothloco.train.networks import actor_obs as actor_obs_of
from smoothloco.train.networks import make_policy_factory
from smoothloco.train.shac import SHAC, SHACConfig, make_env

ProgressFn = Callable[[int, dict], None]


@dataclass(frozen=True)
class RunConfig:
    out: str = "runs/default"
    checkpoint_every: int = 20  # iterations
    eval_every: int = 50  # iterations; 0 = only at the end
    eval_seconds: float = 5.0
    compile_cache: str = ".jax_cache"


@dataclass(frozen=True)
class TrainConfig:
    task: VelocityTaskConfig = field(default_factory=VelocityTaskConfig)
    shac: SHACConfig = field(default_factory=SHACConfig)
    run: RunConfig = field(default_factory=RunConfig)

    def to_dict(self) -> dict:
        return {"task": self.task.to_dict(), "shac": self.shac.to_dict(), "run": self.run.__dict__}

    @classmethod
    def from_dict(cls, saved: dict) -> "TrainConfig":
        """Inverse of ``to_dict`` (JSON turns tuples into lists; the configs validate again)."""
        from smoothloco.tasks.config import CommandConfig, PushConfig, RandomizationConfig

        untuple = lambda d: {k: tuple(v) if isinstance(v, list) else v for k, v in d.items()}  # noqa: E731
        task = untuple(saved["task"])
        for key, sub in (("commands", CommandConfig), ("pushes", PushConfig), ("randomization", RandomizationConfig)):
            task[key] = sub(**untuple(saved["task"][key]))
        return cls(
            task=VelocityTaskConfig(**task), shac=SHACConfig(**untuple(saved["shac"])), run=RunConfig(**saved["run"])
        )


@dataclass(frozen=True)
class LoadedRun:
    """A finished or interrupted run, read back from its folder: what export, play and eval need."""

    run_dir: Path
    config: TrainConfig
    make_policy: Callable
    params: tuple  # (observation normalizer, actor parameters)
    iteration: int
    env_steps: int

    def policy(self, deterministic: bool = True) -> Callable:
        return self.make_policy(self.params, deterministic=deterministic)


def load_run(run_dir: str | Path) -> LoadedRun:
    """Read ``config.json`` and the policy part of ``checkpoint.msgpack`` without building the
    training environment; a clear error if the folder is not a run."""
    from flax import serialization

    from smoothloco.train.networks import Actor

    run_dir = Path(run_dir)
    config_file, ckpt_path = run_dir / "config.json", run_dir / checkpoint.CHECKPOINT_NAME
    if not config_file.is_file():
        raise checkpoint.CheckpointError(f"{run_dir} is not a run folder: no config.json")
    config = TrainConfig.from_dict(json.loads(config_file.read_text()))
    c = config.shac
    task = VelocityTask(config.task)
    actor = Actor(c.actor_hidden, task.action_size, c.init_log_std)
    size = task.observation_size
    obs = {k: np.zeros(v, np.float32) for k, v in size.items()} if isinstance(size, dict) else np.zeros(size, np.float32)
    actor_template = actor.init(jax.random.PRNGKey(0), actor_obs_of(obs))
    normalizer_template = running_statistics.init_state(
        jax.tree.map(lambda x: specs.Array(x.shape, np.float32), obs)
    )
    raw = checkpoint.load_raw(ckpt_path)
    try:
        train_state = raw["0"]
        params = (
            serialization.from_state_dict(normalizer_template, train_state["normalizer"]),
            serialization.from_state_dict(actor_template, train_state["actor_params"]),
        )
        iteration, env_steps = int(train_state["iteration"]), int(train_state["env_steps"])
    except (KeyError, ValueError, TypeError) as exc:
        raise checkpoint.CheckpointError(f"checkpoint {ckpt_path} does not match {config_file}: {exc}") from exc
    return LoadedRun(run_dir, config, make_policy_factory(actor), params, iteration, env_steps)


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


def train(config: TrainConfig, resume: bool = False, progress_fn: ProgressFn | None = None):
    run_dir = Path(config.run.out)
    ckpt_path = run_dir / checkpoint.CHECKPOINT_NAME
    if not resume and ckpt_path.exists():
        raise FileExistsError(f"{run_dir} already holds a run; use --resume {run_dir} or choose another --out")
    jax.config.update("jax_compilation_cache_dir", config.run.compile_cache)

    c = config.shac
    task = VelocityTask(config.task)
    rand_fn = None
    if config.task.randomization.enabled:
        keys = jax.random.split(jax.random.PRNGKey(c.seed + 1), c.num_envs)
        rand_fn = functools.partial(randomize, rng=keys, config=config.task.randomization)
    algo = SHAC(make_env(task, c.num_envs, c.episode_length, rand_fn), c)
    make_policy = make_policy_factory(algo.actor)

    start = time.perf_counter()
    train_state, env_state = jax.jit(algo.init)(jax.random.PRNGKey(c.seed))
    if resume:
        train_state, env_state = checkpoint.load(ckpt_path, (train_state, env_state))
        print(f"resumed {ckpt_path} at iteration {int(train_state.iteration)}", flush=True)
    else:
        run_dir.mkdir(parents=True, exist_ok=True)
        (run_dir / "config.json").write_text(json.dumps(config.to_dict(), indent=2))
    train_state = jax.device_put(train_state, replicated())
    env_state = shard_batch(env_state)
    update = jax.jit(algo.update, donate_argnums=(1,))

    log = _MetricsLog(run_dir)
    history: list[dict] = []
    first_iteration_s = None
    start_iteration = int(train_state.iteration)
    with _StopRequested() as stop:
        for it in range(start_iteration, c.iterations):
            train_state, env_state, metrics = update(train_state, env_state)
            metrics = {k: float(v) for k, v in jax.device_get(metrics).items()}
            now = time.perf_counter() - start
            first_iteration_s = first_iteration_s or now
            row = {"iteration": it + 1, "env_steps": int(train_state.env_steps), "wall_s": now, **metrics}
            done = it + 1 == c.iterations
            if config.run.eval_every and ((it + 1) % config.run.eval_every == 0) or done:
                policy = make_policy((train_state.normalizer, train_state.actor_params), deterministic=True)
                evaluation = evaluate_commands(config.task, lambda o: policy(o, None)[0], seconds=config.run.eval_seconds)
                row.update({f"eval/{k}": v for k, v in evaluation.items() if k != "per_command"})
            log.write(row)
            history.append(row)
            _print_progress(row, it + 1 - start_iteration, c, now, first_iteration_s)
            if progress_fn:
                progress_fn(it + 1, row)
            if (it + 1) % config.run.checkpoint_every == 0 or done or stop.requested:
                checkpoint.save(ckpt_path, (train_state, env_state))
            if stop.requested:
                print(f"stopped at iteration {it + 1}; resume with --resume {run_dir}", flush=True)
                break
    log.close()
    params = (train_state.normalizer, train_state.actor_params)
    if not stop.requested:
        _finish(run_dir, config, history, evaluation, first_iteration_s)
    return make_policy, params, history


def _print_progress(row: dict, done_here: int, c: SHACConfig, elapsed: float, first: float) -> None:
    per_iteration = (elapsed - first) / max(done_here - 1, 1)
    eta = per_iteration * (c.iterations - row["iteration"])
    steps_per_s = (done_here - 1) * c.num_envs * c.horizon / max(elapsed - first, 1e-9)
    extra = ""
    if "eval/lin_vel_error" in row:
        extra = f" | eval lin {row['eval/lin_vel_error']:.3f} yaw {row['eval/yaw_rate_error']:.3f} falls {row['eval/fall_rate']:.2f}"
    print(
        f"it {row['iteration']:4d}/{c.iterations} steps {row['env_steps']:>9,d} {steps_per_s:7.0f}/s "
        f"reward/step {row['reward_per_step']:+.4f} lin_err {row['lin_vel_error']:.3f} yaw_err {row['yaw_rate_error']:.3f} "
        f"|g| {row['actor_grad_norm']:.2f} skipped {int(row['skipped_updates'])} ETA {eta / 60:.1f} min{extra}",
        flush=True,
    )


class _MetricsLog:
    def __init__(self, run_dir: Path) -> None:
        from tensorboardX import SummaryWriter

        self.csv_path = run_dir / "metrics.csv"
        self.writer = SummaryWriter(str(run_dir / "tensorboard"))
        self.rows: list[dict] = []
        if self.csv_path.exists():
            with self.csv_path.open() as f:
                self.rows = list(csv.DictReader(f))

    def write(self, row: dict) -> None:
        self.rows = [r for r in self.rows if int(r["iteration"]) < row["iteration"]] + [row]
        fields = list(dict.fromkeys(k for r in self.rows for k in r))
        with self.csv_path.open("w", newline="") as f:
            out = csv.DictWriter(f, fields)
            out.writeheader()
            out.writerows(self.rows)
        for key, value in row.items():
            if key not in ("iteration", "env_steps"):
                self.writer.add_scalar(key, value, row["env_steps"])

    def close(self) -> None:
        self.writer.close()


def _finish(run_dir: Path, config: TrainConfig, history: list[dict], evaluation: dict, first_iteration_s: float) -> None:
    last = history[-1]
    summary = {
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
        f"SHAC on `{config.task.contact}` contact, {last['env_steps']:,} environment steps in {last['wall_s'] / 60:.1f} min "
        f"(first iteration after {first_iteration_s:.0f} s).",
        "",
        "| metric | value |",
        "|---|---|",
        f"| linear-velocity tracking error | {evaluation['lin_vel_error']:.3f} m/s |",
        f"| yaw-rate tracking error | {evaluation['yaw_rate_error']:.3f} rad/s |",
        f"| fall rate (evaluation grid) | {evaluation['fall_rate']:.2f} |",
        "",
        "| command (vx, vy, yaw) | lin err | yaw err | fell |",
        "|---|---|---|---|",
    ]
    lines += [
        f"| {tuple(p['command'])} | {p['lin_vel_error']:.3f} | {p['yaw_rate_error']:.3f} | {p['fell']} |"
        for p in evaluation["per_command"]
    ]
    (run_dir / "summary.md").write_text("\n".join(lines) + "\n")
    _plot(run_dir, history)
    from smoothloco.deploy.cli import deploy_after_training

    deploy_after_training(run_dir)


def _plot(run_dir: Path, history: list[dict]) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    steps = np.array([h["env_steps"] for h in history])
    wall = np.array([h["wall_s"] for h in history])
    fig, axes = plt.subplots(2, 2, figsize=(10, 7))
    for col, (x, label) in enumerate([(steps, "environment steps"), (wall / 60, "wall-clock (min)")]):
        axes[0, col].plot(x, [h["reward_per_step"] for h in history])
        axes[0, col].set_ylabel("reward per control step")
        axes[1, col].plot(x, [h["lin_vel_error"] for h in history], label="linear (m/s)")
        axes[1, col].plot(x, [h["yaw_rate_error"] for h in history], label="yaw (rad/s)")
        evals = [h for h in history if "eval/lin_vel_error" in h]
        if evals:
            ex = [h["env_steps"] if col == 0 else h["wall_s"] / 60 for h in evals]
            axes[1, col].plot(ex, [h["eval/lin_vel_error"] for h in evals], "o-", label="eval linear")
            axes[1, col].plot(ex, [h["eval/yaw_rate_error"] for h in evals], "s-", label="eval yaw")
        axes[1, col].set_ylabel("tracking error")
        axes[1, col].set_xlabel(label)
        axes[1, col].legend()
    fig.tight_layout()
    fig.savefig(run_dir / "training.png", dpi=100)
    plt.close(fig)
