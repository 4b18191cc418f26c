"""Bad input stops at the door: a robot spec, a run configuration, an export and an experiment
folder are each parsed into checked values before anything is written or computed. A refusal
is exit status 2 and one short line naming the file and the field; a wrong answer with exit
status 0 is never an option."""

from __future__ import annotations

import hashlib
import json
import shutil
from dataclasses import replace
from pathlib import Path

import pytest
from fakes import write_untrained_run

from smoothloco.commands import main
from smoothloco.commands import train as train_cli
from smoothloco.deploy.export import ExportError, export_run, exported
from smoothloco.experiments import compare, study
from smoothloco.robot.loading import ASSETS, load_robot
from smoothloco.robot_side.testbench import Player, PolicyContractError
from smoothloco.tasks import VelocityTaskConfig
from smoothloco.train.checkpoint import CHECKPOINT_NAME
from smoothloco.train.run_folder import SUMMARY_NAME
from smoothloco.train.runs import TrainConfig, check_same_settings
from smoothloco.train.shac import SHACConfig

MAX_LINE = 1000  # characters of a refusal: one line, whatever the input's size

# JAX warns on every fork; the player's children exec at once.
pytestmark = pytest.mark.filterwarnings("ignore:os.fork:RuntimeWarning")


def refused_in_one_line(capsys, code: int) -> str:
    """The refusal's line, after checking it is exit status 2 and one short line on stderr."""
    err = capsys.readouterr().err
    assert code == 2, err
    assert err.startswith("error: ") and err.count("\n") == 1 and len(err) <= MAX_LINE, err[:2000]
    return err


# -- robot spec ----------------------------------------------------------------------------------
@pytest.fixture
def spec(tmp_path: Path) -> Path:
    for name in ("go2.toml", "go2.xml"):
        shutil.copy(ASSETS / name, tmp_path / name)
    return tmp_path / "go2.toml"


def _edit(path: Path, old: str, new: str) -> Path:
    text = path.read_text()
    assert old in text, old
    path.write_text(text.replace(old, new, 1))
    load_robot.cache_clear()
    return path


END = "45.43,\n]\n"  # the end of the Go2's spec: a [task] table goes after it


@pytest.mark.parametrize(
    "old, new, message",
    [
        (
            'feet = ["FL_foot", "FR_foot", "RL_foot", "RR_foot"]',
            "feet = [1, 2, 3, 4]",
            "feet: expected a list of names",
        ),
        ("kp = 20.0", 'kp = ["a", "b"]', "kp: expected a number or a list of numbers"),
        ("kp = 20.0", "kp = true", "kp: expected a number or a list of numbers"),
        ("0.1, 0.8, -1.5,\n", "[0.1, 0.8], -1.5,\n", "default_pose: expected a list of numbers"),
        ("kd = 0.5", "kd = 1e999", "kd: expected one or 12 finite positive numbers"),
        (END, END + "[task]\nbase_height_target = nan\n", "base_height_target must be finite"),
        (END, END + '[task]\nbase_height_target = "tall"\n', "base_height_target: expected a finite number"),
        (END, END + "[task]\nmin_base_height = true\n", "min_base_height: expected a finite number"),
        (END, END + "[task]\nmin_base_hight = 0.15\n", "unknown setting 'min_base_hight'"),
        (END, END + '[task.pushes]\nmax_speed = "fast"\n', "pushes.max_speed: expected a finite number"),
        (END, END + "[task.randomization]\nfriction = [0.3]\n", "randomization.friction: expected a list of 2 numbers"),
    ],
)
def test_the_robot_check_refuses_what_train_refuses(spec: Path, capsys, old, new, message):
    """`smoothloco robot SPEC` reads the spec's [task] table as `train` does; neither says
    "ready to train" nor writes a config.json for a spec the other refuses."""
    _edit(spec, old, new)
    err = refused_in_one_line(capsys, main(["robot", str(spec)]))
    assert message in err and str(spec) in err
    out = spec.parent / "run"
    refused_in_one_line(capsys, main(["train", "--robot", str(spec), "--out", str(out)]))
    assert not out.exists()


