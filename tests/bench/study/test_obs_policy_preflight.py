"""OBS-Policy frames smaller than an NR scorer accepts are refused before a study runs.

Before this check the paper profile (64 px wrist frames, NVS-SQA, ``obs_policy_every`` 4)
would have run all its rollouts and then failed in the OBS-Policy stage: NVS-SQA needs
69 px a side (``metrics.registry``: ``min_size``).
"""

from __future__ import annotations

import pytest

from bench.errors import BenchError
from bench.study.preflight import check_obs_policy_frames
from bench.study.spec import StudySpec


def _spec(**fields) -> StudySpec:
    return StudySpec(sample_scenes={"duo": 0}, **fields)


def test_small_frames_with_nvs_sqa_refused_in_one_line():
    spec = _spec(image_size=(64, 64), metrics=("psnr", "nvs-sqa"), obs_policy_every=4)
    with pytest.raises(BenchError) as err:
        check_obs_policy_frames(spec)
    message = str(err.value)
    assert "\n" not in message
    assert "64x64" in message and "nvs-sqa" in message and "69x69" in message
    assert "obs_policy_every 0" in message  # the fix is named


@pytest.mark.parametrize("fields", [
    {"image_size": (64, 64), "metrics": ("psnr", "nvs-sqa"), "obs_policy_every": 0},
    {"image_size": (69, 69), "metrics": ("psnr", "nvs-sqa"), "obs_policy_every": 4},
    {"image_size": (64, 64), "metrics": ("psnr", "ssim", "lpips"), "obs_policy_every": 4},
])
def test_frames_the_scorers_accept_pass(fields):
    check_obs_policy_frames(_spec(**fields))  # no OBS-Policy, big enough, or no NR metric


def test_check_study_runs_it_before_anything_is_written(tmp_path):
    from bench.study.preflight import check_study

    spec = _spec(image_size=(64, 64), metrics=("psnr", "nvs-sqa"), obs_policy_every=4)
    with pytest.raises(BenchError, match="69x69"):
        check_study(spec, tmp_path / "out")
    assert not (tmp_path / "out").exists()


def test_every_demo_profile_passes():
    from pathlib import Path

    from bench.demo.run import PROFILES, DemoConfig

    for name in PROFILES:
        check_obs_policy_frames(DemoConfig(out=Path("."), profile=name).study_spec())
