"""Shared fixtures for the metrics tests: calibration pairs and scorers built once per session."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

DATA = Path(__file__).parent / "data" / "calibration"
CALIBRATION_NAMES = ("I03", "I04", "I06", "I08", "I19")


def read_rgb(path: Path) -> np.ndarray:
    import imageio.v3 as iio

    return np.asarray(iio.imread(path))[..., :3]


@pytest.fixture(scope="session")
def calibration_pairs() -> tuple[np.ndarray, np.ndarray]:
    """(distorted [5, 384, 512, 3] uint8, reference [5, 384, 512, 3] uint8), pyiqa's set."""
    dist = np.stack([read_rgb(DATA / "dist" / f"{n}.png") for n in CALIBRATION_NAMES])
    ref = np.stack([read_rgb(DATA / "ref" / f"{n}.png") for n in CALIBRATION_NAMES])
    return dist, ref


@pytest.fixture(scope="session")
def lpips_scorer():
    from metrics.registry import get_scorer

    return get_scorer("lpips", device="cpu")


@pytest.fixture(scope="session")
def nvs_sqa_scorer():
    from metrics.registry import get_scorer

    return get_scorer("nvs-sqa", device="cpu")


def _smooth_image(rng: np.random.Generator, h: int, w: int) -> np.ndarray:
    """Natural-looking float image: blurred noise at two scales plus a gradient, in [0, 1]."""
    from scipy.ndimage import gaussian_filter

    coarse = gaussian_filter(rng.random((h, w, 3)), sigma=(6, 6, 0))
    fine = gaussian_filter(rng.random((h, w, 3)), sigma=(1, 1, 0))
    ramp = np.linspace(0, 1, w)[None, :, None] * np.linspace(0.2, 0.8, 3)[None, None, :]
    img = 0.5 * coarse + 0.2 * fine + 0.3 * ramp
    img = (img - img.min()) / (img.max() - img.min())
    return img


@pytest.fixture(scope="session")
def smooth_image():
    """Factory ``smooth_image(rng, h, w)`` of natural-looking float images."""
    return _smooth_image
