"""Evaluate layer: fixed command grids and metrics, given only a policy function."""

from smoothloco.evaluate.grid import EVAL_COMMANDS, command_evaluator, evaluate_commands

__all__ = ["EVAL_COMMANDS", "command_evaluator", "evaluate_commands"]
