"""Gymnasium contract, determinism both ways, grid, bad inputs and failure endings."""

import gymnasium
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env

import bench.sim
from bench.errors import BenchError
from bench.sim.task_spec import InitGrid
from bench.sim.tasks import TASKS

# proprio / object-state boxes are unbounded by nature; the checker only warns about that
pytestmark = pytest.mark.filterwarnings("ignore:.*Box observation space m.*:UserWarning")


def make(scene, task="cup", **kwargs):
    kwargs.setdefault("obs_mode", "state")
    return gymnasium.make(bench.sim.ENV_IDS[task], scene=scene, **kwargs)


@pytest.mark.parametrize("task", ["cup", "tape", "pen"])
def test_registered_env_passes_gymnasium_checker(small_scene, task):
    env = make(small_scene, task)
    check_env(env.unwrapped, skip_render_check=True)
    assert env.action_space.shape == (32, 7)
    env.close()


def test_single_step_interface(small_scene):
    env = make(small_scene, control="single")
    assert env.action_space.shape == (7,)
    obs, info = env.reset(seed=0)
    obs, reward, terminated, truncated, info = env.step(np.array([0, 0, -0.01, 0, 0, 0, 0.11]))
    assert info["frame"] == 1 and info["frames_executed"] == 1
    # dz = -0.01 along the tool z axis, which points down (home TCP at 0.25 m): 1 cm up
    assert info["tcp_target"][2, 3] == pytest.approx(0.26, abs=1e-9)


def test_chunk_executes_first_rows_and_time_limit(small_scene):
    env = make(small_scene, execute=4, max_frames=10)
    env.reset(seed=0)
    hold = np.zeros((32, 7), np.float32)
    hold[:, 6] = 0.11
    _, _, term, trunc, info = env.step(hold)
    assert info["frames_executed"] == 4 and not (term or trunc)
    env.step(hold)
    _, _, term, trunc, info = env.step(hold)  # only 2 frames left before the limit
    assert info["frames_executed"] == 2 and info["frame"] == 10 and trunc and not term


def test_grid_is_latin_and_deterministic():
    grid = TASKS.get("cup").grid
    first = [grid.condition(i) for i in range(20)]
    assert len({(x, y) for x, y, _ in first}) == 20  # every position once
    assert len({round(yaw, 6) for _, _, yaw in first}) == 4  # every yaw already
    assert len({grid.condition(i) for i in range(grid.size)}) == grid.size
    assert grid.condition(123) == grid.condition(123)  # beyond the grid: pure function of i
    with pytest.raises(ValueError):
        grid.condition(-1)
    assert InitGrid((0.0,), (0.0,), (0.0,)).size == 1


def _rollout(env, seed, actions, qstate):
    obs, info = env.reset(seed=seed)
    states, images = [qstate(env)], [obs.get("wrist_rgb")]
    for action in actions:
        obs, *_ = env.step(action)
        states.append(qstate(env))
        images.append(obs.get("wrist_rgb"))
    return states, images


def test_determinism_same_seed_same_states_and_images(small_scene, qstate):
    env = make(small_scene, obs_mode="rgb", image_size=(48, 48), execute=4)
    rng = np.random.default_rng(0)
    actions = [rng.uniform(env.action_space.low, env.action_space.high) for _ in range(3)]
    s1, i1 = _rollout(env, 5, actions, qstate)
    s2, i2 = _rollout(env, 5, actions, qstate)
    env.close()
    env2 = make(small_scene, obs_mode="rgb", image_size=(48, 48), execute=4)  # fresh instance
    s3, i3 = _rollout(env2, 5, actions, qstate)
    env2.close()
    for a, b, c in zip(s1, s2, s3, strict=True):
        np.testing.assert_array_equal(a, b)
        np.testing.assert_array_equal(a, c)
    for a, b, c in zip(i1, i2, i3, strict=True):
        assert a.dtype == np.uint8 and a.shape == (48, 48, 3)
        np.testing.assert_array_equal(a, b)
        np.testing.assert_array_equal(a, c)


def test_different_seeds_give_different_initial_states(small_scene, qstate):
    env = make(small_scene)
    starts = []
    for seed in (0, 1, 2, 80, 81):
        env.reset(seed=seed)
        starts.append(qstate(env))
    for i in range(len(starts)):
        for j in range(i + 1, len(starts)):
            assert not np.array_equal(starts[i], starts[j])
    env.reset(options={"condition": 1})
    np.testing.assert_array_equal(qstate(env), starts[1])


@pytest.mark.parametrize(
    "bad, message",
    [
        (np.zeros((16, 7)), "expected (32, 7)"),
        (np.zeros(7), "expected (32, 7)"),
        (np.full((32, 7), np.nan), "NaN"),
        ("left", "numeric"),
    ],
)
def test_bad_actions_raise_clear_errors(small_scene, bad, message):
    env = make(small_scene)
    env.reset(seed=0)
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(")", r"\)")):
        env.step(bad)


