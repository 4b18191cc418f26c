"""Evaluate: judging a trained run — in MuJoCo (C) or our simulator on the standard scenarios
(``transfer``, behind ``smoothloco eval``), under the robustness suite's mismatches
(``robustness``), and watching it (``play``). The measurements they use are ``smoothloco.measure``."""
