"""Test-session setup: every test process computes floats the same way on every x86-64 CI machine.

numpy's float results depend on two run-time choices that differ between machines: the OpenBLAS
kernel family it dispatches matrix products to (``SkylakeX`` on an AVX-512 Intel, ``Haswell`` or
``Zen`` on others; different summation orders and FMA use) and the SIMD level of its own ufunc
loops (``X86_V4`` / ``AVX512_*`` where the CPU has AVX-512, ``X86_V3`` otherwise). A 1e-16
difference in one ``4x4 @ 4x4`` grows into different contact events within a rollout, so golden
digests recorded on one machine failed on another (CI on AMD EPYC, goldens from an AVX-512 Intel).

This file pins both, for this process and every subprocess it starts, to the ``reference
numerics``: OpenBLAS ``Haswell`` kernels and numpy SIMD up to ``X86_V3`` (AVX2 + FMA), which any
x86-64-v3 CPU runs. It must act before numpy is imported, so it only sets environment variables;
:func:`reference_numerics_active` tells the golden tests whether it took effect (on another
architecture it cannot, and they skip with the reason).
"""

from __future__ import annotations

import os
import platform
import sys

import pytest

#: OpenBLAS kernel family of the reference numerics (runs on every AVX2 + FMA CPU).
REFERENCE_BLAS_CORE = "Haswell"
#: numpy's SIMD dispatch targets above X86_V3, across numpy 1.26-2.x names (unknown names are
#: ignored by numpy, so one list serves every version).
ABOVE_X86_V3 = ("X86_V4", "AVX512_ICL", "AVX512_SPR", "AVX512F", "AVX512CD", "AVX512_KNL",
                "AVX512_KNM", "AVX512_SKX", "AVX512_CLX", "AVX512_CNL", "AVX512_FP16")


def _cpu_has_avx2_fma() -> bool:
    if platform.machine().lower() not in ("x86_64", "amd64"):
        return False
    try:
        with open("/proc/cpuinfo") as f:
            flags = next((line.split(":", 1)[1].split() for line in f
                          if line.startswith("flags")), [])
    except OSError:
        return False
    return "avx2" in flags and "fma" in flags


def _pin_reference_numerics() -> None:
    if "numpy" in sys.modules or not _cpu_has_avx2_fma():
        return  # too late, or not an x86-64-v3 CPU: reference_numerics_active() says so
    os.environ["OPENBLAS_CORETYPE"] = REFERENCE_BLAS_CORE
    os.environ["NPY_DISABLE_CPU_FEATURES"] = " ".join(ABOVE_X86_V3)


_pin_reference_numerics()


def reference_numerics_active() -> tuple[bool, str]:
    """Whether numpy runs with the reference numerics; (False, why) otherwise."""
    import numpy as np  # noqa: F401  (loads OpenBLAS so threadpoolctl can see it)
    from threadpoolctl import threadpool_info

    try:
        from numpy._core._multiarray_umath import __cpu_dispatch__, __cpu_features__
    except ImportError:  # numpy 1.x
        from numpy.core._multiarray_umath import __cpu_dispatch__, __cpu_features__
    above = sorted(k for k in __cpu_dispatch__ if __cpu_features__.get(k)
                   and (k.startswith("AVX512") or k == "X86_V4"))
    if above:
        return False, f"numpy dispatches to SIMD above X86_V3 ({', '.join(above)})"
    cores = {str(i.get("architecture")) for i in threadpool_info()
             if i.get("internal_api") == "openblas"}
    if cores != {REFERENCE_BLAS_CORE}:
        return False, f"OpenBLAS kernels are {sorted(cores)}, not {REFERENCE_BLAS_CORE}"
    return True, ""


@pytest.fixture
def reference_numerics() -> None:
    """Gate a float golden: fail where the reference numerics could hold but do not; else skip."""
    active, why = reference_numerics_active()
    if active:
        return
    if _cpu_has_avx2_fma():  # the pin could hold here: a real failure, never a silent skip
        pytest.fail(f"the reference numerics did not take effect: {why}; numpy was imported "
                    "before tests/conftest.py ran (by a pytest plugin? disable it with -p no:NAME)")
    pytest.skip(f"its golden was recorded under the reference numerics (tests/conftest.py), "
                f"which need an x86-64 CPU with AVX2 + FMA: {why}")


@pytest.fixture(scope="session")
def rendered_sample_room(tmp_path_factory):
    """``room/``: the sample room (3,000 Gaussians, seed 0); ``renders/``: ``bench render --role
    test`` of it (world-frame cameras, ``0000_test_00.png`` names). Shared; treat as read-only."""
    from bench.cli import main
    from bench.scene.bundle import save_scene
    from bench.scene.sample import make_sample_scene

    root = tmp_path_factory.mktemp("rendered_room")
    save_scene(make_sample_scene(seed=0, n_gaussians=3000), root / "room")
    argv = ["render", "--scene", root / "room", "--role", "test", "--out", root / "renders",
            "--backend", "cpu"]
    assert main([str(a) for a in argv]) == 0
    return root
