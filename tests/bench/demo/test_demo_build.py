"""bench demo build: simulated capture, reconstruction, shipped backgrounds (issue 12 item 2)."""

from __future__ import annotations

import dataclasses
import json
import math
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from bench.demo.build import (
    ASSETS,
    DEMO_CONDITIONS,
    DEMO_WORLDS,
    BuildConfig,
    build,
    score_test_views,
    shipped_bundle,
    shipped_capture,
)
from bench.demo.capture import CaptureConfig, _room_box, walk_path
from bench.errors import BenchError
from bench.worlds.rooms import get_world

TINY = BuildConfig(
    capture=CaptureConfig(video_frames=12, intervals=6, fisheye_px=64, face_px=32, view_px=32,
                          test_frames=1, test_px=32, seed_points=1500),
    iters=100, eval_every=50, max_gaussians=3000)


@pytest.fixture(scope="module")
def tiny_build(tmp_path_factory):
    out = tmp_path_factory.mktemp("demo-build")
    build(out, worlds=("gt-duo",), conditions=("clean", "contiguous-30"), config=TINY,
          progress=False)
    return out


def _output_hashes(folder: Path) -> dict[str, str]:
    data = json.loads((folder / "manifest.json").read_text())
    return {name: entry["sha256"] for name, entry in data["outputs"].items()}


@pytest.mark.parametrize("world", DEMO_WORLDS)
def test_capture_path_walks_once_around_the_table(world):
    config = get_world(world)
    path = walk_path(config, CaptureConfig())
    eyes = path["eyes"]
    turn = np.unwrap(np.arctan2(eyes[:, 1], eyes[:, 0]))
    assert abs(turn[-1] - turn[0]) > 0.9 * 2 * math.pi  # one loop (the last step closes it)
    assert np.all(np.abs(np.diff(turn)) < 0.3)  # smooth: no jumps between frames
    table = config.table_spec()
    local = np.abs(table.to_local(eyes[:, :2]))
    outside = np.maximum(local - np.asarray(table.size) / 2, 0.0)
    assert np.all(np.hypot(*outside.T) > 0.1)  # never over the table (>= 10 cm off its edge)
    lo, hi = _room_box(config)
    assert np.all((eyes[:, :2] >= lo - 1e-9) & (eyes[:, :2] <= hi + 1e-9))
    assert 0.25 < eyes[:, 2].min() < eyes[:, 2].max() < 0.75  # chest height, varying
    assert eyes[:, 2].std() > 0.03
    for pose, aim in zip(path["poses"], path["aims"], strict=True):  # looks at the table
        to_aim = (aim - pose[:3, 3]) / np.linalg.norm(aim - pose[:3, 3])
        assert float(pose[:3, 2] @ to_aim) > math.cos(math.radians(3))


def test_capture_scans_the_room_the_robot_runs_in():
    """The capture renderer draws the room exactly as the robot's "real" trials draw it (the
    real env's own model: task world's light, room, REAL_DOMAIN without shadows) at a view
    that sees no robot or object; the old ``room`` lighting (bare room, shadows on) does not."""
    from bench.demo.capture import capture_renderer
    from bench.scene.cameras import Camera, look_at
    from bench.worlds.real import REAL_DOMAIN
    from bench.worlds.rooms import GroundTruthRenderer
    from metrics.psnr import psnr

    env = REAL_DOMAIN.make_env("gt-g2", "cup", image_size=(32, 32))
    world = env.unwrapped.world
    robot_view = GroundTruthRenderer("gt-g2", max_size=(64, 64), model=world.model,
                                     shadows=REAL_DOMAIN.shadows)
    small = CaptureConfig(face_px=48, view_px=64, test_px=64)
    scan = capture_renderer("gt-g2", small)
    old = capture_renderer("gt-g2", dataclasses.replace(small, lighting="room"))
    # above the table, looking at a wall: the gripper (0.25 m up) and objects are below view
    cam = Camera.pinhole_from_fov(64, 48, fov_x_deg=70.0, name="wall",
                                  world_from_camera=look_at((0.0, 0.0, 1.0), (3.0, 0.4, 1.1)))
    try:
        robot = robot_view.render_clean(cam, data=world.data)
        assert robot.tobytes() == scan.render_clean(cam).tobytes()
        assert float(psnr(robot[None], old.render_clean(cam)[None])[0]) < 40.0
    finally:
        for r in (robot_view, scan, old):
            r.close()
        env.close()
    with pytest.raises(BenchError, match="lighting"):
        CaptureConfig(lighting="studio").validate()


