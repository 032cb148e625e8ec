"""The policy-server kit ``splatserve`` on its own: handshake, wire, server, client, CLI.

Nothing here imports the bench: the kit must work in any environment (numpy, msgpack,
websockets only).
"""

import http.client
import os
import socket
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[2]


class Recorder:
    """A kit policy that records its hooks and answers ``actions`` = state tiled 4 x."""

    def __init__(self, fail_on=None):
        self.events = []
        self.fail_on = fail_on

    def on_episode_start(self, experiment, task, episode_id):
        if self.fail_on == "episode_start":
            raise RuntimeError("no episodes today")
        self.events.append(("start", experiment, task, episode_id))

    def on_episode_end(self, success):
        self.events.append(("end", success))

    def infer(self, obs):
        if self.fail_on == "infer":
            raise ValueError("bad observation\nsecond line is dropped")
        self.events.append(("infer", sorted(obs)))
        return {"actions": np.tile(np.asarray(obs["state"], np.float32), (4, 1)),
                "extra": {"note": "kept"}}


def _caps(**kw):
    from splatserve.capabilities import Camera, Capabilities

    return Capabilities(cameras={"wrist": Camera(key="img", size=(16, 16))},
                        state={"state": ("x", "y", "z", "opening")}, **kw)


# --------------------------------------------------------------------------- handshake


def test_capabilities_round_trip_and_ignore_unknown_keys():
    from splatserve.capabilities import Capabilities

    caps = _caps(chunk_length=8, latency_budget_ms=250, action_mode="absolute",
                 action_layout=("x", "y", "z", "rx", "ry", "rz", "closed_fraction", "spare"))
    meta = {"server": "x", "future": 1, "capabilities": {**caps.to_metadata(), "new_key": [1]}}
    back = Capabilities.from_metadata(meta)
    assert back == caps
    assert back.action_columns() == ((0, 1, 2, 3, 4, 5, 6), "closed_fraction")
    assert Capabilities.from_metadata({"server": "openpi"}) is None
    assert Capabilities.from_metadata({"capabilities": {}}) == Capabilities()


@pytest.mark.parametrize(("caps", "needle"), [
    ({"cameras": {"wrist": {"key": "k", "size": [0, 4]}}}, "size must be [height, width]"),
    ({"state": {"s": ["x", "joint_3"]}}, "each must be one of"),
    ({"action": {"mode": "velocity"}}, "action mode 'velocity'"),
    ({"chunk_length": 5000}, "chunk_length must be 1..1024"),
    ({"cameras": {"wrist": {"size": [4, 4]}}}, "malformed (KeyError"),
    ({"latency_budget_ms": -1}, "latency_budget_ms must be in"),
])
def test_malformed_capabilities_are_one_line_errors(caps, needle):
    from splatserve.capabilities import Capabilities, CapabilityError

    with pytest.raises(CapabilityError) as err:
        Capabilities.from_metadata({"capabilities": caps})
    assert needle in str(err.value) and "\n" not in str(err.value)


def test_joint_space_action_layout_is_refused_with_the_missing_columns():
    from splatserve.capabilities import Capabilities, CapabilityError

    caps = Capabilities(action_layout=tuple(f"j{i}" for i in range(7)) + ("opening",))
    with pytest.raises(CapabilityError, match=r"lacks \['x', 'y', 'z', 'rx', 'ry', 'rz'\]"):
        caps.action_columns()


# --------------------------------------------------------------------------- server + client


@pytest.fixture
def served():
    """Start a kit server in this process: ``served(policy=..., **kw) -> (server, uri)``."""
    from splatserve.server import PolicyServer

    servers = []

    def start(**kwargs):
        server = PolicyServer(log=None, **kwargs)
        port = server.start("127.0.0.1", 0)
        servers.append(server)
        return server, f"ws://127.0.0.1:{port}"

    yield start
    for server in servers:
        server.shutdown()


