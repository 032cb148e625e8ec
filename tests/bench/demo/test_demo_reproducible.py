"""`bench demo` reproduces the committed tables whatever float environment it is started in.

Issue 33 item 1. The demo applies the reference numerics (:mod:`bench.numerics`) itself,
re-executing its process where they were not set before numpy loaded, so a run started with
the machine's native environment must give the committed tables byte for byte: the quick
profile against ``results/demo-quick`` (written by ``make demo-quick-results``) and, in a
``slow`` test, the default profile against ``results/demo``. Both start ``bench`` in a
subprocess with every reference variable removed from its environment (on an AVX-512 machine
that is numpy's AVX-512 loops, OpenBLAS SkylakeX/Zen kernels and torch's AVX-512 kernels,
which changed 8 of 720 default-profile outcomes before the fix).

Compared byte for byte: every committed file under ``tables/`` except ``latency.csv``
(wall-clock seconds per query, not committed), ``summary.csv``, ``summary.md``,
``real_results.json`` and ``study.json``. Not compared: ``config.json`` and ``manifest.json``
(they name ``--out``; the manifest's numerics record is checked instead), ``figures/`` and
``report/`` (images, byte-stable on one matplotlib build only).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from bench import numerics
from bench.cli import main

ROOT = Path(__file__).resolve().parents[3]
#: Files of a demo run compared with the committed ones (relative to the run's root).
COMPARED = ("summary.csv", "summary.md", "real_results.json", "study.json")
#: Files under tables/ that hold wall-clock measurements (never committed, never compared).
WALL_CLOCK = ("latency.csv",)


def _native_env() -> dict[str, str]:
    """This process's environment without any reference variable (what a fresh shell has)."""
    env = {k: v for k, v in os.environ.items()
           if k not in numerics.REFERENCE_ENV and k != numerics.REEXEC_MARK}
    env["PYTHONHASHSEED"] = "random"  # and nothing else pinned behind the demo's back
    return env


def _compared_files(root: Path) -> list[str]:
    tables = sorted(f"tables/{p.name}" for p in (root / "tables").glob("*")
                    if p.is_file() and not p.name.startswith(".") and p.name not in WALL_CLOCK)
    return [*tables, *(name for name in COMPARED if (root / name).is_file())]


def _run_and_compare(tmp_path: Path, committed: Path, argv: list[str], timeout: int) -> None:
    out = tmp_path / "run"
    result = subprocess.run(
        [sys.executable, "-m", "bench.cli", "demo", "--out", str(out), *argv],
        cwd=ROOT, env=_native_env(), capture_output=True, text=True, timeout=timeout)
    assert result.returncode == 0, result.stderr[-3000:]
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["numerics"] == {"mode": "reference", "env": numerics.REFERENCE_ENV,
                                    "openblas_core": "Haswell", "numpy_simd_above_x86_v3": []}
    expected, made = _compared_files(committed), _compared_files(out)
    assert "tables/rollouts.csv" in expected and "summary.csv" in expected
    differ = [name for name in expected if name in made
              and (out / name).read_bytes() != (committed / name).read_bytes()]
    # a file only one side has means the committed copy is stale: `make demo-quick-results`
    # (or `make demo-results`) refreshes it
    only = sorted(set(expected) ^ set(made))
    assert not differ and not only, (f"differ from {committed.relative_to(ROOT)}: {differ}; "
                                     f"in only one of the two: {only}")


def _needs_reference_cpu() -> None:
    supported, why = numerics.cpu_supports_reference()
    if not supported:
        pytest.skip(f"the committed tables were made under the reference numerics: {why}")


@pytest.mark.slow  # ~2.5 min on 2 cores: the quick profile with its report
def test_quick_profile_reproduces_results_demo_quick_from_a_native_environment(tmp_path):
    _needs_reference_cpu()
    _run_and_compare(tmp_path, ROOT / "results" / "demo-quick", ["--profile", "quick"],
                     timeout=1800)


@pytest.mark.slow  # ~15 min on 2 cores: the default profile (three tasks, 720 rollouts), report
def test_default_profile_reproduces_results_demo_from_a_native_environment(tmp_path):
    _needs_reference_cpu()
    _run_and_compare(tmp_path, ROOT / "results" / "demo", [], timeout=3600)


# --------------------------------------------------------------------------- unit checks


