"""Terrain as a height function of (x, y): flat ground, or smooth rolling hills to train on."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable, Protocol

import jax
import jax.numpy as jnp


class Terrain(Protocol):
    def __call__(self, xy: jax.Array) -> jax.Array: ...


def flat(xy: jax.Array) -> jax.Array:
    """Flat ground at z = 0."""
    return jnp.zeros(xy.shape[:-1], xy.dtype)


# Three plane waves (direction in degrees, wavelength relative to the hills' wavelength) whose sum
# has no short period and no axis it favours, unlike the evaluation's egg-crate bumps (1 m along
# x and y, i.e. two 0.71 m waves at ±45°).
HILL_WAVES = ((20.0, 1.0), (75.0, 0.9 / 1.3), (140.0, 1.7 / 1.3))


@dataclass(frozen=True)
class RollingHills:
    """Smooth uneven ground of about ``height`` m from trough to crest (the sum of
    ``HILL_WAVES``, each of amplitude height / 6, the middle one ``wavelength`` m long); steepest
    slope 1.9 x height x 1.3 m / wavelength (9° at 8 cm and 1.3 m). A frozen dataclass, so equal
    hills are one compiled program."""

    height: float
    wavelength: float = 1.3  # m

    def __call__(self, xy: jax.Array) -> jax.Array:
        out = jnp.zeros(xy.shape[:-1], xy.dtype)
        for degrees, relative_wavelength in HILL_WAVES:
            angle = math.radians(degrees)
            along = xy[..., 0] * math.cos(angle) + xy[..., 1] * math.sin(angle)
            out = out + jnp.cos(2.0 * math.pi * along / (relative_wavelength * self.wavelength))
        return self.height / (2 * len(HILL_WAVES)) * out


def contact_frame(terrain: Callable[[jax.Array], jax.Array], point: jax.Array) -> tuple[jax.Array, jax.Array]:
    """Ground height under ``point`` and the (3, 3) frame [normal, tangent1, tangent2] there."""
    height, slope = jax.value_and_grad(terrain)(point[:2])
    normal = jnp.array([-slope[0], -slope[1], 1.0], point.dtype)
    normal = normal / jnp.linalg.norm(normal)
    ex = jnp.array([1.0, 0.0, 0.0], point.dtype)
    tangent1 = ex - normal[0] * normal
    tangent1 = tangent1 / jnp.linalg.norm(tangent1)
    tangent2 = jnp.cross(normal, tangent1)
    return height, jnp.stack([normal, tangent1, tangent2])
