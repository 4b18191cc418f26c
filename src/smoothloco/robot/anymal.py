"""ANYmal-C-class quadruped built from primitive shapes and public numbers.

The model is generated from the tables below (public ANYmal C figures from MuJoCo Menagerie's
anybotics_anymal_c model and legged_gym's anymal_c configuration, plus forward kinematics of
them) rather than written out four times, so every leg follows one set of numbers and the sign
conventions (x forward, y left, z up; legs LF, RF, LH, RH) live in one place.
All joint axes are the same in the base frame: HAA = +x, HFE = +y, KFE = +y.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

from smoothloco.robot.spec import RobotSpec, make_spec

LEGS = ("LF", "RF", "LH", "RH")
JOINTS_PER_LEG = ("HAA", "HFE", "KFE")
# (fore/aft sign, lateral sign) per leg: +1 front / left.
LEG_SIGNS = {"LF": (1, 1), "RF": (1, -1), "LH": (-1, 1), "RH": (-1, -1)}

FOOT_RADIUS = 0.03
BASE_MASS = 19.2035  # menagerie base; with the legs the robot weighs 44.97 kg
BASE_COM = (0.0025, 0.0, 0.0502)
BASE_INERTIA = (0.2174, 0.6396, 0.6240)


@dataclass(frozen=True)
class Link:
    mass: float
    inertia: tuple[float, float, float]
    com_offset: tuple[float, float, float]  # relative to the link's joint, unsigned (front-left leg)


# Link frames sit on their joint; offsets are for the LF leg and mirrored by LEG_SIGNS.
HAA_POS = (0.2999, 0.104, 0.0)
HFE_FROM_HAA = (0.0599, 0.0838, 0.0)
KFE_FROM_HFE = (0.0, 0.1003, -0.285)
FOOT_FROM_KFE = (0.0879, 0.0131, -0.3155)
HIP = Link(2.781, (0.00586, 0.00492, 0.00329), (0.357 - 0.2999, 0.121 - 0.104, -0.0005))
THIGH = Link(3.071, (0.03025, 0.02989, 0.00418), (0.360 - 0.3598, 0.219 - 0.1878, -0.246))
SHANK = Link(0.58842, (0.01016, 0.00924, 0.00112), (0.421 - 0.3598, 0.294 - 0.2881, -0.366 + 0.285))

HAA_RANGE_OUT, HAA_RANGE_IN = 0.49, 0.72


def _signed(v: tuple[float, float, float], sx: int, sy: int) -> str:
    return f"{sx * v[0]:.5f} {sy * v[1]:.5f} {v[2]:.5f}"


def _inertial(link: Link, sx: int, sy: int) -> str:
    ixx, iyy, izz = link.inertia
    return f'<inertial pos="{_signed(link.com_offset, sx, sy)}" mass="{link.mass}" diaginertia="{ixx} {iyy} {izz}"/>'


def _leg_xml(leg: str) -> str:
    sx, sy = LEG_SIGNS[leg]
    # +HAA moves the foot to +y: outward for left legs, inward for right legs.
    haa_range = (-HAA_RANGE_IN, HAA_RANGE_OUT) if sy > 0 else (-HAA_RANGE_OUT, HAA_RANGE_IN)
    foot = _signed(FOOT_FROM_KFE, sx, sy)
    half_foot = _signed(tuple(0.5 * c for c in FOOT_FROM_KFE), sx, sy)  # type: ignore[arg-type]
    return f"""
    <body name="{leg}_HIP" pos="{_signed(HAA_POS, sx, sy)}">
      <joint name="{leg}_HAA" axis="1 0 0" range="{haa_range[0]} {haa_range[1]}"/>
      {_inertial(HIP, sx, sy)}
      <geom class="collision" type="cylinder" size="0.05 0.07" pos="{_signed((0.03, 0.03, 0), sx, sy)}" euler="0 1.5708 0"/>
      <body name="{leg}_THIGH" pos="{_signed(HFE_FROM_HAA, sx, sy)}">
        <joint name="{leg}_HFE" axis="0 1 0"/>
        {_inertial(THIGH, sx, sy)}
        <geom class="collision" type="cylinder" size="0.065 0.04" euler="1.5708 0 0"/>
        <geom class="collision" type="box" size="0.0375 0.03 0.1413" pos="{_signed((0, 0.05, -0.1425), sx, sy)}"/>
        <body name="{leg}_SHANK" pos="{_signed(KFE_FROM_HFE, sx, sy)}">
          <joint name="{leg}_KFE" axis="0 1 0"/>
          {_inertial(SHANK, sx, sy)}
          <geom class="collision" type="cylinder" size="0.05 0.07" euler="1.5708 0 0"/>
          <geom class="collision" type="capsule" size="0.0175" fromto="0 0 0 {foot}"/>
          <geom name="{leg}_FOOT" class="foot" type="sphere" size="{FOOT_RADIUS}" pos="{foot}"/>
          <site name="{leg}_shank_mid" pos="{half_foot}"/>
        </body>
      </body>
    </body>"""


def build_xml() -> str:
    """MJCF of the bundled quadruped with full collision geometry for MuJoCo (C).

    Robot geoms collide with the floor only (contype 1 / conaffinity 0), so self-collision
    is off; our differentiable simulator uses the foot spheres alone.
    """
    joint_names = [f"{leg}_{j}" for leg in LEGS for j in JOINTS_PER_LEG]
    actuators = "\n    ".join(f'<motor name="{n}" joint="{n}" ctrlrange="-80 80"/>' for n in joint_names)
    legs = "".join(_leg_xml(leg) for leg in LEGS)
    return f"""<mujoco model="smoothloco_quadruped">
  <compiler angle="radian" autolimits="true"/>
  <option timestep="0.005" cone="elliptic" impratio="100"/>
  <default>
    <geom contype="1" conaffinity="0" condim="3" friction="0.8 0.02 0.01" rgba="0.8 0.45 0.1 1"/>
    <default class="collision"><geom density="0" mass="0"/></default>
    <default class="foot"><geom mass="0" rgba="0.1 0.1 0.1 1" priority="1" solimp="0.015 1 0.031"/></default>
  </default>
  <asset>
    <texture name="grid" type="2d" builtin="checker" rgb1="0.2 0.3 0.4" rgb2="0.3 0.4 0.5" width="256" height="256"/>
    <material name="grid" texture="grid" texrepeat="8 8" reflectance="0.1"/>
  </asset>
  <worldbody>
    <light pos="0 0 4" dir="0 0 -1" directional="true"/>
    <geom name="floor" type="plane" size="0 0 0.05" material="grid" contype="1" conaffinity="1" condim="3"/>
    <body name="base" pos="0 0 0.6">
      <freejoint name="root"/>
      <inertial pos="{BASE_COM[0]} {BASE_COM[1]} {BASE_COM[2]}" mass="{BASE_MASS}" diaginertia="{BASE_INERTIA[0]} {BASE_INERTIA[1]} {BASE_INERTIA[2]}"/>
      <geom name="base_box" class="collision" type="box" size="0.29 0.07 0.09"/>
      <geom class="collision" type="cylinder" size="0.09 0.0725" pos="0.2175 0.07 0" euler="0 1.5708 0"/>
      <geom class="collision" type="cylinder" size="0.09 0.0725" pos="0.2175 -0.07 0" euler="0 1.5708 0"/>
      <geom class="collision" type="cylinder" size="0.09 0.0725" pos="-0.2175 0.07 0" euler="0 1.5708 0"/>
      <geom class="collision" type="cylinder" size="0.09 0.0725" pos="-0.2175 -0.07 0" euler="0 1.5708 0"/>
      <geom class="collision" type="box" size="0.055 0.07 0.09" pos="0.4695 0 0"/>
      <geom class="collision" type="box" size="0.055 0.07 0.09" pos="-0.4695 0 0"/>
      <geom class="collision" type="cylinder" size="0.07 0.06" pos="-0.364 0 0.1335"/>
      <site name="imu" pos="0 0 0"/>{legs}
    </body>
  </worldbody>
  <actuator>
    {actuators}
  </actuator>
</mujoco>
"""


@lru_cache(maxsize=1)
def anymal_c() -> RobotSpec:
    """The bundled robot with the legged_gym standing pose and PD gains (kp 80, kd 2, 80 N·m).
    The task's defaults are this robot's, so it has no ``task_defaults`` of its own."""
    pose = []
    for leg in LEGS:
        sx, _ = LEG_SIGNS[leg]
        pose += [0.0, 0.4 * sx, -0.8 * sx]  # knees point inward ("X" stance)
    return make_spec(
        build_xml(),
        joint_names=[f"{leg}_{j}" for leg in LEGS for j in JOINTS_PER_LEG],
        foot_geoms=[f"{leg}_FOOT" for leg in LEGS],
        knee_bodies=[f"{leg}_SHANK" for leg in LEGS],
        default_pose=pose,
        kp=80.0,
        kd=2.0,
        torque_limit=80.0,
        # ANYdrive 3's DC envelope as Isaac Lab models ANYmal C's drives: 120 N·m saturation,
        # 7.5 rad/s; the full 80 N·m up to 2.5 rad/s
        saturation_torque=120.0,
        velocity_limit=7.5,
        name="anymal_c",
    )