@pytest.mark.slow  # shares the tiny build (~1-2 min on the shared 2 cores)
def test_build_is_deterministic_and_resumable(tiny_build, tmp_path):
    again = tmp_path / "again"
    build(again, worlds=("gt-duo",), conditions=("clean",), config=TINY, progress=False)
    for rel in ("scenes/gt-duo/clean", "captures/gt-duo"):
        first, second = _output_hashes(tiny_build / rel), _output_hashes(again / rel)
        assert first == second and first
        assert (tiny_build / rel / "manifest.json").read_bytes() == (
            again / rel / "manifest.json").read_bytes()
    ply = tiny_build / "scenes/gt-duo/clean/background.ply"
    stamp = ply.stat().st_mtime_ns
    build(tiny_build, worlds=("gt-duo",), conditions=("clean",), config=TINY, progress=False)
    assert ply.stat().st_mtime_ns == stamp  # resumed: finished artifacts are kept
    changed = dataclasses.replace(TINY, iters=101)
    build(tiny_build, worlds=("gt-duo",), conditions=("clean",), config=changed, progress=False)
    assert json.loads((tiny_build / "scenes/gt-duo/clean/train_config.json").read_text())[
        "iters"] == 101  # stale inputs are rebuilt


@pytest.mark.slow  # shares the tiny build (~1-2 min on the shared 2 cores)
def test_test_views_are_held_out(tiny_build):
    from bench.recon.capture import CaptureManifest

    full = CaptureManifest.load(tiny_build / "work/gt-duo/capture/capture.json")
    trainer = json.loads((tiny_build / "scenes/gt-duo/clean/train_manifest.json").read_text())
    test_ids = {v.id for v in full.test_views}
    assert test_ids and not test_ids & set(trainer["train_view_ids"])
    assert len(trainer["train_view_ids"]) == 9 * len(full.frames)
    train_images = {v.image for v in full.views}
    assert not train_images & {v.image for v in full.test_views}
    centres = np.stack([v.camera.position for v in full.views])
    for view in full.test_views:  # poses no training view has (lower, at wrist height)
        assert np.linalg.norm(centres - view.camera.position, axis=1).min() > 0.05
    shipped = CaptureManifest.load(tiny_build / "captures/gt-duo/capture.json",
                                   require_views=False)
    assert [v.id for v in shipped.test_views] == [v.id for v in full.test_views]
    assert shipped.frame_ids == full.frame_ids and not shipped.views
    contiguous = json.loads((tiny_build / "scenes/gt-duo/contiguous-30/coverage_plan.json")
                            .read_text())
    assert len(contiguous["removed"]) == 2  # round_half_up(0.3 * 6)


@pytest.mark.slow  # shares the tiny build (~1-2 min on the shared 2 cores)
def test_frame_selection_keeps_the_sharpest_frame_per_interval(tiny_build):
    import cv2

    from bench.recon.capture import CaptureManifest, laplacian_sharpness

    full = CaptureManifest.load(tiny_build / "work/gt-duo/capture/capture.json")
    video = sorted((tiny_build / "work/gt-duo/capture/video").glob("frame_*.png"))
    sharp = np.array([laplacian_sharpness(cv2.imread(str(p), cv2.IMREAD_GRAYSCALE))
                      for p in video])
    per = len(video) // len(full.frames)
    chosen = [int(f.id[1:]) for f in full.frames]
    for k, index in enumerate(chosen):
        members = range(k * per, (k + 1) * per)
        assert index in members and sharp[index] == sharp[list(members)].max()
    assert sharp.std() > 0.05 * sharp.mean()  # motion blur varies: selection has a choice


