"""Checkpoints carry a checksum and the shapes they hold: garbled bytes, or a checkpoint of another
network or environment count, is a one-line ``CheckpointError`` naming the file and what differs;
checkpoints from before the checksum still load; an export never replaces a good one with a bad one."""

import hashlib
import json
from pathlib import Path

import jax
import numpy as np
import pytest
from flax import serialization

from smoothloco.deploy import export
from smoothloco.robot_side.contract import PolicyContractError
from smoothloco.tasks import VelocityTask
from smoothloco.train import checkpoint, shac_loop
from smoothloco.train.checkpoint import CheckpointError
from smoothloco.train.runs import TrainConfig, load_run
from smoothloco.train.shac import SHAC, SHACConfig, make_env

SHAC_TINY = SHACConfig(
    num_envs=4, horizon=2, iterations=2, critic_minibatches=2, actor_hidden=(16, 16), critic_hidden=(16,)
)
TREE = {
    "layer": {"kernel": np.arange(6, dtype=np.float32).reshape(2, 3), "bias": np.zeros(3, np.float32)},
    "step": np.int32(7),
}
MAGIC = len(checkpoint.MAGIC)


def _one_line(exc: pytest.ExceptionInfo) -> str:
    text = str(exc.value)
    assert "\n" not in text
    return text


def test_a_checkpoint_holds_a_checksum_and_its_shapes(tmp_path: Path):
    path = tmp_path / "ckpt.msgpack"
    checkpoint.save(path, TREE)
    data = path.read_bytes()
    assert data.startswith(checkpoint.MAGIC)
    header_line, payload = data[MAGIC:].split(b"\n", 1)
    header = json.loads(header_line)
    assert header["sha256"] == hashlib.sha256(payload).hexdigest() and header["bytes"] == len(payload)
    arrays = {"layer/kernel": [[2, 3], "float32"], "layer/bias": [[3], "float32"], "step": [[], "int32"]}
    assert header["arrays"] == arrays
    restored = checkpoint.load(path, TREE)
    np.testing.assert_array_equal(restored["layer"]["kernel"], TREE["layer"]["kernel"])
    assert [p.name for p in tmp_path.iterdir()] == ["ckpt.msgpack"]  # no temporary file left


@pytest.mark.parametrize(
    "garble,message",
    [
        (lambda d: d[:-20] + bytes(16) + d[-4:], "do not match the sha256 checksum"),
        (lambda d: d[:-5], "bytes of arrays, its header says"),
        (lambda d: d[:MAGIC] + b"{garbled" + d[MAGIC + 8 :], "its header is not readable"),
    ],
    ids=["garbled", "truncated", "header"],
)
def test_garbled_bytes_are_a_one_line_error_naming_the_file(garble, message, tmp_path: Path):
    path = tmp_path / "ckpt.msgpack"
    checkpoint.save(path, TREE)
    path.write_bytes(garble(path.read_bytes()))
    for read in (lambda: checkpoint.load(path, TREE), lambda: checkpoint.load_raw(path)):
        with pytest.raises(CheckpointError) as exc:
            read()
        assert message in _one_line(exc) and str(path) in str(exc.value)


def test_a_checkpoint_from_before_the_checksum_still_loads(tmp_path: Path):
    path = tmp_path / "old.msgpack"
    path.write_bytes(serialization.to_bytes(TREE))  # the format before the header
    np.testing.assert_array_equal(checkpoint.load(path, TREE)["layer"]["bias"], TREE["layer"]["bias"])
    other = {**TREE, "layer": {**TREE["layer"], "kernel": np.zeros((2, 4), np.float32)}}
    with pytest.raises(checkpoint.CheckpointMismatch) as exc:  # and its shapes are still checked
        checkpoint.load(path, other)
    assert "layer/kernel is (2, 3), expected (2, 4)" in _one_line(exc)


def test_other_shapes_or_entries_are_named(tmp_path: Path):
    path = tmp_path / "ckpt.msgpack"
    checkpoint.save(path, (TREE, {"obs": np.zeros((4, 5))}))
    train_state = {"layer": {"kernel": np.zeros((2, 3)), "bias": np.zeros(3)}, "step": 0, "extra": 0}
    template = (train_state, {"obs": np.zeros((8, 5))})
    with pytest.raises(checkpoint.CheckpointMismatch) as exc:
        checkpoint.load(path, template, names=("train_state", "env_state"))
    text = _one_line(exc)
    assert text.startswith(f"checkpoint {path} does not match the configuration: ")
    assert "env_state/obs is (4, 5), expected (8, 5)" in text and "train_state/extra missing" in text


