"""The ground a foot meets: a signed distance to its surface, whose gradient is the contact normal.

Two kinds of terrain share one interface (``Terrain``):

- height fields z = h(x, y): flat ground, ``RollingHills``, an inclined ``Slope``, a ``Ramp``
  between level ground and ``RoughGround``. Their distance is the vertical gap times the normal's z component,
  (z - h) n_z with n ∝ (-∇h, 1): the distance to the tangent plane under the point, exact for
  a plane and to first order for gently curved ground;
- ``Boxes`` on flat ground (a ``stairs`` is one): the exact distance to the union of the ground
  and the boxes, so a sphere meets a riser face on, and a step's nose edge or corner with the
  normal from the nearest point of that edge or corner;
- a ``StairsCourse``, rows of stair pyramids of growing height for a terrain curriculum, the
  same surface as its boxes at the cost of four.

Every terrain is a frozen dataclass of plain numbers: hashable, so equal terrains are one
compiled program, and ``Sim`` holds it as a static field. All functions take one point; batch
them with ``vmap``.
"""

from __future__ import annotations

import inspect
import math
from dataclasses import dataclass
from functools import cached_property
from typing import Callable, Protocol

import jax
import jax.numpy as jnp
import numpy as np


class Terrain(Protocol):
    def __call__(self, xy: jax.Array) -> jax.Array:
        """The ground's height under each ``xy`` (..., 2): the top surface, seen from above."""
        ...

    def distance(self, point: jax.Array) -> tuple[jax.Array, jax.Array]:
        """Signed distance of ``point`` (3,) to the surface (negative inside the ground) and the
        unit outward normal (3,) there, the distance's gradient."""
        ...


class HeightField:
    """A terrain z = h(x, y); subclasses define h as ``__call__``."""

    def __call__(self, xy: jax.Array) -> jax.Array:
        raise NotImplementedError

    def distance(self, point: jax.Array) -> tuple[jax.Array, jax.Array]:
        height, slope = jax.value_and_grad(self)(point[:2])
        normal = jnp.array([-slope[0], -slope[1], 1.0], point.dtype)
        normal = normal / jnp.linalg.norm(normal)
        return (point[2] - height) * normal[2], normal


@dataclass(frozen=True)
class Flat(HeightField):
    """Flat ground at z = 0."""

    def __call__(self, xy: jax.Array) -> jax.Array:
        return jnp.zeros(xy.shape[:-1], xy.dtype)


flat = Flat()


# Three plane waves (direction in degrees, wavelength relative to the hills' wavelength) whose sum
# has no short period and no axis it favours, unlike the evaluation's egg-crate bumps (1 m along
# x and y, i.e. two 0.71 m waves at ±45°).
HILL_WAVES = ((20.0, 1.0), (75.0, 0.9 / 1.3), (140.0, 1.7 / 1.3))


@dataclass(frozen=True)
class RollingHills(HeightField):
    """Smooth uneven ground of about ``height`` m from trough to crest (the sum of
    ``HILL_WAVES``, each of amplitude height / 6, the middle one ``wavelength`` m long); steepest
    slope 1.9 x height x 1.3 m / wavelength (9° at 8 cm and 1.3 m)."""

    height: float
    wavelength: float = 1.3  # m

    def __post_init__(self) -> None:
        if not (math.isfinite(self.height) and self.height >= 0):
            raise ValueError(f"hills need a height >= 0 m (0: flat), got {self.height}")
        if not (math.isfinite(self.wavelength) and self.wavelength > 0):
            raise ValueError(f"hills need a wavelength > 0 m, got {self.wavelength}")

    def __call__(self, xy: jax.Array) -> jax.Array:
        out = jnp.zeros(xy.shape[:-1], xy.dtype)
        for degrees, relative_wavelength in HILL_WAVES:
            angle = math.radians(degrees)
            along = xy[..., 0] * math.cos(angle) + xy[..., 1] * math.sin(angle)
            out = out + jnp.cos(2.0 * math.pi * along / (relative_wavelength * self.wavelength))
        return self.height / (2 * len(HILL_WAVES)) * out


