"""Camera rigs: any number of calibrated cameras per robot (wrist-mounted or exterior).

A rig is a list of :class:`RigCamera` - a name (observation key ``<name>_rgb``),
a mount (``"wrist"``: rigid in the TCP frame; ``"world"``: fixed), the mount
pose and the intrinsics (a :class:`~bench.scene.cameras.Camera` at the identity
pose). :func:`make_rig` builds one from a preset name or a rig file:

* ``"wrist"`` (default): today's single wrist fisheye (``wrist_rgb``), the
  robot's camera body and ``EnvConfig``'s fisheye settings
  (:func:`wrist_camera_model`) - unchanged.
* ``"yubi-dual"``: YUBI's two 200-degree fisheyes either side of the gripper
  (``wrist_left_rgb``, ``wrist_right_rgb``), equidistant unless
  ``fisheye_distortion`` is set, at ``image_size``.
* a rig file (JSON)::

    {"cameras": [
      {"name": "wrist_left", "mount": "wrist",
       "position": [-0.045, -0.06, -0.10], "rotation_deg": [0, -15, 0],
       "calibration": "calib/left.yaml"},
      {"name": "front", "mount": "world",
       "position": [0.0, -0.9, 0.6], "look_at": [0.0, 0.0, 0.05],
       "calibration": {"model": "pinhole", "K": [[160, 0, 160], [0, 160, 120], [0, 0, 1]],
                       "width": 320, "height": 240}}]}

  ``position`` is metres in the TCP frame (wrist; +z approach, +x finger axis) or
  the world frame (world); ``rotation_deg`` (x-y-z Euler angles, degrees, applied to
  the camera looking along the TCP approach axis) or ``look_at`` (world mount) or a
  4x4 ``pose`` give the orientation. Camera axes are OpenCV's.

Calibration files (:func:`load_calibration`): OpenCV ``cv2.fisheye`` / ``cv2``
calibration YAML (``K`` or ``camera_matrix``, ``D`` or ``distortion_coefficients``,
``image_width`` / ``image_height``) or JSON with ``model``, ``K``, ``D``, ``width``,
``height`` and optionally ``fov_deg``; ``resize: [w, h]`` scales the intrinsics.
Paths are relative to the rig file and must stay inside its folder.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from bench.errors import BenchError
from bench.scene.cameras import Camera, look_at

MOUNTS = ("wrist", "world")
PRESETS = ("wrist", "yubi-dual")
YUBI_BASELINE = 0.045  # m from the jaw centre to each lens, along the finger axis
YUBI_TOE_OUT_DEG = 15.0  # each lens turned outwards about the TCP y axis


@dataclass(frozen=True, eq=False)
class RigCamera:
    """One camera of a rig.

    Attributes:
        name: Observation key stem (``<name>_rgb``), ``[A-Za-z0-9][A-Za-z0-9._-]*``.
        mount: "wrist" (rides on the hand) or "world" (fixed).
        pose: [4, 4] ``tcp_from_camera`` (wrist) or ``world_from_camera`` (world), OpenCV
            axes; None = the robot's own wrist-camera body (the default ``wrist`` camera).
        intrinsics: The camera model at the identity pose.
    """

    name: str
    mount: str
    pose: np.ndarray | None
    intrinsics: Camera

    @property
    def key(self) -> str:
        """Observation key of the camera (``<name>_rgb``)."""
        return f"{self.name}_rgb"

    def world_pose(self, world_from_tcp: np.ndarray, robot_camera: np.ndarray) -> np.ndarray:
        """World-from-camera [4, 4] given the TCP pose and the robot's camera-body pose."""
        if self.pose is None:
            return robot_camera
        return world_from_tcp @ self.pose if self.mount == "wrist" else self.pose


def _matrix(value: Any, what: str) -> np.ndarray:
    arr = np.asarray(value, dtype=np.float64)
    if arr.shape != (3, 3) or not np.all(np.isfinite(arr)):
        raise BenchError(f"{what}: K must be a 3x3 matrix of finite numbers")
    return arr


def calibration_from_dict(data: dict, *, what: str) -> Camera:
    """Intrinsics (identity pose) from a calibration mapping (``K``, ``D``, size, model)."""
    model = str(data.get("model", "fisheye"))
    if model not in ("fisheye", "pinhole"):
        raise BenchError(f"{what}: model {model!r} is not 'fisheye' or 'pinhole'")
    if "K" not in data or "width" not in data or "height" not in data:
        raise BenchError(f"{what}: a calibration needs K, width and height (and D for fisheye)")
    k = _matrix(data["K"], what)
    dist = np.asarray(data.get("D", [0.0, 0.0, 0.0, 0.0]), np.float64).ravel()
    if model == "fisheye" and dist.size != 4:
        raise BenchError(f"{what}: fisheye D must be the 4 Kannala-Brandt k1..k4 of "
                         f"cv2.fisheye, got {dist.size} values")
    if model == "pinhole" and np.any(dist != 0):
        raise BenchError(f"{what}: pinhole calibration with distortion {dist.tolist()}; use a "
                         "fisheye model or undistorted intrinsics")
    try:
        camera = Camera(model, int(data["width"]), int(data["height"]), k[0, 0], k[1, 1],
                        k[0, 2], k[1, 2], np.eye(4),
                        distortion=tuple(dist[:4]) if model == "fisheye" else (0, 0, 0, 0),
                        fov_deg=data.get("fov_deg") if model == "fisheye" else None)
    except (TypeError, ValueError) as exc:
        raise BenchError(f"{what}: {exc}") from None
    if "resize" in data:
        width, height = (int(v) for v in data["resize"])
        camera = camera.resized(width, height)
    return camera


