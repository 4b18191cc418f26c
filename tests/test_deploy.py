"""Deployment: the exported graph is the JAX controller step, the robot side runs it alone and
refuses a contract it cannot honour, the documented loop is the one that runs, and frames render."""

import inspect
import json
import math
import shutil
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import jax
import jax.numpy as jnp
import mujoco
import numpy as np
import onnxruntime
import pytest
from fakes import write_untrained_run

from smoothloco import robot_side
from smoothloco.commands import main
from smoothloco.deploy import render
from smoothloco.deploy.export import controller_function, deployed_controller, onnx_controller
from smoothloco.deploy.render import Clip, render_video, write_video
from smoothloco.evaluate.play import play
from smoothloco.experiments import bench
from smoothloco.robot import anymal_c, load_robot
from smoothloco.robot_side import loop
from smoothloco.robot_side.contract import CONTRACT_VERSION, PolicyContractError
from smoothloco.robot_side.loop import control_loop
from smoothloco.robot_side.testbench import Player, SimulatedRobot
from smoothloco.tasks import GaitConfig, HeightScanConfig, VelocityTask, VelocityTaskConfig, controller
from smoothloco.train.runs import load_run
from smoothloco.train.shac import SHACConfig

EXPORTED_FILES = ("policy.json", "controller.onnx", "robot.xml", "reference.npz")
# JAX warns on every fork; the children here (player, renderer, ffmpeg) exec at once.
pytestmark = pytest.mark.filterwarnings("ignore:os.fork:RuntimeWarning")


def _exported_untrained_run(
    folder: Path, robot: str, recovery_speed: float = GaitConfig().recovery_speed, **task_changes
) -> Path:
    """An untrained run (random initial policy) of ``robot`` with the trot generator on,
    exported through the command line."""
    run = folder / "run"
    shac = SHACConfig(num_envs=4, horizon=4, critic_minibatches=2, actor_hidden=(32, 32))
    task = VelocityTaskConfig.for_robot(robot)
    gait = replace(task.gait, frequency=2.0, hip_amplitude=0.3, recovery_speed=recovery_speed)
    task = replace(task, gait=gait, **task_changes)
    write_untrained_run(run, shac, task=task)
    assert main(["export", str(run)]) == 0
    return run


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory) -> Path:
    return _exported_untrained_run(tmp_path_factory.mktemp("deploy"), "anymal_c")


@pytest.fixture(scope="module")
def go2_run_dir(tmp_path_factory) -> Path:
    """The Go2, without the average velocity error (the ANYmal run observes it, as by default),
    with a height scan of 3 x 2 points."""
    scan = HeightScanConfig(x=(-0.1, 0.2, 0.4), y=(-0.1, 0.1))
    return _exported_untrained_run(
        tmp_path_factory.mktemp("deploy-go2"), "go2", velocity_error_window=0.0, height_scan=scan
    )


@pytest.fixture(scope="module")
def blind_run_dir(tmp_path_factory) -> Path:
    """The actor without base linear velocity (proprioception and IMU, the last 3 frames), the
    critic with it."""
    folder = tmp_path_factory.mktemp("deploy-blind")
    return _exported_untrained_run(
        folder, "anymal_c", recovery_speed=0.0, observe_base_lin_vel=False, privileged_critic=True, obs_history=3
    )


BOTH_ROBOTS = pytest.mark.parametrize("run_fixture", ["run_dir", "go2_run_dir"])
EVERY_EXPORT = pytest.mark.parametrize("run_fixture", ["run_dir", "go2_run_dir", "blind_run_dir"])


def _copy_export(run_dir: Path, target: Path) -> Path:
    target.mkdir()
    for name in EXPORTED_FILES:
        shutil.copy(run_dir / "export" / name, target / name)
    return target


