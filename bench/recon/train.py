"""3DGS training of a background from a capture manifest (gsplat on CUDA, pure torch on CPU).

What a user of gsplat's ``simple_trainer`` gets here:

- **Loss** ``(1 - ssim_lambda) * L1 + ssim_lambda * (1 - SSIM)`` with ``ssim_lambda = 0.2``
  (3DGS); SSIM with an 11 x 11 Gaussian window (sigma 1.5) and zero padding, as 3DGS
  (filtered as two 11-tap passes: the window is separable).
- **Adam** (``eps = 1e-15``; torch's fused kernel on CPU), one optimizer per parameter,
  gsplat's learning rates:
  means ``1.6e-4 * scene_scale`` decaying exponentially to ``1.6e-6 * scene_scale`` over
  the run, log-scales ``5e-3``, quaternions ``1e-3``, opacity logits ``5e-2``, SH DC
  ``2.5e-3``, higher SH ``2.5e-3 / 20``. ``scene_scale`` is 1.1 x the largest distance of a
  training camera centre from their mean (gsplat's COLMAP parser), 1.0 for a single camera.
- **SH degree** raised by one every ``sh_degree_interval = 1000`` iterations up to 3.
- **Initialisation** from a point cloud: a dense seed PLY (``x y z`` + optional
  ``red green blue``; the paper reuses one OpenMVS seed across coverage conditions) or a
  3DGS PLY used as is. Points become isotropic Gaussians with the RMS distance to their
  3 nearest neighbours as scale, opacity 0.1, colour from the point colour (gsplat) and
  identity rotations (3DGS; gsplat draws random ones). Without a seed, ``random_init_points``
  points are drawn uniformly in a cube of half-size 3 x scene_scale around the mean camera
  centre (gsplat's ``init_type="random"``).
- **Views** visited in a fresh seeded permutation per epoch (batch size 1).
- **Densification**: on CUDA, ``gsplat.DefaultStrategy`` with its defaults. On CPU,
  :class:`bench.recon.densify.SimpleDensifier`, a re-implementation of DefaultStrategy's
  rules: average screen-space gradient (in NDC units: pixel gradient x W/2, H/2) above
  ``grow_grad2d = 2e-4`` -> duplicate when ``max scale <= 0.01 scene_scale``, else split
  into two samples of the Gaussian with scales / 1.6; prune opacity < 0.005 and, after the
  first opacity reset, ``max scale > 0.1 scene_scale``; every 3000 steps clamp opacities to
  0.01; refine every 100 steps in (500, 15000). Not ported: ``absgrad``,
  ``revised_opacity``, the 2D screen-size rules (off by default in gsplat), packed mode, and
  gsplat's opacity reset at step 0. Added: ``max_gaussians`` caps growth on CPU (highest
  gradients first).
- **Determinism** on CPU: a seeded ``torch.Generator`` for the split samples,
  ``torch.use_deterministic_algorithms`` and ``--threads`` while training (both restored
  afterwards), and a seeded ``numpy`` generator for the view order and the random init, so
  the same inputs and seed give byte-identical PLY and log files on one machine. On CUDA
  ``torch.manual_seed(seed)`` seeds gsplat's split sampling; GPU atomics make runs close
  but not bit-identical.

The CPU path renders with :func:`bench.render.warp_grad.rasterize` (``raster="warp"``:
pinhole projection and tile compositing forward and backward in Warp CPU kernels, SH in
torch; docs/cpu-trainer.md) or, with ``raster="torch"``, the pure-torch reference
:func:`bench.render.torch_raster.rasterize` (``benchmarks/bench_train.py`` times both).
Held-out test views are rendered every
``eval_every`` iterations and their L1 and PSNR logged; they are never trained on.
"""

from __future__ import annotations

import dataclasses
import math
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from bench.errors import BenchError
from bench.recon.capture import CaptureManifest, View
from bench.recon.config import TrainConfig, resolve_backend
from bench.recon.densify import PARAM_NAMES, SimpleDensifier
from bench.scene.gaussians import SH_C0, SH_REST_COUNTS, GaussianSplats

