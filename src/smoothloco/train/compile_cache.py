"""Compiling the training step: the persistent compilation cache, one folder per host CPU, and
tracing with the garbage collector paused."""

from __future__ import annotations

import contextlib
import gc
import hashlib
import platform
from pathlib import Path

import jax

from smoothloco.quiet import quiet_cache_loads


def use_compile_cache(root: str) -> None:
    """Point JAX's persistent compilation cache at this host's folder of ``root`` (an empty
    ``root``: no cache), without XLA's false machine-mismatch line on every cache hit."""
    jax.config.update("jax_compilation_cache_dir", host_compile_cache(root))
    quiet_cache_loads()  # smoothloco.quiet


def host_compile_cache(root: str) -> str:
    """A folder of ``root`` for this host's CPU; an empty ``root`` (no cache) stays empty.
    XLA:CPU compiles for the host's instruction set, and JAX's cache key does not include it, so
    one cache shared by different machines (a network home, a copied repository) could hand a
    machine code for a CPU it does not have."""
    if not root:
        return ""
    digest = hashlib.sha256(_cpu_description().encode()).hexdigest()[:12]
    return str(Path(root) / f"{platform.machine()}-{digest}")


def _cpu_description() -> str:
    """The host CPU's model and instruction-set flags (Linux), else what ``platform`` knows."""
    with contextlib.suppress(OSError):
        lines = Path("/proc/cpuinfo").read_text().splitlines()
        wanted = [line for line in lines if line.startswith(("model name", "flags", "Features"))]
        if wanted:
            return "\n".join(dict.fromkeys(wanted))  # every core repeats them
    return f"{platform.processor()} {platform.machine()}"


def compiling_note(cache: str) -> str:
    """What the silent first iteration is doing, and how long it takes (measured on a 2-core
    CPU; an accelerator or a compilation cache hit is faster)."""
    cached = f"; cached in {cache} for later runs" if cache else ""
    return f"compiling the training step (about a minute on a 2-core CPU{cached}) ..."


@contextlib.contextmanager
def gc_paused():
    """Tracing the update creates millions of short-lived Python objects, and the cyclic garbage
    collector kept rescanning them: pausing it halved trace-and-lower time of the default update
    (20.5 s to 10.9 s measured). Nothing that lives long is created meanwhile."""
    gc.collect()
    gc.freeze()
    gc.disable()
    try:
        yield
    finally:
        gc.enable()
        gc.unfreeze()
