"""Observation rendering: MuJoCo depth/colour geometry, the fisheye remap, depth compositing."""

import math

import gymnasium
import numpy as np
import pytest

import bench.sim
from bench.scene.cameras import Camera, look_at


@pytest.fixture(scope="module")
def env(small_scene):
    env = gymnasium.make(
        bench.sim.ENV_IDS["cup"],
        scene=small_scene,
        obs_mode="rgb",
        image_size=(64, 64),
        render_mode="rgb_array",
    )
    env.reset(seed=2)  # cup at table (0, -0.22), plate at (0, 0.14)
    yield env
    env.close()


def test_mujoco_pinhole_depth_matches_geometry(env):
    renderer = env.unwrapped._get_renderer()
    world = env.unwrapped.world
    cup = world.object_state("cup").pos
    # cup height 0.09, plus its visual opening disc (half-thickness 1 mm, raised 0.5 mm)
    top = cup[2] + 0.045 + 0.0015
    eye = np.array([cup[0], cup[1], 0.5])
    cam = Camera.pinhole_from_fov(
        33, 33, fov_x_deg=40.0, world_from_camera=look_at(eye, cup, up=(0, 1, 0))
    )
    renderer.mujoco.show_table(True)
    out = renderer.mujoco.render(world.data, cam)
    # closed form: looking straight down, the centre pixel sees the cup top at 0.5 - top
    assert out.depth[16, 16] == pytest.approx(0.5 - top, abs=1e-3)
    assert out.alpha[16, 16] == 1.0
    # the image corner sees the table top (z = 0) along a ray 20*sqrt(2)-ish degrees off axis:
    # its camera-z depth is the height of the eye, 0.5 m
    assert out.depth[0, 0] == pytest.approx(0.5, abs=2e-3)
    renderer.mujoco.show_table(False)
    out = renderer.mujoco.render(world.data, cam)
    assert math.isinf(out.depth[0, 0]) and out.alpha[0, 0] == 0.0  # table hidden in obs passes


def test_fisheye_remap_puts_the_cup_where_the_camera_model_projects_it(env, small_scene):
    from bench.render.fisheye import render_cubemap

    renderer = env.unwrapped._get_renderer()
    world = env.unwrapped.world
    camera = renderer.wrist_camera()
    mesh = render_cubemap(
        renderer.mujoco.render_backend(world.data), None, camera, face_px=renderer.face_px
    )
    # the plate's top centre (the camera sits on the plate's side of the palm, so it is unoccluded)
    plate_top = world.object_state("plate").pos + [0, 0, 0.006]
    uv, _ = camera.project_world(plate_top[None])
    u, v = int(uv[0, 0]), int(uv[0, 1])
    assert mesh.alpha[v, u] == pytest.approx(1.0)
    # fisheye depth is the distance along the ray (flat plate: nearly constant over one pixel)
    dist = np.linalg.norm(plate_top - camera.world_from_camera[:3, 3])
    assert mesh.depth[v, u] == pytest.approx(dist, abs=0.01)


def test_wrist_observation_composites_objects_over_the_background(env):
    from bench.render import render
    from bench.render.fisheye import render_cubemap
    from bench.sim.observation import mesh_layers, to_uint8

    renderer = env.unwrapped._get_renderer()
    obs = env.unwrapped._observation()
    rgb = obs["wrist_rgb"]
    assert rgb.shape == (64, 64, 3) and rgb.dtype == np.uint8
    camera = renderer.wrist_camera()
    gs = render(
        env.unwrapped.scene.background,
        camera,
        backend="cpu",
        fisheye_mode="cubemap",
        cubemap_face_px=renderer.face_px,
    )
    gs_only = (np.clip(gs.rgb, 0, 1) * 255 + 0.5).astype(np.uint8)
    world = env.unwrapped.world
    mesh_rgb, mesh_depth = mesh_layers(
        render_cubemap(
            renderer.mujoco.render_backend(world.data), None, camera, face_px=renderer.face_px
        )
    )
    uv, _ = camera.project_world((world.object_state("plate").pos + [0, 0, 0.006])[None])
    u, v = int(uv[0, 0]), int(uv[0, 1])
    # the plate lies in front of the reconstructed table: its pixel is the MuJoCo colour
    assert mesh_depth[v, u] < gs.depth[v, u]
    np.testing.assert_array_equal(rgb[v, u], to_uint8(mesh_rgb[v, u]))
    assert not np.array_equal(rgb[v, u], gs_only[v, u])
    outside = ~gs.valid
    assert np.all(rgb[outside] == 0)  # outside the 200-degree image circle
    same = np.all(rgb == gs_only, axis=-1) & gs.valid
    assert 0.3 < same.mean() < 0.95  # most of the view is background, not all of it


