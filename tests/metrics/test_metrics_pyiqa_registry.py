"""Registry metadata and the pyiqa adapter (equal to pyiqa; fail-fast without weights)."""

from __future__ import annotations

import os

import numpy as np
import pytest

from bench.errors import BenchError
from metrics.registry import SCORERS, available, get_scorer, scorer_info
from protocols.metric_directions import LOWER_BETTER


def test_builtin_metadata_matches_direction_table():
    assert available() == ["psnr", "ssim", "lpips", "nvs-sqa"]
    for entry in SCORERS:
        info = scorer_info(entry.name)
        assert info.lower_better == LOWER_BETTER[entry.name]
        assert info.mode in ("FR", "NR") and info.unit in ("image", "sequence")
        assert info.input_range == (0.0, 1.0) and info.version and info.arg_order
    assert scorer_info("nvs-sqa").unit == "sequence" and scorer_info("nvs-sqa").mode == "NR"
    assert scorer_info("lpips").lower_better is True


def test_unknown_names():
    with pytest.raises(ValueError, match="did you mean 'lpips'"):
        get_scorer("lpip")
    with pytest.raises(BenchError, match="did you mean pyiqa:niqe"):
        scorer_info("pyiqa:niqee")
    with pytest.raises(BenchError, match="unknown device"):
        get_scorer("psnr", device="tpu")


pyiqa = pytest.importorskip("pyiqa")


def test_pyiqa_metadata_is_pyiqas_own():
    from pyiqa.default_model_configs import DEFAULT_CONFIGS

    for name in ("niqe", "lpips", "psnr", "musiq"):
        info = scorer_info(f"pyiqa:{name}")
        assert info.mode == DEFAULT_CONFIGS[name]["metric_mode"]
        assert info.lower_better == DEFAULT_CONFIGS[name].get("lower_better", False)
    assert scorer_info("pyiqa:niqe").lower_better is True


@pytest.mark.parametrize("name", ["psnr", "ssim"])
def test_pyiqa_adapter_equals_pyiqa(name):
    import torch

    rng = np.random.default_rng(2)
    a = rng.random((3, 40, 52, 3))
    b = np.clip(a + 0.1 * rng.standard_normal(a.shape), 0, 1)
    scorer = get_scorer(f"pyiqa:{name}", device="cpu")
    # golden: pyiqa.create_metric called directly on the same NCHW float32 tensors
    direct = pyiqa.create_metric(name, device=torch.device("cpu"))
    ta = torch.from_numpy(a).permute(0, 3, 1, 2).float()
    tb = torch.from_numpy(b).permute(0, 3, 1, 2).float()
    expected = direct(ta, tb).double().numpy().reshape(-1)
    np.testing.assert_allclose(scorer(a, b), expected, rtol=0, atol=1e-7)


def test_pyiqa_missing_weights_fail_fast(capsys):
    from pyiqa.utils.download_util import DEFAULT_CACHE_DIR

    missing = os.path.join(DEFAULT_CACHE_DIR, "niqe_modelparameters.mat")
    if os.path.exists(missing):
        pytest.skip("niqe weights are cached on this machine")
    with pytest.raises(BenchError, match="niqe_modelparameters.mat"):
        get_scorer("pyiqa:niqe", device="cpu")
    # no misleading "Downloading: ..." line from pyiqa: the error is the only output
    assert "Downloading" not in capsys.readouterr().out
    # the download guard is removed afterwards
    import torch.hub

    assert torch.hub.download_url_to_file.__name__ == "download_url_to_file"
