"""Cameras: the pinhole and fisheye models, projection, trajectories.

Conventions (the same everywhere in the bench):

- Axes are OpenCV's: +x right, +y down, +z forward. ``world_from_camera`` is the
  4x4 rigid transform taking camera-frame points to world points.
- Pixel coordinates follow COLMAP/3DGS/gsplat: the centre of pixel (row i, col j)
  is at ``(u, v) = (j + 0.5, i + 0.5)``, so a centred principal point is
  ``cx = width / 2``.
- ``pinhole``: ``u = fx * x / z + cx``, ``v = fy * y / z + cy`` (no distortion).
- ``fisheye``: OpenCV Kannala-Brandt (``cv2.fisheye``), ``theta = atan2(r, z)``,
  ``theta_d = theta * (1 + k1 theta^2 + k2 theta^4 + k3 theta^6 + k4 theta^8)``,
  ``u = fx * theta_d * x / r + cx``. Unlike ``cv2.fisheye`` the angle ``theta``
  may exceed 90 degrees (points behind the image plane), so lenses up to 200 deg
  and beyond are modelled. A ray is *valid* when ``theta`` is below
  ``max_theta`` (the smaller of ``fov_deg / 2`` and the angle where the
  polynomial stops increasing).

Camera files (JSON lists, COLMAP, ``transforms.json``) are read and written by
:mod:`bench.scene.camera_files` (``load_cameras``, ``save_cameras``, ``convert_cameras``).
"""

from __future__ import annotations

import dataclasses
import functools
import math
import numbers
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from bench.geometry import look_at

__all__ = ["MODELS", "Camera", "interpolate_poses", "look_at", "orbit"]

MODELS = ("pinhole", "fisheye")
RIGID_TOLERANCE = 1e-4  # max |R^T R - I| entry and |det R - 1| accepted as a rotation
_FISHEYE_NEWTON_STEPS = 20  # Newton iterations to invert theta_d(theta); converges in < 8


