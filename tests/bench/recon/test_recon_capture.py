import json

import cv2
import numpy as np
import pytest
from scipy import ndimage

from bench.errors import BenchError
from bench.recon.capture import (
    CaptureManifest,
    SourceFrame,
    View,
    interval_of,
    laplacian_sharpness,
    select_frame_indices,
    select_from_images,
    select_from_videos,
)
from bench.scene.cameras import Camera
from perturbations.coverage import COVERAGE_PLANS, make_plan


def test_laplacian_sharpness_matches_scipy_reference():
    # cv2.Laplacian (ksize=1) is the 4-neighbour kernel with BORDER_REFLECT_101,
    # which is scipy's mode="mirror".
    img = np.random.default_rng(0).integers(0, 255, (40, 50)).astype(np.uint8)
    kernel = np.array([[0, 1, 0], [1, -4, 1], [0, 1, 0]], dtype=np.float64)
    ref = ndimage.convolve(img.astype(np.float64), kernel, mode="mirror").var()
    assert laplacian_sharpness(img) == pytest.approx(ref, rel=1e-12)
    assert laplacian_sharpness(cv2.GaussianBlur(img, (7, 7), 2.0)) < 0.2 * ref


def test_interval_split_and_selection_rule():
    t = np.arange(10) / 10.0  # 0.0 .. 0.9 s
    np.testing.assert_array_equal(interval_of(t, 3), [0, 0, 0, 0, 1, 1, 1, 2, 2, 2])
    # two lenses; the rule maximises the minimum over lenses
    scores = np.array([[5, 1], [3, 3], [2, 9], [1, 1],  # interval 0 -> index 1 (min 3)
                       [4, 4], [4, 4], [0, 9],  # interval 1 -> tie 4/4 -> earliest, index 4
                       [1, 2], [2, 1], [1, 1]])  # interval 2 -> tie -> earliest, index 7
    assert select_frame_indices(t, scores, 3) == [1, 4, 7]


def test_selection_errors():
    with pytest.raises(BenchError, match="at most as many intervals"):
        select_frame_indices([0.0, 1.0], np.ones((2, 1)), 3)
    with pytest.raises(BenchError, match="holds no frame"):
        select_frame_indices([0.0, 0.1, 0.2, 10.0], np.ones((4, 1)), 3)
    with pytest.raises(BenchError, match="strictly increasing"):
        select_frame_indices([0.0, 0.0, 1.0], np.ones((3, 1)), 2)


def write_sequence(folder, sharp_at, n=12, seed=0):
    rng = np.random.default_rng(seed)
    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    base = rng.integers(0, 255, (32, 32)).astype(np.uint8)
    for i in range(n):
        img = base if i in sharp_at else cv2.GaussianBlur(base, (5, 5), 1.0 + 0.1 * i)
        path = folder / f"{i:03d}.png"
        cv2.imwrite(str(path), img)
        paths.append(path)
    return paths


def test_select_from_images_picks_the_frame_sharp_in_both_lenses(tmp_path):
    left = write_sequence(tmp_path / "left", sharp_at={1, 2, 6, 11})
    right = write_sequence(tmp_path / "right", sharp_at={2, 5, 6, 9})
    frames = select_from_images({"left": left, "right": right}, intervals=3, fps=10.0,
                                root=tmp_path)
    # intervals by time: [0..3], [4..7], [8..11] (12 frames at 10 fps: span 1.1 s)
    assert [f.id for f in frames] == ["f000002", "f000006", "f000011"]
    assert frames[0].timestamp == pytest.approx(0.2)
    assert frames[0].images == {"left": "left/002.png", "right": "right/002.png"}


def test_select_from_videos_extracts_the_chosen_frames(tmp_path):
    rng = np.random.default_rng(0)
    base = rng.integers(0, 255, (32, 32, 3)).astype(np.uint8)
    writer = cv2.VideoWriter(str(tmp_path / "a.avi"), cv2.VideoWriter_fourcc(*"FFV1"), 5.0,
                             (32, 32))
    if not writer.isOpened():
        pytest.skip("this OpenCV build cannot write FFV1 video")
    for i in range(9):
        writer.write(base if i in (1, 5, 6) else cv2.GaussianBlur(base, (5, 5), 2.0))
    writer.release()
    frames = select_from_videos({"left": tmp_path / "a.avi"}, tmp_path / "frames", intervals=3)
    assert [f.id for f in frames] == ["f000001", "f000005", "f000006"]
    assert all((tmp_path / f.images["left"]).is_file() for f in frames)
    assert frames[1].timestamp == pytest.approx(1.0)


