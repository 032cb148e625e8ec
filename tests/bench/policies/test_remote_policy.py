"""openpi protocol client + ``bench serve``: wire bytes, bit identity, faults."""

import os
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest

HERE = Path(__file__).parent
os.environ.setdefault("MUJOCO_GL", "egl")
os.environ.setdefault("PYOPENGL_PLATFORM", "egl")

# openpi-client 0.1.2 ``msgpack_numpy.packb`` of the dict below (the bytes an openpi client
# sends); produced once with that package (it pins numpy<2, so it is not a dependency).
OPENPI_GOLDEN = bytes.fromhex(
    "84b16f62736572766174696f6e2f737461746584c40b5f5f6e6461727261795f5fc3c40464617461c420000000"
    "000000803f0000004000004040000080400000a0400000c0400000e040c4056474797065a33c6634c405736861"
    "706591"
    "08b16f62736572766174696f6e2f696d61676584c40b5f5f6e6461727261795f5fc3c40464617461c40c000102"
    "030405060708090a0bc4056474797065a37c7531c405736861706593020203a670726f6d7074b8707574207468"
    "652063757020696e746f2074686520626f78a174cb3fe0000000000000")


def _golden_obs():
    return {"observation/state": np.arange(8, dtype=np.float32),
            "observation/image": np.arange(12, dtype=np.uint8).reshape(2, 2, 3),
            "prompt": "put the cup into the box", "t": np.float64(0.5)}


def test_wire_matches_openpi_client_bytes():
    import splatserve.wire

    from bench.policies import wire

    assert wire.packb is splatserve.wire.packb  # one implementation: the kit's
    assert wire.packb(_golden_obs()) == OPENPI_GOLDEN
    back = wire.unpackb(OPENPI_GOLDEN)
    np.testing.assert_array_equal(back["observation/image"], _golden_obs()["observation/image"])
    assert back["observation/state"].dtype == np.float32 and back["prompt"].startswith("put")
    with pytest.raises(TypeError):
        wire.packb({"x": np.array([object()])})


def test_wire_matches_installed_openpi_client():
    openpi = pytest.importorskip("openpi_client.msgpack_numpy")
    from bench.policies import wire

    obs = _golden_obs()
    assert wire.packb(obs) == openpi.packb(obs)
    np.testing.assert_array_equal(openpi.unpackb(wire.packb(obs))["observation/state"],
                                  obs["observation/state"])


def test_resize_with_pad_keeps_aspect():
    from bench.policies.remote import resize_with_pad

    image = np.full((20, 40, 3), 200, np.uint8)
    out = resize_with_pad(image, 32, 32)
    assert out.shape == (32, 32, 3)
    assert (out[:8] == 0).all() and (out[-8:] == 0).all() and (out[8:24] == 200).all()
    assert resize_with_pad(image, 20, 40) is image


# --------------------------------------------------------------------------- servers


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait_port(port: int, proc=None, timeout: float = 120.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            raise RuntimeError(f"server exited: {proc.stderr.read()}")
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.1)
    raise TimeoutError(f"no server on port {port}")


def start_server(policy: str, *args: str):
    """A real ``bench serve`` process on 127.0.0.1; returns (process, port)."""
    port = _free_port()
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(HERE), *sys.path])}
    proc = subprocess.Popen([sys.executable, "-m", "bench.cli", "serve", "--policy", policy,
                             "--port", str(port), *args], env=env, stderr=subprocess.PIPE,
                            stdout=subprocess.DEVNULL, text=True)
    _wait_port(port, proc)
    return proc, port


def stop(proc) -> None:
    if proc.poll() is None:
        proc.terminate()
        proc.wait(timeout=30)
    proc.stderr.close()


@pytest.fixture(scope="module")
def scene():
    from bench.scene.sample import make_sample_scene

    return make_sample_scene(seed=0, n_gaussians=3000)


@pytest.fixture(scope="module")
def rgb_env(scene):
    import bench.sim

    env = bench.sim.make_env("cup", scene, image_size=(24, 24), max_frames=48)
    yield env
    env.close()


@pytest.fixture(scope="module")
def state_env(scene):
    import bench.sim

    env = bench.sim.make_env("cup", scene, obs_mode="state", background="none", max_frames=40)
    yield env
    env.close()


@pytest.fixture(autouse=True)
def _test_policies_importable(monkeypatch):
    monkeypatch.syspath_prepend(str(HERE))


def test_rollout_through_server_equals_in_process_bit_for_bit(rgb_env):
    from bench.policies import make_policy
    from bench.sim.rollout import run_episode

    entry = "bench_test_policies:make_servo"
    proc, port = start_server(entry, "--seed", "5")
    try:
        for condition in (1, 7):
            local_states, remote_states, frames_a, latencies = [], [], [], []
            local = make_policy(entry, rgb_env, seed=5)
            rec_a, frames_a, _ = run_episode(rgb_env, local, init_index=condition,
                                             states=local_states, record_frames=True)
            remote = make_policy("openpi", rgb_env, port=port)
            assert remote.episode_control  # from bench serve's handshake
            rec_b, frames_b, _ = run_episode(rgb_env, remote, init_index=condition,
                                             states=remote_states, record_frames=True,
                                             latencies=latencies)
            remote.close()
            assert rec_b.status == "ok", rec_b.error
            assert {**rec_a.to_dict(), "policy": ""} == {**rec_b.to_dict(), "policy": ""}
            assert local_states == remote_states  # every frame, every float
            assert all(np.array_equal(a, b) for a, b in zip(frames_a, frames_b, strict=True))
            assert len(latencies) == rec_b.policy_queries and min(latencies) > 0
            assert local_states[-1].ee_pose != local_states[0].ee_pose  # it moved
    finally:
        stop(proc)


