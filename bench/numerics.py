"""Reference numerics: one float environment for every process whose numbers are committed.

The demo's rollouts are chaotic: a 1e-16 difference in one matrix product grows into another
contact event, and one rollout can decide a significance transition. The libraries pick
their float kernels at run time from the CPU, so the same code and seed gave different tables
on an AVX-512 machine than on the AVX2 machine that made ``results/demo`` (issue 33: 8 of 720
outcomes changed). Each choice is made once, from an environment variable read when the
library loads (numpy and OpenBLAS at ``import numpy``, MuJoCo's GL backend at ``import
mujoco``; torch, oneDNN and MKL at their first kernel), so the pin is a set of variables set
before those imports:

- ``OPENBLAS_CORETYPE=Haswell``: numpy's OpenBLAS uses its AVX2 + FMA kernels (``SkylakeX``
  on an AVX-512 Intel, ``Zen`` on an AMD sum in another order);
- ``NPY_DISABLE_CPU_FEATURES``: numpy's own ufunc loops go no higher than ``X86_V3``;
- ``ATEN_CPU_CAPABILITY=avx2``, ``ONEDNN_MAX_CPU_ISA=AVX2``: torch's vectorised kernels and
  its oneDNN primitives stop at AVX2;
- ``MKL_CBWR=COMPATIBLE``: torch's MKL GEMMs (the policies' and scorers' convolutions) take
  MKL's conditional-numerical-reproducibility branch for "Intel and Intel-compatible" CPUs,
  whose results MKL promises equal on every x86-64 CPU for a fixed thread count. Capping MKL's
  instructions (``MKL_ENABLE_INSTRUCTIONS=AVX2``, the earlier pin) was not enough: the
  policies' chunks differed between AMD EPYC and Intel Sapphire Rapids under it, and on the
  Intel with the thread count;
- ``MUJOCO_GL=egl``, ``PYOPENGL_PLATFORM=egl``, ``LP_NATIVE_VECTOR_WIDTH=256``: the ground-truth
  worlds render offscreen through EGL, and Mesa's llvmpipe (the software rasteriser where there
  is no GPU) keeps 256-bit vectors whatever the CPU offers.

Every x86-64-v3 CPU (AVX2 + FMA) runs all of these. Thread counts are not environment pins:
the computations whose numbers are recorded fix their own (a policy query
``bench.policies.bc_network.POLICY_THREADS``, a quality score ``metrics.base.SCORER_THREADS``)
and run without oneDNN, whose convolutions block their sums by the CPU's cache sizes
(:func:`bench.threads.pinned_torch`); numpy's products were measured bit-identical with 1, 2
and 8 threads (docs/demo.md).

Two users: ``tests/conftest.py`` sets the variables before numpy loads in a test process
(:func:`apply_reference_numerics`), and ``bench demo`` checks them in its own process and,
where numpy was already loaded without them (``bench.cli`` imports it to build the parser),
re-executes itself with them (:func:`require_reference_numerics`). This module imports only
the standard library at module level: it must run before numpy.
"""

from __future__ import annotations

import os
import platform
import sys
from collections.abc import Mapping, MutableMapping
from typing import Any

#: OpenBLAS kernel family of the reference numerics (runs on every AVX2 + FMA CPU).
REFERENCE_BLAS_CORE = "Haswell"
#: numpy's SIMD dispatch targets above X86_V3, across numpy 1.26-2.x names (unknown names are
#: ignored by numpy, so one list serves every version).
ABOVE_X86_V3 = ("X86_V4", "AVX512_ICL", "AVX512_SPR", "AVX512F", "AVX512CD", "AVX512_KNL",
                "AVX512_KNM", "AVX512_SKX", "AVX512_CLX", "AVX512_CNL", "AVX512_FP16")
