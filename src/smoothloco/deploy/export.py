"""Deployment artifacts of a run: ``controller.onnx``, ``policy.json`` (the contract),
``robot.xml`` and ``reference.npz``.

``controller.onnx`` is the controller step itself (``tasks.controller.step`` with the run's
network), converted by jax2onnx: the same function the task trains and evaluates through, so
the robot side holds no copy of the observation, memory, gait clock or trim. Converting the
JAX function, rather than writing the graph by hand, keeps one definition: any network the run's
policy function expresses (our SHAC actor, Brax's PPO network) and any change to the controller
export without an exporter to teach. Every export is checked against the JAX step over a
recorded MuJoCo trajectory (``reference.npz``, which the folder keeps for ports) before anything
is written.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import shutil
import tempfile
import warnings
from collections.abc import Callable, Iterator
from dataclasses import replace
from functools import partial
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import onnx

from smoothloco import __version__
from smoothloco.robot_side import contract as robot_contract
from smoothloco.robot_side.testbench import Command, Player
from smoothloco.tasks import VelocityTask, controller
from smoothloco.train.checkpoint import CHECKPOINT_NAME
from smoothloco.train.runs import LoadedRun, load_run
from smoothloco.validation import shown

EXPORT_DIR = "export"
# policy.json last: it names the others
EXPORT_FILES = ("robot.xml", "controller.onnx", "reference.npz", "policy.json")
OPSET = 17  # what onnxruntime releases of the last years on robot computers all run
TOLERANCE = 1e-5  # max |ONNX - JAX| accepted over the reference trajectory, every output
# The reference trajectory: two episodes from standing in MuJoCo (the second starts from the reset
# state), each with a command change.
REFERENCE_EPISODES: tuple[tuple[tuple[Command, ...], float], ...] = (
    (((0.0, 0.5, 0.0, 0.0), (1.5, 0.0, 0.3, 0.4)), 3.0),
    (((0.0, 0.0, 0.0, 0.0), (0.5, 0.8, 0.0, -0.2)), 1.5),
)


class ExportError(RuntimeError):
    """The run's policy cannot be written as the deployment artifact."""


def deployed_controller(task: VelocityTask) -> controller.ControllerConfig:
    """The controller the robot runs: the task's, with the velocity trim's loop closed."""
    closed = replace(task.config.velocity_trim, closed_loop=True)
    return controller.ControllerConfig.from_task(replace(task.config, velocity_trim=closed), task.robot)


def sensor_inputs(task: VelocityTask) -> tuple[str, ...]:
    """The graph's sensor inputs: all of ``robot_side.contract.SENSOR_INPUTS`` but the base
    velocity for a policy that does not observe it and the height scan for a blind one."""
    read = {"base_lin_vel": task.config.observe_base_lin_vel, "height_scan": bool(task.config.height_scan.points)}
    return tuple(s for s in robot_contract.SENSOR_INPUTS if read.get(s, True))


def network(run: LoadedRun) -> controller.Network:
    """The run's deterministic policy as ``(params, flat observation) -> action``."""

    def apply(params, obs: jax.Array) -> jax.Array:
        statistics = params[0].mean
        batch = obs[None]  # the networks' Dense layers convert to ONNX as batched matrix products
        if isinstance(statistics, dict):  # a privileged critic's observation: the actor reads "state" alone
            batch = {k: jnp.zeros((1, np.shape(v)[-1]), jnp.float32) for k, v in statistics.items()} | {"state": batch}
        return run.make_policy(params, deterministic=True)(batch, None)[0][0]

    return apply


