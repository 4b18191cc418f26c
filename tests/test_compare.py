"""``smoothloco compare`` on fake trainers: schedule, threshold, ratios, figure and table."""

import json
from pathlib import Path

import pytest

from smoothloco.commands import main
from smoothloco.experiments import compare
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
    compare.compare(tmp_path, TINY, seeds=3, trainer=trainer)

    assert sorted((c.algo, c.shac.seed) for c in calls) == [(a, s) for a in ("ppo", "shac") for s in range(3)]
    for name in ("compare.png", "compare.json", "compare.md"):
        assert (tmp_path / name).stat().st_size > 0
    saved = json.loads((tmp_path / "compare.json").read_text())
    assert saved["threshold_kind"] == "walking" and saved["seeds"] == 3 and saved["ppo_config"]["num_envs"] == 8
    # Evaluations sit at quarters q of the SHAC run. Walking needs lin. error 1 / (1 + return)
    # <= 0.15, a return >= 5.67: SHAC's 10 min(1, 2q) + 0.1 seed first at q = 1/2 on every seed,
    # PPO's 5q + 0.1 seed first at q = 5/4.
    walking = saved["thresholds"]["walking"]
    assert walking["shac"]["per_seed_env_steps"] == [shac_steps // 2] * 3
    assert walking["ppo"]["env_steps"] == pytest.approx(1.25 * shac_steps)
    assert saved["env_steps_ratio_ppo_over_shac"] == walking["env_steps_ratio_ppo_over_shac"] == pytest.approx(2.5)
    assert saved["wall_ratio_ppo_over_shac"] == pytest.approx(0.25)  # 10x faster per step
    # The return threshold beside it: 90 % of SHAC's final seed mean 10.1, on the seed-mean curves.
    by_return = saved["thresholds"]["return"]
    assert by_return["value"] == pytest.approx(0.9 * 10.1)
    assert by_return["shac"]["env_steps"] == shac_steps // 2  # 10 min(1, 2q) + 0.1 reaches 9.09 at q = 1/2
    assert by_return["ppo"]["env_steps"] == 2 * shac_steps  # 5q + 0.1 crosses 9.09 at q = 1.8
    assert by_return["env_steps_ratio_ppo_over_shac"] == pytest.approx(4.0)
    speeds = saved["shac"]["env_steps_per_s"], saved["ppo"]["env_steps_per_s"]
    assert speeds == (pytest.approx(1e3), pytest.approx(1e4))
    assert len(saved["curves"]["ppo"]["env_steps"]) == TINY.evals * TINY.ppo_factor
    table = (tmp_path / "compare.md").read_text()
    assert "2.5x** the environment steps" in table and "4.0x** the environment steps" in table


def test_ppo_that_never_reaches_the_threshold_gets_null_ratios(tmp_path: Path):
    trainer, _ = fake_trainer({"shac": 1.0, "ppo": 1e12}, {"shac": 1e-3, "ppo": 1e-4})
    result = compare.compare(tmp_path, TINY, seeds=1, trainer=trainer)
    assert result["ppo_reached_threshold"] is False
    assert result["env_steps_ratio_ppo_over_shac"] is None and result["wall_ratio_ppo_over_shac"] is None
    assert result["thresholds"]["return"]["ppo"]["reached_threshold"] is False
    assert result["env_steps_ratio_lower_bound"] == pytest.approx(TINY.ppo_factor * TINY.evals)
    assert "PPO did not reach the threshold" in (tmp_path / "compare.md").read_text()


def test_compare_cli_rejects_bad_arguments(capsys):
    with pytest.raises(SystemExit):
        main(["compare", "--out", "x", "--seeds", "0"])
    assert "expected a whole number >= 1" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["compare", "--out", "x", "--budget", "huge"])
    assert "invalid choice: 'huge'" in capsys.readouterr().err


