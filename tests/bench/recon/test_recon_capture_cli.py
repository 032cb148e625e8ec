import json

import cv2
import numpy as np

from bench.cli import main
from bench.provenance import sha256_file
from bench.recon.capture import CaptureManifest
from bench.recon.reproject import view_names, view_rotations
from bench.scene.camera_files import save_cameras
from bench.scene.cameras import Camera


def fisheye_sequence(folder, sharp, n=8):
    folder.mkdir(parents=True)
    base = np.random.default_rng(0).integers(0, 255, (60, 80, 3)).astype(np.uint8)
    for i in range(n):
        img = base if i in sharp else cv2.GaussianBlur(base, (7, 7), 2.0)
        cv2.imwrite(str(folder / f"{i:04d}.png"), img)


def assert_provenance(path, tool, *, frames, views):
    """The side-car <name>.manifest.json: tool, output sha256, counts, image digests."""
    side_car = json.loads(path.with_name(f"{path.stem}.manifest.json").read_text())
    assert side_car["tool"] == tool and side_car["bench_version"]
    assert side_car["outputs"]["capture_manifest"]["sha256"] == sha256_file(path)
    assert side_car["counts"] == {"frames": frames, "views": views, "test_views": 0}
    assert set(side_car["images_sha256"]) == {"frames", "views", "test_views"}
    return side_car


def test_select_reproject_import_poses_workflow(tmp_path, capsys):
    fisheye_sequence(tmp_path / "left", sharp={1, 2, 5})
    fisheye_sequence(tmp_path / "right", sharp={2, 4, 5})
    cam = Camera.equidistant_fisheye(80, 60, fov_deg=200.0, world_from_camera=np.eye(4))
    save_cameras(tmp_path / "left.json", [cam])
    save_cameras(tmp_path / "right.json", [cam])
    cap = tmp_path / "cap"
    code = main(["capture", "select", "--images", f"left={tmp_path / 'left'}", "--images",
                 f"right={tmp_path / 'right'}", "--fps", "10", "--intervals", "2",
                 "--camera", f"left={tmp_path / 'left.json'}",
                 "--camera", f"right={tmp_path / 'right.json'}", "--out", str(cap)])
    assert code == 0, capsys.readouterr().err
    selected = CaptureManifest.load(cap / "capture.json", require_views=False)
    assert selected.frame_ids == ["f000002", "f000005"]  # sharp in both lenses
    assert_provenance(cap / "capture.json", "capture-select/1", frames=2, views=0)
    code = main(["capture", "reproject", "--manifest", str(cap / "capture.json"), "--size", "16",
                 "--lenses", "left", "--out", str(cap / "views.json")])
    assert code == 0, capsys.readouterr().err
    views = CaptureManifest.load(cap / "views.json")
    assert len(views.views) == 2 * 9
    assert [v.name for v in views.views[:9]] == list(view_names())
    side_car = assert_provenance(cap / "views.json", "reproject/1", frames=2, views=18)
    assert side_car["params"]["focal_px"] == 8.0  # f = size / 2
    assert side_car["inputs"]["capture_manifest"]["sha256"] == sha256_file(cap / "capture.json")
    # poses from an external solver (COLMAP): shift every view by +1 m in x, match by file name
    solved = []
    for v in views.views:
        pose = v.camera.world_from_camera.copy()
        pose[0, 3] += 1.0
        solved.append(v.camera.replace(name=v.image.split("/")[-1], world_from_camera=pose))
    save_cameras(tmp_path / "solved.json", solved)
    code = main(["capture", "import-poses", "--manifest", str(cap / "views.json"), "--cameras",
                 str(tmp_path / "solved.json"), "--out", str(cap / "posed.json")])
    assert code == 0, capsys.readouterr().err
    posed = CaptureManifest.load(cap / "posed.json")
    side_car = assert_provenance(cap / "posed.json", "import-poses/1", frames=2, views=18)
    assert side_car["inputs"]["cameras"]["sha256"] == sha256_file(tmp_path / "solved.json")
    for v in posed.views:
        assert v.camera.world_from_camera[0, 3] == 1.0
    frame_pose = posed.frames[0].cameras["left"].world_from_camera
    tilted = next(v for v in posed.views if v.name == "tilt_az090" and v.frame == "f000002")
    expected = np.eye(4)
    expected[:3, :3] = view_rotations()["tilt_az090"]
    np.testing.assert_allclose(tilted.camera.world_from_camera, frame_pose @ expected, atol=1e-9)


def test_capture_errors_are_one_line(tmp_path, capsys):
    code = main(["capture", "select", "--video", "left", "--intervals", "2", "--out",
                 str(tmp_path / "c")])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and "LENS=PATH" in err
    assert not (tmp_path / "c").exists()
    fisheye_sequence(tmp_path / "left", sharp={1})
    (tmp_path / "empty").mkdir()
    save_cameras(tmp_path / "cam.json",
                 [Camera.equidistant_fisheye(80, 60, fov_deg=200.0, world_from_camera=np.eye(4))])
    left = f"left={tmp_path / 'left'}"
    for argv, fragment in [
        (["--images", left, "--fps", "10", "--intervals", "0"], "--intervals must be >= 1"),
        (["--images", left, "--intervals", "2"], "--images needs --fps"),
        (["--images", f"left={tmp_path / 'empty'}", "--fps", "10", "--intervals", "2"],
         "no .png/.jpg/.tif images in"),
        (["--images", left, "--fps", "10", "--intervals", "2", "--camera",
          f"right={tmp_path / 'cam.json'}"], "--camera names lens 'right', which has no"),
    ]:
        code = main(["capture", "select", *argv, "--out", str(tmp_path / "c")])
        err = capsys.readouterr().err
        assert code == 2 and err.count("\n") == 1 and fragment in err, err
        assert not (tmp_path / "c").exists()