@EVERY_EXPORT
def test_export_writes_the_contract(run_fixture: str, request):
    run_dir = request.getfixturevalue(run_fixture)
    contract = json.loads((run_dir / "export" / "policy.json").read_text())
    task = load_run(run_dir).config.task
    robot = load_robot(task.robot)
    assert contract["robot"]["model_hash"] == robot.model_hash
    inputs = [(i["name"], i["size"]) for i in contract["controller"]["inputs"]]
    velocity = [("base_lin_vel", 3)] if task.observe_base_lin_vel else []
    points = [list(p) for p in task.height_scan.points]
    scan = [("height_scan", len(points))] if points else []
    state_size = sum(controller.state_sizes(deployed_controller(VelocityTask(task))).values())
    expected = [("joint_pos", 12), ("joint_vel", 12), ("base_ang_vel", 3), ("gravity", 3), *velocity, *scan]
    assert inputs == [*expected, ("command", 3), ("state", state_size)]
    assert contract["controller"]["state_size"] == state_size and contract["height_scan"]["points"] == points
    assert contract["joints"]["names"] == list(robot.joint_names)
    np.testing.assert_allclose(contract["joints"]["torque_limit"], robot.torque_limit, rtol=1e-6)  # float32
    assert contract["source"]["onnx_max_abs_error"] <= 1e-5
    assert not {"observation", "action", "gait"} & set(contract)  # inside the graph now


def _rollout(step, names: list[str], rows: dict) -> tuple[np.ndarray, np.ndarray]:
    """``step`` (JAX or ONNX, arrays in, arrays out) driven over the recorded inputs, its state
    chained from the all-zero state at each episode's start."""
    targets, states = [], []
    for k in range(len(rows["state"])):
        state = np.zeros_like(rows["state"][0]) if rows["episode_start"][k] else state
        target, state = step(*(rows[name][k] for name in names[:-1]), state)
        targets.append(np.asarray(target))
        states.append(np.asarray(state))
    return np.array(targets), np.array(states)


@EVERY_EXPORT
def test_the_graph_is_the_jax_controller_step_over_the_recorded_reference(run_fixture: str, request):
    """The export's reference.npz: two episodes in MuJoCo (a reset), each with a command change;
    the graph reproduces every recorded output, stepping its own state, within 1e-5."""
    run_dir = request.getfixturevalue(run_fixture)
    rows = dict(np.load(run_dir / "export" / "reference.npz"))
    player = Player(run_dir / "export")
    names = player.inputs
    assert rows["episode_start"].sum() == 2 and rows["episode_start"][0]
    changes = np.flatnonzero(np.any(np.diff(rows["command"], axis=0) != 0, axis=1))
    assert len(changes) >= 3  # a change in each episode, and the change at the reset
    session = player.controller.session
    targets, states = _rollout(lambda *x: session.run(None, dict(zip(names, x))), names, rows)
    np.testing.assert_allclose(targets, rows["joint_targets"], atol=1e-5, rtol=0)
    np.testing.assert_allclose(states, rows["next_state"], atol=1e-5, rtol=0)
    np.testing.assert_allclose(
        states[:-1][~rows["episode_start"][1:]], rows["state"][1:][~rows["episode_start"][1:]], atol=1e-5
    )


def test_the_graph_of_a_policy_far_from_zero_is_its_jax_step(run_dir: Path):
    """Random normalizer statistics and O(1) weights, so the actions are far from the untrained
    ~0: converted, the controller step equals the JAX one over the reference's inputs."""
    run = load_run(run_dir)
    keys = iter(jax.random.split(jax.random.PRNGKey(1), 64))
    normalizer, actor = run.params
    normalizer = normalizer.replace(
        mean=jax.random.normal(next(keys), normalizer.mean.shape),
        std=jnp.exp(jax.random.normal(next(keys), normalizer.std.shape)),
    )
    actor = jax.tree.map(lambda x: jax.random.normal(next(keys), x.shape) / np.sqrt(x.shape[0]), actor)
    run = replace(run, params=(normalizer, actor))
    step, names, sizes = controller_function(run, VelocityTask(run.config.task))
    session = onnxruntime.InferenceSession(onnx_controller(step, names, sizes).SerializeToString())
    rows = dict(np.load(run_dir / "export" / "reference.npz"))
    exported = _rollout(lambda *x: session.run(None, dict(zip(names, x))), names, rows)
    reference = _rollout(jax.jit(step), names, rows)
    assert np.std(reference[0] - rows["joint_targets"]) > 0.1  # the actions differ from the untrained policy's
    for ours, theirs in zip(exported, reference):
        np.testing.assert_allclose(ours, theirs, atol=1e-5, rtol=0)


