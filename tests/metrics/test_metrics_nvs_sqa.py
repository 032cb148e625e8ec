"""NVS-SQA on in-memory frames equals the nvs-sqa package's own QualityAssessor on PNG folders."""

from __future__ import annotations

import contextlib
import io
import warnings

import numpy as np
import pytest

from bench.errors import BenchError
from metrics.images import quantize_8bit


@pytest.fixture(scope="module")
def quality_assessor():
    import nvs_sqa

    with contextlib.redirect_stdout(io.StringIO()), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return nvs_sqa.QualityAssessor(device="cpu")


def _sequence(rng, smooth_image, n, h, w):
    base = smooth_image(rng, h, w)
    shifts = [np.roll(base, 3 * i, axis=1) for i in range(n)]  # a panning camera
    return np.clip(np.stack(shifts) + 0.02 * rng.standard_normal((n, h, w, 3)), 0, 1)


def _assessor_scores(qa, tmp_path, sequences):
    import imageio.v3 as iio

    # the package's layout: one sub-folder per sequence, frames sorted by file name
    for name, frames in sequences.items():
        folder = tmp_path / name
        folder.mkdir()
        for i, frame in enumerate(quantize_8bit(frames)):
            iio.imwrite(folder / f"{i:04d}.png", frame)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        feats, _ = qa.generate_quality_features(str(tmp_path), save_path=str(tmp_path / "f.npz"))
        return feats, qa.generate_quality_scores(feats)


def test_nvs_sqa_equals_quality_assessor(nvs_sqa_scorer, quality_assessor, tmp_path,
                                         smooth_image):
    rng = np.random.default_rng(5)
    # 12 frames: crosses the package's view batch of 10, so the batching is exercised
    sequences = {"clean": _sequence(rng, smooth_image, 12, 72, 96)}
    noisy = np.clip(sequences["clean"] + 0.15 * rng.standard_normal((12, 72, 96, 3)), 0, 1)
    sequences["noisy"] = noisy
    feats, scores = _assessor_scores(quality_assessor, tmp_path, sequences)
    for name, frames in sequences.items():
        # golden: nvs_sqa.QualityAssessor on the same frames written as 8-bit PNGs
        np.testing.assert_allclose(nvs_sqa_scorer.features(frames), feats[name], atol=1e-5)
        assert nvs_sqa_scorer(frames)[0] == pytest.approx(float(scores[name]), abs=1e-4)
    # the uint8 path needs no rounding and gives the same value
    assert nvs_sqa_scorer(quantize_8bit(noisy))[0] == nvs_sqa_scorer(noisy)[0]


def test_nvs_sqa_depends_on_view_order(nvs_sqa_scorer, smooth_image):
    rng = np.random.default_rng(9)
    frames = _sequence(rng, smooth_image, 4, 72, 80)
    frames[-1] = np.clip(frames[-1] + 0.3 * rng.standard_normal(frames[-1].shape), 0, 1)
    assert nvs_sqa_scorer(frames)[0] != nvs_sqa_scorer(frames[::-1])[0]


def test_nvs_sqa_bad_inputs(nvs_sqa_scorer):
    with pytest.raises(BenchError, match="different resolutions"):
        nvs_sqa_scorer([np.zeros((72, 72, 3)), np.zeros((80, 72, 3))])
    with pytest.raises(BenchError, match="empty"):
        nvs_sqa_scorer(np.zeros((0, 72, 72, 3)))
    with pytest.raises(BenchError, match="at least 69x69"):
        nvs_sqa_scorer(np.zeros((2, 68, 100, 3)))
    with pytest.raises(BenchError, match=r"\[0, 1\]"):
        nvs_sqa_scorer(np.full((2, 72, 72, 3), 255.0))
    with pytest.raises(BenchError, match="no-reference"):
        nvs_sqa_scorer(np.zeros((2, 72, 72, 3)), np.zeros((2, 72, 72, 3)))


@pytest.mark.parametrize("name", ["ssim", "lpips", "nvs-sqa"])
def test_registry_min_size_is_what_the_scorer_accepts(name, nvs_sqa_scorer):
    """``ScorerInfo.min_size`` (what a study's preflight checks) equals each scorer's own limit:
    one pixel less is refused with the registry's number, the limit itself is scored."""
    from metrics.registry import get_scorer, scorer_info

    size = scorer_info(name).min_size
    assert size > 1
    scorer = nvs_sqa_scorer if name == "nvs-sqa" else get_scorer(name, device="cpu")
    rng = np.random.default_rng(3)

    def call(side: int) -> np.ndarray:
        frames = rng.uniform(0.0, 1.0, (2, side, side + 5, 3))
        return scorer(frames) if scorer.info.mode == "NR" else scorer(frames, frames[::-1])

    with pytest.raises(BenchError, match=f"at least {size}x{size}"):
        call(size - 1)
    assert np.all(np.isfinite(call(size)))
