"""Deployment artifacts of a run: ``policy.onnx``, ``policy.json`` (the contract) and ``robot.xml``.

The ONNX graph is written with ``onnx.helper`` from the policy's Dense layers rather than by a
JAX-to-ONNX converter: jax2onnx, the maintained one, resolves against our pins only as an old
release (0.13) that fails to load some of its plugins with jax 0.9.2 and brings some twenty
packages (huggingface_hub, netron, ...) for what is here a handful of nodes. Generality is kept
where it matters: any MLP policy whose deterministic action is ``tanh`` of its first outputs
(our SHAC actor, Brax's PPO network) exports, and every export is checked against the run's own
JAX policy function before anything is written.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import os
import re
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

import jax
import numpy as np
import onnx
import onnxruntime
from onnx import TensorProto, helper, numpy_helper

from smoothloco import __version__
from smoothloco.deploy import player
from smoothloco.tasks import VelocityTask, gait
from smoothloco.tasks.velocity import STANDING_COMMAND, observation_layout, observation_scales
from smoothloco.train.checkpoint import CHECKPOINT_NAME
from smoothloco.train.networks import actor_obs
from smoothloco.train.runs import LoadedRun, load_run
from smoothloco.validation import shown

EXPORT_DIR = "export"
EXPORT_FILES = ("robot.xml", "policy.onnx", "policy.json")  # policy.json last: it names the others
INPUT_NAME, OUTPUT_NAME = "obs", "actions"
OPSET = 17  # what onnxruntime releases of the last years on robot computers all run
TOLERANCE = 1e-5  # max |ONNX - JAX| accepted on random observations


class ExportError(RuntimeError):
    """The run's policy cannot be written as the deployment artifact."""


@dataclass(frozen=True)
class MlpPolicy:
    """A deterministic MLP policy: ``tanh(mlp((obs - mean) / std)[:action_size])``."""

    mean: np.ndarray
    std: np.ndarray
    layers: tuple[tuple[np.ndarray, np.ndarray], ...]  # (kernel (in, out), bias (out,)), input to output
    action_size: int
    activation: str = "Elu"  # ONNX operator between layers (flax and Brax networks here use ELU)


def mlp_policy(run: LoadedRun, action_size: int) -> MlpPolicy:
    """Read normalizer statistics and Dense layers from a run's ``(normalizer, actor params)``.

    Dense layers are found by their ``kernel``/``bias`` leaves and ordered by the trailing
    number of their names (flax ``Dense_0..``, Brax ``hidden_0..``), so the exporter does not
    depend on one network's module names.
    """
    normalizer, actor_params = run.params
    layers: list[tuple[str, tuple[np.ndarray, np.ndarray]]] = []

    def collect(tree, path: str) -> None:
        if hasattr(tree, "items"):  # dict or FrozenDict
            if "kernel" in tree and "bias" in tree:
                layers.append((path, (np.asarray(tree["kernel"], np.float32), np.asarray(tree["bias"], np.float32))))
                return
            for key, sub in tree.items():
                collect(sub, f"{path}/{key}")

    collect(actor_params, "")
    if not layers:
        raise ExportError(f"no Dense layers (kernel/bias) in the actor parameters of {run.run_dir}")
    natural = lambda item: [int(t) if t.isdigit() else t for t in re.split(r"(\d+)", item[0])]  # noqa: E731
    ordered = tuple(layer for _, layer in sorted(layers, key=natural))
    mean = np.asarray(actor_obs(normalizer.mean), np.float32)
    std = np.asarray(actor_obs(normalizer.std), np.float32)
    for (k_in, _), (k_out, _) in itertools.pairwise(ordered):
        if k_in.shape[1] != k_out.shape[0]:
            raise ExportError(f"Dense layers do not chain: {k_in.shape} then {k_out.shape}")
    if ordered[0][0].shape[0] != mean.shape[0] or ordered[-1][0].shape[1] < action_size:
        raise ExportError(
            f"network maps {ordered[0][0].shape[0]} inputs to {ordered[-1][0].shape[1]} outputs; "
            f"expected {mean.shape[0]} observations to at least {action_size} actions"
        )
    return MlpPolicy(mean, std, ordered, action_size)