#: torch's CPU capability under the reference numerics (``torch.backends.cpu``'s spelling).
REFERENCE_TORCH_CAPABILITY = "AVX2"
#: The reference numerics: environment variable -> value (the single source of every pin).
REFERENCE_ENV: dict[str, str] = {
    "OPENBLAS_CORETYPE": REFERENCE_BLAS_CORE,
    "NPY_DISABLE_CPU_FEATURES": " ".join(ABOVE_X86_V3),
    "ATEN_CPU_CAPABILITY": "avx2",
    "ONEDNN_MAX_CPU_ISA": "AVX2",
    "MKL_CBWR": "COMPATIBLE",
    "MUJOCO_GL": "egl",
    "PYOPENGL_PLATFORM": "egl",
    "LP_NATIVE_VECTOR_WIDTH": "256",
}
#: CPU flags (``/proc/cpuinfo`` spelling) every kernel of the reference numerics needs.
REQUIRED_CPU_FLAGS = ("avx2", "fma")
#: Set in the environment of the re-executed process: a second failure is an error, not a loop.
REEXEC_MARK = "SPLATBENCH_NUMERICS_REEXEC"
#: The flag of ``bench demo`` that runs with the machine's own numerics instead.
NATIVE_FLAG = "--allow-native-numerics"