def test_scene_without_table_is_refused(small_scene):
    with pytest.raises(BenchError, match="no table spec"):
        make(small_scene.replace(table=None))


def test_registration_that_moves_the_table_out_of_view_is_refused(small_scene):
    shifted = small_scene.background.replace(means=small_scene.background.means + [0.0, 0.0, 1.5])
    with pytest.raises(BenchError, match="table out of view"):
        make(small_scene.with_background(shifted))
    make(small_scene.with_background(shifted), min_table_gaussians=0).close()  # check disabled


def test_table_too_small_is_refused(small_scene):
    from bench.scene.bundle import TableSpec

    with pytest.raises(BenchError, match="too small"):
        make(small_scene.replace(table=TableSpec(size=(0.3, 0.3))), min_table_gaussians=0)


def _teleport(env, name, pos):
    world = env.unwrapped.world
    adr = world._object_qpos[name]
    world.data.qpos[adr : adr + 3] = pos
    world.data.qvel[:] = 0


@pytest.mark.parametrize(
    "pos, reason",
    [
        ((0.0, -0.2, -0.2), "fell_through_table:cup"),
        ((2.0, 0.0, 0.05), "left_workspace:cup"),
    ],
)
def test_object_lost_ends_episode_as_failure(small_scene, pos, reason):
    env = make(small_scene, control="single")
    env.reset(seed=0)
    _teleport(env, "cup", pos)
    _, _, terminated, truncated, info = env.step(np.array([0, 0, 0, 0, 0, 0, 0.11]))
    assert terminated and not truncated and not info["success"]
    assert info["failure"] == reason


def test_table_yaw_and_offset_move_the_layout(small_scene):
    from bench.scene.bundle import TableSpec

    env = make(small_scene, min_table_gaussians=0)
    env.reset(seed=0)
    base = env.unwrapped.world.task_state().objects["plate"].pos
    table = TableSpec(center=(0.3, -0.1), size=(1.2, 0.8), yaw_deg=90.0, height=0.05)
    env2 = make(small_scene.replace(table=table), min_table_gaussians=0)
    env2.reset(seed=0)
    moved = env2.unwrapped.world.task_state().objects["plate"].pos
    # plate at table-frame (0, 0.14): yaw 90 maps it to world (0.3 - 0.14, -0.1)
    np.testing.assert_allclose(base[:2], [0.0, 0.14], atol=2e-3)
    np.testing.assert_allclose(moved, [0.16, -0.1, 0.05 + 0.006], atol=2e-3)


def test_rgb_env_passes_gymnasium_checker(small_scene):
    env = make(
        small_scene,
        obs_mode="rgb",
        image_size=(24, 32),
        render_mode="rgb_array",
        exterior_size=(24, 32),
    )
    check_env(env.unwrapped)
    obs, _ = env.reset(seed=0)
    assert obs["wrist_rgb"].shape == (24, 32, 3)
    assert env.render().shape == (24, 32, 3)
    env.close()


def test_robot_is_pluggable(small_scene):
    from bench.sim.robot import FloatingGripper, GripperConfig, Robot

    robot = FloatingGripper(GripperConfig(max_opening=0.09))
    assert isinstance(robot, Robot)
    env = make(small_scene, robot=robot, control="single")
    assert env.action_space.high[6] == pytest.approx(0.09)
    _, info = env.reset(seed=0)
    assert info["grasp"]["opening"] == pytest.approx(0.09, abs=1e-3)


def test_make_env_by_task_name(small_scene):
    env = bench.sim.make_env("Tape", small_scene, obs_mode="state")
    assert env.unwrapped.task.name == "tape" and env.unwrapped.execute == 8
    with pytest.raises(ValueError, match="did you mean"):
        bench.sim.make_env("tapee", small_scene)


def test_background_edit_changes_images_but_not_physics(small_scene, qstate):
    """Paired conditions: only the background differs, so physics must stay bit-identical."""
    bg = small_scene.background
    keep = bg.means[:, 2] < 1.0  # drop everything above 1 m (ceiling, upper walls): a big hole
    damaged = small_scene.with_background(bg.subset(np.flatnonzero(keep)))
    rng = np.random.default_rng(1)
    runs = []
    for scene in (small_scene, damaged):
        env = make(scene, obs_mode="rgb", image_size=(48, 48), execute=4)
        env.reset(seed=9)
        runs.append([])
        for _ in range(3):
            action = np.random.default_rng(rng.integers(1 << 30)).uniform(
                env.action_space.low, env.action_space.high
            )
            obs, *_ = env.step(action)
            runs[-1].append((qstate(env), obs["wrist_rgb"]))
        env.close()
        rng = np.random.default_rng(1)  # same action sequence for the second scene
    for (state_a, image_a), (state_b, image_b) in zip(*runs, strict=True):
        np.testing.assert_array_equal(state_a, state_b)
        assert not np.array_equal(image_a, image_b)