def onnx_model(policy: MlpPolicy) -> onnx.ModelProto:
    """The ONNX graph ``obs [N, obs_dim] -> actions [N, action_size]`` with normalization inside."""
    init = [numpy_helper.from_array(policy.mean, "obs_mean"), numpy_helper.from_array(policy.std, "obs_std")]
    nodes = [
        helper.make_node("Sub", [INPUT_NAME, "obs_mean"], ["centered"]),
        helper.make_node("Div", ["centered", "obs_std"], ["x0"]),
    ]
    x = "x0"
    for i, (kernel, bias) in enumerate(policy.layers):
        init += [numpy_helper.from_array(kernel, f"W{i}"), numpy_helper.from_array(bias, f"b{i}")]
        nodes.append(helper.make_node("Gemm", [x, f"W{i}", f"b{i}"], [f"z{i}"]))
        x = f"z{i}"
        if i + 1 < len(policy.layers):
            nodes.append(helper.make_node(policy.activation, [x], [f"h{i}"]))
            x = f"h{i}"
    if policy.layers[-1][0].shape[1] > policy.action_size:  # e.g. PPO: [mean, std parameters]
        init += [
            numpy_helper.from_array(np.array(v, np.int64), n)
            for n, v in (("starts", [0]), ("ends", [policy.action_size]), ("axes", [1]))
        ]
        nodes.append(helper.make_node("Slice", [x, "starts", "ends", "axes"], ["action_mean"]))
        x = "action_mean"
    nodes.append(helper.make_node("Tanh", [x], [OUTPUT_NAME]))
    obs_dim = policy.mean.shape[0]
    graph = helper.make_graph(
        nodes,
        "policy",
        [helper.make_tensor_value_info(INPUT_NAME, TensorProto.FLOAT, ["N", obs_dim])],
        [helper.make_tensor_value_info(OUTPUT_NAME, TensorProto.FLOAT, ["N", policy.action_size])],
        init,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)], producer_name="smoothloco")
    model.ir_version = 8  # the IR of opset 17; newer IRs are refused by older runtimes
    onnx.checker.check_model(model, full_check=True)
    return model


def onnx_error(model: onnx.ModelProto, run: LoadedRun, policy: MlpPolicy, samples: int = 256, seed: int = 0) -> float:
    """Max |ONNX - JAX| deterministic action over random observations.

    Observations are drawn within 3 standard deviations of the normalizer's mean, the range a
    policy sees. Far outside it (normalized inputs of 1e3 and more) both float32 evaluations
    drift from exact arithmetic by ~1e-5, which says nothing about the export.
    """
    noise = np.random.default_rng(seed).normal(0.0, 3.0, (samples, policy.mean.shape[0]))
    obs = (policy.mean + policy.std * noise).astype(np.float32)
    session = onnxruntime.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    exported = session.run([OUTPUT_NAME], {INPUT_NAME: obs})[0]
    statistics = run.params[0].mean
    if isinstance(statistics, dict):  # a privileged critic's observation: the actor reads "state" alone
        obs_in = {k: np.zeros((samples, np.shape(v)[-1]), np.float32) for k, v in statistics.items()}
        obs_in["state"] = obs
    else:
        obs_in = obs
    reference = np.asarray(jax.jit(run.policy(deterministic=True))(obs_in, None)[0])
    return float(np.max(np.abs(exported - reference)))


