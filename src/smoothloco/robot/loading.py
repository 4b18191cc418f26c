"""``load_robot(NAME_OR_PATH)``: a bundled robot by name, or a user's from a TOML spec file.

The spec file names its MJCF (relative to the spec file; it may include others and name visual
meshes, see ``read_mjcf``) and states what the model does not::

    mjcf = "my_robot.xml"
    joints = ["FL_hip", "FL_thigh", "FL_calf", ...]   # 3 per leg, base to foot; legs in the order of feet
    feet = ["FL_foot", "FR_foot", "RL_foot", "RR_foot"]  # sphere geoms
    knees = ["FL_calf", ...]                           # bodies: one lower than task.min_knee_height ends an episode
    default_pose = [0.1, 0.8, -1.5, ...]               # rad, in the order of joints (or keyframe = "home")
    kp = 20.0                                          # N·m/rad, one number or one per joint
    kd = 0.5                                           # N·m·s/rad
    torque_limit = [23.7, 23.7, 45.4, ...]             # N·m
    velocity_limit = 30.0                              # optional, rad/s: the motors' torque-speed envelope
    saturation_torque = 23.7                           # optional, N·m, with velocity_limit (default torque_limit)

    [task]                                             # task settings that scale with the robot
    base_height_target = 0.30
    [task.gait]
    swing_height = 0.06

What the spec leaves out is taken from the model where it says it (``robot.from_model``): the
standing pose from ``keyframe``, the torque limits from motor actuators' ranges, the PD gains
from position actuators. ``docs/own-robot.md`` walks through writing one; ``src/smoothloco/robot/assets/go2.toml`` is one.
"""

from __future__ import annotations

import tomllib
from functools import lru_cache
from pathlib import Path
from xml.etree import ElementTree

import mujoco
import numpy as np

from smoothloco.robot.anymal import anymal_c
from smoothloco.robot.from_model import file_values
from smoothloco.robot.spec import RobotSpec, RobotSpecError, make_spec
from smoothloco.validation import read_text, shown

ASSETS = Path(__file__).parent / "assets"
BUNDLED_ROBOTS = {"anymal_c": anymal_c, "go2": lambda: load_spec_file(ASSETS / "go2.toml")}
DEFAULT_ROBOT = "anymal_c"
NAMES, NUMBERS, NUMBER_OR_NUMBERS = "names", "numbers", "number or numbers"
# What each key of a spec file takes: a list of names, a list of numbers, one number or a list
# of numbers (one per joint), a text or a table. A bool is not a number here.
SPEC_KEYS = {
    "mjcf": str,
    "joints": NAMES,
    "feet": NAMES,
    "knees": NAMES,
    "default_pose": NUMBERS,
    "keyframe": str,
    "kp": NUMBER_OR_NUMBERS,
    "kd": NUMBER_OR_NUMBERS,
    "torque_limit": NUMBER_OR_NUMBERS,
    "saturation_torque": NUMBER_OR_NUMBERS,
    "velocity_limit": NUMBER_OR_NUMBERS,
    "task": dict,
}
# Optional: the task's defaults, no torque-speed envelope, or taken from the model (``from_model``)
OPTIONAL_KEYS = {"task", "saturation_torque", "velocity_limit", "keyframe", "default_pose", "kp", "kd", "torque_limit"}


def is_spec_path(name_or_path: str) -> bool:
    """Whether ``name_or_path`` names a spec file rather than a bundled robot."""
    return name_or_path not in BUNDLED_ROBOTS


def check_robot_name(name_or_path: str) -> None:
    """Cheap check of a robot setting before anything loads: a bundled name or an existing
    ``.toml`` file; ``RobotSpecError`` otherwise."""
    if not is_spec_path(name_or_path):
        return
    path = Path(name_or_path)
    if path.suffix != ".toml" or not path.is_file():
        raise RobotSpecError(
            f"robot {name_or_path!r} is neither a bundled robot ({', '.join(BUNDLED_ROBOTS)}) nor an existing .toml "
            "spec file (docs/own-robot.md)"
        )


@lru_cache(maxsize=8)
def load_robot(name_or_path: str = DEFAULT_ROBOT) -> RobotSpec:
    """The bundled robot ``name_or_path``, or the one its TOML spec file describes."""
    check_robot_name(name_or_path)
    if not is_spec_path(name_or_path):
        return BUNDLED_ROBOTS[name_or_path]()
    return load_spec_file(Path(name_or_path))


