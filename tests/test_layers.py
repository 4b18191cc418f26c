"""The import graph flows one way: every module of ``smoothloco`` sits in a layer and imports
only from its own layer or below, without cycles, and at the top of the file.

The imports are read from the source with ``ast`` (module level, inside functions, under
``if TYPE_CHECKING``), so an upward import cannot hide in a function. Nothing is imported here
except by the last test, which runs in a child process.
"""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src"
PACKAGE = SRC / "smoothloco"

# Lowest first. A module imports only from its own layer or one listed before it. Each folder
# holds one layer or a run of adjacent ones, so the folders read bottom-up as the layers do.
LAYERS: tuple[tuple[str, tuple[str, ...]], ...] = (
    # Shared helpers with no smoothloco dependencies of their own (stdlib, JAX, matplotlib).
    ("base", ("smoothloco", "smoothloco.argtypes", "smoothloco.job", "smoothloco.parallel", "smoothloco.plotting",
              "smoothloco.quiet", "smoothloco.validation")),
    # What runs beside an export (contract reader, robot-side loop, MuJoCo test bench) imports
    # nothing from smoothloco but its own folder (it is copied next to an export), so everything
    # above may use its command and push types and its MuJoCo settings.
    ("robot side", ("smoothloco.robot_side", "smoothloco.robot_side.*")),
    ("robot", ("smoothloco.robot", "smoothloco.robot.*")),
    ("sim", ("smoothloco.sim", "smoothloco.sim.*")),
    ("tasks", ("smoothloco.tasks", "smoothloco.tasks.*")),
    # Measurements on trajectories of the task; the training loop evaluates with them.
    ("measure", ("smoothloco.measure", "smoothloco.measure.*")),
    ("agents", ("smoothloco.train", "smoothloco.train.networks", "smoothloco.train.shac", "smoothloco.train.ppo")),
    ("runs", ("smoothloco.train.runs", "smoothloco.train.checkpoint", "smoothloco.train.run_folder")),
    # One training run: its log and evaluations, each algorithm's host loop, the summary, and
    # the run's lifecycle (runner) that ties them together.
    ("train loop", ("smoothloco.train.compile_cache", "smoothloco.train.evaluation", "smoothloco.train.run_log",
                    "smoothloco.train.shac_loop", "smoothloco.train.ppo_loop", "smoothloco.train.summary",
                    "smoothloco.train.runner")),
    ("deploy", ("smoothloco.deploy", "smoothloco.deploy.*")),
    ("evaluate", ("smoothloco.evaluate", "smoothloco.evaluate.*")),
    ("experiments", ("smoothloco.experiments", "smoothloco.experiments.*")),
    ("commands", ("smoothloco.commands", "smoothloco.commands.*")),
)  # fmt: skip
LATE_IMPORT_MARK = "late import"  # the comment a deliberate import inside a function carries


def _modules() -> dict[str, Path]:
    out = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = path.relative_to(SRC).with_suffix("").parts
        out[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return out


MODULES = _modules()


def where(module: str, line: int) -> str:
    path = MODULES[module]
    return f"{path.relative_to(SRC) if path.is_relative_to(SRC) else path}:{line}"


def layer_of(module: str) -> int:
    for index, (_, patterns) in enumerate(LAYERS):
        for pattern in patterns:
            if module == pattern or (pattern.endswith(".*") and module.startswith(pattern[:-1])):
                return index
    raise KeyError(module)


class Import:
    def __init__(self, target: str, line: int, late: bool) -> None:
        self.target, self.line, self.late = target, line, late


def imports_of(module: str) -> list[Import]:
    """Every import statement of ``module``: its smoothloco target module (a name imported from a
    package counts as its submodule where one exists, else as the package) or its third-party
    name, its line, and whether it sits inside a function or class."""
    path = MODULES[module]
    tree = ast.parse(path.read_text(), str(path))
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found = []

    def visit(node: ast.AST, late: bool) -> None:
        for child in ast.iter_child_nodes(node):
            inner = late or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef))
            if isinstance(child, ast.Import):
                found.extend(Import(alias.name, child.lineno, late) for alias in child.names)
            elif isinstance(child, ast.ImportFrom):
                base = child.module or ""
                if child.level:
                    anchor = package.split(".")[: len(package.split(".")) - (child.level - 1)]
                    base = ".".join(anchor + ([child.module] if child.module else []))
                for alias in child.names:
                    candidate = f"{base}.{alias.name}"
                    found.append(Import(candidate if candidate in MODULES else base, child.lineno, late))
            visit(child, inner)

    visit(tree, False)
    return found


def graph() -> dict[str, set[str]]:
    return {m: {i.target for i in imports_of(m) if i.target in MODULES and i.target != m} for m in MODULES}


def test_every_module_has_a_layer():
    unplaced = [m for m in MODULES if not any(m == p or (p.endswith(".*") and m.startswith(p[:-1]))
                                              for _, ps in LAYERS for p in ps)]  # fmt: skip
    assert not unplaced, f"put these modules in a layer of LAYERS: {unplaced}"