def controller_function(run: LoadedRun, task: VelocityTask) -> tuple[Callable, list[str], list[int]]:
    """The exported step as a function of flat float32 arrays (the sensors, the command, the
    state), with its input names and sizes."""
    config = deployed_controller(task)
    sensors = sensor_inputs(task)
    apply = partial(controller.step, config, network(run), run.params)
    n = config.n_joints

    def step(*inputs: jax.Array) -> tuple[jax.Array, jax.Array]:
        readings = dict(zip(sensors, inputs))
        readings.setdefault("base_lin_vel", jnp.zeros(3, jnp.float32))  # unread by a policy that does not observe it
        command, state = inputs[-2], controller.unflatten_state(config, inputs[-1])
        targets, state = apply(controller.Sensors(**readings), command, state)
        return targets, controller.flatten_state(state)

    sizes = robot_contract.sensor_sizes(n, len(task.config.height_scan.points))
    names = [*sensors, robot_contract.COMMAND_INPUT[0], robot_contract.STATE_INPUT]
    state_size = sum(controller.state_sizes(config).values())
    return step, names, [*(sizes[s] for s in sensors), robot_contract.COMMAND_INPUT[2], state_size]


@contextlib.contextmanager
def _converter_quiet() -> Iterator[None]:
    """Silence what the converter says about its own internals on every export: JAX's note that a
    float64 it asks for becomes float32 (the graph is float32 throughout, as the reference check
    proves) and onnx_ir's notes on shapeless scalars it leaves untyped."""
    logger = logging.getLogger("onnx_ir")
    level = logger.level
    logger.setLevel(logging.ERROR)
    try:
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message="Explicitly requested dtype float64", category=UserWarning)
            yield
    finally:
        logger.setLevel(level)


def onnx_controller(step: Callable, names: list[str], sizes: list[int]) -> onnx.ModelProto:
    """``step`` converted to ONNX (opset ``OPSET``), without the initializers the converter leaves unused."""
    # late import: jax2onnx loads its plugins (half a minute) and is needed only here
    from jax2onnx import to_onnx

    specs = [jax.ShapeDtypeStruct((size,), jnp.float32) for size in sizes]
    outputs = [robot_contract.TARGETS_OUTPUT, robot_contract.NEXT_STATE_OUTPUT]
    try:
        with _converter_quiet():
            model = to_onnx(step, specs, model_name="controller", opset=OPSET, input_names=names, output_names=outputs)
    except Exception as exc:  # noqa: BLE001 - the converter's errors name the primitive it lacks
        raise ExportError(f"jax2onnx cannot convert the controller step: {type(exc).__name__}: {exc}") from exc
    used = {name for node in model.graph.node for name in node.input}
    kept = [init for init in model.graph.initializer if init.name in used]
    del model.graph.initializer[:]
    model.graph.initializer.extend(kept)
    model.producer_name = "smoothloco"
    onnx.checker.check_model(model, full_check=True)
    return model


def reference(player: Player, step: Callable, names: list[str]) -> tuple[dict[str, np.ndarray], float]:
    """The controller's inputs, states and outputs over ``REFERENCE_EPISODES`` in MuJoCo, the
    outputs from the JAX step, and the largest difference of the ONNX graph's from them."""
    episodes = [player.run(commands=commands, seconds=seconds) for commands, seconds in REFERENCE_EPISODES]
    rows = {name: np.concatenate([e[name] for e in episodes]).astype(np.float32) for name in names[:-2]}
    rows["command"] = np.concatenate([e["command"] for e in episodes]).astype(np.float32)
    rows["state"] = np.concatenate([e["controller_state"] for e in episodes])
    targets, next_state = jax.jit(jax.vmap(step))(*(rows[name] for name in names))
    rows.update(joint_targets=np.asarray(targets), next_state=np.asarray(next_state))
    rows["episode_start"] = np.concatenate([np.arange(len(e["time"])) == 0 for e in episodes])
    session = player.controller.session
    exported = [session.run(None, {name: rows[name][k] for name in names}) for k in range(len(rows["state"]))]
    error = max(
        float(np.max(np.abs(np.stack([out[i] for out in exported]) - rows[key])))
        for i, key in enumerate(("joint_targets", "next_state"))
    )
    return rows, error


