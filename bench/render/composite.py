"""Depth compositing of a Gaussian render with a mesh render (robot, objects).

Default rule (the render has no occluder), per pixel, with ``d_g`` the
Gaussians' expected depth (:attr:`RenderOutput.depth`, ``inf`` where alpha is 0)
and ``d_m`` the mesh depth (``inf`` where no mesh):

- no mesh (``d_m = inf``): the Gaussian render as is (over its background);
- mesh nearer (``d_m <= d_g``): the mesh colour -- the mesh occludes the
  Gaussians' surface;
- Gaussians nearer (``d_g < d_m``): ``C_g + (1 - alpha_g) * mesh_rgb`` -- the
  Gaussians, premultiplied, blended over the mesh behind them.

This treats each pixel's Gaussians as one surface at their alpha-weighted mean
depth, so a pixel is never split between Gaussians in front of and behind the
mesh. It is exact when a pixel's Gaussians lie on one side of the mesh (the
common case: a robot in front of a reconstructed room) and approximate for
semi-transparent Gaussians straddling the mesh.

Exact rule: render with ``render(..., occluder_depth=mesh_depth)``
(``gs.occluded`` is then True): every Gaussian at or behind the mesh is dropped
per pixel, and compositing is ``C_front + (1 - alpha_front) * mesh_rgb``
wherever there is mesh -- a semi-transparent floater in front of the gripper
stays visible and the wall behind it does not leak through. Pass the same
``mesh_depth`` to both calls.

Depths must use the render's convention: camera z for pinhole cameras
(MuJoCo's depth buffer converted to metres), distance along the ray for
fisheye cameras.
"""

from __future__ import annotations

import numpy as np

from bench.render.output import RenderOutput


def composite(
    gs: RenderOutput,
    mesh_rgb: np.ndarray,  # [H, W, 3] in [0, 1]
    mesh_depth: np.ndarray,  # [H, W] metres, inf where no mesh
    *,
    return_depth: bool = False,
) -> np.ndarray | tuple[np.ndarray, np.ndarray]:
    """Composite a Gaussian render with a mesh render by depth (rule in the module doc).

    Args:
        gs: Output of :func:`bench.render.render` (it records its background).
        mesh_rgb: [H, W, 3] mesh colour in [0, 1].
        mesh_depth: [H, W] mesh depth in metres, ``inf`` (or NaN) where no mesh.
        return_depth: Also return the composited depth ``min(d_g, d_m)``.

    Returns:
        [H, W, 3] float32 colour, and [H, W] depth when ``return_depth``.
    """
    h, w = gs.alpha.shape
    mesh_rgb = np.asarray(mesh_rgb, np.float32)
    mesh_depth = np.asarray(mesh_depth, np.float32)
    if mesh_rgb.shape != (h, w, 3) or mesh_depth.shape != (h, w):
        raise ValueError(
            f"mesh_rgb {mesh_rgb.shape} / mesh_depth {mesh_depth.shape} must match the render "
            f"({h}, {w}, 3) / ({h}, {w}); render the mesh with the same camera"
        )
    mesh_depth = np.where(np.isnan(mesh_depth), np.inf, mesh_depth)
    has_mesh = np.isfinite(mesh_depth)
    over_mesh = gs.premultiplied_rgb() + (1.0 - gs.alpha)[..., None] * mesh_rgb
    if gs.occluded:  # exact: only Gaussians in front of the mesh were rendered
        mesh_first = np.zeros_like(has_mesh)
    else:
        mesh_first = has_mesh & (mesh_depth <= gs.depth)
    rgb = np.where(has_mesh[..., None], over_mesh, gs.rgb)
    rgb = np.where(mesh_first[..., None], mesh_rgb, rgb)
    rgb = rgb.astype(np.float32)
    if return_depth:
        return rgb, np.minimum(gs.depth, mesh_depth).astype(np.float32)
    return rgb
