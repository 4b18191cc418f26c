"""Writes the low-poly visual meshes of this example (``assets/*.obj``): a rounded body shell,
a motor can, a thigh and a shank, each in its body's frame. They only show the robot in videos;
the model's collision shapes are primitives and its inertias are stated. Run once:
``python examples/mini_cheetah/make_meshes.py``."""

from pathlib import Path

import numpy as np


def superellipsoid(half: tuple[float, float, float], power: float = 6.0, rings: int = 12, segments: int = 24):
    """A box with rounded edges: |x/a|^p + |y/b|^p + |z/c|^p = 1."""
    theta = np.linspace(-np.pi / 2, np.pi / 2, rings + 1)
    phi = np.linspace(-np.pi, np.pi, segments, endpoint=False)
    t, p = np.meshgrid(theta, phi, indexing="ij")
    e = 2.0 / power

    def signed_power(x):
        return np.sign(x) * np.abs(x) ** e

    points = np.stack([half[0] * signed_power(np.cos(t)) * signed_power(np.cos(p)),
                       half[1] * signed_power(np.cos(t)) * signed_power(np.sin(p)),
                       half[2] * signed_power(np.sin(t))], axis=-1).reshape(-1, 3)  # fmt: skip
    faces = []
    for i in range(rings):
        for j in range(segments):
            a, b = i * segments + j, i * segments + (j + 1) % segments
            faces += [(a, b, b + segments), (a, b + segments, a + segments)]
    return points, np.array(faces)


def tapered_link(length: float, top: tuple[float, float], bottom: tuple[float, float]):
    """A link hanging from the origin down to -length, its cross-section narrowing from top to bottom."""
    (tx, ty), (bx, by) = top, bottom
    points = np.array([[sx * w, sy * d, z] for z, w, d in ((0.0, tx, ty), (-length, bx, by))
                       for sx, sy in ((-1, -1), (1, -1), (1, 1), (-1, 1))])  # fmt: skip
    faces = [(0, 2, 1), (0, 3, 2), (4, 5, 6), (4, 6, 7)]
    faces += [f for k in range(4) for f in ((k, (k + 1) % 4, 4 + (k + 1) % 4), (k, 4 + (k + 1) % 4, 4 + k))]
    return points, np.array(faces)


def write_obj(path: Path, points: np.ndarray, faces: np.ndarray) -> None:
    lines = [f"v {x:.5f} {y:.5f} {z:.5f}" for x, y, z in points] + [f"f {a + 1} {b + 1} {c + 1}" for a, b, c in faces]
    path.write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    assets = Path(__file__).parent / "assets"
    assets.mkdir(exist_ok=True)
    write_obj(assets / "body.obj", *superellipsoid((0.2, 0.07, 0.05)))
    write_obj(assets / "motor.obj", *superellipsoid((0.048, 0.02, 0.048), power=2.5))  # a can along y
    write_obj(assets / "thigh.obj", *tapered_link(0.209, (0.02, 0.018), (0.014, 0.012)))
    write_obj(assets / "shank.obj", *tapered_link(0.175, (0.012, 0.01), (0.008, 0.008)))