@dataclass(frozen=True)
class Slope(HeightField):
    """An inclined plane through the origin, rising at ``degrees`` toward the compass direction
    ``heading`` (degrees from +x toward +y); a negative angle descends that way."""

    degrees: float
    heading: float = 0.0

    def __post_init__(self) -> None:
        if not (math.isfinite(self.degrees) and abs(self.degrees) < 90.0 and math.isfinite(self.heading)):
            raise ValueError(f"a slope's angle must be finite and less than 90 degrees either way, with a finite heading; "
                             f"got {self.degrees} toward {self.heading}")  # fmt: skip

    @property
    def gradient(self) -> tuple[float, float]:
        """dh/dx, dh/dy."""
        rise, heading = math.tan(math.radians(self.degrees)), math.radians(self.heading)
        return rise * math.cos(heading), rise * math.sin(heading)

    def __call__(self, xy: jax.Array) -> jax.Array:
        gx, gy = self.gradient
        return gx * xy[..., 0] + gy * xy[..., 1]


@dataclass(frozen=True)
class Ramp(HeightField):
    """Level ground, then a slope of ``degrees`` along +x from x = ``start`` over ``length`` m
    (horizontally), then level again: a slope to climb (or, with a negative angle, to descend)
    from level ground and to leave at its top (bottom)."""

    degrees: float
    start: float = 1.0  # m
    length: float = 3.0  # m

    def __post_init__(self) -> None:
        if not (math.isfinite(self.degrees) and abs(self.degrees) < 90.0):
            raise ValueError(f"a ramp's angle must be finite and less than 90 degrees either way, got {self.degrees}")
        if not (math.isfinite(self.start) and math.isfinite(self.length) and self.length > 0):
            raise ValueError(
                f"a ramp needs a finite start and a length > 0 m, got start {self.start}, length {self.length}"
            )

    def __call__(self, xy: jax.Array) -> jax.Array:
        rise = math.tan(math.radians(self.degrees))
        return rise * jnp.clip(xy[..., 0] - self.start, 0.0, self.length)


ROUGH_WAVES = 16


