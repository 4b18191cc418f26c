"""The standard evaluation: scenarios, the MuJoCo path (through a stand-in player), our
simulator's batched rollout, the report and the command line."""

import json
from pathlib import Path

import numpy as np
import pytest
from fakes import FakePlayer, write_untrained_run

from smoothloco.evaluate.transfer import evaluate_run, rollout_ours, write_report
from smoothloco.measure import metrics
from smoothloco.measure.scenarios import Scenario, run_scenarios, standard_scenarios, training_mismatches
from smoothloco.tasks import GaitConfig, RandomizationConfig, VelocityTaskConfig
from smoothloco.train.runs import TrainConfig, load_run
from smoothloco.train.shac import SHACConfig

TRAJECTORY_KEYS = {
    "time", "command", "base_pos", "base_lin_vel", "base_ang_vel", "gravity", "joint_pos", "joint_vel",
    "torque", "foot_slip", "foot_height", "penetration", "fallen", "power",
}  # fmt: skip


def test_standard_scenarios_cover_commands_pushes_and_mismatch():
    scenarios = standard_scenarios()
    kinds = [s.kind for s in scenarios]
    assert kinds.count("command") == 9 and kinds.count("push") == 32 and kinds.count("mismatch") == 6
    pushes = [s for s in scenarios if s.kind == "push"]
    assert sorted({s.push_speed for s in pushes}) == pytest.approx([0.5, 1.0])
    assert len({round(s.push_direction_deg) for s in pushes}) == 8
    assert {s.friction for s in scenarios if s.kind == "mismatch"} == {0.2, 0.8, 1.25}
    with pytest.raises(ValueError, match="after 0 s"):
        Scenario("x", "command", ((0.0, 1.0, 0.0, 0.0),), 2.0)
    with pytest.raises(ValueError, match="unknown kind"):
        Scenario("x", "dance", ((1.0, 1.0, 0.0, 0.0),), 2.0)


def test_mismatches_are_the_corners_of_the_robots_training_ranges():
    go2 = VelocityTaskConfig.for_robot("go2")
    corners = training_mismatches(go2.randomization)
    assert (0.8, -1.67) in corners and (0.8, 1.67) in corners and (0.2, 1.67) in corners  # Go2 trains with ±1.67 kg
    assert [s.added_base_mass for s in run_scenarios(go2) if s.kind == "mismatch"] == [m for _, m in corners]


def test_mujoco_evaluation_goes_through_the_player_and_reports(tmp_path: Path):
    # the default robot's run, trained on friction 0.5-1.25 (the fake player falls below 0.5)
    task = VelocityTaskConfig(randomization=RandomizationConfig(friction=(0.5, 1.25)))
    (tmp_path / "config.json").write_text(json.dumps(TrainConfig(task=task).to_dict()))
    player = FakePlayer()
    exported = []
    scenarios = run_scenarios(task)
    summary, trajectories = evaluate_run(
        tmp_path, "mujoco", scenarios, player_factory=lambda d: player, exporter=lambda d: exported.append(d) or d
    )
    assert exported == [tmp_path] and len(player.calls) == len(scenarios)
    assert (0.5, 5.0) in player.calls  # friction and added mass reach the player
    assert summary["lin_vel_error"] == pytest.approx(0.0) and summary["yaw_rate_error"] == pytest.approx(0.0)
    assert summary["fall_rate"] == 0.0
    assert summary["push_survival"] == 0.5 and summary["push_survival_by_speed"] == {"0.5": 1.0, "1": 0.0}
    assert summary["mean_penetration"] == pytest.approx(1e-3)
    assert summary["cost_of_transport"] > 0
    files = write_report(tmp_path / "report", "mujoco", summary, scenarios, trajectories)
    saved = json.loads(files["json"].read_text())
    assert {"lin_vel_error", "yaw_rate_error", "fall_rate", "push_survival", "scenarios"} <= set(saved)
    assert all(files[k].stat().st_size > 0 for k in ("tracking", "push_survival", "markdown", "trajectories"))
    assert "| lin. vel. error (m/s) |" in files["markdown"].read_text()


