"""The ``openpi`` client against servers made with the kit: handshake, episode control,
forward compatibility, bounds, and faults that end a rollout as ``error`` (never a failure)."""

import os
import socket
import subprocess
import sys
import textwrap
import time

import numpy as np
import pytest

os.environ.setdefault("MUJOCO_GL", "egl")
os.environ.setdefault("PYOPENGL_PLATFORM", "egl")


class Scripted:
    """A kit policy: records hooks, answers a hold chunk (zeros, open gripper) of ``rows``."""

    def __init__(self, *, rows=32, fail_on=None, sleep_s=0.0, extra=None, columns=7):
        self.rows, self.fail_on, self.sleep_s = rows, fail_on, sleep_s
        self.extra, self.columns = extra or {}, columns
        self.events = []

    def on_episode_start(self, experiment, task, episode_id):
        if self.fail_on == "episode_start":
            raise RuntimeError("cannot start an episode")
        self.events.append(("start", experiment, task, episode_id))

    def on_episode_end(self, success):
        if self.fail_on == "episode_end":
            raise RuntimeError("cannot end an episode")
        self.events.append(("end", success))

    def infer(self, obs):
        time.sleep(self.sleep_s)
        self.events.append(("infer", int(obs.get("bench/query_index", -1))))
        actions = np.zeros((self.rows, self.columns), np.float32)
        actions[:, 6] = 0.08
        return {"actions": actions, **self.extra}


@pytest.fixture(scope="module")
def state_env():
    import bench.sim
    from bench.scene.sample import make_sample_scene

    env = bench.sim.make_env("cup", make_sample_scene(seed=0, n_gaussians=200),
                             obs_mode="state", background="none", max_frames=40)
    yield env
    env.close()


@pytest.fixture
def kit():
    """``kit(policy, capabilities) -> port`` of an in-thread kit server (stopped after)."""
    from splatserve.server import PolicyServer

    servers = []

    def start(policy, capabilities=None, **kwargs):
        server = PolicyServer(policy, capabilities=capabilities, log=None, **kwargs)
        servers.append(server)
        return server.start("127.0.0.1", 0)

    yield start
    for server in servers:
        server.shutdown()


def _caps(**kw):
    from splatserve.capabilities import Camera, Capabilities

    base = {"cameras": {"wrist": Camera(key="obs/wrist", size=(16, 16))},
            "state": {"obs/state": ("x", "y", "z", "qw", "qx", "qy", "qz", "opening")}}
    return Capabilities(**{**base, **kw})


# --------------------------------------------------------------------------- handshake


def test_handshake_configures_the_client(kit):
    from splatserve.capabilities import Camera

    from bench.policies.remote import WebsocketPolicy

    caps = _caps(cameras={"wrist": Camera(key="obs/wrist", size=(16, 16)),
                          "exterior": Camera(key="obs/ext", size=(8, 8), optional=True)},
                 state={"s/pos": ("x", "y", "z"), "s/grip": ("closed_fraction",)},
                 action_layout=("spare", "x", "y", "z", "rx", "ry", "rz", "closed_fraction"),
                 action_mode="absolute", chunk_length=3, prompt_key="instruction",
                 latency_budget_ms=300)
    port = kit(Scripted(), caps, metadata={"robot": "franka", "unknown_future_key": [1, 2]})
    policy = WebsocketPolicy(None, port=port)  # no env: the cameras are not checked
    cfg = policy.config
    assert policy.metadata["robot"] == "franka"  # unknown metadata keys: kept, ignored
    assert cfg.image_keys == {"wrist": "obs/wrist", "exterior": "obs/ext"}
    assert cfg.image_sizes == {"wrist": (16, 16), "exterior": (8, 8)}
    assert cfg.required_cameras == ("wrist",) and cfg.prompt_key == "instruction"
    assert cfg.action_columns == (1, 2, 3, 4, 5, 6, 7) and cfg.gripper == "closed_fraction"
    assert cfg.action_mode == "absolute" and cfg.chunk_length == 3
    assert cfg.timeout_s == pytest.approx(0.3)  # the declared latency budget
    assert policy.episode_control
    obs = {"images": {"wrist": np.full((32, 64, 3), 7, np.uint8)},
           "proprio": np.array([0.1, 0.2, 0.3, 1, 0, 0, 0, 0.11 / 4], np.float32),
           "prompt": "put the cup into the box", "timestamp": 0.0}
    request = policy.encode(obs)
    assert request["obs/wrist"].shape == (16, 16, 3) and request["obs/ext"].shape == (8, 8, 3)
    np.testing.assert_allclose(request["s/pos"], [0.1, 0.2, 0.3])
    np.testing.assert_allclose(request["s/grip"], [0.75])  # a quarter open = 0.75 closed
    assert request["instruction"] == "put the cup into the box"
    policy.close()
    explicit = WebsocketPolicy(None, port=port, chunk_length=2, timeout_s=5.0)
    assert explicit.config.chunk_length == 2 and explicit.config.timeout_s == 5.0  # user wins
    assert explicit.config.prompt_key == "instruction"
    explicit.close()


