"""The run log: what a training loop reports into. One row per iteration goes to the
append-only ``metrics.csv``, to TensorBoard and to a progress line, with both clocks (the
training's leaves out evaluation time) continued across a resume's sessions.

Rows are appended and flushed one at a time, never rewritten: a kill -9 can at most tear the
last line, and an iteration costs the same at row 3,000 as at row 3 (rewriting the whole file
every iteration had slowed a tiny run's iterations from 30 ms to 139 ms). A new run starts the
file afresh; a resumed one keeps the rows before its first new iteration, so the rows written
after its checkpoint and a torn last line go. The file is replaced as a whole (atomically) only
then and when a row brings a new column (the first evaluation)."""

from __future__ import annotations

import csv
import io
import os
import time
from pathlib import Path
from typing import Callable

from tensorboardX import SummaryWriter

from smoothloco.train.evaluation import TrainingEvaluation
from smoothloco.train.run_folder import METRICS_NAME, metrics_rows_before, parsed_row, read_metrics
from smoothloco.train.runs import TrainConfig

ProgressFn = Callable[[int, dict], None]

# (metric, label, format) shown in the progress line when a row has it.
_PROGRESS_FIELDS = (
    ("reward_per_step", "reward/step", "+.4f"),
    ("lin_vel_error", "lin_err", ".3f"),
    ("yaw_rate_error", "yaw_err", ".3f"),
    ("actor_grad_norm", "|g|", ".2f"),
    ("skipped_updates", "skipped", ".0f"),
    ("training/policy_loss", "pi_loss", "+.4f"),
    ("training/v_loss", "v_loss", ".4f"),
    ("training/learning_rate", "lr", ".1e"),
)


