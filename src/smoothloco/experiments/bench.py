"""Throughput benchmarks: figures measured side by side in one run, printed as a table.

Every figure is simulation (or control) steps per second summed over the batch. CPU time over
wall time shows how many cores did the work. ``bench_controller`` is the exception: the latency
of one call of an exported controller, as a robot's control loop sees it.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import jax
import jax.numpy as jnp
import mujoco
import numpy as np
from brax.envs.wrappers import training
from mujoco import mjx
from mujoco import rollout as mj_rollout

from smoothloco.parallel import shard_batch
from smoothloco.robot import RobotSpec, anymal_c
from smoothloco.robot_side.contract import Contract
from smoothloco.robot_side.loop import Controller
from smoothloco.robot_side.testbench import IMPRATIO
from smoothloco.sim import DEFAULT_SHARPNESS, SimState, initial_state, make_sim, rollout
from smoothloco.tasks import VelocityTask, VelocityTaskConfig


@dataclass
class Timing:
    steps_per_s: float
    compile_s: float
    cpu_over_wall: float


def _compile(fn: Callable[[], object]) -> float:
    """Seconds of the first call, which compiles."""
    start = time.perf_counter()
    jax.block_until_ready(fn())
    return time.perf_counter() - start


def _measure(fn: Callable[[], object], steps: int, repeats: int, compile_s: float) -> Timing:
    wall0, cpu0 = time.perf_counter(), time.process_time()
    for _ in range(repeats):
        jax.block_until_ready(fn())
    wall = time.perf_counter() - wall0
    cpu = time.process_time() - cpu0
    return Timing(steps * repeats / wall, compile_s, cpu / wall)


def _time(fn: Callable[[], object], steps: int, repeats: int) -> Timing:
    return _measure(fn, steps, repeats, _compile(fn))


def _time_side_by_side(
    forward: Callable[[], object], forward_steps: int, grad: Callable[[], object], grad_steps: int, rounds: int
) -> tuple[Timing, Timing, float]:
    """Forward and gradient timed in alternating rounds; medians of the rates and of each
    round's gradient/forward ratio. The machine's speed drifts by tens of percent over a
    minute (shared cores, clocks), so rates timed minutes apart give a misleading ratio."""
    programs = ((forward, forward_steps, _compile(forward)), (grad, grad_steps, _compile(grad)))
    rounds_timed = [[_measure(fn, n, 1, compile_s) for fn, n, compile_s in programs] for _ in range(rounds)]
    median = [
        Timing(
            float(np.median([r[i].steps_per_s for r in rounds_timed])),
            programs[i][2],
            float(np.median([r[i].cpu_over_wall for r in rounds_timed])),
        )
        for i in range(2)
    ]
    ratio = float(np.median([g.steps_per_s / f.steps_per_s for f, g in rounds_timed]))
    return median[0], median[1], ratio


def perturbed_states(robot: RobotSpec, batch: int, seed: int = 0) -> SimState:
    """Standing states with random base and joint velocities, so feet make and break contact."""
    base = initial_state(robot)
    rng = np.random.default_rng(seed)
    v = rng.normal(0.0, 0.3, (batch, base.v.shape[0])).astype(np.float32)
    q = np.tile(np.asarray(base.q), (batch, 1))
    return SimState(q=jnp.asarray(q), v=jnp.asarray(v))


def pd_servo_model(robot: RobotSpec) -> mujoco.MjModel:
    """The robot with its motors turned into MuJoCo PD servos (kp, kd, torque limit) so
    MuJoCo's own rollout applies the same control law as our simulator. The model's motors
    must drive the robot's joints in the robot's joint order (true of the bundled robots)."""
    model = robot.mj_model()
    driven = [model.joint(j).name for j in model.actuator_trnid[:, 0]]
    if driven != list(robot.joint_names):
        raise ValueError(
            f"the model's motors drive {driven}, not the robot's joints {list(robot.joint_names)} in order"
        )
    model.actuator_gainprm[:, 0] = robot.kp
    model.actuator_biastype[:] = mujoco.mjtBias.mjBIAS_AFFINE
    model.actuator_biasprm[:, 0] = 0.0
    model.actuator_biasprm[:, 1] = -robot.kp
    model.actuator_biasprm[:, 2] = -robot.kd
    model.actuator_forcelimited[:] = 1
    model.actuator_forcerange[:] = np.stack([-robot.torque_limit, robot.torque_limit], axis=1)
    model.actuator_ctrlrange[:] = [-10.0, 10.0]
    return model


def bench_sim(
    batch: int = 256, steps: int = 100, window: int = 32, repeats: int = 5, sharpness: float = DEFAULT_SHARPNESS
) -> dict:
    """Our step per contact model (forward and forward+gradient), ``mjx.step`` and MuJoCo (C)."""
    robot = anymal_c()
    states = shard_batch(perturbed_states(robot, batch))
    pose = jnp.asarray(robot.default_pose, jnp.float32)
    results: dict[str, float] = {"batch": batch, "devices": jax.local_device_count()}
    timings: dict[str, Timing] = {}

    for model in ("smooth", "hard", "soft"):
        sim = make_sim(robot, model)
        targets = jnp.tile(pose, (steps, 1))
        forward = jax.jit(jax.vmap(lambda s: rollout(sim, s, targets, sharpness)[0]))

        def window_loss(offsets: jax.Array, s: SimState) -> jax.Array:
            final, _ = rollout(sim, s, pose + offsets, sharpness)
            return jnp.sum(final.q[:3] ** 2) + jnp.sum(final.v**2)

        grad = jax.jit(jax.vmap(jax.grad(window_loss)))
        offsets = shard_batch(jnp.zeros((batch, window, pose.shape[0])))
        timings[f"{model}_forward"], timings[f"{model}_grad"], results[f"{model}_grad_over_forward"] = (
            _time_side_by_side(
                lambda: forward(states), batch * steps, lambda: grad(offsets, states), batch * window, repeats
            )
        )

    timings["mjx_step"] = _bench_mjx_step(robot, states, steps, repeats)
    for name, configure in MUJOCO_C_SETTINGS.items():
        timings[name] = _bench_mujoco_c(configure(robot), robot.default_pose, states, steps, repeats)

    for name, t in timings.items():
        results[f"{name}_steps_per_s"] = t.steps_per_s
        results[f"{name}_compile_s"] = t.compile_s
        results[f"{name}_cpu_over_wall"] = t.cpu_over_wall
    results["smooth_over_mjx_step"] = results["smooth_forward_steps_per_s"] / results["mjx_step_steps_per_s"]
    for name in MUJOCO_C_SETTINGS:
        results[f"smooth_over_{name}"] = results["smooth_forward_steps_per_s"] / results[f"{name}_steps_per_s"]
    return results


def _bench_mjx_step(robot: RobotSpec, states: SimState, steps: int, repeats: int) -> Timing:
    """MJX's own step with MuJoCo contact (Newton, 4 iterations, 8 line-search steps, as
    MuJoCo Playground's locomotion tasks configure it) and the same PD servos."""
    model = pd_servo_model(robot)
    model.opt.iterations, model.opt.ls_iterations = 4, 8
    mx = mjx.put_model(model)
    ctrl = jnp.asarray(robot.default_pose, jnp.float32)

    def run(q: jax.Array, v: jax.Array) -> jax.Array:
        d = mjx.make_data(mx).replace(qpos=q, qvel=v, ctrl=ctrl)
        d = jax.lax.fori_loop(0, steps, lambda _, d: mjx.step(mx, d), d)
        return d.qpos

    fn = jax.jit(jax.vmap(run))
    return _time(lambda: fn(states.q, states.v), states.q.shape[0] * steps, repeats)