def contract(
    run: LoadedRun,
    task: VelocityTask,
    names: list[str],
    sizes: list[int],
    error: float,
    folder: Path,
    checkpoint_sha256: str,
) -> dict:
    """``policy.json``: what the graph cannot know (its inputs' units and frames, timing, the
    drives, the robot model). ``source`` ties it to what it came from: the sha256 of
    ``controller.onnx`` in ``folder`` (the reader checks it) and of the run's checkpoint
    (``exported`` checks it)."""
    cfg, robot, sim = task.config, task.robot, task.sys
    meanings = {name: meaning for name, (meaning, _) in robot_contract.SENSOR_INPUTS.items()}
    meanings[robot_contract.COMMAND_INPUT[0]] = robot_contract.COMMAND_INPUT[1]
    meanings[robot_contract.STATE_INPUT] = (
        "the controller's memory: the last next_state, all zeros at an episode's start"
    )
    return {
        "format": robot_contract.CONTRACT_FORMAT,
        "version": robot_contract.CONTRACT_VERSION,
        "controller": {
            "file": "controller.onnx",
            "inputs": [{"name": n, "size": k, "description": meanings[n]} for n, k in zip(names, sizes)],
            "outputs": [robot_contract.TARGETS_OUTPUT, robot_contract.NEXT_STATE_OUTPUT],
            "state_size": sizes[-1],
        },
        "joints": {
            "names": list(robot.joint_names),
            "default_pose": robot.default_pose.tolist(),
            "kp": np.asarray(sim.kp).tolist(),
            "kd": np.asarray(sim.kd).tolist(),
            "torque_limit": np.asarray(sim.torque_limit).tolist(),
        },
        "motors": {
            "saturation_torque": [] if robot.velocity_limit is None else robot.saturation_torque.tolist(),
            "velocity_limit": [] if robot.velocity_limit is None else robot.velocity_limit.tolist(),
            "trained_with_envelope": bool(np.isfinite(np.asarray(sim.velocity_limit)).any()),
        },
        "timing": {"control_dt": cfg.control_dt, "sim_dt": cfg.sim_dt},
        "termination": {
            "min_base_height": cfg.min_base_height,
            "max_tilt_deg": cfg.max_tilt_deg,
            "min_knee_height": cfg.min_knee_height,
            "knee_bodies": list(robot.knee_bodies),
        },
        "height_scan": {"points": [list(point) for point in cfg.height_scan.points]},
        "robot": {
            "file": "robot.xml",
            "model_hash": robot.model_hash,
            "base_body": robot.mj_model().body(1).name,  # the task's free-floating base is body 1
            "foot_geoms": list(robot.foot_geoms),
            "initial_base_height": float(robot.init_qpos()[2]),
        },
        "reference": {"file": "reference.npz"},
        "source": {
            "run": str(run.run_dir),
            "iteration": run.iteration,
            # the motor delays the policy trained under (s; the robot's own latency should lie within)
            "trained_action_delay": list(cfg.randomization.action_delay) if cfg.randomization.enabled else [0.0, 0.0],
            # the ground friction and added base mass (kg) ranges trained on: an evaluation of the
            # export alone judges it at their corners, as an evaluation of the run does
            "trained_friction": list(cfg.randomization.friction),
            "trained_added_base_mass": list(cfg.randomization.added_base_mass),
            "env_steps": run.env_steps,
            "contact": cfg.contact,
            "robot_spec": cfg.robot,
            "onnx_max_abs_error": error,
            "onnx_sha256": hashlib.sha256((folder / "controller.onnx").read_bytes()).hexdigest(),
            "checkpoint_sha256": checkpoint_sha256,
            "smoothloco": __version__,
        },
    }


