"""Our terrains (``smoothloco.sim.terrain``) as MuJoCo geoms, so that MuJoCo (C) judges a policy,
and checks our contact, on the same ground: a slope tilts the floor plane, boxes are box geoms on
it, and any other height field becomes a MuJoCo height field in its place."""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import mujoco
import numpy as np

from smoothloco.sim.terrain import Boxes, Flat, HeightField, Slope, StairsCourse, Terrain

HFIELD_NAME = "terrain"
TERRAIN_BODY = "terrain"  # the static body that holds boxes
HFIELD_BASE = 0.1  # m, the height field's solid depth below its lowest sample


def add_terrain(spec: mujoco.MjSpec, terrain: Terrain, extent: float = 10.0, cell: float = 0.05) -> None:
    """Put ``terrain`` into ``spec`` in place of its world body's one floor plane, keeping the
    floor's contact settings (friction, condim, solref, solimp, priority, collision masks) and the
    index of every geom and body already there (boxes come last, in a static body).

    A height field other than a slope is sampled every ``cell`` m over ±``extent`` m in x and y;
    MuJoCo interpolates linearly between samples, within c² max|h''| / 8 of ours.
    """
    planes = [g for g in spec.worldbody.geoms if g.type == mujoco.mjtGeom.mjGEOM_PLANE]
    if len(planes) != 1:
        raise ValueError(
            f"the model needs exactly one floor plane in its world body for the terrain, has {len(planes)}"
        )
    floor = planes[0]
    if isinstance(terrain, Flat):
        return
    if isinstance(terrain, StairsCourse):
        terrain = terrain.as_boxes()
    if isinstance(terrain, Slope):
        floor.quat = slope_quaternion(terrain)
    elif isinstance(terrain, Boxes):
        # in a static body of their own, last in the tree, so every geom of the model keeps its
        # index; with the floor's collision masks, not the model's defaults (which may leave a
        # robot's geoms colliding with the floor alone)
        body = spec.worldbody.add_body(name=TERRAIN_BODY)
        for index, (x, y, z, hx, hy, hz) in enumerate(terrain.boxes):
            body.add_geom(
                name=f"terrain_box{index}", type=mujoco.mjtGeom.mjGEOM_BOX, pos=[x, y, z], size=[hx, hy, hz],
                friction=floor.friction, condim=floor.condim, solref=floor.solref, solimp=floor.solimp,
                priority=floor.priority, contype=floor.contype, conaffinity=floor.conaffinity,
                rgba=[0.55, 0.5, 0.45, 1.0],
            )  # fmt: skip
    elif isinstance(terrain, HeightField):
        if not (extent > 0 and 0 < cell <= extent):
            raise ValueError(f"height field extent and cell must satisfy 0 < cell <= extent, got {extent}, {cell} m")
        samples = round(2 * extent / cell) + 1
        grid = np.linspace(-extent, extent, samples)
        xy = np.stack(np.meshgrid(grid, grid), axis=-1)  # [row along y, column along x]
        heights = np.asarray(jax.jit(terrain)(jnp.asarray(xy, jnp.float32)), np.float64)
        low, span = heights.min(), max(np.ptp(heights), 1e-6)
        spec.add_hfield(name=HFIELD_NAME, size=[extent, extent, span, HFIELD_BASE], nrow=samples, ncol=samples,
                        userdata=((heights - low) / span).ravel().tolist())  # fmt: skip
        floor.type, floor.hfieldname = mujoco.mjtGeom.mjGEOM_HFIELD, HFIELD_NAME
        floor.pos, floor.quat = [0.0, 0.0, low], [1.0, 0.0, 0.0, 0.0]
    else:
        raise TypeError(
            f"no MuJoCo geoms for terrain {terrain!r}; accepted: Flat, Slope, Boxes, StairsCourse or another HeightField"
        )


def slope_quaternion(slope: Slope) -> list[float]:
    """The rotation (w, x, y, z) that turns a horizontal plane into ``slope``."""
    gx, gy = slope.gradient
    steepness = math.hypot(gx, gy)
    if steepness == 0.0:
        return [1.0, 0.0, 0.0, 0.0]
    half = 0.5 * math.atan(steepness)
    # about the horizontal axis z x n, with n ∝ (-gx, -gy, 1)
    return [math.cos(half), math.sin(half) * gy / steepness, -math.sin(half) * gx / steepness, 0.0]


def terrain_model(xml: str, terrain: Terrain, **sampling: float) -> mujoco.MjModel:
    """The MuJoCo model of ``xml`` (with one floor plane) on ``terrain``; ``sampling``: ``extent``
    and ``cell`` of ``add_terrain``."""
    return _on_terrain(xml, terrain, sampling).compile()


def terrain_xml(xml: str, terrain: Terrain, **sampling: float) -> str:
    """``terrain_model``'s model as MJCF text (a height field's samples included), for a renderer
    in another process."""
    return _on_terrain(xml, terrain, sampling).to_xml()


def _on_terrain(xml: str, terrain: Terrain, sampling: dict) -> mujoco.MjSpec:
    spec = mujoco.MjSpec.from_string(xml)
    add_terrain(spec, terrain, **sampling)
    return spec