def folder_of(module: str) -> str:
    """The package folder a module lives in (``""``: the package root)."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 and (PACKAGE / parts[1]).is_dir() else ""


def test_folders_hold_consecutive_layers_in_order():
    """Each folder holds one layer or a run of adjacent ones and no two folders interleave, so
    with no upward import between modules there is none between folders either: the tree reads
    bottom-up."""
    spans: dict[str, tuple[int, int]] = {}
    for m in MODULES:
        low, high = spans.get(folder_of(m), (len(LAYERS), -1))
        spans[folder_of(m)] = (min(low, layer_of(m)), max(high, layer_of(m)))
    ordered = sorted(spans.items(), key=lambda item: item[1])
    overlaps = [
        f"{a or 'the package root'} (layers {LAYERS[sa[0]][0]}..{LAYERS[sa[1]][0]}) and "
        f"{b or 'the package root'} (layers {LAYERS[sb[0]][0]}..{LAYERS[sb[1]][0]})"
        for (a, sa), (b, sb) in zip(ordered, ordered[1:])
        if sb[0] <= sa[1]
    ]
    assert not overlaps, f"folders whose layers interleave: {overlaps}"


def test_no_upward_import():
    upward = sorted(
        {
            f"{m} ({LAYERS[layer_of(m)][0]}) imports {i.target} ({LAYERS[layer_of(i.target)][0]}) at {where(m, i.line)}"
            for m in MODULES
            for i in imports_of(m)
            if i.target in MODULES and layer_of(i.target) > layer_of(m)
        }
    )
    assert not upward, "upward imports:\n" + "\n".join(upward)


def find_cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    cycles = []

    def connect(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in sorted(edges.get(node, ())):
            if nxt not in index:
                connect(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                cycles.append(sorted(component))

    for node in sorted(edges):
        if node not in index:
            connect(node)
    return cycles


def test_the_cycle_finder_finds_cycles():
    assert find_cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert find_cycles({"a": {"b"}, "b": set()}) == []


def test_no_import_cycle():
    cycles = find_cycles(graph())
    assert not cycles, "import cycles, each line a set of modules that reach each other:\n" + "\n".join(
        map(", ".join, cycles)
    )


def test_smoothloco_imports_are_at_the_top():
    late = sorted({f"{where(m, i.line)} {i.target}" for m in MODULES for i in imports_of(m)
                   if i.late and i.target.split(".")[0] == "smoothloco"})  # fmt: skip
    assert not late, "imports of smoothloco inside functions:\n" + "\n".join(late)


def test_every_late_import_says_why():
    """A third-party import inside a function is deliberate (start-up time, an optional
    dependency) and says so in a comment with ``LATE_IMPORT_MARK`` above it in its function."""
    unexplained = []
    for m, path in MODULES.items():
        lines = path.read_text().splitlines()
        tree = ast.parse("\n".join(lines))
        functions = [n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]
        for i in imports_of(m):
            if not i.late:
                continue
            start = max((f.lineno for f in functions if f.lineno <= i.line <= f.end_lineno), default=i.line)
            if not any(LATE_IMPORT_MARK in line.lower() for line in lines[start - 1 : i.line]):
                unexplained.append(f"{where(m, i.line)} {i.target}")
    assert not unexplained, f"late imports without a '# {LATE_IMPORT_MARK}: why' comment:\n" + "\n".join(unexplained)


def test_the_robot_side_imports_only_numpy_mujoco_onnxruntime_and_itself():
    allowed = {"numpy", "mujoco", "onnxruntime", "__future__"} | set(sys.stdlib_module_names)
    for module in (m for m in MODULES if m.startswith("smoothloco.robot_side")):
        relative = all(
            i.target.startswith("smoothloco.robot_side")
            for i in imports_of(module)
            if i.target.startswith("smoothloco")
        )
        names = {i.target.split(".")[0] for i in imports_of(module)} - {"smoothloco"}
        assert relative and names <= allowed, f"{module} must stay standalone; it imports {sorted(names - allowed)}"
        absolute = [n for n in ast.walk(ast.parse(MODULES[module].read_text())) if isinstance(n, ast.ImportFrom)
                    and (n.module or "").startswith("smoothloco")]  # fmt: skip
        assert not absolute, f"{module}: import the folder's own modules relatively, so it runs under any name"


@pytest.mark.parametrize(
    "module,target",
    [("smoothloco.train.ppo", "smoothloco.train.runner"), ("smoothloco.sim.step", "smoothloco.commands")],
)
def test_an_upward_import_inside_a_function_is_seen(monkeypatch, tmp_path: Path, module: str, target: str):
    source = MODULES[module].read_text() + f"\n\ndef _late():\n    import {target}  # late import: test\n"
    planted = tmp_path / "planted.py"
    planted.write_text(source)
    monkeypatch.setitem(MODULES, module, planted)
    assert any(i.target == target and i.late for i in imports_of(module))
    with pytest.raises(AssertionError, match="upward imports"):
        test_no_upward_import()


def test_importing_every_module_starts_no_jax_backend():
    """``smoothloco.commands`` imports every command at the top and asks XLA for one device per core
    afterwards (``main``): that works only while no import starts a JAX backend."""
    code = (
        "import importlib, jax\n"
        f"for name in {sorted(MODULES)!r}: importlib.import_module(name)\n"
        "from smoothloco.parallel import request_host_devices\n"
        "request_host_devices(3)\n"
        "print(jax.local_device_count())\n"
    )
    env = {k: v for k, v in os.environ.items() if k != "XLA_FLAGS"}  # conftest fixes 2 devices
    env.update(PYTHONPATH=str(SRC), JAX_PLATFORMS="cpu")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, env=env)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip().splitlines()[-1] == "3"
