"""Domain randomization in the style Brax and MuJoCo Playground use:
``(sim, rng) -> (batched sim, in_axes)``, one set of physical parameters per environment."""

from __future__ import annotations

import jax
import jax.numpy as jnp

from smoothloco.sim import Sim
from smoothloco.tasks.config import RandomizationConfig


def randomize(sim: Sim, rng: jax.Array, config: RandomizationConfig = RandomizationConfig()) -> tuple[Sim, Sim]:
    """Ground friction, base mass and centre of mass, PD gains and motor strength per env.

    ``rng`` holds one key per environment (shape (n, 2)).
    """

    n_joints = sim.kp.shape[0]
    model = sim.mjx_model

    def sample(key: jax.Array) -> dict[str, jax.Array]:
        k = jax.random.split(key, 6)
        uniform = lambda key, r, shape=(): jax.random.uniform(key, shape, minval=r[0], maxval=r[1])  # noqa: E731
        offset = config.base_com_offset
        return {
            "body_mass": model.body_mass.at[1].add(uniform(k[0], config.added_base_mass)),
            "body_ipos": model.body_ipos.at[1].add(uniform(k[1], (-offset, offset), (3,))),
            "friction": uniform(k[2], config.friction),
            "kp": sim.kp * uniform(k[3], config.kp_scale, (n_joints,)),
            "kd": sim.kd * uniform(k[4], config.kd_scale, (n_joints,)),
            "motor_strength": uniform(k[5], config.motor_strength, (n_joints,)),
        }

    # Only the randomized leaves carry a batch axis; everything else stays shared.
    s = jax.vmap(sample)(rng)
    batched = sim.replace(
        mjx_model=model.tree_replace({"body_mass": s["body_mass"], "body_ipos": s["body_ipos"]}),
        friction=s["friction"],
        kp=s["kp"],
        kd=s["kd"],
        motor_strength=s["motor_strength"],
    )
    in_axes = jax.tree.map(lambda _: None, sim)
    in_axes = in_axes.replace(
        mjx_model=in_axes.mjx_model.tree_replace({"body_mass": 0, "body_ipos": 0}),
        friction=0,
        kp=0,
        kd=0,
        motor_strength=0,
    )
    return batched, in_axes
