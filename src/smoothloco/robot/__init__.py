"""Robot layer: the bundled quadruped model, its joints, feet, default pose and gains."""

from smoothloco.robot.anymal import LEGS, RobotSpec, anymal_c

__all__ = ["LEGS", "RobotSpec", "anymal_c"]