def test_a_spec_that_is_not_utf8_is_one_short_line(spec: Path, capsys):
    spec.write_bytes(b"\xff\xfe" + b"\x80" * 5_000_000)
    err = refused_in_one_line(capsys, main(["robot", str(spec)]))
    assert "not UTF-8" in err and str(spec) in err


def test_an_mjcf_that_includes_a_missing_file_names_its_path(spec: Path, capsys):
    """Includes resolve from the MJCF's folder; a missing one is named by the path looked at."""
    _edit(spec.with_suffix(".xml"), "<worldbody>", '<include file="extra.xml"/><worldbody>')
    err = refused_in_one_line(capsys, main(["robot", str(spec)]))
    assert "includes 'extra.xml', which is not a file" in err and str((spec.parent / "extra.xml").resolve()) in err


# -- run configuration ---------------------------------------------------------------------------
@pytest.fixture
def no_training(monkeypatch):
    """``train`` replaced by a recorder: a refusal must come before it."""
    calls = []
    monkeypatch.setattr(train_cli, "train", lambda config, resume: calls.append(config) or (None, None, []))
    return calls


def _saved(tmp_path: Path, change) -> Path:
    saved = TrainConfig().to_dict()
    change(saved)
    path = tmp_path / "config.json"
    path.write_text(json.dumps(saved))
    return path


@pytest.mark.parametrize(
    "change, message",
    [
        (lambda c: c["shac"].update(iterations=5.7), "shac.iterations: expected a whole number, got 5.7"),
        (lambda c: c["shac"].update(iterations=True), "shac.iterations: expected a whole number, got True"),
        (
            lambda c: c["task"]["reward_weights"].update(alive="x"),
            "task.reward_weights.alive: expected a finite number",
        ),
        (lambda c: c["task"].update(privileged_critic=1), "task.privileged_critic: expected true or false"),
        (lambda c: c.update(comment="tuned"), "top level: unknown setting 'comment'"),
        (lambda c: c["task"]["gait"].update(colour="red"), "task.gait: unknown setting 'colour'"),
        (lambda c: c["task"].update(commands=[1, 2]), "task.commands: expected a table of settings"),
        (lambda c: c["shac"].update(actor_hidden=[64, "x"]), "shac.actor_hidden[1]: expected a whole number"),
        (lambda c: c["run"].update(eval_seconds=10**400), "run.eval_seconds: expected a finite number"),
    ],
)
def test_a_bad_config_file_is_refused_before_anything_is_written(tmp_path: Path, capsys, no_training, change, message):
    out = tmp_path / "new"
    err = refused_in_one_line(capsys, main(["train", "--config", str(_saved(tmp_path, change)), "--out", str(out)]))
    assert message in err and "config.json" in err
    assert not no_training and not out.exists()


def test_a_config_that_is_not_utf8_is_one_short_line(tmp_path: Path, capsys, no_training):
    path = tmp_path / "config.json"
    path.write_bytes(b"{" + b"\xff" * 5_000_000 + b"}")
    err = refused_in_one_line(capsys, main(["train", "--config", str(path), "--out", str(tmp_path / "new")]))
    assert "not UTF-8" in err and not no_training


def test_a_valid_config_file_still_trains(tmp_path: Path, capsys, no_training):
    assert main(["train", "--config", str(_saved(tmp_path, lambda c: None)), "--out", str(tmp_path / "new")]) == 0
    assert len(no_training) == 1 and no_training[0].shac == TrainConfig().shac


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--task.sim_dt=5e-324"], "sim_dt must be >= 1e-05 s"),  # 0.02 / 5e-324 substeps: inf
        (["--task.sim_dt=1e-6", "--task.control_dt=1e-6"], "sim_dt must be >= 1e-05 s"),
        (["--task.control_dt=3600", "--task.sim_dt=1"], "control_dt in (0, 1] s"),
        (["--run.eval_seconds=1e308"], "run.eval_seconds must be longer than"),
        (["--shac.seed=99999999999"], "shac.seed: expected a whole number within"),
    ],
)
def test_extreme_values_are_one_line_not_an_overflow(tmp_path: Path, capsys, no_training, argv, message):
    out = tmp_path / "new"
    err = refused_in_one_line(capsys, main(["train", "--out", str(out), *argv]))
    assert message in err and not no_training and not out.exists()


