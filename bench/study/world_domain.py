"""The ``world`` real domain: a study's "real" rollouts in a MuJoCo ground-truth world.

With ``real_domain: "world"`` the study's "real" trials run in the ground-truth
rooms of :mod:`bench.worlds.rooms` (MuJoCo-rendered room, table, robot and objects,
the world's sensor model; :func:`bench.worlds.real.make_real_env`) while the simulated
trials run on the scene bundles (the reconstructions of those worlds), so "real vs
sim" is ground truth vs reconstruction, as in YUBI. The spec's ``real_world`` object
is :class:`WorldDomain`::

    "real_domain": "world",
    "real_world": {"worlds": {"duo": "gt-duo", "flat": "gt-flat", "g2": "gt-g2"},
                   "cameras": "yubi-dual", "tilt_deg": 45, "shadows": false}

The optional ``mesh_lights`` (scene -> :class:`bench.sim.lighting.MeshLights` as JSON)
lights the simulated domain's meshes (robot, task objects) with lights estimated for that
scene (``bench demo lights``) instead of the task world's headlight and sun; the Gaussians
are unchanged. A scene without an entry keeps the task world's lights.

The optional ``background_color`` (scene -> :meth:`bench.align.color.ColorFit.to_dict`, e.g.
``{"degree": 2, "coefficients": [[a0, a1, a2], [...], [...]]}``) maps the simulated domain's
background Gaussians' base colours through that per-channel polynomial (real2sim-eval's colour
alignment of the reconstruction to the robot's camera; ``python -m bench.demo.color_align``
fits it on training states), in every condition of that scene; Test and Probe views are
scored on the unaligned bundles. A scene without an entry keeps its Gaussians' colours.

Both domains use the same camera rig (``cameras``, tilted by ``tilt_deg`` when it is
``yubi-dual``), image size and time limits, so a policy sees the same observation
space in both; the physics, robot, task objects, grasp rule and success test are the
same code. The optional physics offset ``friction_scale`` / ``mass_scale`` (applied to
the task objects of the "real" world only) makes the real domain differ from the
simulator in its dynamics too; the default 1.0 / 1.0 is no offset.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from bench.errors import BenchError

#: The per-scene settings maps of ``real_world``: field -> (what an entry is, what it needs).
SCENE_MAPS = {
    "mesh_lights": ("lights", "ambient, headlight and directional (see bench demo lights)"),
    "background_color": ("colour map", "coefficients: 3 rows of degree + 1 numbers (see "
                                       "python -m bench.demo.color_align)"),
}


def _parser(name: str) -> Any:
    """The JSON parser of the scene map ``name`` (heavy imports lazy)."""
    if name == "mesh_lights":
        from bench.sim.lighting import MeshLights

        return MeshLights.from_json
    from bench.align.color import ColorFit

    return ColorFit.from_dict


#: Label of the world real domain in tables, manifests and the store's ``real_source``.
WORLD_REAL = "ground-truth-world"
CAMERAS = ("wrist", "yubi-dual")


@dataclass(frozen=True)
class WorldDomain:
    """Typed ``"real_world"`` block of a spec (the single source of its defaults).

    Attributes:
        worlds: Scene name -> ground-truth world id (``bench.worlds.rooms.WORLDS``).
        cameras: Camera rig of both domains: ``"wrist"`` (one fisheye, ``wrist_rgb``) or
            ``"yubi-dual"`` (``wrist_left_rgb`` + ``wrist_right_rgb``).
        tilt_deg: Forward tilt of the ``yubi-dual`` fisheyes in both domains, degrees
            (:func:`bench.worlds.real.demo_rig`; 0 keeps the preset's mount).
        shadows: MuJoCo shadows in the ground-truth world (the simulated domain's shadows
            are ``deployment.shadows``). Off by default, as the demo's real domain
            (``bench.worlds.real.RealDomainConfig``): ~5-7x cheaper per rollout in software GL.
        sensor: Apply the world's sensor model (noise, exposure, white balance, vignetting).
        friction_scale: Physics offset: the real world's task-object friction x this (1: none).
        mass_scale: Physics offset: the real world's task-object mass x this (1: none).
        mesh_lights: Scene -> the simulated domain's mesh lights
            (:meth:`bench.sim.lighting.MeshLights.to_json`); a scene without an entry keeps
            the task world's own lights.
        background_color: Scene -> the simulated domain's background colour map
            (:meth:`bench.align.color.ColorFit.to_dict`); a scene without an entry keeps the
            Gaussians' own colours. Left out of :meth:`to_json` when empty, so specs written
            before it existed keep their stored text (and resume).
    """

    worlds: dict[str, str] = field(default_factory=dict)
    cameras: str = "yubi-dual"
    tilt_deg: float = 45.0
    shadows: bool = False
    sensor: bool = True
    friction_scale: float = 1.0
    mass_scale: float = 1.0
    mesh_lights: dict[str, Any] = field(default_factory=dict)
    background_color: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> WorldDomain:
        """From the spec's ``real_world`` object; unknown keys and bad values are refused."""
        if not isinstance(data, Mapping):
            raise BenchError(f"spec key 'real_world' must be an object, got {data!r}")
        known = [f.name for f in dataclasses.fields(cls)]
        unknown = sorted(set(data) - set(known))
        if unknown:
            raise BenchError(f"unknown real_world keys {unknown}; valid keys: {known}")
        return cls(**dict(data))

    def __post_init__(self) -> None:
        if not isinstance(self.worlds, Mapping) or not all(
                isinstance(k, str) and isinstance(v, str) for k, v in self.worlds.items()):
            raise BenchError(f"real_world worlds must be an object scene -> world id, got "
                             f"{self.worlds!r}")
        object.__setattr__(self, "worlds", dict(self.worlds))
        if self.cameras not in CAMERAS:
            raise BenchError(f"real_world cameras must be one of {list(CAMERAS)}, got "
                             f"{self.cameras!r}")
        for name in ("tilt_deg", "friction_scale", "mass_scale"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(
                    value):
                raise BenchError(f"real_world {name} must be a number, got {value!r}")
        if not -90 <= self.tilt_deg <= 90:
            raise BenchError(f"real_world tilt_deg must be in [-90, 90], got {self.tilt_deg}")
        for name in ("friction_scale", "mass_scale"):
            if not 0 < getattr(self, name) <= 10:
                raise BenchError(f"real_world {name} must be in (0, 10], got "
                                 f"{getattr(self, name)}; 1 is no offset")
        for name in ("shadows", "sensor"):
            if not isinstance(getattr(self, name), bool):
                raise BenchError(f"real_world {name} must be true or false, got "
                                 f"{getattr(self, name)!r}")
        for name in SCENE_MAPS:
            self._check_scene_map(name)

    def _check_scene_map(self, name: str) -> None:
        """A scene -> settings field: an object naming only scenes with a world, each parsed."""
        value = getattr(self, name)
        if not isinstance(value, Mapping):
            raise BenchError(f"real_world {name} must be an object scene -> "
                             f"{SCENE_MAPS[name][0]}, got {value!r}")
        object.__setattr__(self, name, dict(value))
        unknown = sorted(set(value) - set(self.worlds))
        if unknown:
            raise BenchError(f"real_world {name} names scenes {unknown} without a world; fix "
                             "the names or add real_world.worlds entries")
        for scene in value:
            self._scene_entry(name, scene)  # refuse a malformed entry here, not in a worker

    def _scene_entry(self, name: str, scene: str) -> Any:
        """``scene``'s parsed entry of the scene map ``name``, or None where it has none."""
        data = getattr(self, name).get(scene)
        if data is None:
            return None
        needs = SCENE_MAPS[name][1]
        try:
            return _parser(name)(data)
        except (KeyError, TypeError, ValueError) as exc:
            raise BenchError(f"real_world {name}[{scene!r}] is malformed ({exc}); it needs "
                             f"{needs}") from None

    def scene_lights(self, scene: str) -> Any:
        """``scene``'s :class:`~bench.sim.lighting.MeshLights`, or None (the world's own)."""
        return self._scene_entry("mesh_lights", scene)

    def scene_color(self, scene: str) -> Any:
        """``scene``'s :class:`~bench.align.color.ColorFit`, or None (the Gaussians' own)."""
        return self._scene_entry("background_color", scene)

    def check_scenes(self, scenes: list[str]) -> None:
        """Every scene has a world and every world entry names a scene."""
        missing = [s for s in scenes if s not in self.worlds]
        if missing:
            raise BenchError(f"real_domain \"world\" needs a ground-truth world for every scene; "
                             f"add real_world.worlds entries for {missing}")
        extra = sorted(set(self.worlds) - set(scenes))
        if extra:
            raise BenchError(f"real_world.worlds names scenes {extra} that are not in the spec "
                             f"(scenes: {scenes}); fix the names")

    def check_registry(self) -> None:
        """Every world id names a ground-truth world ("did you mean" from the registry)."""
        from bench.worlds.rooms import get_world

        for scene, world in self.worlds.items():
            try:
                get_world(world)
            except (KeyError, ValueError) as exc:
                raise BenchError(f"real_world.worlds[{scene!r}]: {str(exc).strip(chr(39))}"
                                 ) from None

    @property
    def physics_offset(self) -> bool:
        """Whether the real world's task objects differ in friction or mass from the simulator's."""
        return (self.friction_scale, self.mass_scale) != (1.0, 1.0)

    def to_json(self) -> dict[str, Any]:
        """The resolved settings as a JSON-ready dict (no ``background_color`` when empty)."""
        data = dataclasses.asdict(self)
        if not self.background_color:
            del data["background_color"]  # added later: older stored specs keep their text
        return data


def world_domain(spec: Any) -> WorldDomain:
    """The spec's :class:`WorldDomain` (defaults when ``real_world`` is empty)."""
    return WorldDomain.from_dict(spec.real_world)


def _rig_overrides(domain: WorldDomain) -> dict[str, Any]:
    return {"cameras": domain.cameras}


def apply_rig(env: Any, domain: WorldDomain) -> None:
    """Tilt the ``yubi-dual`` rig of ``env`` (before its first render), as the world's."""
    from bench.worlds.real import demo_rig

    base = env.unwrapped
    if domain.cameras == "yubi-dual" and domain.tilt_deg:
        base.rig = demo_rig(base.config, base.world.robot, tilt_deg=domain.tilt_deg)


def apply_physics_offset(env: Any, domain: WorldDomain) -> None:
    """Scale the task objects' friction and mass in ``env``'s MuJoCo model (real world only)."""
    if not domain.physics_offset:
        return
    world = env.unwrapped.world
    model = world.model
    bodies = set(world._object_ids.values())  # noqa: SLF001 - the task objects' body ids
    for geom in range(model.ngeom):
        if int(model.geom_bodyid[geom]) in bodies:
            model.geom_friction[geom] *= domain.friction_scale
    for body in bodies:
        model.body_mass[body] *= domain.mass_scale
        model.body_inertia[body] *= domain.mass_scale


def make_domain_env(spec: Any, *, scene: str, task: str, domain: str, bundle: Any,
                    overrides: Mapping[str, Any]) -> Any:
    """The env of one (scene, task) in ``domain`` of a ``real_domain: "world"`` study.

    Args:
        spec: The study (``real_domain == "world"``).
        scene: Scene name (its world: ``real_world.worlds[scene]``).
        task: Task name.
        domain: ``"real"`` (the ground-truth world) or ``"sim"`` (``bundle``).
        bundle: The condition's loaded scene bundle (unused for ``"real"``).
        overrides: EnvConfig fields of the study (image size, time limit, deployment).
    """
    import bench.sim

    settings = WorldDomain.from_dict(spec.real_world)
    if domain == "real":
        from bench.worlds.real import make_real_env

        real = {k: v for k, v in overrides.items() if k not in ("render_backend", "shadows")}
        env = make_real_env(settings.worlds[scene], task, tilt_deg=settings.tilt_deg,
                            sensor=settings.sensor, shadows=settings.shadows,
                            **_rig_overrides(settings), **real)
        apply_physics_offset(env, settings)
        return env
    color = settings.scene_color(scene)
    if color is not None:
        from bench.align.color import align_splat_colors

        bundle = dataclasses.replace(bundle, background=align_splat_colors(bundle.background,
                                                                           color))
    lights = settings.scene_lights(scene)
    if lights is not None and "world_decorator" not in overrides:  # a caller's own one wins
        overrides = {**overrides, "world_decorator": lights.apply}
    env = bench.sim.make_env(task, bundle, **_rig_overrides(settings), **overrides)
    apply_rig(env, settings)
    return env
