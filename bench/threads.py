"""Thread budgets of a worker process: torch, OpenMP / BLAS, Mesa llvmpipe and Warp, set on purpose.

One job: make a process run at most ``threads`` busy threads, whichever numerical library is
doing the work. Every library sizes its pool to the machine by default, so two study
workers on two cores each start two torch (OpenMP) threads, two OpenBLAS threads and two
llvmpipe rasteriser threads: four to six busy threads on two cores, and a policy's 0.5 ms
convolution spin-waits behind the renderer's threads for tens of milliseconds (issue 32).

:func:`limit_threads` sets, in this order:

- the environment variables the libraries read when they load (:func:`thread_env`):
  ``OMP_NUM_THREADS``, ``MKL_NUM_THREADS``, ``OPENBLAS_NUM_THREADS`` and
  ``LP_NUM_THREADS`` (llvmpipe reads it when the process's first GL context is made;
  ``threads - 1`` rasteriser threads, so 1 thread = rasterise on the calling thread);
- the pools of libraries already loaded, through ``threadpoolctl`` (numpy's OpenBLAS,
  OpenMP runtimes), since a spawned worker may have imported numpy before its initializer;
- torch's intra-op and inter-op pools when torch is imported (it is then imported anyway by
  the policy; importing it here would make a light process heavy, so it is not imported).

Warp's CPU kernels run on the calling thread (Warp 1.x starts no CPU pool), so Warp needs no
setting; :data:`WARP_NOTE` says so in the report. Thread counts change no result the bench
records: llvmpipe draws each tile the same way on any thread, torch's CNN convolutions and
OpenBLAS's products are deterministic per element here, and ``bench demo --profile quick``
reproduces its tables byte for byte with and without the limits (issue 32).
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Iterator
from typing import Any

#: Variables read by OpenMP (torch's intra-op pool, libgomp), MKL and OpenBLAS at load.
POOL_ENV_VARS = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS")
#: Mesa llvmpipe's rasteriser threads (read at the first GL context of the process).
LLVMPIPE_ENV_VAR = "LP_NUM_THREADS"
WARP_NOTE = "warp: CPU kernels run on the calling thread (no pool to size)"


def thread_env(threads: int) -> dict[str, str]:
    """The environment variables that cap a process at ``threads`` busy threads (count >= 1)."""
    threads = _check(threads)
    env = {name: str(threads) for name in POOL_ENV_VARS}
    # llvmpipe: N rasteriser threads besides the caller, which waits for them; 0 = draw on
    # the calling thread (one busy thread), so a one-thread budget asks for 0.
    env[LLVMPIPE_ENV_VAR] = str(threads - 1 if threads > 1 else 0)
    return env


def limit_threads(threads: int) -> dict[str, Any]:
    """Cap this process at ``threads`` busy threads in every library (module docstring).

    Returns what was set (for a worker's log and the benchmark's report): the environment
    variables, the ``threadpoolctl`` pools limited, torch's intra/inter-op counts (None
    when torch is not loaded) and the Warp note.
    """
    env = thread_env(threads)
    os.environ.update(env)
    report: dict[str, Any] = {"threads": threads, "env": env, "pools": [], "torch": None,
                              "warp": WARP_NOTE}
    if "numpy" in sys.modules or "torch" in sys.modules:  # loaded pools ignore the variables
        from threadpoolctl import threadpool_info, threadpool_limits

        threadpool_limits(limits=threads)  # stays in force (not used as a context)
        report["pools"] = sorted(f"{p['internal_api']}={p['num_threads']}"
                                 for p in threadpool_info())
    if "torch" in sys.modules:
        report["torch"] = _limit_torch(threads)
    return report


def limit_torch_threads(threads: int) -> tuple[int, int]:
    """Set torch's intra-op and inter-op pools (imports torch); returns (intra, inter)."""
    import torch  # noqa: F401  (the caller needs torch anyway: a policy process)

    return _limit_torch(_check(threads))


@contextlib.contextmanager
def pinned_torch(threads: int) -> Iterator[None]:
    """Run the body with torch's CPU float path fixed: ``threads`` intra-op threads, no oneDNN.

    For computations whose numbers are recorded (a policy's chunk, a quality score): MKL
    promises equal results across CPUs (``MKL_CBWR``, :mod:`bench.numerics`) only for a fixed
    thread count, and oneDNN's convolutions choose their reduction blocking from the CPU's
    cache sizes, which the numerics cannot pin; without oneDNN torch convolves through MKL's
    GEMMs. Both settings are restored afterwards (a trainer's or a worker's pool stays its own).
    """
    import torch  # the caller is about to compute with it

    threads = _check(threads)
    before, onednn = torch.get_num_threads(), torch.backends.mkldnn.enabled
    if before != threads:
        torch.set_num_threads(threads)
    # the flag itself, not mkldnn.flags(): that one also sets TF32 and warns on every call
    torch.backends.mkldnn.enabled = False
    try:
        yield
    finally:
        torch.backends.mkldnn.enabled = onednn
        if before != threads:
            torch.set_num_threads(before)


def _limit_torch(threads: int) -> tuple[int, int]:
    torch = sys.modules["torch"]
    if torch.get_num_threads() != threads:
        torch.set_num_threads(threads)
    if torch.get_num_interop_threads() != 1:
        try:  # one inter-op thread: the bench runs no parallel torch graphs
            torch.set_num_interop_threads(1)
        except RuntimeError:  # inter-op work already started; its pool cannot change now
            pass
    return torch.get_num_threads(), torch.get_num_interop_threads()


def _check(threads: int) -> int:
    if not isinstance(threads, int) or isinstance(threads, bool) or threads < 1:
        raise ValueError(f"threads must be an integer >= 1, got {threads!r}")
    return threads