def _mujoco_defaults(robot: RobotSpec) -> mujoco.MjModel:
    """MuJoCo's own defaults (pyramidal cone, impratio 1) with the full collision geometry:
    what a user runs unless they tune it."""
    model = pd_servo_model(robot)
    model.opt.cone, model.opt.impratio = mujoco.mjtCone.mjCONE_PYRAMIDAL, 1.0
    return model


def _mujoco_stiff(robot: RobotSpec) -> mujoco.MjModel:
    """The transfer judge's settings: elliptic cone and impratio 100 (``robot_side.testbench``)."""
    model = pd_servo_model(robot)
    model.opt.cone, model.opt.impratio = mujoco.mjtCone.mjCONE_ELLIPTIC, IMPRATIO
    return model


def _mujoco_feet_only(robot: RobotSpec) -> mujoco.MjModel:
    """MuJoCo's defaults with only the feet colliding, as in our simulator."""
    model = _mujoco_defaults(robot)
    feet = {mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_GEOM, name) for name in robot.foot_geoms}
    floor = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_GEOM, "floor")
    for geom in set(range(model.ngeom)) - feet - {floor}:
        model.geom_contype[geom] = model.geom_conaffinity[geom] = 0
    return model


# The headline row is MuJoCo as a user would run it; the others are labelled extras.
MUJOCO_C_SETTINGS: dict[str, Callable[[RobotSpec], mujoco.MjModel]] = {
    "mujoco_c": _mujoco_defaults,
    "mujoco_c_stiff": _mujoco_stiff,
    "mujoco_c_feet": _mujoco_feet_only,
}