def load_spec_file(path: Path) -> RobotSpec:
    """The robot described by the TOML file at ``path``; errors name the file."""
    try:
        table = tomllib.loads(read_text(path, "robot spec"))
    except tomllib.TOMLDecodeError as exc:
        raise RobotSpecError(f"{path}: cannot read the robot spec: {exc}") from None
    except ValueError as exc:  # unreadable or not UTF-8: the message names the file
        raise RobotSpecError(str(exc)) from None
    try:
        _check_keys(table)
        given = {key: table.get(key) for key in ("default_pose", "kp", "kd", "torque_limit")}
        xml, values, from_model = file_values(
            read_mjcf(path.parent / table["mjcf"]), table["joints"], given, table.get("keyframe")
        )
        return make_spec(
            xml,
            joint_names=table["joints"],
            foot_geoms=table["feet"],
            knee_bodies=table["knees"],
            saturation_torque=table.get("saturation_torque"),
            velocity_limit=table.get("velocity_limit"),
            name=path.stem,
            task_defaults=table.get("task", {}),
            from_model=from_model,
            **values,
        )
    except RobotSpecError as exc:
        raise RobotSpecError(f"{path}: {exc}") from exc


def _check_keys(table: dict) -> None:
    unknown = sorted(set(table) - set(SPEC_KEYS))
    if unknown:
        raise RobotSpecError(f"unknown keys {shown(unknown)}; accepted: {', '.join(SPEC_KEYS)}")
    missing = [k for k in SPEC_KEYS if k not in table and k not in OPTIONAL_KEYS]
    if missing:
        raise RobotSpecError(f"missing keys {missing}")
    for key, kind in SPEC_KEYS.items():
        if key in table and not _fits(table[key], kind):
            raise RobotSpecError(f"{key}: expected {_kind_name(kind)}, got {shown(table[key])}")


