"""Deployment: the ONNX policy is the JAX policy, the standalone player builds the task's
observations and refuses a contract it cannot honour, and frames render."""

import json
import shutil
import subprocess
import sys
from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace

import jax
import jax.numpy as jnp
import mujoco
import numpy as np
import onnxruntime
import pytest
from fakes import write_untrained_run

from smoothloco.cli import main
from smoothloco.deploy import player as player_module
from smoothloco.deploy import render
from smoothloco.deploy.export import mlp_policy, onnx_model
from smoothloco.deploy.play import play
from smoothloco.deploy.player import Player, PolicyContractError, _State
from smoothloco.deploy.render import Clip, render_video, write_video
from smoothloco.robot import anymal_c, load_robot
from smoothloco.sim import SimState
from smoothloco.tasks import OBS_SIZE, GaitConfig, VelocityTask, VelocityTaskConfig
from smoothloco.tasks.velocity import _resting_contact, observation_layout, observation_scales, observation_slice
from smoothloco.train.runs import load_run
from smoothloco.train.shac import SHACConfig

EXPORTED_FILES = ("policy.json", "policy.onnx", "robot.xml")
# JAX warns on every fork; the children here (player, renderer, ffmpeg) exec at once.
pytestmark = pytest.mark.filterwarnings("ignore:os.fork:RuntimeWarning")


def _exported_untrained_run(folder: Path, robot: str, recovery_speed: float = GaitConfig().recovery_speed, **task_changes) -> Path:
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
    """The Go2, without the average velocity error (the ANYmal run observes it, as by default)."""
    return _exported_untrained_run(tmp_path_factory.mktemp("deploy-go2"), "go2", velocity_error_window=0.0)


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


def test_onnx_policy_equals_jax_policy(run_dir: Path):
    run = load_run(run_dir)
    # Random normalizer statistics and O(1) weights, so the actions are far from the untrained ~0.
    keys = iter(jax.random.split(jax.random.PRNGKey(1), 64))
    normalizer, actor = run.params
    normalizer = normalizer.replace(
        mean=jax.random.normal(next(keys), normalizer.mean.shape),
        std=jnp.exp(jax.random.normal(next(keys), normalizer.std.shape)),
    )
    actor = jax.tree.map(lambda x: jax.random.normal(next(keys), x.shape) / np.sqrt(x.shape[0]), actor)
    run = replace(run, params=(normalizer, actor))

    session = onnxruntime.InferenceSession(onnx_model(mlp_policy(run, 12)).SerializeToString())
    # Within 3 standard deviations of the normalizer's mean, the range a policy sees.
    noise = np.random.default_rng(0).normal(0.0, 3.0, (512, OBS_SIZE))
    obs = (np.asarray(normalizer.mean) + np.asarray(normalizer.std) * noise).astype(np.float32)
    exported = session.run(["actions"], {"obs": obs})[0]
    reference = np.asarray(run.policy()(obs, None)[0])
    assert reference.std() > 0.2  # a policy that does something
    np.testing.assert_allclose(exported, reference, atol=1e-5, rtol=0)


def test_onnx_export_of_a_brax_shaped_network():
    """Brax's PPO network: Dense layers named hidden_<i>, 2 x action_size outputs, action = tanh(first half)."""
    rng = np.random.default_rng(0)
    sizes = [48, 32, 32, 32, 24]  # 4 layers: hidden_10 must sort after hidden_2
    names = ["hidden_0", "hidden_2", "hidden_10", "hidden_11"]
    layers = {
        n: {"kernel": rng.normal(0, 0.3, (a, b)), "bias": rng.normal(0, 0.1, b)}
        for n, a, b in zip(names, sizes, sizes[1:])
    }
    normalizer = SimpleNamespace(mean=rng.normal(0, 1, 48), std=np.exp(rng.normal(0, 0.5, 48)))
    run = SimpleNamespace(params=(normalizer, {"params": layers}), run_dir=Path("brax-run"))
    session = onnxruntime.InferenceSession(onnx_model(mlp_policy(run, 12)).SerializeToString())
    obs = rng.normal(0, 1, (64, 48)).astype(np.float32)
    x = (obs - normalizer.mean) / normalizer.std
    for i, name in enumerate(names):
        x = x @ layers[name]["kernel"] + layers[name]["bias"]
        x = np.where(x > 0, x, np.expm1(x)) if i < len(names) - 1 else x
    np.testing.assert_allclose(session.run(["actions"], {"obs": obs})[0], np.tanh(x[:, :12]), atol=1e-5)


