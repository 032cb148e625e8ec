"""Camera rigs: keys and intrinsics of the YUBI dual preset, calibrated cameras from cv2 YAML /
JSON, and a known world point projected by the calibrated model lands where the render shows it."""

import json
import math

import gymnasium
import numpy as np
import pytest

import bench.sim
from bench.errors import BenchError
from bench.sim.camera_rig import YUBI_BASELINE, load_calibration, load_rig

pytestmark = pytest.mark.filterwarnings("ignore:.*Box observation space m.*:UserWarning")


def test_yubi_dual_keys_shapes_and_intrinsics(small_scene):
    env = gymnasium.make(bench.sim.ENV_IDS["cup"], scene=small_scene, cameras="yubi-dual",
                         image_size=(64, 80), background="none")
    obs, _ = env.reset(seed=0)
    assert sorted(obs) == ["proprio", "wrist_left_rgb", "wrist_right_rgb"]
    assert obs["wrist_left_rgb"].shape == obs["wrist_right_rgb"].shape == (64, 80, 3)
    assert env.observation_space["wrist_left_rgb"].shape == (64, 80, 3)
    cams = env.unwrapped.cameras()
    for cam in cams.values():
        # closed form: the 200-degree circle spans the shorter side, equidistant lens
        assert cam.model == "fisheye" and cam.fov_deg == 200.0
        assert cam.fx == pytest.approx(0.5 * 64 / math.radians(100.0))
        assert (cam.cx, cam.cy) == (40.0, 32.0)
    tcp = env.unwrapped.world.robot.tcp_pose(env.unwrapped.world.data)
    left = np.linalg.inv(tcp) @ cams["wrist_left"].world_from_camera
    right = np.linalg.inv(tcp) @ cams["wrist_right"].world_from_camera
    assert right[0, 3] - left[0, 3] == pytest.approx(2 * YUBI_BASELINE)
    assert not np.array_equal(obs["wrist_left_rgb"], obs["wrist_right_rgb"])
    env.close()


def _write_cv_yaml(path, K, D, width, height):
    import cv2

    fs = cv2.FileStorage(str(path), cv2.FILE_STORAGE_WRITE)
    fs.write("K", np.asarray(K, np.float64))
    fs.write("D", np.asarray(D, np.float64).reshape(4, 1))
    fs.write("image_width", width)
    fs.write("image_height", height)
    fs.release()


def test_cv2_yaml_and_json_calibrations(tmp_path):
    K = [[30.0, 0, 50.0], [0, 31.0, 45.0], [0, 0, 1]]
    _write_cv_yaml(tmp_path / "c.yaml", K, [0.05, -0.01, 0.0, 0.0], 96, 88)
    cam = load_calibration(tmp_path / "c.yaml", fov_deg=190.0)
    assert (cam.model, cam.width, cam.height) == ("fisheye", 96, 88)
    assert (cam.fx, cam.fy, cam.cx, cam.cy) == (30.0, 31.0, 50.0, 45.0)
    assert cam.distortion == (0.05, -0.01, 0.0, 0.0) and cam.fov_deg == 190.0
    (tmp_path / "p.json").write_text(json.dumps(
        {"model": "pinhole", "K": [[100, 0, 64], [0, 100, 48], [0, 0, 1]], "width": 128,
         "height": 96, "resize": [64, 48]}))
    pin = load_calibration(tmp_path / "p.json")
    assert (pin.width, pin.fx, pin.cx) == (64, 50.0, 32.0)


@pytest.mark.parametrize(
    ("entry", "message"),
    [
        ({"name": "a", "calibration": {"K": [[1, 0, 0], [0, 1, 0], [0, 0, 1]]}}, "needs K, width"),
        ({"name": "a", "mount": "belt", "calibration": "x.yaml"}, "mount"),
        ({"name": "a b", "calibration": "x.yaml"}, "must be unique and match"),
        ({"name": "a", "calibration": {"model": "pinhole", "K": [[1, 0, 0], [0, 1, 0], [0, 0, 1]],
                                       "D": [0.1, 0, 0, 0], "width": 8, "height": 8}},
         "pinhole calibration with distortion"),
        ({"name": "a", "calibration": "../x.yaml"}, "leaves"),
        ({"name": "a", "lens": 1, "calibration": "x.yaml"}, "unknown keys"),
    ],
)
def test_bad_rig_entries_are_one_line_errors(tmp_path, entry, message):
    path = tmp_path / "rig.json"
    path.write_text(json.dumps({"cameras": [entry]}))
    with pytest.raises(BenchError, match=message) as err:
        load_rig(path)
    assert "\n" not in str(err.value)


