"""Cameras around a registered table and the preview images of ``bench scene init|edit``.

Every length is relative to the table diagonal ``D = |table.size|`` (world
units: metres once the scale is known), so the same trajectories work for a
desk and a workbench, and for a scan left at scale 1.

Trajectories (world frame, table frame = table centre at the top height, x
along ``table.yaw_deg``):

- **Test** (``cameras/test.json``): 8 pinhole views 320 x 240, f = 260 px
  (63 degrees wide), on a circle of radius 0.9 D around the table centre at
  azimuths 22.5 + 45 k degrees (k = 0..7), alternately 0.45 D and 0.52 D above
  the top, all looking at the table centre: held-out views of the whole table.
- **OBS-Probe** (``cameras/probe.json``): 12 pinhole views 128 x 128, f = 90 px,
  on an arc of radius 0.6 D, 0.35 D above the top, from azimuth -120 to -60
  degrees (the table's -y side, where a robot or an operator stands), looking
  at the table centre: what a policy camera sees of the task area.
- **Previews** (``previews/``, PNG, cpu render backend, view-independent colour:
  SH degree 0 keeps the renderer's memory down): ``top.png`` (512 x 512 pinhole
  looking straight down from above the centre, image up = table +y, only
  Gaussians below 0.5 D above the top, so a ceiling or a lamp does not hide the
  table), ``perspective.png`` (Test view 0 at 640 x 480) and ``fisheye.png``
  (256 x 256 equidistant 200-degree fisheye 0.3 D above the top at the middle of
  the -y edge, looking at a point 0.1 D past the centre: a wrist-like view). Each
  has the fitted table rectangle (green) and the keepout boxes (orange) drawn on it.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from bench.scene.bundle import KeepoutBox, TableSpec
from bench.scene.cameras import Camera, look_at
from bench.scene.gaussians import GaussianSplats

TABLE_COLOUR = (60, 220, 60)  # RGB of the drawn table rectangle
KEEPOUT_COLOUR = (255, 150, 30)
PREVIEW_BACKGROUND = (0.12, 0.12, 0.14)
TOP_VIEW_CUT = 0.5  # the top view shows Gaussians up to 0.5 D above the table top
PREVIEW_FILES = ("previews/top.png", "previews/perspective.png", "previews/fisheye.png")


def _diagonal(table: TableSpec) -> float:
    return float(math.hypot(*table.size))


def _table_point(table: TableSpec, local: Sequence[float]) -> np.ndarray:  # table frame -> world
    xy = table.to_world(np.array([[local[0], local[1]]]))[0]
    return np.array([xy[0], xy[1], table.height + local[2]])


def make_test_cameras(table: TableSpec) -> list[Camera]:
    """The 8 Test views (see module docstring)."""
    d = _diagonal(table)
    target = _table_point(table, (0.0, 0.0, 0.0))
    cams = []
    for k in range(8):
        azimuth = math.radians(22.5 + 45.0 * k)
        eye = _table_point(table, (0.9 * d * math.cos(azimuth), 0.9 * d * math.sin(azimuth),
                                   (0.45 + 0.07 * (k % 2)) * d))
        cams.append(Camera("pinhole", 320, 240, 260.0, 260.0, 160.0, 120.0,
                           look_at(eye, target), name=f"test_{k:02d}"))
    return cams


def make_probe_cameras(table: TableSpec) -> list[Camera]:
    """The 12 OBS-Probe views (see module docstring)."""
    d = _diagonal(table)
    target = _table_point(table, (0.0, 0.0, 0.0))
    cams = []
    for k in range(12):
        azimuth = math.radians(-120.0 + 60.0 * k / 11.0)
        eye = _table_point(table, (0.6 * d * math.cos(azimuth), 0.6 * d * math.sin(azimuth),
                                   0.35 * d))
        cams.append(Camera("pinhole", 128, 128, 90.0, 90.0, 64.0, 64.0, look_at(eye, target),
                           name=f"probe_{k:02d}"))
    return cams


def preview_cameras(table: TableSpec) -> dict[str, Camera]:
    """The three preview cameras: ``top``, ``perspective``, ``fisheye``."""
    d = _diagonal(table)
    centre = _table_point(table, (0.0, 0.0, 0.0))
    fov = 60.0
    height = 0.5 * 1.3 * max(table.size) / math.tan(math.radians(fov / 2.0))
    yaw = math.radians(table.yaw_deg)
    table_y = np.array([-math.sin(yaw), math.cos(yaw), 0.0])
    top = Camera.pinhole_from_fov(512, 512, fov_x_deg=fov, name="top",
                                  world_from_camera=look_at(centre + (0, 0, height), centre,
                                                            up=table_y))
    perspective = make_test_cameras(table)[0].resized(640, 480).replace(name="perspective")
    eye = _table_point(table, (0.0, -0.5 * table.size[1], 0.3 * d))
    fisheye = Camera.equidistant_fisheye(
        256, 256, fov_deg=200.0, name="fisheye",
        world_from_camera=look_at(eye, _table_point(table, (0.0, 0.1 * d, 0.0))))
    return {"top": top, "perspective": perspective, "fisheye": fisheye}


def _edges(table: TableSpec, keepouts: Sequence[KeepoutBox]) -> list[tuple[np.ndarray, tuple]]:
    """3D polylines [P, 3] to draw, densely sampled so fisheye lines curve correctly."""
    lines = []
    corners = table.corners()
    ring = np.vstack([corners, corners[:1]])
    pts = np.concatenate([np.linspace(ring[i], ring[i + 1], 40) for i in range(4)])
    lines.append((np.c_[pts, np.full(len(pts), table.height)], TABLE_COLOUR))
    for box in keepouts:
        c, h = np.asarray(box.center), np.asarray(box.size) / 2.0
        signs = np.array([[sx, sy, sz] for sx in (-1, 1) for sy in (-1, 1) for sz in (-1, 1)])
        verts = c + signs * h
        for i in range(8):
            for j in range(i + 1, 8):
                if np.count_nonzero(signs[i] != signs[j]) == 1:
                    lines.append((np.linspace(verts[i], verts[j], 20), KEEPOUT_COLOUR))
    return lines


def draw_overlay(image: np.ndarray, camera: Camera, table: TableSpec,
                 keepouts: Sequence[KeepoutBox]) -> np.ndarray:  # [H, W, 3] uint8 RGB
    """Draw the table rectangle and keepout boxes on a rendered RGB image (copy)."""
    import cv2

    out = np.ascontiguousarray(image.copy())
    thickness = max(1, round(camera.width / 256))
    for points, colour in _edges(table, keepouts):
        uv, valid = camera.project_world(points)
        for a in range(len(points) - 1):
            if valid[a] and valid[a + 1]:
                p = tuple(int(round(v)) for v in uv[a])
                q = tuple(int(round(v)) for v in uv[a + 1])
                cv2.line(out, p, q, colour, thickness, lineType=cv2.LINE_AA)
    return out


def png_bytes(rgb: np.ndarray) -> bytes:  # [H, W, 3] uint8 RGB -> PNG bytes
    """Encode an RGB uint8 image as PNG bytes."""
    import cv2

    ok, buf = cv2.imencode(".png", np.ascontiguousarray(rgb[..., ::-1]))
    if not ok:  # pragma: no cover - cv2 failure is not expected for uint8 arrays
        raise RuntimeError("PNG encoding failed")
    return buf.tobytes()


def render_previews(world: GaussianSplats, table: TableSpec,
                    keepouts: Sequence[KeepoutBox], *,
                    backend: str = "cpu") -> dict[str, bytes]:
    """Render the three previews; returns relative path -> PNG bytes.

    Args:
        world: The background in the world frame.
        table: The table spec (world).
        keepouts: Keepout boxes to draw.
        backend: Render backend (``cpu``: Warp kernels; deterministic).
    """
    from bench.render import render

    files = {}
    # view-independent colour (SH degree 0): enough to check a fit, and the backend's
    # device copy is 4x smaller (a 5 M-Gaussian scan: ~1 GB less, and faster)
    base = world.replace(sh_rest=np.zeros((len(world), 0, 3), np.float32))
    for name, cam in preview_cameras(table).items():  # top first: its subset is freed early
        if name == "top":  # ceilings and hanging lamps would hide the table from above
            splats = base.subset(base.means[:, 2] < table.height + TOP_VIEW_CUT * _diagonal(
                table))
        else:
            splats = base
        out = render(splats, cam, backend=backend, background=PREVIEW_BACKGROUND)
        del splats  # the backend caches device arrays per splat set; let the subset's go
        rgb = np.round(np.clip(out.rgb, 0.0, 1.0) * 255.0).astype(np.uint8)
        files[f"previews/{name}.png"] = png_bytes(draw_overlay(rgb, cam, table, keepouts))
    return files


def camera_files(table: TableSpec) -> dict[str, bytes]:
    """``cameras/test.json`` and ``cameras/probe.json`` (bench.scene.cameras JSON format)."""
    import tempfile
    from pathlib import Path

    from bench.scene.camera_files import save_cameras

    files = {}
    with tempfile.TemporaryDirectory() as tmp:
        for rel, cams in (("cameras/test.json", make_test_cameras(table)),
                          ("cameras/probe.json", make_probe_cameras(table))):
            path = Path(tmp) / Path(rel).name
            save_cameras(path, cams, frame="world")  # poses around the world-frame table
            files[rel] = path.read_bytes()
    return files
