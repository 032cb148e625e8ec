"""Gaussian-splat rendering: one :func:`render` front end, pluggable backends.

Backends (registry :data:`BACKENDS`, each entry's metadata says where it runs):

- ``cpu``: NVIDIA Warp kernels on device ``"cpu"`` (:mod:`bench.render.warp_backend`).
- ``gsplat``: ``gsplat.rasterization`` on CUDA (:mod:`bench.render.gsplat_backend`;
  optional extra ``splatbench[gpu]``).
- ``reference``: dense float64 torch, every Gaussian x every pixel (tests only).
- ``torch``: the differentiable pure-torch tile rasterizer (:mod:`bench.render.torch_raster`).
- ``auto``: ``gsplat`` when CUDA and gsplat are available, else ``cpu``.

All backends implement the forward model documented in
:mod:`bench.render.constants`, with the constants defined there.

Fisheye cameras: ``fisheye_mode="direct"`` projects each Gaussian with the
Kannala-Brandt model and its Jacobian; ``"cubemap"`` renders pinhole cube
faces and remaps them (:mod:`bench.render.fisheye`).

Example::

    from bench.render import render
    from bench.scene.camera_files import load_cameras
    out = render(splats, load_cameras("cams.json")[0], backend="cpu")
    out.rgb  # [H, W, 3] float32
"""

from __future__ import annotations

import dataclasses
import functools
import importlib.util
from collections.abc import Sequence

import numpy as np

from bench.registry import Registry, lazy
from bench.render.composite import composite
from bench.render.lod import LodConfig
from bench.render.output import RenderOutput, check_background, check_occluder
from bench.render.reference import MAX_PAIRS
from bench.scene.cameras import Camera
from bench.scene.gaussians import GaussianSplats

__all__ = ["BACKENDS", "FISHEYE_MODES", "LodConfig", "RenderOutput", "composite", "render",
           "render_batch", "resolve_backend"]

FISHEYE_MODES = ("direct", "cubemap")

BACKENDS: Registry = Registry("render backend")
BACKENDS.register("cpu", lazy("bench.render.warp_backend", "render_cpu"), device="cpu",
                  differentiable=False,
                  description="Warp kernels compiled for the CPU (default without CUDA)")
BACKENDS.register("gsplat", lazy("bench.render.gsplat_backend", "render_gsplat"), device="cuda",
                  differentiable=True,
                  description="gsplat.rasterization on CUDA (pip install splatbench[gpu])")
BACKENDS.register("reference", lazy("bench.render.reference", "render_reference"), device="cpu",
                  differentiable=False, max_pairs=MAX_PAIRS,
                  description="dense float64 torch, all Gaussians x all pixels (tests)")
BACKENDS.register("torch", lazy("bench.render.torch_backend", "render_torch"), device="cpu",
                  differentiable=True,
                  description="pure-torch tile rasterizer (differentiable; CPU trainer)")


@functools.cache
def gsplat_available() -> bool:
    """True when gsplat is installed and torch sees a CUDA device (checked once)."""
    if importlib.util.find_spec("gsplat") is None:
        return False
    import torch

    return bool(torch.cuda.is_available())


def resolve_backend(backend: str) -> str:
    """Map ``"auto"`` to a concrete backend name; validate others ("did you mean")."""
    if backend == "auto":
        return "gsplat" if gsplat_available() else "cpu"
    try:
        BACKENDS.entry(backend)
    except ValueError as exc:
        raise ValueError(f"{exc}; or 'auto' (gsplat with CUDA, else cpu)") from None
    return backend