@EVERY_EXPORT
def test_export_writes_the_contract(run_fixture: str, request):
    run_dir = request.getfixturevalue(run_fixture)
    contract = json.loads((run_dir / "export" / "policy.json").read_text())
    task = load_run(run_dir).config.task
    robot = load_robot(task.robot)
    assert contract["robot"]["model_hash"] == robot.model_hash
    names = [t["name"] for t in contract["observation"]["terms"]]
    first = ["base_lin_vel"] if task.observe_base_lin_vel else []
    assert names[:3] == [*first, "base_ang_vel", "projected_gravity", "command"][:3]
    assert ("base_lin_vel" in names) == task.observe_base_lin_vel
    scales = np.concatenate([t["scale"] for t in contract["observation"]["terms"]])
    np.testing.assert_array_equal(scales, observation_scales(task))
    actor_input = VelocityTask(task).observation_size
    actor_input = actor_input["state"][0] if task.privileged_critic else actor_input
    assert contract["observation"]["history"] == task.obs_history
    assert contract["observation"]["size"] * task.obs_history == scales.size * task.obs_history == actor_input
    assert contract["joints"]["names"] == list(robot.joint_names)
    np.testing.assert_allclose(contract["joints"]["torque_limit"], robot.torque_limit, rtol=1e-6)  # float32
    assert contract["action"]["scale"] == VelocityTaskConfig.for_robot(robot.name).action_scale
    assert contract["source"]["onnx_max_abs_error"] <= 1e-5


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


