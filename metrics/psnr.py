"""PSNR over RGB with data range 1 (what gsplat's eval and pyiqa's ``psnr`` report)."""

from __future__ import annotations

import numpy as np

from metrics.base import Scorer, ScorerInfo
from metrics.images import as_image_batch, check_pair, check_unit_range, to_float64


def psnr(pred: np.ndarray, ref: np.ndarray) -> np.ndarray:  # [N,H,W,3] x2 -> [N]
    """Peak signal-to-noise ratio per image: ``10 log10(1 / MSE)`` over all pixels and channels.

    Frame by frame, each frame's range check (one pass) pulls it into cache for the
    difference and the sum of squares that follow, so the checks cost little
    (``benchmarks/bench_metrics.py``).

    Args:
        pred: Rendered / distorted images, uint8 or float in [0, 1].
        ref: Reference images of the same shape.

    Returns:
        float64 ``[N]`` in dB; ``inf`` where the images are identical.
    """
    pred = as_image_batch(pred, name="pred", convert=False, check_values=False)
    ref = as_image_batch(ref, name="ref", convert=False, check_values=False)
    check_pair(pred, ref)
    sse = np.empty(len(pred))
    for i, (p, r) in enumerate(zip(pred, ref, strict=True)):
        for frame, name in ((p, "pred"), (r, "ref")):
            if frame.dtype != np.uint8:
                check_unit_range(frame, name=name)
        if p.dtype == r.dtype == np.uint8:  # 8-bit pair: exact integer sum of squares
            diff = p.astype(np.int64).reshape(-1) - r.reshape(-1)  # [H*W*3]
            sse[i] = np.einsum("i,i->", diff, diff) / 255.0**2
            continue
        diff = (to_float64(p) - to_float64(r)).reshape(-1)  # [H*W*3]
        sse[i] = np.einsum("i,i->", diff, diff)  # no BLAS: no thread start-up per frame
    with np.errstate(divide="ignore"):
        return 10.0 * np.log10(pred[0].size / sse)


class PSNR(Scorer):
    """Registry scorer for :func:`psnr`."""

    def __init__(self, info: ScorerInfo, *, device: str = "cpu") -> None:
        self.info = info

    def score(  # [N,H,W,3] x2 -> [N]
        self, pred: np.ndarray, ref: np.ndarray | None = None
    ) -> np.ndarray:
        """PSNR per image pair, dB."""
        return psnr(pred, ref)
