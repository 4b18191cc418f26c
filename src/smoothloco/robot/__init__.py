"""Robot layer: the bundled quadrupeds and the spec a user writes for their own
(joints, feet, knees, default pose, gains, task settings), checked against the simulator."""

from smoothloco.robot.anymal import LEGS, anymal_c
from smoothloco.robot.loading import BUNDLED_ROBOTS, DEFAULT_ROBOT, check_robot_name, load_robot, load_spec_file
from smoothloco.robot.spec import RobotSpec, RobotSpecError, check_tree, make_spec

__all__ = [
    "BUNDLED_ROBOTS",
    "DEFAULT_ROBOT",
    "LEGS",
    "RobotSpec",
    "RobotSpecError",
    "anymal_c",
    "check_robot_name",
    "check_tree",
    "load_robot",
    "load_spec_file",
    "make_spec",
]