TOOL_ID = "train/1"
@dataclass
class TrainResult:
    """What :func:`train` returns.

    Attributes:
        splats: Trained Gaussians in the capture (splat) frame.
        log: One dict per evaluation: step, train_loss (mean since the last row),
            test_l1, test_psnr (means over test views; None without test views),
            num_gaussians.
        scene_scale: The scene scale used for the learning rates and densification.
        backend: The backend that ran (``cpu`` or ``gsplat``).
        train_view_ids: Ids of the views trained on.
        initial_gaussians: Gaussians at step 0.
    """

    splats: GaussianSplats
    log: list[dict[str, Any]]
    scene_scale: float
    backend: str
    train_view_ids: list[str]
    initial_gaussians: int


# --------------------------------------------------------------------------- images
def load_image(path: str | os.PathLike) -> np.ndarray:  # -> [H, W, 3] float32 in [0, 1]
    """Read an image as RGB float32 in [0, 1] (8- or 16-bit; alpha dropped)."""
    import cv2

    image = cv2.imread(str(path), cv2.IMREAD_UNCHANGED)
    if image is None:
        raise FileNotFoundError(f"cannot read image {path}; check the path and format")
    scale = 65535.0 if image.dtype == np.uint16 else 255.0
    if image.ndim == 2:
        image = np.repeat(image[..., None], 3, axis=2)
    image = cv2.cvtColor(image[..., :3], cv2.COLOR_BGR2RGB)
    return (image.astype(np.float32) / scale).clip(0.0, 1.0)


# --------------------------------------------------------------------------- init
def scene_scale(views: Sequence[View]) -> float:
    """1.1 x the largest distance of a camera centre from their mean (gsplat); 1.0 if 0."""
    centres = np.stack([v.camera.position for v in views])
    radius = float(np.linalg.norm(centres - centres.mean(axis=0), axis=1).max())
    return 1.1 * radius if radius > 1e-9 else 1.0


def splats_from_points(
    points: np.ndarray,  # [N, 3]
    colors: np.ndarray | None = None,  # [N, 3] in [0, 1]
    *,
    sh_degree: int = 3,
    init_opacity: float = 0.1,
    init_scale: float = 1.0,
) -> GaussianSplats:
    """Isotropic Gaussians on seed points (gsplat's init; identity rotations as 3DGS).

    Scale = ``init_scale`` x RMS distance to the 3 nearest other points.
    """
    from scipy.spatial import cKDTree

    points = np.asarray(points, dtype=np.float64)
    if points.ndim != 2 or points.shape[1] != 3 or len(points) < 2:
        raise BenchError(f"the seed must hold at least 2 points of 3 coordinates, got "
                         f"shape {points.shape}")
    if not np.isfinite(points).all():
        raise BenchError("the seed point cloud contains NaN/Inf coordinates; clean it first")
    n = len(points)
    k = min(4, n)
    dist, _ = cKDTree(points).query(points, k=k)
    rms = np.sqrt((dist[:, 1:] ** 2).mean(axis=1))
    rms = np.maximum(rms, 1e-7)
    rgb = np.full((n, 3), 0.5) if colors is None else np.asarray(colors, dtype=np.float64)
    opacity = float(np.clip(init_opacity, 1e-6, 1 - 1e-6))
    quats = np.zeros((n, 4), dtype=np.float32)
    quats[:, 0] = 1.0
    return GaussianSplats(
        means=points.astype(np.float32),
        quats=quats,
        log_scales=np.repeat(np.log(rms * init_scale)[:, None], 3, axis=1).astype(np.float32),
        opacity_logits=np.full(n, math.log(opacity / (1 - opacity)), dtype=np.float32),
        sh_dc=((rgb - 0.5) / SH_C0).astype(np.float32),
        sh_rest=np.zeros((n, SH_REST_COUNTS[sh_degree], 3), dtype=np.float32),
    )


def load_seed(path: str | os.PathLike, *, config: TrainConfig) -> GaussianSplats:
    """Read an init: a 3DGS PLY (used as is) or a point-cloud PLY (``x y z [red green blue]``)."""
    from plyfile import PlyData

    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"seed point cloud {path} does not exist; pass a PLY file "
                                "(a dense seed, e.g. from OpenMVS, or a 3DGS PLY)")
    try:
        vertex = PlyData.read(str(path))["vertex"]
    except Exception as exc:  # plyfile raises several types on malformed files
        raise BenchError(
            f"cannot read seed {path} as PLY ({exc}); pass a PLY point cloud"
        ) from None
    names = set(vertex.data.dtype.names or ())
    if {"f_dc_0", "opacity", "scale_0", "rot_0"} <= names:
        from bench.scene.ply import read_ply

        splats = read_ply(path)
        return _with_sh_degree(splats, config.sh_degree)
    if not {"x", "y", "z"} <= names:
        raise BenchError(f"seed {path} has no x, y, z vertex properties; pass a point cloud PLY")
    points = np.stack([vertex["x"], vertex["y"], vertex["z"]], axis=1)
    colors = None
    if {"red", "green", "blue"} <= names:
        raw = np.stack([vertex["red"], vertex["green"], vertex["blue"]], axis=1)
        colors = raw / 255.0 if raw.dtype == np.uint8 else raw.astype(np.float64)
    return splats_from_points(points, colors, sh_degree=config.sh_degree,
                              init_opacity=config.init_opacity, init_scale=config.init_scale)