def contract(run: LoadedRun, task: VelocityTask, onnx_max_error: float, folder: Path, checkpoint_sha256: str) -> dict:
    """``policy.json``: everything a player needs besides the network and the robot model.
    ``source`` ties it to what it came from: the sha256 of ``policy.onnx`` in ``folder`` (the
    player checks it) and of the run's checkpoint (``exported`` checks it)."""
    cfg, robot = task.config, task.robot
    layout = observation_layout(cfg)
    observed = [name for name, *_ in layout]
    missing = [name for name in observed if name not in player.OBSERVATION_TERMS]
    if missing:
        raise ExportError(
            f"the task observes {missing}, which the deployment player cannot build; teach player.py first"
        )
    scales, start, terms = observation_scales(cfg), 0, []
    for name, size, *_ in layout:
        description = player.OBSERVATION_TERMS[name].meaning
        terms.append(
            {"name": name, "size": size, "scale": scales[start : start + size].tolist(), "description": description}
        )
        start += size
    sim = task.sys
    return {
        "format": player.CONTRACT_FORMAT,
        "version": player.CONTRACT_VERSION,
        "observation": {
            "size": start,
            "terms": terms,
            "history": cfg.obs_history,
            "velocity_error_window": cfg.velocity_error_window if "velocity_error_average" in observed else 0.0,
            "velocity_trim": {
                "rate": cfg.velocity_trim.rate if cfg.trims_command else 0.0,
                "hold": cfg.velocity_trim.hold,
                "freeze": cfg.velocity_trim.freeze,
                "limit": cfg.velocity_trim.limit,
            },
        },
        "action": {"size": task.action_size, "scale": cfg.action_scale},
        "gait": {
            "frequency": cfg.gait.frequency,
            "swing_offsets": (gait.swing_offsets(robot, cfg.gait.hip_amplitude) * cfg.gait.generator).tolist(),
            "hide_clock_when_standing": cfg.gait.hide_clock_when_standing,
            "standing_command": STANDING_COMMAND,
            "recovery_speed": cfg.gait.recovery_speed,
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
        "robot": {
            "file": "robot.xml",
            "model_hash": robot.model_hash,
            "base_body": robot.mj_model().body(1).name,  # the task's free-floating base is body 1
            "foot_geoms": list(robot.foot_geoms),
            "initial_base_height": float(robot.init_qpos()[2]),
        },
        "policy": {"file": "policy.onnx", "input": INPUT_NAME, "output": OUTPUT_NAME},
        "source": {
            "run": str(run.run_dir),
            "iteration": run.iteration,
            # the motor delays the policy trained under (s; the robot's own latency should lie within)
            "trained_action_delay": list(cfg.randomization.action_delay) if cfg.randomization.enabled else [0.0, 0.0],
            "env_steps": run.env_steps,
            "contact": cfg.contact,
            "onnx_max_abs_error": onnx_max_error,
            "onnx_sha256": hashlib.sha256((folder / "policy.onnx").read_bytes()).hexdigest(),
            "checkpoint_sha256": checkpoint_sha256,
            "smoothloco": __version__,
        },
    }


def export_run(run_dir: str | Path, out_dir: str | Path | None = None) -> Path:
    """Write ``policy.onnx``, ``policy.json`` and ``robot.xml`` (default ``RUN/export/``).

    The ONNX policy is checked against the run's JAX policy (``TOLERANCE``) and the files are
    read back by the standalone player, all in a temporary folder beside ``out``; only then do
    they replace those in ``out``, so a failed export (a corrupt checkpoint, a policy that does
    not match its ONNX graph) leaves an earlier good export as it was. Other files in ``out``
    are left alone.
    """
    # Hashed before it is read: should a training replace it meanwhile, the export claims the
    # older checkpoint and is refused or written again, never taken for the newer one.
    checkpoint_sha256 = _checkpoint_sha256(Path(run_dir))
    run = load_run(run_dir)  # a corrupt or mismatched checkpoint fails here, before any writing
    task = VelocityTask(run.config.task)
    policy = mlp_policy(run, task.action_size)
    model = onnx_model(policy)
    error = onnx_error(model, run, policy)
    if not error <= TOLERANCE:
        raise ExportError(
            f"the ONNX graph differs from the run's policy by {error:.2e} (> {TOLERANCE:g}); the exporter handles "
            f"MLP policies with {policy.activation} hidden layers and a tanh-bounded mean"
        )
    out = Path(out_dir) if out_dir is not None else run.run_dir / EXPORT_DIR
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(dir=out.parent, prefix=f".{out.name}-"))  # same file system: renames
    except OSError as exc:
        raise ExportError(f"cannot write the export to {out}: {exc.strerror or exc}") from exc
    try:
        (staging / "robot.xml").write_bytes(task.robot.xml.encode())  # bytes as hashed by RobotSpec.model_hash
        onnx.save(model, staging / "policy.onnx")
        written = contract(run, task, error, staging, checkpoint_sha256)
        (staging / "policy.json").write_text(json.dumps(written, indent=2) + "\n")
        player.Player(staging)  # the contract must be readable by the reference player
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
        or saved.get("version") != player.CONTRACT_VERSION  # exported by an older smoothloco
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
