"""The shared simulator core: MuJoCo world + Gaussian background, Gymnasium envs, tasks, grasping.

Importing this package registers the environments ``splatbench/Cup-v0``,
``splatbench/Tape-v0`` and ``splatbench/Pen-v0`` (the shipped task files),
``splatbench/Rope-v0`` (the deformable rope, :mod:`bench.sim.softbody.rope`) and
``splatbench/Task-v0`` (any task file) with Gymnasium (MuJoCo and the renderer
are imported only when an environment is made)::

    import gymnasium, bench.sim
    env = gymnasium.make("splatbench/Cup-v0", scene="scene_dir", obs_mode="state")
    env = bench.sim.make_env("my_task.json", "scene_dir", robot="arm6", cameras="yubi-dual")

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
TASK_ENV_ID = "splatbench/Task-v0"  # any task file: gymnasium.make(TASK_ENV_ID, task=PATH, ...)


def _register() -> None:
    for task, env_id in ENV_IDS.items():
        if env_id not in gymnasium.registry:
            gymnasium.register(
                id=env_id,
                entry_point="bench.sim.env:SplatBenchEnv",
                kwargs={"task": task},
                disable_env_checker=False,
            )
    if TASK_ENV_ID not in gymnasium.registry:
        gymnasium.register(
            id=TASK_ENV_ID, entry_point="bench.sim.env:SplatBenchEnv", disable_env_checker=False
        )


_register()
import bench.sim.softbody.envs  # noqa: E402,F401 - registers splatbench/Rope-v0 (issue 16)


def make_env(task, scene, **kwargs):
    """``gymnasium.make`` by task name, task-file path or :class:`~bench.sim.task_spec.TaskSpec`.

    ``task``: "cup" / "tape" / "pen" / "rope" (their own env ids; the rope's kwargs are
    checked by :class:`bench.sim.softbody.rope.RopeEnv`), a ``.json`` / ``.toml`` task file,
    a bundle task name (``<scene>/tasks/NAME.json``) or a TaskSpec (``splatbench/Task-v0``).
    """
    if isinstance(task, str) and task.lower() in ENV_IDS:
        return gymnasium.make(ENV_IDS[task.lower()], scene=scene, **kwargs)
    if isinstance(task, str) and task.lower() in bench.sim.softbody.envs.SOFTBODY_ENV_IDS:
        return gymnasium.make(bench.sim.softbody.envs.SOFTBODY_ENV_IDS[task.lower()],
                              scene=scene, **kwargs)
    from bench.sim.task_spec import TaskSpec
    from bench.sim.tasks import get_task, is_task_file

    if not isinstance(task, TaskSpec) and not is_task_file(task):
        root = getattr(scene, "root", None) if not isinstance(scene, str) else scene
        get_task(task, scene_root=root)  # the registry's "did you mean" or the bundle's file
    return gymnasium.make(TASK_ENV_ID, task=task, scene=scene, **kwargs)


__all__ = ["ENV_IDS", "TASK_ENV_ID", "make_env"]
