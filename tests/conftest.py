"""Test-session setup: every test process computes floats the same way on every x86-64 CI machine.

numpy's, torch's and the renderer's float results depend on run-time choices that differ
between machines: the OpenBLAS kernel family numpy dispatches matrix products to
(``SkylakeX`` on an AVX-512 Intel, ``Haswell`` or ``Zen`` on others; different summation
orders and FMA use), the SIMD level of numpy's own loops and of torch's kernels (AVX-512 where
the CPU has it, AVX2 otherwise). A 1e-16 difference in one ``4x4 @ 4x4`` grows into different
contact events within a rollout, so golden digests recorded on one machine failed on another
(CI on AMD EPYC, goldens from an AVX-512 Intel).

This file pins them, for this process and every subprocess it starts, to the *reference
numerics* of :mod:`bench.numerics` (the one source ``bench demo`` applies too: OpenBLAS
``Haswell`` kernels, numpy, torch, oneDNN and MKL up to AVX2, EGL rendering), which any
x86-64-v3 CPU runs. It must act before numpy is imported, so it only sets environment
variables (``bench.numerics`` imports the standard library only);
:func:`reference_numerics_active` tells the golden tests whether it took effect (on another
architecture it cannot, and they skip with the reason).
"""

from __future__ import annotations

import pytest

from bench.numerics import (
    apply_reference_numerics,
    cpu_supports_reference,
    reference_numerics_active,
)

apply_reference_numerics()  # before any test module (or plugin) imports numpy

__all__ = ["reference_numerics_active"]


@pytest.fixture
def reference_numerics() -> None:
    """Gate a float golden: fail where the reference numerics could hold but do not; else skip."""
    active, why = reference_numerics_active()
    if active:
        return
    if cpu_supports_reference()[0]:  # the pin could hold here: a real failure, never a silent skip
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