def test_ppo_variants_share_the_schedule_and_the_headline_uses_the_most_sample_efficient(tmp_path: Path):
    variants = ("legged_gym", "more_epochs", "half_batch")
    configs = compare.run_configs(TINY, seed=0, out=tmp_path, variants=variants)
    assert list(configs) == ["shac", "ppo", "ppo-more_epochs", "ppo-half_batch"]
    assert configs["ppo-more_epochs"].ppo.num_updates_per_batch == 10 and configs["ppo-half_batch"].ppo.num_envs == 4
    ends = {name: c.iterations * c.steps_per_iteration for name, c in configs.items()}
    every = {name: c.run.eval_every * c.steps_per_iteration for name, c in configs.items()}
    assert len(set(every.values())) == 1 and ends["ppo-half_batch"] == ends["ppo"] == TINY.ppo_factor * ends["shac"]

    shac_steps = ends["shac"]
    learn = {"shac": shac_steps / 2, "ppo": shac_steps * 2, "ppo-more_epochs": shac_steps, "ppo-half_batch": 1e12}
    calls = []

    def trainer(config):  # return rises linearly over ``learn[run]`` environment steps
        calls.append(Path(config.run.out).name)
        name = Path(config.run.out).name.rsplit("-seed", 1)[0]
        return [{"iteration": it, "env_steps": it * config.steps_per_iteration, "train_wall_s": 1e-3 * it,
                 "eval/episode_return": (ret := 10.0 * min(1.0, it * config.steps_per_iteration / learn[name])),
                 "eval/lin_vel_error": 1.0 / (1.0 + ret), "eval/yaw_rate_error": 0.1, "eval/fall_rate": 0.0}
                for it in range(config.run.eval_every, config.iterations + 1, config.run.eval_every)]  # fmt: skip

    result = compare.compare(tmp_path, TINY, seeds=1, trainer=trainer, variants=variants)
    assert calls == ["shac-seed0", "ppo-seed0", "ppo-more_epochs-seed0", "ppo-half_batch-seed0"]
    # Walking needs a return >= 5.67: SHAC at q = 1/2 of its run, more_epochs at q = 3/4, legged_gym at 5/4.
    assert result["ppo_variant"] == "more_epochs" and result["ppo_config"]["num_minibatches"] == 8
    assert result["env_steps_ratio_ppo_over_shac"] == pytest.approx(1.5)
    table = result["ppo_variants"]
    assert table["legged_gym"]["walking"]["env_steps_ratio_ppo_over_shac"] == pytest.approx(2.5)
    assert table["half_batch"]["walking"]["ppo_reached_threshold"] is False
    assert set(result["curves"]) == {"shac", "ppo", "ppo-more_epochs", "ppo-half_batch"}
    text = (tmp_path / "compare.md").read_text()
    assert (
        "| more_epochs | num_minibatches 8, num_updates_per_batch 10 |" in text
        and "| half_batch | num_envs 4 |" in text
    )


def test_an_interrupted_training_stops_the_comparison(tmp_path: Path, monkeypatch):
    """A SIGTERM'd training returns early with its checkpoint: the comparison must stop, not
    count the half-trained run."""
    config = compare.run_configs(TINY, 0, tmp_path)["shac"]
    monkeypatch.setattr(compare, "train", lambda c, resume: (None, None, [{"iteration": 1}]))
    with pytest.raises(compare.ComparisonInterrupted, match="stopped at iteration 1"):
        compare.default_trainer(config)
    with pytest.raises(SystemExit):
        main(["compare", "--out", "x", "--ppo-variants", "legged_gym,fastest"])


def test_ppo_can_be_evaluated_on_every_kth_of_shacs_evaluation_steps(tmp_path: Path):
    budget = compare.Budget(num_envs=None, evals=4, interval_multiple=1, ppo_factor=4, eval_seconds=2.0, seeds=1,
                            ppo_eval_stride=2)  # fmt: skip
    configs = compare.run_configs(budget, seed=0, out=tmp_path)
    shac, ppo = configs["shac"], configs["ppo"]
    assert shac.shac.num_envs == compare.SHACConfig().num_envs and ppo.ppo.num_envs == compare.PPOConfig().num_envs
    shac_every, ppo_every = (c.run.eval_every * c.steps_per_iteration for c in (shac, ppo))
    assert ppo_every == 2 * shac_every
    assert ppo.iterations * ppo.steps_per_iteration == 4 * shac.iterations * shac.steps_per_iteration
    with pytest.raises(ValueError, match="multiple of its evaluation stride 3"):
        compare.Budget(num_envs=None, evals=4, interval_multiple=1, ppo_factor=1, eval_seconds=2.0, seeds=1,
                       ppo_eval_stride=3)  # fmt: skip
