"""A training run as data: its configuration (``TrainConfig``, saved as ``config.json``) and the
run read back from its folder (``load_run``: the policy of its checkpoint, SHAC or PPO).

This is the layer that deploy and evaluate build on: reading a run needs the task, the
networks and the checkpoint format, never the training loop (``runner``).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Callable

import jax
import numpy as np
from brax.training.acme import running_statistics, specs
from brax.training.agents.ppo import networks as ppo_networks
from flax import serialization

from smoothloco.sim.terrain import StairsCourse
from smoothloco.tasks import VelocityTask, VelocityTaskConfig
from smoothloco.train import checkpoint
from smoothloco.train.networks import Actor, actor_obs, make_policy_factory
from smoothloco.train.ppo import PPOConfig, network_factory
from smoothloco.train.run_folder import CONFIG_NAME
from smoothloco.train.shac import SHACConfig
from smoothloco.validation import read_text, require_finite, setting, shown, with_settings

ALGORITHMS = ("shac", "ppo")
# What a resume may change: how long the run trains and how often it evaluates and checkpoints.
RESUME_SETTINGS = (("shac", "iterations"), ("run", "eval_every"), ("run", "checkpoint_every"))
# The training-time evaluation (``evaluate.grid.command_evaluator``'s default) scores a command
# only after it has held this long, so a shorter evaluation would have nothing to score.
EVAL_SETTLE_SECONDS = 1.0
MAX_EVAL_SECONDS = 3600.0  # per command: beyond it a step count stops being a number to loop over


@dataclass(frozen=True)
class RunConfig:
    out: str = setting("runs/default", "run folder (config, metrics, checkpoints, plots, summary)")
    # iterations (SHAC; PPO saves at every evaluation, when Brax hands out parameters)
    checkpoint_every: int = setting(20, "iterations between checkpoints (may change with --resume)")
    eval_every: int = setting(
        50, "iterations between evaluations on the fixed command grid (0 = only at the end; may change with --resume)"
    )
    eval_seconds: float = setting(5.0, "seconds per command of each evaluation; longer than its 1 s settling time")
    compile_cache: str = setting(
        ".jax_cache", "persistent compilation cache; each host CPU gets its own folder inside (empty: no cache)"
    )
    # `smoothloco train` exports the policy and renders a short MuJoCo video once the run has
    # finished (deploy.play.deploy_after_training); runner.train itself never deploys.
    deploy: bool = setting(True, "once the run has finished, export the policy (ONNX) and render a short MuJoCo video")
    # SHAC stops (checkpoint kept, exit status 3) when this many iterations in a row skipped an
    # update as non-finite: the simulation or the networks diverged and will not recover alone.
    max_skipped_iterations: int = setting(
        10,
        "SHAC stops with exit status 3 (checkpoint kept) after this many iterations in a row whose update was skipped "
        "as non-finite",
    )

    def __post_init__(self) -> None:
        require_finite("run", self)
        if self.max_skipped_iterations < 1:
            raise ValueError(f"run.max_skipped_iterations must be >= 1, got {self.max_skipped_iterations}")
        if not str(self.out).strip():  # an empty path would be the working directory
            raise ValueError("run.out must name a folder, got an empty string")
        if self.checkpoint_every < 1:
            raise ValueError(f"run.checkpoint_every must be >= 1, got {self.checkpoint_every}")
        if self.eval_every < 0:
            raise ValueError(f"run.eval_every must be >= 0 (0 = only at the end), got {self.eval_every}")
        if not EVAL_SETTLE_SECONDS < self.eval_seconds <= MAX_EVAL_SECONDS:
            raise ValueError(
                f"run.eval_seconds must be longer than the evaluation's {EVAL_SETTLE_SECONDS:g} s settling time and at "
                f"most {MAX_EVAL_SECONDS:g} s (per command), got {self.eval_seconds}"
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
        if self.algo == "ppo" and not self.ppo.full_reset and isinstance(self.task.ground, StairsCourse):
            # Brax's auto-reset puts an ended episode back where it began: no level would change
            raise ValueError(
                f"task.terrain {self.task.terrain!r} is a curriculum, which moves each new episode to the level the "
                "last one earned: train PPO on it with --ppo.full_reset true"
            )
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
    def final_progress(self) -> float:
        """The training progress the policy ended with (``VelocityTask.with_training_progress``):
        1 for SHAC, 0 for Brax's PPO, whose loop never reports its progress to the task."""
        return 1.0 if self.algo == "shac" else 0.0

    @property
    def final_sharpness(self) -> float:
        """The smooth contact's sharpness (1/m) the policy finally trained with: the end of
        ``task.sharpness`` for SHAC, its start for PPO."""
        start, end = self.task.sharpness
        return end if self.final_progress == 1.0 else start

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
    def from_dict(cls, saved: object) -> "TrainConfig":
        """Inverse of ``to_dict``, each value parsed as its field's type (``with_settings``):
        a value of the wrong type or an unknown name at any level is a one-line ``ValueError``
        naming the field; the configs then validate the ranges."""
        if not isinstance(saved, Mapping):
            raise ValueError(f"expected a JSON object of settings, got {shown(saved)}")
        missing = [key for key in ("task", "shac", "run") if key not in saved]
        if missing:
            raise ValueError(f"missing section(s) {', '.join(missing)}")
        for key in ("task", "shac"):
            if not isinstance(saved[key], Mapping):
                raise ValueError(f"{key}: expected a table of settings, got {shown(saved[key])}")
        task = dict(saved["task"])
        # Runs from before the trot generator or the velocity trim have no "gait" or
        # "velocity_trim" section: they ran without one.
        task.setdefault("gait", {"frequency": 0.0})
        task.setdefault("velocity_trim", {"rate": 0.0})
        # Runs from before the hidden standing clock observed it at every command; runs from
        # before the recovery steps stood at a zero command whatever their speed.
        if isinstance(task["gait"], Mapping):
            task["gait"] = {"hide_clock_when_standing": False, "recovery_speed": 0.0, **task["gait"]}
        task["terrain"] = _terrain_of(task)
        shac = dict(saved["shac"])
        schedule = shac.pop("sharpness_schedule", ())
        if "sharpness" in task:
            task["sharpness"] = _sharpness_of(task["sharpness"], schedule, saved.get("algo"))
        # Runs from before PPO existed have no "algo" and "ppo". The reward weights are the
        # run's own: a term it does not list was not part of its reward.
        return with_settings(cls(), {**saved, "task": task, "shac": shac}, "", merge=False)