@pytest.fixture(scope="module")
def shac_run(tmp_path_factory):
    """An untrained SHAC run folder (as ``train`` leaves one) and its (train_state, env_state)."""
    run = tmp_path_factory.mktemp("integrity") / "run"
    config = TrainConfig(shac=SHAC_TINY)
    algo = SHAC(make_env(VelocityTask(config.task), SHAC_TINY.episode_length), SHAC_TINY)
    state = jax.device_get(jax.jit(algo.init)(jax.random.PRNGKey(0)))
    run.mkdir(parents=True)
    (run / "config.json").write_text(json.dumps(config.to_dict()))
    checkpoint.save(run / checkpoint.CHECKPOINT_NAME, state)
    return run, state


def test_a_checkpoint_of_another_environment_count_is_named_as_such(shac_run):
    run, (train_state, env_state) = shac_run
    path = run / checkpoint.CHECKPOINT_NAME
    assert checkpoint.saved_iteration(path) == 0
    eight = jax.tree.map(lambda x: np.zeros((8, *np.shape(x)[1:]), np.asarray(x).dtype), env_state)
    with pytest.raises(CheckpointError) as exc:
        shac_loop.load_shac_checkpoint(path, (train_state, eight), num_envs=8)
    assert _one_line(exc) == f"checkpoint {path} holds 4 environments; the configuration asks shac.num_envs 8"
    restored, _ = shac_loop.load_shac_checkpoint(path, (train_state, env_state), num_envs=4)
    np.testing.assert_array_equal(restored.iteration, train_state.iteration)


def test_a_checkpoint_of_another_network_is_named_by_load_run(shac_run, tmp_path: Path):
    run, _ = shac_run
    other = tmp_path / "other"
    other.mkdir()
    (other / checkpoint.CHECKPOINT_NAME).write_bytes((run / checkpoint.CHECKPOINT_NAME).read_bytes())
    saved = json.loads((run / "config.json").read_text())
    saved["shac"]["actor_hidden"] = [16, 8]
    (other / "config.json").write_text(json.dumps(saved))
    with pytest.raises(CheckpointError) as exc:
        load_run(other)
    text = _one_line(exc)
    assert text.startswith(f"checkpoint {other / checkpoint.CHECKPOINT_NAME} does not match config.json: ")
    assert "train_state/actor_params/params/MLP_0/Dense_1/kernel is (16, 16), expected (16, 8)" in text
    (other / "config.json").write_text("{not json")
    with pytest.raises(CheckpointError, match="config.json is not a readable run configuration"):
        load_run(other)


def test_load_run_reads_a_checkpoint_from_before_the_checksum(shac_run, tmp_path: Path):
    run, state = shac_run
    old = tmp_path / "old"
    old.mkdir()
    (old / "config.json").write_text((run / "config.json").read_text())
    (old / checkpoint.CHECKPOINT_NAME).write_bytes(serialization.to_bytes(state))
    assert load_run(old).config.shac == SHAC_TINY


def _export_files(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir())}


def test_a_failed_export_leaves_the_good_one(shac_run, tmp_path: Path, monkeypatch):
    run, _ = shac_run
    out = tmp_path / "deploy"
    assert export.export_run(run, out) == out
    good = _export_files(out)
    assert sorted(good) == sorted(export.EXPORT_FILES)
    contract = json.loads(good["policy.json"])
    assert contract["source"]["onnx_sha256"] == hashlib.sha256(good["controller.onnx"]).hexdigest()

    def refusing_player(folder):
        raise PolicyContractError(f"{folder}: refused")

    monkeypatch.setattr(export, "Player", refusing_player)  # fails after the graph and contract are written
    with pytest.raises(PolicyContractError):
        export.export_run(run, out)
    monkeypatch.undo()
    assert _export_files(out) == good and sorted(p.name for p in tmp_path.iterdir()) == ["deploy"]

    garbled = tmp_path / "garbled"
    garbled.mkdir()
    (garbled / "config.json").write_text((run / "config.json").read_text())
    data = bytearray((run / checkpoint.CHECKPOINT_NAME).read_bytes())
    data[-200:-136] = bytes(b ^ 0xFF for b in data[-200:-136])  # 64 garbled bytes
    (garbled / checkpoint.CHECKPOINT_NAME).write_bytes(bytes(data))
    with pytest.raises(CheckpointError, match="do not match the sha256 checksum"):
        export.export_run(garbled, out)
    assert _export_files(out) == good
