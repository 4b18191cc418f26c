"""The contact-model study: its pipeline with stand-in training and evaluation, and the
gradient-quality estimator for real on small problems."""

import json
from dataclasses import replace
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from smoothloco.commands import build_parser
from smoothloco.experiments import study
from smoothloco.experiments.gradients import GradientSettings, gradient_quality

SUMMARY_KEYS = ("lin_vel_error", "yaw_rate_error", "fall_rate", "push_survival")


def fake_train(config, resume=False):
    """A 'run' whose return and errors depend only on its contact model; it leaves the
    ``summary.json`` that a finished training leaves."""
    run_dir = Path(config.run.out)
    run_dir.mkdir(parents=True, exist_ok=resume)
    ret = {"hard": 1.0, "soft": 3.0, "smooth": 4.0}[config.task.contact] + 0.1 * config.shac.seed
    (run_dir / "summary.json").write_text(json.dumps({"episode_return": ret, "env_steps": 64}))
    return None, None, [{"iteration": config.shac.iterations, "env_steps": 64, "eval/episode_return": ret}]


def fake_evaluate(run_dir: Path, sim: str, scenarios: tuple) -> dict:
    assert len(scenarios) == 19  # the quick budget's subset
    trained = run_dir.name.split("-")[0]
    error = 0.1 if sim != "mujoco" or trained == "smooth" else 0.5  # soft and hard policies degrade in MuJoCo
    summary = {
        "lin_vel_error": error,
        "yaw_rate_error": error / 2,
        "fall_rate": 0.5 if error > 0.1 else 0.0,
        "push_survival": 0.75,
        "foot_slip": 0.02,
        "mean_penetration": 0.004 if sim == "mujoco" else 0.01,
        "cost_of_transport": 0.6,
        "scenarios": [],
    }
    (run_dir / f"eval-{sim}").mkdir()
    (run_dir / f"eval-{sim}" / "summary.json").write_text(json.dumps({"sim": sim, **summary}))
    return summary


def fake_gradients(arms, settings):
    return {a.name: {"windows": list(settings.windows), **{k: [0.5] * len(settings.windows) for k in
                ("batch_cosine", "relative_std", "zo_cosine", "grad_norm")}} for a in arms}  # fmt: skip


def test_study_writes_its_table_claims_and_figures(tmp_path: Path):
    budget = replace(study.BUDGETS["quick"], seeds=2)
    out = tmp_path / "study"
    result = study.run_contact_study(
        out, budget, train_fn=fake_train, evaluate_fn=fake_evaluate, gradient_fn=fake_gradients
    )
    saved = json.loads((out / "study.json").read_text())
    assert saved["table"] == json.loads(json.dumps(result["table"]))
    assert set(saved["table"]) == {"hard", "soft", "smooth"} and len(saved["runs"]) == 6
    for run in saved["runs"]:  # own simulator, hard and MuJoCo, each with the required metrics
        assert {"own", "hard", "mujoco"} <= set(run) and all(k in run["mujoco"] for k in SUMMARY_KEYS)
    smooth = saved["table"]["smooth"]
    assert smooth["train_return"]["mean"] == pytest.approx(4.05) and smooth["train_return"]["n"] == 2
    assert saved["table"]["soft"]["lin_vel_error_mujoco"]["mean"] == pytest.approx(0.5)
    claims = saved["claims"]
    assert claims["soft_mujoco_lin_vel_error_increase"] == pytest.approx(0.4)
    assert claims["soft_mujoco_fall_rate_increase"] == pytest.approx(0.5)
    assert claims["hard_learning_gap_return"] == pytest.approx(3.0)
    assert claims["smooth_mujoco_lin_vel_error_increase"] == pytest.approx(0.0)
    assert saved["task_overrides"]["soft"] == {
        "contact": "soft",
        "sim_dt": 0.0025,
        "soft_stiffness": 2e4,
        "soft_damping": 200.0,
    }
    assert len(saved["budget"]["scenarios"]) == 19
    text = (out / "study.md").read_text()
    assert "| 10.000 ± 0.000 | 4.000 ± 0.000 |" in text  # penetration own sim, MuJoCo in mm
    assert "| arm | training return |" in text and "| soft |" in text and "learning gap" in text
    assert "soft (contact soft, sim_dt 0.0025, soft_stiffness 20000, soft_damping 200)" in text
    assert (out / "transfer.png").stat().st_size > 0 and (out / "gradients.png").stat().st_size > 0


