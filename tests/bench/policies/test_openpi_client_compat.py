"""The real openpi-client 0.1.2 in its own venv (``make openpi-client-env``) vs ``bench serve``.

openpi-client pins numpy<2, so it cannot live in the bench's venv; the test runs it in
``.venv-openpi-client`` and skips cleanly where that is absent. 0.1.2 predates openpi's
``episode_start`` / ``episode_end`` methods, so the script sends their messages with the
client's own packer and socket, byte for byte what the newer client's methods send.
"""

import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[3]
HERE = Path(__file__).parent
OPENPI_PYTHON = ROOT / ".venv-openpi-client" / "bin" / "python"

pytestmark = pytest.mark.skipif(not OPENPI_PYTHON.exists(),
                                reason="no .venv-openpi-client (make openpi-client-env)")

SCRIPT = r"""
import json, sys
import numpy as np
from openpi_client import msgpack_numpy, websocket_client_policy

port, out = int(sys.argv[1]), sys.argv[2]
client = websocket_client_policy.WebsocketClientPolicy(host="127.0.0.1", port=port)

def control(message):  # what openpi's newer WebsocketClientPolicy.episode_start/_end send
    client._ws.send(client._packer.pack(message))
    return msgpack_numpy.unpackb(client._ws.recv())

obs = dict(np.load(out + ".obs.npz"))
obs = {k.replace("__", "/"): (v if v.ndim else v.item()) for k, v in obs.items()}
start = {"__ctrl__": "episode_start", "__experiment__": "compat", "__task__": "cup",
         "__episode_id__": 5}
acks = [control(start)]
first = client.infer(obs)
acks.append(control({"__ctrl__": "episode_end", "__success__": False}))
acks.append(control(start))
second = client.infer(obs)
np.savez(out, first=first["actions"], second=second["actions"])
print(json.dumps({"metadata": client.get_server_metadata(), "acks": acks,
                  "reply_keys": sorted(first), "numpy": np.__version__}))
"""


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_openpi_client_0_1_2_talks_to_bench_serve(tmp_path, monkeypatch):
    from bench.policies import make_policy
    from bench.policies.serve import bench_observation, server_env

    monkeypatch.syspath_prepend(str(HERE))  # bench_test_policies, in-process too
    port = _free_port()
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(HERE), *sys.path])}
    entry = "bench_test_policies:make_servo"
    proc = subprocess.Popen([sys.executable, "-m", "bench.cli", "serve", "--policy", entry,
                             "--seed", "5", "--port", str(port)], env=env,
                            stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True)
    rng = np.random.default_rng(0)
    obs = {"observation/wrist_image": rng.integers(0, 256, (24, 24, 3), dtype=np.uint8),
           "observation/state": np.array([0.1, -0.05, 0.3, 1, 0, 0, 0, 0.08], np.float32),
           "prompt": "put the cup into the box", "bench/timestamp": 0.0,
           "bench/episode_seed": 5, "bench/query_index": 0}
    np.savez(tmp_path / "out.obs.npz", **{k.replace("/", "__"): np.asarray(v)
                                          for k, v in obs.items()})
    try:
        deadline = time.monotonic() + 120
        while True:
            with socket.socket() as s:
                if s.connect_ex(("127.0.0.1", port)) == 0:
                    break
            assert proc.poll() is None and time.monotonic() < deadline, proc.stderr.read()
            time.sleep(0.1)
        out = subprocess.run([str(OPENPI_PYTHON), "-c", SCRIPT, str(port),
                              str(tmp_path / "out")], capture_output=True, text=True,
                             timeout=120, cwd=tmp_path)
    finally:
        proc.terminate()
        proc.wait(timeout=30)
        proc.stderr.close()
    assert out.returncode == 0, out.stderr
    report = json.loads(out.stdout.strip().splitlines()[-1])
    assert report["numpy"].startswith("1.")  # really the numpy<2 client
    caps = report["metadata"]["capabilities"]  # the new keys arrive as plain data
    assert caps["action"]["layout"] == ["x", "y", "z", "rx", "ry", "rz", "opening"]
    assert caps["episode_control"] is True and report["metadata"]["policy"] == entry
    assert report["acks"] == [{"__ack__": "episode_start"}, {"__ack__": "episode_end"},
                              {"__ack__": "episode_start"}]
    assert report["reply_keys"] == ["actions", "server_timing"]
    got = np.load(tmp_path / "out.npz")
    assert got["first"].shape == (32, 7) and got["first"].dtype == np.float32
    np.testing.assert_array_equal(got["first"], got["second"])  # same episode seed, same query
    local_env = server_env("cup")
    try:
        local = make_policy(entry, local_env, seed=5)
        local.reset(seed=5)
        expected = local.act(bench_observation(obs), {})
    finally:
        local_env.close()
    np.testing.assert_array_equal(got["first"], expected)  # bit for bit, in-process
