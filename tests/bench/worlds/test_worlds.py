"""Ground-truth worlds (bench.worlds; issue 12 item 1): distinct rooms, determinism, sensor
statistics and the real-domain env (wrist-visible holes: demo/test_demo_visibility.py)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from bench.errors import BenchError
from bench.sim.camera_rig import fisheye_intrinsics
from bench.worlds.rooms import (
    WORLDS,
    GroundTruthRenderer,
    build_room_model,
    get_world,
    table_views,
    world_ids,
)
from bench.worlds.sensor import SensorConfig, apply_sensor, vignette
from metrics.psnr import psnr

SIZE = (64, 64)


@pytest.fixture(scope="module")
def test_views():
    """Sensor images of the same four test poses in every world."""
    views = {}
    for name in world_ids():
        renderer = GroundTruthRenderer(name, max_size=SIZE)
        views[name] = np.stack([renderer.render(cam) for cam in table_views(SIZE)])
        renderer.close()
    return views


def test_registry_has_three_typed_worlds():
    assert world_ids() == ["gt-duo", "gt-flat", "gt-g2"]
    assert get_world("gt-g2") is WORLDS["gt-g2"]
    with pytest.raises(BenchError, match="choose one of"):
        get_world("gt-nowhere")


def test_layouts_differ():
    models = {name: build_room_model(name) for name in world_ids()}
    ngeom = {name: m.ngeom for name, m in models.items()}
    nlight = {name: m.nlight for name, m in models.items()}
    assert len(set(ngeom.values())) == 3, ngeom  # different shelves / props
    configs = [get_world(n) for n in world_ids()]
    for attr in ("room_size", "table_size", "ceiling_z", "room_offset"):
        assert len({getattr(c, attr) for c in configs}) == 3, attr
    assert min(nlight.values()) >= 2  # ceiling panels + window / lamp
    # the geoms are placed differently, not just recoloured
    extents = [np.ptp(m.geom_pos, axis=0) for m in models.values()]
    assert not np.allclose(extents[0], extents[1]) and not np.allclose(extents[1], extents[2])


def test_test_view_psnr_between_worlds_below_15db(test_views):
    names = world_ids()
    for i, a in enumerate(names):
        for b in names[i + 1:]:
            values = psnr(test_views[a], test_views[b])
            assert np.all(np.isfinite(values))
            assert float(np.mean(values)) < 15.0, (a, b, values)


def test_renders_are_deterministic_and_noise_is_per_frame():
    fisheye = fisheye_intrinsics((32, 32), 200.0, (0.0, 0.0, 0.0, 0.0), "fe").with_pose(
        table_views((32, 32))[0].world_from_camera)
    pinhole = table_views((32, 32))[1]
    first = GroundTruthRenderer("gt-duo", max_size=(64, 64))
    a = [first.render(pinhole, frame=3), first.render(fisheye, frame=3)]
    other_frame = first.render(pinhole, frame=4)
    first.close()
    second = GroundTruthRenderer("gt-duo", max_size=(64, 64))
    b = [second.render(pinhole, frame=3), second.render(fisheye, frame=3)]
    second.close()
    for x, y in zip(a, b, strict=True):
        assert x.tobytes() == y.tobytes()
    assert a[0].tobytes() != other_frame.tobytes()
    valid = fisheye.pixel_rays()[1]
    assert np.all(a[1][~valid] == 0) and a[1][valid].mean() > 10  # a lit room in the circle


def test_sensor_statistics_match_config():
    config = SensorConfig(noise_std=0.02, exposure=1.2, white_balance=(1.1, 1.0, 0.85),
                          vignetting=0.0, seed=7)
    clean = np.full((256, 256, 3), 0.5)
    out = apply_sensor(clean, config, frame=0).astype(np.float64) / 255.0
    gain = out.mean(axis=(0, 1)) / 0.5
    np.testing.assert_allclose(gain, 1.2 * np.array([1.1, 1.0, 0.85]), rtol=0.01)
    # noise std: configured std plus uniform quantisation noise (1/255)^2 / 12, in quadrature
    expected = math.sqrt(0.02**2 + 1.0 / (12 * 255.0**2))
    np.testing.assert_allclose(out.std(axis=(0, 1)), expected, rtol=0.05)
    # vignetting follows 1 - v r^2 (closed form), without noise
    v = SensorConfig(noise_std=0.0, exposure=1.0, vignetting=0.4)
    shaded = apply_sensor(np.full((64, 64, 3), 0.8), v).astype(np.float64) / 255.0
    np.testing.assert_allclose(shaded[..., 0], 0.8 * vignette(64, 64, 0.4), atol=0.5 / 255 + 1e-9)
    assert shaded[0, 0, 0] < shaded[32, 32, 0]


def test_sensor_config_validates():
    with pytest.raises(ValueError, match="noise_std"):
        SensorConfig(noise_std=-1.0)
    with pytest.raises(ValueError, match="white_balance"):
        SensorConfig(white_balance=(1.0, 0.0, 1.0))


def test_real_env_steps_with_ground_truth_renderer():
    from bench.policies.base import make_policy
    from bench.sim.env import SplatBenchEnv
    from bench.worlds.real import ground_truth_scene, make_real_env

    env = make_real_env("gt-flat", "cup", image_size=(32, 32))
    obs, info = env.reset(seed=1)
    assert set(obs) == {"proprio", "wrist_left_rgb", "wrist_right_rgb"}
    policy = make_policy("expert", env)
    action = policy.act(obs, info)
    obs, _, _, _, info = env.step(action)
    for key in ("wrist_left_rgb", "wrist_right_rgb"):
        assert obs[key].shape == (32, 32, 3) and obs[key].dtype == np.uint8
        assert obs[key].mean() > 5  # the room is drawn, not a black background
    assert not np.array_equal(obs["wrist_left_rgb"], obs["wrist_right_rgb"])
    # the room is visual only: the same physics as the undecorated world
    plain = SplatBenchEnv("cup", ground_truth_scene("gt-flat"), obs_mode="state",
                          background="none")
    plain.reset(seed=1)
    _, _, _, _, plain_info = plain.step(action)
    for name, state in info["objects"].items():
        np.testing.assert_array_equal(state["pos"], plain_info["objects"][name]["pos"])
    np.testing.assert_array_equal(info["tcp_target"], plain_info["tcp_target"])
    # and a rerun of the real env is byte-identical (sensor noise seeded per frame)
    again = make_real_env("gt-flat", "cup", image_size=(32, 32))
    again_obs, _ = again.reset(seed=1)
    again_obs, *_ = again.step(action)
    assert again_obs["wrist_left_rgb"].tobytes() == obs["wrist_left_rgb"].tobytes()
    for e in (env, plain, again):
        e.close()