def test_interrupted_study_resumes_without_repeating_finished_work(tmp_path: Path):
    budget = replace(study.BUDGETS["quick"], seeds=2)
    out = tmp_path / "study"
    calls = []

    def interrupted_train(config, resume=False):
        if config.task.contact == "soft" and config.shac.seed == 1:  # the 4th of 6 trainings
            Path(config.run.out).mkdir(parents=True)
            (Path(config.run.out) / "checkpoint.msgpack").write_bytes(b"partial")
            raise KeyboardInterrupt
        return fake_train(config, resume)

    def counting_train(config, resume=False):
        calls.append((config.task.contact, config.shac.seed, resume))
        return fake_train(config, resume)

    def counting_evaluate(run_dir, sim, scenarios):
        calls.append((run_dir.name, sim))
        return fake_evaluate(run_dir, sim, scenarios)

    with pytest.raises(KeyboardInterrupt):
        study.run_contact_study(
            out, budget, train_fn=interrupted_train, evaluate_fn=fake_evaluate, gradient_fn=fake_gradients
        )
    args = build_parser().parse_args(["study", "contact", "--out", str(out), "--seeds", "2"])
    assert args.func(args) == 2  # not without --resume
    result = study.run_contact_study(
        out, budget, train_fn=counting_train, evaluate_fn=counting_evaluate, gradient_fn=fake_gradients, resume=True
    )
    # The unfinished training continues from its checkpoint; the two after it start afresh.
    trained = [c for c in calls if len(c) == 3]
    assert trained == [("soft", 1, True), ("smooth", 0, False), ("smooth", 1, False)]
    assert [c for c in calls if len(c) == 2][:2] == [("soft-seed1", "soft"), ("soft-seed1", "hard")]
    assert len(result["runs"]) == 6 and result["table"]["hard"]["train_return"]["mean"] == pytest.approx(1.05)
    assert result["runs"][0]["mujoco"]["lin_vel_error"] == pytest.approx(0.5)
    # The gradient measurement depends on the arms and settings only: a resumed study reuses it.
    measured = []
    study.run_contact_study(out, budget, train_fn=counting_train, evaluate_fn=counting_evaluate,
                            gradient_fn=lambda *a: measured.append(a) or fake_gradients(*a), resume=True)  # fmt: skip
    assert measured == []
    study.run_contact_study(out, replace(budget, soft_stiffnesses=(5e3,)), train_fn=fake_train,
                            evaluate_fn=fake_evaluate, gradient_fn=lambda *a: measured.append(a) or fake_gradients(*a),
                            resume=True)  # fmt: skip
    assert [arm.name for arm in measured[0][0]] == ["soft-5k"]  # a new arm is measured, the others reused


def test_study_trains_each_model_on_the_same_budget(tmp_path: Path):
    budget = study.BUDGETS["quick"]
    configs = [study.train_config(arm, s, budget, tmp_path) for arm in budget.arms for s in range(2)]
    assert {(c.shac.num_envs, c.shac.horizon, c.shac.iterations) for c in configs} == {(64, 16, 12)}
    assert [c.task.contact for c in configs] == ["hard", "hard", "soft", "soft", "smooth", "smooth"]
    assert len({c.run.out for c in configs}) == 6 and not any(c.run.deploy for c in configs)


def test_soft_arms_keep_the_damping_ratio_and_take_their_stable_step():
    arms = {arm.name: arm for arm in study.BUDGETS["full"].arms}
    assert list(arms) == ["hard", "soft-2k", "soft-5k", "soft", "smooth"]
    assert arms["soft-2k"].task == {
        "sim_dt": 0.005,
        "soft_stiffness": 2e3,
        "soft_damping": pytest.approx(200 / 10**0.5),
    }
    assert arms["soft"].task["sim_dt"] == 0.0025 and study.soft_arm(4e4).task["sim_dt"] == 0.002
    for bad in (1e5, 0.0):
        with pytest.raises(ValueError, match="accepted: > 0 and up to 40000 N/m"):
            study.soft_arm(bad)
    args = build_parser().parse_args(["study", "contact", "--out", "x", "--soft-stiffness", "5e3,2e3"])
    assert args.soft_stiffness == (5e3, 2e3)
    with pytest.raises(SystemExit):
        build_parser().parse_args(["study", "contact", "--out", "x", "--soft-stiffness", "2e3,1e5"])