# -- exported contract ---------------------------------------------------------------------------
def _untrained_run(folder: Path, seed: int) -> Path:
    shac = SHACConfig(num_envs=4, horizon=4, critic_minibatches=2, actor_hidden=(16, 16))
    write_untrained_run(folder, shac, seed=seed, task=VelocityTaskConfig(velocity_error_window=0.0))
    export_run(folder)
    return folder


@pytest.fixture(scope="module")
def two_runs(tmp_path_factory) -> tuple[Path, Path]:
    """Two runs of the same robot and settings, different policies, each exported."""
    root = tmp_path_factory.mktemp("two-runs")
    return _untrained_run(root / "a", seed=0), _untrained_run(root / "b", seed=1)


def test_eval_refuses_an_export_of_another_run(two_runs, tmp_path: Path, capsys):
    """An export copied from another run of the same robot would be scored in this run's
    name; it is refused, and an export of the run itself is used."""
    a, b = two_runs
    run = tmp_path / "a"
    shutil.copytree(a, run)
    shutil.rmtree(run / "export")
    shutil.copytree(b / "export", run / "export")
    with pytest.raises(ExportError, match="records another checkpoint"):
        exported(run)
    err = refused_in_one_line(capsys, main(["eval", str(run), "--sim", "mujoco", "--out", str(tmp_path / "report")]))
    assert "smoothloco export" in err and not (tmp_path / "report").exists()
    assert exported(a) == a / "export"  # its own export


def test_an_export_without_its_checkpoint_record_is_written_again(two_runs, tmp_path: Path):
    run = tmp_path / "run"
    shutil.copytree(two_runs[0], run)
    contract = json.loads((run / "export" / "policy.json").read_text())
    del contract["source"]["checkpoint_sha256"]
    (run / "export" / "policy.json").write_text(json.dumps(contract))
    exported(run)
    assert "checkpoint_sha256" in json.loads((run / "export" / "policy.json").read_text())["source"]


def _contract_edit(two_runs, tmp_path: Path, change) -> Path:
    folder = tmp_path / "export"
    shutil.copytree(two_runs[0] / "export", folder)
    contract = json.loads((folder / "policy.json").read_text())
    change(contract)
    (folder / "policy.json").write_text(json.dumps(contract))
    return folder


@pytest.mark.parametrize(
    "change, message",
    [
        (lambda c: c["source"].pop("onnx_sha256"), "source.onnx_sha256 must be the sha256"),
        (lambda c: c["source"].update(onnx_sha256=None), "source.onnx_sha256 must be the sha256"),
        (lambda c: c["joints"].update(kp=[0.0] * 12), "joints.kp must hold numbers > 0"),
        (lambda c: c["joints"].update(kp=[-80.0] * 12), "joints.kp must hold numbers > 0"),
        (lambda c: c["joints"].update(kd=[-2.0] * 12), "joints.kd must hold numbers >= 0"),
        (lambda c: c["joints"].update(torque_limit=[-80.0] * 12), "joints.torque_limit must hold numbers > 0"),
        (lambda c: c["joints"].update(kp=[True] * 12), "joints.kp must be a list of numbers"),
        (lambda c: c["robot"].pop("model_hash"), "missing field robot.model_hash"),
        (lambda c: c["robot"].update(foot_geoms=[]), "robot.foot_geoms must name at least one geom"),
        (lambda c: c["joints"]["default_pose"].__setitem__(0, 3.4e38), "default_pose puts \\['LF_HAA'\\] outside"),
        (
            lambda c: c["motors"].update(velocity_limit=[5e-324] * 12, saturation_torque=[80.0] * 12),
            "motors.velocity_limit must be >= 0.01 rad/s",
        ),
        (lambda c: c["joints"].update(names=[["LF_HAA"]] * 12), "joints.names must be a list of names"),
        (lambda c: c["timing"].update(control_dt=1e-9, sim_dt=1e-9), "timing.sim_dt must be >= 1e-05 s"),
        (lambda c: c["controller"].update(state_size=0), "controller.state_size must be >= 1"),
        (lambda c: c["controller"]["inputs"].reverse(), "controller.inputs must end with the command and the state"),
    ],
)
def test_the_player_refuses_a_contract_it_cannot_honour(two_runs, tmp_path: Path, change, message):
    folder = _contract_edit(two_runs, tmp_path, change)
    with pytest.raises(PolicyContractError, match=message) as refused:
        Player(folder)
    assert "\n" not in str(refused.value) and len(str(refused.value)) <= MAX_LINE