@dataclass(frozen=True, eq=False)
class Camera:
    """An intrinsic + extrinsic camera (see module docstring for conventions).

    Attributes:
        model: ``"pinhole"`` or ``"fisheye"`` (OpenCV Kannala-Brandt).
        width: Image width in pixels (> 0).
        height: Image height in pixels (> 0).
        fx: Focal length along x in pixels (for fisheye: pixels per radian).
        fy: Focal length along y in pixels.
        cx: Principal point x in pixels (pixel-centre convention, see module doc).
        cy: Principal point y in pixels.
        world_from_camera: [4, 4] rigid transform, OpenCV camera axes.
        distortion: (k1, k2, k3, k4) Kannala-Brandt coefficients; zeros for pinhole.
        fov_deg: Fisheye only: full field of view of the lens in degrees (None =
            limited only by where the distortion polynomial stops increasing).
        name: Free-form name (image file name in COLMAP / nerfstudio files).
        opencv_distortion: Pinhole only: OpenCV radial-tangential coefficients of a
            *captured* image in OpenCV's order (what ``cv2.undistort`` takes):
            ``(k1, k2, p1, p2, k3)`` (COLMAP SIMPLE_RADIAL / RADIAL / OPENCV, transforms.json
            OPENCV) or ``(k1, k2, p1, p2, k3, k4, k5, k6)`` with the rational terms (COLMAP
            FULL_OPENCV; stored as 5 when k4..k6 are zero); empty for an ideal pinhole.
            Renderers draw the ideal pinhole: undistort such images first
            (``bench.study.captures``). Only ``load_cameras(..., keep_distortion=True)``
            returns cameras with it.
        colmap_pose: ``(qw, qx, qy, qz, tx, ty, tz)`` exactly as read from a COLMAP model
            (camera_from_world), else empty. COLMAP export writes these values back (sign
            made canonical) while ``world_from_camera`` is still the pose they give, so a
            re-export is byte-stable instead of drifting through a rotation matrix. Not in
            :meth:`to_dict`.
    """

    model: str
    width: int
    height: int
    fx: float
    fy: float
    cx: float
    cy: float
    world_from_camera: np.ndarray  # [4, 4]
    distortion: tuple[float, float, float, float] = (0.0, 0.0, 0.0, 0.0)
    fov_deg: float | None = None
    name: str = ""
    opencv_distortion: tuple[float, ...] = ()
    colmap_pose: tuple[float, ...] = ()

    def __post_init__(self) -> None:
        if self.model not in MODELS:
            raise ValueError(f"camera model {self.model!r} is not supported; use one of {MODELS}")
        for attr in ("width", "height"):
            value = getattr(self, attr)
            if isinstance(value, bool | str) or not isinstance(value, numbers.Real) \
                    or not math.isfinite(value) or int(value) != value or value <= 0:
                raise ValueError(
                    f"camera {self.name!r} has {attr}={value}; image size must be a positive "
                    "integer number of pixels (fix the camera file or the --width/--height "
                    "override)"
                )
            object.__setattr__(self, attr, int(value))
        for attr in ("fx", "fy", "cx", "cy"):
            value = getattr(self, attr)
            if isinstance(value, bool | str) or not isinstance(value, numbers.Real):
                raise ValueError(f"camera {self.name!r} has {attr}={value!r:.40}; intrinsics must "
                                 "be numbers in pixels (fix the camera file)")
            value = float(value)
            if not math.isfinite(value):
                raise ValueError(
                    f"camera {self.name!r} has non-finite {attr}={value}; fix the intrinsics"
                )
            object.__setattr__(self, attr, value)
        if self.fx <= 0 or self.fy <= 0:
            raise ValueError(
                f"camera {self.name!r} has focal lengths fx={self.fx}, fy={self.fy}; "
                "both must be > 0"
            )
        dist = tuple(float(k) for k in self.distortion)
        if len(dist) != 4 or not all(math.isfinite(k) for k in dist):
            raise ValueError(
                f"camera {self.name!r} distortion {self.distortion} must be 4 finite numbers k1..k4"
            )
        if self.model == "pinhole" and any(dist):
            raise ValueError(
                f"pinhole camera {self.name!r} has distortion {dist}; pinhole cameras are "
                "distortion-free (undistort the images first, or use model 'fisheye')"
            )
        object.__setattr__(self, "distortion", dist)
        radial = tuple(float(k) for k in self.opencv_distortion)
        if radial and (self.model != "pinhole" or len(radial) not in (5, 8)
                       or not all(math.isfinite(k) for k in radial)):
            raise ValueError(
                f"camera {self.name!r}: opencv_distortion {self.opencv_distortion} must be 5 "
                "finite numbers (k1, k2, p1, p2, k3), or 8 with the rational k4, k5, k6, on a "
                "pinhole camera"
            )
        if not any(radial[5:]):  # one form per camera: zero rational terms are not kept
            radial = radial[:5]
        object.__setattr__(self, "opencv_distortion", radial if any(radial) else ())
        colmap = tuple(float(v) for v in self.colmap_pose)
        if colmap and (len(colmap) != 7 or not all(math.isfinite(v) for v in colmap)):
            raise ValueError(f"camera {self.name!r}: colmap_pose {self.colmap_pose} must be 7 "
                             "finite numbers (qw, qx, qy, qz, tx, ty, tz) or empty")
        object.__setattr__(self, "colmap_pose", colmap)
        if self.fov_deg is not None:
            fov = float(self.fov_deg)
            if not (0.0 < fov <= 360.0):
                raise ValueError(f"camera {self.name!r} fov_deg={fov} must be in (0, 360] degrees")
            object.__setattr__(self, "fov_deg", fov)
        pose = _validated_pose(self.world_from_camera, self.name)
        object.__setattr__(self, "world_from_camera", pose)

    # ------------------------------------------------------------ construction
    @staticmethod
    def pinhole_from_fov(
        width: int, height: int, *, fov_x_deg: float, world_from_camera: np.ndarray, name: str = ""
    ) -> Camera:
        """A centred, square-pixel pinhole camera with horizontal field of view ``fov_x_deg``."""
        if not 0.0 < fov_x_deg < 180.0:
            raise ValueError(f"pinhole fov_x_deg={fov_x_deg} must be in (0, 180) degrees")
        f = 0.5 * width / math.tan(math.radians(fov_x_deg) / 2.0)
        return Camera("pinhole", width, height, f, f, width / 2.0, height / 2.0,
                      world_from_camera, name=name)

    @staticmethod
    def equidistant_fisheye(
        width: int, height: int, *, fov_deg: float, world_from_camera: np.ndarray, name: str = ""
    ) -> Camera:
        """A centred equidistant fisheye (k = 0) whose ``fov_deg`` circle fits the shorter side."""
        f = 0.5 * min(width, height) / math.radians(fov_deg / 2.0)
        return Camera("fisheye", width, height, f, f, width / 2.0, height / 2.0,
                      world_from_camera, fov_deg=fov_deg, name=name)

    def replace(self, **changes) -> Camera:
        """A copy with some fields replaced (validated again)."""
        return dataclasses.replace(self, **changes)

    def with_pose(self, world_from_camera: np.ndarray) -> Camera:  # [4, 4]
        """The same intrinsics at another pose."""
        return self.replace(world_from_camera=world_from_camera)

    def resized(self, width: int, height: int) -> Camera:
        """The same camera at another resolution (intrinsics scaled per axis)."""
        if int(width) <= 0 or int(height) <= 0:
            raise ValueError(f"resize target {width}x{height} must be positive pixel counts")
        sx, sy = width / self.width, height / self.height
        return self.replace(width=int(width), height=int(height), fx=self.fx * sx,
                            fy=self.fy * sy, cx=self.cx * sx, cy=self.cy * sy)

    # ---------------------------------------------------------------- geometry
    @property
    def camera_from_world(self) -> np.ndarray:  # [4, 4]
        """Inverse of ``world_from_camera`` (the "view matrix", OpenCV axes)."""
        r = self.world_from_camera[:3, :3]
        t = self.world_from_camera[:3, 3]
        out = np.eye(4)
        out[:3, :3] = r.T
        out[:3, 3] = -r.T @ t
        return out

    @property
    def position(self) -> np.ndarray:  # [3]
        """Camera centre in world coordinates."""
        return self.world_from_camera[:3, 3].copy()

    @property
    def K(self) -> np.ndarray:  # [3, 3]  # noqa: N802 - the standard name of the intrinsic matrix
        """The 3x3 intrinsic matrix."""
        return np.array([[self.fx, 0.0, self.cx], [0.0, self.fy, self.cy], [0.0, 0.0, 1.0]])

    @property
    def max_theta(self) -> float:
        """Largest valid angle from the optical axis in radians (fisheye; pi/2 for pinhole)."""
        if self.model == "pinhole":
            return math.pi / 2.0
        limit = _monotonic_theta_limit(tuple(float(v) for v in self.distortion))
        if self.fov_deg is not None:
            limit = min(limit, math.radians(self.fov_deg) / 2.0)
        return limit

    def to_camera_frame(self, points_world: np.ndarray) -> np.ndarray:  # [N, 3] -> [N, 3]
        """World points expressed in the camera frame."""
        view = self.camera_from_world
        return np.asarray(points_world, np.float64) @ view[:3, :3].T + view[:3, 3]

    def project(self, points_cam: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Project camera-frame points to pixels.

        Args:
            points_cam: [N, 3] points in the camera frame.

        Returns:
            ``(uv [N, 2], valid [N])``; invalid points (behind a pinhole camera,
            outside the fisheye's valid cone) get uv = NaN.
        """
        p = np.asarray(points_cam, np.float64).reshape(-1, 3)
        x, y, z = p[:, 0], p[:, 1], p[:, 2]
        with np.errstate(divide="ignore", invalid="ignore"):
            if self.model == "pinhole":
                valid = z > 0
                u = self.fx * x / z + self.cx
                v = self.fy * y / z + self.cy
            else:
                r = np.hypot(x, y)
                theta = np.arctan2(r, z)
                theta_d = _distort_theta(theta, self.distortion)
                # Near the axis theta_d / r -> 1 / z; use that limit to avoid 0/0.
                axis_limit = 1.0 / np.where(z > 0, z, 1.0)
                scale = np.where(r > 1e-12, theta_d / np.maximum(r, 1e-300), axis_limit)
                valid = (theta < self.max_theta) & (np.linalg.norm(p, axis=1) > 0)
                u = self.fx * scale * x + self.cx
                v = self.fy * scale * y + self.cy
        uv = np.stack([u, v], axis=1)
        uv[~valid] = np.nan
        return uv, valid

    def project_world(self, points_world: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """:meth:`project` for world points: ``(uv [N, 2], valid [N])``."""
        return self.project(self.to_camera_frame(points_world))

    def unproject(self, uv: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Unit ray directions (camera frame) through pixel coordinates.

        Args:
            uv: [N, 2] pixel coordinates (pixel-centre convention).

        Returns:
            ``(rays [N, 3] unit vectors, valid [N])``. Fisheye pixels outside the
            valid image circle are invalid (rays NaN).
        """
        uv = np.asarray(uv, np.float64).reshape(-1, 2)
        mx = (uv[:, 0] - self.cx) / self.fx
        my = (uv[:, 1] - self.cy) / self.fy
        if self.model == "pinhole":
            rays = np.stack([mx, my, np.ones_like(mx)], axis=1)
            return rays / np.linalg.norm(rays, axis=1, keepdims=True), np.ones(len(uv), bool)
        theta_d = np.hypot(mx, my)
        theta = _undistort_theta(theta_d, self.distortion, self.max_theta)
        valid = np.isfinite(theta) & (theta < self.max_theta)
        with np.errstate(invalid="ignore", divide="ignore"):
            sin_over = np.where(theta_d > 1e-12, np.sin(theta) / np.maximum(theta_d, 1e-300), 1.0)
        rays = np.stack([mx * sin_over, my * sin_over, np.cos(theta)], axis=1)
        rays[~valid] = np.nan
        return rays, valid

    def pixel_rays(self) -> tuple[np.ndarray, np.ndarray]:
        """Rays through every pixel centre: ``(rays [H, W, 3], valid [H, W])`` (camera frame).

        The arrays depend only on the intrinsics, are cached, and are read-only.
        """
        key = (self.model, self.width, self.height, self.fx, self.fy, self.cx, self.cy,
               self.distortion, self.fov_deg)
        return _pixel_rays(key)

    # ------------------------------------------------------------------ dicts
    def to_dict(self) -> dict:
        """JSON-able dict (this module's camera-file entry)."""
        out = {
            "name": self.name,
            "model": self.model,
            "width": self.width,
            "height": self.height,
            "fx": self.fx,
            "fy": self.fy,
            "cx": self.cx,
            "cy": self.cy,
            "world_from_camera": self.world_from_camera.tolist(),
        }
        if self.model == "fisheye":
            out["distortion"] = list(self.distortion)
            out["fov_deg"] = self.fov_deg
        if self.opencv_distortion:
            out["opencv_distortion"] = list(self.opencv_distortion)
        return out

    @staticmethod
    def from_dict(data: dict) -> Camera:
        """Inverse of :meth:`to_dict`; missing keys raise a ValueError naming them."""
        required = ("model", "width", "height", "fx", "fy", "cx", "cy", "world_from_camera")
        missing = [k for k in required if k not in data]
        if missing:
            raise ValueError(f"camera entry {data.get('name', '?')!r} lacks keys {missing}; "
                             f"each entry needs {list(required)}")
        return Camera(
            model=data["model"], width=data["width"], height=data["height"], fx=data["fx"],
            fy=data["fy"], cx=data["cx"], cy=data["cy"],
            world_from_camera=np.asarray(data["world_from_camera"], dtype=np.float64),
            distortion=tuple(data.get("distortion", (0.0, 0.0, 0.0, 0.0))),
            fov_deg=data.get("fov_deg"), name=str(data.get("name", "")),
            opencv_distortion=tuple(data.get("opencv_distortion", ())),
        )


@functools.lru_cache(maxsize=16)
def _pixel_rays(key: tuple) -> tuple[np.ndarray, np.ndarray]:  # -> [H, W, 3], [H, W]
    model, width, height, fx, fy, cx, cy, distortion, fov_deg = key
    cam = Camera(model, width, height, fx, fy, cx, cy, np.eye(4), distortion=distortion,
                 fov_deg=fov_deg)
    jj, ii = np.meshgrid(np.arange(width) + 0.5, np.arange(height) + 0.5)
    rays, valid = cam.unproject(np.stack([jj.ravel(), ii.ravel()], axis=1))
    rays, valid = rays.reshape(height, width, 3), valid.reshape(height, width)
    rays.setflags(write=False)
    valid.setflags(write=False)
    return rays, valid


# --------------------------------------------------------------------------- validation
def _validated_pose(pose: np.ndarray, name: str) -> np.ndarray:  # [4, 4] -> [4, 4]
    pose = np.array(pose, dtype=np.float64)
    if pose.shape != (4, 4):
        raise ValueError(f"camera {name!r} world_from_camera has shape {pose.shape}; expected 4x4")
    if not np.isfinite(pose).all():
        raise ValueError(
            f"camera {name!r} world_from_camera contains NaN/Inf; fix the pose in the camera file"
        )
    if not np.allclose(pose[3], [0, 0, 0, 1], atol=RIGID_TOLERANCE):
        raise ValueError(
            f"camera {name!r} world_from_camera last row is {pose[3]}; expected [0 0 0 1]"
        )
    rot = pose[:3, :3]
    err = np.abs(rot.T @ rot - np.eye(3)).max()
    det = np.linalg.det(rot)
    if err > RIGID_TOLERANCE or abs(det - 1.0) > RIGID_TOLERANCE:
        raise ValueError(
            f"camera {name!r} world_from_camera rotation is not rigid (|R^T R - I| = {err:.2g}, "
            f"det = {det:.4g}); remove scale/shear (e.g. orthonormalise with an SVD) "
            "and use a right-handed rotation"
        )
    pose[3] = (0.0, 0.0, 0.0, 1.0)
    pose.setflags(write=False)
    return pose


def _distort_theta(theta: np.ndarray, k: Sequence[float]) -> np.ndarray:  # [...] -> [...]
    t2 = theta * theta
    return theta * (1.0 + t2 * (k[0] + t2 * (k[1] + t2 * (k[2] + t2 * k[3]))))


def _distort_theta_derivative(  # [...] -> [...]
    theta: np.ndarray, k: Sequence[float]
) -> np.ndarray:
    t2 = theta * theta
    return 1.0 + t2 * (3 * k[0] + t2 * (5 * k[1] + t2 * (7 * k[2] + t2 * 9 * k[3])))


@functools.lru_cache(maxsize=256)  # a renderer asks once per frame and culling pass
def _monotonic_theta_limit(k: tuple[float, ...]) -> float:
    """First angle in (0, pi] where d theta_d / d theta <= 0, or pi if none."""
    grid = np.linspace(0.0, math.pi, 4097)
    bad = np.nonzero(_distort_theta_derivative(grid, k) <= 0)[0]
    return float(grid[bad[0]]) if len(bad) else math.pi


def _undistort_theta(theta_d: np.ndarray, k: Sequence[float], max_theta: float) -> np.ndarray:
    """Invert theta_d(theta) on [0, max_theta] by Newton's method; NaN outside the range."""
    theta = np.clip(theta_d, 0.0, max_theta)
    for _ in range(_FISHEYE_NEWTON_STEPS):
        deriv = np.maximum(_distort_theta_derivative(theta, k), 1e-9)
        theta = np.clip(theta - (_distort_theta(theta, k) - theta_d) / deriv, 0.0, max_theta)
    ok = np.abs(_distort_theta(theta, k) - theta_d) < 1e-6 * np.maximum(1.0, theta_d)
    return np.where(ok, theta, np.nan)


# --------------------------------------------------------------------------- trajectories
def orbit(center: Sequence[float], *, radius: float, height: float, num_views: int,
          start_deg: float = 0.0, sweep_deg: float = 360.0,
          up: Sequence[float] = (0.0, 0.0, 1.0)) -> np.ndarray:  # [num_views, 4, 4]
    """Poses on a horizontal circle around ``center`` all looking at it.

    Args:
        center: World point looked at (metres).
        radius: Circle radius in metres (> 0).
        height: Camera height above ``center`` in metres.
        num_views: Number of poses (>= 1).
        start_deg: Azimuth of the first pose in degrees (0 = +x of ``center``).
        sweep_deg: Total azimuth covered; 360 spaces views evenly without repeating the first.
        up: World up direction (the circle lies in the plane orthogonal to z; pass
            ``up`` only to change the image's up direction).
    """
    if radius <= 0 or num_views < 1:
        raise ValueError(f"orbit needs radius > 0 and num_views >= 1 (got {radius}, {num_views})")
    center = np.asarray(center, np.float64)
    closed = abs(sweep_deg % 360.0) < 1e-9
    steps = num_views if closed else max(num_views - 1, 1)
    angles = np.radians(start_deg + sweep_deg * np.arange(num_views) / steps)
    eyes = center + np.stack(
        [radius * np.cos(angles), radius * np.sin(angles), np.full_like(angles, height)], axis=1
    )
    return np.stack([look_at(e, center, up) for e in eyes])


def interpolate_poses(poses: np.ndarray, times: Sequence[float]) -> np.ndarray:  # [T, 4, 4]
    """Piecewise pose interpolation: slerp on rotation, linear on position.

    Args:
        poses: [K, 4, 4] key poses (K >= 1), at key times 0, 1, ..., K-1.
        times: [T] query times in [0, K-1].

    Returns:
        [T, 4, 4] interpolated rigid poses.
    """
    from scipy.spatial.transform import Rotation, Slerp

    poses = np.asarray(poses, np.float64)
    times = np.asarray(times, np.float64)
    for i, p in enumerate(poses):
        _validated_pose(p, f"key pose {i}")
    if len(poses) == 1:
        return np.repeat(poses, len(times), axis=0)
    if times.size and (times.min() < 0 or times.max() > len(poses) - 1):
        raise ValueError(f"interpolate_poses: times must lie in [0, {len(poses) - 1}]")
    keys = np.arange(len(poses), dtype=np.float64)
    rotations = Slerp(keys, Rotation.from_matrix(poses[:, :3, :3]))(times).as_matrix()
    out = np.tile(np.eye(4), (len(times), 1, 1))
    out[:, :3, :3] = rotations
    for axis in range(3):
        out[:, axis, 3] = np.interp(times, keys, poses[:, axis, 3])
    return out
