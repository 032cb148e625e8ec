"""bench.threads: a worker's thread budget reaches every library (issue 32 item 2)."""

import json
import subprocess
import sys

import pytest

from bench.threads import LLVMPIPE_ENV_VAR, POOL_ENV_VARS, thread_env


def test_thread_env_counts_the_caller_as_one_rasteriser():
    one, three = thread_env(1), thread_env(3)
    assert all(one[name] == "1" for name in POOL_ENV_VARS)
    assert one[LLVMPIPE_ENV_VAR] == "0"  # llvmpipe draws on the calling thread
    assert three[LLVMPIPE_ENV_VAR] == "2" and three["OMP_NUM_THREADS"] == "3"
    for bad in (0, -1, 1.5, True, "2"):
        with pytest.raises(ValueError, match="threads must be an integer >= 1"):
            thread_env(bad)


def test_limit_threads_sizes_loaded_pools_and_torch_in_a_fresh_process():
    # a fresh interpreter, like a spawned study worker: numpy (OpenBLAS) loaded before the
    # initializer, torch imported by it
    code = (
        "import json, os, numpy\n"
        "from threadpoolctl import threadpool_info\n"
        "from bench.threads import limit_threads, limit_torch_threads\n"
        "report = limit_threads(1)\n"
        "intra, inter = limit_torch_threads(1)\n"
        "import torch\n"
        "print(json.dumps({'env': {k: os.environ[k] for k in report['env']},\n"
        "                  'pools': [p['num_threads'] for p in threadpool_info()],\n"
        "                  'torch': [intra, inter, torch.get_num_threads(),\n"
        "                            torch.get_num_interop_threads()]}))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=300, check=True)
    got = json.loads(out.stdout.strip().splitlines()[-1])
    assert got["env"] == thread_env(1)
    assert got["pools"] and set(got["pools"]) == {1}  # OpenBLAS (and any OpenMP) at 1
    assert got["torch"] == [1, 1, 1, 1]


def test_pinned_torch_fixes_threads_and_drops_onednn_then_restores_both():
    import torch

    from bench.threads import pinned_torch

    before, onednn = torch.get_num_threads(), torch.backends.mkldnn.enabled
    other = 3 if before != 3 else 2
    torch.set_num_threads(other)
    try:
        with pinned_torch(1):
            assert torch.get_num_threads() == 1
            assert torch.backends.mkldnn.enabled is False
        assert torch.get_num_threads() == other
        assert torch.backends.mkldnn.enabled == onednn
        with pytest.raises(RuntimeError, match="inside"), pinned_torch(1):
            raise RuntimeError("inside")  # restored on the way out of an error too
        assert torch.get_num_threads() == other
        assert torch.backends.mkldnn.enabled == onednn
        with pytest.raises(ValueError, match="threads must be an integer >= 1"), \
                pinned_torch(0):
            pass
    finally:
        torch.set_num_threads(before)
