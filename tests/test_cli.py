"""Command-line errors are clear and lose nothing."""

import argparse
import dataclasses
import json
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from smoothloco.argtypes import config_value
from smoothloco.commands import build_parser, main
from smoothloco.commands import train as train_cli
from smoothloco.commands.train import config_from_args
from smoothloco.train.runs import TrainConfig
from smoothloco.train.shac import SHACConfig


def test_flags_reach_the_config():
    args = build_parser().parse_args(
        [
            "train",
            "--shac.horizon",
            "16",
            "--task.contact",
            "hard",
            "--task.commands.lin_vel_x=-0.5,0.5",
            "--task.reward_weights.torques=-1e-4",
            "--out",
            "runs/x",
        ]
    )
    config = config_from_args(args)
    assert config.shac.horizon == 16 and config.task.contact == "hard"
    assert config.task.commands.lin_vel_x == (-0.5, 0.5)
    assert config.task.reward_weights["torques"] == -1e-4 and config.run.out == "runs/x"


def _run(*argv):
    return subprocess.run(
        [sys.executable, "-m", "smoothloco.commands", *argv], capture_output=True, text=True, timeout=120
    )


def test_unknown_flag_is_rejected():
    out = _run("train", "--shac.horizn", "3")
    assert out.returncode == 2 and "unrecognized arguments: --shac.horizn" in out.stderr
    assert out.stderr.splitlines()[1].startswith("did you mean --shac.horizon?")


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


# -- habits: no prefix matching, help on every flag, typed messages, --config ----------------------
def _parsers(parser):
    """``parser`` and every subcommand parser below it."""
    yield parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                yield from _parsers(sub)


def test_every_parser_refuses_abbreviations(capsys):
    parsers = list(_parsers(build_parser()))
    assert len(parsers) >= 8 and all(not p.allow_abbrev for p in parsers), [p.prog for p in parsers if p.allow_abbrev]
    with pytest.raises(SystemExit):
        build_parser().parse_args(["train", "--shac.iteration", "3"])
    assert "unrecognized arguments: --shac.iteration" in capsys.readouterr().err


def test_every_train_flag_has_help():
    (train,) = [p for p in _parsers(build_parser()) if p.prog.endswith(" train")]
    flags = [a for a in train._actions if a.option_strings and a.dest != "help"]
    assert len(flags) > 90
    missing = [a.option_strings[0] for a in flags if not a.help or a.help.startswith("(default")]
    assert not missing
    assert "10 %" in train.format_help()  # every help string formats (a bare % would raise here)


def test_flag_help_is_declared_beside_its_field():
    assert train_cli.flag_help("shac.horizon") == dataclasses.fields(SHACConfig)[1].metadata["help"]
    assert "reward term" in train_cli.flag_help("task.reward_weights.torques")

    @dataclasses.dataclass(frozen=True)
    class Undocumented:
        knob: int = 1

    with pytest.raises(TypeError, match="Undocumented.knob has no help"):
        train_cli._fields("shac", Undocumented)


@pytest.mark.parametrize(
    "flag,value,expected",
    [
        ("--shac.horizon", "x", "argument --shac.horizon: expected a whole number, got 'x'"),
        ("--shac.horizon", "2.5", "argument --shac.horizon: expected a whole number, got '2.5'"),
        ("--task.sim_dt", "fast", "argument --task.sim_dt: expected a number, got 'fast'"),
        ("--task.pushes.enabled", "maybe", "argument --task.pushes.enabled: expected true or false, got 'maybe'"),
        ("--task.commands.lin_vel_x", "0.5", "argument --task.commands.lin_vel_x: expected 2 comma-separated numbers"),
        ("--shac.actor_hidden", "64,a", "argument --shac.actor_hidden: expected comma-separated whole numbers"),
    ],
)
def test_type_errors_name_the_flag_and_the_type(flag, value, expected, capsys):
    with pytest.raises(SystemExit):
        build_parser().parse_args(["train", f"{flag}={value}"])
    err = capsys.readouterr().err
    assert expected in err and "<lambda>" not in err


