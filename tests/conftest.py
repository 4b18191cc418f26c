import os

import pytest

# Two host devices so sharding is exercised on a 2-core CI machine; set before JAX starts.
os.environ.setdefault("XLA_FLAGS", "--xla_force_host_platform_device_count=2")
# One persistent compilation cache for the whole suite, shared by both workers: a program that
# several tests compile alike is compiled once, and a second run of the suite loads them all.
os.environ.setdefault("JAX_COMPILATION_CACHE_DIR", os.path.join(os.path.dirname(__file__), "..", ".jax_cache"))
os.environ.setdefault("JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS", "2")

# XLA's CPU backend spends half of a program's compile time in LLVM's optimizations, which only
# pay off on long runs (SHAC's update: compile CPU 61 -> 31 s without them, each update 3.7x
# slower). The default selection compiles hundreds of small programs and runs each briefly, so
# it goes without; the slow learning checks run long and keep them. Results do not depend on it.
COMPILE_BOUND_FLAG = "--xla_backend_optimization_level=0"


def pytest_configure(config: pytest.Config) -> None:
    """Before any test starts JAX (subprocesses inherit the flags)."""
    flags = os.environ.get("XLA_FLAGS", "")
    if "not slow" in config.getoption("markexpr") and "xla_backend_optimization_level" not in flags:
        os.environ["XLA_FLAGS"] = f"{flags} {COMPILE_BOUND_FLAG}".strip()


@pytest.fixture(autouse=True, scope="session")
def one_compile_cache():
    """``train`` points JAX's process-wide cache at ``run.compile_cache`` (relative to the working
    directory, which tests move into temporary folders): keep the suite's cache instead."""
    from smoothloco.train import runner  # late import: JAX starts after the settings above

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(runner, "use_compile_cache", lambda root: None)
        yield
