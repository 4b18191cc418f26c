"""Sim layer: one differentiable time step with hard, smooth and soft foot contact."""

from smoothloco.sim.contact import CONTACT_MODELS, DEFAULT_SHARPNESS, ContactConfig
from smoothloco.sim.step import Sim, SimState, StepInfo, check_state, initial_state, make_sim, rollout, step

__all__ = [
    "CONTACT_MODELS",
    "DEFAULT_SHARPNESS",
    "ContactConfig",
    "Sim",
    "SimState",
    "StepInfo",
    "check_state",
    "initial_state",
    "make_sim",
    "rollout",
    "step",
]
