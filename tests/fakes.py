"""Tiny models for physics checks with analytic answers, run folders made without training, and
a stand-in for the MuJoCo player."""

from __future__ import annotations

import json
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
from brax.envs.base import Env, State, Wrapper

from smoothloco.robot import RobotSpec, load_robot
from smoothloco.robot.loading import ASSETS
from smoothloco.robot_side.testbench import Imperfections, command_schedule
from smoothloco.tasks import VelocityTask, VelocityTaskConfig
from smoothloco.train import checkpoint
from smoothloco.train.networks import make_policy_factory
from smoothloco.train.runs import TrainConfig
from smoothloco.train.shac import SHAC, SHACConfig, make_env

SLED_MASS = 2.0
FLOOR = '<geom name="floor" type="plane" size="0 0 0.05" material="grid" contype="1" conaffinity="1" condim="3"/>'
# A tetrahedron: the visual mesh a published model shows in place of its collision primitives.
MESH = "v 0 0 0\nv 0.1 0 0\nv 0 0.1 0\nv 0 0 0.1\nf 1 3 2\nf 1 2 4\nf 1 4 3\nf 2 3 4\n"
VISUAL = '<geom type="mesh" mesh="shell" contype="0" conaffinity="0" group="2" mass="0"/>'


def published(folder: Path, visual: str = VISUAL, joint_defaults: str = "") -> Path:
    """The bundled Go2 written the published way: robot.xml (with a visual mesh on the base, in
    ``assets/``, and ``joint_defaults``, e.g. ``damping="0.1"``, added to its joint defaults)
    included from scene.xml (the floor); the spec names scene.xml."""
    folder.mkdir(parents=True, exist_ok=True)
    robot = (ASSETS / "go2.xml").read_text()
    assert FLOOR in robot
    robot = robot.replace(FLOOR, "")
    joint_attributes = f'armature="0.01" {joint_defaults}'.strip()
    robot = robot.replace('<joint armature="0.01"/>', f"<joint {joint_attributes}/>", 1)
    robot = robot.replace('autolimits="true"/>', 'autolimits="true" meshdir="assets"/>', 1)
    robot = robot.replace("<asset>", '<asset>\n    <mesh name="shell" file="shell.obj"/>', 1)
    robot = robot.replace('<freejoint name="root"/>', f'<freejoint name="root"/>\n      {visual}', 1)
    (folder / "robot.xml").write_text(robot)
    (folder / "assets").mkdir(exist_ok=True)
    (folder / "assets" / "shell.obj").write_text(MESH)
    scene = f'<mujoco model="go2 scene">\n  <include file="robot.xml"/>\n  <worldbody>{FLOOR}</worldbody>\n</mujoco>\n'
    (folder / "scene.xml").write_text(scene)
    spec = (ASSETS / "go2.toml").read_text().replace('mjcf = "go2.xml"', 'mjcf = "scene.xml"', 1)
    (folder / "go2.toml").write_text(spec)
    load_robot.cache_clear()
    return folder / "go2.toml"


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
        knee_bodies=(),
        foot_radius=foot_radius,
        default_pose=np.zeros(0),
        base_height=0.05 + foot_radius + 0.05,
        joint_lower=np.zeros(0),
        joint_upper=np.zeros(0),
    )


def write_untrained_run(
    run_dir: Path, shac: SHACConfig, seed: int = 0, task: VelocityTaskConfig | None = None, iteration: int = 0
) -> tuple:
    """A run folder as ``train`` leaves it, holding the initial parameters (no training) under
    the iteration counter ``iteration``; its environment state is zeros (``ZeroResets``)."""
    config = TrainConfig(shac=shac, task=task or VelocityTaskConfig())
    algo = SHAC(ZeroResets(make_env(VelocityTask(config.task), shac.episode_length)), shac)
    train_state, env_state = jax.jit(algo.init)(jax.random.PRNGKey(seed))
    train_state = train_state.replace(iteration=train_state.iteration + iteration)
    run_dir.mkdir(parents=True)
    (run_dir / "config.json").write_text(json.dumps(config.to_dict()))
    checkpoint.save(run_dir / checkpoint.CHECKPOINT_NAME, (train_state, env_state))
    return make_policy_factory(algo.actor)((train_state.normalizer, train_state.actor_params)), env_state.obs