def test_a_sweep_study_claims_per_soft_arm_and_never_reuses_a_stale_evaluation(tmp_path: Path):
    budget = replace(study.BUDGETS["quick"], seeds=1, soft_stiffnesses=(2e3, 2e4))
    out = tmp_path / "study"
    stale = out / "runs" / "soft-2k-seed0" / "eval-mujoco"  # left by an evaluation of a half-trained policy
    stale.mkdir(parents=True)
    (stale / "summary.json").write_text(json.dumps({"lin_vel_error": 9.0}))
    (stale.parent / "checkpoint.msgpack").write_bytes(b"the half-trained policy")
    result = study.run_contact_study(out, budget, train_fn=fake_train, evaluate_fn=_overwriting(fake_evaluate),
                                     gradient_fn=fake_gradients, resume=True)  # fmt: skip
    assert [r["model"] for r in result["runs"]] == ["hard", "soft-2k", "soft", "smooth"]
    assert result["runs"][1]["mujoco"]["lin_vel_error"] == pytest.approx(0.5)  # evaluated again, not 9.0
    assert result["claims"]["soft-2k_mujoco_lin_vel_error_increase"] == pytest.approx(0.4)
    assert "| soft-2k-trained: MuJoCo minus own-sim tracking error (m/s) | +0.400 |" in (out / "study.md").read_text()


def _overwriting(evaluate):
    def wrapped(run_dir, sim, scenarios):
        import shutil

        shutil.rmtree(run_dir / f"eval-{sim}", ignore_errors=True)
        return evaluate(run_dir, sim, scenarios)

    return wrapped


def test_study_command_line_refuses_an_existing_study(tmp_path: Path, capsys):
    (tmp_path / "runs").mkdir()
    args = build_parser().parse_args(["study", "contact", "--out", str(tmp_path), "--seeds", "2"])
    assert args.func(args) == 2 and "already holds a study" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        build_parser().parse_args(["study", "contact", "--out", str(tmp_path), "--seeds", "0"])


def test_gradient_quality_of_a_smooth_function_agrees_with_zeroth_order():
    target = jnp.linspace(-1.0, 1.0, 40)

    def returns(params, key):
        # Two "windows": the same smooth quadratic, and one with batch noise in its slope.
        base = -jnp.sum((params["w"] - target) ** 2)
        noise = jax.random.normal(key, target.shape)
        return jnp.stack([base, base + 5.0 * jnp.dot(noise, params["w"])])

    settings = GradientSettings(windows=(1, 2), batches=4, directions=6, samples=12, sigma=1e-2)
    stats = gradient_quality(returns, {"w": jnp.zeros(40)}, settings)
    assert stats["zo_cosine"][0] == pytest.approx(1.0, abs=1e-3)
    assert stats["batch_cosine"][0] == pytest.approx(1.0, abs=1e-6)
    assert stats["relative_std"][0] == pytest.approx(0.0, abs=1e-5)
    assert stats["grad_norm"][0] == pytest.approx(2 * np.linalg.norm(target), rel=1e-5)
    assert stats["zo_cosine_ci95"][0] < 1e-3 and stats["batch_cosine_ci95"][0] < 1e-6  # no noise, no doubt
    # Batch noise shows as spread and disagreement between batches, and as wide intervals.
    assert stats["batch_cosine"][1] < 0.5 and stats["relative_std"][1] > 1.0
    assert stats["batch_cosine_ci95"][1] > 0.05
    # Each batch's own function is still smooth, so its zeroth-order estimate agrees with its gradient.
    assert stats["zo_cosine_per_batch_mean"][1] == pytest.approx(1.0, abs=1e-3)
    with pytest.raises(ValueError, match="samples"):
        gradient_quality(returns, {"w": jnp.zeros(40)}, replace(settings, samples=2))