@pytest.mark.slow  # shares the tiny build (~1-2 min on the shared 2 cores)
def test_bundle_is_registered_to_the_world(tiny_build):
    from bench.scene.bundle import load_scene

    scene = load_scene(shipped_bundle("gt-duo", "clean", root=tiny_build))
    assert np.allclose(scene.world_from_splat, np.eye(4))
    assert scene.table == get_world("gt-duo").table_spec()
    assert scene.background.sh_degree == 1 and len(scene.background) <= 3000


def test_bad_names_exit_2_with_one_line(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "bench.cli", "demo", "build", "--out",
                           str(tmp_path / "o"), "--worlds", "gt-nope"],
                          capture_output=True, text=True)
    assert proc.returncode == 2 and "gt-nope" in proc.stderr and "Traceback" not in proc.stderr
    assert not (tmp_path / "o").exists()


# ---------------------------------------------------------------- the shipped assets
def test_shipped_assets_exist_and_fit_the_budget():
    total = sum(p.stat().st_size for p in (ASSETS / "scenes").rglob("*") if p.is_file())
    total += sum(p.stat().st_size for p in (ASSETS / "captures").rglob("*") if p.is_file())
    assert total < 45e6
    for world in DEMO_WORLDS:
        assert shipped_capture(world).is_file()
        for condition in DEMO_CONDITIONS:
            manifest = json.loads((shipped_bundle(world, condition) / "manifest.json")
                                  .read_text())
            assert manifest["params"]["condition"] == condition
            assert manifest["trainer_version"]["tool"] == "train/1"


@pytest.fixture(scope="module")
def shipped_scores():
    return {(w, c): score_test_views(shipped_bundle(w, c), shipped_capture(w))
            for w in DEMO_WORLDS for c in ("clean", "contiguous-30")}


@pytest.mark.slow
def test_clean_reconstruction_is_real(shipped_scores):
    for world in DEMO_WORLDS:
        values = [r["psnr"] for r in shipped_scores[(world, "clean")]]
        assert all(math.isfinite(v) for v in values)
        assert 14.0 < float(np.mean(values)) < 35.0  # neither unrelated nor a copy


@pytest.mark.slow
def test_contiguous_30_is_worse_near_the_removed_interval(shipped_scores):
    from bench.demo.build import near_removed_views

    for world in DEMO_WORLDS:
        near = near_removed_views(world)  # Test views whose nearest frame was removed
        assert near, world
        clean = np.mean([shipped_scores[(world, "clean")][k]["psnr"] for k in near])
        contiguous = np.mean([shipped_scores[(world, "contiguous-30")][k]["psnr"] for k in near])
        assert contiguous < clean, (world, contiguous, clean)


def test_committed_build_has_a_dose_that_bites():
    # issue 33 item 3, on results/demo-build (python -m bench.demo.build_report bench/demo/assets
    # results/demo-build): >= 30 Test views per world from the capture walk, some looking up;
    # each coverage condition and hole-54 lower the mean (over the worlds) Test PSNR by >= 2 dB
    # from clean, and clean stays >= 20 dB in every world
    from bench.provenance import sha256_file
    from bench.recon.capture import CaptureManifest

    root = Path(__file__).resolve().parents[3] / "results" / "demo-build"
    summary = json.loads((root / "summary.json").read_text())
    for rel, digest in summary["inputs_sha256"].items():  # the scores are of the shipped assets
        assert sha256_file(ASSETS / rel) == digest, rel
    for world in DEMO_WORLDS:
        views = CaptureManifest.load(shipped_capture(world), require_views=False).test_views
        assert len(views) >= 30
        up = [v for v in views if v.camera.world_from_camera[2, 2] > 0.1]  # optical axis up
        assert len(up) >= len(views) // 6, world
    clean = {r["world"]: r["test_psnr"] for r in summary["rows"] if r["condition"] == "clean"}
    assert min(clean.values()) >= 20.0, clean
    for condition in ("central-pinhole", "contiguous-30", "random-30", "hole-54"):
        drops = [clean[r["world"]] - r["test_psnr"] for r in summary["rows"]
                 if r["condition"] == condition]
        assert len(drops) == 3 and np.mean(drops) >= 2.0, (condition, drops)
        assert summary["mean_test_psnr_drop_db"][condition] == round(float(np.mean(drops)), 2)


