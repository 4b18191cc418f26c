"""Tiny models for physics checks with analytic answers, and run folders made without training."""

from __future__ import annotations

import json
from pathlib import Path

import jax
import numpy as np

from smoothloco.robot import RobotSpec
from smoothloco.tasks import VelocityTask
from smoothloco.train import checkpoint
from smoothloco.train.networks import make_policy_factory
from smoothloco.train.runner import TrainConfig
from smoothloco.train.shac import SHAC, SHACConfig, make_env

SLED_MASS = 2.0


def sled(height: float = 0.5, foot_radius: float = 0.02) -> RobotSpec:
    """A free box resting on four sphere feet at its corners: slides without rolling."""
    feet = "\n".join(
        f'<geom name="foot{i}" type="sphere" size="{foot_radius}" pos="{x} {y} -0.05" mass="0"/>'
        for i, (x, y) in enumerate([(0.2, 0.1), (0.2, -0.1), (-0.2, 0.1), (-0.2, -0.1)])
    )
    xml = f"""<mujoco><option timestep="0.005"/>
      <worldbody><body name="sled" pos="0 0 {height}"><freejoint/>
        <geom type="box" size="0.2 0.1 0.05" mass="{SLED_MASS}"/>{feet}
      </body></worldbody></mujoco>"""
    return RobotSpec(
        xml=xml,
        joint_names=(),
        foot_geoms=tuple(f"foot{i}" for i in range(4)),
        foot_bodies=("sled",) * 4,
        knee_bodies=(),
        foot_radius=foot_radius,
        default_pose=np.zeros(0),
        base_height=0.05 + foot_radius + 0.05,
        joint_lower=np.zeros(0),
        joint_upper=np.zeros(0),
    )


def write_untrained_run(run_dir: Path, shac: SHACConfig, seed: int = 0) -> tuple:
    """A run folder as ``train`` leaves it, holding the initial parameters (no training)."""
    config = TrainConfig(shac=shac)
    algo = SHAC(make_env(VelocityTask(config.task), shac.num_envs, shac.episode_length), shac)
    train_state, env_state = jax.jit(algo.init)(jax.random.PRNGKey(seed))
    run_dir.mkdir(parents=True)
    (run_dir / "config.json").write_text(json.dumps(config.to_dict()))
    checkpoint.save(run_dir / checkpoint.CHECKPOINT_NAME, (train_state, env_state))
    return make_policy_factory(algo.actor)((train_state.normalizer, train_state.actor_params)), env_state.obs