def load_calibration(path: str | Path, *, fov_deg: float | None = None) -> Camera:
    """Intrinsics from a cv2 calibration YAML / JSON file (see the module docstring)."""
    path = Path(path)
    if not path.is_file():
        raise BenchError(f"calibration file {path} not found; fix the path in the rig file")
    what = f"calibration {path}"
    if path.suffix.lower() in (".yaml", ".yml"):
        data = _read_cv_yaml(path)
    elif path.suffix.lower() == ".json":
        from bench.provenance import read_json

        data = read_json(path, what="calibration file", fix="fix the JSON")
        if not isinstance(data, dict):
            raise BenchError(f"{what}: must hold a JSON object")
    else:
        raise BenchError(f"{what}: use a .yaml (OpenCV FileStorage) or .json file")
    if fov_deg is not None and "fov_deg" not in data:
        data["fov_deg"] = fov_deg
    return calibration_from_dict(data, what=what)


def _read_cv_yaml(path: Path) -> dict:
    """K, D, width, height from an OpenCV FileStorage YAML (cv2.fisheye.calibrate output)."""
    import cv2

    storage = cv2.FileStorage(str(path), cv2.FILE_STORAGE_READ)
    if not storage.isOpened():
        raise BenchError(f"calibration {path}: OpenCV cannot read it; write it with "
                         "cv2.FileStorage (YAML)")

    def node(*names):
        for name in names:
            item = storage.getNode(name)
            if not item.empty():
                return item
        return None

    k_node = node("K", "camera_matrix")
    if k_node is None:
        raise BenchError(f"calibration {path}: no K / camera_matrix")
    data: dict[str, Any] = {"K": k_node.mat()}
    d_node = node("D", "distortion_coefficients")
    data["D"] = d_node.mat().ravel().tolist() if d_node is not None else [0.0] * 4
    width, height = node("image_width", "width"), node("image_height", "height")
    if width is None or height is None:
        raise BenchError(f"calibration {path}: no image_width / image_height")
    data["width"], data["height"] = int(width.real()), int(height.real())
    model = node("model", "camera_model", "distortion_model")
    text = model.string() if model is not None else ""
    data["model"] = "pinhole" if text in ("pinhole", "plumb_bob", "radtan") and not any(
        data["D"]) else "fisheye"
    if data["model"] == "fisheye" and len(data["D"]) != 4:
        raise BenchError(f"calibration {path}: D has {len(data['D'])} values; cv2.fisheye "
                         "calibrations have 4 (k1..k4)")
    fov = node("fov_deg")
    if fov is not None:
        data["fov_deg"] = float(fov.real())
    storage.release()
    return data


def _rotation(deg: Any, what: str) -> np.ndarray:  # [3, 3]
    from scipy.spatial.transform import Rotation

    angles = np.asarray(deg, np.float64)
    if angles.shape != (3,) or not np.all(np.isfinite(angles)):
        raise BenchError(f"{what}: rotation_deg must be three angles in degrees")
    return Rotation.from_euler("xyz", angles, degrees=True).as_matrix()


def _pose(entry: dict, mount: str, what: str) -> np.ndarray:
    if "pose" in entry:
        arr = np.asarray(entry["pose"], np.float64)
        if arr.shape != (4, 4):
            raise BenchError(f"{what}: pose must be a 4x4 matrix")
        return arr
    position = np.asarray(entry.get("position", [0.0, 0.0, 0.0]), np.float64)
    if position.shape != (3,) or not np.all(np.isfinite(position)):
        raise BenchError(f"{what}: position must be [x, y, z] in metres")
    if "look_at" in entry:
        if mount != "world":
            raise BenchError(f"{what}: look_at is for world-mounted cameras; use rotation_deg")
        return look_at(position, entry["look_at"])
    out = np.eye(4)
    out[:3, :3] = _rotation(entry.get("rotation_deg", [0.0, 0.0, 0.0]), what)
    out[:3, 3] = position
    return out