def test_config_values_parse():
    assert config_value(bool)("Off") is False and config_value(bool)("yes") is True
    assert config_value(tuple[float, float])("-1,2.5") == (-1.0, 2.5)
    assert config_value(tuple[int, ...])("") == () and config_value(tuple[int, ...])("8,8") == (8, 8)


def test_config_reproduces_a_saved_run_and_flags_override_it(tmp_path: Path):
    saved = TrainConfig(
        algo="shac",
        task=replace(
            TrainConfig().task, contact="hard", reward_weights={**TrainConfig().task.reward_weights, "torques": -1e-3}
        ),
        shac=replace(TrainConfig().shac, horizon=8, iterations=7, actor_hidden=(16, 16)),
        run=replace(TrainConfig().run, out=str(tmp_path / "old"), eval_every=3),
    )
    (tmp_path / "old").mkdir()
    (tmp_path / "old" / "config.json").write_text(json.dumps(saved.to_dict()))
    parse = lambda *argv: config_from_args(build_parser().parse_args(["train", *argv]))  # noqa: E731

    assert parse("--config", str(tmp_path / "old" / "config.json")) == saved
    assert parse("--config", str(tmp_path / "old")) == saved  # the run folder does as well
    again = parse("--config", str(tmp_path / "old"), "--out", str(tmp_path / "new"), "--shac.iterations", "9",
                  "--task.reward_weights.alive", "0.25")  # fmt: skip
    assert again.run.out == str(tmp_path / "new") and again.shac.iterations == 9
    assert again.task.reward_weights == {**saved.task.reward_weights, "alive": 0.25}
    assert again == replace(
        saved,
        task=replace(saved.task, reward_weights=again.task.reward_weights),
        shac=replace(saved.shac, iterations=9),
        run=replace(saved.run, out=str(tmp_path / "new")),
    )


def test_config_errors_are_one_line(tmp_path: Path, capsys):
    assert main(["train", "--config", str(tmp_path / "none.json")]) == 2
    assert "--config" in capsys.readouterr().err
    (tmp_path / "bad.json").write_text("{")
    assert main(["train", "--config", str(tmp_path / "bad.json")]) == 2
    assert "is not a readable run configuration" in capsys.readouterr().err
    assert main(["train", "--resume", str(tmp_path), "--config", str(tmp_path / "bad.json")]) == 2
    assert "not --config" in capsys.readouterr().err


@pytest.mark.parametrize("deploy,last_iteration,code,deployed", [
    (True, 3, 0, True), (False, 3, 0, False), (True, 2, 130, False),  # interrupted at 2 of 3: no deploy
])  # fmt: skip
def test_the_train_command_deploys_a_finished_run(monkeypatch, tmp_path: Path, deploy, last_iteration, code, deployed):
    """Deploying is the command's last step, not the training loop's."""
    calls = []
    monkeypatch.setattr(train_cli, "train", lambda config, resume: (None, None, [{"iteration": last_iteration}]))
    monkeypatch.setattr(train_cli, "deploy_after_training", calls.append)
    out = tmp_path / "run"
    argv = ["train", "--shac.iterations", "3", "--run.deploy", str(deploy), "--out", str(out)]
    assert main(argv) == code
    assert calls == ([out] if deployed else [])


# -- the front door: refusals on one line, grouped help, where a run writes and what comes next -----
def _refusal(argv: list[str], capsys) -> list[str]:
    """The lines a refused command line prints (stderr), after checking argparse's exit status."""
    with pytest.raises(SystemExit) as exit_:
        build_parser().parse_args(argv)
    assert exit_.value.code == 2
    captured = capsys.readouterr()
    assert not captured.out
    return captured.err.splitlines()


def test_a_bad_value_is_the_error_alone_then_one_hint(capsys):
    assert _refusal(["train", "--shac.num_envs", "x"], capsys) == [
        "error: argument --shac.num_envs: expected a whole number, got 'x'",
        "see smoothloco train --help",
    ]
    # every command refuses this way, and a missing argument or subcommand too
    required = ["error: the following arguments are required: RUN", "see smoothloco eval --help"]
    assert _refusal(["eval"], capsys) == required
    assert _refusal(["bench", "gpu"], capsys)[1] == "see smoothloco bench --help"
    assert _refusal([], capsys) == ["error: the following arguments are required: command", "see smoothloco --help"]


