"""The standard evaluation: scripted scenarios that every simulator runs identically.

- ``command``: stand 1 s, then one command of ``EVAL_COMMANDS`` held for several seconds;
- ``push``: standing or walking slowly, a horizontal kick of 0.5 or 1.0 m/s from 8 directions;
- ``mismatch``: a walk/side-step/turn schedule at the corners of the training randomization's
  ground friction and added base mass (0.2 / 1.25 and ±5 kg for the default robot).

Every scenario starts from the standing pose with a zero command, which holds for at least
the first control period (our task's reset observation carries it).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from smoothloco.measure.grid import EVAL_COMMANDS
from smoothloco.robot_side.testbench import Command, Push
from smoothloco.tasks import RandomizationConfig, VelocityTaskConfig

KINDS = ("command", "push", "mismatch")

STAND_SECONDS = 1.0
COMMAND_SECONDS = 6.0  # each grid command is held this long after standing
PUSH_TIME, PUSH_SECONDS = 3.0, 6.0  # the kick lands 2 s into the command; survival is judged 3 s later
PUSH_SPEEDS = (0.5, 1.0)  # m/s
PUSH_DIRECTIONS = 8  # evenly spaced, 0 = +x (forward at the start)
PUSH_COMMANDS = ((0.0, 0.0, 0.0), (0.5, 0.0, 0.0))  # standing, walking slowly
MISMATCH_SCHEDULE: tuple[Command, ...] = ((STAND_SECONDS, 0.5, 0.0, 0.0), (4.0, 0.0, 0.3, 0.0), (7.0, 0.0, 0.0, 0.5))
MISMATCH_SECONDS = 10.0
NOMINAL_FRICTION = 0.8


def training_mismatches(randomization: RandomizationConfig = RandomizationConfig()) -> tuple[tuple[float, float], ...]:
    """(ground friction, added base mass kg): the corners and edges of ``randomization``'s
    ranges, so each robot is judged at the edges of what it trained on."""
    (slippery, grippy), (lighter, heavier) = randomization.friction, randomization.added_base_mass
    return (
        (slippery, 0.0), (grippy, 0.0), (NOMINAL_FRICTION, lighter), (NOMINAL_FRICTION, heavier),
        (slippery, heavier), (grippy, lighter),
    )  # fmt: skip


@dataclass(frozen=True)
class Scenario:
    name: str
    kind: str  # one of KINDS
    commands: tuple[Command, ...]
    seconds: float
    pushes: tuple[Push, ...] = ()
    friction: float | None = None  # None: the simulator's nominal friction
    added_base_mass: float = 0.0  # kg

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"scenario {self.name}: unknown kind {self.kind!r}; accepted: {', '.join(KINDS)}")
        if not self.seconds > 0:
            raise ValueError(f"scenario {self.name}: seconds must be > 0, got {self.seconds}")
        if not self.commands or self.commands[0][0] <= 0:
            raise ValueError(f"scenario {self.name}: the first command must start after 0 s (standing start)")
        if self.friction is not None and not self.friction > 0:
            raise ValueError(f"scenario {self.name}: friction must be > 0, got {self.friction}")
        if any(not 0 < p[0] < self.seconds for p in self.pushes):
            raise ValueError(f"scenario {self.name}: pushes must fall within its {self.seconds} s, got {self.pushes}")

    @property
    def push_direction_deg(self) -> float | None:
        if not self.pushes:
            return None
        _, vx, vy = self.pushes[0]
        return math.degrees(math.atan2(vy, vx)) % 360.0

    @property
    def push_speed(self) -> float:
        return math.hypot(*self.pushes[0][1:]) if self.pushes else 0.0


def _label(values) -> str:
    return ",".join(f"{v:+g}" for v in values)


def standard_scenarios(
    commands: tuple[tuple[float, float, float], ...] = EVAL_COMMANDS,
    push_speeds: tuple[float, ...] = PUSH_SPEEDS,
    push_directions: int = PUSH_DIRECTIONS,
    mismatches: tuple[tuple[float, float], ...] = training_mismatches(),
) -> tuple[Scenario, ...]:
    """The standard set (47 scenarios with the defaults); smaller sets for tests by argument.
    ``mismatches`` (friction, added base mass) default to the default robot's training corners."""
    out = [
        Scenario(f"command {_label(c)}", "command", ((STAND_SECONDS, *c),), STAND_SECONDS + COMMAND_SECONDS)
        for c in commands
    ]
    for c in PUSH_COMMANDS:
        for speed in push_speeds:
            for i in range(push_directions):
                angle = 2 * math.pi * i / push_directions
                kick = (PUSH_TIME, speed * math.cos(angle), speed * math.sin(angle))
                name = f"push {speed:g} m/s at {math.degrees(angle):.0f} deg, command {_label(c)}"
                out.append(Scenario(name, "push", ((STAND_SECONDS, *c),), PUSH_SECONDS, pushes=(kick,)))
    for friction, mass in mismatches:
        name = f"friction {friction:g}, base mass {mass:+g} kg"
        out.append(
            Scenario(name, "mismatch", MISMATCH_SCHEDULE, MISMATCH_SECONDS, friction=friction, added_base_mass=mass)
        )
    return tuple(out)


def run_scenarios(task: VelocityTaskConfig) -> tuple[Scenario, ...]:
    """The standard set for a run of ``task``: its robot judged at its own training corners."""
    return standard_scenarios(mismatches=training_mismatches(task.randomization))
