"""Spreading a batch of environments over every device of the job.

On a CPU host, XLA runs one program mostly on one core; splitting the batch over several
host devices lets every core work. The same code shards over GPUs unchanged, and over the
devices of several processes (``smoothloco.job``): the mesh holds ``jax.devices()``, all of
the job's, so one jitted program computes over the global batch, each process stepping the
environments on its own devices. With one process that is every local device.
"""

from __future__ import annotations

import os

import jax
import numpy as np
from jax.experimental import multihost_utils
from jax.sharding import Mesh, NamedSharding, PartitionSpec

BATCH_AXIS = "batch"


def request_host_devices(count: int | None = None) -> None:
    """Ask XLA for ``count`` CPU devices (default: one per core). Call before JAX initializes."""
    count = count or os.cpu_count() or 1
    flags = os.environ.get("XLA_FLAGS", "")
    if "xla_force_host_platform_device_count" not in flags:
        os.environ["XLA_FLAGS"] = f"{flags} --xla_force_host_platform_device_count={count}".strip()


def batch_sharding(devices: list | None = None) -> NamedSharding:
    """Sharding that splits a leading batch axis across ``devices`` (default: all the job's)."""
    mesh = Mesh(devices or jax.devices(), (BATCH_AXIS,))
    return NamedSharding(mesh, PartitionSpec(BATCH_AXIS))


def replicated(devices: list | None = None) -> NamedSharding:
    """A full copy on each of ``devices`` (default: all the job's)."""
    mesh = Mesh(devices or jax.devices(), (BATCH_AXIS,))
    return NamedSharding(mesh, PartitionSpec())


def shard_batch(tree, devices: list | None = None):
    """Place every leaf's leading axis across devices; the batch must divide evenly. In a job of
    several processes every process passes the same (host) values and keeps its own share."""
    sharding = batch_sharding(devices)
    n = sharding.mesh.size
    for leaf in jax.tree.leaves(tree):
        if leaf.shape[0] % n:
            raise ValueError(f"batch of {leaf.shape[0]} does not split evenly over {n} devices")
    return jax.device_put(tree, sharding)


def to_host(tree):
    """``tree`` as NumPy arrays, whole on every process. A replicated array is read from a local
    copy; an array split over several processes (the environments) is gathered, a collective
    that every process of the job must call at the same point."""

    def fetch(leaf):
        if not isinstance(leaf, jax.Array):
            return np.asarray(leaf)
        if leaf.is_fully_replicated:
            return np.asarray(leaf.addressable_data(0))
        if not leaf.is_fully_addressable:
            return multihost_utils.process_allgather(leaf, tiled=True)
        return np.asarray(jax.device_get(leaf))

    return jax.tree.map(fetch, tree)