def random_seed_splats(views: Sequence[View], *, config: TrainConfig,
                       scale: float) -> GaussianSplats:
    """Random init as gsplat's: uniform points in a cube of half-size 3 x scene_scale."""
    rng = np.random.default_rng(config.seed)
    centre = np.stack([v.camera.position for v in views]).mean(axis=0)
    points = centre + 3.0 * scale * (rng.random((config.random_init_points, 3)) * 2.0 - 1.0)
    colors = rng.random((config.random_init_points, 3))
    return splats_from_points(points, colors, sh_degree=config.sh_degree,
                              init_opacity=config.init_opacity, init_scale=config.init_scale)


def _with_sh_degree(splats: GaussianSplats, degree: int) -> GaussianSplats:
    """Pad (zeros) or truncate the SH rest coefficients to ``degree``."""
    k = SH_REST_COUNTS[degree]
    rest = splats.sh_rest[:, :k]
    if rest.shape[1] < k:
        pad = np.zeros((len(splats), k - rest.shape[1], 3), dtype=np.float32)
        rest = np.concatenate([rest, pad], axis=1)
    return splats.replace(sh_rest=np.ascontiguousarray(rest, dtype=np.float32))


# --------------------------------------------------------------------------- losses
def _gaussian_taps(size: int = 11, sigma: float = 1.5, *, dtype=None, device=None):
    """The normalised 1D Gaussian window [size]; the 2D window is its outer product."""
    import torch

    x = torch.arange(size, dtype=torch.float64) - (size - 1) / 2.0
    g = torch.exp(-(x * x) / (2 * sigma * sigma))
    return (g / g.sum()).to(dtype=dtype, device=device)


def ssim_map(img1, img2, *, window: int = 11, sigma: float = 1.5):  # [B, 3, H, W] x2 -> same
    """SSIM map with a Gaussian window and zero padding (the 3DGS training SSIM).

    Constants ``C1 = 0.01^2``, ``C2 = 0.03^2`` for images in [0, 1]. The five local moments
    (means, second moments, cross moment) are filtered in one grouped convolution per axis:
    the Gaussian window is separable and zero padding commutes with the split, so this is
    the 11 x 11 window's result (round-off apart) at 22 instead of 121 taps per pixel.
    """
    import torch
    import torch.nn.functional as F  # noqa: N812 - torch's conventional alias

    channels = img1.shape[1]
    taps = _gaussian_taps(window, sigma, dtype=img1.dtype, device=img1.device)
    moments = torch.cat([img1, img2, img1 * img1, img2 * img2, img1 * img2], dim=1)
    n = moments.shape[1]
    pad = window // 2
    rows = F.conv2d(moments, taps.view(1, 1, 1, window).expand(n, 1, 1, window).contiguous(),
                    padding=(0, pad), groups=n)
    filtered = F.conv2d(rows, taps.view(1, 1, window, 1).expand(n, 1, window, 1).contiguous(),
                        padding=(pad, 0), groups=n)
    mu1, mu2, e11, e22, e12 = filtered.split(channels, dim=1)
    mu1_sq, mu2_sq, mu12 = mu1 * mu1, mu2 * mu2, mu1 * mu2
    var1 = e11 - mu1_sq
    var2 = e22 - mu2_sq
    cov = e12 - mu12
    c1, c2 = 0.01**2, 0.03**2
    return ((2 * mu12 + c1) * (2 * cov + c2)) / ((mu1_sq + mu2_sq + c1) * (var1 + var2 + c2))