def render(
    splats: GaussianSplats,
    camera: Camera,
    *,
    backend: str = "auto",
    background: Sequence[float] = (0.0, 0.0, 0.0),
    sh_degree: int | None = None,
    fisheye_mode: str = "direct",
    cubemap_face_px: int | None = None,
    occluder_depth: np.ndarray | None = None,
    culling: bool = True,
    lod: LodConfig | None = None,
) -> RenderOutput:
    """Render ``splats`` (world frame) from ``camera``.

    Args:
        splats: Gaussians in storage convention, in the camera's world frame.
        camera: A pinhole or fisheye :class:`~bench.scene.cameras.Camera`.
        backend: ``"auto"``, ``"cpu"``, ``"gsplat"``, ``"reference"`` or ``"torch"``.
        background: (r, g, b) in [0, 1] behind the Gaussians.
        sh_degree: Active SH degree (0..stored); None uses every stored band.
        fisheye_mode: ``"direct"`` or ``"cubemap"`` (ignored for pinhole cameras).
        cubemap_face_px: Cube face side in pixels (default: matches the fisheye's
            central resolution, 2 x focal length).
        occluder_depth: Optional [H, W] depth in metres of an opaque surface (e.g. the
            MuJoCo robot; inf or NaN = none), same convention as the output depth. Every
            Gaussian at or behind it is dropped per pixel, so :func:`composite` is exact
            (``cpu``, ``torch``, ``reference``; ``gsplat`` ignores it and :func:`composite`
            falls back to the expected-depth rule, ``out.occluded`` tells which).
        culling: ``cpu`` backend with at least :data:`~bench.render.culling.CULL_MIN_GAUSSIANS`
            Gaussians: skip blocks of a cached spatial index that cannot be drawn
            (:mod:`bench.render.culling`; the image is unchanged, bit for bit).
            False renders through the plain backend.
        lod: Opt-in level of detail (:class:`~bench.render.lod.LodConfig`; ``cpu`` only):
            Gaussians are drawn as moment-matched merged nodes of a per-scene tree, cut
            per frame by projected size. Approximate; record ``lod.to_json()`` with
            every result rendered this way.

    Returns:
        :class:`RenderOutput` with rgb [H, W, 3], depth [H, W], alpha [H, W], valid [H, W].
    """
    if not isinstance(camera, Camera):
        raise TypeError(f"camera must be a bench.scene.cameras.Camera, got {type(camera).__name__}")
    if fisheye_mode not in FISHEYE_MODES:
        raise ValueError(f"fisheye_mode {fisheye_mode!r} is unknown; use one of {FISHEYE_MODES}")
    from bench.safety import check_image_size

    check_image_size(camera.height, camera.width, what=f"camera {camera.name!r} image size")
    bg = check_background(background)
    occluder = check_occluder(occluder_depth, camera)
    name = resolve_backend(backend)
    fn = BACKENDS.get(name)
    if lod is not None:
        if name != "cpu":
            raise ValueError(f"lod rendering runs on the cpu backend only, not {name!r}; "
                             "use backend='cpu' or lod=None")
        from bench.render.lod import render_cpu_lod

        fn = functools.partial(render_cpu_lod, config=lod)
    elif culling and name == "cpu":
        from bench.render.culling import CULL_MIN_GAUSSIANS, render_cpu_culled

        if splats.num >= CULL_MIN_GAUSSIANS:
            fn = render_cpu_culled
    extra = {"occluder_depth": occluder} if occluder is not None and name != "gsplat" else {}
    if name == "gsplat" and backend == "auto" and camera.model == "fisheye":
        from bench.render.gsplat_backend import supports_direct

        if not supports_direct(camera):
            fisheye_mode = "cubemap"  # gsplat's fisheye is equidistant, <= 180 deg only
    if camera.model == "fisheye" and fisheye_mode == "cubemap":
        from bench.render.fisheye import render_cubemap

        out = render_cubemap(fn, splats, camera, background=bg, sh_degree=sh_degree,
                             face_px=cubemap_face_px, **extra)
    else:
        out = fn(splats, camera, background=bg, sh_degree=sh_degree, **extra)
    return dataclasses.replace(out, background=bg)


def render_batch(
    splats: GaussianSplats,
    cameras: Sequence[Camera],
    **options,
) -> list[RenderOutput]:
    """Render several cameras (same options as :func:`render`).

    The ``cpu`` backend reuses its uploaded splats and buffers between views;
    the ``gsplat`` backend renders same-size pinhole/direct-fisheye cameras in
    one batched call.
    """
    name = resolve_backend(options.get("backend", "auto"))
    if name == "gsplat" and options.get("fisheye_mode", "direct") == "direct" and cameras:
        from bench.render.gsplat_backend import render_gsplat_batch, supports_direct

        if not all(supports_direct(c) for c in cameras):
            return [render(splats, cam, **options) for cam in cameras]

        bg = check_background(options.get("background", (0.0, 0.0, 0.0)))
        outs = render_gsplat_batch(splats, list(cameras), background=bg,
                                   sh_degree=options.get("sh_degree"))
        return [dataclasses.replace(o, background=bg) for o in outs]
    return [render(splats, cam, **{**options, "backend": name}) for cam in cameras]
