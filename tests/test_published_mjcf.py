"""A robot as model collections publish it: ``scene.xml`` including ``robot.xml``, visual meshes
in a ``meshdir``. It loads from any working directory, its hash covers every included file,
and its export is one file the standalone player loads."""

import json
import re
from pathlib import Path

import mujoco
import numpy as np
import pytest
from fakes import published, write_untrained_run

from smoothloco.commands import main
from smoothloco.deploy.export import EXPORT_FILES, export_run
from smoothloco.robot import RobotSpecError, load_robot, load_spec_file
from smoothloco.robot.loading import ASSETS
from smoothloco.robot_side.testbench import Player
from smoothloco.sim.check import stand_in_mujoco, unmodelled_properties
from smoothloco.tasks import VelocityTaskConfig
from smoothloco.train.shac import SHACConfig

pytestmark = pytest.mark.filterwarnings("ignore:os.fork:RuntimeWarning")


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
    for field in ("geom_type", "geom_size", "geom_friction", "geom_contype", "geom_conaffinity", "geom_bodyid"):
        np.testing.assert_allclose(getattr(model, field), getattr(reference, field), rtol=1e-6, atol=1e-9)
    # what MuJoCo writes with 6 significant digits: the frames and the inline mesh
    for field in ("geom_pos", "geom_quat", "mesh_vert", "mesh_face"):
        np.testing.assert_allclose(getattr(model, field), getattr(reference, field), rtol=1e-5, atol=1e-6)
    for field in ("timestep", "impratio", "cone", "gravity"):
        np.testing.assert_allclose(getattr(model.opt, field), getattr(reference.opt, field))
    np.testing.assert_allclose(model.actuator_ctrlrange, reference.actuator_ctrlrange)
    # one self-contained file: the visual mesh inline, nothing refers to another file
    assert model.nmesh == 1 and "file=" not in robot.xml and "include" not in robot.xml
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


def test_a_missing_mesh_is_named_by_its_path(tmp_path: Path):
    spec = published(tmp_path)
    (tmp_path / "assets" / "shell.obj").unlink()
    with pytest.raises(RobotSpecError, match="mesh 'shell'.*is not a file: .*assets/shell.obj"):
        load_spec_file(spec)


def test_a_mesh_that_gives_mass_keeps_it_and_a_mesh_that_collides_collides_only_in_mujoco(tmp_path: Path, capsys):
    """MuJoCo builds the same model from the one text as from the files: the mass and inertia a
    mesh's volume gives, and its collisions, which training does not have (the check says so)."""
    spec = published(tmp_path, visual='<geom name="shell" type="mesh" mesh="shell" density="1000"/>')
    robot_xml = tmp_path / "robot.xml"  # the base's mass and inertia from its geoms: the mesh alone
    robot_xml.write_text(re.sub(r'<inertial pos="[^"]*" mass="6.921"[^>]*/>', "", robot_xml.read_text(), count=1))
    reference = mujoco.MjModel.from_xml_path(str(spec.parent / "scene.xml"))
    model = load_spec_file(spec).mj_model()
    for field in ("body_mass", "body_inertia", "body_ipos", "body_iquat", "geom_pos", "geom_quat"):
        np.testing.assert_allclose(getattr(model, field), getattr(reference, field), rtol=1e-5, atol=1e-7)
    assert model.body_mass[1] == pytest.approx(1000 * 0.1**3 / 6, rel=1e-4)  # the tetrahedron's volume
    assert main(["robot", str(spec)]) == 0
    assert "| base: 3 geoms (mesh, box, box) | collide with the ground | never collide |" in capsys.readouterr().out