def _terrain_of(task: dict) -> object:
    """``task.terrain`` of a saved run's task table, whose keys it removes. Runs from before the
    setting named their ground by ``hills_height`` and ``hills_wavelength`` (0: flat); runs from
    before the hills trained on flat ground."""
    height, wavelength = task.pop("hills_height", None), task.pop("hills_wavelength", 1.3)
    if "terrain" in task:
        return task["terrain"]
    if height is None or height == 0:
        return "flat"
    return f"hills:height={height},wavelength={wavelength}"


def _sharpness_of(task_sharpness: object, schedule: object, algo: object) -> object:
    """``task.sharpness`` (start, end) of a saved run. Runs that recorded one number there
    trained at it, unless a SHAC run had ``shac.sharpness_schedule`` (start, end), which took
    over; runs from before the schedule have none."""
    if not isinstance(task_sharpness, (int, float)) or isinstance(task_sharpness, bool):
        return task_sharpness  # today's (start, end), or a wrong value for with_settings to name
    if algo in (None, "shac") and isinstance(schedule, (list, tuple)) and len(schedule) == 2:
        return list(schedule)
    return [task_sharpness, task_sharpness]


def read_config(config_file: Path) -> TrainConfig:
    """The ``TrainConfig`` saved in ``config_file``; ValueError (one line, naming the file and
    the field) if it is missing or not a readable run configuration."""
    if not config_file.is_file():
        raise ValueError(f"no {config_file.name} at {config_file.parent} (not a run folder)")
    text = read_text(config_file, "run configuration")
    try:
        saved = json.loads(text)
    except ValueError as exc:  # JSONDecodeError: its message holds the line and column only
        raise ValueError(f"{config_file} is not a readable run configuration: not valid JSON: {exc}") from None
    try:
        return TrainConfig.from_dict(saved)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"{config_file} is not a readable run configuration: {exc}") from None


def check_same_settings(run_dir: Path, config: TrainConfig) -> None:
    """Before a run in ``run_dir`` is reused or continued: a one-line ``ValueError`` naming the
    first setting in which it differs from ``config`` (the folder's own path and the settings of
    the algorithm it does not train aside: a run may have been moved, and a PPO run is the same
    whatever SHAC's defaults are), or when its ``config.json`` is not a readable run configuration."""
    saved = read_config(run_dir / CONFIG_NAME)
    here = replace(saved, run=replace(saved.run, out=config.run.out)).to_dict()
    if saved.task.ground == config.task.ground:  # one ground written two ways (a default spelled out)
        here["task"]["terrain"] = config.task.terrain
    asked = config.to_dict()
    if saved.algo == config.algo:
        for unused in set(ALGORITHMS) - {config.algo}:
            here.pop(unused, None)
            asked.pop(unused, None)
    differences = _differences(here, asked)
    if differences:
        key, there, asked = differences[0]
        raise ValueError(
            f"{run_dir} holds a run with other settings ({key} {shown(there)} there, {shown(asked)} asked, "
            f"{len(differences)} setting(s) in all): give this experiment another --out"
        )


