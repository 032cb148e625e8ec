"""PSNR against its closed form; SSIM against scikit-image and the scipy reference path."""

from __future__ import annotations

import numpy as np
import pytest
from skimage.metrics import structural_similarity

from bench.errors import BenchError
from metrics.psnr import psnr
from metrics.ssim import WIN_SIZE, ssim, ssim_reference


def skimage_ssim(a: np.ndarray, b: np.ndarray) -> float:
    # golden: scikit-image with the settings the issue names
    return structural_similarity(
        a, b, gaussian_weights=True, sigma=1.5, use_sample_covariance=False, data_range=1,
        channel_axis=-1,
    )


def test_psnr_closed_form_constant_offset():
    # closed form: a uniform offset d gives MSE d^2, so PSNR = -20 log10(d)
    ref = np.full((2, 8, 9, 3), 0.25)
    for d in (0.5, 0.1, 0.01):
        got = psnr(ref + d, ref)
        assert got == pytest.approx(np.full(2, -20 * np.log10(d)), abs=1e-10)


def test_psnr_closed_form_random_and_uint8():
    rng = np.random.default_rng(3)
    a = rng.integers(0, 256, (3, 17, 23, 3), dtype=np.uint8)
    b = rng.integers(0, 256, (3, 17, 23, 3), dtype=np.uint8)
    # closed form on integers: MSE = sum((a-b)^2) / (255^2 * count)
    diff = a.astype(np.int64) - b.astype(np.int64)
    mse = (diff**2).sum(axis=(1, 2, 3)) / (255.0**2 * diff[0].size)
    assert np.allclose(psnr(a, b), 10 * np.log10(1 / mse), rtol=0, atol=1e-10)
    assert np.isinf(psnr(a, a)).all()



def test_psnr_equals_plain_numpy_loop_on_every_dtype_mix():
    # reference: the textbook per-image float64 formula
    rng = np.random.default_rng(5)
    a = rng.random((4, 13, 21, 3))
    b = np.clip(a + 0.05 * rng.standard_normal(a.shape), 0, 1)
    b8 = np.rint(b * 255).astype(np.uint8)
    for pred, ref in ((a, b), (a.astype(np.float32), b), (a, b8), (a.astype(np.float16), b8)):
        p64 = pred / 255.0 if pred.dtype == np.uint8 else pred.astype(np.float64)
        r64 = ref / 255.0 if ref.dtype == np.uint8 else ref.astype(np.float64)
        expected = [10 * np.log10(1 / np.mean((x - y) ** 2)) for x, y in zip(p64, r64, strict=True)]
        np.testing.assert_allclose(psnr(pred, ref), expected, rtol=0, atol=1e-10)


@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64, ">f8"])
@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf, -1e-300, -1.0, 1.0001, 7.0])
def test_range_check_catches_every_bad_value_in_any_frame(dtype, bad):
    # the one-pass bit test must refuse what min/max would refuse, in any frame and position
    a = np.full((3, 12, 12, 3), 0.5)
    b = a.copy()
    b[2, 11, 5, 1] = bad  # last frame: PSNR checks frame by frame
    b = b.astype(dtype)
    stored = float(b[2, 11, 5, 1])
    if 0.0 <= stored <= 1.0:  # the cast rounded it into range (e.g. float16(1.0001) == 1)
        assert psnr(a.astype(dtype), b).shape == (3,)  # accepted, no error
    else:
        with pytest.raises(BenchError, match=r"NaN|\[0, 1\]"):
            psnr(a.astype(dtype), b)
        with pytest.raises(BenchError, match=r"NaN|\[0, 1\]"):
            psnr(b, a)
        with pytest.raises(BenchError, match=r"NaN|\[0, 1\]"):
            ssim(b, a)


