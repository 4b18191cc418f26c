"""Spreading a batch of environments over all local devices.

On a CPU host, XLA runs one program mostly on one core; splitting the batch over several
host devices lets every core work. The same code shards over GPUs unchanged.
"""

from __future__ import annotations

import os

import jax
from jax.sharding import Mesh, NamedSharding, PartitionSpec

BATCH_AXIS = "batch"


def request_host_devices(count: int | None = None) -> None:
    """Ask XLA for ``count`` CPU devices (default: one per core). Call before JAX initializes."""
    count = count or os.cpu_count() or 1
    flags = os.environ.get("XLA_FLAGS", "")
    if "xla_force_host_platform_device_count" not in flags:
        os.environ["XLA_FLAGS"] = f"{flags} --xla_force_host_platform_device_count={count}".strip()


def batch_sharding(devices: list | None = None) -> NamedSharding:
    """Sharding that splits a leading batch axis across ``devices`` (default: all local devices)."""
    mesh = Mesh(devices or jax.local_devices(), (BATCH_AXIS,))
    return NamedSharding(mesh, PartitionSpec(BATCH_AXIS))


def replicated(devices: list | None = None) -> NamedSharding:
    mesh = Mesh(devices or jax.local_devices(), (BATCH_AXIS,))
    return NamedSharding(mesh, PartitionSpec())


def shard_batch(tree, devices: list | None = None):
    """Place every leaf's leading axis across devices; the batch must divide evenly."""
    sharding = batch_sharding(devices)
    n = sharding.mesh.size
    for leaf in jax.tree.leaves(tree):
        if leaf.shape[0] % n:
            raise ValueError(f"batch of {leaf.shape[0]} does not split evenly over {n} devices")
    return jax.device_put(tree, sharding)