def test_bounds_agree_with_the_kit():
    import splatserve.capabilities
    import splatserve.server

    from bench.policies import remote
    from bench.safety import DEFAULT_MAX_MESSAGE_BYTES

    assert splatserve.server.DEFAULT_MAX_MESSAGE_BYTES == DEFAULT_MAX_MESSAGE_BYTES == 16 << 20
    assert remote.RemoteConfig().max_message_bytes == DEFAULT_MAX_MESSAGE_BYTES
    assert remote.RemoteConfig().max_chunk_rows == splatserve.capabilities.MAX_CHUNK_ROWS


def test_server_without_handshake_keeps_the_preset(kit):
    from bench.policies.remote import WebsocketPolicy

    policy = WebsocketPolicy(None, port=kit(Scripted()), layout="droid")
    assert policy.capabilities is None and not policy.episode_control
    assert policy.config.image_size == (224, 224) and policy.config.timeout_s is None
    assert policy.config.query_timeout_s == 10.0
    policy.close()


@pytest.mark.parametrize(("caps", "needle"), [
    ({}, "wants camera(s) {'wrist': 'obs/wrist'} but task 'cup' gives []"),
    ({"cameras": {}, "action_layout": ("j1", "j2", "j3", "j4", "j5", "j6", "j7", "opening")},
     "is not an end-effector action: it lacks ['x', 'y', 'z', 'rx', 'ry', 'rz']"),
])
def test_mismatch_is_a_one_line_error_before_any_rollout(kit, state_env, caps, needle):
    from bench.errors import BenchError
    from bench.policies import make_policy

    server_policy = Scripted()
    port = kit(server_policy, _caps(**caps))
    with pytest.raises(BenchError) as err:
        make_policy("openpi", state_env, port=port)
    assert needle in str(err.value) and "\n" not in str(err.value)
    assert f"ws://127.0.0.1:{port}" in str(err.value)
    assert not [e for e in server_policy.events if e[0] == "infer"]


# --------------------------------------------------------------------------- episodes


@pytest.mark.parametrize("control", [True, False])
def test_episode_control_brackets_each_episode(kit, state_env, control):
    from bench.policies import make_policy
    from bench.sim.rollout import run_episode

    server_policy = Scripted(extra={"debug": {"tokens": 12}})
    policy = make_policy("openpi", state_env,
                         port=kit(server_policy, _caps(cameras={}, episode_control=control)))
    records = [run_episode(state_env, policy, init_index=i)[0] for i in (3, 4)]
    policy.close()
    assert all(r.status == "ok" for r in records), [r.error for r in records]
    expected = []
    for index, record in zip((3, 4), records, strict=True):
        queries = [("infer", q) for q in range(record.policy_queries)]
        expected += ([("start", "splatbench", "cup", index), *queries,
                      ("end", record.success)] if control else queries)
    assert server_policy.events == expected
    # unknown reply keys are kept, per query, for the last episode
    assert len(policy.reply_extras) == records[-1].policy_queries
    assert policy.reply_extras[0]["debug"] == {"tokens": 12}
    assert policy.reply_extras[0]["server_timing"]["infer_ms"] >= 0


def test_episode_control_on_for_a_server_without_handshake(kit, state_env):
    from bench.policies import make_policy
    from bench.sim.rollout import run_episode

    server_policy = Scripted()
    policy = make_policy("openpi", state_env, port=kit(server_policy), episode_control="on")
    record = run_episode(state_env, policy, init_index=0)[0]
    policy.close()
    assert record.status == "ok"
    assert server_policy.events[0] == ("start", "splatbench", "cup", 0)
    assert server_policy.events[-1] == ("end", record.success)


# --------------------------------------------------------------------------- bounds, faults


def test_oversize_chunk_and_reply_are_errors(kit, state_env):
    from bench.policies import make_policy
    from bench.sim.rollout import run_episode

    port = kit(Scripted(rows=2000))
    policy = make_policy("openpi", state_env, port=port)
    record = run_episode(state_env, policy, init_index=0)[0]
    policy.close()
    assert record.status == "error" and record.failure == ""
    assert "has 2000 rows, more than max_chunk_rows=1024" in record.error
    policy = make_policy("openpi", state_env, port=port, max_message_bytes=4096, retries=3)
    record = run_episode(state_env, policy, init_index=0)[0]
    policy.close()
    assert record.status == "error" and record.policy_queries == 1  # not retried
    assert "reply larger than max_message_bytes=4096" in record.error


