"""Property-based tests of the input boundaries (Hypothesis): a robot spec, a run configuration
file, the training's command-line flags, an exported contract and an experiment folder, each
mutated at random from a valid one (a field set to any value or one of its type, a key removed
or added, a list entry changed).

The invariant at every boundary: valid input is accepted and runs; invalid input is refused
with exit status 2 (or the boundary's own error type) and one short line, and nothing is
written. The default run tries a few dozen cases per boundary; the ``slow`` variants try
hundreds (``pytest -m slow tests/test_fuzz_boundaries.py``)."""

from __future__ import annotations

import contextlib
import copy
import hashlib
import io
import json
import math
import shutil
import tempfile
import tomllib
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from unittest import mock

import pytest
from fakes import write_untrained_run
from hypothesis import HealthCheck, event, example, given, settings
from hypothesis import strategies as st

from smoothloco.commands import main
from smoothloco.commands import train as train_cli
from smoothloco.deploy.export import export_run
from smoothloco.experiments import compare
from smoothloco.robot.loading import ASSETS, SPEC_KEYS, load_spec_file
from smoothloco.robot_side.testbench import Player, PolicyContractError
from smoothloco.tasks import VelocityTask, VelocityTaskConfig
from smoothloco.train.run_folder import SUMMARY_NAME
from smoothloco.train.runs import TrainConfig
from smoothloco.train.shac import SHACConfig

MAX_LINE = 1000  # characters of a refusal, whatever the input's size
FEW, MANY = 40, 400  # cases per boundary: default run, slow run


def budget(examples: int) -> settings:
    # No example database: a test run writes nothing into the repository.
    return settings(max_examples=examples, deadline=None, database=None, suppress_health_check=list(HealthCheck))


pytestmark = pytest.mark.filterwarnings("ignore:os.fork:RuntimeWarning")


# -- values and mutations ------------------------------------------------------------------------
EDGE_NUMBERS = st.sampled_from([0, 1, -1, 2, 0.0, -0.0, 0.5, -0.5, 1e-12, 1e12, 10**400, -(10**400), 2**63])
SCALARS = st.one_of(
    st.booleans(),
    st.integers(min_value=-5, max_value=5000),
    st.floats(allow_nan=True, allow_infinity=True),
    st.floats(min_value=-2.0, max_value=2.0),
    EDGE_NUMBERS,
    st.text(max_size=12),
)
VALUES = st.recursive(
    st.one_of(SCALARS, st.none()),
    lambda inner: st.one_of(st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=6), inner, max_size=3)),
    max_leaves=8,
)


def _paths(tree: object, prefix: tuple = ()) -> list[tuple]:
    """Every key path into ``tree``'s dicts and lists, ``()`` (the whole) excluded."""
    out = []
    items = tree.items() if isinstance(tree, dict) else enumerate(tree) if isinstance(tree, list) else ()
    for key, value in items:
        out.append((*prefix, key))
        out += _paths(value, (*prefix, key))
    return out


def like(value: object) -> st.SearchStrategy:
    """Values of ``value``'s own JSON type, odd ones included: these pass a type check and must
    then meet the ranges."""
    if isinstance(value, bool):
        return st.booleans()
    if isinstance(value, int):
        return st.one_of(st.integers(min_value=-3, max_value=10**6), EDGE_NUMBERS.filter(lambda v: isinstance(v, int)))
    if isinstance(value, float):
        odd = st.floats(allow_nan=True, allow_infinity=True)
        return st.one_of(odd, st.floats(-2.0, 2.0), st.just(-value), EDGE_NUMBERS)
    if isinstance(value, str):
        return st.one_of(st.text(max_size=12), st.just(value.upper()), st.just(""))
    if isinstance(value, (list, tuple)):
        if not value:
            return st.lists(st.floats(-2.0, 2.0), max_size=3)
        return st.one_of(
            st.lists(like(value[0]), min_size=len(value), max_size=len(value)),  # same length, other entries
            st.lists(like(value[0]), max_size=len(value) + 1),
        )
    return VALUES