@dataclass(frozen=True)
class RoughGround(HeightField):
    """Smooth random ground, at most ``height`` m from trough to crest: ``ROUGH_WAVES`` plane
    waves in random directions with random phases, wavelengths uniform between 0.5 and 2 times
    ``wavelength``, amplitudes in proportion to their wavelength (so each is equally steep),
    scaled so that they sum to at most ±height / 2; ``seed`` draws them."""

    height: float
    wavelength: float = 0.5  # m
    seed: int = 0

    def __post_init__(self) -> None:
        if not (math.isfinite(self.height) and self.height >= 0):
            raise ValueError(f"rough ground needs a height >= 0 m, got {self.height}")
        if not (math.isfinite(self.wavelength) and self.wavelength > 0):
            raise ValueError(f"rough ground needs a wavelength > 0 m, got {self.wavelength}")

    @cached_property
    def waves(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(k, 2) wave vectors (rad/m), (k,) amplitudes (m) and (k,) phases."""
        rng = np.random.default_rng(self.seed)
        angle = rng.uniform(0.0, 2.0 * np.pi, ROUGH_WAVES)
        wavelength = self.wavelength * rng.uniform(0.5, 2.0, ROUGH_WAVES)
        vectors = (2.0 * np.pi / wavelength)[:, None] * np.stack([np.cos(angle), np.sin(angle)], axis=1)
        amplitude = 0.5 * self.height * wavelength / wavelength.sum()
        phase = rng.uniform(0.0, 2.0 * np.pi, ROUGH_WAVES)
        return vectors.astype(np.float32), amplitude.astype(np.float32), phase.astype(np.float32)

    @property
    def steepest(self) -> float:
        """An upper bound of |∇h|: Σ amplitude x wavenumber."""
        vectors, amplitude, _ = self.waves
        return float(np.sum(amplitude * np.linalg.norm(vectors, axis=1)))

    def __call__(self, xy: jax.Array) -> jax.Array:
        vectors, amplitude, phase = self.waves
        return jnp.cos(xy @ vectors.T.astype(xy.dtype) + phase.astype(xy.dtype)) @ amplitude.astype(xy.dtype)


Box = tuple[float, float, float, float, float, float]  # centre x, y, z and half sizes x, y, z (m)


@dataclass(frozen=True)
class Boxes:
    """Flat ground at z = 0 with axis-aligned boxes on it: a step, a staircase, a curb.

    The distance is the exact one to the union for a point outside it (the nearest of the ground
    and each box), so a sphere near a box's edge or corner gets the normal from that edge's or
    corner's nearest point. Inside the union it is the nearest of the ground's and each box's
    own inside distance; boxes that stack into a staircase should nest (each level as one box
    from the ground to its tread) so that no internal face lies near a tread or a riser.
    One contact per query point: with ``blend`` 0, a sphere touching a tread and the riser above
    it at once meets whichever is nearer in that step, and sinks into the other.
    """

    boxes: tuple[Box, ...]
    # m: concave corners (a tread and the riser above it) are rounded over about this much by a
    # soft minimum of the distances, so that a foot in one meets one contact leaning out of it; 0:
    # the exact nearest surface. Elsewhere they agree: with a surface Δ farther than the nearest,
    # within blend x ln(1 + exp(-Δ / blend)) (0.5 mm at Δ = 3 cm) and a normal within 3° (0.4° at 5 cm).
    blend: float = 0.01

    def __post_init__(self) -> None:
        if not (math.isfinite(self.blend) and self.blend >= 0):
            raise ValueError(f"boxes' blend must be >= 0 m, got {self.blend}")
        for box in self.boxes:
            if len(box) != 6 or not all(math.isfinite(v) for v in box) or min(box[3:]) <= 0:
                raise ValueError(
                    f"a box is (x, y, z, half x, half y, half z) with finite numbers and positive half sizes, got {box}"
                )

    def _arrays(self, dtype) -> tuple[jax.Array, jax.Array]:
        table = jnp.asarray(np.asarray(self.boxes, np.float64).reshape(-1, 6), dtype)
        return table[:, :3], table[:, 3:]

    def __call__(self, xy: jax.Array) -> jax.Array:
        centre, half = self._arrays(xy.dtype)
        over = jnp.all(jnp.abs(xy[..., None, :] - centre[:, :2]) <= half[:, :2], axis=-1)  # (..., k)
        return jnp.max(jnp.where(over, centre[:, 2] + half[:, 2], 0.0), axis=-1, initial=0.0)

    def distance(self, point: jax.Array) -> tuple[jax.Array, jax.Array]:
        centre, half = self._arrays(point.dtype)
        return ground_and_boxes(point, centre, half, self.blend)


def ground_and_boxes(point: jax.Array, centre: jax.Array, half: jax.Array, blend: float) -> tuple[jax.Array, jax.Array]:
    """Signed distance and normal of ``point`` to the union of the ground (z = 0) and boxes
    (``centre``, ``half``: (k, 3)), concave corners rounded over ``blend`` m (``Boxes``)."""
    distances, normals = jax.vmap(box_distance, in_axes=(None, 0, 0))(point, centre, half)
    distances = jnp.concatenate([point[2:3], distances])
    normals = jnp.concatenate([jnp.array([[0.0, 0.0, 1.0]], point.dtype), normals])
    if blend == 0.0:
        nearest = jnp.argmin(distances)
        return distances[nearest], normals[nearest]
    # a soft minimum: within about ``blend`` of two surfaces at once (a tread and the riser
    # above it) one contact's normal leans out of the corner instead of taking one of them
    nearest = jnp.min(distances)
    share = jax.nn.softmax(-(distances - nearest) / blend)
    normal = share @ normals
    distance = nearest - blend * jnp.log(jnp.sum(jnp.exp(-(distances - nearest) / blend)))
    return distance, normal / jnp.linalg.norm(normal)


def box_distance(point: jax.Array, centre: jax.Array, half: jax.Array) -> tuple[jax.Array, jax.Array]:
    """Signed distance of ``point`` to an axis-aligned box and the outward normal, its gradient:
    outside, toward the nearest point of a face, edge or corner; inside, of the nearest face."""
    offset = point - centre
    excess = jnp.abs(offset) - half  # per axis, how far beyond the face (negative: within)
    side = jnp.where(offset >= 0.0, 1.0, -1.0).astype(point.dtype)
    beyond = jnp.maximum(excess, 0.0)
    squared = jnp.sum(beyond**2)
    outside = squared > 0.0
    length = jnp.sqrt(jnp.where(outside, squared, 1.0))  # a safe square root: no NaN gradient at 0
    axis = jnp.argmax(excess)
    inside_normal = side * jax.nn.one_hot(axis, 3, dtype=point.dtype)
    distance = jnp.where(outside, length, excess[axis])
    normal = jnp.where(outside, side * beyond / length, inside_normal)
    return distance, normal


# m: stair boxes reach this far below the ground, so that no face of theirs lies at ground level
# inside the staircase, where it would be the nearest surface of a point just above the ground
FOOTING = 0.1


def stairs(
    rise: float = 0.15,
    run: float = 0.3,
    steps: int = 4,
    landing: float = 1.0,
    start: float = 1.0,
    width: float = 20.0,
    blend: float = Boxes.blend,
) -> Boxes:
    """A staircase across x: ``steps`` steps up (``rise`` m high, ``run`` m treads) from x =
    ``start``, a landing ``landing`` m long, the same steps down, ``width`` m wide (centred on
    y = 0), its concave corners rounded by ``blend`` (``Boxes``). Level k is one box from the
    ground's footing to its tread, the levels nested."""
    if not (rise > 0 and run > 0 and landing > 0 and width > 0 and steps >= 1 and math.isfinite(start)):
        raise ValueError(f"stairs need rise, run, landing, width > 0 m and steps >= 1, got rise {rise}, run {run}, "
                         f"landing {landing}, width {width}, steps {steps}, start {start}")  # fmt: skip
    top = start + (steps - 1) * run + 0.5 * landing  # the middle of the landing
    boxes = tuple(
        (
            top,
            0.0,
            0.5 * (level * rise - FOOTING),  # centre
            0.5 * landing + (steps - level) * run,
            0.5 * width,
            0.5 * (level * rise + FOOTING),
        )  # half sizes
        for level in range(1, steps + 1)
    )
    return Boxes(boxes, blend)


@dataclass(frozen=True)
class StairsCourse:
    """Ground for a terrain curriculum, as legged_gym's: ``levels`` rows of square stair
    pyramids, row i (x from i x ``tile`` to (i + 1) x ``tile``) with steps (i + 1) / ``levels``
    x ``rise`` high, ``columns`` pyramids per row along y (centred on y = 0), flat ground
    between and around them. Each pyramid climbs ``steps`` steps of ``run`` m treads from every
    side to a square top ``landing`` m wide, at the centre of its tile; a robot starts on its top
    or at its foot (``spawn``), so that it meets stairs down and up.

    The same surface as ``as_boxes()`` (checked in the tests), at a cost that does not grow
    with the course: a point meets only its own tile's tread, the two steps below and the riser above.
    """

    levels: int = 10
    rise: float = 0.18  # m, the steps of the last level
    run: float = 0.3  # m
    steps: int = 5
    landing: float = 1.5  # m
    # m: the pyramid (3.9 m wide by default) and a strip of flat ground around it, so that from
    # the foot of one pyramid most ways lead up it or its neighbour
    tile: float = 5.0
    columns: int = 4
    blend: float = Boxes.blend

    def __post_init__(self) -> None:
        numbers = (self.rise, self.run, self.landing, self.tile, self.blend)
        if not (all(math.isfinite(v) for v in numbers) and min(numbers[:4]) > 0 and self.blend >= 0):
            raise ValueError(f"a stairs course needs rise, run, landing, tile > 0 m and blend >= 0 m, got rise "
                             f"{self.rise}, run {self.run}, landing {self.landing}, tile {self.tile}, blend {self.blend}")  # fmt: skip
        if min(self.levels, self.steps, self.columns) < 1:
            raise ValueError(f"a stairs course needs levels, steps and columns >= 1, got levels {self.levels}, "
                             f"steps {self.steps}, columns {self.columns}")  # fmt: skip
        if self.base_half + self.run > 0.5 * self.tile:
            raise ValueError(f"a stairs course's tile ({self.tile} m) must hold its pyramid ({2 * self.base_half:.2f} m "
                             f"wide: landing + 2 x (steps - 1) x run) and a run of flat ground on each side")  # fmt: skip

    @property
    def base_half(self) -> float:
        """Half the width of a pyramid's lowest step."""
        return 0.5 * self.landing + (self.steps - 1) * self.run

    def level_rise(self, level: jax.Array) -> jax.Array:
        """The step height of ``level`` (0 the lowest)."""
        return self.rise * (level + 1) / self.levels

    def _centre(self, row, column) -> tuple:
        """The (x, y) centre of the tile of ``row`` (the level) and ``column``."""
        return (row + 0.5) * self.tile, (column + 0.5) * self.tile - 0.5 * self.columns * self.tile

    def _step(self, k, rise) -> tuple:
        """Step ``k`` (1 the lowest) of a pyramid of ``rise`` m steps as one box from the footing to
        its tread: its half width, and its centre's height and half height."""
        top = k * rise
        return 0.5 * self.landing + (self.steps - k) * self.run, 0.5 * (top - FOOTING), 0.5 * (top + FOOTING)

    def _tile(self, xy: jax.Array) -> tuple[jax.Array, jax.Array, jax.Array]:
        """The level (row), the tile centre and the Chebyshev distance from it of each ``xy``;
        points off the course belong to the nearest tile and lie beyond its pyramid."""
        row = jnp.clip(jnp.floor(xy[..., 0] / self.tile), 0, self.levels - 1)
        column = jnp.clip(jnp.floor((xy[..., 1] + 0.5 * self.columns * self.tile) / self.tile), 0, self.columns - 1)
        centre = jnp.stack(self._centre(row, column), axis=-1)
        return row, centre, jnp.max(jnp.abs(xy - centre), axis=-1)

    def _step_under(self, radius: jax.Array) -> jax.Array:
        """How many steps up the tread at Chebyshev ``radius`` from a pyramid's centre is."""
        return jnp.clip(self.steps - jnp.ceil((radius - 0.5 * self.landing) / self.run), 0, self.steps)

    def __call__(self, xy: jax.Array) -> jax.Array:
        row, _, radius = self._tile(xy)
        return self._step_under(radius) * self.level_rise(row)

    def distance(self, point: jax.Array) -> tuple[jax.Array, jax.Array]:
        row, centre, radius = self._tile(point[:2])
        rise = self.level_rise(row)
        # the step under the point, the two below (the edge it may lean over; on low steps the
        # next tread down is still within the blend's reach) and the one above (its riser): step
        # k is one box from the footing to its tread. Farther steps are more than a tread or
        # three risers away; a step that does not exist (k < 1, k > steps) is put far below.
        k = self._step_under(radius) + jnp.array([-2.0, -1.0, 0.0, 1.0], point.dtype)
        exists = (k >= 1) & (k <= self.steps)
        half_xy, z, half_z = self._step(k, rise)
        z = jnp.where(exists, z, -500.0)
        ones = jnp.ones(4, point.dtype)
        centres = jnp.stack([centre[0] * ones, centre[1] * ones, z], -1)
        halves = jnp.stack([half_xy, half_xy, half_z], -1)
        halves = jnp.where(exists[:, None], halves, 1.0)  # a unit box 500 m below
        return ground_and_boxes(point, centres.astype(point.dtype), halves.astype(point.dtype), self.blend)

    def spawn(self, level: jax.Array, key: jax.Array) -> jax.Array:
        """A start (x, y) at a pyramid of ``level`` in a random column: half the time on its top
        (within a quarter of the landing from the centre), where every way out leads down its
        stairs, half the time on the flat ground at its foot (the middle of the strip beside one
        of its sides), where nearly every way leads up its own stairs or a neighbour's."""
        column_key, top_key, foot_key, side_key, along_key = jax.random.split(key, 5)
        centre = jnp.stack(self._centre(level, jax.random.randint(column_key, (), 0, self.columns)))
        top = centre + jax.random.uniform(top_key, (2,), minval=-0.25, maxval=0.25) * self.landing
        normal = jnp.array([[1.0, 0.0], [0.0, 1.0], [-1.0, 0.0], [0.0, -1.0]])[jax.random.randint(side_key, (), 0, 4)]
        along = jax.random.uniform(along_key, minval=-1.0, maxval=1.0) * self.base_half
        foot = centre + 0.5 * (self.base_half + 0.5 * self.tile) * normal + along * jnp.stack([-normal[1], normal[0]])
        return jnp.where(jax.random.bernoulli(foot_key), foot, top)

    def as_boxes(self) -> Boxes:
        """The whole course as ``Boxes`` (for MuJoCo, and to check ``distance`` against)."""
        boxes = []
        for level in range(self.levels):
            rise = float(self.level_rise(level))
            for column in range(self.columns):
                x, y = self._centre(level, column)
                for k in range(1, self.steps + 1):
                    half, z, half_z = self._step(k, rise)
                    boxes.append((x, y, z, half, half, half_z))
        return Boxes(tuple(boxes), self.blend)


def contact_frame(normal: jax.Array) -> jax.Array:
    """The (3, 3) contact frame [normal, tangent1, tangent2]; tangent1 is x projected onto the
    tangent plane, or y for a normal near x (a riser facing x). Friction is isotropic, so the
    switch changes only how impulses are written, not what they do."""
    x, y = jnp.eye(3, dtype=normal.dtype)[:2]
    reference = jnp.where(normal[0] ** 2 < 0.5, x, y)
    tangent1 = reference - jnp.dot(reference, normal) * normal
    tangent1 = tangent1 / jnp.linalg.norm(tangent1)
    tangent2 = jnp.cross(normal, tangent1)
    return jnp.stack([normal, tangent1, tangent2])


TERRAINS: dict[str, Callable[..., Terrain]] = {
    "flat": Flat, "hills": RollingHills, "slope": Slope, "ramp": Ramp, "stairs": stairs, "rough": RoughGround,
    "course": StairsCourse,
}  # fmt: skip


def parse_terrain(text: str) -> Terrain:
    """A terrain from ``KIND`` or ``KIND:NAME=VALUE,...`` with the parameters of ``TERRAINS[KIND]``,
    e.g. ``flat``, ``hills:height=0.08``, ``slope:degrees=25,heading=90``, ``ramp:degrees=-10,length=2``,
    ``stairs:rise=0.15,steps=5``,
    ``rough:height=0.05,seed=3``, ``course:levels=10,rise=0.18``."""
    kind, _, arguments = text.strip().partition(":")
    if kind not in TERRAINS:
        raise ValueError(f"unknown terrain {kind!r} in {text!r}; accepted: {', '.join(TERRAINS)}")
    parameters = inspect.signature(TERRAINS[kind]).parameters
    values: dict[str, float | int] = {}
    for item in filter(None, (a.strip() for a in arguments.split(","))):
        name, equals, value = item.partition("=")
        name = name.strip()
        if not equals or name not in parameters:
            accepted = ", ".join(parameters) or "none"
            raise ValueError(f"terrain {kind!r} takes NAME=VALUE with NAME one of {accepted}, got {item!r}")
        number = int if name in ("steps", "seed", "levels", "columns") else float
        try:
            values[name] = number(value)
        except ValueError:
            wanted = "an integer" if number is int else "a number"
            raise ValueError(f"terrain {kind!r}: {name} must be {wanted}, got {value!r}") from None
    missing = [n for n, p in parameters.items() if p.default is inspect.Parameter.empty and n not in values]
    if missing:
        needed = ", ".join(f"{n}=VALUE" for n in missing)
        raise ValueError(f"terrain {kind!r} needs {needed}, e.g. {kind}:{missing[0]}=...")
    return TERRAINS[kind](**values)
