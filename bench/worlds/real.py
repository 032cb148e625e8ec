"""The demo's "real" domain: bench.sim physics and robot inside a ground-truth room.

:func:`make_real_env` builds a :class:`~bench.sim.env.SplatBenchEnv` whose MuJoCo
model carries a room of :mod:`bench.worlds.rooms` (added through the
``world_decorator`` hook of the env / ``decorate`` of :class:`~bench.sim.world.World`,
visual geoms only, so the physics is the same as in the simulated domain), with
``background="none"`` (no Gaussians: MuJoCo draws room, table, robot and
objects in one pass, wrist fisheyes through the same cube-map remap) and
``shadows=True``. The returned :class:`SensorWrapper` passes every ``<camera>_rgb``
observation through the world's sensor model, the noise seeded by
``(sensor.seed, camera index + 16 * condition, frame)``, so a rerun is byte-identical.

Cameras: :func:`demo_rig` is the ``yubi-dual`` preset (two 200-degree fisheyes
45 mm either side of the jaw, 60 mm behind and 100 mm above the TCP, toed out
15 degrees) tilted forward by :data:`DEMO_TILT_DEG` about the TCP x axis (the
finger axis), as on a handheld gripper whose cameras look past the fingers: with
the jaw pointing down, an untilted 200-degree lens sees at most 10 degrees above
the horizon, the tilted one up to 55 degrees, so the ceiling over the table is in
view during approach and transport (measured by the demo's
``bench.demo.visibility.ceiling_fraction``).
The rig replaces ``env.rig`` before the first render (same keys and image sizes, so
the observation space is unchanged).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import gymnasium as gym
import numpy as np

from bench.scene.bundle import SceneBundle
from bench.scene.gaussians import GaussianSplats
from bench.worlds.rooms import WorldConfig, get_world, room_decorator
from bench.worlds.sensor import apply_sensor

DEMO_TILT_DEG = 45.0  # forward tilt of the demo's wrist fisheyes (see the module docstring)


def tilt_rig(rig: list, tilt_deg: float) -> list:
    """Wrist cameras of ``rig`` rotated by ``tilt_deg`` about the TCP x axis (towards TCP +y).

    ``tcp_from_camera <- R_x(-tilt) @ tcp_from_camera``: the optical axis (TCP +z when
    untilted) turns towards +y, the side of the fingers away from the camera mount
    (the mount is at TCP y = -0.06 m). World-mounted cameras are returned unchanged.
    """
    from bench.sim.camera_rig import RigCamera

    a = math.radians(-tilt_deg)
    rot = np.eye(4)
    rot[1:3, 1:3] = [[math.cos(a), -math.sin(a)], [math.sin(a), math.cos(a)]]
    out = []
    for cam in rig:
        if cam.mount != "wrist" or cam.pose is None:
            out.append(cam)
            continue
        pose = cam.pose.copy()
        pose[:3, :3] = rot[:3, :3] @ pose[:3, :3]
        out.append(RigCamera(cam.name, cam.mount, pose, cam.intrinsics))
    return out


def demo_rig(config: Any, robot: Any, *, tilt_deg: float = DEMO_TILT_DEG) -> list:
    """The ``yubi-dual`` rig of ``config`` (an EnvConfig) tilted forward by ``tilt_deg``."""
    from bench.sim.camera_rig import make_rig

    return tilt_rig(make_rig(config.replace(cameras="yubi-dual"), robot), tilt_deg)


def ground_truth_scene(world: WorldConfig | str) -> SceneBundle:
    """A scene bundle with the room's table and no Gaussians (the env needs a table spec)."""
    config = get_world(world)
    return SceneBundle(name=config.name, background=GaussianSplats.empty(sh_degree=0),
                       table=config.table_spec())


class SensorWrapper(gym.Wrapper):
    """Applies a world's sensor model to every ``<camera>_rgb`` observation.

    Args:
        env: A splatbench env (rgb observations).
        world: The world whose ``sensor`` config is applied.
    """

    def __init__(self, env: gym.Env, world: WorldConfig) -> None:
        super().__init__(env)
        self.world = world
        base = env.unwrapped
        self._valid = {
            cam.key: (cam.intrinsics.pixel_rays()[1] if cam.intrinsics.model == "fisheye"
                      else None)
            for cam in base.rig
        }
        self._streams = {cam.key: index for index, cam in enumerate(base.rig)}

    def _apply(self, obs: dict, info: dict) -> dict:
        out = dict(obs)
        for key, valid in self._valid.items():
            if key in out:
                stream = self._streams[key] + 16 * int(info["condition"])
                out[key] = apply_sensor(out[key], self.world.sensor, frame=int(info["frame"]),
                                        stream=stream, valid=valid)
        return out

    def reset(self, **kwargs: Any):
        """Reset the env; returns ``(obs, info)`` with the sensor model applied to the images."""
        obs, info = self.env.reset(**kwargs)
        return self._apply(obs, info), info

    def step(self, action):
        """Step the env; returns the gym 5-tuple with the sensor model applied to the images."""
        obs, reward, terminated, truncated, info = self.env.step(action)
        return self._apply(obs, info), reward, terminated, truncated, info