@st.composite
def mutations(draw, tree: dict, values=VALUES) -> tuple[str, tuple, object]:
    """One change of ``tree``: ``("set", path, value)`` with any value or one of the same type,
    ``("delete", path, None)`` or ``("add", path + (new key,), value)``."""
    kind = draw(st.sampled_from(["set", "typed", "typed", "typed", "delete", "add"]))
    paths = [p for p in _paths(tree) if kind != "add" or isinstance(_get(tree, p), dict)]
    if kind == "typed":
        paths = [p for p in paths if not isinstance(_get(tree, p), dict)]
    path = draw(st.sampled_from(paths or [()]))
    if kind == "add":
        return kind, (*path, draw(st.text(min_size=1, max_size=8))), draw(values)
    if kind == "typed":
        return "set", path, draw(like(_get(tree, path)))
    return kind, path, None if kind == "delete" else draw(values)


def _get(tree, path: tuple):
    for key in path:
        tree = tree[key]
    return tree


def mutated(tree: dict, mutation: tuple[str, tuple, object]) -> dict:
    kind, path, value = mutation
    out = copy.deepcopy(tree)
    if not path:
        return out
    parent = _get(out, path[:-1])
    if kind == "delete":
        del parent[path[-1]]
    else:
        parent[path[-1]] = value
    return out


def one_short_line(text: str) -> bool:
    text = text.removesuffix("\n")
    return bool(text) and "\n" not in text and len(text) <= MAX_LINE


def run_cli(argv: list[str]) -> tuple[int, str]:
    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        code = main(argv)
    return code, err.getvalue()


def folder_state(folder: Path) -> dict[str, str]:
    """What ``folder`` holds: relative path -> sha256 (folders: empty)."""
    return {
        str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest() if p.is_file() else ""
        for p in sorted(folder.rglob("*"))
    }


# -- robot spec ----------------------------------------------------------------------------------
SPEC = tomllib.loads((ASSETS / "go2.toml").read_text())
# a table holding every task setting, so that mutations reach each one
SPEC_WITH_TASK = {**SPEC, "task": json.loads(json.dumps(VelocityTaskConfig().to_dict()))}
del SPEC_WITH_TASK["task"]["robot"]
TOML_VALUES = st.recursive(
    SCALARS,
    lambda inner: st.one_of(st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=6), inner, max_size=3)),
    max_leaves=8,
)


