"""The ``gsplat`` backend: ``gsplat.rasterization`` on CUDA (optional extra).

Constants passed from :mod:`bench.render.constants`: ``eps2d`` =
LOW_PASS_PX, ``near_plane``, ``far_plane``, ``tile_size``, classic
(non-antialiased) mode, ``render_mode="RGB+ED"`` (expected depth). gsplat's
compiled alpha clamp (0.999) and stop rule differ slightly from ours (see the
constants module).

Fisheye ``direct`` mode uses gsplat's ``camera_model="fisheye"``, which is
the equidistant model without distortion and only sees in front of the camera:
it is used when k1..k4 are all 0 and the lens' field of view is at most 180
degrees. Its expected depth is camera z; it is converted to distance along the
pixel's ray (our fisheye convention) by dividing by the ray's z component.
Other fisheye cameras need ``fisheye_mode="cubemap"`` (``render`` switches to
it automatically when the backend was chosen by ``auto``).
"""

from __future__ import annotations

import math

import numpy as np

from bench.render import constants as K
from bench.render.output import RenderOutput, resolve_sh_degree
from bench.scene.cameras import Camera
from bench.scene.gaussians import GaussianSplats

_DEVICE_CACHE: dict[int, tuple] = {}
# torch device of the gsplat calls. Always "cuda" in use; the CPU tests set "cpu" and
# substitute gsplat's own pure-torch reference functions for its CUDA kernels.
DEVICE = "cuda"


def supports_direct(camera: Camera) -> bool:
    """Whether gsplat renders ``camera`` directly (pinhole, or equidistant fisheye <= 180 deg)."""
    if camera.model == "pinhole":
        return True
    return not any(camera.distortion) and camera.max_theta <= math.pi / 2 + 1e-9


def _import():
    try:
        import torch
        from gsplat import rasterization
    except ImportError as exc:
        raise ValueError(
            f"the gsplat backend needs gsplat ({exc}); install it with "
            "`pip install splatbench[gpu]` on a CUDA machine, or use backend='cpu'"
        ) from None
    if DEVICE == "cuda" and not torch.cuda.is_available():
        raise ValueError("the gsplat backend needs a CUDA GPU; use backend='cpu' (or 'auto')")
    return torch, rasterization


def _tensors(splats: GaussianSplats, torch):
    key = id(splats)
    hit = _DEVICE_CACHE.get(key)
    if hit is not None and hit[0] is splats and hit[2] == DEVICE:
        return hit[1]
    dev = DEVICE

    def t(a):
        return torch.as_tensor(np.ascontiguousarray(a, dtype=np.float32), device=dev)

    tensors = {
        "means": t(splats.means),
        "quats": t(splats.normalized_quats()),
        "scales": t(splats.scales()),
        "opacities": t(splats.opacities()),
        "colors": t(np.concatenate([splats.sh_dc[:, None, :], splats.sh_rest], axis=1)),
    }
    _DEVICE_CACHE.clear()  # keep one scene on the GPU at a time
    _DEVICE_CACHE[key] = (splats, tensors, dev)
    return tensors


def render_gsplat_batch(
    splats: GaussianSplats,
    cameras: list[Camera],
    *,
    background=(0.0, 0.0, 0.0),
    sh_degree: int | None = None,
) -> list[RenderOutput]:
    """Render cameras with gsplat, one batched call per (size, model) group."""
    torch, rasterization = _import()
    for cam in cameras:
        if not supports_direct(cam):
            raise ValueError(
                f"gsplat cannot render fisheye camera {cam.name!r} directly (distortion or a "
                "field of view over 180 deg); use fisheye_mode='cubemap' or backend='cpu'"
            )
    degree = resolve_sh_degree(splats.sh_degree, sh_degree)
    outputs: list[RenderOutput | None] = [None] * len(cameras)
    if splats.num == 0:
        return [RenderOutput.empty(c, background) for c in cameras]
    tens = _tensors(splats, torch)
    groups: dict[tuple, list[int]] = {}
    for i, cam in enumerate(cameras):
        groups.setdefault((cam.width, cam.height, cam.model), []).append(i)
    bg = torch.tensor(background, dtype=torch.float32, device=DEVICE)
    for (width, height, model), idx in groups.items():
        viewmats = torch.as_tensor(np.stack([cameras[i].camera_from_world for i in idx]),
                                   dtype=torch.float32, device=DEVICE)
        ks = torch.as_tensor(np.stack([cameras[i].K for i in idx]), dtype=torch.float32,
                             device=DEVICE)
        with torch.no_grad():
            colors, alphas, _ = rasterization(
                tens["means"], tens["quats"], tens["scales"], tens["opacities"], tens["colors"],
                viewmats, ks, width, height, near_plane=K.NEAR_PLANE, far_plane=K.FAR_PLANE,
                eps2d=K.LOW_PASS_PX, sh_degree=degree, packed=False, tile_size=K.TILE_SIZE,
                backgrounds=bg.expand(len(idx), 3), render_mode="RGB+ED",
                rasterize_mode="classic", camera_model=model,
            )
        colors, alphas = colors.cpu().numpy(), alphas[..., 0].cpu().numpy()
        for j, i in enumerate(idx):
            outputs[i] = _to_output(cameras[i], colors[j], alphas[j], background)
    return outputs  # type: ignore[return-value]


def _to_output(  # colors [H, W, 4] (RGB + expected depth), alpha [H, W]
    camera: Camera, colors: np.ndarray, alpha: np.ndarray, background=(0.0, 0.0, 0.0)
) -> RenderOutput:
    rgb = colors[..., :3].astype(np.float32)
    depth = colors[..., 3].astype(np.float32)  # expected z (already divided by alpha)
    valid = np.ones(alpha.shape, bool)
    if camera.model == "fisheye":
        rays, valid = camera.pixel_rays()
        valid = valid.copy()
        with np.errstate(divide="ignore", invalid="ignore"):
            depth = (depth / rays[..., 2]).astype(np.float32)
        alpha = np.where(valid, alpha, 0.0)
        # Outside the lens' image circle: background, like every other backend (gsplat
        # itself draws Gaussians there).
        rgb = np.where(valid[..., None], rgb, np.asarray(background, np.float32))
    depth = np.where(alpha > 0, depth, np.inf).astype(np.float32)
    return RenderOutput(rgb, depth, alpha.astype(np.float32), valid)


def render_gsplat(
    splats: GaussianSplats,
    camera: Camera,
    *,
    background=(0.0, 0.0, 0.0),
    sh_degree: int | None = None,
) -> RenderOutput:
    """Render one camera with gsplat (see :func:`render_gsplat_batch`)."""
    return render_gsplat_batch(splats, [camera], background=background, sh_degree=sh_degree)[0]