def test_metadata_infer_and_episode_control(served):
    from splatserve.client import PolicyClient

    policy = Recorder()
    _, uri = served(policy=policy, capabilities=_caps(), name="rec", metadata={"lab": "A"})
    with PolicyClient(uri) as client:
        meta = client.connect()
        assert meta["policy"] == "rec" and meta["lab"] == "A"
        assert meta["server"].startswith("splatserve/")
        assert meta["capabilities"]["cameras"]["wrist"] == {"key": "img", "size": [16, 16],
                                                            "optional": False}
        assert client.episode_start(experiment="e", task="cup", episode_id=7) == {
            "__ack__": "episode_start"}
        reply = client.infer({"state": np.arange(4, dtype=np.float32), "prompt": "p"})
        np.testing.assert_array_equal(reply["actions"][3], [0, 1, 2, 3])
        assert reply["extra"] == {"note": "kept"} and reply["server_timing"]["infer_ms"] >= 0
        assert client.episode_end(success=True) == {"__ack__": "episode_end"}
        assert client.infer({"__ctrl__": "pause"}) == {"__ack__": "ignored"}  # openpi's answer
    assert policy.events == [("start", "e", "cup", 7), ("infer", ["prompt", "state"]),
                             ("end", True)]


def test_episode_start_falls_back_to_reset(served):
    from splatserve.client import PolicyClient

    class Plain:
        resets = 0

        def reset(self):
            Plain.resets += 1

        def infer(self, obs):
            return {"actions": np.zeros((1, 7), np.float32)}

    _, uri = served(policy=Plain())
    with PolicyClient(uri) as client:
        client.episode_start(episode_id=1)
        client.episode_end()
    assert Plain.resets == 1


@pytest.mark.parametrize("fail_on", ["infer", "episode_start"])
def test_policy_exception_is_one_text_frame_then_close(served, fail_on):
    from splatserve.client import PolicyClient, ServerError
    from websockets.exceptions import ConnectionClosed

    _, uri = served(factory=lambda: Recorder(fail_on=fail_on))
    client = PolicyClient(uri)
    client.connect()
    with pytest.raises(ServerError) as err:
        if fail_on == "infer":
            client.infer({"state": np.zeros(4, np.float32)})
        else:
            client.episode_start(episode_id=0)
    expected = ("ValueError: bad observation" if fail_on == "infer"
                else "RuntimeError: no episodes today")
    assert str(err.value) == expected
    with pytest.raises(ConnectionClosed) as closed:
        client._ws.recv(timeout=5)
    assert closed.value.rcvd.code == 1011
    client.close()
    with PolicyClient(uri) as again:  # the server keeps serving
        assert again.connect()["server"].startswith("splatserve/")


def test_factory_gives_each_connection_its_own_policy(served):
    from splatserve.client import PolicyClient

    made = []

    def factory():
        made.append(Recorder())
        return made[-1]

    _, uri = served(factory=factory)
    for _ in range(2):
        with PolicyClient(uri) as client:
            client.infer({"state": np.zeros(4, np.float32)})
    assert len(made) == 2 and all(len(p.events) == 1 for p in made)


def test_malformed_message_and_oversize_request(served):
    from splatserve import wire
    from websockets.exceptions import ConnectionClosed
    from websockets.sync.client import connect

    _, uri = served(policy=Recorder(), max_message_bytes=4096)
    with connect(uri) as ws:
        wire.unpackb(ws.recv(timeout=5))
        ws.send(b"\xc1 not msgpack")
        assert ws.recv(timeout=5) == "FormatError"  # msgpack's reserved byte 0xc1
    with connect(uri) as ws:
        wire.unpackb(ws.recv(timeout=5))
        ws.send(wire.packb([1, 2]))
        assert ws.recv(timeout=5) == "ValueError: request is a list, expected a map"
    with connect(uri) as ws:
        wire.unpackb(ws.recv(timeout=5))
        ws.send(b"\0" * 5000)
        with pytest.raises(ConnectionClosed) as closed:
            ws.recv(timeout=5)
        assert closed.value.rcvd.code == 1009


def test_client_bounds_the_reply_size(served):
    from splatserve.client import PolicyClient
    from websockets.exceptions import ConnectionClosed

    class Big:
        def infer(self, obs):
            return {"actions": np.zeros((4096, 7), np.float32)}  # 114 KiB

    _, uri = served(policy=Big())
    with PolicyClient(uri, max_message_bytes=64 << 10) as client:
        with pytest.raises(ConnectionClosed) as closed:
            client.infer({})
    assert closed.value.sent.code == 1009


def test_healthz_answers_200(served):
    server, uri = served(policy=Recorder())
    port = server.listener.socket.getsockname()[1]
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
    conn.request("GET", "/healthz")
    assert conn.getresponse().status == 200


