"""A job of two processes (``smoothloco.job``) on this machine, one host device each: the same
SHAC updates as one process over two devices, a refusal and a stop shared, a lost process
reported. The whole command, with a kill and a resume, is the slow test at the end."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import jax
import numpy as np
import pytest

TESTS = Path(__file__).resolve().parent
WORKER = TESTS / "job_worker.py"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _run_job(out: Path, *extra: str, timeout: float = 240) -> list[subprocess.CompletedProcess]:
    """Both processes of a job of ``job_worker.py``, to their end."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(TESTS.parent / "src"), str(TESTS)])}
    env.pop("XLA_FLAGS", None)
    port = str(_free_port())
    procs = [
        subprocess.Popen([sys.executable, str(WORKER), str(out), port, "2", str(i), *extra], env=env, text=True,
                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        for i in range(2)
    ]  # fmt: skip
    try:
        outputs = [p.communicate(timeout=timeout)[0] for p in procs]
    finally:
        for p in procs:
            p.kill()  # after a timeout: no worker left waiting for the other
    return [subprocess.CompletedProcess(p.args, p.returncode, out) for p, out in zip(procs, outputs)]


@pytest.mark.slow
def test_two_processes_give_the_one_process_parameters(tmp_path: Path):
    import job_worker  # late import: its module is also the workers' script

    assert jax.local_device_count() == 2, "tests run with two host devices (conftest)"
    out = tmp_path / "job.npz"
    for result in _run_job(out):
        assert result.returncode == 0, result.stdout[-3000:]
    job = np.load(out)
    one = job_worker.updates()
    leaves = {jax.tree_util.keystr(k): v for k, v in jax.tree_util.tree_leaves_with_path(one)}
    assert leaves.keys() <= set(job.files)
    # Two devices either way, so the same partitioned program: measured identical to the bit;
    # the tolerance allows another order of the cross-process sum.
    for key, value in leaves.items():
        np.testing.assert_allclose(job[key], value, rtol=1e-6, atol=1e-7, err_msg=key)
    # the lead's refusal reached the other process, the other's stop reached the lead
    other = np.load(f"{out}.other.npz")
    assert str(job["refusal"]) == "ValueError: refused by the lead"
    assert str(other["refusal"]) == "JobError: process 0 stopped the job: refused by the lead"
    assert bool(job["stop"]) and bool(other["stop"])


@pytest.mark.slow  # about 2 minutes: the job waits out JAX's detection of the lost process
def test_a_lost_process_stops_the_job_with_a_clear_error(tmp_path: Path):
    out = tmp_path / "job.npz"
    results = _run_job(out, "--lose-at", "1")  # a job that hangs fails here, on the timeout
    survivor, lost_process = (r.returncode for r in results)
    assert lost_process == 9, results[1].stdout[-2000:]
    # The survivor stops either through our error, or earlier: JAX's coordination service (hosted
    # by process 0) may abort it when it sees the other process gone, with its own fatal message.
    assert survivor in (0, -signal.SIGABRT), results[0].stdout[-2000:]
    if survivor == 0:
        lost = str(np.load(out)["lost"])
        assert lost.startswith(
            "update 2 failed across the job's 2 processes, most likely because another process stopped"
        )


# -- the command: a job of two processes, killed and resumed, against one process ---------------
TINY = [
    "--shac.num_envs", "8", "--shac.horizon", "4", "--shac.critic_epochs", "1", "--shac.critic_minibatches", "2",
    "--shac.actor_hidden", "16,16", "--shac.critic_hidden", "16,16", "--run.eval_every", "0",
    "--run.eval_seconds", "1.1", "--run.deploy", "false", "--run.checkpoint_every", "2",
    "--run.compile_cache", str(TESTS.parent / ".jax_cache"),
]  # fmt: skip


def _train(argv: list[str], processes: int) -> list[subprocess.Popen]:
    """``smoothloco train`` as one process with two host devices, or as a job of ``processes``
    with one device each."""
    devices = 2 if processes == 1 else 1
    env = {
        **os.environ,
        "PYTHONPATH": str(TESTS.parent / "src"),
        "XLA_FLAGS": f"--xla_force_host_platform_device_count={devices}",
    }
    job = []
    if processes > 1:
        job = ["--coordinator", f"127.0.0.1:{_free_port()}", "--num-processes", str(processes)]
    return [
        subprocess.Popen([sys.executable, "-m", "smoothloco.commands", "train", *argv, *job, *(["--process-id", str(i)] if job else [])],
                         env=env, text=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        for i in range(processes)
    ]  # fmt: skip


def _ended(procs: list[subprocess.Popen], timeout: float = 900) -> list[tuple[int, str, str]]:
    try:
        outputs = [p.communicate(timeout=timeout) for p in procs]
    finally:
        for p in procs:
            p.kill()
    return [(p.returncode, out, err) for p, (out, err) in zip(procs, outputs)]


@pytest.mark.slow
def test_a_killed_two_process_job_resumes_to_the_one_process_parameters(tmp_path: Path):
    from smoothloco.train import checkpoint  # late import: JAX starts after conftest's settings

    iterations = ["--shac.iterations", "40"]
    one = _train([*TINY, *iterations, "--out", str(tmp_path / "one")], processes=1)
    run = tmp_path / "job"
    job = _train([*TINY, *iterations, "--out", str(run)], processes=2)
    ckpt = run / checkpoint.CHECKPOINT_NAME
    while not ckpt.exists() and job[1].poll() is None:
        time.sleep(0.02)
    job[1].send_signal(signal.SIGKILL)
    (lead, _, lead_err), _ = _ended(job)
    assert lead == 4, lead_err[-3000:]
    killed_at = checkpoint.saved_iteration(ckpt)
    assert 0 < killed_at < 40
    assert f"keeps its checkpoint at iteration {killed_at}: start the job again with --resume {run}" in lead_err

    resumed = _ended(_train(["--resume", str(run)], processes=2))
    assert [code for code, _, _ in resumed] == [0, 0], resumed[0][2][-3000:]
    assert f"resumed {ckpt} at iteration {killed_at}" in resumed[0][1]
    assert "shac it" not in resumed[1][1]  # the other process reports nothing
    ((code, _, err),) = _ended(one)
    assert code == 0, err[-3000:]

    # one run folder: each iteration's row once, the summary, the parameters of one process
    rows = [line.split(",")[0] for line in (run / "metrics.csv").read_text().splitlines()[1:]]
    assert rows == [str(i) for i in range(1, 41)]
    assert (run / "summary.json").is_file() and (run / "config.json").is_file()
    a, b = (checkpoint.load_raw(d / checkpoint.CHECKPOINT_NAME) for d in (tmp_path / "one", run))
    for (path, x), y in zip(jax.tree_util.tree_leaves_with_path(a), jax.tree.leaves(b)):
        np.testing.assert_allclose(
            np.asarray(y), np.asarray(x), rtol=1e-6, atol=1e-7, err_msg=jax.tree_util.keystr(path)
        )
