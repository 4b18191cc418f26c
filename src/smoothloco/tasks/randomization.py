"""Domain randomization in the style Brax and MuJoCo Playground use:
``(sim, rng) -> (batched sim, in_axes)``, one set of physical parameters per environment."""

from __future__ import annotations

import jax
import jax.numpy as jnp

from smoothloco.sim import Sim
from smoothloco.tasks.config import RandomizationConfig


def randomize(sim: Sim, rng: jax.Array, config: RandomizationConfig = RandomizationConfig()) -> tuple[Sim, Sim]:
    """Ground friction, base mass and centre of mass, PD gains, motor strength, rotor armature
    and joint friction (both in proportion to each joint's torque limit) per env; a
    ``config.hard_corner_fraction`` of the envs has every range at its harder end.

    ``rng`` holds one key per environment (shape (n, 2)).
    """

    n_joints = sim.kp.shape[0]
    tree = sim.tree

    def sample(key: jax.Array) -> dict[str, jax.Array]:
        k = jax.random.split(key, 6)
        hard = jax.random.uniform(jax.random.fold_in(key, 8)) < config.hard_corner_fraction

        def draw(key: jax.Array, r: tuple[float, float], harder: int, shape: tuple[int, ...] = ()) -> jax.Array:
            """Uniform in ``r``, or ``r[harder]`` in a hard-corner env."""
            return jnp.where(hard, r[harder], jax.random.uniform(key, shape, minval=r[0], maxval=r[1]))

        low, high = 0, 1  # which end of a range is the harder one
        offset = config.base_com_offset
        return {
            "body_mass": tree.body_mass.at[1].add(draw(k[0], config.added_base_mass, high)),
            "body_ipos": tree.body_ipos.at[1].add(jax.random.uniform(k[1], (3,), minval=-offset, maxval=offset)),
            "friction": draw(k[2], config.friction, low),
            "kp": sim.kp * draw(k[3], config.kp_scale, low, (n_joints,)),
            "kd": sim.kd * draw(k[4], config.kd_scale, high, (n_joints,)),
            "motor_strength": draw(k[5], config.motor_strength, low, (n_joints,)),
            "dof_armature": tree.dof_armature.at[-n_joints:].add(
                draw(jax.random.fold_in(key, 6), config.rotor_armature_per_torque, high) * sim.torque_limit
            ),
            "joint_friction": sim.joint_friction  # the model's own, plus a drawn share of the torque limit
            + draw(jax.random.fold_in(key, 7), config.joint_friction_share, high) * sim.torque_limit,
        }

    return _batched(sim, jax.vmap(sample)(rng))


def set_physics(sim: Sim, friction: jax.Array, added_base_mass: jax.Array) -> tuple[Sim, Sim]:
    """Given ground friction and added base mass (kg) per environment, shapes (n,), in the
    ``randomize`` form; the other parameters stay nominal. For scripted evaluations."""
    friction, added = jnp.asarray(friction, sim.friction.dtype), jnp.asarray(added_base_mass, sim.friction.dtype)
    if friction.ndim != 1 or friction.shape != added.shape:
        raise ValueError(
            f"friction and added_base_mass must be (n,) arrays of one length, got {friction.shape}, {added.shape}"
        )
    body_mass = sim.tree.body_mass
    return _batched(
        sim, {"body_mass": jnp.tile(body_mass, (friction.shape[0], 1)).at[:, 1].add(added), "friction": friction}
    )


def _batched(sim: Sim, values: dict[str, jax.Array]) -> tuple[Sim, Sim]:
    """``sim`` with the given leaves batched along axis 0, and the matching ``in_axes``: only those
    leaves carry a batch axis; everything else stays shared."""
    tree_keys = {k for k in values if k in ("body_mass", "body_ipos", "dof_armature")}
    sim_keys = set(values) - tree_keys
    batched = sim.replace(
        tree=sim.tree.replace(**{k: values[k] for k in tree_keys}), **{k: values[k] for k in sim_keys}
    )
    in_axes = jax.tree.map(lambda _: None, sim)
    in_axes = in_axes.replace(tree=in_axes.tree.replace(**{k: 0 for k in tree_keys}), **{k: 0 for k in sim_keys})
    return batched, in_axes
