"""PSNR over RGB with data range 1 (what gsplat's eval and pyiqa's ``psnr`` report)."""

from __future__ import annotations

import numpy as np

from metrics.base import Scorer, ScorerInfo
from metrics.images import as_image_batch, check_pair, to_float64

CHUNK = 4  # images converted to float64 at a time (keeps temporaries in cache)


def psnr(pred: np.ndarray, ref: np.ndarray) -> np.ndarray:  # [N,H,W,3] x2 -> [N]
    """Peak signal-to-noise ratio per image: ``10 log10(1 / MSE)`` over all pixels and channels.

    Args:
        pred: Rendered / distorted images, uint8 or float in [0, 1].
        ref: Reference images of the same shape.

    Returns:
        float64 ``[N]`` in dB; ``inf`` where the images are identical.
    """
    pred = as_image_batch(pred, name="pred", convert=False)
    ref = as_image_batch(ref, name="ref", convert=False)
    check_pair(pred, ref)
    mse = np.concatenate([
        np.mean((to_float64(pred[i : i + CHUNK]) - to_float64(ref[i : i + CHUNK])) ** 2,
                axis=(1, 2, 3))
        for i in range(0, len(pred), CHUNK)
    ])
    with np.errstate(divide="ignore"):
        return 10.0 * np.log10(1.0 / mse)


class PSNR(Scorer):
    """Registry scorer for :func:`psnr`."""

    def __init__(self, info: ScorerInfo, *, device: str = "cpu") -> None:
        self.info = info

    def score(self, pred: np.ndarray, ref: np.ndarray | None = None) -> np.ndarray:
        return psnr(pred, ref)