def _bench_mujoco_c(
    model: mujoco.MjModel, pose: np.ndarray, states: SimState, steps: int, repeats: int, threads: int = 2
) -> Timing:
    datas = [mujoco.MjData(model) for _ in range(threads)]
    batch = states.q.shape[0]
    spec = mujoco.mjtState.mjSTATE_FULLPHYSICS
    init = np.zeros((batch, mujoco.mj_stateSize(model, spec)))
    for i in range(batch):
        datas[0].qpos[:], datas[0].qvel[:] = np.asarray(states.q[i]), np.asarray(states.v[i])
        mujoco.mj_getState(model, datas[0], init[i], spec)
    control = np.tile(pose, (batch, steps, 1))
    with mj_rollout.Rollout(nthread=threads) as runner:
        return _time(lambda: runner.rollout(model, datas, init, control), batch * steps, repeats)


def format_table(results: dict, rows: list[tuple[str, str]], unit: str = "steps/s") -> str:
    """Markdown table of throughput, compile time and CPU/wall per benchmarked program."""
    lines = [f"| program | {unit} | compile s | cpu/wall |", "|---|---:|---:|---:|"]
    for key, label in rows:
        lines.append(
            f"| {label} | {results[f'{key}_steps_per_s']:,.0f} | {results[f'{key}_compile_s']:.1f} "
            f"| {results[f'{key}_cpu_over_wall']:.2f} |"
        )
    return "\n".join(lines)


SIM_ROWS = [
    ("smooth_forward", "ours, smooth, forward"),
    ("hard_forward", "ours, hard, forward"),
    ("soft_forward", "ours, soft, forward"),
    ("smooth_grad", "ours, smooth, forward+grad (32 steps)"),
    ("hard_grad", "ours, hard, forward+grad (32 steps)"),
    ("soft_grad", "ours, soft, forward+grad (32 steps)"),
    ("mjx_step", "mjx.step (MuJoCo contact)"),
    ("mujoco_c", "MuJoCo (C) rollout, 2 threads, its defaults"),
    ("mujoco_c_stiff", "MuJoCo (C), 2 threads, elliptic cone + impratio 100 (our transfer judge)"),
    ("mujoco_c_feet", "MuJoCo (C), 2 threads, defaults, only feet collide"),
]


def bench_task(batch: int = 256, steps: int = 50, window: int = 32, repeats: int = 5) -> dict:
    """Control steps per second of the velocity task per contact model: forward with random
    actions, and forward + gradient of the window's summed reward with respect to the actions."""
    results: dict[str, float] = {"batch": batch, "devices": jax.local_device_count()}
    for model in ("smooth", "hard", "soft"):
        env = training.VmapWrapper(VelocityTask(VelocityTaskConfig(contact=model)))
        state = shard_batch(jax.jit(env.reset)(jax.random.split(jax.random.PRNGKey(0), batch)))
        actions = shard_batch(0.3 * jax.random.normal(jax.random.PRNGKey(1), (batch, steps, 12)))

        def run(state, actions):
            def body(s, a):
                s = env.step(s, a)
                return s, s.reward

            return jax.lax.scan(body, state, jnp.swapaxes(actions, 0, 1))[1].sum()

        forward, grad = jax.jit(run), jax.jit(jax.grad(run, argnums=1))
        timed = _time_side_by_side(
            lambda: forward(state, actions),
            batch * steps,
            lambda: grad(state, actions[:, :window]),
            batch * window,
            repeats,
        )
        for kind, t in zip(("forward", "grad"), timed[:2]):
            results[f"{model}_{kind}_control_steps_per_s"] = t.steps_per_s
            results[f"{model}_{kind}_compile_s"], results[f"{model}_{kind}_cpu_over_wall"] = (
                t.compile_s,
                t.cpu_over_wall,
            )
        results[f"{model}_grad_over_forward"] = timed[2]
    for key in [k for k in results if k.endswith("_control_steps_per_s")]:
        results[key.replace("_control_steps_per_s", "_steps_per_s")] = results[key]
    return results