def test_textures_from_image_files_are_left_out_unread_and_built_in_ones_kept(tmp_path: Path):
    spec = published(tmp_path)
    robot_xml = tmp_path / "robot.xml"
    texture = '<texture name="skin" type="2d" file="skin.png"/>'
    image = f'{texture}\n    <material name="skin" texture="skin" rgba="1 0 0 1"/>'
    robot_xml.write_text(robot_xml.read_text().replace("<asset>", f"<asset>\n    {image}", 1))
    model = load_spec_file(spec).mj_model()  # no skin.png anywhere
    assert model.ntex == 1 and model.tex("grid") is not None  # the floor's checker stays
    np.testing.assert_allclose(model.mat("skin").rgba, [1, 0, 0, 1])


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
    assert mujoco.MjModel.from_xml_path(str(out / "robot.xml")).nmesh == 1  # the visual mesh travels with it


def test_a_nested_include_resolves_beside_its_including_file(tmp_path: Path):
    """As MuJoCo resolves it: from the top file's folder, else the including file's."""
    spec = published(tmp_path)
    (tmp_path / "parts").mkdir()
    (tmp_path / "robot.xml").rename(tmp_path / "parts" / "body.xml")
    (tmp_path / "parts" / "robot.xml").write_text('<mujoco><include file="body.xml"/></mujoco>')
    scene = tmp_path / "scene.xml"
    scene.write_text(scene.read_text().replace('file="robot.xml"', 'file="parts/robot.xml"'))
    assert load_spec_file(spec).mj_model().nbody == load_robot("go2").mj_model().nbody


def test_the_robot_check_models_joint_damping_and_friction_loss_and_tables_what_training_ignores(
    tmp_path: Path, capsys
):
    """MuJoCo Menagerie's Go2 joint defaults pass; the geoms that collide only in MuJoCo are named."""
    spec = published(tmp_path, joint_defaults='damping="0.1" frictionloss="0.2"')
    assert main(["robot", str(spec)]) == 0
    out = capsys.readouterr().out
    assert "| base: 2 geoms (box, box) | collide with the ground | never collide |" in out
    assert "| FL_calf: 1 geom (capsule) | collide with the ground | never collide (the body's origin lower" in out
    assert "| joint ranges of 12 joints | enforced as limits | not enforced" in out
    assert "problem" not in out and "foot" not in out.split("what training ignores")[1]


def test_what_the_simulator_cannot_model_fails_the_robot_check_by_name(tmp_path: Path):
    spec = published(tmp_path)
    robot_xml = tmp_path / "robot.xml"
    coupled = '<equality><joint joint1="FL_hip_joint" joint2="FR_hip_joint"/></equality>\n  <actuator>'
    robot_xml.write_text(robot_xml.read_text().replace("<actuator>", coupled, 1))
    problems = [row for row in unmodelled_properties(load_spec_file(spec)) if row.problem]
    assert [row.line() for row in problems] == [
        "1 equality constraints: hold in MuJoCo; in training, not modelled: remove it from the MJCF, or the policy "
        "meets another robot in MuJoCo and on hardware"
    ]
    assert not [row for row in unmodelled_properties(load_robot("go2")) if row.problem]


GO2 = load_robot("go2")
SPEC_HEAD = """mjcf = "scene.xml"
joints = {joints}
feet = {feet}
knees = {knees}
""".format(joints=list(GO2.joint_names), feet=list(GO2.foot_geoms), knees=list(GO2.knee_bodies)).replace("'", '"')
MOTOR = re.compile(r'<motor name="(\w+)" joint="\w+" ctrlrange="-([\d.]+) [\d.]+"/>')


def _as_published(folder: Path, spec_lines: str, actuator: str | None = None, pose=GO2.default_pose) -> Path:
    """The published Go2 with a ``home`` keyframe at ``pose``, its motors rewritten by
    ``actuator`` (a format of name and torque limit), and a spec of the names plus ``spec_lines``."""
    spec = published(folder)
    robot_xml = spec.parent / "robot.xml"
    text = robot_xml.read_text()
    if actuator is not None:
        text = MOTOR.sub(lambda m: actuator.format(name=m[1], limit=m[2]), text)
    qpos = " ".join(f"{x:g}" for x in [0, 0, 0.3, 1, 0, 0, 0, *pose])
    text = text.replace("</mujoco>", f'  <keyframe><key name="home" qpos="{qpos}"/></keyframe>\n</mujoco>')
    robot_xml.write_text(text)
    spec.write_text(SPEC_HEAD + spec_lines)
    return spec


