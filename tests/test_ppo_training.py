"""Brax's real PPO end to end on a tiny budget, through the command line (its own file: about a
minute and a half of compilation on a 2-core machine, so it runs with the slow checks; the
default run checks the PPO wiring in tests/test_ppo.py)."""

import json
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from smoothloco.commands import main
from smoothloco.tasks import VelocityTask
from smoothloco.train.runs import load_run


@pytest.mark.slow
# The full reset inside Brax's loop (its devices, its unrolls), with episodes that end within the run.
@pytest.mark.parametrize(
    "reset", ["", pytest.param("--ppo.full_reset true --ppo.episode_length 10 ", marks=pytest.mark.slow)]
)
def test_tiny_ppo_run_end_to_end(tmp_path: Path, reset: str):
    """Brax's real PPO, 4 iterations of 8 environments: the run folder matches SHAC's and the
    policy read back is tanh of the first 12 outputs of an ELU MLP (what the ONNX export assumes)."""
    out = tmp_path / "ppo"
    flags = reset + "--ppo.num_envs 8 --ppo.unroll_length 8 --ppo.num_minibatches 2 --ppo.iterations 4 "
    flags += "--ppo.policy_hidden 16,16 --ppo.value_hidden 16,16 "
    flags += "--run.eval_every 2 --run.eval_seconds 1.2 --run.deploy false"
    assert main(["train", "--algo", "ppo", *flags.split(), "--out", str(out)]) == 0

    for name in ("config.json", "metrics.csv", "checkpoint.msgpack", "summary.md", "summary.json", "training.png"):
        assert (out / name).is_file(), name
    assert any((out / "tensorboard").iterdir())
    assert json.loads((out / "config.json").read_text())["algo"] == "ppo"
    summary = json.loads((out / "summary.json").read_text())
    assert summary["algo"] == "ppo" and summary["env_steps"] == 4 * 8 * 8
    shac_keys = {"episode_return", "lin_vel_error", "yaw_rate_error", "fall_rate", "wall_seconds", "per_command"}
    assert shac_keys <= set(summary)
    rows = (out / "metrics.csv").read_text().splitlines()
    assert len(rows) == 3 and "eval/episode_return" in rows[0] and "training/policy_loss" in rows[0]

    run = load_run(out)
    assert run.config.algo == "ppo" and run.env_steps == 256 and run.iteration == 4
    normalizer, policy_params = run.params
    obs = jax.random.normal(jax.random.PRNGKey(3), (5, VelocityTask(run.config.task).observation_size))
    x = (obs - normalizer.mean) / normalizer.std
    layers = [policy_params["params"][f"hidden_{i}"] for i in range(3)]
    for layer in layers[:-1]:
        x = jax.nn.elu(x @ layer["kernel"] + layer["bias"])
    expected = jnp.tanh((x @ layers[-1]["kernel"] + layers[-1]["bias"])[:, :12])
    np.testing.assert_allclose(np.asarray(run.policy()(obs, None)[0]), np.asarray(expected), atol=1e-6)
