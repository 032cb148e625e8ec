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
    monkeypatch.delenv("MKL_CBWR")
    monkeypatch.setenv("MUJOCO_GL", "osmesa")
    record = numerics.numerics_record()
    assert record["mode"] == "native"
    assert record["why"] == "MKL_CBWR, MUJOCO_GL not set to the reference value"
    assert record["env"]["MKL_CBWR"] is None
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
    """A policy query runs with POLICY_THREADS whatever pool the process has (a pool worker
    gets cores / workers threads): the chunks are the same bits with 1 and 4 threads set.
    (On Intel Sapphire Rapids MKL's GEMMs gave other bits for 1 and 4 threads before
    queries pinned their count, and so did MKL_CBWR=COMPATIBLE for 1 and 8 on AMD EPYC.)"""
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
                assert torch.get_num_threads() == threads  # the caller's pool is left as set
            for one, four in zip(chunks[1], chunks[4], strict=True):
                assert one.tobytes() == four.tobytes(), name
    finally:
        torch.set_num_threads(before)


#: First 16 hex digits of the SHA-256 of each demo policy's chunk (float32 bytes) on one
#: real-domain observation (`_probe_chunks`), in DEMO_POLICIES order (Cup bc-aux, bc-aux-85,
#: Tape bc-aux-dagger-blur-5, bc-aux-dagger-blur, Pen bc-aux-dagger, bc-aux-dagger-half).
#: Recorded under the reference numerics on Intel Xeon (Sapphire Rapids, AVX-512), 2026-12-07;
#: MKL's COMPATIBLE branch promises the same bits on AMD, so on an AMD CPU this test is the
#: cross-vendor check. (Under the earlier MKL_ENABLE_INSTRUCTIONS=AVX2 pin the same probe gave
#: 87ca4562b9d2f9be ... on this Intel and other bits on AMD EPYC.)
POLICY_CHUNK_DIGESTS = ("a8c0e64a00ff0d22", "ac9549aa8855112b", "97136d06eb66fcc3",
                        "7e4e7c8f418ffcb3", "787486377e18b781", "ab1809c70b8a3d2a")


def _probe_chunks() -> list[str]:
    """Each demo policy's chunk after one expert chunk from real-domain start 9000 (Duo)."""
    import hashlib

    import numpy as np

    from bench.policies.base import make_policy
    from bench.policies.learned import DEMO_POLICIES
    from bench.sim.policy_io import policy_observation, to_env_chunk
    from bench.worlds.real import REAL_DOMAIN

    digests = []
    for task, names in DEMO_POLICIES.items():
        env = REAL_DOMAIN.make_env("gt-duo", task)
        try:
            obs, info = env.reset(seed=9000)
            expert = make_policy("expert", env.unwrapped)
            chunk = expert.act(policy_observation(obs, env), info)
            obs, _, _, _, info = env.step(to_env_chunk(chunk, env, info))
            query = policy_observation(obs, env)
            for name in names:
                out = np.asarray(make_policy(name, env.unwrapped, seed=0).act(query, info),
                                 dtype=np.float32)
                digests.append(hashlib.sha256(out.tobytes()).hexdigest()[:16])
        finally:
            env.close()
    return digests


def test_policy_chunks_equal_their_cross_cpu_golden(reference_numerics):
    assert tuple(_probe_chunks()) == POLICY_CHUNK_DIGESTS


def test_scores_do_not_depend_on_onednn_kernels():
    """Quality scores run without oneDNN (bench.threads.pinned_torch): LPIPS is the same bits
    with oneDNN capped at SSE4.1 and at AVX2. With oneDNN on, the two caps gave other bits
    (its convolutions pick their kernels, and their sums' blocking, per CPU)."""
    if not numerics.cpu_supports_reference()[0]:
        pytest.skip("the comparison runs under the reference numerics (x86-64-v3 CPU)")
    code = ("import hashlib, numpy as np\n"
            "from metrics.registry import get_scorer\n"
            "rng = np.random.default_rng(0)\n"
            "a = rng.random((2, 96, 128, 3))\n"
            "b = np.clip(a + rng.normal(0, 0.05, a.shape), 0, 1)\n"
            "print(hashlib.sha256(get_scorer('lpips')(a, b).tobytes()).hexdigest())\n")
    digests = set()
    for isa in ("SSE41", "AVX2"):
        env = {**numerics.reference_env(_native_env()), "ONEDNN_MAX_CPU_ISA": isa}
        result = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env,
                                capture_output=True, text=True, timeout=600)
        assert result.returncode == 0, result.stderr[-2000:]
        digests.add(result.stdout.strip().splitlines()[-1])
    assert len(digests) == 1, digests
