"""The shipped mesh lights: the fit of ``bench demo lights`` that the demo's study uses.

Kept apart from :mod:`bench.demo.mesh_lights` (which fits them, and builds the study's envs to
do so) so that the demo's profiles (:func:`bench.demo.run.profile_spec`), which the fit itself
imports, can read the shipped fit without an import cycle.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

#: The shipped fit (``bench demo lights`` on the defaults; results/demo-lights).
ASSET = Path(__file__).parent / "assets" / "mesh_lights.json"


def load_mesh_lights(path: Path = ASSET) -> dict[str, Any]:
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
