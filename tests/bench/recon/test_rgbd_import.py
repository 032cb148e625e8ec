"""``bench capture import-rgbd``: layouts, split, dense seed from depth, bad inputs (issue 34).

The sequences here are synthetic: a camera circling above a textured plane z = 0 (its depth
computed exactly), so the seed must lie on the plane and every count is known by construction.
"""

import json

import cv2
import numpy as np
import pytest

from bench.cli import main
from bench.recon.capture import CaptureManifest
from bench.recon.rgbd import RgbdImportConfig, edge_mask, read_rgbd_source

W, H, F = 64, 48, 60.0


def _pose(i: int, n: int) -> np.ndarray:  # camera-to-world looking down at the origin
    angle = 2 * np.pi * i / n
    eye = np.array([0.4 * np.cos(angle), 0.4 * np.sin(angle), 1.0])
    forward = -eye / np.linalg.norm(eye)
    right = np.cross(forward, [0.0, 0.0, 1.0])
    right /= np.linalg.norm(right)
    down = np.cross(forward, right)
    pose = np.eye(4)
    pose[:3, :3] = np.stack([right, down, forward], axis=1)
    pose[:3, 3] = eye
    return pose


def _plane_depth(pose: np.ndarray) -> np.ndarray:  # [H, W] metres to the plane z = 0
    u, v = np.meshgrid(np.arange(W) + 0.5, np.arange(H) + 0.5)
    rays = np.stack([(u - W / 2) / F, (v - H / 2) / F, np.ones_like(u)], axis=-1)
    world_dirs = rays @ pose[:3, :3].T
    return -pose[2, 3] / world_dirs[..., 2]  # camera z per unit ray = depth


def seven_scenes(folder, n=10, *, drop_pose=None, scale_pose=None, depth_size=None,
                 intrinsics="585"):
    folder.mkdir(parents=True)
    rng = np.random.default_rng(0)
    for i in range(n):
        pose = _pose(i, n)
        stem = folder / f"frame-{i:06d}"
        colour = rng.integers(0, 255, (H, W, 3)).astype(np.uint8)
        cv2.imwrite(f"{stem}.color.png", colour)
        depth = np.round(_plane_depth(pose) * 1000).astype(np.uint16)
        depth[:4, :4] = 0  # invalid pixels
        if depth_size is not None and i == 3:
            depth = cv2.resize(depth, depth_size, interpolation=cv2.INTER_NEAREST)
        cv2.imwrite(f"{stem}.depth.png", depth)
        if i != drop_pose:
            if i == scale_pose:
                pose = pose.copy()
                pose[:3, :3] *= 1.5
            np.savetxt(f"{stem}.pose.txt", pose)
    k = np.array([[F, 0, W / 2], [0, F, H / 2], [0, 0, 1]])
    if intrinsics == "585":
        np.savetxt(folder / "camera-intrinsics.txt", k)
    else:
        np.savetxt(folder / "camera-intrinsics.txt", k[:2])
    np.savetxt(folder / "gravity-direction.txt", [0.0, 0.0, -1.0])
    return folder


def run(args, capsys):
    code = main([str(a) for a in args])
    out, err = capsys.readouterr()
    return code, out, err


def one_line(code, err):
    assert code == 2
    assert err.startswith("bench capture import-rgbd: error: ") and err.count("\n") == 1, err