def test_the_player_refuses_flipped_bytes_even_without_a_recorded_checksum(two_runs, tmp_path: Path):
    """Deleting the checksum does not turn the check off: the contract is then refused."""
    folder = _contract_edit(two_runs, tmp_path, lambda c: c["source"].pop("onnx_sha256"))
    onnx = bytearray((folder / "controller.onnx").read_bytes())
    onnx[-10] ^= 0xFF
    (folder / "controller.onnx").write_bytes(bytes(onnx))
    with pytest.raises(PolicyContractError, match="onnx_sha256"):
        Player(folder)


# -- experiment folders --------------------------------------------------------------------------
QUICK, FULL = compare.BUDGETS["quick"], compare.BUDGETS["full"]


def _finished(config: TrainConfig) -> Path:
    run_dir = Path(config.run.out)
    run_dir.mkdir(parents=True)
    (run_dir / "config.json").write_text(json.dumps(config.to_dict()))
    (run_dir / "metrics.csv").write_text("iteration,env_steps\n1,64\n")
    (run_dir / SUMMARY_NAME).write_text("{}")
    return run_dir


def test_compare_reuses_a_finished_run_only_with_the_asked_settings(tmp_path: Path, capsys, monkeypatch):
    monkeypatch.setattr(compare, "train", lambda *a, **k: pytest.fail("nothing should train"))
    _finished(compare.run_configs(QUICK, 0, tmp_path)["shac"])
    assert compare.default_trainer(compare.run_configs(QUICK, 0, tmp_path)["shac"]) == [
        {"iteration": 1.0, "env_steps": 64.0}
    ]
    assert "reusing the finished run" in capsys.readouterr().out
    with pytest.raises(ValueError, match="holds a run with other settings"):
        compare.default_trainer(compare.run_configs(FULL, 0, tmp_path)["shac"])
    err = refused_in_one_line(capsys, main(["compare", "--out", str(tmp_path), "--budget", "full"]))
    assert "holds a run with other settings" in err and " asked, " in err and "another --out" in err


@pytest.mark.parametrize("algo, resumed, said", [
    ("shac", True, "continuing the interrupted run"), ("ppo", False, "restarting the interrupted ppo run"),
])  # fmt: skip
def test_compare_takes_up_an_interrupted_run_and_says_how(tmp_path: Path, capsys, monkeypatch, algo, resumed, said):
    """SHAC continues from its checkpoint; Brax's PPO cannot, so it starts again from scratch."""
    config = compare.run_configs(QUICK, 0, tmp_path)[algo]
    run_dir = Path(config.run.out)
    run_dir.mkdir(parents=True)
    (run_dir / "config.json").write_text(json.dumps(config.to_dict()))
    (run_dir / CHECKPOINT_NAME).write_bytes(b"checkpoint")
    (run_dir / "tensorboard").mkdir()
    calls = []

    def fake_train(c, resume):
        calls.append(resume)
        assert (run_dir / CHECKPOINT_NAME).exists() == resume  # a restart starts from nothing
        return None, None, [{"iteration": c.iterations}]

    monkeypatch.setattr(compare, "train", fake_train)
    compare.default_trainer(config)
    assert calls == [resumed] and said in capsys.readouterr().out
    assert (run_dir / "tensorboard").exists() == resumed


