"""Quiet by default: no "Failed to import warp" lines, no XLA machine-mismatch lines on a warm
compile cache, and nothing else hidden (see ``smoothloco.quiet``)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from smoothloco.quiet import CACHE_LOAD_NOISE, WARP_MISSING, drop_lines, stderr_without

AOT_LINE = (
    b"E1204 15:32:56.589568   10013 cpu_aot_loader.cc:220] Loading XLA:CPU AOT result. Target machine feature "
    b"+prefer-no-gather is not  supported on the host machine. Machine type used for XLA:CPU compilation doesn't "
    b"match the machine type for execution. Compile machine features: [+64bit,+adx] vs host machine features: [adx]"
    b". This could lead to execution errors such as SIGILL.\n"
)


def _python(code: str, env: dict | None = None) -> subprocess.CompletedProcess:
    env = {**os.environ, **(env or {})}
    env.pop("XLA_FLAGS", None)
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, env=env)


def test_importing_the_task_prints_nothing():
    """Brax imports mujoco.mjx, whose warp probe printed two lines; the probe still runs."""
    done = _python("import smoothloco.tasks\nfrom mujoco.mjx import warp\nprint(warp.WARP_INSTALLED)")
    assert done.returncode == 0, done.stderr
    assert done.stdout == "False\n" and "Failed to import" not in done.stderr


def test_only_the_missing_warp_lines_are_dropped():
    printed = (
        "Failed to import warp: No module named 'warp'\n"
        "Failed to import mujoco_warp: No module named 'warp'\n"
        "Failed to import warp: CUDA driver version is insufficient\n"
        "something else\n"
    )
    assert drop_lines(printed, WARP_MISSING) == (
        "Failed to import warp: CUDA driver version is insufficient\nsomething else\n"
    )


def test_stderr_filter_keeps_everything_else(capfd):
    genuine = AOT_LINE.replace(b"+prefer-no-gather", b"+avx512f")  # a real ISA mismatch stays visible
    with stderr_without(CACHE_LOAD_NOISE):
        os.write(2, b"before\n" + AOT_LINE + AOT_LINE.replace(b"gather", b"scatter") + genuine)
        os.write(2, b"W1204 15:37:45.248895   10708 pjrt_executable.cc:642] Assume version compatibility. "
                 b"PjRt-IFRT does not track XLA executable versions.\nafter\n")  # fmt: skip
    err = capfd.readouterr().err
    assert err == "before\n" + genuine.decode() + "after\n"


_WARM = """
import sys
import jax, jax.numpy as jnp
from jax._src import compilation_cache
from smoothloco.quiet import quiet_cache_loads
if sys.argv[1] == "quiet":
    assert quiet_cache_loads()
read, hits = compilation_cache.get_executable_and_time, []
def counting(*args, **kwargs):
    out = read(*args, **kwargs)
    hits.append(out[0] is not None)
    return out
compilation_cache.get_executable_and_time = counting
jax.config.update("jax_compilation_cache_dir", sys.argv[2])
jax.config.update("jax_persistent_cache_min_compile_time_secs", 0)
jax.config.update("jax_persistent_cache_min_entry_size_bytes", 0)
print(float(jax.jit(lambda x: jnp.sin(x) @ x.T)(jnp.ones((4, 4))).sum()), any(hits))
"""


def _warm(mode: str, cache: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-c", _WARM, mode, str(cache)],
        capture_output=True,
        text=True,
        timeout=300,
        env={k: v for k, v in os.environ.items() if k not in ("XLA_FLAGS", "JAX_COMPILATION_CACHE_DIR")},
    )


def test_a_warm_compile_cache_loads_quietly(tmp_path: Path):
    cold = _warm("quiet", tmp_path)
    assert cold.returncode == 0 and cold.stdout.split()[-1] == "False", cold.stderr  # compiled, written
    warm = _warm("quiet", tmp_path)
    assert warm.returncode == 0 and warm.stdout.split()[-1] == "True", warm.stderr  # loaded from the cache
    assert warm.stdout.split()[0] == cold.stdout.split()[0]
    assert "cpu_aot_loader" not in warm.stderr and "Assume version compatibility" not in warm.stderr
    loud = _warm("loud", tmp_path)
    assert loud.stdout.split()[-1] == "True"
    cpuinfo = Path("/proc/cpuinfo")
    if cpuinfo.exists() and "avx512" in cpuinfo.read_text():
        # What the filter is for: on an AVX-512 host XLA reports its own tuning flags as missing.
        assert "Target machine feature +prefer-no-gather" in loud.stderr
