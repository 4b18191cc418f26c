"""A robot as model collections publish it: ``scene.xml`` including ``robot.xml``, visual meshes
in a ``meshdir``. It loads from any working directory, its hash covers every included file,
and its export is one file the standalone player loads."""

import json
from pathlib import Path

import mujoco
import numpy as np
import pytest
from fakes import write_untrained_run

from smoothloco.cli import main
from smoothloco.deploy.export import EXPORT_FILES, export_run
from smoothloco.robot_side.testbench import Player
from smoothloco.robot import RobotSpecError, load_robot, load_spec_file
from smoothloco.robot.loading import ASSETS
from smoothloco.sim.check import ignored_properties
from smoothloco.tasks import VelocityTaskConfig
from smoothloco.train.shac import SHACConfig

pytestmark = pytest.mark.filterwarnings("ignore:os.fork:RuntimeWarning")

FLOOR = '<geom name="floor" type="plane" size="0 0 0.05" material="grid" contype="1" conaffinity="1" condim="3"/>'
# A tetrahedron: the visual mesh a published model shows in place of its collision primitives.
MESH = "v 0 0 0\nv 0.1 0 0\nv 0 0.1 0\nv 0 0 0.1\nf 1 3 2\nf 1 2 4\nf 1 4 3\nf 2 3 4\n"
VISUAL = '<geom type="mesh" mesh="shell" contype="0" conaffinity="0" group="2" mass="0"/>'


def published(folder: Path, visual: str = VISUAL) -> Path:
    """The bundled Go2 written the published way: robot.xml (with a visual mesh on the base, in
    ``assets/``) included from scene.xml (the floor); the spec names scene.xml."""
    folder.mkdir(parents=True, exist_ok=True)
    robot = (ASSETS / "go2.xml").read_text()
    assert FLOOR in robot
    robot = robot.replace(FLOOR, "")
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


def test_a_published_model_loads_from_any_working_directory(tmp_path: Path, monkeypatch):
    spec = published(tmp_path / "robot")
    (tmp_path / "elsewhere").mkdir()
    monkeypatch.chdir(tmp_path / "elsewhere")
    robot = load_spec_file(Path("../robot/go2.toml"))
    bundled = load_robot("go2")
    # What the motion depends on is MuJoCo's own reading of the files, and the bundled Go2's
    reference = mujoco.MjModel.from_xml_path(str(spec.parent / "scene.xml"))
    model = robot.mj_model()
    for field in ("body_mass", "body_inertia", "body_ipos", "body_pos", "jnt_range", "dof_armature"):
        np.testing.assert_allclose(getattr(model, field), getattr(reference, field), rtol=1e-6, atol=1e-9)
        np.testing.assert_allclose(getattr(model, field), getattr(bundled.mj_model(), field), rtol=1e-6, atol=1e-9)
    assert robot.base_height == pytest.approx(bundled.base_height)
    kept = reference.geom_type != mujoco.mjtGeom.mjGEOM_MESH  # the one visual geom is dropped
    for field in ("geom_type", "geom_size", "geom_friction", "geom_contype", "geom_conaffinity", "geom_bodyid"):
        np.testing.assert_allclose(getattr(model, field), getattr(reference, field)[kept], rtol=1e-6, atol=1e-9)
    for field in ("timestep", "impratio", "cone", "gravity"):
        np.testing.assert_allclose(getattr(model.opt, field), getattr(reference.opt, field))
    np.testing.assert_allclose(model.actuator_ctrlrange, reference.actuator_ctrlrange)
    # one self-contained file: the visual mesh is gone, nothing refers to another file
    assert model.nmesh == 0 and "file=" not in robot.xml and "include" not in robot.xml
    assert main(["robot", "../robot/go2.toml"]) == 0


def test_the_model_hash_covers_the_included_file(tmp_path: Path):
    spec = published(tmp_path)
    before = load_spec_file(spec).model_hash
    robot_xml = tmp_path / "robot.xml"
    robot_xml.write_text(robot_xml.read_text().replace('armature="0.01"', 'armature="0.02"', 1))
    assert load_spec_file(spec).model_hash != before


