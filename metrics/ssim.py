"""SSIM (Wang et al. 2004) with the Gaussian window used by gsplat / pyiqa / scikit-image.

Settings: Gaussian window sigma 1.5 truncated at 3.5 sigma (11 x 11), K1 0.01,
K2 0.03, data range 1, population (not sample) covariance, computed per channel
and averaged over the image area that the window fully covers, then over the
three channels. This equals ``skimage.metrics.structural_similarity(a, b,
gaussian_weights=True, sigma=1.5, use_sample_covariance=False, data_range=1,
channel_axis=-1)``: scikit-image filters with reflect padding but then crops a
border of 5 pixels, exactly the part a "valid" convolution drops.

:func:`ssim` is the fast path (separable float64 convolutions in torch, batched
over images and channels); :func:`ssim_reference` is the plain scipy version
it is tested against.
"""

from __future__ import annotations

import numpy as np

from bench.errors import BenchError
from metrics.base import Scorer, ScorerInfo
from metrics.images import as_image_batch, check_pair

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


def ssim(
    pred: np.ndarray, ref: np.ndarray, *, device: str = "cpu", batch_size: int = 16
) -> np.ndarray:  # [N,H,W,3] x2 -> [N]
    """Mean SSIM per image (fast batched path).

    Args:
        pred: Rendered / distorted images, uint8 or float in [0, 1].
        ref: Reference images of the same shape.
        device: Torch device for the convolutions.
        batch_size: Images per convolution batch (bounds memory: ~5 float64 maps per pixel).

    Returns:
        float64 ``[N]``.
    """
    import torch
    import torch.nn.functional as F

    pred = as_image_batch(pred, name="pred")
    ref = as_image_batch(ref, name="ref")
    check_pair(pred, ref)
    _check_size(pred.shape)
    taps = torch.from_numpy(gaussian_kernel_1d()).to(device)
    k_row = taps.view(1, 1, 1, WIN_SIZE)
    k_col = taps.view(1, 1, WIN_SIZE, 1)
    out = []
    for start in range(0, pred.shape[0], batch_size):
        x = torch.from_numpy(pred[start : start + batch_size]).to(device).permute(0, 3, 1, 2)
        y = torch.from_numpy(ref[start : start + batch_size]).to(device).permute(0, 3, 1, 2)
        n, c, h, w = x.shape
        # five moment images per channel, filtered together: [5, N*C, H, W] -> [5*N*C, 1, H, W]
        stack = torch.stack([x, y, x * x, y * y, x * y]).reshape(5 * n * c, 1, h, w)
        filt = F.conv2d(F.conv2d(stack, k_row), k_col)  # valid: [5*N*C, 1, H-10, W-10]
        mu_x, mu_y, xx, yy, xy = filt.reshape(5, n, c, h - 2 * RADIUS, w - 2 * RADIUS)
        smap = _ssim_map_terms(mu_x, mu_y, xx, yy, xy)
        out.append(smap.mean(dim=(2, 3)).mean(dim=1).cpu().numpy())
    return np.concatenate(out)


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

    def score(self, pred: np.ndarray, ref: np.ndarray | None = None) -> np.ndarray:
        return ssim(pred, ref, device=self.device, batch_size=self.batch_size)
