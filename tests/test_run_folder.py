"""The run folder can be trusted: metrics.csv is appended, never lost or duplicated across a
kill and a resume; a resume trains where it is told; a folder is trained in by one training at a
time and never one that is not a run; exit statuses tell finished from interrupted. A resume
takes only the flags that can change (iterations, evaluation and checkpoint cadence) and refuses
the others by name, says so when the run has already finished, and continues the clocks.

The training loop is replaced by a fake that reports and checkpoints like ``shac_loop.train_shac`` (in
milliseconds): what is tested here is the run folder around it, not the learning."""

import csv
import errno
import json
import os
import shutil
import signal
from pathlib import Path

import numpy as np
import pytest
from fakes import write_untrained_run

from smoothloco.commands import main
from smoothloco.commands.train import EXIT_INTERRUPTED
from smoothloco.train import checkpoint, run_folder, run_log, runner
from smoothloco.train.shac import SHACConfig

TINY = ["--shac.num_envs", "4", "--shac.horizon", "2", "--shac.critic_minibatches", "2", "--run.deploy", "false"]
EVAL_ROW = {"eval/episode_return": 1.0, "eval/lin_vel_error": 0.1, "eval/yaw_rate_error": 0.1, "eval/fall_rate": 0.0}


class Killed(Exception):
    """Stands for a kill -9: the fake loop stops dead between two rows."""


@pytest.fixture
def fake_loop(monkeypatch):
    """Replace the SHAC loop (and the end-of-run summary) with a fake; returns its settings and what it saw.

    Like ``shac_loop.train_shac``: one metrics row per iteration (an evaluation every third, which adds
    columns), the metrics synced and a checkpoint holding the iteration saved every
    ``checkpoint_every`` iterations, at the end and when a stop is requested."""
    seen = {"runs": [], "configs": [], "inodes": [], "finished": [], "finished_history": []}
    settings = {"kill_after": None, "signal_after": None}

    def fake_train_shac(config, log, ckpt_path, resume):
        seen["runs"].append(config.run.out)
        seen["configs"].append(config)
        first = int(checkpoint.load_raw(ckpt_path)["iteration"]) if resume else 0
        iterations = config.shac.iterations
        for it in range(first, iterations):
            row = {**log.row(it + 1, 8 * (it + 1)), "reward_per_step": float(it + 1)}
            if (it + 1) % 3 == 0:
                row.update(EVAL_ROW)
            log.record(row, iterations)
            # Flushed: a kill now loses nothing already recorded.
            assert _iterations(Path(config.run.out))[-1] == it + 1
            seen["inodes"].append((it + 1, os.stat(Path(config.run.out) / "metrics.csv").st_ino))
            if settings["signal_after"] == it + 1:
                signal.raise_signal(signal.SIGINT)
            if (it + 1) % config.run.checkpoint_every == 0 or it + 1 == iterations or log.stop_requested:
                log.sync()
                checkpoint.save(ckpt_path, {"iteration": np.int64(it + 1)})
            if settings["kill_after"] == it + 1:
                raise Killed
            if log.stop_requested and it + 1 < iterations:
                return None, None, True
        return None, None, False

    monkeypatch.setattr(runner, "train_shac", fake_train_shac)

    def fake_finish(run_dir, config, history, *rest):
        seen["finished"].append(run_dir)
        seen["finished_history"].append(history)  # summary.json's wall_seconds and training.png come from it
        (run_dir / run_folder.SUMMARY_NAME).write_text("{}")  # written last, as the real one

    monkeypatch.setattr(runner, "write_summary", fake_finish)
    return settings, seen


def _rows(run_dir: Path) -> list[dict]:
    with (run_dir / "metrics.csv").open(newline="") as f:
        return list(csv.DictReader(f))


def _iterations(run_dir: Path) -> list[int]:
    return [int(r["iteration"]) for r in _rows(run_dir)]