def test_dead_or_refusing_server_is_an_error_not_a_failure(state_env):
    from bench.policies import make_policy
    from bench.sim.rollout import run_episode

    port = _free_port()  # nothing listens here
    policy = make_policy("openpi", state_env, port=port, retries=2, backoff_s=0.05)
    start = time.monotonic()
    record, _, _ = run_episode(state_env, policy, init_index=0)
    assert record.status == "error" and not record.success and record.failure == ""
    assert f"ws://127.0.0.1:{port}" in record.error and "after 3 attempts" in record.error
    assert "\n" not in record.error
    assert time.monotonic() - start >= 0.05 + 0.1  # backoff 0.05 s then 0.1 s


def test_slow_server_past_timeout_is_an_error(state_env):
    from bench.policies import make_policy
    from bench.sim.rollout import run_episode

    proc, port = start_server("bench_test_policies:make_servo", "--delay-ms", "1500")
    try:
        policy = make_policy("openpi", state_env, port=port, timeout_s=0.3, retries=1,
                             backoff_s=0.0)
        record, _, _ = run_episode(state_env, policy, init_index=0)
        policy.close()
    finally:
        stop(proc)
    assert record.status == "error"
    assert "no reply within 0.3 s (after 2 attempts)" in record.error


@pytest.mark.parametrize(("factory", "reason"), [
    ("bench_test_policies:BadShape", "has shape (4, 6)"),
    ("bench_test_policies:BadNaN", "contains NaN"),
    ("bench_test_policies:BadDtype", "has dtype int32"),
])
def test_malformed_replies_are_errors_with_a_reason(factory, reason, state_env):
    from bench.policies import make_policy
    from bench.policies.serve import PolicyService, serve, server_env
    from bench.sim.rollout import run_episode

    env = server_env("cup")
    box = {}
    service = PolicyService(factory, env)
    thread = threading.Thread(target=serve, args=(service,), daemon=True, kwargs={
        "port": 0, "ready": lambda server: box.setdefault("server", server)})
    thread.start()
    while "server" not in box:
        time.sleep(0.02)
    port = box["server"].socket.getsockname()[1]
    try:
        policy = make_policy("openpi", state_env, port=port, retries=0)
        record, _, _ = run_episode(state_env, policy, init_index=0)
        policy.close()
    finally:
        box["server"].shutdown()
        thread.join(timeout=10)
        env.close()
    assert record.status == "error" and record.policy_queries == 1
    assert reason in record.error and "\n" not in record.error


def test_garbage_and_text_replies_are_errors(state_env):
    from websockets.sync.server import serve as ws_serve

    from bench.policies import make_policy, wire
    from bench.sim.rollout import run_episode

    replies = iter([b"\xc1not msgpack", "RuntimeError: model exploded"])

    def handler(ws):
        ws.send(wire.packb({}))
        ws.recv()
        ws.send(next(replies))
        ws.recv()

    with ws_serve(handler, "127.0.0.1", 0) as server:
        thread = threading.Thread(target=server.serve_forever, daemon=True)
        thread.start()
        port = server.socket.getsockname()[1]
        reasons = []
        for _ in range(2):
            policy = make_policy("openpi", state_env, port=port, retries=0)
            reasons.append(run_episode(state_env, policy, init_index=0)[0].error)
            policy.close()
        server.shutdown()
    assert "malformed reply" in reasons[0]
    assert "server error: RuntimeError: model exploded" in reasons[1]


def test_serve_refuses_privileged_and_bad_arguments():
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(HERE), *sys.path])}
    for args, needle in ((["--policy", "expert"], "privileged"),
                         (["--policy", "nope:x"], "cannot import"),
                         (["--policy", "hold", "--kwargs", "{bad"], "not JSON"),
                         (["--policy", "hold", "--latency-budget-ms", "0"],
                          "--latency-budget-ms must be in (0, 3600000]")):
        out = subprocess.run([sys.executable, "-m", "bench.cli", "serve", *args, "--port", "1"],
                             env=env, capture_output=True, text=True, timeout=300)
        lines = [line for line in out.stderr.splitlines() if line.strip()]
        assert out.returncode == 2 and len(lines) == 1 and needle in lines[0], out.stderr


def test_droid_layout_maps_keys_and_gripper(state_env):
    from bench.policies.remote import WebsocketPolicy

    policy = WebsocketPolicy(state_env.unwrapped, layout="droid")
    obs = {"images": {"wrist": np.full((16, 32, 3), 9, np.uint8)},
           "proprio": np.array([0.1, 0.2, 0.3, 1, 0, 0, 0, 0.11], np.float32),
           "prompt": "put the cup into the box", "timestamp": 0.0}
    request = policy.encode(obs)
    assert request["observation/wrist_image_left"].shape == (224, 224, 3)
    assert request["observation/exterior_image_1_left"].max() == 0  # absent camera: zeros
    np.testing.assert_array_equal(request["observation/gripper_position"], [0.0])  # open
    assert request["prompt"] == "put the cup into the box" and "bench/query_index" not in request
    rows = policy.decode({"actions": np.tile([[0.1, 0.2, 0.3, 0, 0, 0, 1.0, 5.0]], (10, 1))})
    assert rows.shape == (8, 7) and rows.dtype == np.float32  # chunk_length 8
    np.testing.assert_allclose(rows[:, 6], 0.0)  # closed fraction 1 -> opening 0 m