def test_exterior_render(env):
    frame = env.render()
    assert frame.shape == (240, 320, 3) and frame.dtype == np.uint8 and frame.std() > 10


def test_two_live_environments_render_independently(small_scene):
    def make(task):
        return gymnasium.make(
            bench.sim.ENV_IDS[task], scene=small_scene, background="none", image_size=(32, 32)
        )

    env_a, env_b = make("cup"), make("pen")  # different models, one GL context each
    obs_a0, _ = env_a.reset(seed=0)
    obs_b, _ = env_b.reset(seed=7)  # a different scene state in a second GL context
    obs_a1, _ = env_a.reset(seed=0)
    np.testing.assert_array_equal(obs_a0["wrist_rgb"], obs_a1["wrist_rgb"])
    assert not np.array_equal(obs_a0["wrist_rgb"], obs_b["wrist_rgb"])
    env_a.close()
    env_b.close()


def test_public_wrist_camera_and_hand_eye(small_scene):
    env = gymnasium.make(
        bench.sim.ENV_IDS["pen"], scene=small_scene, obs_mode="state", control="single"
    )
    hand_eye = env.unwrapped.tcp_from_camera  # valid before the first reset
    env.reset(seed=3)
    for _ in range(3):
        env.step(np.array([0.02, 0.01, 0.0, 0.0, 0.0, 0.3, 0.05]))
    np.testing.assert_allclose(env.unwrapped.tcp_from_camera, hand_eye, atol=1e-9)
    camera = env.unwrapped.wrist_camera()
    assert camera.model == "fisheye" and camera.fov_deg == 200.0
    world = env.unwrapped.world
    expected = world.robot.tcp_pose(world.data) @ hand_eye
    np.testing.assert_allclose(camera.world_from_camera, expected, atol=1e-9)


def test_wrist_camera_model_fits_the_fov_circle():
    from bench.sim.camera_rig import wrist_camera_model
    from bench.sim.config import EnvConfig

    plain = wrist_camera_model(EnvConfig(image_size=(128, 96)))
    # equidistant: f = (96 / 2) / (100 deg in radians), as Camera.equidistant_fisheye
    expected = Camera.equidistant_fisheye(96, 128, fov_deg=200.0, world_from_camera=np.eye(4))
    assert plain.fx == pytest.approx(expected.fx) and plain.cy == 64.0
    lens = wrist_camera_model(EnvConfig(fisheye_distortion=(0.02, -0.01, 0.0, 0.0)))
    # a ray at the edge of the field of view lands on the inscribed circle (radius 64 px)
    edge = np.radians(100.0) - 1e-7  # just inside the lens limit (the limit itself is invalid)
    ray = np.array([[np.sin(edge), 0.0, np.cos(edge)]])
    uv, _ = lens.project(ray)
    assert np.hypot(uv[0, 0] - 64.0, uv[0, 1] - 64.0) == pytest.approx(64.0, abs=1e-4)
    with pytest.raises(ValueError):
        EnvConfig(fisheye_distortion=(0.0, 0.0))