def test_busy_port_is_a_one_line_kit_error(served):
    from splatserve.server import KitError, PolicyServer

    server, _ = served(policy=Recorder())
    port = server.listener.socket.getsockname()[1]
    with pytest.raises(KitError, match=f"cannot listen on 127.0.0.1:{port}"):
        PolicyServer(Recorder(), log=None).bind("127.0.0.1", port)


# --------------------------------------------------------------------------- CLI, isolation


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_cli_serves_a_factory_and_refuses_bad_input(tmp_path):
    from splatserve.client import PolicyClient

    (tmp_path / "mypol.py").write_text(textwrap.dedent("""
        import numpy as np
        capabilities = None
        class Gain:
            capabilities = {"action": {"layout": ["x", "y", "z", "rx", "ry", "rz", "opening"]},
                            "chunk_length": 2}
            def __init__(self, gain=1.0):
                self.gain = gain
            def infer(self, obs):
                return {"actions": self.gain * np.ones((3, 7), np.float32)}
        def broken():
            raise RuntimeError("weights missing")
    """))
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), *sys.path])}
    port = _free_port()
    proc = subprocess.Popen([sys.executable, "-m", "splatserve", "--policy", "mypol:Gain",
                             "--kwargs", '{"gain": 2}', "--port", str(port)], env=env,
                            stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                client = PolicyClient(f"ws://127.0.0.1:{port}")
                meta = client.connect()
                break
            except OSError:
                assert proc.poll() is None and time.monotonic() < deadline, proc.stderr.read()
                time.sleep(0.1)
        assert meta["capabilities"]["chunk_length"] == 2 and meta["policy"] == "mypol:Gain"
        assert float(client.infer({})["actions"][0, 0]) == 2.0
        client.close()
    finally:
        proc.terminate()
        proc.wait(timeout=30)
        proc.stderr.close()
    for args, needle in ((["--policy", "mypol"], "is not module:attr"),
                         (["--policy", "nope:x"], "cannot import 'nope'"),
                         (["--policy", "mypol:broken"], "raised RuntimeError: weights missing"),
                         (["--policy", "mypol:Gain", "--kwargs", "[1]"], "must be a JSON object"),
                         (["--policy", "mypol:Gain", "--port", "70000"], "--port must be in")):
        out = subprocess.run([sys.executable, "-m", "splatserve", *args], env=env,
                             capture_output=True, text=True, timeout=60, cwd=tmp_path)
        lines = [line for line in out.stderr.splitlines() if line.strip()]
        assert out.returncode == 2 and len(lines) == 1 and needle in lines[0], out.stderr


def test_kit_imports_only_numpy_msgpack_websockets():
    """The kit's modules load without torch or the bench (its pyproject says the same)."""
    code = ("import sys, splatserve.server, splatserve.client, splatserve.cli, "
            "splatserve.capabilities, splatserve.wire, splatserve.lerobot\n"
            "print(sorted({m.split('.')[0] for m in sys.modules} & "
            "{'torch', 'bench', 'lerobot', 'cv2', 'scipy'}))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=120, cwd=ROOT / "serving")
    assert out.returncode == 0 and out.stdout.strip() == "[]", out.stderr
    import tomllib

    project = tomllib.loads((ROOT / "serving" / "pyproject.toml").read_text())["project"]
    assert sorted(d.split(">")[0] for d in project["dependencies"]) == [
        "msgpack", "numpy", "websockets"]


def test_lerobot_server_refuses_bad_input_in_one_line(tmp_path):
    """Without a checkpoint, or (in this venv) without LeRobot: one line, exit 2."""
    (tmp_path / "ckpt").mkdir()
    (tmp_path / "ckpt" / "config.json").write_text("{}")
    cases = [(["--checkpoint", str(tmp_path / "none")], "is not a LeRobot pretrained_model"),
             (["--checkpoint", str(tmp_path), "--camera", "wrist"], "is not CLIENT=IMAGE"),
             (["--checkpoint", str(tmp_path), "--port", "-1"], "--port must be in")]
    try:
        import lerobot  # noqa: F401
    except ImportError:
        cases.append((["--checkpoint", str(tmp_path / "ckpt")], "LeRobot is not importable"))
    for args, needle in cases:
        out = subprocess.run([sys.executable, "-m", "splatserve.lerobot", *args],
                             capture_output=True, text=True, timeout=60)
        lines = [line for line in out.stderr.splitlines() if line.strip()]
        assert out.returncode == 2 and len(lines) == 1 and needle in lines[0], out.stderr