def photometric_loss(render, target, *, ssim_lambda: float = 0.2):  # [H, W, 3] x2 -> scalar
    """``(1 - ssim_lambda) * L1 + ssim_lambda * (1 - SSIM)`` (3DGS / gsplat)."""
    l1 = (render - target).abs().mean()
    a = render.permute(2, 0, 1)[None]
    b = target.permute(2, 0, 1)[None]
    ssim = ssim_map(a, b).mean()
    return (1.0 - ssim_lambda) * l1 + ssim_lambda * (1.0 - ssim), l1, ssim


# --------------------------------------------------------------------------- parameters
def _make_params(splats: GaussianSplats, device: str):
    import torch

    def p(a):  # a copy: the optimizer updates it in place, the caller's init stays intact
        return torch.nn.Parameter(torch.tensor(np.ascontiguousarray(a), dtype=torch.float32,
                                               device=device))

    return torch.nn.ParameterDict({
        "means": p(splats.means),
        "scales": p(splats.log_scales),
        "quats": p(splats.quats),
        "opacities": p(splats.opacity_logits),
        "sh0": p(splats.sh_dc[:, None, :]),
        "shN": p(splats.sh_rest),
    })


def means_lr_at(step: int, config: TrainConfig, scale: float) -> float:
    """Learning rate of the means after ``step`` steps (exponential decay).

    ``means_lr * scale`` at step 0 down to ``means_lr_final * scale`` at step ``iters``.
    """
    ratio = config.means_lr_final / config.means_lr
    return config.means_lr * scale * ratio ** (min(step, config.iters) / config.iters)


def _make_optimizers(params, config: TrainConfig, scale: float) -> dict[str, Any]:
    import torch

    lrs = {
        "means": config.means_lr * scale,
        "scales": config.scales_lr,
        "quats": config.quats_lr,
        "opacities": config.opacities_lr,
        "sh0": config.sh0_lr,
        "shN": config.shN_lr,
    }
    fused = params["means"].device.type == "cpu"  # one fused kernel per step (both rasterizers)
    return {name: torch.optim.Adam([{"params": params[name], "lr": lrs[name], "name": name}],
                                   eps=1e-15, fused=fused or None)
            for name in PARAM_NAMES}


def _splats_from_params(params) -> GaussianSplats:
    def a(name):
        return params[name].detach().cpu().numpy().astype(np.float32)

    return GaussianSplats(means=a("means"), quats=a("quats"), log_scales=a("scales"),
                          opacity_logits=a("opacities"), sh_dc=a("sh0")[:, 0, :],
                          sh_rest=np.ascontiguousarray(a("shN")))


# --------------------------------------------------------------------------- renderers
def _render_cpu(params, camera, sh_degree: int, background, *, raster: str = "torch",
                threads: int = 1) -> tuple[Any, dict[str, Any]]:
    args = (params["means"], params["quats"], params["scales"], params["opacities"],
            params["sh0"][:, 0, :], params["shN"], camera)
    if raster == "warp":
        from bench.render.warp_grad import rasterize as warp_rasterize

        out = warp_rasterize(*args, background=background, sh_degree=sh_degree,
                             threads=threads)
    else:
        from bench.render.torch_raster import rasterize

        out = rasterize(*args, background=background, sh_degree=sh_degree)
    info = {"means2d": out.means2d, "radii": out.radii, "width": camera.width,
            "height": camera.height, "n_cameras": 1}
    return out.rgb, info


def _render_gsplat(params, camera, sh_degree: int, background) -> tuple[Any, dict[str, Any]]:
    import torch
    from gsplat import rasterization

    device = params["means"].device
    viewmat = torch.as_tensor(camera.camera_from_world, dtype=torch.float32, device=device)
    ks = torch.as_tensor(camera.K, dtype=torch.float32, device=device)
    colors = torch.cat([params["sh0"], params["shN"]], dim=1)
    renders, _, info = rasterization(
        means=params["means"], quats=params["quats"], scales=torch.exp(params["scales"]),
        opacities=torch.sigmoid(params["opacities"]), colors=colors, viewmats=viewmat[None],
        Ks=ks[None], width=camera.width, height=camera.height, sh_degree=sh_degree,
        backgrounds=torch.as_tensor(background, dtype=torch.float32, device=device)[None],
        packed=False,
    )
    return renders[0], info