MARKER_TASK = {
    "format": "splatbench-task/1", "name": "marker", "instruction": "look at the red tile",
    "objects": {
        "tile": {"shape": {"type": "box", "size": [0.05, 0.05, 0.003]}, "mass": 0.02,
                 "rgba": [1.0, 0.0, 0.0, 1.0]},
        "mat": {"shape": {"type": "cylinder", "radius": 0.05, "height": 0.004}, "mass": 0.05,
                "rgba": [0.0, 0.0, 1.0, 1.0]},
    },
    "actor": "tile", "receptacle": "mat", "receptacle_pose": {"x": 0.25, "y": 0.2},
    "grid": {"x": [0.05], "y": [-0.08], "yaw_deg": [0.0]},
    "success": {"rule": "pick_up"}, "grasp_height": 0.002,
}


def test_known_world_point_lands_where_the_calibrated_render_shows_it(small_scene, tmp_path):
    # a distorted, off-centre fisheye from a cv2 YAML on the wrist + a world pinhole
    _write_cv_yaml(tmp_path / "wrist.yaml", [[34.0, 0, 70.0], [0, 33.0, 55.0], [0, 0, 1]],
                   [0.04, -0.006, 0.0, 0.0], 128, 120)
    rig = {"cameras": [
        {"name": "wrist_cal", "mount": "wrist", "position": [0.0, -0.02, -0.08],
         "rotation_deg": [8.0, 0.0, 0.0], "calibration": "wrist.yaml", "fov_deg": 200},
        {"name": "front", "mount": "world", "position": [0.1, -0.5, 0.45],
         "look_at": [0.05, -0.08, 0.0],
         "calibration": {"model": "pinhole", "K": [[150, 0, 88], [0, 140, 54], [0, 0, 1]],
                         "width": 160, "height": 120}},
    ]}
    (tmp_path / "rig.json").write_text(json.dumps(rig))
    (tmp_path / "marker.json").write_text(json.dumps(MARKER_TASK))
    env = bench.sim.make_env(str(tmp_path / "marker.json"), small_scene,
                             cameras=str(tmp_path / "rig.json"), background="none")
    obs, info = env.reset(seed=0)
    assert sorted(obs) == ["front_rgb", "proprio", "wrist_cal_rgb"]
    assert obs["wrist_cal_rgb"].shape == (120, 128, 3) and obs["front_rgb"].shape == (120, 160, 3)
    tile = info["objects"]["tile"]["pos"] + np.array([0.0, 0.0, 0.0015])  # top-face centre
    for name, camera in env.unwrapped.cameras().items():
        uv, valid = camera.project_world(tile[None])
        assert valid[0]
        image = obs[f"{name}_rgb"].astype(int)
        red = (image[..., 0] > 100) & (image[..., 1] < 60) & (image[..., 2] < 60)
        assert red.sum() >= 4, name
        rows, cols = np.nonzero(red)
        centroid = np.array([cols.mean() + 0.5, rows.mean() + 0.5])  # pixel-centre convention
        assert np.linalg.norm(centroid - uv[0]) < 1.0, (name, centroid, uv[0])
    env.close()


def test_batched_rig_render_equals_rendering_each_camera_alone(small_scene):
    """The batched path (one render_batch over all cameras) against the plain one per camera."""
    from bench.render import composite, render
    from bench.sim.observation import mesh_layers, to_uint8

    env = gymnasium.make(bench.sim.ENV_IDS["tape"], scene=small_scene, cameras="yubi-dual",
                         image_size=(40, 40), render_backend="cpu")
    obs, _ = env.reset(seed=2)
    renderer = env.unwrapped._renderer
    for rig_camera, camera in zip(renderer.rig, renderer.rig_cameras(), strict=True):
        mesh = renderer._mesh_pass(camera, wrist=True)
        rgb, depth = mesh_layers(mesh)
        background = render(small_scene.background, camera, backend="cpu",
                            fisheye_mode="cubemap",
                            cubemap_face_px=renderer._face_px[camera.name])
        np.testing.assert_array_equal(obs[rig_camera.key],
                                      to_uint8(composite(background, rgb, depth)))
    env.close()
