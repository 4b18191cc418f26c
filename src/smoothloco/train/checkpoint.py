"""Checkpoints as msgpack pytrees (flax.serialization), written atomically.

A checkpoint holds arrays only: parameters, optimizer states, normalizer, RNG, counters and
the environment state, so a resumed run continues exactly. No pickled code.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Any

import jax
from flax import serialization

CHECKPOINT_NAME = "checkpoint.msgpack"


class CheckpointError(RuntimeError):
    pass


def save(path: Path, tree: Any) -> None:
    """Write to a temporary file in the same folder, fsync, then rename over the old one."""
    path.parent.mkdir(parents=True, exist_ok=True)
    data = serialization.to_bytes(jax.device_get(tree))
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".checkpoint-")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def load(path: Path, template: Any) -> Any:
    """Restore into the structure of ``template``; a clear error if missing or corrupt."""
    if not path.is_file():
        raise CheckpointError(f"no checkpoint at {path}")
    try:
        return serialization.from_bytes(template, path.read_bytes())
    except Exception as exc:  # msgpack and structure errors have many types
        raise CheckpointError(f"checkpoint {path} is corrupt or from a different configuration: {exc}") from exc


def load_raw(path: Path) -> dict:
    """The checkpoint as nested dicts of arrays (no template needed), for reading parts of it."""
    if not path.is_file():
        raise CheckpointError(f"no checkpoint at {path}")
    try:
        return serialization.msgpack_restore(path.read_bytes())
    except Exception as exc:
        raise CheckpointError(f"checkpoint {path} is corrupt: {exc}") from exc