def test_unknown_simulator_is_refused(tmp_path: Path):
    with pytest.raises(ValueError, match="unknown simulator 'bullet'"):
        evaluate_run(tmp_path, "bullet")


@pytest.mark.slow
def test_our_rollout_applies_pushes_friction_and_mass(tmp_path: Path):
    shac = SHACConfig(num_envs=2, horizon=2, critic_minibatches=1, actor_hidden=(8,))
    write_untrained_run(tmp_path / "run", shac)
    scenarios = (
        Scenario("kick", "push", ((0.1, 0.0, 0.0, 0.0),), 0.4, pushes=((0.2, 0.0, 1.0),)),
        Scenario("slippery heavy", "mismatch", ((0.1, 0.3, 0.0, 0.0),), 0.3, friction=0.5, added_base_mass=5.0),
    )
    kick, heavy = rollout_ours(load_run(tmp_path / "run"), "hard", scenarios)
    assert set(kick) == TRAJECTORY_KEYS | {"qpos", "qvel"} and len(kick["time"]) == 20 and len(heavy["time"]) == 15
    metrics.check_trajectory(kick)
    # The lateral kick shows in the sample at 0.2 s, the first the policy sees after it.
    jump = kick["base_lin_vel"][10, 1] - kick["base_lin_vel"][9, 1]
    assert jump == pytest.approx(1.0, abs=0.3)
    assert np.allclose(heavy["command"][5:], (0.3, 0.0, 0.0)) and not heavy["fallen"].any()
    assert np.all(kick["power"] >= 0) and kick["fallen"].dtype == bool


def test_eval_command_line_reports_a_folder_that_is_not_a_run(tmp_path: Path, capsys):
    from smoothloco.commands import build_parser

    args = build_parser().parse_args(["eval", str(tmp_path), "--sim", "hard"])
    assert args.func(args) == 2 and "not a run folder" in capsys.readouterr().err


@pytest.mark.slow
def test_an_export_folder_is_judged_from_its_contract_alone(tmp_path: Path, capsys):
    """Copied away from its run and robot spec, an export carries what its evaluation needs: the
    ranges it trained on (the mismatch corners), its sensors, drives and motors (the robustness
    suite), its mass; only MuJoCo runs it."""
    from smoothloco.commands import build_parser
    from smoothloco.commands.evaluate import export_scenarios
    from smoothloco.deploy.export import EXPORT_FILES, export_run
    from smoothloco.evaluate import robustness
    from smoothloco.robot import load_robot
    from smoothloco.robot_side.testbench import Player

    run = tmp_path / "run"
    task = VelocityTaskConfig(observe_base_lin_vel=False, gait=GaitConfig(recovery_speed=0.0))
    write_untrained_run(run, SHACConfig(num_envs=4, horizon=2, critic_minibatches=2, actor_hidden=(16,)), task=task)
    alone = tmp_path / "alone"
    alone.mkdir()
    for name in EXPORT_FILES:
        (alone / name).write_bytes((export_run(run) / name).read_bytes())
    player = Player(alone)
    assert export_scenarios(player) == run_scenarios(task)
    assert player.mass == pytest.approx(load_robot(task.robot).mass)
    suite, expected = robustness.export_conditions(player), robustness.conditions(task)
    assert list(suite) == list(expected)
    for name, condition in suite.items():  # the drives' figures pass through float32 in the contract
        for field, value in condition.imperfections._asdict().items():
            other = getattr(expected[name].imperfections, field)
            assert value == (pytest.approx(other, rel=1e-6) if isinstance(other, float) else other), (name, field)
    assert "base_lin_vel" not in suite["all combined"].imperfections.sensor_noise  # a blind policy's export
    args = build_parser().parse_args(["eval", str(alone), "--sim", "hard"])
    assert args.func(args) == 2 and "an export folder runs in MuJoCo" in capsys.readouterr().err