def load_rig(path: str | Path) -> list[RigCamera]:
    """A rig file (see the module docstring) -> its cameras."""
    from bench.provenance import read_json
    from bench.sim.meshes import resolve_relative
    from bench.sim.taskfile import NAME_PATTERN

    path = Path(path)
    data = read_json(path, what="camera rig file", fix="fix the JSON")
    cameras = data.get("cameras") if isinstance(data, dict) else None
    if not isinstance(cameras, list) or not cameras:
        raise BenchError(f"{path}: a rig file is {{\"cameras\": [ ... ]}} with at least one camera")
    rig, seen = [], set()
    for index, entry in enumerate(cameras):
        what = f"{path}: cameras[{index}]"
        if not isinstance(entry, dict):
            raise BenchError(f"{what}: must be an object")
        unknown = sorted(set(entry) - {"name", "mount", "pose", "position", "rotation_deg",
                                       "look_at", "calibration", "fov_deg"})
        if unknown:
            raise BenchError(f"{what}: unknown keys {unknown}")
        name = entry.get("name")
        if not isinstance(name, str) or not NAME_PATTERN.fullmatch(name) or name in seen:
            raise BenchError(f"{what}: name {name!r} must be unique and match "
                             "[A-Za-z0-9][A-Za-z0-9._-]*")
        seen.add(name)
        mount = entry.get("mount", "wrist")
        if mount not in MOUNTS:
            raise BenchError(f"{what}: mount {mount!r} is not one of {MOUNTS}")
        calibration = entry.get("calibration")
        if isinstance(calibration, str):
            intrinsics = load_calibration(
                resolve_relative(path.parent, calibration, what=f"{what}.calibration"),
                fov_deg=entry.get("fov_deg"))
        elif isinstance(calibration, dict):
            intrinsics = calibration_from_dict(calibration, what=f"{what}.calibration")
        else:
            raise BenchError(f"{what}: calibration must be a file name or an object with K, D, "
                             "width, height")
        rig.append(RigCamera(name, mount, _pose(entry, mount, what),
                             intrinsics.replace(name=name)))
    return rig


def fisheye_intrinsics(  # the EnvConfig fisheye at the identity pose
    size: tuple[int, int], fov_deg: float, distortion: tuple[float, ...], name: str
) -> Camera:
    """A centred fisheye whose ``fov_deg`` circle fits the shorter side of ``size`` (h, w)."""
    h, w = size
    theta = math.radians(fov_deg / 2.0)
    k1, k2, k3, k4 = distortion
    theta_d = theta * (1 + k1 * theta**2 + k2 * theta**4 + k3 * theta**6 + k4 * theta**8)
    if theta_d <= 0:
        raise ValueError(
            f"fisheye_distortion {distortion} folds the lens before {fov_deg / 2} degrees; "
            "check the calibration"
        )
    f = 0.5 * min(w, h) / theta_d
    return Camera("fisheye", w, h, f, f, w / 2.0, h / 2.0, np.eye(4),
                  distortion=tuple(distortion), fov_deg=fov_deg, name=name)


def yubi_dual(config, *, camera_offset: tuple[float, float, float]) -> list[RigCamera]:
    """YUBI's dual 200-degree wrist fisheyes, either side of the jaw, toed out 15 degrees."""
    cams = []
    for name, sign in (("wrist_left", -1.0), ("wrist_right", 1.0)):
        tcp_from_camera = np.eye(4)
        tcp_from_camera[:3, :3] = _rotation([0.0, sign * YUBI_TOE_OUT_DEG, 0.0], name)
        tcp_from_camera[:3, 3] = np.asarray(camera_offset) + [sign * YUBI_BASELINE, 0.0, 0.0]
        intrinsics = fisheye_intrinsics(config.image_size, 200.0, config.fisheye_distortion,
                                        name)
        cams.append(RigCamera(name, "wrist", tcp_from_camera, intrinsics))
    return cams


def wrist_camera_model(config) -> Camera:
    """The wrist fisheye of an ``EnvConfig``, at the identity pose.

    Kannala-Brandt with ``config.fisheye_distortion`` (zeros: equidistant), focal length
    chosen so the ``config.fisheye_fov_deg`` circle fits the shorter image side.
    """
    return fisheye_intrinsics(config.image_size, config.fisheye_fov_deg,
                              config.fisheye_distortion, "wrist")


def make_rig(config, robot) -> list[RigCamera]:
    """The cameras of an env: ``config.cameras`` is "wrist", "yubi-dual" or a rig file path."""
    name = config.cameras
    if name == "wrist":
        return [RigCamera("wrist", "wrist", None, wrist_camera_model(config))]
    if name == "yubi-dual":
        gripper = getattr(robot, "config", None)
        gripper = getattr(gripper, "gripper", gripper)
        offset = getattr(gripper, "camera_offset", (0.0, -0.06, -0.10))
        return yubi_dual(config, camera_offset=tuple(offset))
    if str(name).lower().endswith(".json"):
        return load_rig(name)
    raise BenchError(f"cameras={name!r} is neither a preset {PRESETS} nor a rig .json file")
