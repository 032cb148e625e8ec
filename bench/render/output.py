"""The render result type and small torch-free helpers shared by all backends."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from bench.scene.cameras import Camera


@dataclass(frozen=True, eq=False)
class RenderOutput:
    """One rendered view (numpy, float32).

    Attributes:
        rgb: [H, W, 3] colour in [0, 1] (background blended where alpha < 1). SH
            colours are clamped at 0 only, so a colour may slightly exceed 1;
            clip before quantising.
        depth: [H, W] expected depth in metres, ``sum(w_i d_i) / alpha``; pinhole:
            camera z, fisheye: distance from the camera centre; ``inf`` where alpha == 0.
        alpha: [H, W] accumulated opacity ``1 - T``.
        valid: [H, W] bool, False for fisheye pixels outside the lens' image circle.
        background: The (r, g, b) blended behind the Gaussians (set by
            :func:`bench.render.render`; :func:`bench.render.composite` needs it).
        occluded: True when rendered with ``occluder_depth`` (Gaussians at or behind
            the occluder were dropped per pixel), so compositing is exact.
    """

    rgb: np.ndarray  # [H, W, 3]
    depth: np.ndarray  # [H, W]
    alpha: np.ndarray  # [H, W]
    valid: np.ndarray  # [H, W]
    background: tuple[float, float, float] | None = None
    occluded: bool = False

    def premultiplied_rgb(self) -> np.ndarray:  # [H, W, 3]
        """Colour of the Gaussians alone, ``sum_i w_i c_i`` (background removed)."""
        if self.background is None:
            raise ValueError("this RenderOutput does not record its background; "
                             "render it through bench.render.render()")
        return self.rgb - (1.0 - self.alpha)[..., None] * np.asarray(self.background, np.float32)

    @staticmethod
    def empty(camera: Camera, background=(0.0, 0.0, 0.0), *,
              occluded: bool = False) -> RenderOutput:
        """The image of no Gaussians: background, alpha 0, depth inf."""
        h, w = camera.height, camera.width
        if camera.model == "fisheye":
            valid = camera.pixel_rays()[1].copy()
        else:
            valid = np.ones((h, w), bool)
        rgb = np.broadcast_to(np.asarray(background, np.float32), (h, w, 3)).copy()
        return RenderOutput(rgb, np.full((h, w), np.inf, np.float32), np.zeros((h, w), np.float32),
                            valid, occluded=occluded)


def resolve_sh_degree(stored_degree: int, sh_degree: int | None) -> int:
    """Active SH degree: the stored one, or ``sh_degree`` if it is not higher."""
    if sh_degree is None:
        return int(stored_degree)
    if not 0 <= sh_degree <= stored_degree:
        raise ValueError(
            f"sh_degree={sh_degree} but the splats store SH degree {stored_degree}; "
            f"pass sh_degree between 0 and {stored_degree} (or None for all stored bands)"
        )
    return int(sh_degree)


def check_background(background) -> tuple[float, float, float]:
    """Validate an (r, g, b) background in [0, 1]."""
    bg = tuple(float(b) for b in np.asarray(background, np.float64).reshape(-1))
    if len(bg) != 3 or not all(0.0 <= b <= 1.0 for b in bg):
        raise ValueError(f"background {background!r} must be three values (r, g, b) in [0, 1]")
    return bg  # type: ignore[return-value]


def check_occluder(occluder_depth, camera: Camera) -> np.ndarray | None:
    """Validate an [H, W] occluder depth map (metres); NaN means no occluder (inf)."""
    if occluder_depth is None:
        return None
    occ = np.asarray(occluder_depth, np.float32)
    if occ.shape != (camera.height, camera.width):
        raise ValueError(
            f"occluder_depth has shape {occ.shape}, expected ({camera.height}, {camera.width}); "
            "render the mesh depth with the same camera"
        )
    return np.where(np.isnan(occ), np.inf, occ).astype(np.float32)