@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64])
def test_range_check_accepts_the_closed_interval_and_negative_zero(dtype):
    a = np.zeros((1, 11, 11, 3), dtype=dtype)
    a[0, 0, 0] = (1.0, -0.0, np.finfo(dtype).tiny)  # both ends, -0.0 and a tiny positive
    assert np.isfinite(ssim(a, a)).all()
    assert np.isinf(psnr(a, a)).all()


@pytest.mark.parametrize("shape", [(11, 11), (32, 32), (37, 53), (64, 45), (101, 77)])
def test_ssim_matches_skimage_random(shape):
    rng = np.random.default_rng(sum(shape))
    a = rng.random((3, *shape, 3))
    b = np.clip(a + 0.15 * rng.standard_normal(a.shape), 0, 1)
    expected = [skimage_ssim(x, y) for x, y in zip(a, b, strict=True)]
    assert np.abs(ssim(a, b) - expected).max() < 1e-6
    assert np.abs(ssim_reference(a, b) - expected).max() < 1e-6


@pytest.mark.parametrize("shape", [(48, 64), (63, 91), (128, 96)])
def test_ssim_matches_skimage_natural(shape, smooth_image):
    rng = np.random.default_rng(7)
    a = np.stack([smooth_image(rng, *shape) for _ in range(2)])
    b = np.clip(a + 0.03 * rng.standard_normal(a.shape), 0, 1)
    b[1] = np.clip(a[1] * 0.8 + 0.1, 0, 1)  # contrast/brightness change instead of noise
    expected = [skimage_ssim(x, y) for x, y in zip(a, b, strict=True)]
    assert np.abs(ssim(a, b) - expected).max() < 1e-6


def test_ssim_matches_skimage_on_calibration_pairs(calibration_pairs):
    dist, ref = calibration_pairs
    d, r = dist[:2, :120, :150], ref[:2, :120, :150]
    expected = [skimage_ssim(x / 255.0, y / 255.0) for x, y in zip(d, r, strict=True)]
    assert np.abs(ssim(d, r) - expected).max() < 1e-6


def test_ssim_constant_images():
    a = np.full((1, 20, 30, 3), 0.3)
    b = np.full((1, 20, 30, 3), 0.7)
    # constant images: variances 0, so SSIM = luminance term only (closed form)
    c1 = 0.01**2
    closed = (2 * 0.3 * 0.7 + c1) / (0.3**2 + 0.7**2 + c1)
    assert ssim(a, b)[0] == pytest.approx(closed, abs=1e-12)
    assert abs(ssim(a, b)[0] - skimage_ssim(a[0], b[0])) < 1e-6
    assert ssim(a, a)[0] == pytest.approx(1.0, abs=1e-12)


def test_ssim_torch_batched_path_matches_cpu_path():
    # the CUDA path (float64 conv2d, batched) run on the CPU against the scipy frame path
    from metrics.ssim import _ssim_batch_torch

    rng = np.random.default_rng(11)
    a = rng.random((5, 24, 31, 3))
    b = rng.random((5, 24, 31, 3))
    np.testing.assert_allclose(_ssim_batch_torch(a, b, "cpu"), ssim(a, b), rtol=0, atol=1e-12)


@pytest.mark.parametrize("fn", [psnr, ssim])
def test_bad_inputs(fn):
    a = np.zeros((2, 16, 16, 3))
    with pytest.raises(BenchError, match="shape"):
        fn(a, np.zeros((2, 16, 17, 3)))
    with pytest.raises(BenchError, match=r"\[0, 1\]"):
        fn(a + 2.0, a)
    with pytest.raises(BenchError, match="RGB"):
        fn(np.zeros((2, 16, 16)), np.zeros((2, 16, 16)))
    with pytest.raises(BenchError, match="NaN"):
        fn(np.full((1, 16, 16, 3), np.nan), a[:1])


def test_ssim_too_small():
    a = np.zeros((1, WIN_SIZE - 1, 20, 3))
    with pytest.raises(BenchError, match="at least 11x11"):
        ssim(a, a)