@BOTH_ROBOTS
def test_player_runs_from_the_exported_files_alone(run_fixture: str, request, tmp_path: Path):
    run_dir = request.getfixturevalue(run_fixture)
    player = Player(_copy_export(run_dir, tmp_path / "robot"))
    frames = []
    traj = player.run(
        commands=[(0.0, 0.5, 0.0, 0.0), (1.0, 0.0, 0.0, 0.5)],
        seconds=2.0,
        pushes=[(1.0, 0.3, 0.0)],
        friction=0.6,
        added_base_mass=2.0,
        frame_callback=lambda m, d, c: frames.append(d.time),
    )
    steps = 100  # 2 s at 50 Hz
    assert (
        traj["time"].shape == (steps,)
        and traj["joint_pos"].shape == (steps, 12)
        and traj["foot_slip"].shape == (steps, 4)
    )
    for name, values in traj.items():
        assert len(values) == steps and np.all(np.isfinite(values)), name
    assert traj["fallen"].dtype == bool and np.all(traj["penetration"] >= 0) and np.all(traj["power"] >= 0)
    np.testing.assert_array_equal(traj["command"][[0, 49, 50]], [[0.5, 0, 0], [0.5, 0, 0], [0, 0, 0.5]])
    assert np.all(np.abs(traj["torque"]) <= load_robot(load_run(run_dir).config.task.robot).torque_limit)
    assert abs(len(frames) - 60) <= 1  # ~30 Hz


def test_an_export_folder_plays_alone(run_dir: Path, tmp_path: Path, monkeypatch):
    """Copied away from its run (no config.json, no checkpoint, no robot spec), an export plays."""
    monkeypatch.setattr(render, "BACKENDS", ("no-such-backend",))  # the trajectory is what is checked
    folder = _copy_export(run_dir, tmp_path / "alone")
    result = play(folder, commands=[(0.0, 0.5, 0.0, 0.0)], seconds=0.2, out=tmp_path / "alone.mp4")
    assert np.load(result.trajectory)["joint_pos"].shape == (10, 12)


