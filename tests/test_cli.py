"""Command-line errors are clear and lose nothing."""

import subprocess
import sys
from pathlib import Path

import pytest

from smoothloco.cli import build_parser, main
from smoothloco.train.cli import config_from_args


def test_flags_reach_the_config():
    args = build_parser().parse_args(
        ["train", "--shac.horizon", "16", "--task.contact", "hard", "--task.commands.lin_vel_x=-0.5,0.5",
         "--task.reward_weights.torques=-1e-4", "--out", "runs/x"]
    )
    config = config_from_args(args)
    assert config.shac.horizon == 16 and config.task.contact == "hard"
    assert config.task.commands.lin_vel_x == (-0.5, 0.5)
    assert config.task.reward_weights["torques"] == -1e-4 and config.run.out == "runs/x"


def _run(*argv):
    return subprocess.run([sys.executable, "-m", "smoothloco.cli", *argv], capture_output=True, text=True, timeout=120)


def test_unknown_flag_is_rejected():
    out = _run("train", "--shac.horizn", "3")
    assert out.returncode == 2 and "unrecognized arguments: --shac.horizn" in out.stderr


def test_invalid_values_are_rejected(capsys):
    assert main(["train", "--shac.horizon", "0"]) == 2
    assert "shac.horizon must be >= 1" in capsys.readouterr().err
    assert main(["train", "--task.contact", "rigid"]) == 2
    assert "accepted: hard, smooth, soft" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["train", "--task.pushes.enabled", "maybe"])


def test_resume_of_missing_run_fails_without_creating_anything(tmp_path: Path, capsys):
    target = tmp_path / "nothing-here"
    assert main(["train", "--resume", str(target)]) == 2
    assert "no config.json" in capsys.readouterr().err
    assert not target.exists()


@pytest.mark.parametrize("flag,value", [("--repeats", "0"), ("--batch", "-4"), ("--steps", "many")])
def test_bench_counts_must_be_positive_whole_numbers(flag, value, capsys):
    with pytest.raises(SystemExit):
        build_parser().parse_args(["bench", "sim", flag, value])
    assert f"expected a whole number >= 1, got '{value}'" in capsys.readouterr().err