def test_gradient_quality_of_a_step_function_disagrees_with_zeroth_order():
    """A staircase has zero gradient almost everywhere while its smoothed version slopes: the
    analytic/zeroth-order mismatch that hard contact shows."""

    def returns(params, key):
        x = params["w"]
        smooth = -0.01 * jnp.sum(x**2)
        stairs = jnp.sum(jnp.floor(20 * x)) / 20
        return jnp.stack([smooth + stairs])

    settings = GradientSettings(windows=(1,), batches=2, directions=4, samples=16, sigma=0.2)
    stats = gradient_quality(returns, {"w": jnp.full(8, 0.33)}, settings)
    assert stats["zo_cosine"][0] < 0.5


@pytest.mark.slow  # compiling the task's Jacobian takes minutes on 2 CPU cores
def test_gradient_quality_through_the_task_is_finite():
    from brax.training.acme import running_statistics, specs

    from smoothloco.experiments.gradients import task_returns_fn
    from smoothloco.tasks import PushConfig, RandomizationConfig, VelocityTask, VelocityTaskConfig
    from smoothloco.train.networks import Actor

    config = replace(VelocityTaskConfig(contact="smooth"), pushes=PushConfig(enabled=False),
                     randomization=RandomizationConfig(enabled=False))  # fmt: skip
    task = VelocityTask(config)
    actor = Actor((8,), task.action_size)
    params = actor.init(jax.random.PRNGKey(0), jnp.zeros(task.observation_size))
    normalizer = running_statistics.init_state(specs.Array((task.observation_size,), jnp.float32))
    settings = GradientSettings(windows=(1, 3), batches=2, envs=2, warmup=2, directions=2, samples=2)
    stats = gradient_quality(task_returns_fn(task, actor, normalizer, params, settings), params, settings)
    for key, value in stats.items():
        assert value.shape == (2,) and np.all(np.isfinite(value)), key
    assert np.all(stats["grad_norm"] > 0)


def test_gradient_study_measures_initial_and_trained_and_says_what_separates(tmp_path: Path):
    from fakes import write_untrained_run

    from smoothloco.train.shac import SHACConfig

    run = tmp_path / "run"
    write_untrained_run(run, SHACConfig(num_envs=4, horizon=4, critic_minibatches=2, actor_hidden=(8,)))
    seen = []

    def measure(arms, settings, loaded=None):
        seen.append(None if loaded is None else loaded.run_dir)
        cosine = {"hard": 0.1, "soft": 0.6, "smooth": 0.65}  # smooth and soft within their intervals
        return {m: {"windows": [4], "batch_cosine": [cosine[m]], "batch_cosine_ci95": [0.1], "relative_std": [1.0],
                    "zo_cosine": [0.5], "zo_cosine_ci95": [0.1], "grad_norm": [1.0]} for m in (a.name for a in arms)}  # fmt: skip

    result = study.run_gradient_study(tmp_path / "g", run, GradientSettings(windows=(4,)), measure=measure)
    assert seen == [None, run]  # the initial actor, then the run's
    pairs = {pair: rows[0]["separated"] for pair, rows in result["trained"]["separations"].items()}
    assert pairs == {"hard - soft": True, "hard - smooth": True, "soft - smooth": False}
    for name in ("gradients.json", "gradients.md", "gradients-initial.png", "gradients-trained.png"):
        assert (tmp_path / "g" / name).is_file()
    assert "| hard - smooth | 4 | -0.550 | 0.200 | yes |" in (tmp_path / "g" / "gradients.md").read_text()


def test_an_interrupted_training_stops_the_study_before_evaluating_it(tmp_path: Path):
    """A training stopped by SIGINT/SIGTERM returns early; the study must not evaluate that
    half-trained policy or go on to the next run."""
    budget = study.BUDGETS["quick"]
    evaluated = []

    def stopped_train(config, resume=False):
        Path(config.run.out).mkdir(parents=True)
        return None, None, [{"iteration": 1, "env_steps": 64, "eval/episode_return": 0.0}]

    with pytest.raises(study.StudyInterrupted, match="stopped at iteration 1"):
        study.run_contact_study(tmp_path / "s", budget, train_fn=stopped_train,
                                evaluate_fn=lambda *a: evaluated.append(a), gradient_fn=fake_gradients)  # fmt: skip
    assert evaluated == [] and len(list((tmp_path / "s" / "runs").iterdir())) == 1