def test_the_robot_side_needs_only_numpy_mujoco_onnxruntime(run_dir: Path, tmp_path: Path):
    """Copied under another name, the robot-side folder runs an export and pulls in no JAX and
    no smoothloco."""
    shutil.copytree(
        Path(robot_side.__file__).parent, tmp_path / "beside_the_export", ignore=shutil.ignore_patterns("__pycache__")
    )
    code = (
        f"import sys; sys.path.insert(0, {str(tmp_path)!r})\n"
        "from beside_the_export.testbench import Player\n"
        f"Player({str(run_dir / 'export')!r}).run(seconds=0.1)\n"
        "print(sorted({m.split('.')[0] for m in sys.modules} & {'jax', 'jaxlib', 'flax', 'brax', 'smoothloco'}))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().splitlines()[-1] == "[]"


def test_the_documented_robot_loop_is_the_one_that_runs(run_dir: Path):
    """docs/usage.md shows ``control_loop`` as it is; run on the bench's simulated robot it walks
    the trajectory of the bench itself (the same graph, sensors and PD)."""
    usage = (Path(__file__).resolve().parents[1] / "docs" / "usage.md").read_text()
    source = inspect.getsource(loop.control_loop)
    assert source in usage and len(source.splitlines()) <= 30
    player = Player(run_dir / "export")
    robot = SimulatedRobot(player)
    control_loop(run_dir / "export", robot, lambda: (0.5, 0.0, 0.0), periods=50)
    bench = player.run(commands=[(0.0, 0.5, 0.0, 0.0)], seconds=1.02)  # sample 50: the state after 50 periods
    np.testing.assert_allclose(robot.data.qpos[player.qpos_ids], bench["joint_pos"][50], atol=1e-9)
    assert bench["base_pos"][50, 0] != bench["base_pos"][0, 0]


def test_bench_times_the_exported_step_as_a_robot_calls_it(run_dir: Path, capsys):
    figures = bench.bench_controller(run_dir / "export", calls=300)
    assert figures["calls"] == 300 and 0 < figures["median_ms"] <= figures["p99_ms"] <= figures["max_ms"]
    assert main(["bench", "controller"]) == 2
    assert "bench controller needs --export DIR" in capsys.readouterr().err


def _old_contract(c: dict) -> None:
    c["version"] = CONTRACT_VERSION - 1


@pytest.mark.parametrize(
    "edit, message",
    [
        (
            lambda c: c["controller"]["inputs"][0].update(size=11),
            "controller input 'joint_pos' has size 11; expected 12",
        ),
        (lambda c: c["controller"]["inputs"][0].update(name="foot_force"), "unknown controller input 'foot_force'"),
        (lambda c: c["controller"].update(state_size=10), "controller input 'state' has size .*; expected 10"),
        (lambda c: c["controller"]["inputs"].pop(2), "controller.onnx has inputs .*policy.json describes inputs"),
        (lambda c: c["robot"].update(color="red"), "unknown field robot.color"),
        (lambda c: c["timing"].pop("sim_dt"), "missing field timing.sim_dt"),
        (
            lambda c: c["robot"].update(model_hash="0123456789abcdef"),
            "model hash mismatch.*expects robot.model_hash 0123456789abcdef",
        ),
        (lambda c: c["joints"].update(kp=[80.0] * 11), "joints.kp must hold 12 finite numbers"),
        (
            _old_contract,
            f"version {CONTRACT_VERSION - 1}; this reader reads 'smoothloco-policy' version {CONTRACT_VERSION}.*export "
            "the run again",
        ),
        (
            lambda c: c["height_scan"].update(points=[[0.1], [0.2, 0.0]]),
            r"height_scan.points must be a list of \[x, y\] pairs of finite numbers",
        ),
        (
            lambda c: c["height_scan"].update(points=[[0.1, 0.0]]),
            "height_scan.points lists 1 points, but no controller input reads the height scan",
        ),
    ],
    ids=[
        "input-size",
        "unknown-input",
        "state-size",
        "inputs-vs-onnx",
        "unknown-field",
        "missing-field",
        "model-hash",
        "gains",
        "old-version",
        "scan-points",
        "scan-without-input",
    ],  # fmt: skip
)
def test_player_refuses_a_mismatched_contract(run_dir: Path, tmp_path: Path, edit, message: str):
    folder = _copy_export(run_dir, tmp_path / "export")
    contract = json.loads((folder / "policy.json").read_text())
    edit(contract)
    (folder / "policy.json").write_text(json.dumps(contract))
    with pytest.raises(PolicyContractError, match=message):
        Player(folder)


@pytest.mark.parametrize("sim_dt, bench_dt", [(0.0025, 0.0025), (0.005, 0.005), (0.01, 0.005), (0.02, 0.005)])
def test_the_bench_never_steps_coarser_than_5_ms(run_dir: Path, tmp_path: Path, sim_dt: float, bench_dt: float):
    """A policy trained at a coarse step is judged on the same fine MuJoCo physics, its PD
    applied at every bench step as a real drive's; a finer training step is kept."""
    folder = _copy_export(run_dir, tmp_path / "export")
    contract = json.loads((folder / "policy.json").read_text())
    contract["timing"]["sim_dt"] = sim_dt
    (folder / "policy.json").write_text(json.dumps(contract))
    player = Player(folder)
    assert player.bench_dt == pytest.approx(bench_dt) and player.bench_steps == round(0.02 / bench_dt)
    assert player.mj_model.opt.timestep == pytest.approx(bench_dt)
    assert player.model(bumps=0.02).opt.timestep == pytest.approx(bench_dt)
    times = []
    player.run(seconds=0.06, frame_callback=lambda m, d, c: times.append(d.time))
    assert times[:2] == pytest.approx([0.0, math.ceil(1 / 30 / bench_dt) * bench_dt])  # MuJoCo's clock, step by step


def test_player_refuses_a_garbled_graph(run_dir: Path, tmp_path: Path):
    folder = _copy_export(run_dir, tmp_path / "export")
    data = bytearray((folder / "controller.onnx").read_bytes())
    data[-64:] = bytes(64)  # the tail of the weights: the graph may still parse
    (folder / "controller.onnx").write_bytes(bytes(data))
    with pytest.raises(PolicyContractError, match="does not match policy.json source.onnx_sha256"):
        Player(folder)


def test_player_refuses_a_different_robot_model(run_dir: Path, tmp_path: Path):
    folder = _copy_export(run_dir, tmp_path / "export")
    xml = (folder / "robot.xml").read_text()
    (folder / "robot.xml").write_text(xml.replace('friction="0.8 0.02 0.01"', 'friction="1.0 0.02 0.01"'))
    with pytest.raises(PolicyContractError, match="model hash mismatch: robot.xml hashes to"):
        Player(folder)


def test_rendered_frames_are_not_empty(tmp_path: Path):
    robot = anymal_c()
    qpos = np.tile(robot.init_qpos(), (3, 1))
    qpos[:, 0] = [0.0, 0.1, 0.2]
    video = render_video(Clip(robot.xml, qpos, ["frame 0", "frame 1", "frame 2"], fps=30.0), tmp_path / "clip.mp4")
    if video is None:
        pytest.skip("offscreen rendering unavailable here (neither EGL nor OSMesa could make a GL context)")
    import imageio.v3 as iio

    frames = iio.imread(video)
    assert frames.shape == (3, 480, 640, 3)
    assert frames[0].std() > 10  # a scene, not a blank image
    assert frames[0][:30, :200].mean() < frames[0][60:].mean()  # the dark caption box


def test_video_falls_back_to_gif_without_ffmpeg(tmp_path: Path, monkeypatch):
    import imageio_ffmpeg
    from PIL import Image

    def no_ffmpeg():
        raise RuntimeError("no ffmpeg binary for this platform")

    monkeypatch.setattr(imageio_ffmpeg, "get_ffmpeg_exe", no_ffmpeg)
    frames = [np.full((48, 64, 3), 40 * i, np.uint8) for i in range(3)]
    video = write_video(iter(frames), tmp_path / "clip.mp4", fps=30.0)
    assert video == tmp_path / "clip.gif" and Image.open(video).n_frames == 3


def test_play_without_rendering_still_writes_the_trajectory(run_dir: Path, tmp_path: Path, monkeypatch, capsys):
    monkeypatch.delenv("MUJOCO_GL", raising=False)
    monkeypatch.setattr(render, "BACKENDS", ("no-such-backend",))
    assert main(["play", str(run_dir), "--seconds", "0.2", "--out", str(tmp_path / "v.mp4")]) == 0
    out = capsys.readouterr().out
    assert out.count("no video: offscreen rendering unavailable (no-such-backend: ") == 1
    assert (tmp_path / "v.npz").is_file() and not (tmp_path / "v.mp4").exists()


def test_play_cli_writes_trajectory_and_video(run_dir: Path, tmp_path: Path, capsys):
    out = tmp_path / "walk.mp4"
    assert (
        main(
            [
                "play",
                str(run_dir),
                "--seconds",
                "0.5",
                "--commands",
                "0,0.5,0,0",
                "--push",
                "0.2,0.3,0",
                "--out",
                str(out),
            ]
        )
        == 0
    )
    traj = np.load(out.with_suffix(".npz"))
    assert traj["base_pos"].shape == (25, 3) and np.all(traj["command"][:, 0] == 0.5)
    assert "wrote" in capsys.readouterr().out


def test_play_cli_rejects_bad_input(run_dir: Path, capsys):
    with pytest.raises(SystemExit):
        main(["play", str(run_dir), "--commands", "0,0.5,0"])
    assert "--commands: expected 4 comma-separated numbers per group, got '0,0.5,0'" in capsys.readouterr().err
    for seconds in ("1e9", "0", "nan"):
        with pytest.raises(SystemExit):
            main(["play", str(run_dir), "--seconds", seconds])
        assert f"--seconds: expected seconds > 0 and <= 3600, got '{seconds}'" in capsys.readouterr().err
    assert main(["play", str(run_dir), "--commands", "2,0.5,0,0;1,0,0,0"]) == 2
    assert "commands must be in time order" in capsys.readouterr().err
    assert main(["export", str(run_dir / "nothing")]) == 2
    assert "no config.json" in capsys.readouterr().err


def test_play_on_a_terrain_walks_and_draws_that_ground(run_dir: Path, tmp_path: Path, monkeypatch):
    """``play --terrain`` runs the export on MuJoCo's model of that ground (the start stands on
    it) and hands the renderer the same model; bad terrains and other simulators are refused."""
    drawn = {}
    monkeypatch.setattr(
        "smoothloco.evaluate.play.render_video", lambda clip, out: drawn.setdefault("xml", clip.xml) and None
    )
    out = tmp_path / "stairs.mp4"
    assert (
        main(["play", str(run_dir), "--seconds", "0.2", "--terrain", "stairs:rise=0.15,start=-0.2", "--out", str(out)])
        == 0
    )
    assert main(["play", str(run_dir), "--seconds", "0.2", "--out", str(tmp_path / "flat.mp4")]) == 0
    on_stairs, on_flat = np.load(out.with_suffix(".npz")), np.load(tmp_path / "flat.npz")
    assert on_stairs["base_pos"][0, 2] >= on_flat["base_pos"][0, 2] + 0.15  # standing on the first step
    model = mujoco.MjModel.from_xml_string(drawn["xml"])
    assert sum(model.geom(i).name.startswith("terrain_box") for i in range(model.ngeom)) == 4
    assert main(["play", str(run_dir), "--terrain", "pit"]) == 2
    assert main(["play", str(run_dir), "--sim", "hard", "--terrain", "stairs"]) == 2


def test_play_in_our_simulator_pushes_when_the_player_does(run_dir: Path, tmp_path: Path, monkeypatch):
    """Our simulator's scripted rollout (shared with ``eval``) puts a push at ``t`` into the state
    sampled at ``t``, as the MuJoCo player does."""
    monkeypatch.setattr(render, "BACKENDS", ("no-such-backend",))  # the trajectory is what is checked
    result = play(run_dir, sim="hard", commands=[(0.0, 0.0, 0.0, 0.0)], pushes=[(0.2, 1.0, 0.0)], seconds=0.4,
                  out=tmp_path / "push.mp4")  # fmt: skip
    traj = np.load(result.trajectory)
    k = int(np.argmin(np.abs(traj["time"] - 0.2)))
    world_vx = traj["qvel"][:, 0]
    assert world_vx[k] - world_vx[k - 1] > 0.8
    assert traj["qpos"].shape == (len(traj["time"]), 19)


def test_an_export_of_an_older_contract_is_written_again_before_an_evaluation(run_dir: Path, tmp_path: Path):
    """After an upgrade, ``eval --sim mujoco`` re-exports a run whose policy.json the new player
    would refuse, instead of failing on it."""
    from smoothloco.deploy.export import exported

    run = tmp_path / "run"
    shutil.copytree(run_dir, run)
    contract = run / "export" / "policy.json"
    old = json.loads(contract.read_text())
    old["version"] = CONTRACT_VERSION - 1
    del old["controller"]
    contract.write_text(json.dumps(old))
    with pytest.raises(PolicyContractError):
        Player(run / "export")
    assert Player(exported(run)).contract["version"] == CONTRACT_VERSION
