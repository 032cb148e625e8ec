"""The rope-routing task's metadata (light: no MuJoCo or Warp), registered as task ``rope``.

:data:`bench.sim.tasks.TASKS` holds :data:`ROPE_TASK` under ``"rope"`` with
``kind="deformable"`` and ``env_id="splatbench/Rope-v0"``, so the study spec,
``bench.sim.make_env("rope", scene)`` and ``bench rollout --task rope`` resolve it like
Cup/Tape/Pen. The world, success rule and expert live in :mod:`bench.sim.softbody.rope`.
"""

from __future__ import annotations

from dataclasses import dataclass

from bench.sim.task_spec import InitGrid

#: Rope centre (x, y) and yaw in the table frame; the same grid in every study condition,
#: so condition ``i`` of a clean and of a damaged scene start from the same rope (paired).
ROPE_GRID = InitGrid(xs=(-0.04, 0.0, 0.04), ys=(-0.10, -0.08), yaws_deg=(-10.0, 0.0, 10.0))
ROPE_ENV_ID = "splatbench/Rope-v0"
#: Names of the tracked rope points in the state stream (``info["frame_states"]``).
ROPE_STATE_OBJECTS = ("rope_end", "rope_middle", "rope_far_end")
#: Built-in policies that run on the rope (the rigid experts and the colour-tracking
#: visual policies read cup/tape/pen state and cannot).
ROPE_POLICIES = ("rope-expert", "rope-expert-hasty", "hold", "random")


@dataclass(frozen=True)
class RopeTask:
    """Task metadata read by :func:`bench.sim.rollout.run_episode`, manifests and the CLI.

    Attributes:
        name: Registry key.
        description: The language instruction.
        chunk_size: Actions a policy returns per query.
        execute: Actions executed per query.
        max_frames: Time limit in 10 Hz frames.
        grid: Initial rope (x, y, yaw) in the table frame.
        env_id: The Gymnasium id :func:`bench.sim.make_env` builds.
        kind: "deformable" (rigid tasks are :class:`bench.sim.task_spec.TaskSpec`).
    """

    name: str = "rope"
    description: str = "grasp the rope near one end and route it between the clip's posts"
    chunk_size: int = 32
    execute: int = 8
    max_frames: int = 600
    grid: InitGrid = ROPE_GRID
    env_id: str = ROPE_ENV_ID
    kind: str = "deformable"
    state_objects: tuple[str, ...] = ROPE_STATE_OBJECTS
    policies: tuple[str, ...] = ROPE_POLICIES

    @property
    def instruction(self) -> str:
        """The language instruction a policy receives (as TaskSpec.instruction)."""
        return self.description


ROPE_TASK = RopeTask()
