"""Fisheye rendering through a cube map (the YUBI study's wrist-camera path).

:func:`render_cubemap` renders pinhole cube faces (90 degrees each, plus a
small margin so bilinear lookups never cross a face edge) with any pinhole
backend, at the camera centre, then resamples them at every fisheye pixel's ray
(Kannala-Brandt unprojection). Only faces that some valid pixel looks into are
rendered (a 200-degree lens needs 5, a 120-degree lens 5 small slivers of the
side faces, never the back face).

Resampling is bilinear on premultiplied quantities (colour with a black
background, alpha, and alpha x depth), so it stays exact for constant regions
and never mixes a colour with an empty pixel's background; the background
is added afterwards. Face z-depth is converted to distance along the ray
(the fisheye depth convention) by dividing by the ray's cosine to the face axis.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from bench.render.output import RenderOutput
from bench.scene.cameras import Camera
from bench.scene.gaussians import GaussianSplats

CUBE_MARGIN_PX = 2  # extra pixels around each 90-degree face for bilinear lookups
# (forward, down) of each face in the fisheye camera frame (OpenCV axes); right = down x forward.
_FACES = {
    "+z": ((0, 0, 1), (0, 1, 0)),
    "-z": ((0, 0, -1), (0, 1, 0)),
    "+x": ((1, 0, 0), (0, 1, 0)),
    "-x": ((-1, 0, 0), (0, 1, 0)),
    "+y": ((0, 1, 0), (0, 0, 1)),
    "-y": ((0, -1, 0), (0, 0, -1)),
}


def face_rotation(name: str) -> np.ndarray:  # [3, 3] camera_from_face
    """Rotation whose columns are the face's right, down and forward axes."""
    forward, down = (np.asarray(v, np.float64) for v in _FACES[name])
    return np.stack([np.cross(down, forward), down, forward], axis=1)


def default_face_px(camera: Camera) -> int:
    """Face resolution matching the fisheye's central pixel density (f pixels per radian)."""
    return max(8, int(math.ceil(2.0 * max(camera.fx, camera.fy))))