def test_a_bundled_model_keeps_its_bytes_and_hash():
    """A model that refers to no other file is taken byte for byte: earlier exports stay valid."""
    robot = load_robot("go2")
    assert robot.xml == (ASSETS / "go2.xml").read_text()


def test_a_missing_included_file_is_named_by_its_path(tmp_path: Path, capsys):
    spec = published(tmp_path)
    (tmp_path / "robot.xml").unlink()
    assert main(["robot", str(spec)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and str((tmp_path / "robot.xml").resolve()) in err and "includes 'robot.xml'" in err


def test_a_missing_visual_mesh_does_not_matter(tmp_path: Path):
    """The visual mesh is dropped unread (the base states its inertia)."""
    spec = published(tmp_path)
    (tmp_path / "assets" / "shell.obj").unlink()
    assert load_spec_file(spec).mj_model().nmesh == 0


def test_a_collision_mesh_is_refused_by_name(tmp_path: Path):
    spec = published(tmp_path, visual='<geom type="mesh" mesh="shell" mass="0"/>')
    with pytest.raises(RobotSpecError, match="collides with the mesh file 'shell.obj'.*primitive collision shapes"):
        load_spec_file(spec)


def test_a_published_model_exports_and_the_player_loads_it(tmp_path: Path, monkeypatch):
    spec = published(tmp_path / "robot")
    run = tmp_path / "run"
    shac = SHACConfig(num_envs=4, horizon=4, critic_minibatches=2, actor_hidden=(16, 16))
    task = VelocityTaskConfig(robot=str(spec), velocity_error_window=0.0)
    write_untrained_run(run, shac, seed=0, task=task)
    out = export_run(run)
    contract = json.loads((out / "policy.json").read_text())
    assert contract["robot"]["model_hash"] == load_spec_file(spec).model_hash
    assert sorted(p.name for p in out.iterdir()) == sorted(EXPORT_FILES)
    (tmp_path / "elsewhere").mkdir()
    monkeypatch.chdir(tmp_path / "elsewhere")
    Player(out)  # loads the one exported file, hash checked


def test_a_nested_include_resolves_beside_its_including_file(tmp_path: Path):
    """As MuJoCo resolves it: from the top file's folder, else the including file's."""
    spec = published(tmp_path)
    (tmp_path / "parts").mkdir()
    (tmp_path / "robot.xml").rename(tmp_path / "parts" / "body.xml")
    (tmp_path / "parts" / "robot.xml").write_text('<mujoco><include file="body.xml"/></mujoco>')
    scene = tmp_path / "scene.xml"
    scene.write_text(scene.read_text().replace('file="robot.xml"', 'file="parts/robot.xml"'))
    assert load_spec_file(spec).mj_model().nbody == load_robot("go2").mj_model().nbody


def test_joint_damping_and_friction_loss_fail_the_robot_check_by_name(tmp_path: Path, capsys):
    """MuJoCo applies them, our simulator would not: never dropped in silence."""
    spec = published(tmp_path)
    robot_xml = tmp_path / "robot.xml"
    robot_xml.write_text(robot_xml.read_text().replace('armature="0.01"', 'armature="0.01" damping="0.5"', 1))
    calf = '<joint name="FL_calf_joint"'
    assert calf in robot_xml.read_text()
    robot_xml.write_text(robot_xml.read_text().replace(calf, f'{calf} frictionloss="0.2"', 1))
    problems = ignored_properties(load_spec_file(spec))
    assert len(problems) == 2
    assert problems[0].startswith("joint damping=0.5 N·m·s/rad on FL_hip_joint, FL_thigh_joint, FL_calf_joint")
    assert problems[1].startswith("joint frictionloss=0.2 N·m on FL_calf_joint is not modelled")
    assert main(["robot", str(spec)]) == 1
    out = capsys.readouterr().out
    assert "problem: joint damping=0.5" in out and "problem: joint frictionloss=0.2" in out
    assert "lightly damped" not in out
    assert ignored_properties(load_robot("go2")) == []
