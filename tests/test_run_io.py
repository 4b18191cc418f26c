"""Reading a run folder back: the policy from ``load_run`` is the policy that was saved."""

import json
from pathlib import Path

import jax
import numpy as np
import pytest
from fakes import write_untrained_run

from smoothloco.tasks import VelocityTaskConfig
from smoothloco.train import checkpoint
from smoothloco.train.runs import TrainConfig, load_run
from smoothloco.train.shac import SHACConfig


def test_load_run_restores_config_and_policy(tmp_path: Path):
    shac = SHACConfig(num_envs=4, horizon=4, critic_minibatches=2, actor_hidden=(16, 16), seed=3)
    saved_policy, obs = write_untrained_run(tmp_path / "run", shac)
    run = load_run(tmp_path / "run")
    assert run.config.shac == shac and run.iteration == 0
    obs = obs + jax.random.normal(jax.random.PRNGKey(1), obs.shape)
    np.testing.assert_array_equal(np.asarray(run.policy()(obs, None)[0]), np.asarray(saved_policy(obs, None)[0]))


def test_load_run_rejects_a_folder_that_is_not_a_run(tmp_path: Path):
    with pytest.raises(checkpoint.CheckpointError, match="no config.json"):
        load_run(tmp_path)
    (tmp_path / "config.json").write_text(json.dumps(TrainConfig().to_dict()))
    with pytest.raises(checkpoint.CheckpointError, match="no checkpoint"):
        load_run(tmp_path)
    (tmp_path / checkpoint.CHECKPOINT_NAME).write_bytes(b"not msgpack")
    with pytest.raises(checkpoint.CheckpointError, match="corrupt"):
        load_run(tmp_path)


def test_a_config_from_before_the_trot_generator_loads_with_it_off():
    saved = TrainConfig().to_dict()
    del saved["task"]["gait"]
    assert TrainConfig.from_dict(saved).task.gait.frequency == 0.0
    assert TrainConfig.from_dict(TrainConfig().to_dict()) == TrainConfig()


def test_a_config_from_before_the_recovery_steps_loads_without_them():
    """A run trained before gait.recovery_speed existed keeps standing after a push; a blind run
    of that time (which the new default would refuse) still loads."""
    saved = TrainConfig().to_dict()
    del saved["task"]["gait"]["recovery_speed"]
    saved["task"]["observe_base_lin_vel"] = False
    assert TrainConfig.from_dict(saved).task.gait.recovery_speed == 0.0


def test_a_config_from_before_the_velocity_trim_loads_without_it():
    saved = TrainConfig().to_dict()
    assert TrainConfig.from_dict(saved).task.trims_command  # on by default
    del saved["task"]["velocity_trim"]
    assert not TrainConfig.from_dict(saved).task.trims_command


def test_final_sharpness_is_what_the_policy_trained_with():
    assert TrainConfig().final_sharpness == 1000.0  # the end of the task's default (300, 1000)
    fixed = TrainConfig(task=VelocityTaskConfig(sharpness=(500.0, 500.0)))
    assert fixed.final_sharpness == 500.0
    assert TrainConfig(algo="ppo").final_sharpness == 300.0  # Brax's PPO stays at the start


@pytest.mark.parametrize(
    "algo,task_sharpness,schedule,expected",
    [
        ("shac", 300.0, [300.0, 1000.0], (300.0, 1000.0)),  # the schedule took over the task's number
        ("shac", 500.0, [], (500.0, 500.0)),  # an empty schedule kept the task's number
        ("shac", 400.0, None, (400.0, 400.0)),  # from before the schedule
        ("ppo", 300.0, [300.0, 1000.0], (300.0, 300.0)),  # PPO never used the schedule
    ],
)
def test_a_saved_sharpness_number_and_schedule_load_as_the_task_setting(algo, task_sharpness, schedule, expected):
    saved = TrainConfig(algo=algo).to_dict()
    saved["task"]["sharpness"] = task_sharpness
    if schedule is not None:
        saved["shac"]["sharpness_schedule"] = schedule
    config = TrainConfig.from_dict(saved)
    assert config.task.sharpness == expected
    assert TrainConfig.from_dict(config.to_dict()) == config
