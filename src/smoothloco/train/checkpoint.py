"""Checkpoints as msgpack pytrees (flax.serialization), written atomically, with a checksum.

A checkpoint holds arrays only: parameters, optimizer states, normalizer, RNG, counters and
the environment state, so a resumed run continues exactly. No pickled code.

File layout: the line ``smoothloco-checkpoint``, one line of JSON (the header: format, byte
count and sha256 of the payload, and the path, shape and dtype of every array it holds), then
the msgpack payload. Loading checks the checksum, then that the arrays are those the caller's
template (built from the configuration) expects, so garbled bytes or a checkpoint of another
network or environment count is a one-line ``CheckpointError`` naming the file and what differs,
never a failure deep inside flax or JAX.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from pathlib import Path
from typing import Any, NamedTuple, Sequence

import jax
import numpy as np
from flax import serialization

CHECKPOINT_NAME = "checkpoint.msgpack"
MAGIC = b"smoothloco-checkpoint\n"  # "s" is a msgpack integer: no plain msgpack checkpoint starts so
FORMAT = 1
_SHOWN = 3  # differences quoted in a mismatch message


class CheckpointError(RuntimeError):
    pass


class Difference(NamedTuple):
    """One array where a checkpoint and what the configuration builds disagree; a shape, or
    ``None`` where one side lacks the entry."""

    path: str
    saved: tuple | None
    expected: tuple | None

    def __str__(self) -> str:
        if self.saved is None:
            return f"{self.path} missing"
        if self.expected is None:
            return f"{self.path} not expected"
        return f"{self.path} is {self.saved}, expected {self.expected}"


class CheckpointMismatch(CheckpointError):
    """The checkpoint is intact but holds other arrays than the configuration builds."""

    def __init__(self, path: Path, differences: list[Difference], what: str = "the configuration") -> None:
        self.path, self.differences = path, differences
        shown = "; ".join(map(str, differences[:_SHOWN]))
        more = f" (and {len(differences) - _SHOWN} more)" if len(differences) > _SHOWN else ""
        super().__init__(f"checkpoint {path} does not match {what}: {shown}{more}")


def save(path: Path, tree: Any) -> None:
    """Write header and payload to a temporary file in the same folder, fsync, then rename over
    the old one: a kill at any point leaves the old checkpoint or the new one."""
    path.parent.mkdir(parents=True, exist_ok=True)
    state = serialization.to_state_dict(jax.device_get(tree))
    payload = serialization.msgpack_serialize(state)
    header = {
        "format": FORMAT,
        "bytes": len(payload),
        "sha256": hashlib.sha256(payload).hexdigest(),
        "arrays": {p: [list(shape), dtype] for p, (shape, dtype) in _arrays(state).items()},
    }
    write_atomically(path, MAGIC + json.dumps(header, separators=(",", ":")).encode() + b"\n" + payload)


def write_atomically(path: Path, data: bytes) -> None:
    """Write ``data`` to a temporary file beside ``path``, fsync it and rename it over ``path``:
    a kill at any point leaves the old file or the new one, never a part of it. The file keeps
    its permissions (a new one gets rw-r--r--, not the temporary file's rw-------)."""
    mode = path.stat().st_mode & 0o777 if path.exists() else 0o644
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}-")
    try:
        os.fchmod(fd, mode)
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def load(path: Path, template: Any, names: Sequence[str] = ()) -> Any:
    """Restore into the structure of ``template``; a clear error if missing, corrupt or holding
    other arrays (paths, shapes) than ``template``. ``names`` label a tuple template's entries
    in messages (``("train_state", "env_state")`` rather than ``0``, ``1``)."""
    state = load_raw(path)
    check_matches(path, state, template, names=names)
    try:
        return serialization.from_state_dict(template, state)
    except Exception as exc:  # structure errors have many types
        raise CheckpointError(f"checkpoint {path} is corrupt or from a different configuration: {_line(exc)}") from exc


