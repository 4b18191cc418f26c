"""The run folder a training writes into: which folders may be trained in, the lock that keeps a
second training out, ``config.json`` and the append-only ``metrics.csv``.

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

from tensorboardX import SummaryWriter

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
            f"{run_dir} already finished at iteration {iteration}; "
            f"pass --shac.iterations M > {iteration} to extend it"
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


class MetricsLog:
    """``metrics.csv``, one row per iteration, and the same scalars to TensorBoard.

    Rows are appended and flushed one at a time, never rewritten: a kill -9 can at most tear the
    last line, and an iteration costs the same at row 3,000 as at row 3 (rewriting the whole
    file every iteration had slowed a tiny run's iterations from 30 ms to 139 ms). A new run
    starts the file afresh; a resumed one keeps the rows before its first new iteration, so
    the rows written after its checkpoint and a torn last line go. The file is replaced as a
    whole (atomically) only then and when a row brings a new column (the first evaluation)."""

    def __init__(self, run_dir: Path, resume: bool) -> None:
        self._resume = resume
        self._run_dir = run_dir
        self.csv_path = run_dir / METRICS_NAME
        self.writer: SummaryWriter | None = None  # made with the first row: a run failing before writes nothing
        self._fields: list[str] = []
        self._file: io.TextIOWrapper | None = None
        self._kept: tuple[int, list[dict]] | None = None

    def kept_rows(self, iteration: int) -> list[dict]:
        """The rows (as read, strings) that stay when the run continues with ``iteration``: those
        before it when resuming, none for a new run. Read once."""
        if not self._resume:
            return []
        if self._kept is None or self._kept[0] != iteration:
            self._kept = (iteration, metrics_rows_before(self.csv_path, iteration))
        return self._kept[1]

    def write(self, row: dict) -> None:
        if self._file is None:
            kept = self.kept_rows(row["iteration"])
            self._replace(list(dict.fromkeys(k for r in (*kept, row) for k in r)), kept)
        elif not row.keys() <= set(self._fields):
            self._file.close()
            self._file = None
            _, rows = read_metrics(self.csv_path)
            self._replace(list(dict.fromkeys([*self._fields, *row])), rows)
        csv.DictWriter(self._file, self._fields).writerow(row)
        self._file.flush()  # in the kernel's hands: survives the process being killed
        if self.writer is None:
            self.writer = SummaryWriter(str(self._run_dir / "tensorboard"))
        for key, value in row.items():
            if key not in ("iteration", "env_steps"):
                self.writer.add_scalar(key, value, row["env_steps"])

    def _replace(self, fields: list[str], rows: list[dict]) -> None:
        """Write ``fields`` and ``rows`` to a temporary file, fsync, rename it over ``metrics.csv``
        and keep it open for appending: a kill at any point leaves the old file or the new one."""
        tmp = self.csv_path.with_name(self.csv_path.name + ".tmp")
        with tmp.open("w", newline="") as f:
            out = csv.DictWriter(f, fields)
            out.writeheader()
            out.writerows(rows)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, self.csv_path)
        self._fields = fields
        self._file = self.csv_path.open("a", newline="")

    def sync(self) -> None:
        """fsync the rows written so far (``flush`` alone survives a kill, not a power cut)."""
        if self._file is not None:
            self._file.flush()
            os.fsync(self._file.fileno())

    def close(self) -> None:
        if self._file is not None:
            self.sync()
            self._file.close()
        if self.writer is not None:
            self.writer.close()


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
