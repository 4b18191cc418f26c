"""argparse value types shared by the commands.

A bad value is refused by argparse as ``argument --flag: expected <type>, got '<text>'``: the
flag's name comes from argparse, the expected type from here (never "invalid <lambda> value").
Only the standard library is imported, so every layer may use these.
"""

from __future__ import annotations

import argparse
import typing
from collections.abc import Callable
from typing import Any

TRUE, FALSE = ("1", "true", "yes", "on"), ("0", "false", "no", "off")


def positive_int(text: str) -> int:
    """argparse type for counts: a whole number >= 1, or a clear usage error."""
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a whole number >= 1, got {text!r}")
    return value


def seconds_up_to(limit: float) -> Callable[[str], float]:
    """argparse type for a duration: a number of seconds > 0 and <= ``limit``."""

    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            value = float("nan")
        if not 0 < value <= limit:  # NaN fails too
            raise argparse.ArgumentTypeError(f"expected seconds > 0 and <= {limit:g}, got {text!r}")
        return value

    return parse


def describe(kind: Any) -> str:
    """What a value of the config field type ``kind`` is, in words, e.g. ``"2 numbers a,b"``."""
    if kind is bool:
        return "true or false"
    if kind is int:
        return "a whole number"
    if kind is float:
        return "a number"
    if kind is str:
        return "a text"
    item, count = _tuple_of(kind)
    noun = "whole numbers" if item is int else "numbers"
    if count is None:
        return f"comma-separated {noun} (or nothing)"
    return f"{count} comma-separated {noun}"


def metavar(kind: Any) -> str:
    """Short placeholder for ``--help``: ``int``, ``float``, ``bool``, ``str``, ``A,B``, ``N,...``."""
    if isinstance(kind, type):
        return kind.__name__
    item, count = _tuple_of(kind)
    letter = "N" if item is int else "X"
    return ",".join(chr(ord("A") + i) for i in range(count)) if count else f"{letter},..."


def config_value(kind: Any) -> Callable[[str], Any]:
    """argparse ``type=`` for a config field of type ``kind``: bool (true/false, yes/no, 1/0,
    on/off), int, float, str, ``tuple[T, ...]`` or a fixed-length ``tuple[T, T]`` written as
    comma-separated values. A bad value raises ``ArgumentTypeError`` saying what was expected."""

    def parse(text: str) -> Any:
        try:
            return _convert(kind, text)
        except (ValueError, TypeError):
            raise argparse.ArgumentTypeError(f"expected {describe(kind)}, got {text!r}") from None

    parse.__name__ = metavar(kind)  # what argparse names should anything else go wrong
    return parse


def _convert(kind: Any, text: str) -> Any:
    if kind is bool:
        word = text.strip().lower()
        if word in TRUE or word in FALSE:
            return word in TRUE
        raise ValueError(text)
    if kind in (int, float, str):
        return kind(text)
    item, count = _tuple_of(kind)
    parts = [p for p in text.split(",")] if text.strip() else []
    values = tuple(item(p) for p in parts)
    if count is not None and len(values) != count:
        raise ValueError(text)
    return values


def _tuple_of(kind: Any) -> tuple[type, int | None]:
    """``(item type, length or None)`` of ``tuple[T, ...]`` / ``tuple[T, T]``; TypeError otherwise."""
    args = typing.get_args(kind)
    if typing.get_origin(kind) is not tuple or not args:
        raise TypeError(f"no command-line form for {kind!r}")
    if len(args) == 2 and args[1] is Ellipsis:
        return args[0], None
    if len(set(args)) != 1:
        raise TypeError(f"no command-line form for {kind!r}")
    return args[0], len(args)
