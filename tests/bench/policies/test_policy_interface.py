"""The policy interface (bench.policies.base) and Python entry points (bench.policies.entry)."""

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

HERE = Path(__file__).parent
os.environ.setdefault("MUJOCO_GL", "egl")
os.environ.setdefault("PYOPENGL_PLATFORM", "egl")


@pytest.fixture(autouse=True)
def _test_policies_importable(monkeypatch):
    monkeypatch.syspath_prepend(str(HERE))


@pytest.fixture(scope="module")
def scene():
    from bench.scene.sample import make_sample_scene

    return make_sample_scene(seed=0, n_gaussians=3000)


@pytest.fixture(scope="module")
def rgb_env(scene):
    import bench.sim

    env = bench.sim.make_env("cup", scene, image_size=(32, 32), max_frames=40)
    yield env
    env.close()


@pytest.fixture(scope="module")
def state_env(scene):
    import bench.sim

    env = bench.sim.make_env("cup", scene, obs_mode="state", background="none", max_frames=40)
    yield env
    env.close()


def test_policy_observation_fields(rgb_env):
    from bench.policies.base import PROPRIO_DIM, policy_observation

    obs, _ = rgb_env.reset(seed=2)
    pobs = policy_observation(obs, rgb_env, frame=5)
    assert list(pobs["images"]) == ["wrist"]
    image = pobs["images"]["wrist"]
    assert image.dtype == np.uint8 and image.shape == (32, 32, 3)
    assert image is obs["wrist_rgb"]  # the legacy key stays, same array
    assert pobs["proprio"].dtype == np.float32 and pobs["proprio"].shape == (PROPRIO_DIM,)
    assert pobs["prompt"] == "pick up the cup and place it upright on the plate"  # cup.json
    assert pobs["timestamp"] == pytest.approx(0.5)  # frame 5 at 10 Hz


def test_camera_images_takes_every_camera_key():
    from bench.policies.base import camera_images

    left, right = np.zeros((4, 4, 3), np.uint8), np.ones((4, 4, 3), np.uint8)
    images = camera_images({"wrist_right_rgb": right, "wrist_left_rgb": left,
                            "proprio": np.zeros(8, np.float32)})
    assert list(images) == ["wrist_left", "wrist_right"]
    assert images["wrist_right"] is right


@pytest.mark.parametrize("name", ["expert", "noisy-expert", "noisy-expert-8mm",
                                  "noisy-expert-12mm", "random", "hold", "visual-servo",
                                  "visual-glance"])
def test_every_builtin_policy_satisfies_the_protocol(name, rgb_env):
    from bench.policies import POLICIES, Policy, make_policy
    from bench.policies.base import policy_observation, to_env_chunk

    assert name in POLICIES
    policy = make_policy(name, rgb_env, seed=0)
    assert isinstance(policy, Policy)
    policy.reset(seed=1)
    obs, info = rgb_env.reset(seed=1)
    chunk = policy.act(policy_observation(obs, rgb_env), info)
    assert isinstance(chunk, np.ndarray) and chunk.dtype == np.float32
    assert chunk.ndim == 2 and chunk.shape[1] == 7
    assert to_env_chunk(chunk, rgb_env, info).shape == rgb_env.action_space.shape


def test_remote_and_lerobot_are_registered_non_privileged():
    from bench.policies import POLICIES
    from bench.policies.base import is_privileged

    assert not is_privileged("openpi") and not is_privileged("lerobot")
    assert is_privileged("expert") and "openpi" in POLICIES and "lerobot" in POLICIES


