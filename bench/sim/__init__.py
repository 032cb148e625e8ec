"""The shared simulator core: MuJoCo world + Gaussian background, Gymnasium envs, tasks, grasping.

Importing this package registers the environments ``splatbench/Cup-v0``,
``splatbench/Tape-v0`` and ``splatbench/Pen-v0`` with Gymnasium (MuJoCo and
the renderer are imported only when an environment is made)::

    import gymnasium, bench.sim
    env = gymnasium.make("splatbench/Cup-v0", scene="scene_dir", obs_mode="state")

Headless rendering: set ``MUJOCO_GL=egl`` (software GL works without a GPU).
MuJoCo reads it once, when ``mujoco`` is first imported; importing this
package first defaults it to ``egl`` when neither ``MUJOCO_GL`` nor
``DISPLAY`` is set.
"""

from __future__ import annotations

import os

if "MUJOCO_GL" not in os.environ and not os.environ.get("DISPLAY"):
    os.environ["MUJOCO_GL"] = "egl"
    os.environ.setdefault("PYOPENGL_PLATFORM", "egl")

import gymnasium  # noqa: E402 - after the GL default above

ENV_IDS = {"cup": "splatbench/Cup-v0", "tape": "splatbench/Tape-v0", "pen": "splatbench/Pen-v0"}


def _register() -> None:
    for task, env_id in ENV_IDS.items():
        if env_id not in gymnasium.registry:
            gymnasium.register(
                id=env_id,
                entry_point="bench.sim.env:SplatBenchEnv",
                kwargs={"task": task},
                disable_env_checker=False,
            )


_register()
import bench.sim.softbody.envs  # noqa: E402,F401 - registers splatbench/Rope-v0 (issue 16)


def make_env(task: str, scene, **kwargs):
    """``gymnasium.make`` by task name ("cup", "tape", "pen")."""
    try:
        env_id = ENV_IDS[task.lower()]
    except KeyError:
        from bench.sim.tasks import get_task

        get_task(task)  # raises the registry's "did you mean" error
        raise
    return gymnasium.make(env_id, scene=scene, **kwargs)


__all__ = ["ENV_IDS", "make_env"]
