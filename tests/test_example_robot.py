"""The Mini-Cheetah-class example (``examples/mini_cheetah``): a quadruped written the way a user
writes one, from public numbers, published-style (scene.xml including robot.xml, meshes in
assets/), that the task's recipe was not tuned on."""

import runpy
from pathlib import Path

import mujoco
import numpy as np
import pytest

from smoothloco.robot import load_spec_file
from smoothloco.sim.check import stand_in_mujoco

EXAMPLE = Path(__file__).parents[1] / "examples" / "mini_cheetah"


def test_the_example_loads_from_another_folder_with_what_its_model_states(tmp_path: Path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    robot = load_spec_file(EXAMPLE / "mini_cheetah.toml")
    assert robot.mass == pytest.approx(8.91, abs=0.01)
    np.testing.assert_allclose(robot.torque_limit, [18.0, 18.0, 27.99] * 4)  # 3 N·m motors through their gears
    np.testing.assert_allclose(robot.default_pose, [0.0, 0.8, -1.6] * 4)  # the home keyframe
    model = robot.mj_model()
    assert model.nmesh == 4 and "file=" not in robot.xml  # the visual meshes travel inline
    np.testing.assert_allclose(model.dof_armature[6:9], [0.002268, 0.002268, 0.005484])
    np.testing.assert_allclose(model.dof_frictionloss[6:], 0.2)
    standing = stand_in_mujoco(robot)
    assert 0.25 < standing.height < robot.base_height and standing.upright > 0.99


def test_the_meshes_are_what_make_meshes_writes(tmp_path: Path, monkeypatch):
    script = EXAMPLE / "make_meshes.py"
    (tmp_path / "example").mkdir()
    copy = tmp_path / "example" / "make_meshes.py"
    copy.write_text(script.read_text())
    runpy.run_path(str(copy), run_name="__main__")
    for mesh in sorted((EXAMPLE / "assets").glob("*.obj")):
        assert (tmp_path / "example" / "assets" / mesh.name).read_text() == mesh.read_text(), mesh.name
    assert mujoco.MjModel.from_xml_path(str(EXAMPLE / "scene.xml")).nmesh == 4
