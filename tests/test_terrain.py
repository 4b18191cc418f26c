"""Terrain geometry: our signed distances and normals against MuJoCo's (C) on the same geoms, and
the MuJoCo builders' ground against ours."""

import jax
import jax.numpy as jnp
import mujoco
import numpy as np
import pytest

from smoothloco.measure.mujoco_terrain import terrain_model
from smoothloco.sim import terrain
from smoothloco.sim.terrain import (
    Boxes,
    Ramp,
    RollingHills,
    RoughGround,
    Slope,
    box_distance,
    contact_frame,
    parse_terrain,
    stairs,
)

PROBE = "probe"
WORLD = f"""<mujoco><worldbody><geom name="floor" type="plane" size="0 0 1"/>
  <body name="{PROBE}" mocap="true"><geom name="{PROBE}" type="sphere" size="1e-4" contype="0" conaffinity="0"/></body>
</worldbody></mujoco>"""


def _mujoco_distances(model: mujoco.MjModel, points: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """MuJoCo's signed distance from each point to the nearest terrain geom, and the unit vector
    from that geom's nearest point to the point."""
    data = mujoco.MjData(model)
    probe = model.geom(PROBE).id
    ground = [g for g in range(model.ngeom) if g != probe]
    distances, normals = [], []
    for point in points:
        data.mocap_pos[0] = point
        mujoco.mj_kinematics(model, data)
        best, best_normal = np.inf, None
        for geom in ground:
            fromto = np.zeros(6)
            d = mujoco.mj_geomDistance(model, data, probe, geom, 1.0, fromto) + 1e-4  # to the probe's centre
            if d < best:
                best, best_normal = d, (fromto[:3] - fromto[3:]) / np.linalg.norm(fromto[:3] - fromto[3:])
                best_normal *= np.sign(d)
        distances.append(best)
        normals.append(best_normal)
    return np.array(distances), np.array(normals)


def _ours(ground, points):
    return [np.asarray(a, np.float64) for a in jax.jit(jax.vmap(ground.distance))(jnp.asarray(points, jnp.float32))]


def test_stairs_distance_and_normal_match_mujoco_boxes_at_faces_edges_and_corners():
    """Points around a staircase's first riser, its nose edge, the concave corner below it, the
    staircase's side corner and just inside the treads: the same distance and normal as MuJoCo's
    sphere-box and sphere-plane distances of the builder's model."""
    ground = stairs(rise=0.15, run=0.3, steps=3, landing=0.6, start=0.5, width=2.0, blend=0.0)
    rng = np.random.default_rng(0)
    anchors = np.array([
        [0.5, 0.0, 0.15],  # nose of the first step
        [0.5, 0.0, 0.075],  # middle of the first riser
        [0.5, 0.0, 0.0],  # concave corner at its foot
        [0.8, 1.0, 0.3],  # side corner of the second step's nose
        [0.65, 0.3, 0.15],  # first tread
        [1.85, -0.2, 0.30],  # nose of a step down
    ])  # fmt: skip
    points = (anchors[:, None, :] + rng.uniform(-0.04, 0.04, (len(anchors), 30, 3))).reshape(-1, 3)
    points = points[np.abs(_ours(ground, points)[0]) > 2e-3]  # away from touching, where a normal is ill-defined
    theirs, their_normals = _mujoco_distances(terrain_model(WORLD, ground), points)
    distance, normal = _ours(ground, points)
    outside = distance > 0
    angle = np.degrees(np.arccos(np.clip(np.sum(normal * their_normals, axis=1), -1, 1)))[outside]
    print(
        f"{len(points)} points: distance within {np.abs(distance - theirs).max() * 1e6:.2f} µm, normal within {angle.max():.4f} deg"
    )
    np.testing.assert_allclose(distance, theirs, atol=2e-5)
    np.testing.assert_allclose(normal[outside], their_normals[outside], atol=2e-3)
    assert outside.sum() > 50 and (~outside).sum() > 50
    # inside, MuJoCo's nearest-point segment can be degenerate; our normal is the nearest face's
    np.testing.assert_allclose(np.linalg.norm(normal, axis=1), 1.0, atol=1e-6)


@pytest.mark.parametrize("slope", [Slope(30.0), Slope(-12.0, heading=60.0)])
def test_slope_distance_and_normal_match_a_tilted_mujoco_plane(slope):
    points = np.random.default_rng(1).uniform([-2, -2, -0.2], [2, 2, 0.6], (50, 3))
    points[:, 2] += np.asarray(slope(jnp.asarray(points[:, :2], jnp.float32)))
    theirs, their_normals = _mujoco_distances(terrain_model(WORLD, slope), points)
    distance, normal = _ours(slope, points)
    np.testing.assert_allclose(distance, theirs, atol=2e-5)
    np.testing.assert_allclose(normal, np.where((theirs > 0)[:, None], their_normals, normal), atol=1e-4)
    gx, gy = slope.gradient
    np.testing.assert_allclose(
        normal, np.broadcast_to(np.array([-gx, -gy, 1.0]) / np.hypot(1, np.hypot(gx, gy)), normal.shape), atol=1e-6
    )


@pytest.mark.parametrize("ground", [RollingHills(0.08), RoughGround(0.06, wavelength=0.4)])
def test_height_field_builder_is_our_ground(ground):
    """Rays cast down onto MuJoCo's height field meet our height within its linear
    interpolation's error, and with our normal."""
    cell = 0.02
    model = terrain_model(WORLD, ground, extent=2.0, cell=cell)
    data = mujoco.MjData(model)
    mujoco.mj_forward(model, data)
    xy = np.random.default_rng(2).uniform(-1.9, 1.9, (200, 2))
    heights, normals = [], []
    for x, y in xy:
        normal = np.zeros(3)
        hit = mujoco.mj_ray(
            model,
            data,
            np.array([x, y, 1.0]),
            np.array([0.0, 0.0, -1.0]),
            None,
            True,
            model.body(PROBE).id,
            None,
            normal,
        )
        heights.append(1.0 - hit)
        normals.append(normal)
    ours = np.asarray(ground(jnp.asarray(xy, jnp.float32)))
    _, our_normals = _ours(ground, np.concatenate([xy, ours[:, None]], axis=1))
    curvature = {RollingHills: (2 * np.pi / 0.9) ** 2 * 0.08 / 2, RoughGround: (2 * np.pi / 0.2) ** 2 * 0.06 / 2}[
        type(ground)
    ]
    print(f"{type(ground).__name__}: max height difference {np.abs(heights - ours).max() * 1e3:.3f} mm, "
          f"normal {np.degrees(np.arccos(np.clip(np.sum(normals * our_normals, 1), -1, 1))).max():.2f} deg")  # fmt: skip
    assert np.abs(np.array(heights) - ours).max() < curvature * cell**2 / 8 + 1e-5
    assert np.sum(np.array(normals) * our_normals, axis=1).min() > np.cos(np.radians(3.0))  # one triangle's tilt


def test_blended_corners_agree_with_the_exact_distance_away_from_them():
    """The soft minimum rounds the concave corners at the risers' feet: within 2 cm of the surface
    and 5 cm or more from those corners, distances within 0.3 mm and normals within 3°; in a
    corner the normal leans out. (Far from the surface, where two faces are about equally far,
    the blended distance is up to blend x ln 2 shorter: no contact is that far.)"""
    exact, blended = stairs(steps=2, start=0.5, blend=0.0), stairs(steps=2, start=0.5)
    rng = np.random.default_rng(3)
    points = rng.uniform([-1, -1, -0.02], [3.5, 1, 0.4], (3000, 3))
    (d0, n0), (d1, n1) = _ours(exact, points), _ours(blended, points)
    corners = np.array([[0.5, 0.0], [0.8, 0.15], [1.8, 0.15], [2.1, 0.0]])  # (x, z) of the concave corners
    far = np.min(np.hypot(points[:, None, 0] - corners[:, 0], points[:, None, 2] - corners[:, 1]), axis=1) > 0.05
    far &= np.abs(d0) < 0.02
    assert far.sum() > 150
    np.testing.assert_allclose(d1[far], d0[far], atol=3e-4)
    assert np.sum(n0[far] * n1[far], axis=1).min() > np.cos(np.radians(3.0))
    d, n = _ours(blended, np.array([[0.5 - 0.01, 0.0, 0.01]]))  # 1 cm from both the riser and the ground
    np.testing.assert_allclose(n[0], [-np.sqrt(0.5), 0.0, np.sqrt(0.5)], atol=1e-5)
    assert d[0] < 0.01


def test_box_distance_is_differentiable_with_the_normal_as_its_gradient():
    centre, half = jnp.array([1.0, 0.0, 0.1]), jnp.array([0.5, 2.0, 0.1])
    points = jnp.array([[0.45, 0.3, 0.23], [0.48, 0.0, 0.1], [1.0, 0.0, 0.25], [0.6, 1.5, 0.15], [0.3, 2.1, 0.3]])
    gradient = jax.vmap(jax.grad(lambda p: box_distance(p, centre, half)[0]))(points)
    normal = jax.vmap(lambda p: box_distance(p, centre, half)[1])(points)
    np.testing.assert_allclose(gradient, normal, atol=1e-6)
    assert np.all(np.isfinite(np.asarray(jax.vmap(jax.jacfwd(lambda p: box_distance(p, centre, half)[1]))(points))))


def test_stairs_profile_goes_up_and_down_and_terrains_compile_once():
    ground = stairs(rise=0.17, run=0.29, steps=3, landing=1.0, start=1.0)
    x = jnp.array([0.9, 1.1, 1.4, 1.7, 2.5, 2.7, 3.0, 3.3])  # risers at 1, 1.29, 1.58 and 2.58, 2.87, 3.16 m
    np.testing.assert_allclose(
        ground(jnp.stack([x, jnp.zeros_like(x)], -1)), [0, 0.17, 0.34, 0.51, 0.51, 0.34, 0.17, 0], atol=1e-6
    )
    assert hash(ground) == hash(stairs(rise=0.17, run=0.29, steps=3, landing=1.0, start=1.0))
    assert RoughGround(0.05) == RoughGround(0.05) and hash(Slope(10.0)) == hash(Slope(10.0))
    rough = RoughGround(0.05, wavelength=0.5)
    heights = rough(jnp.stack(jnp.meshgrid(jnp.linspace(-5, 5, 201), jnp.linspace(-5, 5, 201)), -1))
    assert 0.6 * 0.05 < float(jnp.ptp(heights)) <= 0.05  # bounded by construction
    assert terrain.flat == terrain.Flat() and float(
        terrain.flat.distance(jnp.array([0.3, 0.2, 0.4]))[0]
    ) == pytest.approx(0.4)


def test_contact_frame_is_orthonormal_on_a_riser_and_a_slope():
    for normal in ([1.0, 0.0, 0.0], [-1.0, 0.0, 0.0], [0.0, 1.0, 0.0], [-0.6, 0.0, 0.8], [0.0, 0.0, 1.0]):
        frame = np.asarray(contact_frame(jnp.asarray(normal)))
        np.testing.assert_allclose(frame @ frame.T, np.eye(3), atol=1e-6)
        np.testing.assert_allclose(frame[0], normal, atol=1e-7)


def test_bad_terrains_are_refused_with_what_is_accepted():
    with pytest.raises(ValueError, match="less than 90 degrees"):
        Slope(95.0)
    with pytest.raises(ValueError, match="positive half sizes"):
        Boxes(((0.0, 0.0, 0.1, 0.5, 0.5, 0.0),))
    with pytest.raises(ValueError, match="steps >= 1"):
        stairs(steps=0)
    with pytest.raises(ValueError, match="wavelength > 0"):
        RoughGround(0.05, wavelength=0.0)
    with pytest.raises(ValueError, match="exactly one floor plane"):
        terrain_model("<mujoco><worldbody/></mujoco>", Slope(5.0))


def test_a_ramp_climbs_from_level_ground_to_level_ground():
    ramp = Ramp(25.0, start=1.0, length=3.0)
    x = jnp.array([[-2.0, 0.0], [1.0, 5.0], [2.5, -1.0], [4.0, 0.0], [9.0, 3.0]])
    rise = np.tan(np.radians(25.0))
    np.testing.assert_allclose(ramp(x), [0.0, 0.0, 1.5 * rise, 3.0 * rise, 3.0 * rise], atol=1e-6)
    distance, normal = ramp.distance(jnp.array([2.0, 0.0, rise + 0.1]))
    np.testing.assert_allclose([float(distance), *np.asarray(normal)],
                               [0.1 * np.cos(np.radians(25.0)), -np.sin(np.radians(25.0)), 0.0, np.cos(np.radians(25.0))],
                               atol=1e-6)  # fmt: skip
    np.testing.assert_allclose(Ramp(-10.0)(x), -Ramp(10.0)(x), atol=1e-6)  # a descent mirrors a climb


def test_terrains_are_named_by_kind_and_parameters():
    assert parse_terrain("flat") == terrain.flat
    assert parse_terrain("hills:height=0.08") == RollingHills(0.08)
    assert parse_terrain(" slope:degrees=25, heading=90 ") == Slope(25.0, heading=90.0)
    assert parse_terrain("stairs:rise=0.17,steps=5") == stairs(rise=0.17, steps=5)
    assert parse_terrain("rough:height=0.05,seed=3") == RoughGround(0.05, seed=3)
    assert parse_terrain("ramp:degrees=-25,length=2") == Ramp(-25.0, length=2.0)
    for text, message in [
        ("pit", "unknown terrain 'pit'.*accepted: flat, hills, slope, ramp, stairs, rough"),
        ("ramp:degrees=10,length=0", "length > 0 m"),
        ("hills:height=-0.1", "height >= 0 m"),
        ("slope", "needs degrees=VALUE"),
        ("stairs:riser=0.2", "NAME one of rise, run, steps"),
        ("stairs:steps=2.5", "steps must be an integer"),
        ("slope:degrees=95", "less than 90 degrees"),
    ]:
        with pytest.raises(ValueError, match=message):
            parse_terrain(text)
