"""``smoothloco eval RUN --terrain``: the exported policy in MuJoCo (C) walking courses over our
terrains (``sim.terrain``, built from boxes, planes and height fields by
``measure.mujoco_terrain``): a staircase up and down, slopes up and down, rough ground, and flat
ground for reference.

Each course is walked from standing at the origin, straight along +x at each of ``SPEEDS``: a
walk succeeds when the base gets ``length`` m ahead before any fall (the task's termination,
heights measured above the ground under the base and the knees). Tracking is judged as in the
standard evaluation (``measure.metrics``), on the samples before a fall.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import jax
import jax.numpy as jnp
import mujoco
import numpy as np

from smoothloco.measure import metrics
from smoothloco.measure.mujoco_terrain import terrain_model, terrain_xml
from smoothloco.robot_side.testbench import Ground, Player
from smoothloco.sim.terrain import flat as terrain_flat
from smoothloco.sim.terrain import Terrain, parse_terrain

COURSE_LENGTH = 6.0  # m: past the default staircase (3.8 m) and ramps (4 m)
SPEEDS = (0.5, 0.75, 1.0)  # m/s, one walk per course at each
STAND_SECONDS = 1.0  # before the walk command
# the time allowed, in multiples of the course at the commanded speed: a policy a third slower
# than commanded still finishes
TIME_ALLOWED = 1.5
CELL = 0.05  # m, MuJoCo height field sampling
TERRAIN_SEPARATOR = ";"  # between terrains in --terrain's list (commas separate parameters)


@dataclass(frozen=True)
class Course:
    """A walk of ``length`` m along +x over ``terrain`` (``parse_terrain``'s text)."""

    name: str
    terrain: str
    length: float = COURSE_LENGTH


REFERENCE = Course("flat (reference)", "flat")
COURSES = (
    REFERENCE,
    Course("stairs 15 cm up and down", "stairs:rise=0.15,run=0.3,steps=4,landing=1,start=1"),
    Course("slope 10° up", "ramp:degrees=10,start=1,length=3"),
    Course("slope 10° down", "ramp:degrees=-10,start=1,length=3"),
    Course("slope 25° up", "ramp:degrees=25,start=1,length=3"),
    Course("slope 25° down", "ramp:degrees=-25,start=1,length=3"),
    Course("rough ground 8 cm", "rough:height=0.08,wavelength=0.5"),
)


def courses_of(text: str | None) -> tuple[Course, ...]:
    """``COURSES`` for None or an empty text, else the flat reference and one course per terrain
    of ``text`` (``parse_terrain``'s forms, separated by ``;``), named by it; a ValueError names
    a terrain that does not parse."""
    if not text or not text.strip():
        return COURSES
    courses = [REFERENCE]
    for item in filter(None, (t.strip() for t in text.split(TERRAIN_SEPARATOR))):
        parse_terrain(item)  # refused here, before any walk, with what is accepted
        courses.append(Course(item, item))
    return tuple(courses)


def ground_of(player: Player, terrain_text: str, length: float = COURSE_LENGTH) -> Ground | None:
    """The player's robot on ``terrain_text`` (None: flat, the robot's own floor), its height
    fields sampled far enough for the whole walk."""
    terrain = parse_terrain(terrain_text)
    if terrain == terrain_flat:
        return None
    return Ground(terrain_model(player.xml, terrain, **_sampling(length)), _heights(terrain))


def ground_with_xml(
    player: Player, terrain_text: str, length: float = COURSE_LENGTH
) -> tuple[Ground | None, str | None]:
    """``ground_of`` and its model as MJCF text, built once, for a video that draws the walk on
    it; (None, None) on flat ground."""
    terrain = parse_terrain(terrain_text)
    if terrain == terrain_flat:
        return None, None
    xml = terrain_xml(player.xml, terrain, **_sampling(length))
    return Ground(mujoco.MjModel.from_xml_string(xml), _heights(terrain)), xml


def _heights(terrain: Terrain) -> Callable[[np.ndarray], np.ndarray]:
    jitted = jax.jit(terrain)
    return lambda xy: np.asarray(jitted(jnp.asarray(xy, jnp.float32)), np.float64)


def _sampling(length: float) -> dict[str, float]:
    # the robot walks on past the goal until the time allowed is up
    return {"extent": 2.0 * length, "cell": CELL}


def walk_seconds(course: Course, speed: float) -> float:
    return STAND_SECONDS + TIME_ALLOWED * course.length / speed


def judge(course: Course, traj: dict[str, np.ndarray]) -> dict[str, float | bool]:
    """One walk: ``reached`` the end before any fall, ``fell`` at any time, ``progress`` (m, the
    farthest the base got ahead before a fall, at most the course's length) and tracking."""
    fallen = np.asarray(traj["fallen"], bool)
    upright = len(fallen) if not fallen.any() else int(np.argmax(fallen))
    ahead = np.asarray(traj["base_pos"])[:upright, 0] - traj["base_pos"][0, 0]
    farthest = float(ahead.max()) if upright else 0.0
    return {
        "reached": farthest >= course.length,
        "fell": bool(fallen.any()),
        "progress": min(max(farthest, 0.0), course.length),
        "lin_vel_error": metrics.lin_vel_error(traj),
        "yaw_rate_error": metrics.yaw_rate_error(traj),
    }


def evaluate_courses(
    player: Player, courses: Sequence[Course] = COURSES, speeds: Sequence[float] = SPEEDS
) -> dict[str, dict]:
    """Per course: its terrain, length, the share of walks that reached the end (``success_rate``)
    and that fell, the mean progress (m), the mean tracking errors, and each walk by speed."""
    out = {}
    for course in courses:
        ground = ground_of(player, course.terrain, course.length)
        walks = []
        for speed in speeds:
            commands = [(STAND_SECONDS, float(speed), 0.0, 0.0)]
            traj = player.run(commands=commands, seconds=walk_seconds(course, speed), ground=ground)
            walks.append({"speed": float(speed), **judge(course, traj)})
        mean = lambda key: metrics.nanmean(w[key] for w in walks)  # noqa: E731
        out[course.name] = {
            "terrain": course.terrain,
            "length": course.length,
            "success_rate": float(np.mean([w["reached"] for w in walks])),
            "fall_rate": float(np.mean([w["fell"] for w in walks])),
            "progress": mean("progress"),
            "lin_vel_error": mean("lin_vel_error"),
            "yaw_rate_error": mean("yaw_rate_error"),
            "walks": walks,
        }
    return out


def markdown(courses: dict[str, dict]) -> str:
    speeds = ", ".join(f"{w['speed']:g}" for w in next(iter(courses.values()))["walks"]) if courses else ""
    lines = [
        "## Terrain courses (MuJoCo)",
        "",
        f"Walks straight ahead from standing at {speeds} m/s; success: the base {COURSE_LENGTH:g} m ahead "
        "(each course's length) before any fall; progress: how far it got before a fall.",
        "",
        "| course | terrain | success | fall rate | progress (m) | lin. vel. error (m/s) | yaw rate error (rad/s) |",
        "|---|---|---:|---:|---:|---:|---:|",
    ]
    for name, c in courses.items():
        lines.append(
            f"| {name} | `{c['terrain']}` | {c['success_rate']:.2f} | {c['fall_rate']:.2f} | {c['progress']:.1f} / "
            f"{c['length']:g} | {_number(c['lin_vel_error'])} | {_number(c['yaw_rate_error'])} |"
        )
    return "\n".join(lines) + "\n"


def _number(value: float) -> str:
    return f"{value:.3f}" if np.isfinite(value) else "–"