class ZeroResets(Wrapper):
    """``env`` whose reset gives zeros in the shapes of its states. ``SHAC.init`` then builds the
    networks, optimizers and normalizer it builds on the real reset (they depend on the
    observation's shape alone) without compiling the task's reset, about half a minute per
    configuration on a 2-core machine; nothing reads an untrained run's environment state."""

    def reset(self, rng: jax.Array) -> State:
        return jax.tree.map(lambda s: jnp.zeros(s.shape, s.dtype), jax.eval_shape(self.env.reset, rng))


class PointMassTracking(Env):
    """A 2-D point mass told to move at a commanded velocity: smooth, differentiable and tiny,
    so a learning algorithm's mechanics can be checked in seconds. The initial (near-zero)
    policy stands still and earns exp(-|command|^2 / 0.25); a tracking one earns about 1."""

    dt = 0.05
    gain = 4.0  # velocity response rate to the action (1/s)

    def reset(self, rng: jax.Array) -> State:
        command = jax.random.uniform(rng, (2,), minval=-1.0, maxval=1.0)
        velocity = jnp.zeros(2)
        info = {"command": command}
        metrics = {"tracking_error": jnp.zeros(())}
        return State(velocity, self._obs(velocity, command), jnp.zeros(()), jnp.zeros(()), metrics, info)

    def step(self, state: State, action: jax.Array) -> State:
        command = state.info["command"]
        velocity = state.pipeline_state + self.dt * self.gain * (
            jnp.clip(action, -1.0, 1.0) * 2.0 - state.pipeline_state
        )
        error = jnp.sum((command - velocity) ** 2)
        reward = jnp.exp(-error / 0.25) - 0.01 * jnp.sum(action**2)
        metrics = {**state.metrics, "tracking_error": jnp.sqrt(error)}
        return state.replace(pipeline_state=velocity, obs=self._obs(velocity, command), reward=reward, metrics=metrics)

    @staticmethod
    def _obs(velocity: jax.Array, command: jax.Array) -> jax.Array:
        return jnp.concatenate([velocity, command])

    @property
    def observation_size(self) -> int:
        return 4

    @property
    def action_size(self) -> int:
        return 2

    @property
    def backend(self) -> str:
        return "fake"


class FakePlayer:
    """The MuJoCo player's stand-in: tracks every command exactly; falls 0.5 s after any push of
    1 m/s or more, and on ground friction below 0.5 at once; with a control delay its velocity
    lags the command by that delay's worth of error (0.1 m/s per 10 ms)."""

    def __init__(self) -> None:
        self.calls = []

    def run(self, commands, seconds, pushes, friction, added_base_mass, imperfections=Imperfections()):
        self.calls.append((friction, added_base_mass))
        t = np.arange(round(seconds / 0.02)) * 0.02
        command = command_schedule(commands, t)
        fallen = np.full(len(t), friction is not None and friction < 0.5)
        for time, vx, vy in pushes:
            if np.hypot(vx, vy) >= 1.0:
                fallen |= t >= time + 0.5
        n = len(t)
        return {
            "time": t,
            "command": command,
            "base_pos": np.zeros((n, 3)),
            "base_lin_vel": np.concatenate(
                [command[:, :2] + 10.0 * imperfections.action_delay, np.zeros((n, 1))], axis=1
            ),
            "base_ang_vel": np.concatenate([np.zeros((n, 2)), command[:, 2:]], axis=1),
            "gravity": np.tile((0.0, 0.0, -1.0), (n, 1)),
            "joint_pos": np.zeros((n, 12)),
            "joint_vel": np.ones((n, 12)),
            "torque": np.ones((n, 12)),
            "foot_slip": np.zeros((n, 4)),
            "foot_height": np.zeros((n, 4)),
            "penetration": np.full(n, 1e-3),
            "fallen": fallen,
            "power": np.full(n, 12.0),
        }