def load_raw(path: Path) -> dict:
    """The checkpoint as nested dicts of arrays (no template needed), for reading parts of it;
    its checksum verified."""
    if not path.is_file():
        raise CheckpointError(f"no checkpoint at {path}")
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise CheckpointError(f"cannot read checkpoint {path}: {exc.strerror or exc}") from exc
    if data.startswith(MAGIC):
        payload = _verified_payload(path, data)
    else:
        # Checkpoints from before the checksum are plain msgpack and still load: bytes garbled
        # in them are only noticed where msgpack or the shape check below trips over them.
        payload = data
    try:
        state = serialization.msgpack_restore(payload)
    except Exception as exc:  # msgpack errors have many types
        raise CheckpointError(f"checkpoint {path} is corrupt: {_line(exc)}") from exc
    if not isinstance(state, dict):
        raise CheckpointError(f"checkpoint {path} is corrupt: it holds a {type(state).__name__}, not a tree of arrays")
    return state


def saved_iteration(path: Path) -> int:
    """The training iteration a checkpoint was saved at: SHAC's ``(train_state, env_state)`` or
    a dict with an ``iteration`` counter (PPO's)."""
    raw = load_raw(path)
    counters = raw.get("0", raw)
    if not isinstance(counters, dict) or "iteration" not in counters:
        raise CheckpointError(f"checkpoint {path} holds no iteration counter")
    return int(np.asarray(counters["iteration"]))


def check_matches(
    path: Path, saved: dict, template: Any, where: str = "", names: Sequence[str] = (), what: str = "the configuration"
) -> None:
    """``CheckpointMismatch`` unless the state dict ``saved`` (a part of a checkpoint, at
    ``where`` in it) holds the arrays, by path and shape, that ``template`` (built from ``what``)
    does."""
    expected = _arrays(serialization.to_state_dict(template))
    found = _arrays(saved)
    rename = dict(zip(map(str, range(len(names))), names))

    def label(p: str) -> str:
        head, _, rest = p.partition("/")
        return "/".join(filter(None, (where, rename.get(head, head), rest)))

    differences = [
        Difference(label(p), found[p][0] if p in found else None, expected[p][0] if p in expected else None)
        for p in sorted(found.keys() | expected.keys())
        if p not in found or p not in expected or found[p][0] != expected[p][0]
    ]
    if differences:
        raise CheckpointMismatch(path, differences, what)


def _verified_payload(path: Path, data: bytes) -> bytes:
    end = data.find(b"\n", len(MAGIC))
    try:
        header = json.loads(data[len(MAGIC) : end]) if end > 0 else None
        size, digest = int(header["bytes"]), str(header["sha256"])
    except (ValueError, TypeError, KeyError):
        raise CheckpointError(f"checkpoint {path} is corrupt: its header is not readable") from None
    payload = data[end + 1 :]
    if len(payload) != size:
        raise CheckpointError(f"checkpoint {path} is corrupt: {len(payload)} bytes of arrays, its header says {size}")
    if hashlib.sha256(payload).hexdigest() != digest:
        raise CheckpointError(f"checkpoint {path} is corrupt: its bytes do not match the sha256 checksum in its header")
    return payload


def _arrays(state: Any, prefix: str = "") -> dict[str, tuple[tuple, str]]:
    """``{path: (shape, dtype)}`` of every leaf of a flax state dict (nested dicts)."""
    if isinstance(state, dict):
        out: dict[str, tuple[tuple, str]] = {}
        for key, value in state.items():
            out.update(_arrays(value, f"{prefix}/{key}" if prefix else str(key)))
        return out
    dtype = getattr(state, "dtype", None) or np.asarray(state).dtype  # no device transfer for arrays
    return {prefix: (tuple(int(n) for n in np.shape(state)), str(dtype))}


def _line(exc: BaseException) -> str:
    """An exception's message on one line (some libraries' span several)."""
    text = " ".join(str(exc).split())
    return text if len(text) <= 300 else text[:297] + "..."