def render_cubemap(
    render_pinhole: Callable[..., RenderOutput],
    splats: GaussianSplats,
    camera: Camera,
    *,
    background=(0.0, 0.0, 0.0),
    sh_degree: int | None = None,
    face_px: int | None = None,
    occluder_depth: np.ndarray | None = None,  # [H, W] distance along the fisheye rays
) -> RenderOutput:
    """Render a fisheye ``camera`` by cube-map faces + Kannala-Brandt remap.

    The remap (which face each pixel looks into, its face coordinates and bilinear
    weights) depends only on the intrinsics and the face size, so it is computed once
    (:func:`_cube_plan`) and reused; the result equals :func:`render_cubemap_reference`
    bit for bit (tests/bench/render/test_fisheye_plan.py).

    Args:
        render_pinhole: A pinhole backend ``f(splats, camera, *, background, sh_degree)``.
        splats: The Gaussians.
        camera: A fisheye camera.
        background: (r, g, b) in [0, 1].
        sh_degree: Active SH degree (None = stored).
        face_px: Face side in pixels (without margin); default :func:`default_face_px`.
        occluder_depth: Optional [H, W] occluder distance per fisheye pixel; it is
            resampled (nearest fisheye pixel) onto each face as z-depth and passed to
            ``render_pinhole``.
    """
    if camera.model != "fisheye":
        raise ValueError("render_cubemap needs a fisheye camera; render pinhole cameras directly")
    n = int(face_px or default_face_px(camera))
    plan = _cube_plan(camera, n)
    size = plan.size
    h, w = camera.height, camera.width
    color = np.zeros((h * w, 3))
    alpha = np.zeros(h * w)
    depth_w = np.zeros(h * w)
    for face in plan.faces:
        pose = camera.world_from_camera.copy()
        pose[:3, :3] = camera.world_from_camera[:3, :3] @ face.rot
        face_cam = Camera("pinhole", size, size, n / 2.0, n / 2.0, size / 2.0, size / 2.0, pose,
                          name=f"{camera.name}:{face.name}")
        extra = {}
        if occluder_depth is not None:
            extra["occluder_depth"] = _face_occluder(camera, face_cam, face.rot, occluder_depth)
        out = render_pinhole(splats, face_cam, background=(0.0, 0.0, 0.0), sh_degree=sh_degree,
                             **extra)
        a = out.alpha.astype(np.float64)
        with np.errstate(invalid="ignore"):
            premult_depth = np.where(a > 0, out.depth * a, 0.0)
        stacked = np.concatenate([out.rgb, a[..., None], premult_depth[..., None]], axis=-1)
        sampled = face.sample(stacked)
        color[face.pixels] = sampled[:, :3]
        alpha[face.pixels] = sampled[:, 3]
        depth_w[face.pixels] = sampled[:, 4] / face.cos
    color, alpha, depth_w = color.reshape(h, w, 3), alpha.reshape(h, w), depth_w.reshape(h, w)
    valid = plan.valid
    rgb = color + (1.0 - alpha)[..., None] * np.asarray(background, np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        depth = np.where(alpha > 0, depth_w / alpha, np.inf)
    rgb[~valid] = np.asarray(background, np.float64)
    alpha[~valid] = 0.0
    depth[~valid] = np.inf
    return RenderOutput(rgb.astype(np.float32), depth.astype(np.float32), alpha.astype(np.float32),
                        valid.copy(), occluded=occluder_depth is not None)


@dataclass(frozen=True, eq=False)
class _FacePlan:
    """One cube face's share of a fisheye: its pixels and their bilinear taps on the face."""

    name: str
    rot: np.ndarray  # [3, 3] camera_from_face
    pixels: np.ndarray  # [K] flat fisheye pixel indices looking into this face
    cos: np.ndarray  # [K] cosine of each ray to the face axis (z-depth -> distance)
    x0: np.ndarray  # [K] left tap column
    y0: np.ndarray  # [K] top tap row
    fx: np.ndarray  # [K, 1] weight of the right taps
    fy: np.ndarray  # [K, 1] weight of the bottom taps
    gx: np.ndarray  # [K, 1] 1 - fx
    gy: np.ndarray  # [K, 1] 1 - fy

    def sample(self, image: np.ndarray) -> np.ndarray:  # [S, S, C] -> [K, C]
        """:func:`_bilinear` at this face's taps (the same arithmetic, weights precomputed)."""
        img = image.astype(np.float64)
        x0, y0 = self.x0, self.y0
        top = img[y0, x0] * self.gx + img[y0, x0 + 1] * self.fx
        bottom = img[y0 + 1, x0] * self.gx + img[y0 + 1, x0 + 1] * self.fx
        return top * self.gy + bottom * self.fy


@dataclass(frozen=True, eq=False)
class _CubePlan:
    size: int  # face side with margin, pixels
    valid: np.ndarray  # [H, W] bool (read-only)
    faces: tuple[_FacePlan, ...]  # only faces some valid pixel looks into


_PLANS: dict[tuple, _CubePlan] = {}
_MAX_PLANS = 64  # distinct (intrinsics, face size) pairs kept; a study uses a handful


def _cube_plan(camera: Camera, n: int) -> _CubePlan:
    """The remap of ``camera``'s intrinsics onto faces of ``n`` pixels (cached)."""
    key = (camera.model, camera.width, camera.height, camera.fx, camera.fy, camera.cx,
           camera.cy, tuple(camera.distortion), camera.fov_deg, n)
    plan = _PLANS.get(key)
    if plan is not None:
        return plan
    size = n + 2 * CUBE_MARGIN_PX
    rays, valid = camera.pixel_rays()  # [H, W, 3], read-only (cached)
    valid = valid.copy()
    rays = np.where(valid[..., None], rays, 0.0)
    names = list(_FACES)
    axes = np.stack([np.asarray(_FACES[k][0], np.float64) for k in names])  # [6, 3]
    face_of = np.argmax(rays @ axes.T, axis=-1)  # dominant axis = face hit by the ray
    focal, centre = n / 2.0, size / 2.0  # the face camera of render_cubemap_reference
    faces = []
    for f, name in enumerate(names):
        sel = valid & (face_of == f)
        if not sel.any():
            continue
        rot = face_rotation(name)
        d = rays[sel] @ rot  # ray in face coordinates, d[:, 2] = cos to the face axis
        u = focal * d[:, 0] / d[:, 2] + centre
        v = focal * d[:, 1] / d[:, 2] + centre
        # _bilinear's taps and weights, computed once
        x = np.clip(u - 0.5, 0.0, size - 1.0)
        y = np.clip(v - 0.5, 0.0, size - 1.0)
        x0 = np.minimum(np.floor(x).astype(np.int64), size - 2)
        y0 = np.minimum(np.floor(y).astype(np.int64), size - 2)
        fx, fy = (x - x0)[:, None], (y - y0)[:, None]
        faces.append(_FacePlan(name, rot, np.flatnonzero(sel), d[:, 2].copy(), x0, y0, fx, fy,
                               1 - fx, 1 - fy))
    valid.setflags(write=False)
    plan = _CubePlan(size, valid, tuple(faces))
    if len(_PLANS) >= _MAX_PLANS:
        _PLANS.pop(next(iter(_PLANS)))
    _PLANS[key] = plan
    return plan


def render_cubemap_reference(
    render_pinhole: Callable[..., RenderOutput],
    splats: GaussianSplats,
    camera: Camera,
    *,
    background=(0.0, 0.0, 0.0),
    sh_degree: int | None = None,
    face_px: int | None = None,
    occluder_depth: np.ndarray | None = None,  # [H, W] distance along the fisheye rays
) -> RenderOutput:
    """:func:`render_cubemap` computed from scratch every call (the plain reference).

    Args:
        render_pinhole: A pinhole backend ``f(splats, camera, *, background, sh_degree)``.
        splats: The Gaussians.
        camera: A fisheye camera.
        background: (r, g, b) in [0, 1].
        sh_degree: Active SH degree (None = stored).
        face_px: Face side in pixels (without margin); default :func:`default_face_px`.
        occluder_depth: Optional [H, W] occluder distance per fisheye pixel; it is
            resampled (nearest fisheye pixel) onto each face as z-depth and passed to
            ``render_pinhole``.
    """
    if camera.model != "fisheye":
        raise ValueError("render_cubemap needs a fisheye camera; render pinhole cameras directly")
    n = int(face_px or default_face_px(camera))
    size = n + 2 * CUBE_MARGIN_PX
    rays, valid = camera.pixel_rays()  # [H, W, 3], read-only (cached)
    valid = valid.copy()
    rays = np.where(valid[..., None], rays, 0.0)
    names = list(_FACES)
    axes = np.stack([np.asarray(_FACES[k][0], np.float64) for k in names])  # [6, 3]
    face_of = np.argmax(rays @ axes.T, axis=-1)  # dominant axis = face hit by the ray
    h, w = camera.height, camera.width
    color = np.zeros((h, w, 3))
    alpha = np.zeros((h, w))
    depth_w = np.zeros((h, w))
    for f, name in enumerate(names):
        sel = valid & (face_of == f)
        if not sel.any():
            continue
        rot = face_rotation(name)
        pose = camera.world_from_camera.copy()
        pose[:3, :3] = camera.world_from_camera[:3, :3] @ rot
        face_cam = Camera("pinhole", size, size, n / 2.0, n / 2.0, size / 2.0, size / 2.0, pose,
                          name=f"{camera.name}:{name}")
        extra = {}
        if occluder_depth is not None:
            extra["occluder_depth"] = _face_occluder(camera, face_cam, rot, occluder_depth)
        out = render_pinhole(splats, face_cam, background=(0.0, 0.0, 0.0), sh_degree=sh_degree,
                             **extra)
        d = rays[sel] @ rot  # ray in face coordinates, d[:, 2] = cos to the face axis
        u = face_cam.fx * d[:, 0] / d[:, 2] + face_cam.cx
        v = face_cam.fy * d[:, 1] / d[:, 2] + face_cam.cy
        a = out.alpha.astype(np.float64)
        with np.errstate(invalid="ignore"):
            premult_depth = np.where(a > 0, out.depth * a, 0.0)
        stacked = np.concatenate([out.rgb, a[..., None], premult_depth[..., None]], axis=-1)
        sampled = _bilinear(stacked, u, v)
        color[sel] = sampled[:, :3]
        alpha[sel] = sampled[:, 3]
        depth_w[sel] = sampled[:, 4] / d[:, 2]
    rgb = color + (1.0 - alpha)[..., None] * np.asarray(background, np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        depth = np.where(alpha > 0, depth_w / alpha, np.inf)
    rgb[~valid] = np.asarray(background, np.float64)
    alpha[~valid] = 0.0
    depth[~valid] = np.inf
    return RenderOutput(rgb.astype(np.float32), depth.astype(np.float32), alpha.astype(np.float32),
                        valid, occluded=occluder_depth is not None)


def _face_occluder(camera: Camera, face_cam: Camera, rot: np.ndarray,
                   occluder_depth: np.ndarray) -> np.ndarray:  # [S, S] face z-depth
    """Occluder distances of the fisheye pixels seen by each face pixel, as face z-depth."""
    rays_face, _ = face_cam.pixel_rays()  # unit rays in face coordinates
    uv, ok = camera.project(rays_face.reshape(-1, 3) @ rot.T)
    h, w = occluder_depth.shape
    col = np.clip(np.floor(np.nan_to_num(uv[:, 0])).astype(np.int64), 0, w - 1)
    row = np.clip(np.floor(np.nan_to_num(uv[:, 1])).astype(np.int64), 0, h - 1)
    dist = np.where(ok, occluder_depth[row, col], np.inf)
    return (dist * rays_face.reshape(-1, 3)[:, 2]).reshape(face_cam.height, face_cam.width)


def _bilinear(image: np.ndarray, u: np.ndarray, v: np.ndarray) -> np.ndarray:
    """Sample [S, S, C] at pixel coordinates (u, v) (pixel-centre convention), edge-clamped."""
    s_h, s_w = image.shape[:2]
    x = np.clip(u - 0.5, 0.0, s_w - 1.0)
    y = np.clip(v - 0.5, 0.0, s_h - 1.0)
    x0 = np.minimum(np.floor(x).astype(np.int64), s_w - 2)
    y0 = np.minimum(np.floor(y).astype(np.int64), s_h - 2)
    fx, fy = (x - x0)[:, None], (y - y0)[:, None]
    img = image.astype(np.float64)
    top = img[y0, x0] * (1 - fx) + img[y0, x0 + 1] * fx
    bottom = img[y0 + 1, x0] * (1 - fx) + img[y0 + 1, x0 + 1] * fx
    return top * (1 - fy) + bottom * fy
