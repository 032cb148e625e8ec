"""A study against a kit policy server: unknown reply keys kept with the rollout record
(``policy_replies``, ``tables/policy_replies.csv``; ``rollouts.csv`` unchanged) and a server
whose capabilities the task cannot meet refused by the preflight, before ``--out`` exists."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import warnings

import numpy as np
import pytest

from bench.errors import BenchError

os.environ.setdefault("MUJOCO_GL", "egl")
os.environ.setdefault("PYOPENGL_PLATFORM", "egl")


class Debugging:
    """A kit policy: a hold chunk (zeros, 8 cm opening) plus, optionally, a newer server's
    extra reply key ``debug`` naming the episode and query, with a numpy array.

    ``queries`` (episode id -> queries answered) may be shared by the instances a server
    builds per connection (a vector run holds one connection per sub-env)."""

    def __init__(self, *, extras: bool, queries: dict[int, int] | None = None) -> None:
        self.extras = extras
        self.episode = -1
        self.queries = {} if queries is None else queries

    def on_episode_start(self, experiment, task, episode_id):
        self.episode = int(episode_id)
        self.queries[self.episode] = 0

    def on_episode_end(self, success):
        pass

    def infer(self, obs):
        query = self.queries[self.episode]
        self.queries[self.episode] = query + 1
        actions = np.zeros((16, 7), np.float32)
        actions[:, 6] = 0.08
        reply = {"actions": actions}
        if self.extras:
            reply["debug"] = {"episode": self.episode, "query": query,
                              "scores": np.array([query, 0.5], np.float32)}
        return reply


@pytest.fixture
def kit():
    """``kit(policy, capabilities) -> port`` of an in-thread kit server (stopped after)."""
    from splatserve.server import PolicyServer

    servers = []

    def start(policy, capabilities, factory=None):
        server = PolicyServer(policy, factory=factory, capabilities=capabilities, log=None)
        servers.append(server)
        return server.start("127.0.0.1", 0)

    yield start
    for server in servers:
        server.shutdown()


def _caps(**kw):
    from splatserve.capabilities import Camera, Capabilities

    return Capabilities(**{"cameras": {"wrist": Camera(key="obs/wrist", size=(16, 16))}, **kw})


def _spec(port: int, name: str = "served"):
    from bench.study.spec import spec_from_dict

    served = {"factory": "openpi", "name": "served",
              "kwargs": {"port": port, "retries": 0, "timeout_s": 20}}
    return spec_from_dict({
        "name": name, "sample_scenes": {"a": 0}, "sample_gaussians": 3000,
        "conditions": ["clean"], "tasks": ["cup"], "policies": {"cup": [served, "hold"]},
        "trials": 2, "real_trials": 1, "max_frames": 40, "metrics": ["psnr"],
        "image_size": [24, 24]})


def test_reply_extras_are_stored_with_the_rollout_and_rollouts_csv_keeps_its_bytes(kit, tmp_path):
    """Serial run, a vector run (3 sub-envs: served trial 1 runs on sub-env 2) and a server
    without extras: the same rollouts.csv bytes; the replies stored per query (~25 s)."""
    from bench.study.executors import ExecutorConfig
    from bench.study.plan import init_index
    from bench.study.runner import run_study
    from bench.study.store import ResultsStore

    with_extras, plain = Debugging(extras=True), Debugging(extras=False)
    run_study(_spec(kit(with_extras, _caps())), tmp_path / "extras", progress=False)
    run_study(_spec(kit(plain, _caps())), tmp_path / "plain", progress=False)
    vector = {}
    port = kit(None, _caps(), factory=lambda: Debugging(extras=True, queries=vector))
    run_study(_spec(port), tmp_path / "vector", progress=False,
              executor=ExecutorConfig(envs_per_worker=3))

    with ResultsStore(tmp_path / "extras") as store:
        replies = store.policy_replies()
        served = [r.key for r in store.rollouts() if r.policy == "served"]
    # one row per query of every served rollout (the in-process "hold" sends no replies),
    # each the server's own extra key as JSON (numpy array -> list), in query order
    assert len(served) == 3 and with_extras.queries
    expected = []
    for key in sorted(served):
        episode = init_index(_spec(0), key[5], key[6], key[2])
        expected += [(*key, q, json.dumps({"debug": {"episode": episode, "query": q,
                                                     "scores": [float(q), 0.5]}},
                                          sort_keys=True, separators=(",", ":")))
                     for q in range(with_extras.queries[episode])]
    got = [tuple(r.values()) for r in replies]
    assert got == expected and len(got) >= 6  # 40 frames / 16 executed rows: 3 queries each

    table = (tmp_path / "extras" / "tables" / "policy_replies.csv").read_text()
    assert table.splitlines()[0] == ("study,scene,condition,task,policy,domain,trial,query,"
                                     "extras")
    assert len(table.splitlines()) == len(expected) + 1
    # nothing else moves: the same rollouts.csv bytes, and no empty replies table
    assert (tmp_path / "extras" / "tables" / "rollouts.csv").read_bytes() == \
        (tmp_path / "plain" / "tables" / "rollouts.csv").read_bytes()
    assert not (tmp_path / "plain" / "tables" / "policy_replies.csv").exists()
    with ResultsStore(tmp_path / "plain") as store:
        assert store.policy_replies() == []
    assert vector == with_extras.queries
    assert (tmp_path / "vector" / "tables" / "policy_replies.csv").read_text() == table
    assert (tmp_path / "vector" / "tables" / "rollouts.csv").read_bytes() == \
        (tmp_path / "plain" / "tables" / "rollouts.csv").read_bytes()


def test_server_whose_cameras_the_task_lacks_is_refused_before_out_exists(kit, tmp_path):
    from splatserve.capabilities import Camera

    caps = _caps(cameras={"exterior": Camera(key="obs/exterior", size=(16, 16))})
    port = kit(Debugging(extras=False), caps)
    spec = tmp_path / "spec.json"
    spec.write_text(json.dumps(_spec(port).to_json()))
    out = tmp_path / "out"
    result = subprocess.run([sys.executable, "-m", "bench.cli", "study", "run", "--spec",
                             str(spec), "--out", str(out)], capture_output=True, text=True,
                            timeout=300)
    assert result.returncode == 2, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in result.stderr
    assert "policy 'served' of task 'cup'" in lines[0]
    assert "wants camera(s) {'exterior': 'obs/exterior'}" in lines[0]
    assert "gives ['wrist']" in lines[0]
    assert not out.exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["spec.json"]


def test_server_with_a_joint_action_layout_is_refused_and_unreachable_one_warned(kit, tmp_path):
    from bench.study.preflight import PolicyServerWarning, check_policy_servers, check_study

    joints = _caps(action_layout=("j1", "j2", "j3", "j4", "j5", "j6", "j7", "gripper"))
    out = tmp_path / "out"
    with pytest.raises(BenchError) as err:
        check_study(_spec(kit(Debugging(extras=False), joints)), out)
    message = str(err.value)
    assert "\n" not in message and "policy 'served' of task 'cup'" in message
    assert "is not an end-effector action" in message and not out.exists()
    # a server the task's rig suits passes; one that does not answer now is warned about
    assert check_policy_servers(_spec(kit(Debugging(extras=False), _caps()))) == 1
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        closed = s.getsockname()[1]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert check_policy_servers(_spec(closed)) == 1
    assert [w.category for w in caught] == [PolicyServerWarning]
    assert "does not answer now" in str(caught[0].message)


def test_reply_rows_are_plain_sorted_json_and_bounded():
    from bench.study.store import MAX_REPLY_EXTRAS_BYTES, reply_rows

    rows = reply_rows([{}, {"b": np.arange(2, dtype=np.int16), "a": b"\x01\xff",
                            "c": float("nan"), "d": np.float32(0.25)},
                       {"big": np.zeros(MAX_REPLY_EXTRAS_BYTES // 2)}])
    assert rows[0] == (1, '{"a":"01ff","b":[0,1],"c":"nan","d":0.25}')
    assert rows[1][0] == 2 and json.loads(rows[1][1])["__omitted_bytes__"] > \
        MAX_REPLY_EXTRAS_BYTES
    assert len(rows) == 2  # a query without extras gives no row