def pinhole(size=16, name=""):
    return Camera.pinhole_from_fov(size, size, fov_x_deg=90.0, world_from_camera=np.eye(4),
                                   name=name)


def make_manifest(tmp_path, n=6, size=16, test_size=16):
    frames, views = [], []
    (tmp_path / "views").mkdir(exist_ok=True)
    for i in range(n):
        frames.append(SourceFrame(f"f{i}", float(i), {}))
        for name in ("forward", "tilt_az000"):
            rel = f"views/f{i}_{name}.png"
            cv2.imwrite(str(tmp_path / rel), np.zeros((size, size, 3), np.uint8))
            views.append(View(f"f{i}/{name}", rel, pinhole(size), frame=f"f{i}", name=name))
    cv2.imwrite(str(tmp_path / "test0.png"), np.zeros((test_size, test_size, 3), np.uint8))
    tests = (View("test0", "test0.png", pinhole(test_size)),)
    manifest = CaptureManifest(tuple(frames), tuple(views), tests, tmp_path)
    manifest.save(tmp_path / "capture.json")
    return manifest


def test_manifest_round_trip(tmp_path):
    make_manifest(tmp_path)
    loaded = CaptureManifest.load(tmp_path / "capture.json")
    assert loaded.frame_ids == [f"f{i}" for i in range(6)]
    assert len(loaded.views) == 12 and loaded.test_views[0].frame is None
    loaded.save(tmp_path / "again.json")
    assert (tmp_path / "again.json").read_bytes() == (tmp_path / "capture.json").read_bytes()


def test_held_out_views_are_never_in_a_training_set(tmp_path):
    manifest = make_manifest(tmp_path, n=10)
    test_ids = {v.id for v in manifest.test_views}
    for mode in COVERAGE_PLANS.names():
        for seed in range(5):
            plan = make_plan(manifest.frames, mode, fraction=0.3, seed=seed)
            chosen = manifest.training_views(plan)
            assert not test_ids & {v.id for v in chosen}
            assert {v.frame for v in chosen} == set(plan.kept)
            if plan.views == "forward":
                assert {v.name for v in chosen} == {"forward"}
    # a test view that reuses a training image is refused
    data = json.loads((tmp_path / "capture.json").read_text())
    data["test_views"][0]["image"] = data["views"][0]["image"]
    (tmp_path / "capture.json").write_text(json.dumps(data))
    with pytest.raises(BenchError, match="held-out views must be separate"):
        CaptureManifest.load(tmp_path / "capture.json")


def test_manifest_errors(tmp_path):
    manifest = make_manifest(tmp_path)
    path = tmp_path / "capture.json"
    data = json.loads(path.read_text())
    empty = dict(data, frames=[], views=[])
    path.write_text(json.dumps(empty))
    with pytest.raises(BenchError, match="empty"):
        CaptureManifest.load(path)
    path.write_text(json.dumps(dict(data, frames=data["frames"][::-1])))
    with pytest.raises(BenchError, match="strictly increasing"):
        CaptureManifest.load(path)
    manifest.save(path)
    (tmp_path / manifest.views[3].image).unlink()
    with pytest.raises(FileNotFoundError, match="does not exist"):
        CaptureManifest.load(path)


def test_mixed_image_sizes_are_refused(tmp_path):
    manifest = make_manifest(tmp_path)
    cv2.imwrite(str(tmp_path / manifest.views[5].image), np.zeros((20, 20, 3), np.uint8))
    with pytest.raises(BenchError, match="is 20x20 px but the camera"):
        CaptureManifest.load(tmp_path / "capture.json")
    data = json.loads((tmp_path / "capture.json").read_text())
    data["views"][5]["camera"] = pinhole(20).to_dict()
    (tmp_path / "capture.json").write_text(json.dumps(data))
    with pytest.raises(BenchError, match="mixed sizes"):
        CaptureManifest.load(tmp_path / "capture.json")