def _is_number(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _fits(value: object, kind: object) -> bool:
    if kind == NAMES:
        return isinstance(value, list) and all(isinstance(v, str) for v in value)
    if kind == NUMBERS:
        return isinstance(value, list) and all(_is_number(v) for v in value)
    if kind == NUMBER_OR_NUMBERS:
        return _is_number(value) or _fits(value, NUMBERS)
    return isinstance(value, kind)  # type: ignore[arg-type]


def _kind_name(kind: object) -> str:
    names = {
        str: "a text",
        dict: "a table",
        NAMES: "a list of names (texts)",
        NUMBERS: "a list of numbers",
        NUMBER_OR_NUMBERS: "a number or a list of numbers (one per joint)",
    }
    return names[kind]  # type: ignore[index]


def read_mjcf(mjcf: Path) -> str:
    """The model at ``mjcf`` as one self-contained MJCF text, whatever the working directory.

    A file that refers to no other file is taken byte for byte (its hash is that of the file).
    One that includes others or names meshes and textures (the way model collections publish a
    robot: ``scene.xml`` including ``robot.xml``, meshes in a ``meshdir``) is read by MuJoCo from
    its own folder and written out again as one file: every mesh inline (its vertices and faces
    as MuJoCo read them, ``_inline_meshes``), textures read from image files left out (their
    materials keep their colours). So the model hash of that text covers the top file, every
    included one and every mesh, MuJoCo builds the same model from it (masses and inertias a
    mesh gave included), videos show the meshes, and the export is a single file the player
    loads anywhere (copying the included files and meshes instead would make the player resolve
    and hash a folder).
    """
    try:
        xml = read_text(mjcf, "MJCF model")
    except ValueError as exc:
        raise RobotSpecError(f"mjcf: {exc}") from None
    try:
        root = ElementTree.fromstring(xml)
    except ElementTree.ParseError:
        return xml  # not XML: MuJoCo's own message says where
    if not _referenced_files(root):
        return xml
    _check_includes(root, mjcf, mjcf.parent)
    try:
        spec = mujoco.MjSpec.from_file(str(mjcf.resolve()))
    except ValueError as exc:
        raise RobotSpecError(f"mjcf: MuJoCo could not load {mjcf}: {' '.join(str(exc).split())}") from None
    _check_mesh_files(spec, mjcf)
    _drop_image_textures(spec)
    try:
        model = spec.compile()
        _inline_meshes(spec, model)
        _explicit_inertias(spec, model)
        flat = spec.to_xml()
    except ValueError as exc:
        raise RobotSpecError(f"mjcf: MuJoCo could not load {mjcf}: {' '.join(str(exc).split())}") from None
    kept = _referenced_files(ElementTree.fromstring(flat))
    if kept:  # what is neither a mesh nor a texture (a height field, a skin) is not carried
        element, file = kept[0]
        raise RobotSpecError(
            f"mjcf: {mjcf.name} names the {element} file {shown(file)}; a robot model may read meshes and textures "
            "from files, nothing else (a terrain belongs to --task.terrain, not to the robot's model)"
        )
    return flat


def _check_mesh_files(spec: mujoco.MjSpec, mjcf: Path) -> None:
    """A missing mesh named by the path it was looked for at: its ``meshdir`` under the model's
    folder (MuJoCo's own message names the model's folder instead)."""
    folder = Path(spec.modelfiledir or mjcf.resolve().parent)
    for mesh in spec.meshes:
        path = Path(mesh.file)  # MuJoCo makes a file it did not find absolute, under the model's folder
        name = path.relative_to(folder) if path.is_relative_to(folder) else path
        candidates = [folder / spec.meshdir / name, folder / name]
        if mesh.file and not any(candidate.is_file() for candidate in candidates):
            raise RobotSpecError(
                f"mjcf: {mjcf.name}: mesh {shown(mesh.name or str(name))} reads {shown(str(name))}, which is not a "
                f"file: {candidates[0].resolve()}"
            )


def _inline_meshes(spec: mujoco.MjSpec, model: mujoco.MjModel) -> None:
    """Every mesh of ``spec`` given by its vertices and faces instead of its file. ``model`` is
    ``spec`` compiled: MuJoCo stores a mesh moved to its centre of mass and turned to its
    principal axes (``mesh_pos``, ``mesh_quat``), scaled; moved back, the vertices are those of
    the file, so that compiling them again gives the same mesh, geom frames and inertias."""
    for index, mesh in enumerate(spec.meshes):
        first, count = model.mesh_vertadr[index], model.mesh_vertnum[index]
        vertices = np.asarray(model.mesh_vert[first : first + count], float)
        rotation = np.zeros(9)
        mujoco.mju_quat2Mat(rotation, model.mesh_quat[index])
        vertices = vertices @ rotation.reshape(3, 3).T + model.mesh_pos[index]
        first_face, faces = model.mesh_faceadr[index], model.mesh_facenum[index]
        mesh.uservert = vertices.ravel().tolist()
        mesh.userface = model.mesh_face[first_face : first_face + faces].ravel().tolist()
        mesh.usernormal, mesh.usertexcoord, mesh.userfacenormal, mesh.userfacetexcoord = [], [], [], []
        mesh.file, mesh.content_type, mesh.scale = "", "", [1.0, 1.0, 1.0]


def _explicit_inertias(spec: mujoco.MjSpec, model: mujoco.MjModel) -> None:
    """Every body's mass, centre of mass and inertia stated as MuJoCo computed them from the
    files. MuJoCo's ``to_xml`` leaves a default class's ``mass="0"`` and ``density="0"`` out, so a
    body whose inertia came from its geoms would otherwise weigh its massless collision shapes."""
    for body in spec.bodies[1:]:
        body.mass, body.ipos = model.body_mass[body.id], model.body_ipos[body.id]
        body.iquat, body.inertia = model.body_iquat[body.id], model.body_inertia[body.id]
        body.explicitinertial = True


def _drop_image_textures(spec: mujoco.MjSpec) -> None:
    """Textures read from image files, and their use by materials, removed unread; built-in ones
    (a checkered floor, a gradient sky) stay."""
    dropped = {texture.name for texture in spec.textures if texture.file or any(texture.cubefiles)}
    for material in spec.materials:
        material.textures = ["" if name in dropped else name for name in material.textures]
    for texture in [t for t in spec.textures if t.name in dropped]:
        spec.delete(texture)


def _referenced_files(root: ElementTree.Element) -> list[tuple[str, str]]:
    """(element, file) for each element of the MJCF that names another file."""
    return [(element.tag, element.get("file", "")) for element in root.iter() if element.get("file") is not None]


def _check_includes(root: ElementTree.Element, mjcf: Path, folder: Path, depth: int = 0) -> None:
    """A missing included file named by the path it was looked for at (MuJoCo's own message
    names the include only). MuJoCo looks in the top file's folder, then the including file's."""
    for element in root.iter("include"):
        name = element.get("file", "")
        candidates = [folder / name, mjcf.parent / name]
        included = next((path for path in candidates if path.is_file()), None)
        if included is None:
            raise RobotSpecError(
                f"mjcf: {mjcf.name} includes {shown(name)}, which is not a file: {candidates[0].resolve()}"
            )
        try:
            nested = ElementTree.fromstring(read_text(included, "MJCF model"))
        except (ValueError, ElementTree.ParseError):
            continue  # MuJoCo's own message says what is wrong with it
        if depth < 8:  # MuJoCo refuses deeper nesting or a cycle itself
            _check_includes(nested, included, folder, depth + 1)
