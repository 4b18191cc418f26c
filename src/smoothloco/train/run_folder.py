"""The run folder a training writes into: which folders may be trained in, the lock that keeps a
second training out, ``config.json``, and reading back the append-only ``metrics.csv`` (written
by ``run_log``).

A run folder is held with an exclusive lock while it trains, and ``metrics.csv`` is only ever
appended to (a resume first drops the rows written after its checkpoint), so neither a second
training nor a ``kill -9`` can mix up or lose its rows."""

from __future__ import annotations

import contextlib
import csv
import fcntl
import io
import json
import os
from pathlib import Path

from smoothloco.train import checkpoint

LOCK_NAME = ".train.lock"  # held (flock) by the training in the folder; never deleted, see run_lock
CONFIG_NAME = "config.json"
SUMMARY_NAME = "summary.json"  # written last: a run folder without it has not finished
METRICS_NAME = "metrics.csv"


class RunFolderError(RuntimeError):
    """The run folder cannot be trained in: another training holds it, it is not a run folder,
    or its ``metrics.csv`` cannot be continued."""


class RunAlreadyFinished(RuntimeError):
    """``--resume`` of a run whose checkpoint is at its last iteration: nothing to train (not a
    failure; more ``shac.iterations`` extend it)."""

    def __init__(self, run_dir: Path, iteration: int) -> None:
        self.run_dir, self.iteration = run_dir, iteration
        super().__init__(
            f"{run_dir} already finished at iteration {iteration}; pass --shac.iterations M > {iteration} to extend it"
        )


class TrainingDiverged(RuntimeError):
    """Too many iterations in a row skipped their update as non-finite; the checkpoint holds
    the last finite parameters."""


def is_run_folder(run_dir: Path) -> bool:
    """Whether ``run_dir`` holds a ``config.json`` written by ``train`` (a JSON object with its sections)."""
    try:
        saved = json.loads((run_dir / CONFIG_NAME).read_text())
    except (OSError, ValueError):
        return False
    return isinstance(saved, dict) and {"task", "shac", "run"} <= saved.keys()


def check_new_run_folder(run_dir: Path) -> None:
    """Refuse, before anything is written, a folder that a new run must not write into: a file,
    or a non-empty folder that is not a run folder (its own ``config.json`` would be overwritten)."""
    if not run_dir.exists():
        return
    if not run_dir.is_dir():
        raise RunFolderError(f"{run_dir} is a file, not a folder; choose another --out")
    if {p.name for p in run_dir.iterdir()} - {LOCK_NAME} and not is_run_folder(run_dir):
        raise RunFolderError(
            f"{run_dir} is not empty and not a run folder (no config.json from smoothloco train); "
            "refusing to write into it: choose a new or empty --out"
        )


@contextlib.contextmanager
def run_lock(run_dir: Path, create: bool):
    """Hold an exclusive lock on ``run_dir`` while the block runs, so a second training there is
    refused instead of mixing its files with this one's. ``flock`` on a file inside the folder:
    the kernel releases it when the process ends, however it ends (kill -9 included), so the
    file is left in place and a stale lock cannot exist. The holder's pid goes into the file for
    the refusal message. With ``create`` the folder is made first (a new run)."""
    try:
        if create:
            run_dir.mkdir(parents=True, exist_ok=True)
        fd = os.open(run_dir / LOCK_NAME, os.O_RDWR | os.O_CREAT, 0o644)
    except OSError as exc:
        raise RunFolderError(f"cannot use {run_dir} as a run folder: {exc.strerror or exc}") from exc
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 32, 0).decode(errors="replace").strip() or "unknown"
            raise RunFolderError(
                f"{run_dir} is in use by another training (pid {holder}); wait for it to end or choose another folder"
            ) from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        yield
    finally:
        os.close(fd)  # releases the lock


def write_text_atomically(path: Path, text: str) -> None:
    """``text`` into ``path`` all at once or not at all (``checkpoint.write_atomically``)."""
    checkpoint.write_atomically(path, text.encode())


def write_config(run_dir: Path, saved: dict) -> None:
    """``config.json`` of a run (``TrainConfig.to_dict()`` or a resume's updated copy of it)."""
    write_text_atomically(run_dir / CONFIG_NAME, json.dumps(saved, indent=2))


def read_metrics(path: Path) -> tuple[list[str], list[dict]]:
    """The header and the complete rows of a ``metrics.csv`` (none if there is no file). A last
    line without its newline is a row torn by a kill and is left out; any other row that does
    not fit the header is a ``RunFolderError`` naming the file and line."""
    if not path.exists():
        return [], []
    with path.open(newline="") as f:
        text = f.read()
    reader = csv.DictReader(io.StringIO(text[: text.rfind("\n") + 1], newline=""))
    rows = list(reader)
    for line, r in enumerate(rows, start=2):
        if None in r or None in r.values() or "iteration" not in r:
            raise RunFolderError(f"{path} line {line} is corrupt (does not match the header); move it away to continue")
    return list(reader.fieldnames or []), rows


def metrics_rows_before(path: Path, iteration: int) -> list[dict]:
    """The rows of ``path`` for iterations before ``iteration`` (where a resumed run continues)."""
    _, rows = read_metrics(path)
    try:
        return [r for r in rows if int(r["iteration"]) < iteration]
    except ValueError as exc:
        raise RunFolderError(f"{path} is corrupt: {exc}; move it away to continue") from exc


def parsed_row(row: dict, path: Path) -> dict:
    """A row as read from ``metrics.csv`` in the types the training recorded it with: the
    counters as ints, the rest as floats; empty cells (a column the row did not have) left out.
    A cell that is not a number is a ``RunFolderError``."""
    try:
        return {k: int(v) if k in ("iteration", "env_steps") else float(v) for k, v in row.items() if v != ""}
    except ValueError as exc:
        where = f"{path} row of iteration {row.get('iteration')}"
        raise RunFolderError(f"{where} is corrupt: {exc}; move it away to continue") from exc
