"""The command grid of the training evaluation runs at the training progress it is given, so a
run whose contact sharpens over training is graded in the contact it has reached."""

import jax.numpy as jnp

from smoothloco.measure.grid import command_evaluator
from smoothloco.tasks import VelocityTaskConfig


def test_grid_evaluates_at_the_given_training_progress():
    config = VelocityTaskConfig(sharpness=(300.0, 3000.0))
    evaluate = command_evaluator(config, lambda _: lambda obs: jnp.zeros((obs.shape[0], 12)), ((0.0, 0.0, 0.0),), 1.5)
    default, start, end = evaluate(None), evaluate(None, 0.0), evaluate(None, 1.0)
    assert default["episode_return"] == start["episode_return"]  # None means a fresh reset's: the start
    assert end["episode_return"] != start["episode_return"]  # a sharper contact holds the feet higher
