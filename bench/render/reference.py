"""The ``reference`` backend: every Gaussian against every pixel, float64 torch.

A plain transcription of the forward model in :mod:`bench.render.constants`
with no tiles lists, no early exit and no bounding boxes: for each pixel it
takes all visible Gaussians in depth order, masks those whose tile footprint
(step 4) does not include the pixel's tile, and blends them with the exact
cumulative-product form of the front-to-back loop. Cost is O(pixels x
Gaussians), so it refuses large problems; it exists to test the fast backends.
"""

from __future__ import annotations

import math

import numpy as np

from bench.render import constants as K
from bench.render.output import RenderOutput, check_background, resolve_sh_degree
from bench.scene.cameras import Camera
from bench.scene.gaussians import GaussianSplats

MAX_PAIRS = 2e8  # pixels x Gaussians beyond which the reference refuses to run
_PIXEL_CHUNK = 1024


def render_reference(
    splats: GaussianSplats,
    camera: Camera,
    *,
    background=(0.0, 0.0, 0.0),
    sh_degree: int | None = None,
    occluder_depth: np.ndarray | None = None,  # [H, W]
    tile_size: int = K.TILE_SIZE,
) -> RenderOutput:
    """Dense float64 rendering of ``splats`` from ``camera`` (fisheye = direct model).

    With ``occluder_depth``, Gaussians at or behind it are dropped per pixel.
    """
    import torch

    from bench.render import torch_raster as tr

    bg = check_background(background)
    degree = resolve_sh_degree(splats.sh_degree, sh_degree)
    width, height = camera.width, camera.height
    if splats.num * width * height > MAX_PAIRS:
        raise ValueError(
            f"the reference backend would evaluate {splats.num} Gaussians x {width * height} "
            f"pixels (> {MAX_PAIRS:.0e}); use backend='cpu' or a smaller image/scene"
        )
    t = {name: torch.as_tensor(getattr(splats, name), dtype=torch.float64)
         for name in ("means", "quats", "log_scales", "opacity_logits", "sh_dc", "sh_rest")}
    proj = tr.project(t["means"], t["quats"], t["log_scales"], camera)
    order = torch.nonzero(proj.visible).squeeze(1)
    # float32 sort keys: the same order (and ties) as the float32 backends.
    order = order[torch.argsort(proj.depths[order].to(torch.float32), stable=True)]
    xy, conic = proj.means2d[order], proj.conics[order]
    opac = torch.sigmoid(t["opacity_logits"][order])
    depths = proj.depths[order]
    rest = t["sh_rest"][order][:, : (degree + 1) ** 2 - 1]
    colors = tr.gaussian_colors(t["means"][order], t["sh_dc"][order], rest, camera, degree)
    rect = tr.tile_ranges(xy, proj.radii[order], width, height, tile_size)

    occ = None if occluder_depth is None else torch.as_tensor(
        np.asarray(occluder_depth, np.float64).reshape(-1))
    jj, ii = np.meshgrid(np.arange(width), np.arange(height))
    pix = torch.as_tensor(np.stack([jj.ravel(), ii.ravel()], 1))  # [P, 2] integer (x, y)
    col_out, dep_out, tr_out = [], [], []
    for start in range(0, len(pix), _PIXEL_CHUNK):
        p = pix[start : start + _PIXEL_CHUNK]
        tx, ty = (p[:, 0] // tile_size)[:, None], (p[:, 1] // tile_size)[:, None]
        in_tiles = (tx >= rect[:, 0]) & (tx < rect[:, 1]) & (ty >= rect[:, 2]) & (ty < rect[:, 3])
        dx = xy[:, 0][None] - (p[:, 0:1].to(torch.float64) + 0.5)
        dy = xy[:, 1][None] - (p[:, 1:2].to(torch.float64) + 0.5)
        power = 0.5 * (conic[:, 0] * dx * dx + conic[:, 2] * dy * dy) + conic[:, 1] * dx * dy
        keep = (power >= 0) & in_tiles
        if occ is not None:  # depth-sorted, so dropping these = stopping at the occluder
            keep &= depths[None, :] < occ[start : start + _PIXEL_CHUNK, None]
        alpha = torch.where(keep, opac * torch.exp(-power.clamp_min(0)), 0.0)
        c, d, tt = tr.blend(alpha, colors, depths)
        col_out.append(c)
        dep_out.append(d)
        tr_out.append(tt)
    color = torch.cat(col_out).reshape(height, width, 3).numpy()
    depth_acc = torch.cat(dep_out).reshape(height, width).numpy()
    trans = torch.cat(tr_out).reshape(height, width).numpy()
    if camera.model == "fisheye":
        valid = camera.pixel_rays()[1].copy()
        color[~valid], depth_acc[~valid], trans[~valid] = 0.0, 0.0, 1.0
    else:
        valid = np.ones((height, width), bool)
    alpha_img = 1.0 - trans
    rgb = color + trans[..., None] * np.asarray(bg)
    with np.errstate(divide="ignore", invalid="ignore"):
        depth = np.where(alpha_img > 0, depth_acc / alpha_img, math.inf)
    return RenderOutput(rgb.astype(np.float32), depth.astype(np.float32),
                        alpha_img.astype(np.float32), valid, occluded=occ is not None)
