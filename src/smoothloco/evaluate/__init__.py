"""Evaluate layer: the command grid used during training (``grid``), the standard transfer
evaluation (``scenarios``, ``metrics``, ``transfer``: ``smoothloco eval``), policy-gradient
quality (``gradients``) and the contact-model study (``study``: ``smoothloco study contact``)."""

from smoothloco.evaluate.grid import EVAL_COMMANDS, command_evaluator, evaluate_commands

__all__ = ["EVAL_COMMANDS", "command_evaluator", "evaluate_commands"]
