import os

import numpy as np
import pytest

os.environ.setdefault("MUJOCO_GL", "egl")
os.environ.setdefault("PYOPENGL_PLATFORM", "egl")


@pytest.fixture(scope="session")
def small_scene():
    """The procedural sample room with few Gaussians (fast to render)."""
    from bench.scene.sample import make_sample_scene

    return make_sample_scene(seed=0, n_gaussians=6000)


@pytest.fixture(scope="session")
def scene_dir(tmp_path_factory, small_scene):
    from bench.scene.bundle import save_scene

    path = tmp_path_factory.mktemp("scene") / "room"
    save_scene(small_scene, path)
    return path


@pytest.fixture
def qstate():
    """Full physical state (qpos, qvel, mocap, equality activity, time) of an env as one array."""

    def read(env):
        data = env.unwrapped.world.data
        return np.concatenate(
            [
                data.qpos,
                data.qvel,
                data.mocap_pos.ravel(),
                data.mocap_quat.ravel(),
                data.eq_active.astype(float),
                [data.time],
            ]
        )

    return read
