"""Task layer: velocity tracking as pure reset/step functions on a Brax State."""

from smoothloco.tasks.config import (
    DEFAULT_REWARD_WEIGHTS,
    CommandConfig,
    GaitConfig,
    HeightScanConfig,
    PushConfig,
    RandomizationConfig,
    VelocityTaskConfig,
    VelocityTrimConfig,
)
from smoothloco.tasks.controller import OBS_LAYOUT
from smoothloco.tasks.randomization import randomize
from smoothloco.tasks.velocity import OBS_SIZE, VelocityTask

__all__ = [
    "DEFAULT_REWARD_WEIGHTS",
    "OBS_LAYOUT",
    "OBS_SIZE",
    "CommandConfig",
    "GaitConfig",
    "HeightScanConfig",
    "PushConfig",
    "RandomizationConfig",
    "VelocityTask",
    "VelocityTaskConfig",
    "VelocityTrimConfig",
    "randomize",
]