TASK_ROWS = [
    (f"{m}_{kind}", f"task, {m}, {label}")
    for m in ("smooth", "hard", "soft")
    for kind, label in (("forward", "forward"), ("grad", "forward+grad (32 steps)"))
]


def gait_targets(
    robot: RobotSpec, seconds: float, control_dt: float, frequency: float = 1.5, amplitude: float = 1.0
) -> np.ndarray:
    """Joint targets of a trot-like motion, held for each control period: thighs and knees of
    diagonal leg pairs swing in antiphase, so feet lift off, land and push."""
    t = np.arange(int(round(seconds / control_dt))) * control_dt
    phase = 2 * np.pi * frequency * t[:, None] + np.array([0.0, np.pi, np.pi, 0.0])[None]  # LF, RF, LH, RH
    offsets = np.zeros((t.size, 4, 3))
    offsets[..., 1] = 0.3 * amplitude * np.sin(phase)
    offsets[..., 2] = -0.5 * amplitude * np.maximum(np.sin(phase), 0.0)
    return robot.default_pose[None] + offsets.reshape(t.size, 12)


def sweep_sim_dt(
    dts: tuple[float, ...] = (0.01, 0.005, 0.004, 0.0025, 0.002, 0.001),
    reference_dt: float = 0.00025,
    seconds: float = 1.0,
    gaits: int = 8,
) -> list[dict]:
    """Faithfulness of ``hard`` contact against step size: a batch of trot-like gaits (varied
    frequency and amplitude) at each ``dt`` compared with a much smaller reference step. Over
    longer times open-loop gaits diverge chaotically, so the window is short (1 s)."""
    robot = anymal_c()
    control_dt = 0.02
    rng = np.random.default_rng(0)
    targets = np.stack(
        [gait_targets(robot, seconds, control_dt, rng.uniform(1.0, 2.0), rng.uniform(0.5, 1.0)) for _ in range(gaits)]
    )

    def run(dt: float):
        sim = make_sim(robot, contact="hard", dt=dt)
        per_control = int(round(control_dt / dt))
        per_step = jnp.asarray(np.repeat(targets, per_control, axis=1))
        _, (states, info) = jax.jit(jax.vmap(lambda t: rollout(sim, initial_state(robot), t)))(per_step)
        q = np.asarray(states.q)[:, per_control - 1 :: per_control]  # state at each control boundary
        depth = -np.asarray(info.gap)
        return q, float(depth[depth > 0].mean()), float(depth.max())

    reference, *_ = run(reference_dt)
    results = []
    for dt in dts:
        q, mean_depth, max_depth = run(dt)
        angle = 2 * np.arccos(np.clip(np.abs(np.sum(q[..., 3:7] * reference[..., 3:7], -1)), 0.0, 1.0))
        results.append(
            {
                "dt": dt,
                "base_position_rms_m": float(np.sqrt(np.mean(np.sum((q[..., :3] - reference[..., :3]) ** 2, -1)))),
                "orientation_rms_rad": float(np.sqrt(np.mean(angle**2))),
                "mean_penetration_in_contact_m": mean_depth,
                "max_penetration_m": max_depth,
                "reference_dt": reference_dt,
            }
        )
    return results


CONTROLLER_CALLS = 10_000


def bench_controller(export_dir: str | Path, calls: int = CONTROLLER_CALLS) -> dict:
    """Latency of one call of the exported controller graph as a robot makes it: onnxruntime on
    one thread, batch 1, the inputs of the export's reference trajectory in turn (the state
    carried as the robot carries it). Median, 99th percentile and maximum in ms."""
    contract = Contract(export_dir)
    controller = Controller(contract)
    rows = np.load(contract.reference_file)
    sensors = [{name: rows[name][k] for name in controller.sensors} for k in range(len(rows["command"]))]
    seconds = np.empty(calls)
    for i in range(calls):
        k = i % len(sensors)
        if rows["episode_start"][k]:
            controller.reset()
        start = time.perf_counter()
        controller(sensors[k], rows["command"][k])
        seconds[i] = time.perf_counter() - start
    ms = seconds * 1e3
    return {
        "calls": calls,
        "median_ms": float(np.median(ms)),
        "p99_ms": float(np.percentile(ms, 99)),
        "max_ms": float(ms.max()),
    }
