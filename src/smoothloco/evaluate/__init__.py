"""Evaluate: measurements and evaluations of policies, at two layers.

- Measurements, below the agents (training uses them): ``metrics`` (every number from a
  trajectory), ``record`` (a simulator step as a trajectory sample), ``grid`` (the command-grid
  evaluation that training runs) and ``scenarios`` (the standard scripted scenarios).
- Evaluations of a run, beside deploy: ``transfer`` (``smoothloco eval``) and ``gradients``
  (policy-gradient quality); the contact-model study (``study``) is an experiment above them.
"""

from smoothloco.evaluate.grid import EVAL_COMMANDS, command_evaluator, evaluate_commands

__all__ = ["EVAL_COMMANDS", "command_evaluator", "evaluate_commands"]
