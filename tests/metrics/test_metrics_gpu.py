"""CUDA scorers agree with the CPU ones (runs only where torch sees a GPU)."""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA"),
]


def test_cuda_scorers_match_cpu(calibration_pairs):
    from metrics.registry import get_scorer

    dist, ref = calibration_pairs
    # golden: the same scorer on CPU (tested against skimage / lpips / nvs-sqa elsewhere)
    for name, tol in (("ssim", 1e-10), ("lpips", 1e-4)):
        cpu = get_scorer(name, device="cpu")(dist, ref)
        gpu = get_scorer(name, device="cuda")(dist, ref)
        np.testing.assert_allclose(gpu, cpu, rtol=0, atol=tol, err_msg=name)
    cpu = get_scorer("nvs-sqa", device="cpu")(dist)
    gpu = get_scorer("nvs-sqa", device="cuda")(dist)
    np.testing.assert_allclose(gpu, cpu, rtol=0, atol=1e-2)