def test_cpu_without_avx2_is_refused_in_one_line_pointing_to_the_flag(tmp_path, capsys,
                                                                       monkeypatch):
    monkeypatch.setattr(numerics, "cpu_flags", lambda: frozenset({"sse2", "avx", "fma"}))
    monkeypatch.setattr(numerics.platform, "machine", lambda: "x86_64")
    out = tmp_path / "out"
    assert main(["demo", "--out", str(out), "--profile", "quick"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "Traceback" not in err
    assert err.startswith("bench demo: error: the committed tables cannot be reproduced here")
    assert "lacks AVX2 (x86-64-v3)" in err and "pass --allow-native-numerics" in err
    assert not out.exists() and list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(("machine", "flags", "why"), [
    ("x86_64", {"sse2", "avx", "avx2"}, "this x86-64 CPU lacks FMA (x86-64-v3)"),
    ("x86_64", {"sse2"}, "this x86-64 CPU lacks AVX2 and FMA (x86-64-v3)"),
    ("x86_64", set(), "its CPU flags cannot be read (/proc/cpuinfo)"),
    ("aarch64", {"fp", "asimd"}, "this CPU is aarch64, not x86-64"),
])
def test_cpu_check_names_what_is_missing(monkeypatch, machine, flags, why):
    monkeypatch.setattr(numerics, "cpu_flags", lambda: frozenset(flags))
    monkeypatch.setattr(numerics.platform, "machine", lambda: machine)
    assert numerics.cpu_supports_reference() == (False, why)
    with pytest.raises(numerics_error(), match=re.escape(f"{why}; pass --allow-native-numerics")):
        numerics.require_reference_numerics(allow_native=False)
    numerics.require_reference_numerics(allow_native=True)  # the flag lets it run natively


def numerics_error() -> type[Exception]:
    from bench.errors import BenchError

    return BenchError


def test_cpu_with_avx2_and_fma_is_accepted(monkeypatch):
    monkeypatch.setattr(numerics, "cpu_flags", lambda: frozenset({"sse2", "avx2", "fma"}))
    monkeypatch.setattr(numerics.platform, "machine", lambda: "x86_64")
    assert numerics.cpu_supports_reference() == (True, "")


def test_a_library_caller_without_the_numerics_is_refused_not_replaced(monkeypatch):
    """Inside pytest the process is not `bench`: no exec, a one-line error naming the fix."""
    if not numerics.cpu_supports_reference()[0]:
        pytest.skip("needs a CPU that can run the reference numerics")

    def no_exec(*args):
        raise AssertionError("the test process must not be re-executed")

    monkeypatch.setattr(numerics.os, "execve", no_exec)
    monkeypatch.delenv("ATEN_CPU_CAPABILITY")
    assert not numerics._is_bench_process()
    with pytest.raises(numerics_error(), match="ATEN_CPU_CAPABILITY not set to the reference "
                       "value.*apply_reference_numerics\\(\\) before numpy is imported"):
        numerics.require_reference_numerics(allow_native=False)
    monkeypatch.setenv(numerics.REEXEC_MARK, "1")  # already restarted once: no loop
    with pytest.raises(numerics_error(), match="did not take effect after restarting"):
        numerics.require_reference_numerics(allow_native=False)


def test_manifest_record_reference_and_native(monkeypatch):
    active, why = numerics.reference_numerics_active()
    if not active:
        pytest.skip(f"the test process runs without the reference numerics: {why}")
    assert numerics.numerics_record() == {
        "mode": "reference", "env": numerics.REFERENCE_ENV, "openblas_core": "Haswell",
        "numpy_simd_above_x86_v3": []}
    monkeypatch.delenv("MKL_ENABLE_INSTRUCTIONS")
    monkeypatch.setenv("MUJOCO_GL", "osmesa")
    record = numerics.numerics_record()
    assert record["mode"] == "native"
    assert record["why"] == ("MKL_ENABLE_INSTRUCTIONS, MUJOCO_GL not set to the reference "
                             "value")
    assert record["env"]["MKL_ENABLE_INSTRUCTIONS"] is None
    assert record["env"]["MUJOCO_GL"] == "osmesa"
    assert record["openblas_core"] == "Haswell" and record["numpy_simd_above_x86_v3"] == []


def test_numerics_module_imports_only_the_standard_library():
    code = ("import sys, bench.numerics as n; n.apply_reference_numerics({}); "
            "print(sorted(m for m in ('numpy', 'torch', 'mujoco', 'threadpoolctl') "
            "if m in sys.modules))")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            cwd=ROOT, timeout=120)
    assert result.returncode == 0 and result.stdout.strip() == "[]", result.stderr


def test_conftest_and_the_demo_share_one_source():
    """The test processes run with exactly the variables the demo applies."""
    if not numerics.cpu_supports_reference()[0]:
        pytest.skip("the pin is not applied on this CPU")
    assert numerics.env_mismatch() == []


def test_policy_outputs_do_not_depend_on_torch_threads():
    """Why threads are not part of the reference numerics: the demo's policies give the same
    bits with 1 and 4 intra-op threads (a pool worker gets cores / workers threads)."""
    import numpy as np
    import torch

    from bench.policies.bc_network import load_network, predict_chunk
    from bench.policies.learned import DEMO_POLICIES, policy_dir

    rng = np.random.default_rng(0)
    queries = [(rng.integers(0, 256, (64, 64, 3), dtype=np.uint8),
                rng.integers(0, 256, (64, 64, 3), dtype=np.uint8),
                rng.normal(size=8).astype(np.float32)) for _ in range(5)]
    before = torch.get_num_threads()
    try:
        for name in DEMO_POLICIES["cup"]:
            net, config = load_network(policy_dir(name, "cup"))
            chunks = {}
            for threads in (1, 4):
                torch.set_num_threads(threads)
                chunks[threads] = [predict_chunk(net, config, *q) for q in queries]
            for one, four in zip(chunks[1], chunks[4], strict=True):
                assert one.tobytes() == four.tobytes(), name
    finally:
        torch.set_num_threads(before)
