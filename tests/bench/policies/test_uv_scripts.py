"""The single-file uv server scripts (PEP 723) served to the bench's ``openpi`` client.

``serving/scripts/serve_torch.py`` (a plain PyTorch module) and
``serving/scripts/serve_lerobot.py`` (a LeRobot checkpoint) each run in the environment uv
builds from their inline metadata: nothing of the bench's own environment. Skipped cleanly
where ``uv`` is not on PATH (``pip install uv``); the first run downloads torch (and
LeRobot) into uv's cache, minutes.
"""

import os
import shutil
import socket
import subprocess
import time
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[3]
HERE = Path(__file__).parent
UV = shutil.which("uv")
os.environ.setdefault("MUJOCO_GL", "egl")
os.environ.setdefault("PYOPENGL_PLATFORM", "egl")

pytestmark = [pytest.mark.slow, pytest.mark.skipif(UV is None, reason="no uv on PATH")]
ENV = {**os.environ, "OMP_NUM_THREADS": "1"}


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _start(args, port):
    proc = subprocess.Popen([UV, "run", *args, "--port", str(port)], cwd=ROOT, env=ENV,
                            stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True)
    deadline = time.monotonic() + 1200  # a first run builds the environment
    while True:
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return proc
        assert proc.poll() is None, proc.stderr.read()[-3000:]
        assert time.monotonic() < deadline, "uv server did not start"
        time.sleep(0.5)


def _stop(proc):
    proc.terminate()
    proc.wait(timeout=60)
    proc.stderr.close()


def _recorded_rollout(port):
    """One Cup rollout through the ``openpi`` client; (record, config, requests, replies)."""
    import bench.sim
    from bench.policies import make_policy
    from bench.scene.sample import make_sample_scene
    from bench.sim.rollout import run_episode

    env = bench.sim.make_env("cup", make_sample_scene(seed=0, n_gaussians=2000),
                             image_size=(24, 24), max_frames=30)
    policy = make_policy("openpi", env, port=port)
    sent, replies = [], []
    roundtrip = policy._roundtrip

    def recording(request, **kwargs):
        reply = roundtrip(request, **kwargs)
        if "__ctrl__" not in request:
            sent.append(request)
            replies.append(np.array(reply["actions"]))
        return reply

    policy._roundtrip = recording
    record = run_episode(env, policy, init_index=1)[0]
    policy.close()
    env.close()
    return record, policy.config, sent, replies


def test_serve_torch_script(tmp_path):
    import torch

    class Tiny(torch.nn.Module):
        def forward(self, batch: dict[str, torch.Tensor]) -> torch.Tensor:
            state, image = batch["observation/state"], batch["observation/wrist_image"]
            out = torch.zeros(4, 7)
            out[:, :3] = 0.002 * torch.tanh(state[0, :3]) + 1e-4 * image.mean()
            out[:, 6] = 0.08
            return out

    module = torch.jit.script(Tiny())
    module.save(str(tmp_path / "policy.pt"))
    port = _free_port()
    proc = _start(["serving/scripts/serve_torch.py", "--torchscript",
                   str(tmp_path / "policy.pt"), "--camera",
                   "wrist=observation/wrist_image:16x16", "--state",
                   "observation/state=x,y,z,qw,qx,qy,qz,opening", "--chunk-length", "4"], port)
    try:
        record, config, sent, replies = _recorded_rollout(port)
    finally:
        _stop(proc)
    assert record.status == "ok", record.error
    assert config.image_sizes == {"wrist": (16, 16)} and config.chunk_length == 4
    assert sent[0]["observation/wrist_image"].shape == (16, 16, 3)
    for request, reply in zip(sent, replies, strict=True):
        batch = {"observation/state": torch.from_numpy(request["observation/state"].copy())[None],
                 "observation/wrist_image": torch.from_numpy(
                     request["observation/wrist_image"].copy()).permute(2, 0, 1)[None]
                 .float().div(255.0)}
        # uv's torch may be another release than the bench's: equal to float32 rounding
        np.testing.assert_allclose(reply, module(batch).numpy(), rtol=1e-6, atol=1e-9)


def test_serve_lerobot_script(tmp_path):
    folder = tmp_path / "pretrained_model"
    with_lerobot = [UV, "run", "--no-project", "--with", "lerobot==0.4.4", "python"]
    out = subprocess.run([*with_lerobot, str(HERE / "lerobot_build_act.py"), str(folder)],
                         capture_output=True, text=True, timeout=1200, env=ENV, cwd=tmp_path)
    assert out.returncode == 0, out.stderr[-3000:]
    port = _free_port()
    proc = _start(["serving/scripts/serve_lerobot.py", "--checkpoint", str(folder)], port)
    try:
        record, config, sent, replies = _recorded_rollout(port)
    finally:
        _stop(proc)
    assert record.status == "ok", record.error
    assert config.image_sizes == {"wrist": (32, 32)} and config.prompt_key == "task"
    arrays = {"count": len(sent)}
    for i, request in enumerate(sent):
        arrays.update({f"image_{i}": request["observation.images.wrist"],
                       f"state_{i}": request["observation.state"],
                       f"task_{i}": np.str_(request["task"])})
    np.savez(tmp_path / "requests.npz", **arrays)
    out = subprocess.run([*with_lerobot, str(HERE / "lerobot_reference.py"), str(folder),
                          str(tmp_path / "requests.npz"), str(tmp_path / "reference.npz")],
                         capture_output=True, text=True, timeout=1200, env=ENV, cwd=tmp_path)
    assert out.returncode == 0, out.stderr[-3000:]
    reference = np.load(tmp_path / "reference.npz")
    for i, reply in enumerate(replies):
        np.testing.assert_array_equal(reply, reference[f"actions_{i}"])