def make_real_env(world: WorldConfig | str, task: str = "cup", *,
                  tilt_deg: float | None = DEMO_TILT_DEG, sensor: bool = True,
                  **overrides: Any) -> gym.Env:
    """A "real"-domain env: ``task`` in ground-truth room ``world``.

    Args:
        world: A :class:`~bench.worlds.rooms.WorldConfig` or id (``gt-duo``, ...).
        task: Task name or file (as :class:`~bench.sim.env.SplatBenchEnv`).
        tilt_deg: Forward tilt of the ``yubi-dual`` rig (:func:`demo_rig`); None keeps
            ``cameras`` as given in ``overrides`` (default ``yubi-dual`` untilted).
        sensor: Wrap in :class:`SensorWrapper` (False: the clean MuJoCo images).
        **overrides: :class:`~bench.sim.config.EnvConfig` fields (e.g. ``image_size``).

    Returns:
        The env (a :class:`SensorWrapper` unless ``sensor`` is False).
    """
    from bench.sim.env import SplatBenchEnv

    config = get_world(world)
    settings = {"cameras": "yubi-dual", "shadows": True, **overrides, "background": "none"}
    env = SplatBenchEnv(task, ground_truth_scene(config), world_decorator=room_decorator(config),
                        **settings)
    if tilt_deg is not None and env.config.cameras == "yubi-dual":
        env.rig = demo_rig(env.config, env.world.robot, tilt_deg=tilt_deg)
    if sensor and env.config.obs_mode == "rgb":
        return SensorWrapper(env, config)
    return env


@dataclass(frozen=True)
class RealDomainConfig:
    """The demo's "real"-domain render settings: the one source for demonstrations and evaluation.

    The learned policies (:mod:`bench.policies.learned`) are trained on demonstrations
    recorded with these settings (:mod:`bench.demo.demos`) and the demo evaluates its
    "real" trials with the same ones (:meth:`make_env`).

    Attributes:
        image_size: Wrist image (height, width) per fisheye, pixels.
        shadows: MuJoCo shadow maps. Off: about 7x cheaper per query in software GL at
            64 x 64 (docs/demo-worlds.md "Speed"; docs/demo-policies.md for the measurement
            that chose it), so hundreds of "real" rollouts fit a 15-minute demo.
        tilt_deg: Forward tilt of the ``yubi-dual`` wrist fisheyes (:func:`demo_rig`).
        sensor: Apply the world's sensor model (noise, exposure, white balance, vignetting).
        max_frames: Episode time limit, 10 Hz frames (the scripted expert needs about 40;
            200 bounds the cost of a failing policy's episode).
    """

    image_size: tuple[int, int] = (64, 64)
    shadows: bool = False
    tilt_deg: float = DEMO_TILT_DEG
    sensor: bool = True
    max_frames: int = 200

    def __post_init__(self) -> None:
        object.__setattr__(self, "image_size", tuple(int(v) for v in self.image_size))
        if len(self.image_size) != 2 or min(self.image_size) < 8:
            raise ValueError(f"image_size must be (height, width) >= 8 px, got {self.image_size}")
        if self.max_frames < 1:
            raise ValueError(f"max_frames must be >= 1, got {self.max_frames}")

    def to_json(self) -> dict[str, Any]:
        """The resolved settings as a JSON-ready dict."""
        return {"image_size": list(self.image_size), "shadows": self.shadows,
                "tilt_deg": self.tilt_deg, "sensor": self.sensor, "max_frames": self.max_frames}

    def make_env(self, world: WorldConfig | str, task: str = "cup", **overrides: Any) -> gym.Env:
        """:func:`make_real_env` of ``world`` and ``task`` with these settings.

        Args:
            world: World config or id (``gt-duo``, ``gt-flat``, ``gt-g2``).
            task: ``cup``, ``tape`` or ``pen``.
            **overrides: Further :class:`~bench.sim.config.EnvConfig` fields (``execute``,
                ``max_frames``, ...); ``image_size`` and ``shadows`` come from this config.
        """
        return make_real_env(world, task, tilt_deg=self.tilt_deg, sensor=self.sensor,
                             **{"max_frames": self.max_frames, **overrides,
                                "image_size": self.image_size,
                                "shadows": self.shadows})


#: The settings the demo's "real" domain uses (demonstrations and evaluation).
REAL_DOMAIN = RealDomainConfig()


def make_env(world: WorldConfig | str, task: str = "cup", *,
             config: RealDomainConfig = REAL_DOMAIN, **overrides: Any) -> gym.Env:
    """A "real"-domain env with the demo's settings (:data:`REAL_DOMAIN` unless ``config``)."""
    return config.make_env(world, task, **overrides)