def test_worlds_test_views_differ():
    from bench.recon.train import load_image
    from metrics.psnr import psnr

    images = {}
    for world in DEMO_WORLDS:
        from bench.recon.capture import CaptureManifest

        manifest = CaptureManifest.load(shipped_capture(world), require_views=False)
        images[world] = np.stack([load_image(manifest.root / v.image)
                                  for v in manifest.test_views])
    for a in range(3):
        for b in range(a + 1, 3):
            value = float(np.mean(psnr(images[DEMO_WORLDS[a]], images[DEMO_WORLDS[b]])))
            assert value < 15.0, (DEMO_WORLDS[a], DEMO_WORLDS[b], value)


@pytest.mark.slow
def test_real_renderer_differs_from_the_clean_reconstruction():
    from bench.demo.build_report import wrist_view_psnr

    value = wrist_view_psnr("gt-duo")
    assert 15.0 < value < 35.0


def test_on_table_top_is_the_rotated_footprint_at_the_top_surface():
    from bench.demo.capture import on_table_top

    world = get_world("gt-flat")  # yawed 12 degrees, 1.0 x 0.7 m
    yaw = math.radians(world.table_yaw_deg)
    axis_u, axis_v = np.array([math.cos(yaw), math.sin(yaw)]), np.array([-math.sin(yaw),
                                                                          math.cos(yaw)])
    # closed form: corners of the footprint just inside / outside, on and off the surface
    inside = 0.49 * axis_u + 0.34 * axis_v
    outside = 0.52 * axis_u  # 2 cm past the long edge
    unrotated = np.array([0.5, 0.36])  # inside the box if the yaw were ignored, outside here
    points = np.array([[*inside, 0.0], [*inside, 0.0005], [*inside, 0.01], [*inside, -0.01],
                       [*outside, 0.0], [*unrotated, 0.0]])
    assert on_table_top(points, world).tolist() == [True, True, False, False, False, False]


def test_table_seed_keeps_every_top_voxel_and_leaves_the_room_draw_alone(tmp_path):
    """``table_seed_voxel`` adds the top's points at its own voxel; off, the seed is the
    room rule's alone (the shipped captures were made with it off)."""
    from plyfile import PlyData

    from bench.demo.capture import on_table_top, simulate_capture

    base = dataclasses.replace(TINY.capture, video_frames=6, intervals=3, test_frames=1)
    world = get_world("gt-duo")
    seeds = {}
    for voxel in (0.0, 0.02):
        out = tmp_path / f"v{voxel}"
        simulate_capture("gt-duo", out, config=dataclasses.replace(base, table_seed_voxel=voxel))
        vertex = PlyData.read(str(out / "seed_points.ply"))["vertex"]
        seeds[voxel] = np.column_stack([vertex["x"], vertex["y"], vertex["z"]])
    # positional noise is 1 cm: a point is "on the top" within 4 std of the surface
    near = {v: int(on_table_top(p, world, tol=0.04).sum()) for v, p in seeds.items()}
    assert len(seeds[0.0]) == base.seed_points  # the room rule draws exactly seed_points
    added = len(seeds[0.02]) - base.seed_points  # ... and the top's voxels come on top
    assert added >= 50  # the tiny walk's 32 px views see part of the 1.2 x 0.8 m top
    assert near[0.02] - near[0.0] > 0.5 * added  # and they lie on the top
    # off, the config's JSON (the build's cache key, the shipped manifests) is what it was
    assert "table_seed_voxel" not in base.to_json()
    assert dataclasses.replace(base, table_seed_voxel=0.02).to_json()["table_seed_voxel"] == 0.02
    with pytest.raises(BenchError, match="table_seed_voxel"):
        dataclasses.replace(base, table_seed_voxel=-0.01).validate()