def test_import_writes_manifest_split_and_a_seed_on_the_plane(tmp_path, capsys):
    src = seven_scenes(tmp_path / "seq")
    out = tmp_path / "cap"
    code, text, _ = run(["capture", "import-rgbd", src, "--out", out, "--width", 32,
                         "--stride", 2, "--voxel", 0.005, "--quiet"], capsys)
    assert code == 0 and "10 frames (8 training, 2 held-out Test)" in text
    manifest = CaptureManifest.load(out / "capture.json")
    assert [v.id for v in manifest.test_views] == ["test/frame-000004", "test/frame-000009"]
    assert len(manifest.views) == 8
    cam = manifest.views[0].camera
    assert (cam.width, cam.height, cam.fx, cam.cx) == (32, 24, F / 2, W / 4)
    assert np.allclose(cam.world_from_camera, _pose(0, 10), atol=1e-9)
    from plyfile import PlyData

    vertex = PlyData.read(str(out / "seed_points.ply"))["vertex"]
    z = np.asarray(vertex["z"])
    # the plane z = 0 back-projected from millimetre depth: within the rounding (0.5 mm / cos)
    assert len(z) > 100 and np.abs(z).max() < 0.004
    prov = json.loads((out / "manifest.json").read_text())
    counts = prov["counts"]
    assert prov["tool"] == "import-rgbd/1" and prov["gravity_down"] == [0.0, 0.0, -1.0]
    assert counts["pixels"] == 8 * (H // 2) * (W // 2)
    assert counts["invalid_depth"] == 8 * 4  # the 4x4 hole at stride 2: 2x2 per frame
    assert counts["back_projected"] + counts["invalid_depth"] + counts["misregistered"] + \
        counts["out_of_range"] == counts["pixels"]
    assert "camera-to-world" in prov["frame_convention"]
    # deterministic: the same inputs give the same bytes
    code, _, _ = run(["capture", "import-rgbd", src, "--out", tmp_path / "cap2", "--width", 32,
                      "--stride", 2, "--voxel", 0.005, "--quiet"], capsys)
    for name in ("capture.json", "seed_points.ply", "manifest.json", "test/frame-000004.png"):
        assert (out / name).read_bytes() == (tmp_path / "cap2" / name).read_bytes()


def test_edge_mask_marks_jumps_and_holes_only():
    depth = np.full((10, 10), 2.0, np.float32)
    depth[:, 5:] = 3.0  # a 50 % jump between columns 4 and 5
    depth[0, 0] = np.nan
    edges = edge_mask(depth, jump=0.05, radius=0)
    assert edges[:, 4].all() and edges[:, 5].all() and edges[0, 0] and edges[0, 1]
    assert not edges[5, 2] and not edges[5, 8]


@pytest.mark.parametrize("case, fix", [
    ("missing-pose", "pose file"),
    ("non-rigid", "not a rigid transform"),
    ("depth-size", "register/resize the depth"),
    ("intrinsics", "not 3x3"),
])
def test_bad_inputs_exit_2_one_line_nothing_written(tmp_path, capsys, case, fix):
    kwargs = {"missing-pose": {"drop_pose": 2}, "non-rigid": {"scale_pose": 1},
              "depth-size": {"depth_size": (32, 24)}, "intrinsics": {"intrinsics": "2x3"}}[case]
    src = seven_scenes(tmp_path / "seq", **kwargs)
    out = tmp_path / "cap"
    code, _, err = run(["capture", "import-rgbd", src, "--out", out, "--quiet"], capsys)
    one_line(code, err)
    if case == "intrinsics":
        assert "2x3 numbers, not 3x3" in err
    else:
        assert fix in err
    assert not out.exists()


def test_tum_and_folder_layouts(tmp_path):
    from scipy.spatial.transform import Rotation

    from bench.recon.rgbd import split_frames

    seq = seven_scenes(tmp_path / "seq", n=6)
    tum = tmp_path / "tum"
    (tum / "rgb").mkdir(parents=True)
    (tum / "depth").mkdir()
    assoc, truth = [], []
    for i in range(6):
        t = 100.0 + i / 30
        (tum / "rgb" / f"{t:.6f}.png").write_bytes((seq / f"frame-{i:06d}.color.png").read_bytes())
        depth = cv2.imread(str(seq / f"frame-{i:06d}.depth.png"), cv2.IMREAD_UNCHANGED)
        cv2.imwrite(str(tum / "depth" / f"{t:.6f}.png"), (depth.astype(np.uint32) * 5).astype(
            np.uint16))  # TUM: 5000 units per metre
        assoc.append(f"{t:.6f} rgb/{t:.6f}.png {t + 0.001:.6f} depth/{t:.6f}.png")
        pose = np.loadtxt(seq / f"frame-{i:06d}.pose.txt")
        q = Rotation.from_matrix(pose[:3, :3]).as_quat()
        truth.append(f"{t + 0.005:.6f} " + " ".join(f"{v:.9f}" for v in [*pose[:3, 3], *q]))
    (tum / "associations.txt").write_text("\n".join(assoc) + "\n")
    (tum / "groundtruth.txt").write_text("# time tx ty tz qx qy qz qw\n" + "\n".join(truth))
    config = RgbdImportConfig(layout="tum", test_every=3)
    source = read_rgbd_source(tum, config=config, intrinsics=seq / "camera-intrinsics.txt")
    assert source.depth_scale == 5000.0 and len(source.frames) == 6
    assert np.allclose(source.frames[2].world_from_camera, _pose(2, 6), atol=1e-6)
    train, test = split_frames(source.frames, 3)
    assert len(train) == 4 and len(test) == 2
    with pytest.raises(Exception, match="needs --intrinsics"):
        read_rgbd_source(tum, config=config)

    folder = tmp_path / "folder"
    for sub in ("color", "depth", "pose"):
        (folder / sub).mkdir(parents=True)
    for i in range(6):
        for sub, suffix, ext in (("color", "color", "png"), ("depth", "depth", "png"),
                                 ("pose", "pose", "txt")):
            (folder / sub / f"{i:03d}.{ext}").write_bytes(
                (seq / f"frame-{i:06d}.{suffix}.{ext}").read_bytes())
    (folder / "intrinsics.txt").write_bytes((seq / "camera-intrinsics.txt").read_bytes())
    source = read_rgbd_source(folder, config=RgbdImportConfig(layout="folder"))
    assert [f.id for f in source.frames] == [f"{i:03d}" for i in range(6)]