class RunLog:
    """The metrics rows of one training session: timed, evaluated on request, written, printed,
    and passed to ``progress_fn``; ``stop_requested`` tells the loop that a signal asked it to
    stop. ``on_first_row`` runs once the first row is timed (a resume records its changes then).
    Without ``writes`` (the processes of a job other than its lead) rows are kept in memory
    only: nothing is read from or written to the run folder, nothing printed."""

    def __init__(
        self,
        run_dir: Path,
        config: TrainConfig,
        evaluation: TrainingEvaluation,
        stop_requested: Callable[[], bool],
        progress_fn: ProgressFn | None = None,
        resume: bool = False,
        on_first_row: Callable[[], None] | None = None,
        writes: bool = True,
    ) -> None:
        self.config = config
        self.evaluation = evaluation
        self.history: list[dict] = []  # this session's rows
        self.first_iteration_s: float | None = None
        self.csv_path = run_dir / METRICS_NAME
        self._run_dir = run_dir
        self._resume = resume
        self._stop_requested = stop_requested
        self._progress_fn = progress_fn
        self._on_first_row = on_first_row
        self._writes = writes
        self._start = time.perf_counter()
        # A resume's earlier sessions: their rows (kept in metrics.csv) and where their clocks
        # stopped, which this session's clocks continue from. Known at the first row.
        self.previous: list[dict] = []
        self._kept: list[dict] = []  # the same rows as read (strings), rewritten with the first row
        self._clock_offsets: tuple[float, float] | None = None
        self._writer: SummaryWriter | None = None  # made with the first row: a run failing before writes nothing
        self._fields: list[str] = []
        self._file: io.TextIOWrapper | None = None

    @property
    def stop_requested(self) -> bool:
        return self._stop_requested()

    @property
    def run_history(self) -> list[dict]:
        """The whole run's rows: the earlier sessions' (read back from metrics.csv) and this one's."""
        return self.previous + self.history

    def row(self, iteration: int, env_steps: int) -> dict:
        """The start of a metrics row: counters and both clocks. ``train_wall_s`` leaves out the
        time spent evaluating, so the algorithms' speeds compare whatever the evaluation schedule.
        A resumed run's clocks continue from the last row its checkpoint kept."""
        session = time.perf_counter() - self._start
        self.first_iteration_s = self.first_iteration_s or session
        if self._clock_offsets is None:
            self._kept = metrics_rows_before(self.csv_path, iteration) if self._resume and self._writes else []
            self.previous = [parsed_row(r, self.csv_path) for r in self._kept]
            last = self.previous[-1] if self.previous else {}
            wall = last.get("wall_s", 0.0)
            self._clock_offsets = (wall, last.get("train_wall_s", wall))
            if self._on_first_row is not None:
                self._on_first_row()
        wall, train_wall = self._clock_offsets
        return {
            "iteration": iteration,
            "env_steps": env_steps,
            "wall_s": wall + session,
            "train_wall_s": train_wall + session - self.evaluation.seconds,
        }

    def evaluate(self, make_policy: Callable, params, progress: float | None = None) -> dict:
        """``eval/<metric>`` entries of the policy on the command grid at training ``progress``."""
        return self.evaluation(make_policy, params, progress)

    def record(self, row: dict, iterations: int) -> None:
        """Append ``row`` (begun by ``row``) to metrics.csv and TensorBoard, and print its line."""
        self.history.append(row)
        if not self._writes:
            return
        self._write(row)
        _print_progress(row, self.history, iterations, self.config.algo, self.first_iteration_s)
        if self._progress_fn:
            self._progress_fn(row["iteration"], row)

    def _write(self, row: dict) -> None:
        if self._file is None:
            self._replace(list(dict.fromkeys(k for r in (*self._kept, row) for k in r)), self._kept)
        elif not row.keys() <= set(self._fields):
            self._file.close()
            self._file = None
            _, rows = read_metrics(self.csv_path)
            self._replace(list(dict.fromkeys([*self._fields, *row])), rows)
        csv.DictWriter(self._file, self._fields).writerow(row)
        self._file.flush()  # in the kernel's hands: survives the process being killed
        if self._writer is None:
            self._writer = SummaryWriter(str(self._run_dir / "tensorboard"))
        for key, value in row.items():
            if key not in ("iteration", "env_steps"):
                self._writer.add_scalar(key, value, row["env_steps"])

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
        """Make the rows recorded so far durable (fsync), e.g. before a checkpoint: ``flush``
        alone survives a kill, not a power cut."""
        if self._file is not None:
            self._file.flush()
            os.fsync(self._file.fileno())

    def close(self) -> None:
        if self._file is not None:
            self.sync()
            self._file.close()
        if self._writer is not None:
            self._writer.close()


def _print_progress(row: dict, history: list[dict], iterations: int, algo: str, first_iteration_s: float) -> None:
    first = history[0]  # this session's first row: its time includes compilation, so speeds are measured from it on
    done_here = row["iteration"] - first["iteration"]
    seconds = row["train_wall_s"] - first["train_wall_s"]
    steps_per_s = (row["env_steps"] - first["env_steps"]) / seconds if done_here else float("nan")
    if done_here:
        timing = f"ETA {seconds / done_here * (iterations - row['iteration']) / 60:.1f} min"
    else:  # nothing to extrapolate from yet: this row's time is mostly compilation
        timing = f"first iteration after {first_iteration_s:.0f} s (compilation included)"
    fields = " ".join(f"{label} {row[key]:{fmt}}" for key, label, fmt in _PROGRESS_FIELDS if key in row)
    extra = ""
    if "eval/lin_vel_error" in row:
        extra = (
            f" | eval return {row['eval/episode_return']:.2f} lin {row['eval/lin_vel_error']:.3f} "
            f"yaw {row['eval/yaw_rate_error']:.3f} falls {row['eval/fall_rate']:.2f}"
        )
    print(
        f"{algo} it {row['iteration']:4d}/{iterations} steps {row['env_steps']:>9,d} {steps_per_s:7.0f}/s {fields} "
        f"{timing}{extra}",
        flush=True,
    )