def test_to_env_chunk_pads_cuts_and_converts_absolute(state_env):
    from bench.geometry import mat_to_rotvec
    from bench.policies.base import PolicyError, to_env_chunk

    _, info = state_env.reset(seed=0)
    size = state_env.unwrapped.chunk_size
    short = np.full((3, 7), 0.01, np.float32)
    padded = to_env_chunk(short, state_env, info)
    assert padded.shape == (size, 7)
    np.testing.assert_array_equal(padded[:3], short)
    np.testing.assert_array_equal(padded[3:, :6], 0.0)  # hold: no motion
    np.testing.assert_array_equal(padded[3:, 6], np.float32(0.01))  # ... at the last opening
    long = np.zeros((size + 5, 7), np.float32)
    assert to_env_chunk(long, state_env, info).shape == (size, 7)
    # absolute: two world targets 1 cm and 3 cm above the commanded pose -> deltas 1, 2 cm
    target = np.asarray(info["tcp_target"])
    rotvec = mat_to_rotvec(target[:3, :3])
    rows = np.array([[*(target[:3, 3] + [0, 0, 0.01]), *rotvec, 0.05],
                     [*(target[:3, 3] + [0, 0, 0.03]), *rotvec, 0.04]], np.float32)
    delta = to_env_chunk(rows, state_env, info, mode="absolute")
    world_steps = [target[:3, :3] @ delta[i, :3] for i in range(2)]
    np.testing.assert_allclose(world_steps[0], [0, 0, 0.01], atol=1e-5)
    np.testing.assert_allclose(world_steps[1], [0, 0, 0.02], atol=1e-5)
    np.testing.assert_allclose(delta[:2, 3:6], 0.0, atol=1e-5)
    assert delta[1, 6] == pytest.approx(0.04)
    for bad, reason in ((np.zeros((4, 6), np.float32), "shape"),
                        (np.zeros((4, 7), np.int32), "dtype"),
                        (np.full((4, 7), np.nan, np.float32), "NaN"),
                        ([[0.0] * 7], "list")):
        with pytest.raises(PolicyError, match=reason) as err:
            to_env_chunk(bad, state_env, info, source="policy 'p'")
        assert "\n" not in str(err.value) and "policy 'p'" in str(err.value)


# --------------------------------------------------------------------------- entry points


def test_entry_point_builds_a_policy(state_env):
    from bench.policies import Policy, make_policy
    from bench.sim.rollout import run_episode

    policy = make_policy("bench_test_policies:make_servo", state_env, seed=3, chunk=8)
    assert isinstance(policy, Policy) and policy.chunk == 8 and policy.seed == 3
    record, _, _ = run_episode(state_env, policy, init_index=0)
    assert record.status == "ok" and record.frames == 40


@pytest.mark.parametrize(("entry", "message"), [
    ("no_colon_module", "unknown policy"),
    ("bench_test_policies:", "malformed"),
    ("no_such_module_xyz:make", "cannot import 'no_such_module_xyz'"),
    ("bench_test_policies:missing", "has no attribute 'missing'"),
    ("bench_test_policies:NOT_CALLABLE", "is a int, not a callable"),
    ("bench_test_policies:make_strict", "cannot be called as factory"),
    ("bench_test_policies:make_int", "returned int, which is not a Policy"),
    ("bench_test_policies:make_no_act", "missing act"),
])
def test_entry_point_errors_are_one_line(entry, message, state_env):
    from bench.errors import BenchError
    from bench.policies import make_policy

    with pytest.raises((BenchError, ValueError)) as err:
        make_policy(entry, state_env)
    text = str(err.value)
    assert message in text and "\n" not in text
    if ":" in entry:
        assert entry in text  # names the entry point


def test_rollout_cli_accepts_an_entry_point(tmp_path, scene):
    from bench.scene.bundle import save_scene

    save_scene(scene, tmp_path / "room")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(HERE), *sys.path])}
    cmd = [sys.executable, "-m", "bench.cli", "rollout", "--scene", str(tmp_path / "room"),
           "--obs-mode", "state", "--episodes", "1", "--max-frames", "20", "--out"]
    ok = subprocess.run([*cmd, str(tmp_path / "out"), "--policy",
                         "bench_test_policies:make_servo", "--policy-kwargs", '{"chunk": 8}',
                         "--latency-ms", "250", "--controller-gains", "soft"], env=env,
                        capture_output=True, text=True, timeout=300)
    assert ok.returncode == 0, ok.stderr
    import json

    episodes = json.loads((tmp_path / "out" / "episodes.json").read_text())
    first = episodes["episodes"][0] if isinstance(episodes, dict) else episodes[0]
    assert first["status"] == "ok" and first["frames"] == 20
    config = json.loads((tmp_path / "out" / "config.json").read_text())
    assert config["env"]["controller_gains"] == "soft"
    bad = subprocess.run([*cmd, str(tmp_path / "bad"), "--policy", "bench_test_policies:make_int"],
                         env=env, capture_output=True, text=True, timeout=300)
    assert bad.returncode == 2
    lines = [line for line in bad.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and "bench_test_policies:make_int" in lines[0]
    assert not (tmp_path / "bad").exists()
