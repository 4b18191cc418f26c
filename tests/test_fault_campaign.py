"""Fault campaign: a small SHAC run killed with SIGKILL at random moments (during start-up and
compilation, between iterations, while files are written) and resumed each time ends with the
same checkpoint, bit for bit, and the same metrics (wall clocks aside) as a run never
interrupted. Slow (tens of process starts): ``pytest -m slow tests/test_fault_campaign.py``.
"""

import csv
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from smoothloco.train import checkpoint
from smoothloco.train.run_folder import SUMMARY_NAME

KILLS = 20
TINY = (
    "--shac.num_envs 4 --shac.horizon 4 --shac.critic_minibatches 2 --shac.actor_hidden 16,16 "
    "--shac.critic_hidden 16,16 --shac.iterations 200 --run.checkpoint_every 1 --run.eval_every 50 "
    "--run.eval_seconds 1.2 --run.deploy false"
).split()
CLOCKS = {"wall_s", "train_wall_s"}


def _train(*args: str) -> subprocess.Popen:
    command = [sys.executable, "-m", "smoothloco.commands", "train", *args]
    return subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)


def _rows(path: Path) -> int:
    try:
        return path.read_text().count("\n") - 1
    except FileNotFoundError:
        return 0


def _kill_at_random(process: subprocess.Popen, metrics: Path, rng: random.Random) -> bool:
    """SIGKILL ``process`` at a random moment: half the time after a random delay (start-up and
    compilation included), otherwise right after a random number of further metrics rows.
    Returns whether it was killed (False: it finished first; 200 iterations leave room for
    every kill)."""
    if rng.random() < 0.5:
        deadline = time.monotonic() + rng.uniform(0.0, 6.0)
        ready = lambda: time.monotonic() >= deadline  # noqa: E731
    else:
        target = _rows(metrics) + rng.randint(1, 4)
        ready = lambda: _rows(metrics) >= target  # noqa: E731
    while process.poll() is None:
        if ready():
            process.send_signal(signal.SIGKILL)
            process.wait()
            return True
        time.sleep(0.005)
    return False


def _metrics_without_clocks(path: Path) -> list[dict]:
    with path.open(newline="") as f:
        return [{k: v for k, v in row.items() if k not in CLOCKS} for row in csv.DictReader(f)]


@pytest.mark.slow
def test_random_kills_and_resumes_end_where_an_uninterrupted_run_ends(tmp_path: Path):
    reference = tmp_path / "reference"
    assert _train(*TINY, "--out", str(reference)).wait() == 0

    run, rng, kills, starts = tmp_path / "killed", random.Random(os.getpid()), 0, 0
    while True:
        started = (run / checkpoint.CHECKPOINT_NAME).is_file()
        process = _train(*(("--resume", str(run)) if started else (*TINY, "--out", str(run))))
        starts += 1
        if kills < KILLS and _kill_at_random(process, run / "metrics.csv", rng):
            kills += 1  # killed before its first checkpoint, the next start is a new run in the same folder
            continue
        _, err = process.communicate()
        if process.returncode == 0 and (run / SUMMARY_NAME).is_file():
            break
        assert process.returncode == 0, f"start {starts} failed after {kills} kills: {err[-2000:]}"
    print(f"{kills} kills, {starts} starts")
    assert kills >= KILLS
    assert (run / checkpoint.CHECKPOINT_NAME).read_bytes() == (reference / checkpoint.CHECKPOINT_NAME).read_bytes()
    assert _metrics_without_clocks(run / "metrics.csv") == _metrics_without_clocks(reference / "metrics.csv")