def toml_value(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return "nan" if math.isnan(value) else ("inf" if value > 0 else "-inf") if math.isinf(value) else repr(value)
    if isinstance(value, str):
        return json.dumps(value)
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(toml_value(v) for v in value) + "]"
    return "{" + ", ".join(f"{json.dumps(k)} = {toml_value(v)}" for k, v in value.items()) + "}"


def toml_text(table: dict) -> str:
    """``table`` as TOML: top-level entries first, each table as inline tables."""
    return "".join(f"{json.dumps(k)} = {toml_value(v)}\n" for k, v in table.items())


def check_spec(mutation) -> None:
    table = mutated(SPEC_WITH_TASK, mutation)
    with tempfile.TemporaryDirectory() as folder:
        shutil.copy(ASSETS / "go2.xml", Path(folder) / "go2.xml")
        path = Path(folder) / "robot.toml"
        path.write_text(toml_text(table))
        try:
            load_spec_file(path)
            config = VelocityTaskConfig.for_robot(str(path))
        except ValueError as exc:  # RobotSpecError included
            event("refused")
            assert one_short_line(str(exc)), str(exc)[:2000]
            before = folder_state(Path(folder))
            code, err = run_cli(["robot", str(path)])
            assert code == 2 and err.startswith("error: ") and one_short_line(err), err[:2000]
            assert folder_state(Path(folder)) == before
            return
        event("accepted")
        assert set(table) <= set(SPEC_KEYS)
        assert VelocityTask(config).action_size == 12  # valid: its task builds


@budget(FEW)
@given(mutations(SPEC_WITH_TASK, TOML_VALUES))
def test_robot_spec_boundary(mutation):
    check_spec(mutation)


@pytest.mark.slow
@budget(MANY)
@given(mutations(SPEC_WITH_TASK, TOML_VALUES))
def test_robot_spec_boundary_at_length(mutation):
    check_spec(mutation)


# -- run configuration file ----------------------------------------------------------------------
SAVED = json.loads(json.dumps(TrainConfig().to_dict()))


def check_config(text: bytes) -> None:
    calls = []
    with (
        tempfile.TemporaryDirectory() as folder,
        mock.patch.object(train_cli, "train", lambda config, resume: calls.append(config) or (None, None, [])),
    ):
        config_file, out = Path(folder) / "config.json", Path(folder) / "new"
        config_file.write_bytes(text)
        code, err = run_cli(["train", "--config", str(config_file), "--out", str(out), "--run.deploy", "false"])
        event("accepted" if code == 0 else "refused")
        if code == 0:  # valid: training was reached with typed values, and its task builds
            assert len(calls) == 1 and TrainConfig.from_dict(calls[0].to_dict()) == calls[0]
            assert VelocityTask(calls[0].task).action_size == 12
        else:
            assert code == 2 and err.startswith("error: ") and one_short_line(err), err[:2000]
            assert not calls and not out.exists()


@st.composite
def config_files(draw) -> bytes:
    if draw(st.integers(0, 9)) == 0:  # now and then, bytes that need not be text at all
        return draw(st.binary(max_size=200))
    return json.dumps(mutated(SAVED, draw(mutations(SAVED)))).encode()


@budget(FEW)
@given(config_files())
def test_run_configuration_boundary(text):
    check_config(text)


@pytest.mark.slow
@budget(MANY)
@given(config_files())
def test_run_configuration_boundary_at_length(text):
    check_config(text)


# -- command-line flags --------------------------------------------------------------------------
FLAGS = train_cli.config_flags()
FLAG_TEXTS = st.one_of(
    st.text(max_size=12),
    st.floats(allow_nan=True, allow_infinity=True).map(repr),
    st.integers(min_value=-(10**20), max_value=10**20).map(str),
    EDGE_NUMBERS.map(str),
    st.sampled_from(["1e-308", "1e308", "5e-324", "-0", "true", "off", "", ",", "1,2", "0.1,0.2", "2,1", "1,2,3"]),
)


def check_flags(argv: list[str]) -> None:
    """``train`` with config flags: accepted and training reached, or exit status 2 (argparse's
    own refusal prints the error line, then a hint line) with nothing written."""
    calls = []
    with (
        tempfile.TemporaryDirectory() as folder,
        mock.patch.object(train_cli, "train", lambda config, resume: calls.append(config) or (None, None, [])),
    ):
        out = Path(folder) / "new"
        try:
            code, err = run_cli(["train", "--out", str(out), "--run.deploy", "false", *argv])
        except SystemExit as exit_:  # argparse refused a value's type
            event("refused by argparse")
            assert exit_.code == 2 and not calls and not out.exists()
            return
        event("accepted" if code == 0 else "refused")
        if code == 0:
            assert len(calls) == 1
        else:
            assert code == 2 and err.startswith("error: ") and one_short_line(err), err[:2000]
            assert not calls and not out.exists()


FLAG_ARGS = st.lists(st.tuples(st.sampled_from(FLAGS), FLAG_TEXTS), min_size=1, max_size=3).map(
    lambda pairs: [f"--{name}={text}" for (name, _, _), text in pairs]
)


@budget(FEW)
@given(FLAG_ARGS)
@example(["--task.sim_dt=5e-324"])  # found by hand: a step count of inf overflowed
def test_command_line_flags_boundary(argv):
    with contextlib.redirect_stderr(io.StringIO()):  # argparse's usage on a refusal
        check_flags(argv)


@pytest.mark.slow
@budget(MANY)
@given(FLAG_ARGS)
def test_command_line_flags_boundary_at_length(argv):
    with contextlib.redirect_stderr(io.StringIO()):
        check_flags(argv)


# -- exported contract ---------------------------------------------------------------------------
@pytest.fixture(scope="module")
def export_folder(tmp_path_factory) -> Path:
    run = tmp_path_factory.mktemp("fuzz-export") / "run"
    shac = SHACConfig(num_envs=4, horizon=4, critic_minibatches=2, actor_hidden=(16, 16))
    write_untrained_run(run, shac)
    return export_run(run)


def check_contract(export: Path, contract: dict) -> None:
    with tempfile.TemporaryDirectory() as folder:
        target = Path(folder) / "export"
        shutil.copytree(export, target)
        (target / "policy.json").write_text(json.dumps(contract))
        before = folder_state(target)
        try:
            player = Player(target)
        except PolicyContractError as exc:
            event("refused")
            assert one_short_line(str(exc)), str(exc)[:2000]
            assert folder_state(target) == before
            return
        event("accepted")
        with contextlib.chdir(folder):  # MuJoCo logs an unstable simulation to the working directory
            trajectory = player.run(commands=[(0.0, 0.3, 0.0, 0.0)], seconds=0.1)  # valid: it runs
        assert len(trajectory["time"]) >= 1


def contract_mutations(export_folder: Path):
    contract = json.loads((export_folder / "policy.json").read_text())
    return contract, mutations(contract)


@budget(FEW)
@given(data=st.data())
def test_exported_contract_boundary(export_folder, data):
    contract, strategy = contract_mutations(export_folder)
    check_contract(export_folder, mutated(contract, data.draw(strategy)))


@pytest.mark.slow
@budget(MANY)
@given(data=st.data())
def test_exported_contract_boundary_at_length(export_folder, data):
    contract, strategy = contract_mutations(export_folder)
    check_contract(export_folder, mutated(contract, data.draw(strategy)))


# -- experiment folder ---------------------------------------------------------------------------
def check_experiment(saved: Callable[[Path], dict]) -> None:
    """A comparison folder holding a finished SHAC run whose ``config.json`` was changed: the
    run is reused only when its settings are still those asked for (PPO's, which it does not
    train, aside); otherwise refused, untouched."""
    with (
        tempfile.TemporaryDirectory() as folder,
        mock.patch.object(compare, "train", lambda *a, **k: pytest.fail("nothing trains here")),
    ):
        out = Path(folder)
        config = compare.run_configs(compare.BUDGETS["quick"], 0, out)["shac"]
        run_dir = Path(config.run.out)
        run_dir.mkdir()
        (run_dir / "config.json").write_text(json.dumps(saved(run_dir)))
        (run_dir / "metrics.csv").write_text("iteration,env_steps\n1,64\n")
        (run_dir / SUMMARY_NAME).write_text("{}")
        before = folder_state(out)
        try:
            rows = compare.default_trainer(config)
        except ValueError as exc:
            event("refused")
            assert one_short_line(str(exc)), str(exc)[:2000]
            assert folder_state(out) == before
            return
        event("reused")
        assert folder_state(out) == before and rows == [{"iteration": 1.0, "env_steps": 64.0}]
        reread = TrainConfig.from_dict(json.loads((run_dir / "config.json").read_text()))
        # a moved folder is the same run, and so is one whose settings of the other algorithm differ
        assert replace(reread, run=replace(reread.run, out=config.run.out), ppo=config.ppo) == config


def experiment_configs(mutation) -> Callable[[Path], dict]:
    def saved(run_dir: Path) -> dict:
        config = compare.run_configs(compare.BUDGETS["quick"], 0, run_dir.parent)["shac"]
        tree = json.loads(json.dumps(config.to_dict()))
        return mutated(tree, mutation)

    return saved


EXPERIMENT = json.loads(json.dumps(compare.run_configs(compare.BUDGETS["quick"], 0, Path("x"))["shac"].to_dict()))
EXPERIMENT_MUTATIONS = st.one_of(
    mutations(EXPERIMENT),
    # the same value written another way (1.0 as 1, a list as it was): the same settings
    st.sampled_from(_paths(EXPERIMENT)).map(lambda p: ("set", p, _get(EXPERIMENT, p))),
)


@budget(FEW)
@given(EXPERIMENT_MUTATIONS)
def test_experiment_folder_boundary(mutation):
    check_experiment(experiment_configs(mutation))


@pytest.mark.slow
@budget(MANY)
@given(EXPERIMENT_MUTATIONS)
def test_experiment_folder_boundary_at_length(mutation):
    check_experiment(experiment_configs(mutation))
