"""A LeRobot ACT checkpoint served from its own environment (``make lerobot-env``) to a study.

LeRobot 0.4.4 needs torch<2.11 and the bench pins 2.14.1, so everything LeRobot runs in
``.venv-lerobot``: a tiny ACT is built with LeRobot's own classes and saved with
``save_pretrained`` (model, pre/post-processors with their normalisation statistics), served
by ``python -m splatserve.lerobot``, and driven by the bench's ``openpi`` client, which
configures itself from the handshake (camera size, state and action layouts, prompt key).
The served actions must equal, bit for bit, what the same checkpoint gives when LeRobot's
API is called directly in ``.venv-lerobot`` for the same observations. Skipped cleanly
where ``.venv-lerobot`` is absent.
"""

import os
import socket
import subprocess
import time
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[3]
HERE = Path(__file__).parent
BUILD, REFERENCE = HERE / "lerobot_build_act.py", HERE / "lerobot_reference.py"
LEROBOT_PYTHON = ROOT / ".venv-lerobot" / "bin" / "python"
os.environ.setdefault("MUJOCO_GL", "egl")
os.environ.setdefault("PYOPENGL_PLATFORM", "egl")

pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(not LEROBOT_PYTHON.exists(),
                                 reason="no .venv-lerobot (make lerobot-env)")]

def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _lerobot(*args, timeout=600):
    env = {**os.environ, "OMP_NUM_THREADS": "1"}  # one thread: the same sums in both
    out = subprocess.run([str(LEROBOT_PYTHON), *args], capture_output=True, text=True,
                         timeout=timeout, env=env)
    assert out.returncode == 0, out.stderr[-3000:]
    return out


@pytest.fixture(scope="module")
def served_act(tmp_path_factory):
    """(checkpoint folder, port) of a tiny ACT served by ``python -m splatserve.lerobot``."""
    folder = tmp_path_factory.mktemp("act") / "pretrained_model"
    _lerobot(str(BUILD), str(folder))
    assert (folder / "config.json").is_file() and (folder / "model.safetensors").is_file()
    port = _free_port()
    proc = subprocess.Popen([str(LEROBOT_PYTHON), "-m", "splatserve.lerobot", "--checkpoint",
                             str(folder), "--port", str(port), "--latency-budget-ms", "20000"],
                            env={**os.environ, "OMP_NUM_THREADS": "1"},
                            stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True)
    deadline = time.monotonic() + 300
    while True:
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                break
        assert proc.poll() is None, proc.stderr.read()
        assert time.monotonic() < deadline, "LeRobot server did not start"
        time.sleep(0.2)
    yield folder, port
    proc.terminate()
    proc.wait(timeout=30)
    proc.stderr.close()


def test_served_act_equals_lerobot_in_process(served_act, tmp_path):
    import bench.sim
    from bench.policies import make_policy
    from bench.scene.sample import make_sample_scene
    from bench.sim.rollout import run_episode

    folder, port = served_act
    env = bench.sim.make_env("cup", make_sample_scene(seed=0, n_gaussians=2000),
                             image_size=(24, 24), max_frames=30)
    policy = make_policy("openpi", env, port=port)
    meta = policy.metadata
    assert meta["policy"].startswith("lerobot:act:") and meta["checkpoint"] == str(folder)
    cfg = policy.config  # from the handshake, nothing hand-written
    assert cfg.image_keys == {"wrist": "observation.images.wrist"}
    assert cfg.image_sizes == {"wrist": (32, 32)} and cfg.prompt_key == "task"
    assert cfg.state_keys == {"observation.state": tuple(range(8))}
    assert cfg.chunk_length == 10 and cfg.timeout_s == 20.0 and policy.episode_control
    sent, replies = [], []
    roundtrip = policy._roundtrip

    def recording(request, **kwargs):  # the requests as sent and the raw replies
        reply = roundtrip(request, **kwargs)
        if "__ctrl__" not in request:
            sent.append(request)
            replies.append(np.array(reply["actions"]))
        return reply

    policy._roundtrip = recording
    record = run_episode(env, policy, init_index=2)[0]
    policy.close()
    env.close()
    assert record.status == "ok", record.error
    assert record.policy_queries == len(sent) >= 2
    assert sent[0]["observation.images.wrist"].shape == (32, 32, 3)
    arrays = {"count": len(sent)}
    for i, request in enumerate(sent):
        arrays.update({f"image_{i}": request["observation.images.wrist"],
                       f"state_{i}": request["observation.state"],
                       f"task_{i}": np.str_(request["task"])})
    np.savez(tmp_path / "requests.npz", **arrays)
    _lerobot(str(REFERENCE), str(folder), str(tmp_path / "requests.npz"),
             str(tmp_path / "reference.npz"))
    reference = np.load(tmp_path / "reference.npz")
    for i, reply in enumerate(replies):
        assert reply.shape == (10, 7) and reply.dtype == np.float32
        np.testing.assert_array_equal(reply, reference[f"actions_{i}"])  # bit for bit
    assert abs(float(replies[0][:, 6].mean()) - 0.08) < 0.01  # unnormalised by the stats


def test_study_against_the_served_checkpoint(served_act, tmp_path):
    from bench.study.faults import RolloutLog
    from bench.study.runner import run_study
    from bench.study.spec import spec_from_dict
    from bench.study.store import ResultsStore

    _, port = served_act
    served = {"factory": "openpi", "name": "act", "kwargs": {"port": port}}
    spec = spec_from_dict({
        "name": "lerobot", "sample_scenes": {"a": 0}, "sample_gaussians": 2000,
        "conditions": ["clean"], "tasks": ["cup"], "policies": {"cup": [served, "hold"]},
        "trials": 2, "real_trials": 1, "max_frames": 30, "metrics": ["psnr"],
        "image_size": [24, 24]})
    run_study(spec, tmp_path / "study", progress=False)  # raises on any policy fault
    with ResultsStore(tmp_path / "study") as store:
        act = [r for r in store.rollouts() if r.policy == "act"]
    assert len(act) == 3  # 2 simulated + 1 "real" trial, each a served rollout
    with RolloutLog(tmp_path / "study" / "results.sqlite") as log:
        assert log.errors() == []
        served = [r for r in log.latency() if r["policy"] == "act"]
    assert len(served) == 3 and all(r["queries"] >= 2 for r in served)
    assert (tmp_path / "study" / "tables" / "ranking.csv").is_file()