def test_compare_refuses_a_changed_run_before_touching_it(tmp_path: Path, monkeypatch):
    config = compare.run_configs(QUICK, 0, tmp_path)["ppo"]
    other = replace(config, ppo=replace(config.ppo, learning_rate=1e-2))
    run_dir = Path(config.run.out)
    run_dir.mkdir(parents=True)
    (run_dir / "config.json").write_text(json.dumps(other.to_dict()))
    (run_dir / CHECKPOINT_NAME).write_bytes(b"checkpoint")
    monkeypatch.setattr(compare, "train", lambda *a, **k: pytest.fail("nothing should train"))
    with pytest.raises(ValueError, match="ppo.learning_rate 0.01 there"):
        compare.default_trainer(config)
    assert (run_dir / CHECKPOINT_NAME).read_bytes() == b"checkpoint"


def test_a_run_of_the_same_ground_written_another_way_is_the_same_run(tmp_path: Path):
    """A run saved before the terrain setting (hills_height, hills_wavelength) is the same run as
    one asked for with the default's short form; a different ground is refused by name."""
    config = compare.run_configs(QUICK, 0, tmp_path)["shac"]
    run_dir = Path(config.run.out)
    run_dir.mkdir(parents=True)
    saved = config.to_dict()
    saved["task"]["terrain"] = "hills:height=0.08,wavelength=1.3"
    (run_dir / "config.json").write_text(json.dumps(saved))
    check_same_settings(run_dir, replace(config, task=replace(config.task, terrain="hills:height=0.08")))
    with pytest.raises(
        ValueError, match="task.terrain 'hills:height=0.08,wavelength=1.3' there, 'hills:height=0.1' asked"
    ):
        check_same_settings(run_dir, replace(config, task=replace(config.task, terrain="hills:height=0.1")))


def test_a_study_resumed_with_another_budget_is_refused(tmp_path: Path, capsys, monkeypatch):
    """`study contact --resume --budget full` on a quick study neither reuses its runs nor
    continues their checkpoints."""
    monkeypatch.setattr(study, "train", lambda *a, **k: pytest.fail("nothing should train"))
    quick = study.BUDGETS["quick"]
    config = study.train_config(quick.arms[0], 0, quick, tmp_path / "runs")
    _finished(config)
    with pytest.raises(ValueError, match="holds a run with other settings"):
        study.run_contact_study(tmp_path, study.BUDGETS["full"], resume=True)
    argv = ["study", "contact", "--out", str(tmp_path), "--resume", "--budget", "full"]
    err = refused_in_one_line(capsys, main(argv))
    assert "another --out" in err


def test_the_player_refuses_a_model_that_refers_to_other_files(two_runs, tmp_path: Path):
    """The model hash covers robot.xml's own bytes: an include beside it would escape it."""
    folder = _contract_edit(two_runs, tmp_path, lambda c: None)
    xml = (folder / "robot.xml").read_text().replace("<worldbody>", '<include file="more.xml"/><worldbody>', 1)
    (folder / "robot.xml").write_text(xml)
    (folder / "more.xml").write_text("<mujoco/>")
    contract = json.loads((folder / "policy.json").read_text())
    contract["robot"]["model_hash"] = hashlib.sha256(xml.encode()).hexdigest()[:16]
    (folder / "policy.json").write_text(json.dumps(contract))
    with pytest.raises(PolicyContractError, match="refers to the file 'more.xml', which robot.model_hash does not"):
        Player(folder)


def test_a_run_is_compared_on_the_settings_of_the_algorithm_it_trains(tmp_path: Path):
    """A PPO run is reused whatever SHAC's settings now are (its config records both); a PPO
    setting that differs is refused by name."""
    config = compare.run_configs(QUICK, 0, tmp_path)["ppo"]
    run_dir = Path(config.run.out)
    run_dir.mkdir(parents=True)
    saved = config.to_dict()
    saved["shac"]["actor_lr"] = 0.123
    (run_dir / "config.json").write_text(json.dumps(saved))
    check_same_settings(run_dir, config)
    with pytest.raises(ValueError, match="ppo.learning_rate"):
        check_same_settings(run_dir, replace(config, ppo=replace(config.ppo, learning_rate=1e-2)))
    shac = replace(config, algo="shac")
    with pytest.raises(ValueError, match="algo 'ppo' there, 'shac' asked"):
        check_same_settings(run_dir, shac)
