"""Checks shared by the dataclass configs, so a bad value is refused when the config is built,
before anything is written, with the flag's name in the message."""

from __future__ import annotations

import dataclasses
import math
import numbers


def _non_finite(value: object) -> bool:
    if isinstance(value, bool):
        return False
    if isinstance(value, numbers.Real):
        return not math.isfinite(value)
    if isinstance(value, (tuple, list)):
        return any(_non_finite(v) for v in value)
    return False


def require_finite(section: str, config: object) -> None:
    """ValueError naming ``<section>.<field>`` (``<section>.<field>.<key>`` in a dict) for a NaN
    or infinite number, also inside tuples. Run first in ``__post_init__``: NaN fails every
    comparison, so it slips through checks written as ``x < 0``, and inf passes ``x > 0``."""
    for f in dataclasses.fields(config):  # type: ignore[arg-type]
        value = getattr(config, f.name)
        name = f"{section}.{f.name}"
        entries = {f"{name}.{k}": v for k, v in value.items()} if isinstance(value, dict) else {name: value}
        for key, v in entries.items():
            if _non_finite(v):
                shown = ",".join(map(str, v)) if isinstance(v, (tuple, list)) else v
                raise ValueError(f"{key} must be finite, got {shown}")
