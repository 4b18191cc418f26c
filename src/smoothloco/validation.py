"""Checks shared by the dataclass configs, so a bad value is refused when the config is built,
before anything is written, with the flag's name in the message."""

from __future__ import annotations

import dataclasses
import math
import numbers
import typing
from collections.abc import Mapping
from pathlib import Path
from typing import Any

# Counts, sizes and seeds of a run: JAX holds them as 32-bit integers.
LARGEST_INT = 2**31 - 1
SHOWN_CHARACTERS = 60  # of a refused value in a message: a message never carries megabytes of input
MAX_MESSAGE = 800  # characters of a refusal, the accepted names included


def setting(default: Any, help: str) -> Any:
    """A config dataclass field with its default and the one-line help of its flag, kept next to
    it (``smoothloco train --help`` reads it from the field's metadata)."""
    if not help.strip():
        raise ValueError("a setting needs its help text")
    return dataclasses.field(default=default, metadata={"help": help})


def help_of(field: dataclasses.Field) -> str | None:
    """The help text ``setting`` gave ``field``, or None."""
    return field.metadata.get("help")


def shown(value: object) -> str:
    """``repr(value)`` cut to ``SHOWN_CHARACTERS`` (one line: repr escapes newlines)."""
    text = repr(value)
    return text if len(text) <= SHOWN_CHARACTERS else f"{text[: SHOWN_CHARACTERS - 3]}..."


def _name(key: str) -> str:
    """A key as a message shows it: as written when short and printable, else quoted and cut."""
    return key if key.isprintable() and len(key) <= SHOWN_CHARACTERS else shown(key)


def one_line(message: object, limit: int = MAX_MESSAGE) -> str:
    """``message`` on one line of at most ``limit`` characters: what a command prints when it
    refuses its input, whatever that input held."""
    text = " ".join(str(message).split())
    return text if len(text) <= limit else f"{text[: limit - 3]}..."


def read_text(path: Path, what: str) -> str:
    """The UTF-8 text of ``path``; a one-line ``ValueError`` naming the file (and ``what`` it
    should hold) when it cannot be read or is not UTF-8: the decoder's own error quotes the
    whole input."""
    try:
        return path.read_bytes().decode("utf-8")
    except OSError as exc:
        raise ValueError(f"cannot read {path}: {exc.strerror or exc}") from None
    except UnicodeDecodeError as exc:
        byte = shown(exc.object[exc.start : exc.start + 1])
        raise ValueError(f"{path}: the {what} is not UTF-8 text (byte {exc.start} is {byte})") from None


def expected(kind: Any) -> str:
    """What a value of the config field type ``kind`` is in a file, in words."""
    if kind is bool:
        return "true or false"
    if kind is int:
        return "a whole number"
    if kind is float:
        return "a finite number"
    if kind is str:
        return "a text"
    origin, args = typing.get_origin(kind), typing.get_args(kind)
    if origin is dict:
        return f"a table of {expected(args[1]).removeprefix('a ')}s by name"
    if origin is tuple:
        item = "whole numbers" if args[0] is int else "numbers"
        return f"a list of {item}" if args[-1] is Ellipsis else f"a list of {len(args)} {item}"
    return repr(kind)


def parse_value(kind: Any, value: object, where: str) -> Any:
    """``value`` (as read from JSON or TOML) as the config field type ``kind``: bool, int,
    float, str, ``tuple[T, ...]``, ``tuple[T, T]`` or ``dict[str, T]``. Types are exact (a bool
    is not a number, 5.7 is not a whole number); a ``ValueError`` names ``where`` and what is
    accepted."""
    refuse = ValueError(f"{where}: expected {expected(kind)}, got {shown(value)}")
    if kind is bool:
        if not isinstance(value, bool):
            raise refuse
        return value
    if kind is int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise refuse
        if not -LARGEST_INT <= value <= LARGEST_INT:
            raise ValueError(f"{where}: expected a whole number within ±{LARGEST_INT}, got {shown(value)}")
        return value
    if kind is float:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise refuse
        try:
            return float(value)
        except OverflowError:  # an integer beyond any float
            raise refuse from None
    if kind is str:
        if not isinstance(value, str):
            raise refuse
        return value
    origin, args = typing.get_origin(kind), typing.get_args(kind)
    if origin is tuple:
        if not isinstance(value, (list, tuple)):
            raise refuse
        if args[-1] is not Ellipsis and len(value) != len(args):
            raise refuse
        return tuple(parse_value(args[0], v, f"{where}[{i}]") for i, v in enumerate(value))
    if origin is dict:
        if not isinstance(value, Mapping) or not all(isinstance(k, str) for k in value):
            raise refuse
        return {k: parse_value(args[1], v, f"{where}.{_name(k)}") for k, v in value.items()}
    raise TypeError(f"{where}: no file form for {kind!r}")


def _non_finite(value: object) -> bool:
    if isinstance(value, (bool, int)):  # a whole number is finite (and may not fit a float)
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


def with_settings(config, settings: Mapping, where: str, merge: bool = True):
    """``config`` (a config dataclass) with the nested ``settings`` table applied, each value
    parsed as its field's type first (``parse_value``): a nested section takes a table, a dict
    field is updated entry by entry (replaced as a whole without ``merge``), a tuple field takes
    a list. An unknown name or a value of the wrong type is a one-line ``ValueError`` naming
    ``where`` and what is accepted; the configs then check the ranges."""
    if not isinstance(settings, Mapping):
        raise ValueError(f"{where or 'the file'}: expected a table of settings, got {shown(settings)}")
    known = [f.name for f in dataclasses.fields(config)]
    kinds = typing.get_type_hints(type(config))
    changes = {}
    for key, value in settings.items():
        name = f"{where}.{key}" if where else str(key)
        if key not in known:
            accepted = ", ".join(sorted(known))
            raise ValueError(f"{where or 'top level'}: unknown setting {shown(key)}; accepted: {accepted}")
        current = getattr(config, key)
        if dataclasses.is_dataclass(current):
            if not isinstance(value, Mapping):
                raise ValueError(f"{name}: expected a table of settings, got {shown(value)}")
            changes[key] = with_settings(current, value, name, merge)
            continue
        parsed = parse_value(kinds[key], value, name)
        changes[key] = {**current, **parsed} if isinstance(current, dict) and merge else parsed
    try:
        return dataclasses.replace(config, **changes)
    except ArithmeticError as exc:  # a check computing with an extreme value, e.g. a step count of inf
        raise ValueError(f"{where or 'top level'}: a value beyond what the checks can compute with ({exc})") from None