def cpu_flags() -> frozenset[str]:
    """The CPU's feature flags, lower case (``/proc/cpuinfo``; empty where it cannot be read)."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
            for line in f:
                if line.startswith("flags"):
                    return frozenset(line.split(":", 1)[1].lower().split())
    except OSError:
        pass
    return frozenset()


def cpu_supports_reference() -> tuple[bool, str]:
    """Whether this CPU can run the reference numerics; (False, why) otherwise."""
    machine = platform.machine().lower()
    if machine not in ("x86_64", "amd64"):
        return False, f"this CPU is {machine or 'of an unknown kind'}, not x86-64"
    flags = cpu_flags()
    if not flags:
        return False, "its CPU flags cannot be read (/proc/cpuinfo)"
    missing = [f.upper() for f in REQUIRED_CPU_FLAGS if f not in flags]
    if missing:
        return False, f"this x86-64 CPU lacks {' and '.join(missing)} (x86-64-v3)"
    return True, ""


def reference_env(base: Mapping[str, str] | None = None) -> dict[str, str]:
    """``base`` (default: this process's environment) with the reference numerics set."""
    return {**(os.environ if base is None else base), **REFERENCE_ENV}


def env_mismatch(environ: Mapping[str, str] | None = None) -> list[str]:
    """Names of the reference variables that ``environ`` (default ``os.environ``) lacks."""
    environ = os.environ if environ is None else environ
    return [k for k, v in REFERENCE_ENV.items() if environ.get(k) != v]


def apply_reference_numerics(environ: MutableMapping[str, str] | None = None) -> bool:
    """Set the reference variables in ``environ`` (default ``os.environ``) before numpy loads.

    Returns whether they were set: not once numpy is loaded (too late; its choices are made)
    or on a CPU that cannot run them (:func:`cpu_supports_reference`).
    """
    if "numpy" in sys.modules or not cpu_supports_reference()[0]:
        return False
    (os.environ if environ is None else environ).update(REFERENCE_ENV)
    return True


def _numpy_simd_above_x86_v3() -> list[str]:
    import numpy  # noqa: F401  (loads the dispatch tables)

    try:
        from numpy._core._multiarray_umath import __cpu_dispatch__, __cpu_features__
    except ImportError:  # numpy 1.x
        from numpy.core._multiarray_umath import __cpu_dispatch__, __cpu_features__
    return sorted(k for k in __cpu_dispatch__ if __cpu_features__.get(k)
                  and (k.startswith("AVX512") or k == "X86_V4"))


def _openblas_cores() -> list[str]:
    import numpy  # noqa: F401  (loads OpenBLAS so threadpoolctl can see it)
    from threadpoolctl import threadpool_info

    return sorted({str(i.get("architecture")) for i in threadpool_info()
                   if i.get("internal_api") == "openblas"})


def _torch_capability() -> str | None:
    """The CPU capability of torch; None where torch is not loaded (not loaded for this)."""
    torch = sys.modules.get("torch")
    if torch is None:
        return None
    return str(torch.backends.cpu.get_cpu_capability())


def reference_numerics_active() -> tuple[bool, str]:
    """Whether this process computes with the reference numerics; (False, why) otherwise.

    Checked: the variables are set now, numpy's loops stop at X86_V3, its OpenBLAS runs the
    Haswell kernels, and (where torch is loaded) torch's capability is AVX2. Loads numpy.
    """
    missing = env_mismatch()
    if missing:
        return False, f"{', '.join(missing)} not set to the reference value"
    above = _numpy_simd_above_x86_v3()
    if above:
        return False, f"numpy dispatches to SIMD above X86_V3 ({', '.join(above)})"
    cores = _openblas_cores()
    if cores != [REFERENCE_BLAS_CORE]:
        return False, f"OpenBLAS kernels are {cores}, not {REFERENCE_BLAS_CORE}"
    capability = _torch_capability()
    if capability not in (None, REFERENCE_TORCH_CAPABILITY):
        return False, f"torch's CPU capability is {capability}, not {REFERENCE_TORCH_CAPABILITY}"
    return True, ""


def numerics_record() -> dict[str, Any]:
    """What a manifest records of this process's float numerics (loads numpy).

    ``mode`` ``reference`` with the variables and what was verified (the same bytes on every
    machine that holds them), or ``native`` with why not and what the machine chose: the
    variables as set, OpenBLAS's kernel family, numpy's SIMD above X86_V3 and torch's
    capability (None: torch not loaded in this process).
    """
    active, why = reference_numerics_active()
    if active:
        return {"mode": "reference", "env": dict(REFERENCE_ENV),
                "openblas_core": REFERENCE_BLAS_CORE, "numpy_simd_above_x86_v3": []}
    return {"mode": "native", "why": why,
            "env": {k: os.environ.get(k) for k in REFERENCE_ENV},
            "openblas_core": ",".join(_openblas_cores()),
            "numpy_simd_above_x86_v3": _numpy_simd_above_x86_v3(),
            "torch_cpu_capability": _torch_capability()}


def _is_bench_process() -> bool:
    """Whether this process is the ``bench`` command itself (console script or -m bench.cli).

    Only then may it re-execute itself; a library caller of ``bench.cli.main`` (a test) is not
    replaced under its feet.
    """
    main = sys.modules.get("__main__")
    spec = getattr(main, "__spec__", None)
    if spec is not None and spec.name == "bench.cli":
        return True
    cli = sys.modules.get("bench.cli")
    return cli is not None and getattr(main, "main", None) is getattr(cli, "main", None)


def require_reference_numerics(*, allow_native: bool) -> None:
    """Make this process compute with the reference numerics, or refuse in one line.

    Where they hold already, returns. Where the CPU cannot run them, raises
    :class:`~bench.errors.BenchError` pointing to :data:`NATIVE_FLAG` (returns when
    ``allow_native``: the machine's own numerics, recorded as such). Otherwise the process was
    started without them or loaded numpy first: when it is the ``bench`` command it
    re-executes itself with them (``os.execve``, the same command line and working directory;
    does not return); a library caller gets a one-line error naming the fix.
    """
    from bench.errors import BenchError

    if allow_native:
        return
    supported, why = cpu_supports_reference()
    if not supported:
        raise BenchError(f"the committed tables cannot be reproduced here: the reference "
                         f"numerics need an x86-64 CPU with AVX2 + FMA and {why}; pass "
                         f"{NATIVE_FLAG} to run with this machine's own float numerics (its "
                         "tables may differ from the committed ones)")
    active, why = reference_numerics_active()
    if active:
        return
    if os.environ.get(REEXEC_MARK):
        raise BenchError(f"the reference numerics did not take effect after "
                         f"restarting with them ({why}); pass {NATIVE_FLAG} to run with this "
                         "machine's own float numerics")
    if not _is_bench_process():
        raise BenchError(f"this process loaded numpy without the reference numerics "
                         f"({why}); call bench.numerics.apply_reference_numerics() before "
                         f"numpy is imported, run the command in its own process, or pass "
                         f"{NATIVE_FLAG}")
    for stream in (sys.stdout, sys.stderr):
        stream.flush()
    env = reference_env()
    env[REEXEC_MARK] = "1"
    # the same interpreter, its own flags and the same arguments (sys.orig_argv), in a fresh
    # image: every library loads again and reads the variables
    os.execve(sys.executable, list(sys.orig_argv), env)
