"""Deployment fidelity: asynchronous execution with latency, EE gain profiles, shadows."""

import math
import os

import numpy as np
import pytest

os.environ.setdefault("MUJOCO_GL", "egl")
os.environ.setdefault("PYOPENGL_PLATFORM", "egl")

OPEN = 0.11
STEP = 0.0002  # metres per row index


class Scripted:
    """Query 1 (the second) asks for a ramp along the tool x axis (horizontal in the top-down
    start pose): row i moves 0.2 mm * (i + 1); every other query holds."""

    name = "scripted"

    def __init__(self, chunk=32):
        self.chunk = chunk

    def reset(self, *, seed=None):
        self.query_frames = []

    def act(self, obs, info):
        self.query_frames.append(int(info["frame"]))
        rows = np.zeros((self.chunk, 7), np.float32)
        rows[:, 6] = OPEN
        if len(self.query_frames) == 2:
            rows[:, 0] = STEP * (np.arange(self.chunk) + 1)
        return rows


@pytest.fixture(scope="module")
def scene():
    from bench.scene.sample import make_sample_scene

    return make_sample_scene(seed=0, n_gaussians=3000)


def _env(scene, **kw):
    import bench.sim

    return bench.sim.make_env("cup", scene, obs_mode="state", background="none", **kw)


@pytest.mark.parametrize("latency_ms", [0.0, 250.0, 300.0, 2000.0])
def test_latency_takes_effect_exactly_ceil_l_over_frame_time_later(scene, latency_ms):
    from bench.sim.rollout import Execution, run_episode

    env = _env(scene, max_frames=80)
    frame_ms = 1000.0 / env.unwrapped.config.control_hz
    execute = env.unwrapped.execute
    k = math.ceil(latency_ms / frame_ms)
    assert k == {0.0: 0, 250.0: 3, 300.0: 3, 2000.0: 20}[latency_ms]
    policy, states = Scripted(), []
    run_episode(env, policy, init_index=0, states=states,
                execution=Execution("async", latency_ms))
    env.close()
    period = max(execute, k)
    assert policy.query_frames[:3] == [0, period, 2 * period]
    xy = np.array([row.ee_pose[:2] for row in states])
    z = np.linalg.norm(xy - xy[0], axis=1)  # distance travelled from the start
    assert [row.frame for row in states] == list(range(len(states)))
    t = policy.query_frames[1]  # the ramp is issued at frame t ...
    steps = np.diff(z)
    moving = np.flatnonzero(steps > STEP / 2)
    assert moving[0] == t + k  # ... and first moves the robot in frame t + k -> t + k + 1
    assert np.all(np.abs(steps[:t + k]) < 1e-5)
    # it executes rows k .. period + k - 1 of the ramp (the rows meant for those frames): rows
    # k .. period - 1 at once, then rows period .. period + k - 1 while the next query thinks;
    # a chunk run out (32 rows) holds the last target
    expected = sum(STEP * (i + 1) for i in range(k, min(period + k, policy.chunk)))
    assert z[-1] - z[t] == pytest.approx(expected, abs=1e-3)


def test_async_with_zero_latency_equals_blocking_bit_for_bit(scene):
    from bench.policies import make_policy
    from bench.sim.rollout import Execution, run_episode

    env = _env(scene, max_frames=120)
    runs = []
    for execution in (None, Execution("async", 0.0)):
        states = []
        record, _, _ = run_episode(env, make_policy("noisy-expert", env, seed=2), init_index=4,
                                   states=states, execution=execution)
        runs.append((record, states))
    env.close()
    assert runs[0][0] == runs[1][0] and runs[0][1] == runs[1][1]


def test_latency_changes_an_expert_rollout_deterministically(scene):
    from bench.policies import make_policy
    from bench.sim.rollout import Execution, run_episode

    env = _env(scene, max_frames=200)
    out = []
    for latency in (0.0, 450.0, 450.0):
        states = []
        run_episode(env, make_policy("expert", env), init_index=1, states=states,
                    execution=Execution("async", latency))
        out.append(states)
    env.close()
    assert out[1] == out[2] and out[0] != out[1]


def _tracking_error_mm(scene, **gains) -> float:
    env = _env(scene, control="single", max_frames=40, **gains)
    obs, info = env.reset(seed=0)
    errors = []
    for i in range(30):
        action = np.zeros(7, np.float32)
        action[0] = 0.03 if i < 15 else -0.03
        action[2], action[6] = 0.01, OPEN
        obs, _, _, _, info = env.step(action)
        errors.append(np.linalg.norm(info["tcp_target"][:3, 3] - obs["proprio"][:3]))
    env.close()
    return 1000.0 * float(np.mean(errors))


def test_gain_profiles_order_the_tracking_error(scene):
    stiff = _tracking_error_mm(scene, controller_gains="stiff")
    default = _tracking_error_mm(scene)
    soft = _tracking_error_mm(scene, controller_gains="soft")
    assert stiff < default < soft
    # the stock (time constant 0.004 s, ratio 1) weld in direct form: kp = 1/0.004^2, kd = 2/0.004
    custom = _tracking_error_mm(scene, controller_gains="custom", controller_kp=62500.0,
                                controller_kd=500.0)
    assert custom == pytest.approx(default, rel=1e-9)


def test_gain_config_is_validated():
    from bench.sim.config import EnvConfig

    for bad in ({"controller_gains": "wobbly"}, {"controller_gains": "custom"},
                {"controller_kp": 1e4, "controller_kd": 10.0},
                {"controller_gains": "custom", "controller_kp": 1e6, "controller_kd": 10.0}):
        with pytest.raises(ValueError):
            EnvConfig(**bad)


def test_shadows_flag_changes_only_the_mujoco_layer(scene):
    import bench.sim

    images = {}
    for shadows in (False, True):
        env = bench.sim.make_env("cup", scene, image_size=(48, 48), background="none",
                                 shadows=shadows)
        obs, _ = env.reset(seed=0)
        images[shadows] = obs["wrist_rgb"].astype(int)
        env.close()
    diff = np.abs(images[True] - images[False])
    assert diff.max() > 0  # shadows drawn
    assert (images[True] <= images[False] + 1).all()  # a shadow only darkens


def test_measured_p50_latency_drives_async_execution(scene):
    import time

    from bench.study.deployment import Deployment, measure_latency_ms

    class Slow(Scripted):
        def act(self, obs, info):
            time.sleep(0.03)
            return super().act(obs, info)

    env = _env(scene, max_frames=20)
    measured = measure_latency_ms(env, Slow(), init_index=0)
    env.close()
    assert 30.0 <= measured < 300.0  # 30 ms sleep plus the (shared-machine) call overhead
    deployment = Deployment.from_dict({"execution": "async", "latency_ms": "p50"})
    execution = deployment.execution_for(measured)
    assert execution.mode == "async" and execution.latency_ms == measured
    assert execution.delay_frames(0.1) == math.ceil(measured / 100.0)
    fixed = Deployment.from_dict({"execution": "async", "latency_ms": 87})
    assert fixed.execution_for().delay_frames(0.1) == 1  # pi0.5's 87 ms -> one 10 Hz frame
    assert Deployment().execution_for().mode == "blocking"
