"""The terrain courses of ``smoothloco eval --terrain``: which walks they make, how a walk is
judged, and the report (through a stand-in walker on the courses' MuJoCo ground)."""

import json
from pathlib import Path

import numpy as np
import pytest

from smoothloco.evaluate import terrain_course
from smoothloco.evaluate.terrain_course import COURSES, Course, courses_of, evaluate_courses, judge
from smoothloco.robot_side.testbench import command_schedule

WORLD = '<mujoco><worldbody><geom name="floor" type="plane" size="0 0 1"/></worldbody></mujoco>'
DT = 0.02


class Walker:
    """The player's stand-in: walks along x at the commanded speed; falls where the ground ahead
    rises or drops more than 2 cm within 5 cm (a riser, or a slope steeper than 22°)."""

    xml = WORLD

    def __init__(self) -> None:
        self.grounds = []

    def run(self, commands, seconds, ground=None):
        self.grounds.append(ground)
        t = np.arange(round(seconds / DT)) * DT
        command = command_schedule(commands, t)
        x = np.concatenate([[0.0], np.cumsum(command[:-1, 0] * DT)])
        xy = np.stack([x, np.zeros_like(x)], axis=1)
        height = (lambda p: np.zeros(len(p))) if ground is None else ground.height
        rise = height(xy + [0.05, 0.0]) - height(xy)
        fallen = np.logical_or.accumulate(np.abs(rise) > 0.02)
        x = np.where(fallen, x[np.argmax(fallen)] if fallen.any() else 0.0, x)
        n = len(t)
        velocity = np.where(fallen[:, None], 0.0, command[:, :2])
        return {
            "time": t, "command": command, "fallen": fallen,
            "base_pos": np.stack([x, np.zeros(n), 0.5 + height(xy)], axis=1),
            "base_lin_vel": np.concatenate([velocity, np.zeros((n, 1))], axis=1),
            "base_ang_vel": np.zeros((n, 3)),
        }  # fmt: skip


def test_each_course_is_walked_on_its_ground_and_judged_by_reaching_its_end(tmp_path: Path):
    walker = Walker()
    result = evaluate_courses(walker, speeds=(1.0,))
    assert list(result) == [c.name for c in COURSES]
    success = {name: c["success_rate"] for name, c in result.items()}
    assert success == {
        "flat (reference)": 1.0, "stairs 15 cm up and down": 0.0, "slope 10° up": 1.0, "slope 10° down": 1.0,
        "slope 25° up": 0.0, "slope 25° down": 0.0, "rough ground 8 cm": 1.0,
    }  # fmt: skip
    stairs = result["stairs 15 cm up and down"]
    assert stairs["fall_rate"] == 1.0 and stairs["progress"] == pytest.approx(0.95, abs=0.03)  # at the first riser
    assert result["slope 25° up"]["progress"] == pytest.approx(1.0, abs=0.03)  # where the ramp starts
    assert result["flat (reference)"]["lin_vel_error"] == pytest.approx(0.0)
    # flat is the robot's own floor; the others are its model with the course's geoms
    assert walker.grounds[0] is None and all(g is not None for g in walker.grounds[1:])
    assert walker.grounds[1].model.ngeom == 1 + 4  # the floor and the four stair levels
    text = terrain_course.markdown(result)
    assert "| stairs 15 cm up and down | `stairs:rise=0.15,run=0.3,steps=4,landing=1,start=1` | 0.00 | 1.00 |" in text
    json.dumps(result)  # the summary's JSON holds it as it is


def test_a_walk_succeeds_when_it_gets_to_the_end_before_any_fall():
    course = Course("c", "flat", length=2.0)
    t = np.arange(200) * DT
    traj = {
        "time": t, "command": np.tile((1.0, 0.0, 0.0), (200, 1)), "base_pos": np.stack([t, 0 * t, 0 * t + 0.5], 1),
        "base_lin_vel": np.tile((1.0, 0.0, 0.0), (200, 1)), "base_ang_vel": np.zeros((200, 3)), "fallen": t > 2.5,
    }  # fmt: skip
    assert judge(course, traj) == {
        "reached": True,
        "fell": True,
        "progress": 2.0,
        "lin_vel_error": 0.0,
        "yaw_rate_error": 0.0,
    }
    early = judge(course, {**traj, "fallen": t > 1.5})
    assert not early["reached"] and early["progress"] == pytest.approx(1.5, abs=DT)


def test_the_course_list_takes_terrains_after_the_flat_reference():
    assert courses_of(None) == courses_of("") == COURSES
    chosen = courses_of(" stairs:rise=0.17 ; ramp:degrees=30 ")
    assert [c.terrain for c in chosen] == ["flat", "stairs:rise=0.17", "ramp:degrees=30"]
    with pytest.raises(ValueError, match="unknown terrain 'pit'.*accepted: flat, hills, slope, ramp"):
        courses_of("stairs;pit")


def test_terrain_courses_run_in_mujoco_only(tmp_path: Path, capsys):
    from smoothloco.commands import build_parser

    args = build_parser().parse_args(["eval", str(tmp_path), "--sim", "hard", "--terrain"])
    assert args.terrain == "" and args.func(args) == 2
    assert "--terrain runs in MuJoCo (--sim mujoco), not --sim hard" in capsys.readouterr().err
