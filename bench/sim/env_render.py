"""The Gymnasium ``render()`` / ``close()`` pair both simulator envs share.

One job: the exterior-view render and the renderer's release, written once for the rigid
tasks' :class:`bench.sim.env.SplatBenchEnv` and the rope's
:class:`bench.sim.softbody.rope.RopeEnv`. Each env keeps how it builds its
:class:`bench.sim.observation.ObservationRenderer` (its ``_get_renderer()``, which stores
it in ``self._renderer``) and its ``render_mode``; :class:`EnvRendering` supplies the two
methods on top. It imports nothing from the envs (or anything heavy), so both import it.
"""

from __future__ import annotations

from typing import Any


class EnvRendering:
    """``render()`` and ``close()`` of an env with a lazily built observation renderer.

    Mixed in before :class:`gymnasium.Env`. The env sets ``render_mode`` and
    ``_renderer = None`` and defines ``_get_renderer()``.
    """

    render_mode: str | None
    _renderer: Any

    def render(self):
        """The exterior camera view [H, W, 3] uint8 (``render_mode="rgb_array"``), else None."""
        if self.render_mode != "rgb_array":
            return None
        return self._get_renderer().render_exterior()

    def close(self) -> None:
        """Free the renderers (MuJoCo GL context, Gaussian renderer)."""
        if self._renderer is not None:
            self._renderer.close()
            self._renderer = None
