"""A software GL context first, torch's compiler stack (triton) after: the process lives.

Mesa's llvmpipe and triton each bring an LLVM; importing triton after an llvmpipe context
exists segfaulted the test process when a visual policy (torchvision) was built after the
first MuJoCo render. ``bench.sim.observation`` loads triton before its first GL context.
Run in a fresh interpreter: the order of first loads is what is tested.
"""

import importlib.util
import os
import subprocess
import sys

import pytest

SCRIPT = """
from bench.sim.observation import _gl_context
context = _gl_context(32, 32)   # software GL (MUJOCO_GL=egl on this machine)
import torch._dynamo             # loads triton, as torchvision.models and torch.optim do
import torchvision.models        # noqa: F401
import torch
import torch.optim               # what the demo's training imports after recording
torch.use_deterministic_algorithms(True)  # imports torch._inductor
context.free()
print("alive")
"""


@pytest.mark.skipif(importlib.util.find_spec("triton") is None, reason="triton not installed")
def test_torch_compiler_stack_loads_after_a_gl_context():
    env = {**os.environ, "MUJOCO_GL": os.environ.get("MUJOCO_GL", "egl")}
    run = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True,
                         env=env, timeout=300)
    assert run.returncode == 0, f"exit {run.returncode}: {run.stderr[-2000:]}"
    assert run.stdout.strip().endswith("alive")