def _listing(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def test_metrics_are_appended_and_a_resume_continues_them_after_a_kill(fake_loop, tmp_path: Path):
    settings, seen = fake_loop
    run = tmp_path / "run"
    settings["kill_after"] = 7  # checkpoints at 4, so rows 5-7 come again after the resume
    with pytest.raises(Killed):
        main(["train", *TINY, "--shac.iterations", "10", "--run.checkpoint_every", "4", "--out", str(run)])
    assert _iterations(run) == list(range(1, 8))
    with (run / "metrics.csv").open("a", newline="") as f:
        f.write("8,64,0.1")  # a row torn by the kill: no newline
    # Appended in place: the file is replaced only when a row adds columns (the first evaluation).
    new_file = [it for (it, ino), (_, before) in zip(seen["inodes"][1:], seen["inodes"]) if ino != before]
    assert new_file == [3]

    settings["kill_after"] = None
    assert main(["train", "--resume", str(run)]) == 0
    rows = _rows(run)
    assert [int(r["iteration"]) for r in rows] == list(range(1, 11))  # no gap, no duplicate, no torn line
    assert [float(r["reward_per_step"]) for r in rows] == [float(i) for i in range(1, 11)]
    assert rows[5]["eval/lin_vel_error"] == "0.1" and rows[4]["eval/lin_vel_error"] == ""
    assert (run / "metrics.csv").read_text().endswith("\n")
    assert seen["finished"] == [run]


def test_a_new_run_starts_the_metrics_afresh(fake_loop, tmp_path: Path):
    settings, _ = fake_loop
    run = tmp_path / "run"
    settings["kill_after"] = 2  # before the first checkpoint: a run folder without a checkpoint
    with pytest.raises(Killed):
        main(["train", *TINY, "--shac.iterations", "3", "--run.checkpoint_every", "5", "--out", str(run)])
    settings["kill_after"] = None
    assert main(["train", *TINY, "--shac.iterations", "2", "--out", str(run)]) == 0
    assert _iterations(run) == [1, 2]


def test_a_torn_or_corrupt_metrics_file_is_read_as_such(tmp_path: Path):
    path = tmp_path / "metrics.csv"
    path.write_text("iteration,env_steps\r\n1,8\r\n2,16\r\n3,2")
    assert run_folder.metrics_rows_before(path, 3) == [
        {"iteration": "1", "env_steps": "8"},
        {"iteration": "2", "env_steps": "16"},
    ]
    path.write_text("iteration,env_steps\n1,8\n2,16,99\n")
    with pytest.raises(run_folder.RunFolderError, match="metrics.csv line 3 is corrupt"):
        run_folder.metrics_rows_before(path, 3)


def test_resume_trains_in_the_folder_named_not_the_one_recorded(fake_loop, tmp_path: Path, monkeypatch):
    settings, seen = fake_loop
    monkeypatch.chdir(tmp_path)
    settings["kill_after"] = 4
    with pytest.raises(Killed):  # recorded as the relative run.out "runs/a"
        main(["train", *TINY, "--shac.iterations", "6", "--run.checkpoint_every", "2", "--out", "runs/a"])
    moved = tmp_path / "elsewhere" / "copy"
    shutil.copytree(tmp_path / "runs" / "a", moved)
    shutil.rmtree(tmp_path / "runs")
    (tmp_path / "other-cwd").mkdir()
    monkeypatch.chdir(tmp_path / "other-cwd")
    settings["kill_after"] = None

    assert main(["train", "--resume", str(moved)]) == 0
    assert seen["runs"][-1] == str(moved) and seen["finished"] == [moved]
    assert _iterations(moved) == list(range(1, 7))
    assert not (tmp_path / "runs").exists() and list((tmp_path / "other-cwd").iterdir()) == []
    assert json.loads((moved / "config.json").read_text())["run"]["out"] == "runs/a"  # the record stays as made


def test_a_second_training_in_a_held_folder_is_refused_and_writes_nothing(fake_loop, tmp_path: Path, capsys):
    _, seen = fake_loop
    run = tmp_path / "run"
    assert main(["train", *TINY, "--shac.iterations", "2", "--out", str(run)]) == 0
    before = _listing(run)
    with run_folder.run_lock(run, create=False):  # another training holds the folder
        lock_text = (run / run_folder.LOCK_NAME).read_text()
        assert main(["train", *TINY, "--out", str(run)]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and "in use by another training" in err and f"pid {os.getpid()}" in err
        assert main(["train", "--resume", str(run), "--shac.iterations", "4"]) == 2  # extending it
        assert "in use by another training" in capsys.readouterr().err
        assert (run / run_folder.LOCK_NAME).read_text() == lock_text
    assert _listing(run) == before and len(seen["runs"]) == 1
    with run_folder.run_lock(run, create=False):  # released when its holder ended
        pass


def test_new_run_refuses_a_folder_that_is_not_a_run(fake_loop, tmp_path: Path, capsys, monkeypatch):
    _, seen = fake_loop
    monkeypatch.chdir(tmp_path)
    foreign = tmp_path / "papers"
    foreign.mkdir()
    (foreign / "notes.txt").write_text("mine")
    (foreign / "config.json").write_text('{"learning_rate": 3}')
    assert main(["train", *TINY, "--out", str(foreign)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "not empty and not a run folder" in err
    assert _listing(foreign) == {"config.json": b'{"learning_rate": 3}', "notes.txt": b"mine"}

    (tmp_path / "a-file").write_text("x")
    assert main(["train", *TINY, "--out", str(tmp_path / "a-file")]) == 2
    assert "is a file" in capsys.readouterr().err
    assert main(["train", *TINY, "--out", ""]) == 2
    assert "run.out must name a folder" in capsys.readouterr().err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a-file", "papers"] and seen["runs"] == []

    empty = tmp_path / "empty"
    empty.mkdir()
    assert main(["train", *TINY, "--shac.iterations", "2", "--out", str(empty)]) == 0  # an empty folder is fine


@pytest.mark.parametrize(
    "flag,value,message",
    [
        ("--shac.actor_lr", "inf", "shac.actor_lr must be finite, got inf"),
        ("--shac.init_log_std", "nan", "shac.init_log_std must be finite, got nan"),
        ("--shac.gamma", "nan", "shac.gamma must be finite, got nan"),
        ("--task.sharpness", "100,inf", "task.sharpness must be finite, got 100.0,inf"),
        ("--ppo.entropy_cost", "nan", "ppo.entropy_cost must be finite, got nan"),
        ("--ppo.learning_rate", "inf", "ppo.learning_rate must be finite, got inf"),
        ("--run.eval_seconds", "inf", "run.eval_seconds must be finite, got inf"),
        ("--run.eval_seconds", "1.0", "run.eval_seconds must be longer than the evaluation's 1 s settling time"),
        ("--run.eval_seconds", "1.01", "must exceed the evaluation's 1 s settling time by at least one control step"),
        ("--run.checkpoint_every", "0", "run.checkpoint_every must be >= 1, got 0"),
        ("--run.eval_every", "-1", "run.eval_every must be >= 0"),
        ("--shac.num_envs", "3", "--shac.num_envs 3 does not split evenly over the 2 local devices"),
    ],
)
def test_invalid_values_are_refused_before_anything_is_written(flag, value, message, tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert main(["train", *TINY, f"{flag}={value}", "--out", "run"]) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1
    assert list(tmp_path.iterdir()) == []


def test_exit_status_tells_interrupted_from_finished(fake_loop, tmp_path: Path, capsys, monkeypatch):
    settings, _ = fake_loop
    run = tmp_path / "run"
    settings["signal_after"] = 3  # SIGINT during iteration 3: the loop checkpoints and stops
    assert (
        main(["train", *TINY, "--shac.iterations", "6", "--run.checkpoint_every", "5", "--out", str(run)])
        == EXIT_INTERRUPTED
    )
    assert "stopped at iteration 3" in capsys.readouterr().out
    assert _iterations(run) == [1, 2, 3]
    settings["signal_after"] = None
    assert main(["train", "--resume", str(run)]) == 0
    assert _iterations(run) == list(range(1, 7))

    def interrupted_start_up(*args):
        raise KeyboardInterrupt  # Ctrl-C before the loop's handler is installed

    monkeypatch.setattr(runner, "train_shac", interrupted_start_up)
    assert main(["train", *TINY, "--out", str(tmp_path / "other")]) == EXIT_INTERRUPTED
    assert "interrupted" in capsys.readouterr().err


def _stamps(folder: Path) -> dict[str, tuple[bytes, int]]:
    """Every file's bytes and modification time: what "nothing touched" compares."""
    files = (p for p in sorted(folder.rglob("*")) if p.is_file())
    return {str(p.relative_to(folder)): (p.read_bytes(), p.stat().st_mtime_ns) for p in files}


def test_resume_of_a_finished_run_says_so_and_touches_nothing(fake_loop, tmp_path: Path, capsys):
    _, seen = fake_loop
    run = tmp_path / "run"
    assert main(["train", *TINY, "--shac.iterations", "3", "--out", str(run)]) == 0
    capsys.readouterr()
    before = _stamps(run)
    for extra in ([], ["--shac.iterations", "3"]):
        assert main(["train", "--resume", str(run), *extra]) == 0
        out = capsys.readouterr()
        assert out.out == f"{run} already finished at iteration 3; pass --shac.iterations M > 3 to extend it\n"
        assert out.err == ""
    assert main(["train", "--resume", str(run), "--shac.iterations", "2"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "checkpointed at iteration 3, past shac.iterations 2" in err
    assert _stamps(run) == before and len(seen["runs"]) == 1


def test_resume_extends_a_finished_run_and_records_it(fake_loop, tmp_path: Path, capsys):
    _, seen = fake_loop
    run = tmp_path / "run"
    assert main(["train", *TINY, "--shac.iterations", "4", "--run.checkpoint_every", "4", "--out", str(run)]) == 0
    capsys.readouterr()
    flags = ["--shac.iterations", "7", "--run.checkpoint_every", "2", "--run.eval_every", "5"]
    assert main(["train", "--resume", str(run), *flags]) == 0
    changes = "resume: shac.iterations 4 -> 7, run.eval_every 50 -> 5, run.checkpoint_every 4 -> 2"
    assert changes in capsys.readouterr().out
    resumed = seen["configs"][-1]
    assert (resumed.shac.iterations, resumed.run.eval_every, resumed.run.checkpoint_every) == (7, 5, 2)
    assert resumed.shac.num_envs == 4 and resumed.run.out == str(run)
    assert _iterations(run) == list(range(1, 8)) and len(seen["finished"]) == 2
    saved = json.loads((run / "config.json").read_text())
    assert (saved["shac"]["iterations"], saved["run"]["eval_every"], saved["run"]["checkpoint_every"]) == (7, 5, 2)
    assert saved["run"]["out"] == str(run) and saved["shac"]["horizon"] == 2
    assert int(checkpoint.load_raw(run / checkpoint.CHECKPOINT_NAME)["iteration"]) == 7
    assert main(["train", "--resume", str(run)]) == 0  # the extension is the run's length now
    assert "already finished at iteration 7" in capsys.readouterr().out


def test_an_unfinished_run_resumes_to_fewer_iterations_but_not_to_none(fake_loop, tmp_path: Path, capsys):
    settings, _ = fake_loop
    run = tmp_path / "run"
    settings["kill_after"] = 4  # checkpointed at 4 of 10
    with pytest.raises(Killed):
        main(["train", *TINY, "--shac.iterations", "10", "--run.checkpoint_every", "4", "--out", str(run)])
    settings["kill_after"] = None
    before = _stamps(run)
    assert main(["train", "--resume", str(run), "--shac.iterations", "4"]) == 2
    assert "stopped at iteration 4 of 10" in capsys.readouterr().err
    assert _stamps(run) == before
    assert main(["train", "--resume", str(run), "--shac.iterations", "6"]) == 0
    assert _iterations(run) == list(range(1, 7))
    assert json.loads((run / "config.json").read_text())["shac"]["iterations"] == 6


def test_resume_refuses_every_other_flag_by_name(fake_loop, tmp_path: Path, capsys):
    _, seen = fake_loop
    run = tmp_path / "run"
    assert main(["train", *TINY, "--shac.iterations", "2", "--out", str(run)]) == 0
    before = _stamps(run)
    capsys.readouterr()
    argv = [
        "--shac.iterations",
        "5",
        "--task.contact",
        "hard",
        "--out",
        "elsewhere",
        "--algo",
        "shac",
        "--task.reward_weights.torques=-1e-4",
    ]
    assert main(["train", "--resume", str(run), *argv]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert "takes only --shac.iterations, --run.eval_every, --run.checkpoint_every" in err
    refused = err.rstrip().split(", not ")[1].split(", ")
    assert sorted(refused) == ["--algo", "--out", "--task.contact", "--task.reward_weights.torques"]
    assert main(["train", "--resume", str(run), "--run.checkpoint_every", "0", "--shac.iterations", "5"]) == 2
    assert "run.checkpoint_every must be >= 1" in capsys.readouterr().err
    assert _stamps(run) == before and len(seen["runs"]) == 1 and not (tmp_path / "elsewhere").exists()


class Clock:
    """``time.perf_counter`` for the run log: every reading is 10 s after the one before."""

    def __init__(self) -> None:
        self.now = 1000.0

    def perf_counter(self) -> float:
        self.now += 10.0
        return self.now


def test_a_resumed_run_continues_the_clocks_of_the_sessions_before(fake_loop, tmp_path: Path, monkeypatch):
    settings, seen = fake_loop
    monkeypatch.setattr(run_log, "time", Clock())  # RunLog's start, then one reading per row
    run = tmp_path / "run"
    settings["kill_after"] = 5  # checkpointed at 4: row 5 comes again after the resume
    with pytest.raises(Killed):
        main(["train", *TINY, "--shac.iterations", "6", "--run.checkpoint_every", "2", "--out", str(run)])
    assert [float(r["wall_s"]) for r in _rows(run)] == [10.0, 20.0, 30.0, 40.0, 50.0]
    settings["kill_after"] = None
    assert main(["train", "--resume", str(run)]) == 0
    rows = _rows(run)
    # Rows 5 and 6 continue from row 4's 40 s: 10 s and 20 s into the second session.
    assert [float(r["wall_s"]) for r in rows] == [10.0, 20.0, 30.0, 40.0, 50.0, 60.0]
    assert [float(r["train_wall_s"]) for r in rows] == [10.0, 20.0, 30.0, 40.0, 50.0, 60.0]
    history = seen["finished_history"][-1]  # what summary.json (wall_seconds) and training.png are made from
    assert [h["iteration"] for h in history] == list(range(1, 7))
    assert history[-1]["wall_s"] == 60.0 and history[2]["eval/lin_vel_error"] == 0.1
    assert "eval/lin_vel_error" not in history[1] and isinstance(history[0]["env_steps"], int)


def test_a_garbled_checkpoint_is_refused_before_anything_is_written(fake_loop, tmp_path: Path, capsys):
    settings, _ = fake_loop
    run = tmp_path / "run"
    settings["kill_after"] = 2
    with pytest.raises(Killed):
        main(["train", *TINY, "--shac.iterations", "4", "--run.checkpoint_every", "2", "--out", str(run)])
    settings["kill_after"] = None
    ckpt = run / checkpoint.CHECKPOINT_NAME
    data = bytearray(ckpt.read_bytes())
    data[-20:-4] = bytes(16)  # in the arrays: still valid msgpack, other numbers
    ckpt.write_bytes(bytes(data))
    before = _stamps(run)
    assert main(["train", "--resume", str(run)]) == 2
    err = capsys.readouterr().err
    assert err == f"error: checkpoint {ckpt} is corrupt: its bytes do not match the sha256 checksum in its header\n"
    assert _stamps(run) == before


def test_a_full_disk_is_a_one_line_error_and_keeps_the_checkpoint(fake_loop, tmp_path: Path, capsys, monkeypatch):
    run = tmp_path / "run"
    assert main(["train", *TINY, "--shac.iterations", "3", "--out", str(run)]) == 0
    saved = (run / checkpoint.CHECKPOINT_NAME).read_bytes()

    def full(path, data):
        raise OSError(errno.ENOSPC, "No space left on device", str(path))

    monkeypatch.setattr(checkpoint, "write_atomically", full)
    assert main(["train", "--shac.iterations", "6", "--resume", str(run)]) == 1
    err = capsys.readouterr().err
    assert "could not write" in err and "No space left on device" in err and err.count("\n") == 1
    assert (run / checkpoint.CHECKPOINT_NAME).read_bytes() == saved


def test_a_finished_run_killed_before_its_summary_gets_it_on_resume(tmp_path: Path, capsys):
    """Killed between the last checkpoint and summary.json: --resume evaluates the final policy
    and writes the summary instead of only saying that the run has finished."""
    run = tmp_path / "run"
    shac = SHACConfig(num_envs=4, horizon=2, critic_minibatches=2, iterations=2)
    write_untrained_run(run, shac, iteration=2)
    rows = "iteration,env_steps,wall_s,train_wall_s\n1,8,30.0,29.0\n2,16,31.0,30.0\n"
    (run / "metrics.csv").write_text(rows)
    assert main(["train", "--resume", str(run)]) == 0
    out = capsys.readouterr().out
    assert "its summary was missing; evaluated and wrote it" in out and "already finished at iteration 2" in out
    summary = json.loads((run / "summary.json").read_text())
    assert summary["env_steps"] == 16 and summary["first_iteration_seconds"] == 30.0
    assert len(summary["per_command"]) == 9 and np.isfinite(summary["lin_vel_error"])
    assert (run / "summary.md").is_file() and (run / "training.png").is_file()


@pytest.mark.slow  # a real SHAC run (the loop above is a fake): a minute of compilation
def test_a_diverging_run_stops_with_its_own_status_and_a_finite_checkpoint(tmp_path: Path, capsys):
    run = tmp_path / "run"
    diverge = ["--shac.actor_lr", "1e30", "--shac.critic_lr", "1e30", "--run.max_skipped_iterations", "3"]
    assert main(["train", *TINY, *diverge, "--shac.iterations", "12", "--run.eval_every", "0", "--out", str(run)]) == 3
    err = capsys.readouterr().err
    assert "iterations in a row skipped their update as non-finite" in err and err.count("\n") == 1
    saved = checkpoint.saved_iteration(run / checkpoint.CHECKPOINT_NAME)
    assert 3 <= saved < 12
