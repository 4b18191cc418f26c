"""The command grid of the training evaluation runs at the sharpness it is given, so a run with a
sharpness schedule is graded in the contact it has reached."""

import jax.numpy as jnp

from smoothloco.evaluate.grid import command_evaluator
from smoothloco.tasks import VelocityTaskConfig


def test_grid_evaluates_at_the_given_sharpness():
    config = VelocityTaskConfig(sharpness=300.0)
    evaluate = command_evaluator(config, lambda _: lambda obs: jnp.zeros((obs.shape[0], 12)), ((0.0, 0.0, 0.0),), 1.5)
    default, same, sharp = evaluate(None), evaluate(None, 300.0), evaluate(None, 3000.0)
    assert default["episode_return"] == same["episode_return"]  # None means the task's sharpness
    assert sharp["episode_return"] != default["episode_return"]  # a sharper contact holds the feet higher
