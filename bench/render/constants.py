"""Every constant of the Gaussian-splatting forward model, defined once.

All backends (``cpu`` Warp kernels, ``reference`` dense torch, ``torch_raster``
tiles) import these values; the ``gsplat`` backend passes them to
``gsplat.rasterization`` where it takes them as arguments (``eps2d``,
``near_plane``, ``far_plane``, ``tile_size``). Two of gsplat's values are
compiled into its CUDA kernels and cannot be passed: its alpha clamp is 0.999
(ours, like the original 3DGS, is :data:`ALPHA_MAX` = 0.99) and it stops when
the *next* transmittance is <= 1e-4 (ours: when it would be < 1e-4). Both
differ only on near-opaque pixels; the GPU test measures the effect.

The forward model (3DGS, Kerbl et al. 2023; gsplat "classic" mode):

1. ``p_cam = R p + t`` (camera_from_world). Pinhole: culled when
   ``z < NEAR_PLANE`` or ``z > FAR_PLANE``. Fisheye: culled when the distance
   is outside ``[NEAR_PLANE, FAR_PLANE]`` or the angle from the axis is at
   least the camera's ``max_theta``.
2. ``Sigma_3d = R_q diag(s)^2 R_q^T``; ``Sigma_2d = J W Sigma_3d W^T J^T +
   LOW_PASS_PX * I`` where ``J`` is the Jacobian of the camera projection at
   the mean. Pinhole: ``x/z`` and ``y/z`` in ``J`` are clamped to
   ``FRUSTUM_CLAMP`` times the half field of view beyond the image (as 3DGS and
   gsplat do, so Gaussians far off-screen do not blow up). Fisheye: the exact
   Jacobian of the Kannala-Brandt projection (no clamp).
3. Culled when ``det(Sigma_2d) <= 0``. ``radius = ceil(SIGMA_EXTENT *
   sqrt(lambda_max))`` with ``lambda_max = m + sqrt(max(EIGEN_FLOOR, m^2 - det))``,
   ``m`` = half the trace; culled when the ``radius``-square lies outside
   the image.
4. A Gaussian *belongs to a tile* when its ``radius``-square overlaps the tile:
   tile columns ``[floor((u - r) / TILE_SIZE), ceil((u + r) / TILE_SIZE))``
   (rows likewise) clipped to the grid. Within its tiles a Gaussian may reach
   any pixel; outside them it contributes nothing (this is what makes
   tile-based renderers differ from a plain sum over all Gaussians, and the
   ``reference`` backend applies the same rule).
5. Colour: real SH up to degree 3 of the unit direction ``mean - camera
   centre`` (world frame), ``+ SH_OFFSET``, clamped at 0 from below.
6. Per pixel (centre ``(j + 0.5, i + 0.5)``), Gaussians of its tile in
   ascending depth (pinhole: camera z; fisheye: distance to the camera centre;
   ties by index): ``power = 0.5 d^T Sigma_2d^-1 d`` (skipped when negative),
   ``alpha = min(ALPHA_MAX, opacity * exp(-power))``, skipped when
   ``alpha < ALPHA_MIN``; if ``T * (1 - alpha) < TRANSMITTANCE_MIN`` the pixel
   stops *without* this Gaussian; else ``C += T alpha c``, ``D += T alpha depth``,
   ``T *= 1 - alpha``.
7. ``rgb = C + T * background``, ``alpha = 1 - T``, ``depth = D / alpha``
   (expected depth; ``inf`` where ``alpha == 0``). Fisheye pixels outside the
   lens' valid image circle get ``background``, alpha 0, depth inf,
   ``valid = False``.
"""

from __future__ import annotations

# Real spherical-harmonics basis constants SH_C0..SH_C3 (same as 3DGS / gsplat): defined once
# in the storage model (bench.scene.gaussians, whose rgb = SH_OFFSET + SH_C0 * sh_dc needs
# them) and listed here with the rest of the forward model.
from bench.scene.gaussians import SH_C0, SH_C1, SH_C2, SH_C3  # noqa: F401 - re-exported

LOW_PASS_PX = 0.3  # px^2 added to the 2D covariance diagonal (EWA low-pass / screen-space dilation)
SIGMA_EXTENT = 3.0  # footprint half-size in standard deviations of the major axis
EIGEN_FLOOR = 0.01  # floor of the discriminant m^2 - det when taking the major eigenvalue
ALPHA_MAX = 0.99  # per-Gaussian alpha clamp (3DGS)
ALPHA_MIN = 1.0 / 255.0  # alphas below this are skipped (invisible at 8 bits)
TRANSMITTANCE_MIN = 1e-4  # stop blending a pixel before its transmittance drops below this
NEAR_PLANE = 0.01  # metres: Gaussians closer than this (z, or distance for fisheye) are culled
FAR_PLANE = 1e10  # metres: Gaussians farther than this are culled
FRUSTUM_CLAMP = 1.3  # pinhole Jacobian: x/z, y/z clamped to the image edge + 0.3 x half-FOV tangent
TILE_SIZE = 16  # pixels per tile side
SH_OFFSET = 0.5  # added to the SH sum (rgb = 0.5 + C0 * sh_dc at degree 0)
MAX_SH_DEGREE = 3
