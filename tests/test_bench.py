"""The MuJoCo (C) baselines of ``bench sim`` are configured as their labels say."""

import mujoco

from smoothloco.experiments.bench import MUJOCO_C_SETTINGS
from smoothloco.robot import anymal_c


def _colliding_geoms(model: mujoco.MjModel) -> set[str]:
    return {model.geom(i).name for i in range(model.ngeom) if model.geom_contype[i] or model.geom_conaffinity[i]}


def test_mujoco_baselines_match_their_labels():
    robot = anymal_c()
    defaults, stiff, feet = (MUJOCO_C_SETTINGS[k](robot) for k in ("mujoco_c", "mujoco_c_stiff", "mujoco_c_feet"))
    assert (defaults.opt.cone, defaults.opt.impratio) == (mujoco.mjtCone.mjCONE_PYRAMIDAL, 1.0)
    assert (stiff.opt.cone, stiff.opt.impratio) == (mujoco.mjtCone.mjCONE_ELLIPTIC, 100.0)
    assert _colliding_geoms(feet) == set(robot.foot_geoms) | {"floor"}
    assert len(_colliding_geoms(defaults)) > len(_colliding_geoms(feet))  # the full geometry collides
    assert all(m.opt.timestep == defaults.opt.timestep for m in (stiff, feet))
