"""Lights for the simulator's meshes, estimated rather than assumed.

A task world lights its meshes (robot, task objects) with MuJoCo's headlight and one "sun"
(:func:`bench.sim.world.add_scene_lights`), the same white light in every scene. A scanned
room lights them otherwise. :class:`MeshLights` is an estimate of the room's light in the
form MuJoCo draws: a headlight ambient and diffuse term and one directional light per
direction of :data:`FIT_DIRECTIONS`, each an (r, g, b) intensity. MuJoCo's lighting is a
sum of these terms, so the model is linear in the intensities and can be fitted to real
images by least squares (:mod:`bench.demo.mesh_lights`). The study's specular terms are
kept as they are (headlight 0.05, sun 0.05); the sun's diffuse term is replaced by the
fitted lights.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

#: Directions (world frame, towards where the light goes) of the fitted directional lights:
#: straight down, and down at 45 degrees from each of the four horizontal axes.
FIT_DIRECTIONS: tuple[tuple[float, float, float], ...] = (
    (0.0, 0.0, -1.0), (-1.0, 0.0, -1.0), (0.0, -1.0, -1.0), (1.0, 0.0, -1.0),
    (0.0, 1.0, -1.0))
#: Name prefix of the added directional lights.
LIGHT_PREFIX = "mesh_light_"

RGB = tuple[float, float, float]


def _rgb(value: Any, what: str) -> RGB:
    out = tuple(float(v) for v in value)
    if len(out) != 3 or min(out) < 0:
        raise ValueError(f"{what} must be three intensities >= 0 (r, g, b), got {list(value)}")
    return out  # type: ignore[return-value]


@dataclass(frozen=True)
class MeshLights:
    """One scene's mesh lights (intensities in MuJoCo's units, per channel r, g, b).

    Attributes:
        ambient: Headlight ambient term.
        headlight: Headlight diffuse term (the light that moves with the rendering camera).
        directional: One (r, g, b) per direction of :data:`FIT_DIRECTIONS`.
    """

    ambient: RGB
    headlight: RGB
    directional: tuple[RGB, ...]

    def __post_init__(self) -> None:
        object.__setattr__(self, "ambient", _rgb(self.ambient, "ambient"))
        object.__setattr__(self, "headlight", _rgb(self.headlight, "headlight"))
        lights = tuple(_rgb(v, "each directional light") for v in self.directional)
        if len(lights) != len(FIT_DIRECTIONS):
            raise ValueError(f"directional needs {len(FIT_DIRECTIONS)} lights (one per "
                             f"FIT_DIRECTIONS), got {len(lights)}")
        object.__setattr__(self, "directional", lights)

    def to_json(self) -> dict[str, Any]:
        """A JSON-ready dict (``from_json`` reads it back)."""
        return {"ambient": list(self.ambient), "headlight": list(self.headlight),
                "directional": [list(v) for v in self.directional]}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> MeshLights:
        """Read :meth:`to_json`'s dict."""
        return cls(ambient=data["ambient"], headlight=data["headlight"],
                   directional=tuple(data["directional"]))

    def apply(self, spec: Any) -> None:
        """Light the meshes of a task world's ``MjSpec`` with these lights instead of its own."""
        add_light_slots(spec)
        spec.light("sun").diffuse = [0.0, 0.0, 0.0]  # the fitted lights replace it
        spec.visual.headlight.ambient = list(self.ambient)
        spec.visual.headlight.diffuse = list(self.headlight)
        for i, rgb in enumerate(self.directional):
            spec.light(f"{LIGHT_PREFIX}{i}").diffuse = list(rgb)


def add_light_slots(spec: Any) -> None:
    """The fitted directional lights, added at zero intensity (the world's own lights kept)."""
    import mujoco

    for i, direction in enumerate(FIT_DIRECTIONS):
        spec.worldbody.add_light(name=f"{LIGHT_PREFIX}{i}", pos=[0.0, 0.0, 3.0],
                                 dir=list(direction), diffuse=[0.0, 0.0, 0.0],
                                 specular=[0.0, 0.0, 0.0], castshadow=False,
                                 type=mujoco.mjtLightType.mjLIGHT_DIRECTIONAL)