def export_run(run_dir: str | Path, out_dir: str | Path | None = None) -> Path:
    """Write ``controller.onnx``, ``policy.json``, ``robot.xml`` and ``reference.npz`` (default
    ``RUN/export/``).

    The graph is run in MuJoCo by the robot-side test bench from the written files and checked
    against the JAX controller step on that trajectory (``TOLERANCE``), all in a temporary
    folder beside ``out``; only then do the files replace those in ``out``, so a failed export
    (a corrupt checkpoint, a graph that does not match its JAX step) leaves an earlier good
    export as it was. Other files in ``out`` are left alone.
    """
    # Hashed before it is read: should a training replace it meanwhile, the export claims the
    # older checkpoint and is refused or written again, never taken for the newer one.
    checkpoint_sha256 = _checkpoint_sha256(Path(run_dir))
    run = load_run(run_dir)  # a corrupt or mismatched checkpoint fails here, before any writing
    task = VelocityTask(run.config.task)
    step, names, sizes = controller_function(run, task)
    model = onnx_controller(step, names, sizes)
    out = Path(out_dir) if out_dir is not None else run.run_dir / EXPORT_DIR
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(dir=out.parent, prefix=f".{out.name}-"))  # same file system: renames
    except OSError as exc:
        raise ExportError(f"cannot write the export to {out}: {exc.strerror or exc}") from exc
    try:
        (staging / "robot.xml").write_bytes(task.robot.xml.encode())  # bytes as hashed by RobotSpec.model_hash
        onnx.save(model, staging / "controller.onnx")
        written = contract(run, task, names, sizes, float("nan"), staging, checkpoint_sha256)
        (staging / "policy.json").write_text(json.dumps(written, indent=2) + "\n")
        rows, error = reference(Player(staging), step, names)  # the contract must be readable by the bench
        if not error <= TOLERANCE:
            raise ExportError(
                f"the ONNX controller differs from the JAX controller step by {error:.2e} (> {TOLERANCE:g}) over the "
                "reference trajectory"
            )
        np.savez(staging / "reference.npz", **rows)
        written["source"]["onnx_max_abs_error"] = error
        (staging / "policy.json").write_text(json.dumps(written, indent=2) + "\n")
        for name in EXPORT_FILES:
            with (staging / name).open("rb") as f:
                os.fsync(f.fileno())
        out.mkdir(exist_ok=True)
        # Each file is renamed into place (atomic); policy.json, which names the others, last.
        for name in EXPORT_FILES:
            os.replace(staging / name, out / name)
    except OSError as exc:
        raise ExportError(f"cannot write the export to {out}: {exc.strerror or exc}") from exc
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return out


def exported(run_dir: Path) -> Path:
    """The run's export folder, written first if missing, older than the checkpoint, of an
    older contract version than this player reads, or from before exports recorded their
    checkpoint. An export that records another checkpoint than the run's (copied from another
    run) is an ``ExportError``: scoring it would score another policy."""
    folder, checkpoint = run_dir / EXPORT_DIR, run_dir / CHECKPOINT_NAME
    contract_file = folder / "policy.json"
    saved = _read_contract(contract_file)
    source = saved.get("source") if isinstance(saved, dict) else None
    recorded = source.get("checkpoint_sha256") if isinstance(source, dict) else None
    stale = (
        saved is None
        or (checkpoint.is_file() and checkpoint.stat().st_mtime > contract_file.stat().st_mtime)
        or saved.get("version") != robot_contract.CONTRACT_VERSION  # exported by an older smoothloco
        or (checkpoint.is_file() and recorded is None)
    )
    if stale:
        export_run(run_dir, folder)
    elif checkpoint.is_file() and recorded != _checkpoint_sha256(run_dir):
        raise ExportError(
            f"{contract_file} records another checkpoint (source.checkpoint_sha256 {shown(recorded)}, source.run "
            f"{shown(source.get('run'))}) than {checkpoint}: export this run again with `smoothloco export {run_dir}`"
        )
    return folder


def _checkpoint_sha256(run_dir: Path) -> str:
    """The sha256 of the run's checkpoint file (empty when it cannot be read: ``load_run`` says why)."""
    try:
        return hashlib.sha256((run_dir / CHECKPOINT_NAME).read_bytes()).hexdigest()
    except OSError:
        return ""


def _read_contract(contract_file: Path) -> dict | None:
    """The export's ``policy.json`` as a JSON object; None when missing or unreadable (written again)."""
    try:
        saved = json.loads(contract_file.read_bytes().decode("utf-8"))
    except (OSError, ValueError):
        return None
    return saved if isinstance(saved, dict) else None
