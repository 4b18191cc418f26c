"""One training as a job of several processes, through JAX's distributed runtime.

Every process runs the same program; jitted computations over arrays that span the job's
devices (``parallel``) are its collectives, so the processes must reach them in the same order.
Process 0, the lead, is the only one that touches the run folder; what it alone decides (a
refusal before training) and what any process alone notices (a stop signal) is shared here,
so that no process is left waiting in a collective for another that has gone.

A job is joined when ``start`` is given its coordinator, process count or process id, or when
JAX recognizes the environment of a cluster scheduler that launched several processes (SLURM's
``srun``, Open MPI's ``mpirun``, ...; ``jax.distributed.initialize`` reads their variables).
"""

from __future__ import annotations

import contextlib
import os

import jax
import numpy as np
from jax.experimental import multihost_utils

from smoothloco.validation import one_line

# Variables by which a scheduler tells a process it is one of several (JAX reads the rest).
_SCHEDULER_PROCESS_COUNTS = ("SLURM_NTASKS", "OMPI_COMM_WORLD_SIZE")
_MESSAGE_BYTES = 1024  # of an error shared with the other processes; longer ones are cut


class JobError(RuntimeError):
    """The job could not start or continue: the flags or environment that describe it are
    wrong, or another process stopped it (``kind`` names the error it raised there)."""

    def __init__(self, message: str, kind: str = "") -> None:
        self.kind = kind
        super().__init__(message)


class ProcessLost(RuntimeError):
    """A collective with the other processes failed: one of them has stopped (killed, crashed).
    Nothing more can be computed; the run folder keeps its last checkpoint."""


def start(coordinator: str | None = None, num_processes: int | None = None, process_id: int | None = None) -> None:
    """Join the job these describe, or a scheduler's (see the module); with none of them and no
    scheduler of several processes, this is a one-process run and nothing is started. Call
    before JAX computes anything. Missing values are taken from the scheduler's environment."""
    if num_processes is not None and num_processes < 1:
        raise JobError(f"--num-processes must be >= 1, got {num_processes}")
    if process_id is not None and (process_id < 0 or (num_processes is not None and process_id >= num_processes)):
        accepted = f"0 to {num_processes - 1}" if num_processes else ">= 0"
        raise JobError(f"--process-id must be {accepted}, got {process_id}")
    if coordinator is not None and not _is_host_port(coordinator):
        raise JobError(f"--coordinator must be HOST:PORT (the address process 0 listens on), got {coordinator!r}")
    if num_processes == 1 or not (
        coordinator or num_processes or process_id is not None or _scheduler_asks_for_several()
    ):
        return
    try:
        jax.distributed.initialize(coordinator, num_processes, process_id)
    except (ValueError, TypeError, RuntimeError) as exc:
        raise JobError(
            f"cannot join the job: {one_line(exc)}; give --coordinator HOST:PORT, --num-processes N and --process-id I "
            "(or launch under a scheduler JAX recognizes, e.g. srun under SLURM)"
        ) from exc


def several() -> bool:
    """Whether this process is one of a job of several."""
    return jax.process_count() > 1


def is_lead() -> bool:
    """Whether this process writes the run folder (process 0)."""
    return jax.process_index() == 0


def describe() -> str:
    """The job in a line: processes and devices."""
    devices = jax.devices()
    kinds = sorted({d.platform.upper() for d in devices})
    return (
        f"job of {jax.process_count()} processes, {len(devices)} {'/'.join(kinds)} devices "
        f"({jax.local_device_count()} on this one); process 0 writes the run folder"
    )


def any_process(flag: bool) -> bool:
    """Whether ``flag`` is true on any process (a collective; local with one process)."""
    if not several():
        return flag
    with across_processes("agreeing on a stop"):
        return bool(np.any(multihost_utils.process_allgather(np.array(flag))))


def shared_outcome(error: BaseException | None) -> None:
    """Every process calls this after a step that may fail on some of them (the lead's checks of
    the run folder): if any failed, all raise, the failed ones their own error, the others a
    ``JobError`` quoting the first failed process's. With one process, ``error`` is raised."""
    if not several():
        if error is not None:
            raise error
        return
    text = "" if error is None else f"{type(error).__name__}\n{one_line(error)}"
    encoded = np.zeros(_MESSAGE_BYTES, np.uint8)
    data = text.encode()[:_MESSAGE_BYTES]
    encoded[: len(data)] = np.frombuffer(data, np.uint8)
    with across_processes("sharing the start-up checks"):
        gathered = multihost_utils.process_allgather(encoded)
    if error is not None:
        raise error
    for process, row in enumerate(gathered):
        if row.any():
            kind, _, message = bytes(row).rstrip(b"\0").decode(errors="replace").partition("\n")
            raise JobError(f"process {process} stopped the job: {message}", kind)


@contextlib.contextmanager
def across_processes(what: str):
    """Turn a failed collective of a job of several processes into ``ProcessLost``: JAX reports
    a peer that has gone as a runtime error of the computation that needed it."""
    try:
        yield
    except (ValueError, RuntimeError) as exc:
        if not several() or isinstance(exc, (JobError, ProcessLost)):
            raise
        raise ProcessLost(
            f"{what} failed across the job's {jax.process_count()} processes, most likely because another process "
            f"stopped (see its output): {one_line(exc)}"
        ) from exc


def _scheduler_asks_for_several() -> bool:
    counts = (os.environ.get(name, "") for name in _SCHEDULER_PROCESS_COUNTS)
    return any(c.isdigit() and int(c) > 1 for c in counts) or "JAX_COORDINATOR_ADDRESS" in os.environ


def _is_host_port(address: str) -> bool:
    host, _, port = address.rpartition(":")
    return bool(host) and port.isdigit() and 0 < int(port) < 65536
