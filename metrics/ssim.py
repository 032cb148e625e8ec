"""SSIM (Wang et al. 2004) with the Gaussian window used by gsplat / pyiqa / scikit-image.

Settings: Gaussian window sigma 1.5 truncated at 3.5 sigma (11 x 11), K1 0.01,
K2 0.03, data range 1, population (not sample) covariance, computed per channel
and averaged over the image area that the window fully covers, then over the
three channels. This equals ``skimage.metrics.structural_similarity(a, b,
gaussian_weights=True, sigma=1.5, use_sample_covariance=False, data_range=1,
channel_axis=-1)``: scikit-image filters with reflect padding but then crops a
border of 5 pixels, exactly the part a "valid" convolution drops.

:func:`ssim` is the fast path: one separable float64 filter pass over the
stacked moment images (x, y, x^2, y^2, xy for all three channels at once) per
frame with ``scipy.ndimage.correlate1d`` on CPU, or float64 ``conv2d`` batched over
frames on CUDA. On CPU the filter is memory-bound: one frame's 15 planes at a
time beat a whole batch, and match scikit-image's per-plane speed (measured in
``benchmarks/bench_metrics.py``; torch has no fast float64 CPU convolution); float64
is needed because ``E[x^2] - E[x]^2`` cancels badly in float32 (errors ~1e-4 in
SSIM, against the 1e-6 we guarantee). :func:`ssim_reference` is the plain
per-channel, per-moment scipy version the fast path is tested against.
"""

from __future__ import annotations

import numpy as np

from bench.errors import BenchError
from metrics.base import Scorer, ScorerInfo
from metrics.images import as_image_batch, check_pair, to_float64

SIGMA = 1.5
TRUNCATE = 3.5
K1 = 0.01
K2 = 0.03
DATA_RANGE = 1.0
RADIUS = int(TRUNCATE * SIGMA + 0.5)  # 5, as scipy.ndimage.gaussian_filter computes it
WIN_SIZE = 2 * RADIUS + 1  # 11


def gaussian_kernel_1d() -> np.ndarray:  # [WIN_SIZE]
    """The normalised 1-D Gaussian taps scipy.ndimage uses for sigma 1.5, truncate 3.5."""
    x = np.arange(-RADIUS, RADIUS + 1, dtype=np.float64)
    w = np.exp(-0.5 * (x / SIGMA) ** 2)
    return w / w.sum()


def _check_size(shape: tuple[int, ...]) -> None:
    h, w = shape[1], shape[2]
    if h < WIN_SIZE or w < WIN_SIZE:
        raise BenchError(
            f"SSIM needs images of at least {WIN_SIZE}x{WIN_SIZE} pixels (its Gaussian window), "
            f"got {w}x{h}; score larger images"
        )


def _ssim_map_terms(mu_x, mu_y, xx, yy, xy):
    """SSIM map from filtered moments (works for numpy arrays and torch tensors)."""
    c1 = (K1 * DATA_RANGE) ** 2
    c2 = (K2 * DATA_RANGE) ** 2
    var_x = xx - mu_x * mu_x
    var_y = yy - mu_y * mu_y
    cov = xy - mu_x * mu_y
    num = (2 * mu_x * mu_y + c1) * (2 * cov + c2)
    den = (mu_x * mu_x + mu_y * mu_y + c1) * (var_x + var_y + c2)
    return num / den


def _ssim_frame_cpu(x: np.ndarray, y: np.ndarray) -> float:  # [H,W,3] x2 -> scalar
    """Mean SSIM of one frame: all 15 moment planes filtered in one pass per axis."""
    from scipy.ndimage import correlate1d

    h, w = x.shape[:2]
    taps = gaussian_kernel_1d()
    moments = np.empty((5, 3, h, w))  # x, y, x^2, y^2, xy per channel
    moments[0] = x.transpose(2, 0, 1)
    moments[1] = y.transpose(2, 0, 1)
    np.multiply(moments[0], moments[0], out=moments[2])
    np.multiply(moments[1], moments[1], out=moments[3])
    np.multiply(moments[0], moments[1], out=moments[4])
    rows = np.empty_like(moments)
    # reflect mode as scikit-image; only the valid region (border RADIUS cropped) is used
    correlate1d(moments, taps, axis=2, mode="reflect", output=rows)
    inner = rows[:, :, RADIUS:-RADIUS]
    filt = correlate1d(inner, taps, axis=3, mode="reflect")[..., RADIUS:-RADIUS]
    return float(_ssim_map_terms(*filt).mean(axis=(1, 2)).mean())