def _differences(here: dict, asked: dict, prefix: str = "") -> list[tuple[str, object, object]]:
    out = []
    for key in dict.fromkeys([*here, *asked]):
        a, b = here.get(key), asked.get(key)
        if isinstance(a, dict) and isinstance(b, dict):
            out += _differences(a, b, f"{prefix}{key}.")
        elif a != b:
            out.append((f"{prefix}{key}", a, b))
    return out


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
    building the training environment; a clear error if the folder is not a run or the
    checkpoint's arrays are not those ``config.json`` builds."""
    run_dir = Path(run_dir)
    config_file, ckpt_path = run_dir / CONFIG_NAME, run_dir / checkpoint.CHECKPOINT_NAME
    if not config_file.is_file():
        raise checkpoint.CheckpointError(f"{run_dir} is not a run folder: no config.json")
    try:
        config = read_config(config_file)
    except ValueError as exc:
        raise checkpoint.CheckpointError(str(exc)) from exc
    raw = checkpoint.load_raw(ckpt_path)
    try:
        load = _load_shac_policy if config.algo == "shac" else _load_ppo_policy
        make_policy, params, iteration, env_steps = load(config, raw, ckpt_path)
    except (KeyError, ValueError, TypeError) as exc:
        raise checkpoint.CheckpointError(f"checkpoint {ckpt_path} does not match {config_file}: {exc}") from exc
    return LoadedRun(run_dir, config, make_policy, params, iteration, env_steps)


def _load_shac_policy(config: TrainConfig, raw: dict, ckpt_path: Path) -> tuple[Callable, tuple, int, int]:
    c = config.shac
    task = VelocityTask(config.task)
    actor = Actor(c.actor_hidden, task.action_size, c.init_log_std)
    size = task.observation_size
    obs = (
        {k: np.zeros(v, np.float32) for k, v in size.items()} if isinstance(size, dict) else np.zeros(size, np.float32)
    )
    actor_template = actor.init(jax.random.PRNGKey(0), actor_obs(obs))
    normalizer_template = running_statistics.init_state(jax.tree.map(lambda x: specs.Array(x.shape, np.float32), obs))
    train_state = raw["0"]  # the checkpoint is (train_state, env_state)
    for key, template in (("normalizer", normalizer_template), ("actor_params", actor_template)):
        checkpoint.check_matches(ckpt_path, train_state[key], template, where=f"train_state/{key}", what=CONFIG_NAME)
    params = (
        serialization.from_state_dict(normalizer_template, train_state["normalizer"]),
        serialization.from_state_dict(actor_template, train_state["actor_params"]),
    )
    return make_policy_factory(actor), params, int(train_state["iteration"]), int(train_state["env_steps"])


def _load_ppo_policy(config: TrainConfig, raw: dict, ckpt_path: Path) -> tuple[Callable, tuple, int, int]:
    """From a PPO checkpoint (``ckpt_path``) read with ``checkpoint.load_raw``: Brax's
    ``make_policy``, ``(normalizer, policy params)``, iteration and env steps. KeyError/ValueError
    or ``checkpoint.CheckpointMismatch`` if it does not match the config."""
    c = config.ppo
    task = VelocityTask(config.task)
    size = task.observation_size  # an int, or a dict of shapes with a privileged critic
    if isinstance(size, dict):
        obs_spec = {k: specs.Array(v, np.float32) for k, v in size.items()}
    else:
        obs_spec = specs.Array((size,), np.float32)
    normalize = running_statistics.normalize if c.normalize_observations else (lambda x, y: x)
    networks = network_factory(c)(size, task.action_size, preprocess_observations_fn=normalize)
    make_policy = ppo_networks.make_inference_fn(networks)
    policy_template = networks.policy_network.init(jax.random.PRNGKey(0))
    normalizer_template = running_statistics.init_state(obs_spec)
    for key, template in (("normalizer", normalizer_template), ("policy_params", policy_template)):
        checkpoint.check_matches(ckpt_path, raw[key], template, where=key, what=CONFIG_NAME)
    params = (
        serialization.from_state_dict(normalizer_template, raw["normalizer"]),
        serialization.from_state_dict(policy_template, raw["policy_params"]),
    )
    return make_policy, params, int(raw["iteration"]), int(raw["env_steps"])