# --------------------------------------------------------------------------- training
def train(
    manifest: CaptureManifest,
    *,
    config: TrainConfig,
    plan: Any | None = None,
    init: GaussianSplats | None = None,
    show_progress: bool = False,
) -> TrainResult:
    """Train 3D Gaussians on the training views a coverage plan keeps.

    Args:
        manifest: A validated capture manifest (pinhole training views, test views).
        config: Training settings.
        plan: A :class:`perturbations.coverage.CoveragePlan` (None: all views).
        init: Initial Gaussians (a seed); None draws gsplat's random init.
        show_progress: Report progress on stderr (``bench.progress``).

    Returns:
        A :class:`TrainResult` (Gaussians in the capture frame + the training log).
    """
    import torch

    config.validate()
    backend = resolve_backend(config.backend)
    views = manifest.training_views(plan)
    for view in (*views, *manifest.test_views):
        if view.camera.model != "pinhole":
            raise BenchError(f"view {view.id!r} has a {view.camera.model} camera; training needs "
                             "pinhole views (reproject fisheye frames with bench.recon.reproject)")
    device = "cuda" if backend == "gsplat" else "cpu"
    was_deterministic = torch.are_deterministic_algorithms_enabled()
    threads = torch.get_num_threads()
    try:  # process-wide torch settings are restored afterwards
        if backend == "cpu":
            torch.use_deterministic_algorithms(True)
            if config.threads is not None:
                torch.set_num_threads(config.threads)
        return _train_loop(manifest, views, config, backend, device, init, show_progress)
    finally:
        torch.use_deterministic_algorithms(was_deterministic)
        torch.set_num_threads(threads)


class ImageCache:
    """Training or test images kept in memory in their file dtype (uint8 / uint16).

    Targets are converted to float32 [0, 1] on the training device one at a time, so 192
    views of 2048 x 2048 px take 2.4 GB of host memory, not 9.7 GB, and no GPU memory.
    """

    def __init__(self, manifest: CaptureManifest, views: Sequence[View]) -> None:
        import cv2

        self.raw: list[np.ndarray] = []
        for view in views:
            path = manifest.root / view.image
            image = cv2.imread(str(path), cv2.IMREAD_UNCHANGED)
            if image is None:
                raise FileNotFoundError(f"cannot read image {path}; check the path and format")
            if image.ndim == 2:
                image = np.repeat(image[..., None], 3, axis=2)
            self.raw.append(np.ascontiguousarray(cv2.cvtColor(image[..., :3], cv2.COLOR_BGR2RGB)))

    def __len__(self) -> int:
        return len(self.raw)

    def get(self, index: int, device: str):  # -> [H, W, 3] float32 tensor in [0, 1]
        """Image ``index`` as float32 in [0, 1] on ``device`` (same values as load_image)."""
        import torch

        raw = self.raw[index]
        scale = 65535.0 if raw.dtype == np.uint16 else 255.0
        return (torch.from_numpy(raw).to(device).float() / scale).clamp(0.0, 1.0)


def _make_strategy(backend: str, config: TrainConfig, params, optimizers, generator):
    """The densification strategy and the render function of a backend."""
    if backend == "gsplat":
        from gsplat.strategy import DefaultStrategy

        strategy = DefaultStrategy(refine_start_iter=config.refine_start_iter,
                                   refine_stop_iter=config.refine_stop_iter,
                                   refine_every=config.refine_every,
                                   reset_every=config.reset_every,
                                   grow_grad2d=config.grow_grad2d,
                                   grow_scale3d=config.grow_scale3d, prune_opa=config.prune_opa,
                                   prune_scale3d=config.prune_scale3d)
        strategy.check_sanity(params, optimizers)
        return strategy, _render_gsplat
    import functools

    import torch

    threads = config.threads if config.threads is not None else torch.get_num_threads()
    return SimpleDensifier(config, generator=generator), functools.partial(
        _render_cpu, raster=config.raster, threads=threads)


def evaluate_views(params, render, views: Sequence[View], images: ImageCache, *,
                   sh_degree: int, background, device: str) -> tuple[float, float]:
    """Mean L1 and mean PSNR (dB) of renders (clamped to [0, 1]) against view images."""
    import torch

    from metrics.psnr import psnr  # the registry's scorer: one PSNR definition project-wide

    l1s, psnrs = [], []
    with torch.no_grad():
        for index, view in enumerate(views):
            rgb, _ = render(params, view.camera, sh_degree, background)
            rgb = rgb.clamp(0.0, 1.0)
            target = images.get(index, device)
            l1s.append(float((rgb - target).abs().mean()))
            psnrs.append(float(psnr(rgb.cpu().numpy()[None], target.cpu().numpy()[None])[0]))
    return float(np.mean(l1s)), float(np.mean(psnrs))


