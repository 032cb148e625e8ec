"""The shipped appearance fits the demo's study uses: mesh lights and background colours.

Kept apart from the modules that fit them (:mod:`bench.demo.mesh_lights`, which builds the
study's envs to do so, and :mod:`bench.demo.color_align`, which measures with them) so that the
demo's profiles (:func:`bench.demo.run.profile_spec`), which the fits themselves import, can read
the shipped fits without an import cycle.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

_ASSETS = Path(__file__).parent / "assets"
#: The shipped mesh lights (``bench demo lights`` on the defaults; results/demo-lights).
LIGHTS_ASSET = _ASSETS / "mesh_lights.json"
#: The shipped colour map per room (``python -m bench.demo.color_align`` on the defaults;
#: results/demo-color-align).
COLOR_ASSET = _ASSETS / "background_color.json"


def load_mesh_lights(path: Path = LIGHTS_ASSET) -> dict[str, Any]:
    """The fitted :class:`~bench.sim.lighting.MeshLights` per room (``mesh_lights.json``)."""
    import json

    from bench.errors import BenchError
    from bench.sim.lighting import MeshLights

    try:
        data = json.loads(Path(path).read_text())
        return {scene: MeshLights.from_json(v) for scene, v in data["lights"].items()}
    except (OSError, ValueError, KeyError, TypeError) as error:
        raise BenchError(f"cannot read mesh lights {path} ({error}); regenerate it with "
                         "`bench demo lights --out DIR` and copy DIR/mesh_lights.json") from None


def load_background_color(path: Path = COLOR_ASSET) -> dict[str, Any]:
    """The shipped :class:`~bench.align.color.ColorFit` per demo scene (its colour map)."""
    import json

    from bench.align.color import ColorFit
    from bench.errors import BenchError

    try:
        data = json.loads(Path(path).read_text())
        return {scene: ColorFit.from_dict(fit) for scene, fit in data.items()}
    except (OSError, ValueError, KeyError, TypeError) as error:
        raise BenchError(f"cannot read the background colour fit {path} ({error}); regenerate "
                         "it with `python -m bench.demo.color_align --out DIR` and copy "
                         "DIR/background_color.json") from None
