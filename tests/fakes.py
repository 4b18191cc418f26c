"""Tiny models for physics checks with analytic answers."""

from __future__ import annotations

import numpy as np

from smoothloco.robot import RobotSpec

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