def _ssim_batch_torch(x, y, device: str) -> np.ndarray:  # [n,H,W,3] x2 -> [n]
    """Mean SSIM per frame with float64 conv2d (valid), batched over frames and channels."""
    import torch
    import torch.nn.functional as F

    taps = torch.from_numpy(gaussian_kernel_1d()).to(device)
    x = torch.from_numpy(x).to(device).permute(0, 3, 1, 2)
    y = torch.from_numpy(y).to(device).permute(0, 3, 1, 2)
    n, c, h, w = x.shape
    stack = torch.stack([x, y, x * x, y * y, x * y]).reshape(5 * n * c, 1, h, w)
    filt = F.conv2d(F.conv2d(stack, taps.view(1, 1, 1, WIN_SIZE)), taps.view(1, 1, WIN_SIZE, 1))
    mu_x, mu_y, xx, yy, xy = filt.reshape(5, n, c, h - 2 * RADIUS, w - 2 * RADIUS)
    return _ssim_map_terms(mu_x, mu_y, xx, yy, xy).mean(dim=(2, 3)).mean(dim=1).cpu().numpy()


def ssim(
    pred: np.ndarray, ref: np.ndarray, *, device: str = "cpu", batch_size: int = 16
) -> np.ndarray:  # [N,H,W,3] x2 -> [N]
    """Mean SSIM per image (fast path).

    Args:
        pred: Rendered / distorted images, uint8 or float in [0, 1].
        ref: Reference images of the same shape.
        device: ``"cpu"`` (scipy, frame by frame) or a CUDA device (torch, batched).
        batch_size: Frames per conv2d batch on CUDA (~5 float64 maps per pixel each).

    Returns:
        float64 ``[N]``.
    """
    pred = as_image_batch(pred, name="pred", convert=False)
    ref = as_image_batch(ref, name="ref", convert=False)
    check_pair(pred, ref)
    _check_size(pred.shape)
    if device == "cpu":
        return np.array([_ssim_frame_cpu(to_float64(p), to_float64(r))
                         for p, r in zip(pred, ref, strict=True)])
    return np.concatenate([
        _ssim_batch_torch(to_float64(pred[i : i + batch_size]),
                          to_float64(ref[i : i + batch_size]), device)
        for i in range(0, len(pred), batch_size)
    ])


def ssim_reference(pred: np.ndarray, ref: np.ndarray) -> np.ndarray:  # [N,H,W,3] x2 -> [N]
    """Plain reference: scipy Gaussian filter per image and channel, crop, mean."""
    from scipy.ndimage import gaussian_filter

    pred = as_image_batch(pred, name="pred")
    ref = as_image_batch(ref, name="ref")
    check_pair(pred, ref)
    _check_size(pred.shape)
    scores = []
    for x_img, y_img in zip(pred, ref, strict=True):
        per_channel = []
        for ch in range(3):
            x, y = x_img[..., ch], y_img[..., ch]

            def filt(a):
                return gaussian_filter(a, sigma=SIGMA, truncate=TRUNCATE, mode="reflect")

            smap = _ssim_map_terms(filt(x), filt(y), filt(x * x), filt(y * y), filt(x * y))
            per_channel.append(smap[RADIUS:-RADIUS, RADIUS:-RADIUS].mean())
        scores.append(np.mean(per_channel))
    return np.asarray(scores, dtype=np.float64)


class SSIM(Scorer):
    """Registry scorer for :func:`ssim`."""

    def __init__(self, info: ScorerInfo, *, device: str = "cpu", batch_size: int = 16) -> None:
        self.info = info
        self.device = device
        self.batch_size = batch_size

    def score(  # [N,H,W,3] x2 -> [N]
        self, pred: np.ndarray, ref: np.ndarray | None = None
    ) -> np.ndarray:
        """SSIM per image pair."""
        return ssim(pred, ref, device=self.device, batch_size=self.batch_size)
