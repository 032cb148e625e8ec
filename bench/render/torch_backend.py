"""The ``torch`` backend: :func:`bench.render.torch_raster.rasterize` behind :func:`render`."""

from __future__ import annotations

import numpy as np

from bench.render import constants as K
from bench.render.output import RenderOutput
from bench.scene.cameras import Camera
from bench.scene.gaussians import GaussianSplats


def render_torch(
    splats: GaussianSplats,
    camera: Camera,
    *,
    background=(0.0, 0.0, 0.0),
    sh_degree: int | None = None,
    occluder_depth: np.ndarray | None = None,  # [H, W]
    tile_size: int = K.TILE_SIZE,
    dense_tiles: bool = False,
) -> RenderOutput:
    """Render without gradients through the pure-torch tile rasterizer (float32).

    ``dense_tiles=True`` runs the straightforward path (every tile pixel x every tile
    Gaussian), the baseline the render benchmark compares against.
    """
    import torch

    from bench.render.torch_raster import rasterize

    if splats.num == 0:
        return RenderOutput.empty(camera, background, occluded=occluder_depth is not None)
    arrays = [torch.as_tensor(np.asarray(getattr(splats, n), np.float32))
              for n in ("means", "quats", "log_scales", "opacity_logits", "sh_dc", "sh_rest")]
    with torch.no_grad():
        occ = None if occluder_depth is None else torch.as_tensor(
            np.asarray(occluder_depth, np.float32))
        out = rasterize(*arrays, camera, background=background, sh_degree=sh_degree,
                        tile_size=tile_size, occluder_depth=occ, dense_tiles=dense_tiles)
    valid = camera.pixel_rays()[1].copy() if camera.model == "fisheye" else np.ones(
        (camera.height, camera.width), bool)
    return RenderOutput(out.rgb.numpy(), out.depth.numpy(), out.alpha.numpy(), valid,
                        occluded=occluder_depth is not None)