def _train_loop(manifest, views, config, backend, device, init, show_progress) -> TrainResult:
    import torch

    from bench.progress import progress as progress_bar

    if backend == "gsplat":  # gsplat's split draws from torch's global generator
        torch.manual_seed(config.seed)
    generator = torch.Generator(device=device).manual_seed(config.seed)
    scale = scene_scale(views)
    splats = init if init is not None else random_seed_splats(views, config=config, scale=scale)
    params = _make_params(_with_sh_degree(splats, config.sh_degree), device)
    optimizers = _make_optimizers(params, config, scale)
    strategy, render = _make_strategy(backend, config, params, optimizers, generator)
    state = strategy.initialize_state(scene_scale=scale)
    images = ImageCache(manifest, views)
    tests, test_images = manifest.test_views, ImageCache(manifest, manifest.test_views)
    background = torch.tensor(config.background, dtype=torch.float32, device=device)
    rng = np.random.default_rng(config.seed)
    order: list[int] = []
    log: list[dict[str, Any]] = []
    losses: list[float] = []

    def sh_degree_at(step: int) -> int:
        return min(step // config.sh_degree_interval, config.sh_degree)

    def log_row(step: int) -> None:
        row: dict[str, Any] = {"step": step,
                               "train_loss": float(np.mean(losses)) if losses else None,
                               "test_l1": None, "test_psnr": None,
                               "num_gaussians": len(params["means"])}
        if tests:
            row["test_l1"], row["test_psnr"] = evaluate_views(
                params, render, tests, test_images, sh_degree=sh_degree_at(step),
                background=background, device=device)
        log.append(row)
        losses.clear()

    initial = len(params["means"])
    log_row(0)
    bar = progress_bar(range(config.iters), desc=f"train ({backend})", disable=not show_progress)
    for step in bar:
        if not order:  # a fresh seeded permutation of the views per epoch
            order = rng.permutation(len(views)).tolist()
        index = order.pop(0)
        rgb, info = render(params, views[index].camera, sh_degree_at(step), background)
        strategy.step_pre_backward(params, optimizers, state, step, info)
        loss, _, _ = photometric_loss(rgb, images.get(index, device),
                                      ssim_lambda=config.ssim_lambda)
        loss.backward()
        losses.append(float(loss.detach()))
        for optimizer in optimizers.values():
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)
        optimizers["means"].param_groups[0]["lr"] = means_lr_at(step + 1, config, scale)
        if config.densify:  # after the optimizer step, as gsplat's simple_trainer
            strategy.step_post_backward(params, optimizers, state, step, info)
        if (step + 1) % config.eval_every == 0 or step + 1 == config.iters:
            log_row(step + 1)
            bar.set_postfix(loss=f"{log[-1]['train_loss']:.4f}", gaussians=log[-1]["num_gaussians"])
    return TrainResult(
        splats=_splats_from_params(params), log=log, scene_scale=scale, backend=backend,
        train_view_ids=[v.id for v in views], initial_gaussians=initial,
    )


def config_dict(config: TrainConfig) -> dict[str, Any]:
    """The resolved config as a JSON-able dict."""
    return dataclasses.asdict(config)


def registered_bundle(splats: GaussianSplats, *, name: str,
                      reference: str | os.PathLike | None = None):
    """A scene bundle holding trained Gaussians (splat frame), registered like ``reference``.

    Only the reference's ``scene.json`` is read (never its background PLY, which may hold
    millions of Gaussians): its ``world_from_splat``, table, keepouts, camera roles and
    further keys are carried over, and its ``cameras/`` / ``objects/`` folders are copied
    when the bundle is saved. Without a reference the registration is the identity.

    Args:
        splats: Trained Gaussians in the capture (splat) frame, written as-is.
        name: Scene name (the reference's name is replaced).
        reference: An existing bundle directory or its ``scene.json``.

    Returns:
        A :class:`bench.scene.bundle.SceneBundle`.
    """
    from bench.scene.bundle import SceneBundle, read_scene_spec
    from bench.scene.transforms import transform_splats

    if reference is None:
        return SceneBundle(name=name, background=splats).with_background(splats, splat=splats)
    bundle, _ = read_scene_spec(reference)
    world = transform_splats(splats, bundle.similarity)
    bundle = bundle.replace(name=name, background=world)
    return bundle.with_background(world, splat=splats)
