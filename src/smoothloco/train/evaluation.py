"""Evaluation during training: the run's deterministic policy on the fixed command grid
(``evaluate.grid``), compiled once per run, its time kept apart from the training's."""

from __future__ import annotations

import time
from typing import Callable

from smoothloco.measure.grid import command_evaluator
from smoothloco.train.runs import TrainConfig


def grid_evaluator(config: TrainConfig, make_policy: Callable) -> Callable:
    """``evaluate(params, progress=None)``: the run's deterministic policy on the command grid,
    compiled once (``evaluate.grid.command_evaluator``)."""
    policy_of = lambda p: lambda obs: make_policy(p, deterministic=True)(obs, None)[0]  # noqa: E731
    return command_evaluator(config.task, policy_of, seconds=config.run.eval_seconds)


class TrainingEvaluation:
    """Evaluates a training's policies on the grid. The rollout compiles at the first call and
    is reused (``make_policy`` is the same function every time); ``seconds`` is the time spent
    evaluating, which the training clock leaves out, and ``latest`` the last result with its
    per-command rows (the summary's)."""

    def __init__(self, config: TrainConfig) -> None:
        self.config = config
        self.seconds = 0.0
        self.latest: dict | None = None
        self._evaluate: Callable | None = None

    def __call__(self, make_policy: Callable, params, progress: float | None = None) -> dict:
        """``eval/<metric>`` entries of the policy in the task at training ``progress``
        (default: the start)."""
        tic = time.perf_counter()
        if self._evaluate is None:
            self._evaluate = grid_evaluator(self.config, make_policy)
        self.latest = self._evaluate(params, progress)
        self.seconds += time.perf_counter() - tic
        return {f"eval/{k}": v for k, v in self.latest.items() if k != "per_command"}
