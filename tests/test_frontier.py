"""``smoothloco study frontier`` on a fake trainer: points, schedule, walking, growing a sweep."""

import json
from pathlib import Path

import pytest

from smoothloco.commands import main
from smoothloco.experiments import frontier
from smoothloco.train.runs import TrainConfig

TINY = frontier.FrontierBudget(env_steps=16_384, eval_interval=4_096, eval_seconds=2.0, seeds=2)


def fake_trainer(steps_to_walk: dict[int, int]):
    """The grid's linear error falls from 1 to 0 over ``steps_to_walk[num_envs]`` steps; seed 1
    walks one evaluation later than seed 0; each environment step takes 1 ms of training time."""
    calls = []

    def train(config: TrainConfig) -> list[dict]:
        calls.append(config)
        rows = []
        learn = steps_to_walk[config.shac.num_envs] + config.shac.seed * TINY.eval_interval
        for it in range(1, config.iterations + 1):
            steps = it * config.steps_per_iteration
            row = {"iteration": it, "env_steps": steps, "wall_s": steps * 2e-3, "train_wall_s": steps * 1e-3}
            if it % config.run.eval_every == 0:
                lin = max(0.0, 1.0 - steps / learn) + (0.1 if steps >= learn else 0.0)
                row.update({"eval/episode_return": 1 - lin, "eval/lin_vel_error": lin, "eval/yaw_rate_error": 0.05,
                            "eval/fall_rate": 0.0})  # fmt: skip
            rows.append(row)
        return rows

    return train, calls


def test_axes_are_parsed_typed_and_crossed():
    axes = [frontier.parse_axis("shac.num_envs=32,64"), frontier.parse_axis("task.contact=hard,smooth")]
    assert axes[0] == ("shac.num_envs", [32, 64])
    points = frontier.grid(axes)
    assert len(points) == 4 and points[1] == {"shac.num_envs": 32, "task.contact": "smooth"}
    assert frontier.point_name(points[1]) == "num_envs=32,task.contact=smooth"
    assert frontier.grid([]) == [{}] and frontier.point_name({}) == "default"
    assert frontier.parse_axis("task.sharpness=300,1000;500,500")[1] == [(300.0, 1000.0), (500.0, 500.0)]
    assert frontier.parse_axis("task.reward_weights.feet_swing_height=0,3")[1] == [0.0, 3.0]


@pytest.mark.parametrize(
    "text, message",
    [
        ("shac.num_envs", "expected SETTING=VALUE"),
        ("shac.num_env=4", "has no setting 'num_env'"),
        ("run.out=x", "accepted settings are task.<field> and shac.<field>"),
        ("shac.num_envs=4.5", "shac.num_envs"),
        ("shac.env_grad_clip=x", "expected"),
    ],
)
def test_bad_axes_name_what_is_accepted(text: str, message: str):
    with pytest.raises(ValueError, match=message):
        frontier.parse_axis(text)


def test_every_point_runs_the_same_steps_and_is_evaluated_at_the_same_steps(tmp_path: Path):
    for envs, horizon in ((8, 16), (32, 32), (128, 32)):
        config = frontier.run_config({"shac.num_envs": envs, "shac.horizon": horizon}, 1, TINY, tmp_path)
        assert config.iterations * config.steps_per_iteration == TINY.env_steps
        assert config.run.eval_every * config.steps_per_iteration == TINY.eval_interval
        assert config.shac.seed == 1 and not config.run.deploy
    with pytest.raises(ValueError, match="must divide the evaluation interval"):
        frontier.run_config({"shac.num_envs": 48}, 0, TINY, tmp_path)
    with pytest.raises(ValueError, match="num_envs"):  # the configuration's own range check
        frontier.run_config({"shac.num_envs": 0}, 0, TINY, tmp_path)


def test_sweep_reports_steps_and_wall_clock_to_walking_and_grows(tmp_path: Path):
    trainer, calls = fake_trainer({8: 4_096, 32: 8_192})
    result = frontier.run_frontier(tmp_path, [{"shac.num_envs": 8}], TINY, trainer=trainer)
    (row,) = result["points"]
    # seed 0 walks at the first evaluation after 4,096 steps (error 0.1), seed 1 one evaluation later
    assert row["walking"]["per_seed_env_steps"] == [4_096, 8_192]
    assert row["walking"]["per_seed_train_wall_s"] == pytest.approx([4.096, 8.192])
    assert row["final"]["lin_vel_error"]["mean"] == pytest.approx(0.1)

    # Growing the sweep on the same folder: the earlier point is kept (here read from the fake's
    # rows again, since a fake trainer leaves no run folders behind), the new one added.
    frontier.run_frontier(tmp_path, [{"shac.num_envs": 8}, {"shac.num_envs": 32}], TINY, trainer=trainer)
    saved = json.loads((tmp_path / "frontier.json").read_text())
    assert [p["point"] for p in saved["points"]] == ["num_envs=8", "num_envs=32"]
    assert saved["points"][1]["walking"]["per_seed_env_steps"] == [8_192, 12_288]
    assert len(calls) == 6 and (tmp_path / "frontier.png").stat().st_size > 0
    table = (tmp_path / "frontier.md").read_text()
    assert "| num_envs=32 | 2 | 0.01 (0.01-0.01) |" in table


def test_a_point_that_never_walks_is_reported_as_such(tmp_path: Path):
    trainer, _ = fake_trainer({8: 10**9})
    (row,) = frontier.run_frontier(tmp_path, [{"shac.num_envs": 8}], TINY, trainer=trainer)["points"]
    assert not row["walking"]["reached_threshold"] and row["walking"]["env_steps"] is None
    assert "| num_envs=8 | 2 | 0/2 seeds |" in (tmp_path / "frontier.md").read_text()


def test_command_refuses_a_bad_axis_before_training(tmp_path: Path, capsys):
    assert main(["study", "frontier", "--out", str(tmp_path / "f"), "--vary", "shac.num_envs=48"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: point num_envs=48") and "\n" not in err
    assert not (tmp_path / "f").exists()
