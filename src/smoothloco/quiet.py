"""Two messages from our dependencies that say nothing to a user, removed line by line.

1. ``Failed to import warp: No module named 'warp'`` and ``Failed to import mujoco_warp: No
   module named 'warp'``: ``mujoco.mjx.warp`` ``print``s them to stdout when the optional
   ``warp`` package (MJX on NVIDIA Warp, which we do not use) is not installed. Brax imports
   ``mujoco.mjx`` and with it ``mujoco.mjx.warp``, so every command printed them.
   ``install_warp_probe_filter`` (called by ``smoothloco/__init__.py``) hooks the import of
   that one module and drops those two lines while it runs; any other output of it, a broken
   (installed but failing) warp included, is printed as before.

2. ``E... cpu_aot_loader.cc] Loading XLA:CPU AOT result. Target machine feature
   +prefer-no-gather is not supported on the host machine ...`` (and ``+prefer-no-scatter``):
   on every persistent-compilation-cache hit, ~3,000 characters per line, twice per compiled
   program. The cause is XLA's, not the cache's: on any CPU with AVX-512, XLA:CPU adds the LLVM
   *tuning* flags ``+prefer-no-gather,+prefer-no-scatter`` to the target features it compiles
   for (gathers and scatters are slow there), and when it loads a cached program it checks each
   compile feature against ``llvm::sys::getHostCPUFeatures()``, which lists instruction-set
   features only. The two tuning flags are never found, so every load is reported as a machine
   mismatch although the program was compiled on this very CPU (XLA's own TODO b/477590953
   already calls it a warning to be turned into an error later). A real mismatch cannot occur
   here anyway: ``train.compile_cache.host_compile_cache`` gives each host CPU its own cache folder.
   ``quiet_cache_loads`` wraps JAX's cache read and drops, from what XLA writes to stderr
   meanwhile, exactly these lines for these two flags, plus the line ``Assume version
   compatibility. PjRt-IFRT does not track XLA executable versions`` that each load also
   writes (JAX's cache key already holds the jaxlib version). A mismatch in any real
   instruction-set feature (``+avx512f``, ...) and everything else is still printed. Lowering
   ``TF_CPP_MIN_LOG_LEVEL`` instead would have hidden every XLA error of the process.

Only the standard library is imported at the top: this module is loaded with the package, by
``robot_side``'s users too, which must not need JAX.
"""

from __future__ import annotations

import contextlib
import io
import os
import re
import sys
import tempfile
import threading
from collections.abc import Callable, Iterator
from importlib.machinery import PathFinder

WARP_PROBE = "mujoco.mjx.warp"
WARP_MISSING = re.compile(r"^Failed to import (?:mujoco_)?warp: No module named 'warp'\n?$")
CACHE_LOAD_NOISE = re.compile(
    rb"^[WE]\d{4} [\d:.]+ +\d+ (?:"
    rb"cpu_aot_loader\.cc:\d+\] Loading XLA:CPU AOT result\. Target machine feature \+prefer-no-(?:gather|scatter) "
    rb"is not +supported on the host machine\."
    rb"|pjrt_executable\.cc:\d+\] Assume version compatibility\. PjRt-IFRT does not track XLA executable versions\."
    rb")"
)


# -- 1. the warp probe ---------------------------------------------------------------------
def drop_lines(text: str, pattern: re.Pattern) -> str:
    """``text`` without the lines that ``pattern`` matches."""
    return "".join(line for line in text.splitlines(keepends=True) if not pattern.match(line))


class _WarpProbeFilter:
    """Meta-path finder for ``mujoco.mjx.warp`` alone: the module is found as usual and executed
    with its stdout captured; what it printed goes on to stdout without ``WARP_MISSING`` lines."""

    def find_spec(self, name: str, path=None, target=None):
        if name != WARP_PROBE:
            return None
        spec = PathFinder.find_spec(name, path, target)
        loader = getattr(spec, "loader", None)
        if loader is None or not hasattr(loader, "exec_module"):
            return spec
        run = loader.exec_module  # this spec's own loader instance: nothing else is affected

        def exec_module(module) -> None:
            captured = io.StringIO()
            try:
                with contextlib.redirect_stdout(captured):
                    run(module)
            finally:
                sys.stdout.write(drop_lines(captured.getvalue(), WARP_MISSING))

        loader.exec_module = exec_module
        return spec

    def invalidate_caches(self) -> None:
        pass


def install_warp_probe_filter() -> None:
    """Hook the import of ``mujoco.mjx.warp`` (once per process; a no-op once it is imported)."""
    if WARP_PROBE in sys.modules or any(isinstance(f, _WarpProbeFilter) for f in sys.meta_path):
        return
    sys.meta_path.insert(0, _WarpProbeFilter())


# -- 2. XLA:CPU cache loads ------------------------------------------------------------------
_cache_lock = threading.Lock()


@contextlib.contextmanager
def stderr_without(pattern: re.Pattern) -> Iterator[None]:
    """Send file descriptor 2 (where XLA's C++ logging writes) to a temporary file meanwhile,
    then write it back without the lines ``pattern`` matches. Nothing else is lost or reordered
    relative to itself; output of other threads meanwhile is only delayed."""
    try:
        saved = os.dup(2)
    except OSError:  # no stderr to filter
        yield
        return
    sys.stderr.flush()
    with tempfile.TemporaryFile() as held:
        os.dup2(held.fileno(), 2)
        try:
            yield
        finally:
            sys.stderr.flush()
            os.dup2(saved, 2)
            os.close(saved)
            held.seek(0)
            kept = b"".join(line for line in held.read().splitlines(keepends=True) if not pattern.match(line))
            if kept:
                os.write(2, kept)


def quiet_cache_loads() -> bool:
    """Filter ``CACHE_LOAD_NOISE`` out of every persistent-cache read of JAX from now on
    (idempotent). False when this JAX has no ``compilation_cache.get_executable_and_time`` to
    wrap (another version than the pinned one): then nothing changes and the lines show."""
    try:
        # Late import: this module is imported by ``smoothloco/__init__``, which must not load JAX.
        from jax._src import compilation_cache
    except ImportError:
        return False
    read: Callable | None = getattr(compilation_cache, "get_executable_and_time", None)
    if read is None:
        return False
    if getattr(read, "_smoothloco_quiet", False):
        return True

    def get_executable_and_time(*args, **kwargs):
        with _cache_lock, stderr_without(CACHE_LOAD_NOISE):
            return read(*args, **kwargs)

    get_executable_and_time._smoothloco_quiet = True  # type: ignore[attr-defined]
    get_executable_and_time.__wrapped__ = read  # type: ignore[attr-defined]
    compilation_cache.get_executable_and_time = get_executable_and_time
    return True