@pytest.mark.parametrize(
    "argv,unknown,nearest",
    [
        (["train", "--shac.num_env", "3"], "--shac.num_env 3", "--shac.num_envs"),
        (["train", "--task.terain=flat"], "--task.terain=flat", "--task.terrain"),
        (["train", "--ouT", "x"], "--ouT x", "--out"),
        (["eval", "run", "--robustnes"], "--robustnes", "--robustness"),
    ],
)
def test_a_misspelled_flag_gets_the_nearest_known_one(argv, unknown, nearest, capsys):
    assert _refusal(argv, capsys) == [
        f"error: unrecognized arguments: {unknown}",
        f"did you mean {nearest}? (all flags: smoothloco {argv[0]} --help)",
    ]


def test_a_flag_far_from_every_known_one_gets_no_guess(capsys):
    lines = _refusal(["train", "--bogus"], capsys)
    assert lines == ["error: unrecognized arguments: --bogus", "see smoothloco train --help"]


def test_train_help_is_grouped_by_section_without_placeholders():
    (train,) = [p for p in _parsers(build_parser()) if p.prog.endswith(" train")]
    text = train.format_help()
    for heading in ("task (--task.*):", "task: rewards (--task.reward_weights.*):",
                    "task: randomization (--task.randomization.*):", "SHAC (--shac.*):", "PPO (--ppo.*):",
                    "run (--run.*):"):  # fmt: skip
        assert f"\n{heading}\n" in text, heading
    assert text.count("\n") < 460 and "[--shac.horizon" not in text  # the usage no longer lists every flag
    section_of = {f"--{name}": train_cli.flag_section(name) for name, _, _ in train_cli.config_flags()}
    for group in train._action_groups:
        for action in group._group_actions:
            if action.option_strings[0] in section_of:
                assert group.title.endswith(f"(--{section_of[action.option_strings[0]]}.*)"), action.option_strings


def test_a_finished_run_points_to_eval_and_tensorboard(monkeypatch, tmp_path: Path):
    bin_dir = tmp_path / "venv" / "bin"
    bin_dir.mkdir(parents=True)
    monkeypatch.setattr(sys, "executable", str(bin_dir / "python"))
    monkeypatch.setattr(train_cli.shutil, "which", lambda name: None)  # nothing on the PATH
    lines = train_cli.next_steps(Path("runs/x"))
    python = bin_dir / "python"
    assert f"{python} -m smoothloco.commands eval runs/x --sim mujoco" in lines[1]
    assert lines[2].endswith(
        f"{python} -m pip install tensorboard && {bin_dir / 'tensorboard'} --logdir runs/x/tensorboard"
    )
    (bin_dir / "tensorboard").write_text("")
    (bin_dir / "smoothloco").write_text("")
    lines = train_cli.next_steps(Path("runs/x"))
    assert lines[1].endswith(f"{bin_dir / 'smoothloco'} eval runs/x --sim mujoco")
    assert lines[2].endswith(f": {bin_dir / 'tensorboard'} --logdir runs/x/tensorboard")
    monkeypatch.setattr(train_cli.shutil, "which", lambda name: f"/usr/bin/{name}")
    assert train_cli.next_steps(Path("runs/x"))[2].endswith(": tensorboard --logdir runs/x/tensorboard")


def test_bench_refuses_a_controller_without_an_export_or_with_a_bad_one(tmp_path, capsys):
    assert main(["bench", "controller"]) == 2
    assert capsys.readouterr().err.strip() == "error: bench controller needs --export DIR (an export folder)"
    json_path = tmp_path / "figures.json"
    assert main(["bench", "controller", "--export", str(tmp_path), "--json", str(json_path)]) == 2
    assert "policy.json" in capsys.readouterr().err and not json_path.exists()  # nothing written on a refusal
