"""Quaternion helpers (w, x, y, z), safe to differentiate at zero angular velocity."""

from __future__ import annotations

import jax
import jax.numpy as jnp


def quat_mul(a: jax.Array, b: jax.Array) -> jax.Array:
    aw, ax, ay, az = a[..., 0], a[..., 1], a[..., 2], a[..., 3]
    bw, bx, by, bz = b[..., 0], b[..., 1], b[..., 2], b[..., 3]
    return jnp.stack(
        [
            aw * bw - ax * bx - ay * by - az * bz,
            aw * bx + ax * bw + ay * bz - az * by,
            aw * by - ax * bz + ay * bw + az * bx,
            aw * bz + ax * by - ay * bx + az * bw,
        ],
        axis=-1,
    )


def skew(vec: jax.Array) -> jax.Array:
    """Cross-product matrices (..., 3, 3) of ``vec`` (..., 3): ``skew(a) @ b == a × b``."""
    x, y, z = vec[..., 0], vec[..., 1], vec[..., 2]
    zero = jnp.zeros_like(x)
    rows = [[zero, -z, y], [z, zero, -x], [-y, x, zero]]
    return jnp.stack([jnp.stack(r, axis=-1) for r in rows], axis=-2)


def quat_to_mat(quat: jax.Array) -> jax.Array:
    """Rotation matrices of unit quaternions (w, x, y, z), shape (..., 3, 3)."""
    w, x, y, z = quat[..., 0], quat[..., 1], quat[..., 2], quat[..., 3]
    rows = [
        [1 - 2 * (y * y + z * z), 2 * (x * y - w * z), 2 * (x * z + w * y)],
        [2 * (x * y + w * z), 1 - 2 * (x * x + z * z), 2 * (y * z - w * x)],
        [2 * (x * z - w * y), 2 * (y * z + w * x), 1 - 2 * (x * x + y * y)],
    ]
    return jnp.stack([jnp.stack(r, axis=-1) for r in rows], axis=-2)


def quat_integrate(quat: jax.Array, omega_local: jax.Array, dt: jax.Array | float) -> jax.Array:
    """Rotate ``quat`` by the body-frame angular velocity ``omega_local`` over ``dt``."""
    half_angle_vec = 0.5 * dt * omega_local
    half_angle = jnp.sqrt(jnp.sum(half_angle_vec**2, axis=-1, keepdims=True) + 1e-20)
    sinc = jnp.sinc(half_angle / jnp.pi)  # sin(x)/x, smooth at x = 0
    delta = jnp.concatenate([jnp.cos(half_angle), sinc * half_angle_vec], axis=-1)
    out = quat_mul(quat, delta)
    return out / jnp.linalg.norm(out, axis=-1, keepdims=True)


def rotate_inverse(quat: jax.Array, vec: jax.Array) -> jax.Array:
    """Express a world-frame vector in the frame of ``quat``."""
    w, xyz = quat[..., :1], quat[..., 1:]
    t = 2.0 * jnp.cross(-xyz, vec)
    return vec + w * t + jnp.cross(-xyz, t)


def rotate(quat: jax.Array, vec: jax.Array) -> jax.Array:
    """Express a frame-of-``quat`` vector in the world frame."""
    w, xyz = quat[..., :1], quat[..., 1:]
    t = 2.0 * jnp.cross(xyz, vec)
    return vec + w * t + jnp.cross(xyz, t)
