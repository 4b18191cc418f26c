"""Checks shared by the dataclass configs, so a bad value is refused when the config is built,
before anything is written, with the flag's name in the message."""

from __future__ import annotations

import dataclasses
import math
import numbers
from collections.abc import Mapping


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


def with_settings(config, settings: Mapping, where: str):
    """``config`` (a config dataclass) with the nested ``settings`` table applied: a nested
    section takes a table, a dict field is updated entry by entry, a tuple field takes any
    sequence. An unknown name is a ``ValueError`` naming ``where`` and the accepted names; the
    configs validate the values again."""
    known = [f.name for f in dataclasses.fields(config)]
    changes = {}
    for key, value in settings.items():
        if key not in known:
            raise ValueError(f"{where}: unknown setting {key!r}; accepted: {', '.join(sorted(known))}")
        current = getattr(config, key)
        if dataclasses.is_dataclass(current):
            if not isinstance(value, Mapping):
                raise ValueError(f"{where}: {key} must be a table of settings, got {value!r}")
            changes[key] = with_settings(current, value, f"{where}.{key}")
        elif isinstance(current, dict):
            changes[key] = {**current, **value}
        else:
            changes[key] = tuple(value) if isinstance(current, tuple) else value
    return dataclasses.replace(config, **changes)
