"""Joint damping, friction loss and springs of the MJCF, against MuJoCo (C) applying the same
model: a joint swinging free, and the standing robot settling under PD."""

from pathlib import Path

import jax
import jax.numpy as jnp
import mujoco
import numpy as np
import pytest
from fakes import published

from smoothloco.robot import RobotSpec, load_spec_file
from smoothloco.sim import SimState, make_sim, rollout
from smoothloco.sim.check import stand_in_mujoco, stand_in_ours

CALF = "FL_calf_joint"
DT, STEPS = 0.002, 500  # 1 s


def _with_calf(spec: Path, attributes: str) -> Path:
    robot_xml = spec.parent / "robot.xml"
    joint = f'<joint name="{CALF}"'
    assert joint in robot_xml.read_text()
    robot_xml.write_text(robot_xml.read_text().replace(joint, f"{joint} {attributes}", 1))
    return spec


_rollout = jax.jit(rollout)  # one compilation for every model here: they differ in values only


def _release(spec: Path, offset: float, speed: float) -> tuple[RobotSpec, int, np.ndarray, np.ndarray]:
    """The calf released ``offset`` rad from the default pose at ``speed`` rad/s, the robot
    floating high: the robot, the calf's qpos index, q and v."""
    robot = load_spec_file(spec)
    joint = 7 + robot.joint_names.index(CALF)
    q, v = robot.init_qpos(), np.zeros(robot.mj_model().nv)
    q[2], q[joint], v[joint - 1] = 10.0, q[joint] + offset, speed
    return robot, joint, q, v


def _swing_ours(spec: Path, offset: float, speed: float) -> np.ndarray:
    """The calf's angle (steps,) without gravity or motor torque, in our simulator."""
    robot, joint, q, v = _release(spec, offset, speed)
    sim = make_sim(robot, "hard", dt=DT)
    sim = sim.replace(kp=0 * sim.kp, kd=0 * sim.kd, tree=sim.tree.replace(gravity=0 * sim.tree.gravity))
    start = SimState(q=jnp.asarray(q, jnp.float32), v=jnp.asarray(v, jnp.float32))
    _, (trajectory, _) = _rollout(sim, start, jnp.zeros((STEPS, len(robot.joint_names))))
    return np.asarray(trajectory.q[:, joint])


def _swing_mujoco(spec: Path, offset: float, speed: float) -> np.ndarray:
    """The same in MuJoCo (C), its default Euler integrator at our step."""
    robot, joint, q, v = _release(spec, offset, speed)
    model = robot.mj_model()
    model.opt.gravity[:], model.opt.timestep = 0.0, DT
    data = mujoco.MjData(model)
    data.qpos[:], data.qvel[:] = q, v
    angles = []
    for _ in range(STEPS):
        mujoco.mj_step(model, data)
        angles.append(data.qpos[joint])
    return np.array(angles)


SPRING = 'stiffness="5" springref="-1.5"'  # ~3 Hz on the calf's inertia; the default pose is -1.5


@pytest.mark.parametrize(
    ("attributes", "offset", "speed"),
    [
        (f'{SPRING} damping="0.05"', 0.4, 0.0),  # a lightly damped oscillation
        (f'{SPRING} frictionloss="0.1"', 0.4, 0.0),  # Coulomb friction: decays linearly, stops off centre
        ('damping="5"', 0.0, 3.0),  # h·d / inertia ≈ 1: an explicit step would overshoot to reverse motion
    ],
)
def test_a_free_joint_swings_and_decays_as_in_mujoco(tmp_path: Path, attributes: str, offset: float, speed: float):
    """Ours against MuJoCo with the property, measured against what the property changes:
    MuJoCo with the spring alone (or with nothing)."""
    spring_only = SPRING if SPRING in attributes else ""
    spec = _with_calf(published(tmp_path / "with"), attributes)
    ours, theirs = _swing_ours(spec, offset, speed), _swing_mujoco(spec, offset, speed)
    without = _swing_mujoco(_with_calf(published(tmp_path / "without"), spring_only), offset, speed)
    error, effect = np.abs(ours - theirs).max(), np.abs(theirs - without).max()
    print(f"{attributes}: largest difference to MuJoCo {error:.4f} rad, the property's effect {effect:.4f} rad")
    assert effect > 0.1
    assert error < 0.1 * effect


def test_standing_with_joint_damping_and_friction_loss_settles_as_in_mujoco(tmp_path: Path):
    """The published Go2's joint defaults (MuJoCo Menagerie: damping 0.1, frictionloss 0.2)."""
    robot = load_spec_file(published(tmp_path, joint_defaults='damping="0.1" frictionloss="0.2"'))
    theirs, ours = stand_in_mujoco(robot), stand_in_ours(robot, "hard")
    print(f"speed over the last second: MuJoCo {theirs.speed:.4f}, ours {ours.speed:.4f}; "
          f"height {theirs.height:.4f} and {ours.height:.4f} m")  # fmt: skip
    assert theirs.speed < 0.01 and ours.speed < 0.01
    assert abs(theirs.height - ours.height) < 0.002
