"""Task files: the shipped Cup/Tape/Pen files reproduce the hard-coded tasks bit for bit.

Golden values: ``golden/tasks_main_a3b63ea.json``, recorded by ``golden/record_golden.py`` on the
code of git main a3b63ea, when Cup/Tape/Pen were TaskSpecs written in Python (before task files
existed), under the reference numerics of ``tests/conftest.py`` (OpenBLAS Haswell kernels, numpy
SIMD up to X86_V3; re-recorded 2026-12-02: the first recording, on an AVX-512 Intel, failed on
AMD CI machines, whose numpy picks other kernels).
"""

import json
from pathlib import Path

import gymnasium
import pytest

import bench.sim
from bench.policies import make_policy

GOLDEN_DIR = Path(__file__).with_name("golden")


def _recorder():
    import importlib.util

    spec = importlib.util.spec_from_file_location("record_golden", GOLDEN_DIR / "record_golden.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def golden():
    return json.loads((GOLDEN_DIR / "tasks_main_a3b63ea.json").read_text())


@pytest.mark.parametrize("task", ["cup", "tape", "pen"])
def test_shipped_task_files_bit_identical_to_main(small_scene, golden, task, reference_numerics):
    rec = _recorder()
    env = gymnasium.make(bench.sim.ENV_IDS[task], scene=small_scene, obs_mode="state")
    assert env.unwrapped.task.source.endswith(f"task_files/{task}.json")
    for name in rec.POLICIES_RUN:
        policy = make_policy(name, env, seed=0)
        for condition in rec.CONDITIONS:
            got = rec.rollout(env, policy, condition)
            want = golden[f"{task}/{name}/{condition}"]
            assert got["digests"] == want["digests"], (task, name, condition)
            assert got["rows"] == want["rows"], (task, name, condition)
            assert (got["success"], got["frame"]) == (want["success"], want["frame"])
    env.close()
    env = gymnasium.make(bench.sim.ENV_IDS[task], scene=small_scene, obs_mode="rgb",
                         image_size=(48, 48), max_frames=24)
    got = rec.rollout(env, make_policy("expert", env, seed=0), 3, images=True)
    env.close()
    assert got["images"] == golden[f"{task}/expert/rgb"]["images"]
    assert got["digests"] == golden[f"{task}/expert/rgb"]["digests"]


def test_file_path_gives_the_same_rollout_as_the_registry_name(small_scene, golden,
                                                              reference_numerics):
    rec = _recorder()
    path = Path(bench.sim.__file__).with_name("task_files") / "tape.json"
    env = bench.sim.make_env(str(path), small_scene, obs_mode="state")
    got = rec.rollout(env, make_policy("expert", env, seed=0), 0)
    assert got["digests"] == golden["tape/expert/0"]["digests"]
    env.close()
