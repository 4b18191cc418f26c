"""``smoothloco compare`` on fake trainers: schedule, threshold, ratios, figure and table."""

import json
from pathlib import Path

import pytest

from smoothloco.cli import main
from smoothloco.train import compare
from smoothloco.train.runs import TrainConfig

TINY = compare.Budget(num_envs=8, evals=4, interval_multiple=1, ppo_factor=4, eval_seconds=2.0, seeds=3)


def fake_trainer(steps_to_learn: dict[str, float], seconds_per_step: dict[str, float]):
    """Return rises linearly from 0 to 10 over ``steps_to_learn[algo]`` environment steps."""
    calls = []

    def train(config: TrainConfig) -> list[dict]:
        calls.append(config)
        per_iteration, every = config.steps_per_iteration, config.run.eval_every
        rows = []
        for it in range(1, config.iterations + 1):
            steps = it * per_iteration
            wall = steps * seconds_per_step[config.algo]
            row = {"iteration": it, "env_steps": steps, "wall_s": 2 * wall, "train_wall_s": wall}
            if it % every == 0:
                seed_offset = 0.1 * config.shac.seed  # seeds differ a little
                ret = 10.0 * min(1.0, steps / steps_to_learn[config.algo]) + seed_offset
                errors = {"eval/lin_vel_error": 1.0 / (1.0 + ret), "eval/yaw_rate_error": 0.1, "eval/fall_rate": 0.0}
                row.update({"eval/episode_return": ret, **errors})
            rows.append(row)
        return rows

    return train, calls


def test_both_algorithms_are_evaluated_on_the_same_env_steps(tmp_path: Path):
    configs = compare.run_configs(TINY, seed=1, out=tmp_path)
    evals = {}
    for algo, c in configs.items():
        assert c.algo == algo and c.shac.seed == c.ppo.seed == 1 and c.run.out == str(tmp_path / f"{algo}-seed1")
        every = c.run.eval_every * c.steps_per_iteration
        evals[algo] = [every * k for k in range(1, c.iterations // c.run.eval_every + 1)]
    assert evals["shac"] == evals["ppo"][: TINY.evals]  # PPO continues on the same schedule
    assert len(evals["ppo"]) == TINY.evals * TINY.ppo_factor


def test_comparison_writes_figure_and_table_with_ratios(tmp_path: Path):
    shac_steps = compare.run_configs(TINY, 0, tmp_path)["shac"].shac.iterations * 8 * 32
    trainer, calls = fake_trainer({"shac": shac_steps / 2, "ppo": shac_steps * 2}, {"shac": 1e-3, "ppo": 1e-4})
    result = compare.compare(tmp_path, TINY, seeds=3, trainer=trainer)

    assert sorted((c.algo, c.shac.seed) for c in calls) == [(a, s) for a in ("ppo", "shac") for s in range(3)]
    for name in ("compare.png", "compare.json", "compare.md"):
        assert (tmp_path / name).stat().st_size > 0
    saved = json.loads((tmp_path / "compare.json").read_text())
    assert saved["ppo_reached_threshold"] is True and saved["threshold"]["value"] == pytest.approx(0.9 * 10.1)
    # Evaluations sit at quarters q of the SHAC run; SHAC's seed mean is 10 min(1, 2q) + 0.1,
    # so it first reaches 9.09 at q = 1/2.
    assert saved["shac"]["env_steps"] == shac_steps // 2
    # PPO learns 4x slower: 10 q / 2 + 0.1 crosses 9.09 at q = 1.8, so the evaluation at q = 2 counts.
    assert saved["ppo"]["env_steps"] == 2 * shac_steps
    assert saved["env_steps_ratio_ppo_over_shac"] == pytest.approx(4.0)
    assert saved["wall_ratio_ppo_over_shac"] == pytest.approx(0.4)  # 10x faster per step
    assert saved["wall_ratio_ppo_over_shac_without_compilation"] == pytest.approx(0.4)
    speeds = saved["shac"]["env_steps_per_s"], saved["ppo"]["env_steps_per_s"]
    assert speeds == (pytest.approx(1e3), pytest.approx(1e4))
    assert len(saved["curves"]["ppo"]["env_steps"]) == TINY.evals * TINY.ppo_factor
    assert "4.0x** the environment steps" in (tmp_path / "compare.md").read_text()


def test_ppo_that_never_reaches_the_threshold_gets_null_ratios(tmp_path: Path):
    trainer, _ = fake_trainer({"shac": 1.0, "ppo": 1e12}, {"shac": 1e-3, "ppo": 1e-4})
    result = compare.compare(tmp_path, TINY, seeds=1, trainer=trainer)
    assert result["ppo_reached_threshold"] is False
    assert result["env_steps_ratio_ppo_over_shac"] is None and result["wall_ratio_ppo_over_shac"] is None
    assert 0 < result["ppo_best_return_fraction_of_shac_final"] < 0.01
    assert result["env_steps_ratio_lower_bound"] == pytest.approx(TINY.ppo_factor * TINY.evals)
    assert "PPO did not reach the threshold" in (tmp_path / "compare.md").read_text()


def test_compare_cli_rejects_bad_arguments(capsys):
    with pytest.raises(SystemExit):
        main(["compare", "--out", "x", "--seeds", "0"])
    assert "expected a whole number >= 1" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["compare", "--out", "x", "--budget", "huge"])
    assert "invalid choice: 'huge'" in capsys.readouterr().err
