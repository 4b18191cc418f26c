"""Terrain as a height function of (x, y), so heightfields can replace flat ground later."""

from __future__ import annotations

from typing import Callable, Protocol

import jax
import jax.numpy as jnp


class Terrain(Protocol):
    def __call__(self, xy: jax.Array) -> jax.Array: ...


def flat(xy: jax.Array) -> jax.Array:
    """Flat ground at z = 0."""
    return jnp.zeros(xy.shape[:-1], xy.dtype)


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