def test_player_needs_only_numpy_mujoco_onnxruntime(run_dir: Path):
    """Loaded from its file alone (no package), the player runs and pulls in no JAX and no smoothloco."""
    code = (
        "import importlib.util, sys\n"
        f"spec = importlib.util.spec_from_file_location('player', {player_module.__file__!r})\n"
        "module = importlib.util.module_from_spec(spec); spec.loader.exec_module(module)\n"
        f"module.Player({str(run_dir / 'export')!r}).run(seconds=0.1)\n"
        "print(sorted({m.split('.')[0] for m in sys.modules} & {'jax', 'jaxlib', 'flax', 'brax', 'smoothloco'}))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().splitlines()[-1] == "[]"


def _drop_last_term(c: dict) -> None:
    dropped = c["observation"]["terms"].pop()
    c["observation"]["size"] -= dropped["size"]


@pytest.mark.parametrize(
    "edit, message",
    [
        (_drop_last_term, r"input has shape \['N', 53\]; expected \[N, 50\]"),
        (lambda c: c["observation"].update(size=52), "observation.size is 52, but its terms add up to 53"),
        (lambda c: c["observation"]["terms"][4].update(size=11), "'joint_pos' has size 11; expected 12"),
        (lambda c: c["observation"]["terms"][0].update(name="base_height"), "unknown observation term 'base_height'"),
        (lambda c: c["robot"].update(color="red"), "unknown field robot.color"),
        (lambda c: c["timing"].pop("sim_dt"), "missing field timing.sim_dt"),
        (
            lambda c: c["robot"].update(model_hash="0123456789abcdef"),
            "model hash mismatch.*expects robot.model_hash 0123456789abcdef",
        ),
        (lambda c: c["joints"].update(kp=[80.0] * 11), "joints.kp must hold 12 finite numbers"),
        (lambda c: c["gait"].update(frequency=-1.0), "gait.frequency must be >= 0 Hz"),
        (lambda c: c["gait"]["swing_offsets"].pop(), "gait.swing_offsets must be 2 rows"),
        (lambda c: c["observation"]["velocity_trim"].update(limit=-0.5), "velocity_trim values must be >= 0"),
        (lambda c: c["observation"].update(velocity_error_window=0.0), "velocity_trim has a rate but velocity_error_window is 0"),
    ],
    ids=[
        "obs-size-vs-onnx",
        "obs-size",
        "term-size",
        "unknown-term",
        "unknown-field",
        "missing-field",
        "model-hash",
        "gains",
        "gait-frequency",
        "gait-offsets",
        "trim-limit",
        "trim-without-average",
    ],
)
def test_player_refuses_a_mismatched_contract(run_dir: Path, tmp_path: Path, edit, message: str):
    folder = _copy_export(run_dir, tmp_path / "export")
    contract = json.loads((folder / "policy.json").read_text())
    edit(contract)
    (folder / "policy.json").write_text(json.dumps(contract))
    with pytest.raises(PolicyContractError, match=message):
        Player(folder)


def test_player_refuses_a_garbled_network(run_dir: Path, tmp_path: Path):
    folder = _copy_export(run_dir, tmp_path / "export")
    data = bytearray((folder / "policy.onnx").read_bytes())
    data[-64:] = bytes(64)  # the tail of the weights: the graph may still parse
    (folder / "policy.onnx").write_bytes(bytes(data))
    with pytest.raises(PolicyContractError, match="does not match policy.json source.onnx_sha256"):
        Player(folder)


def test_player_refuses_a_different_robot_model(run_dir: Path, tmp_path: Path):
    folder = _copy_export(run_dir, tmp_path / "export")
    xml = (folder / "robot.xml").read_text()
    (folder / "robot.xml").write_text(xml.replace('friction="0.8 0.02 0.01"', 'friction="1.0 0.02 0.01"'))
    with pytest.raises(PolicyContractError, match="model hash mismatch: robot.xml hashes to"):
        Player(folder)


@EVERY_EXPORT
def test_player_observation_equals_task_observation(run_fixture: str, request):
    """Same state, same command and last action: the player's observation is the task's
    (without the task's sensor noise, which the player leaves to the robot)."""
    run_dir = request.getfixturevalue(run_fixture)
    task = VelocityTask(replace(load_run(run_dir).config.task, obs_noise=0.0))
    key = jax.random.split(jax.random.PRNGKey(2), 4)
    state = jax.jit(task.reset)(key[0])
    # A tilted, moving, airborne start, so every frame rotation and every term is exercised.
    quat = jax.random.normal(key[1], (4,))
    q = state.pipeline_state.q.at[2].set(1.0).at[3:7].set(quat / jnp.linalg.norm(quat))
    v = jax.random.normal(key[2], state.pipeline_state.v.shape)
    state = state.replace(pipeline_state=SimState(q=q, v=v))
    state = jax.jit(task.step)(state, jax.random.uniform(key[3], (12,), minval=-1, maxval=1))

    player = Player(run_dir / "export")
    data = mujoco.MjData(player.model())
    data.qpos[:], data.qvel[:] = np.asarray(state.pipeline_state.q), np.asarray(state.pipeline_state.v)
    phase = float(state.info["gait_phase"])
    command, last_action = np.asarray(state.info["command"]), np.asarray(state.info["last_action"])
    # The average velocity error one step after the reset's zero, as the player updates it.
    average = player.velocity_error_update(np.zeros(3), _State(player, data, command, last_action, phase))
    observes_average = "velocity_error_average" in [name for name, *_ in observation_layout(task.config)]
    assert (player.velocity_error_keep < 1) == observes_average
    observed = player.observe(data, command, last_action, phase, average)
    actor_obs = np.asarray(state.obs["state"] if isinstance(state.obs, dict) else state.obs)
    assert np.abs(actor_obs[:6]).min() > 1e-3  # velocities and gravity are not trivial
    np.testing.assert_allclose(observed, actor_obs[: observed.size], atol=2e-5, rtol=1e-5)  # the newest frame
    if observes_average:
        assert player.terms[-1][1].size == 3 and np.abs(observed[-3:]).min() > 1e-3


def test_player_velocity_trim_equals_the_task_s(run_dir: Path):
    """The same commands and average errors, one control period at a time: the same trim."""
    task = VelocityTask(load_run(run_dir).config.task)
    player = Player(run_dir / "export")
    assert task.config.trims_command and player.trim_rate == task.config.velocity_trim.rate > 0
    walk, slower, stand = [0.5, 0.0, 0.2], [0.3, 0.1, 0.0], [0.05, 0.0, 0.0]
    averages = np.random.default_rng(0).uniform(0.0, 0.3, (75, 3)) * [1.0, -1.0, 1.0]
    averages[25:28] = [0.5, 0.0, 0.0]  # above the freeze: the trim holds still
    commands = [walk] * 40 + [slower] * 15 + [stand] * 20
    info = {"command": jnp.array(walk), "trim_command": jnp.array(walk), "velocity_trim": jnp.zeros(3), "trim_steps": jnp.zeros((), jnp.int32)}
    ours = player_module.VelocityTrim(np.zeros(3), np.array(walk, np.float32), 0)
    update = jax.jit(task.velocity_trim_update)
    trims = []
    for command, average in zip(commands, averages):
        info.update(command=jnp.array(command, jnp.float32), velocity_error_average=jnp.array(average, jnp.float32))
        info.update(update(info))
        ours = player.velocity_trim_update(ours, np.array(command, np.float32), average.astype(np.float32))
        np.testing.assert_allclose(ours.trim, info["velocity_trim"], atol=1e-6)
        trims.append(ours.trim)
    trims = np.array(trims)
    assert np.abs(trims[39]).min() > 0.01 and np.abs(trims[40:42]).max() == 0.0  # restarted at the new command
    assert np.ptp(trims[24:28], axis=0).max() == 0.0  # frozen
    assert np.abs(trims[54]).min() > 0.001 and np.abs(trims[55:]).max() == 0.0  # standing, past the hold too


def test_player_command_term_carries_the_trim_it_integrates(run_dir: Path, monkeypatch):
    """End to end: in a run, the command the policy sees is the command plus the trim
    replayed from the trajectory's own velocities (the average error, then the trim)."""
    player = Player(run_dir / "export")
    inputs = []
    act = player.act
    monkeypatch.setattr(player, "act", lambda obs: inputs.append(obs) or act(obs))
    traj = player.run(commands=[(0.02, 0.3, 0.0, 0.0)], seconds=1.0)
    task_config = load_run(run_dir).config.task
    seen = np.array(inputs)[:, observation_slice(task_config, "command")]
    measured = np.column_stack([traj["base_lin_vel"][:, :2], traj["base_ang_vel"][:, 2]])
    average, trim = np.zeros(3), player_module.VelocityTrim(np.zeros(3), traj["command"][0], 0)
    for k in range(1, len(seen)):
        average = player.velocity_error_keep * average + (1 - player.velocity_error_keep) * (traj["command"][k] - measured[k])
        trim = player.velocity_trim_update(trim, traj["command"][k], average)
        np.testing.assert_allclose(seen[k], traj["command"][k] + trim.trim, atol=1e-5)
    assert np.abs(trim.trim[0]) > 0.01  # the robot fell short and the trim grew


def test_player_feeds_the_policy_its_last_observations_newest_first(blind_run_dir: Path, monkeypatch):
    player = Player(blind_run_dir / "export")
    assert player.history == 3
    inputs = []
    act = player.act
    monkeypatch.setattr(player, "act", lambda obs: inputs.append(obs) or act(obs))
    player.run(commands=[(0.0, 0.5, 0.0, 0.0)], seconds=0.06)
    first, second, third = (np.split(x, 3) for x in inputs)
    np.testing.assert_array_equal(first[1], first[0])  # the first frame fills the history
    np.testing.assert_array_equal(first[2], first[0])
    assert np.abs(second[0] - first[0]).max() > 1e-4
    np.testing.assert_array_equal(second[1:], [first[0], first[0]])
    np.testing.assert_array_equal(third[1:], [second[0], first[0]])


def test_player_brings_the_clock_back_for_a_pushed_robot_as_the_task_does(run_dir: Path, tmp_path: Path):
    folder = _copy_export(run_dir, tmp_path / "export")
    contract = json.loads((folder / "policy.json").read_text())
    contract["gait"]["recovery_speed"] = 0.3
    (folder / "policy.json").write_text(json.dumps(contract))
    player = Player(folder)
    task = VelocityTask(VelocityTaskConfig(gait=GaitConfig(recovery_speed=0.3)))
    for command in ([0.0, 0.0, 0.0], [0.05, 0.0, 0.0], [0.5, 0.0, 0.0]):
        for velocity in ([0.0, 0.0, 0.0], [0.2, -0.2, 0.5], [0.0, 0.4, 0.0], [-1.0, 0.0, 0.0]):
            expected = bool(task.at_rest(jnp.asarray(command), jnp.asarray(velocity)))
            assert player.at_rest(np.asarray(command), np.asarray(velocity)) == expected, (command, velocity)
            assert (np.abs(player.clock_observation(0.3, np.asarray(command), np.asarray(velocity))).max() == 0) == expected


@BOTH_ROBOTS
@pytest.mark.parametrize("phase", [0.0, 0.1, 0.25, 0.6, 0.9])
def test_player_gait_offsets_equal_task_gait_offsets(run_fixture: str, request, phase: float):
    run_dir = request.getfixturevalue(run_fixture)
    task = VelocityTask(load_run(run_dir).config.task)
    expected = np.asarray(task.gait_offset(jnp.asarray(phase)))
    np.testing.assert_allclose(Player(run_dir / "export").gait_offset(phase), expected, atol=1e-6)
    assert (np.abs(expected).max() > 0.1) == (0.0 < phase < 0.5 or phase > 0.5)  # swinging except at 0 and 0.5


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


def test_a_clock_only_policy_adds_no_offsets_anywhere(tmp_path: Path):
    """Generator off, clock on (the self-stepping mode): the task adds nothing to the actions,
    the contract carries the clock's frequency with all-zero offsets, and the player observes
    the clock as the task does."""
    run = tmp_path / "run"
    shac = SHACConfig(num_envs=4, horizon=4, critic_minibatches=2, actor_hidden=(16,))
    task_config = VelocityTaskConfig(gait=GaitConfig(frequency=2.0, hip_amplitude=0.0))
    write_untrained_run(run, shac, task=task_config)
    assert main(["export", str(run)]) == 0
    contract = json.loads((run / "export" / "policy.json").read_text())
    assert contract["gait"]["frequency"] == 2.0
    assert np.all(np.asarray(contract["gait"]["swing_offsets"]) == 0.0)

    task = VelocityTask(task_config)
    player = Player(run / "export")
    state = task.reset(jax.random.PRNGKey(0))
    data = mujoco.MjData(player.model())
    data.qpos[:], data.qvel[:] = np.asarray(state.pipeline_state.q), np.asarray(state.pipeline_state.v)
    for phase in (0.0, 0.1, 0.3, 0.55, 0.8):
        assert np.all(np.asarray(task.gait_offset(jnp.asarray(phase))) == 0.0)
        assert np.all(player.gait_offset(phase) == 0.0)
        info = {**state.info, "gait_phase": jnp.asarray(phase)}
        expected = task._observe(state.pipeline_state, info, _resting_contact(None), jax.random.PRNGKey(0), noise=False)
        observed = player.observe(data, np.asarray(info["command"]), np.asarray(info["last_action"]), phase)
        np.testing.assert_allclose(observed, np.asarray(expected), atol=1e-5)
    # Standing (zero command): both hide the clock, so standing is one input whatever the phase.
    standing = {**state.info, "command": jnp.zeros(3), "gait_phase": jnp.asarray(0.3)}
    expected = task._observe(state.pipeline_state, standing, _resting_contact(None), jax.random.PRNGKey(0), noise=False)
    observed = player.observe(data, np.zeros(3), np.asarray(standing["last_action"]), 0.3)
    clock = observation_slice(task_config, "gait_clock")
    assert np.all(np.asarray(expected)[clock] == 0.0) and np.all(observed[clock] == 0.0)
    np.testing.assert_allclose(observed, np.asarray(expected), atol=1e-5)


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
    old["version"] = player_module.CONTRACT_VERSION - 1
    del old["motors"]
    contract.write_text(json.dumps(old))
    with pytest.raises(PolicyContractError):
        Player(run / "export")
    assert Player(exported(run)).contract["version"] == player_module.CONTRACT_VERSION