POSITION = '<position name="{name}" joint="{name}" kp="20" kv="0.5" forcerange="-{limit} {limit}"/>'


def test_the_spec_takes_pose_gains_and_torque_limits_from_the_model(tmp_path: Path):
    """A keyframe and position actuators state everything the bundled Go2's spec states; the
    actuators become motors, so MuJoCo stands the robot as it stands the bundled one."""
    robot = load_spec_file(_as_published(tmp_path, 'keyframe = "home"\n', POSITION))
    for key in ("default_pose", "kp", "kd", "torque_limit"):
        np.testing.assert_allclose(getattr(robot, key), getattr(GO2, key), err_msg=key)
    assert robot.from_model == (
        "default_pose: keyframe 'home'",
        "kp: the position actuators' kp × gear²",
        "kd: the position actuators' kv × gear²",
        "torque_limit: the actuators' ranges × gear",
        "position actuators on 12 joints: made motors, the PD drives the joints",
    )
    model = robot.mj_model()
    assert np.all(model.actuator_biastype == mujoco.mjtBias.mjBIAS_NONE)
    np.testing.assert_allclose(model.actuator_ctrlrange[:, 1], GO2.torque_limit)
    ours, bundled = stand_in_mujoco(robot), stand_in_mujoco(GO2)
    assert abs(ours.height - bundled.height) < 1e-6 and ours.upright > 0.99


def test_motor_ranges_times_gear_are_torque_limits_and_the_spec_overrides_the_model(tmp_path: Path):
    geared = '<motor name="{name}" joint="{name}" gear="2" ctrlrange="-{limit} {limit}"/>'
    pose = GO2.default_pose + 0.05
    spec = _as_published(tmp_path, f'keyframe = "home"\ndefault_pose = {GO2.default_pose.tolist()}\nkp = 20.0\nkd = 0.5\n',
                         geared, pose=pose)  # fmt: skip
    robot = load_spec_file(spec)
    np.testing.assert_allclose(robot.torque_limit, 2 * GO2.torque_limit)
    np.testing.assert_allclose(robot.default_pose, GO2.default_pose)  # the spec's, not the keyframe's
    assert robot.from_model == ("torque_limit: the actuators' ranges × gear",)
    spec.write_text(spec.read_text() + "torque_limit = 30.0\n")
    assert np.all(load_spec_file(spec).torque_limit == 30.0) and load_spec_file(spec).from_model == ()


@pytest.mark.parametrize(
    ("spec_lines", "actuator", "refusal"),
    [
        ('keyframe = "home"\nkp = 20.0\nkd = 0.6\n', POSITION,
         r"kd: the spec's differs from the model's position actuators' \(spec vs model: FL_hip_joint 0.6 vs 0.5;"),
        ('keyframe = "home"\n', '<velocity name="{name}" joint="{name}" kv="1"/>',
         "actuator 'FL_hip_joint' on FL_hip_joint is neither a motor nor a position actuator"),
        ('keyframe = "home"\n', None, r"kp: give it in the spec; the model has no position actuator on \[.FL_hip_joint."),
        ('keyframe = "stand"\n', POSITION, r"keyframe: the model has no keyframe 'stand'; its keyframes: \['home'\]"),
        ("kp = 20.0\nkd = 0.5\n", None, "default_pose: give it .* or name a keyframe"),
    ],
)  # fmt: skip
def test_actuators_that_would_fight_the_pd_and_missing_values_are_refused(tmp_path, spec_lines, actuator, refusal):
    with pytest.raises(RobotSpecError, match=refusal):
        load_spec_file(_as_published(tmp_path, spec_lines, actuator))