@pytest.mark.parametrize(("fail_on", "reason"), [
    ("episode_start", "server error: RuntimeError: cannot start an episode"),
    ("episode_end", "server error: RuntimeError: cannot end an episode"),
])
def test_control_answered_with_an_error_ends_the_rollout_as_error(kit, state_env, fail_on,
                                                                  reason):
    from bench.policies import make_policy
    from bench.sim.rollout import run_episode

    policy = make_policy("openpi", state_env, port=kit(Scripted(fail_on=fail_on), _caps(
        cameras={})))
    record = run_episode(state_env, policy, init_index=0)[0]
    policy.close()
    assert record.status == "error" and record.failure == "" and not record.success
    assert reason in record.error and "\n" not in record.error


def test_bench_serve_fail_control_drill(state_env):
    from bench.policies import make_policy
    from bench.policies.serve import PolicyService, server_env
    from bench.sim.rollout import run_episode

    env = server_env("cup")
    server = PolicyService("hold", env, fail_control=True).server()
    port = server.start("127.0.0.1", 0)
    try:
        policy = make_policy("openpi", state_env, port=port)
        record = run_episode(state_env, policy, init_index=0)[0]
        policy.close()
    finally:
        server.shutdown()
        env.close()
    assert record.status == "error"
    assert "episode control refused (--fail-control drill)" in record.error


def test_hanging_server_times_out_at_the_declared_latency_budget(kit, state_env):
    from bench.policies import make_policy
    from bench.sim.rollout import run_episode

    port = kit(Scripted(sleep_s=1.5), _caps(cameras={}, latency_budget_ms=200,
                                            episode_control=False))
    policy = make_policy("openpi", state_env, port=port, retries=1, backoff_s=0.0)
    record = run_episode(state_env, policy, init_index=0)[0]
    policy.close()
    assert record.status == "error" and record.failure == ""
    assert "no reply within 0.2 s (after 2 attempts)" in record.error


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_kit_server_that_dies_mid_rollout_is_an_error(tmp_path, state_env):
    """``python -m splatserve`` in its own process, killed (os._exit) at its third query."""
    from bench.policies import make_policy
    from bench.sim.rollout import run_episode

    (tmp_path / "dying.py").write_text(textwrap.dedent("""
        import os
        import numpy as np
        class Dying:
            queries = 0
            def infer(self, obs):
                Dying.queries += 1
                if Dying.queries == 3:
                    os._exit(3)
                return {"actions": np.zeros((4, 7), np.float32)}
    """))
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), *sys.path])}
    port = _free_port()
    proc = subprocess.Popen([sys.executable, "-m", "splatserve", "--policy", "dying:Dying",
                             "--port", str(port)], env=env, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 60
        while socket.socket().connect_ex(("127.0.0.1", port)) != 0:
            assert proc.poll() is None and time.monotonic() < deadline
            time.sleep(0.1)
        policy = make_policy("openpi", state_env, port=port, retries=1, backoff_s=0.05)
        record = run_episode(state_env, policy, init_index=0)[0]
        policy.close()
        assert proc.wait(timeout=30) == 3
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert record.status == "error" and record.failure == "" and record.policy_queries == 3
    assert "after 2 attempts" in record.error and "\n" not in record.error


def test_study_stops_on_a_mismatched_server_before_any_rollout(kit, tmp_path):
    from splatserve.capabilities import Camera

    from bench.errors import BenchError
    from bench.study.runner import run_study
    from bench.study.spec import spec_from_dict
    from bench.study.store import ResultsStore

    server_policy = Scripted()
    port = kit(server_policy, _caps(cameras={"exterior": Camera(key="ext", size=(8, 8))}))
    served = {"factory": "openpi", "name": "served", "kwargs": {"port": port}}
    spec = spec_from_dict({
        "name": "mismatch", "sample_scenes": {"a": 0}, "sample_gaussians": 2000,
        "conditions": ["clean"], "tasks": ["cup"], "policies": {"cup": [served, "hold"]},
        "trials": 1, "real_trials": 1, "max_frames": 20, "metrics": ["psnr"],
        "image_size": [24, 24]})
    with pytest.raises(BenchError) as err:
        run_study(spec, tmp_path / "study", progress=False)
    assert "wants camera(s) {'exterior': 'ext'} but task 'cup' gives ['wrist']" in str(err.value)
    assert "\n" not in str(err.value)
    assert server_policy.events == []  # not one query
    with ResultsStore(tmp_path / "study") as store:
        assert store.rollouts() == []
