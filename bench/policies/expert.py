"""Scripted pick-and-place experts that read privileged state (``info["state"]``).

The expert is a pure function of the current state plus its own rollout of the
commanded TCP target inside a chunk: at each query it re-derives the phase from
(attached?, commanded opening, where the target is relative to the grasp and
place poses), then plans ``chunk_size`` rows open-loop, predicting only its own
target motion. Re-deriving the phase at every query makes it robust to
``execute < chunk_size`` and to missed grasps (it reopens, backs up and retries).

Phases: move above the actor at approach height (rotating to the grasp yaw),
descend, close, lift to carry height, move above the receptacle (rotating so a
pen lies along the box), descend, open, retreat. Yaws are taken modulo pi (the
jaw is symmetric).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from bench.geometry import mat_to_rotvec, pose, top_down_mat, wrap_angle
from bench.policies.base import POLICIES
from bench.sim.objects import OpenBox, Pen
from bench.sim.state import TaskState


@dataclass(frozen=True)
class ExpertConfig:
    """Expert tuning (metres, radians, frames).

    Attributes:
        speed: Largest TCP translation per frame, m.
        turn: Largest yaw change per frame, rad.
        approach_clearance: Height of the pre-grasp pose above the grasp pose, m.
        carry_height: TCP height above the table while carrying, m.
        xy_tolerance: Horizontal error accepted before descending, m.
        z_tolerance: Vertical error accepted at the grasp/place pose, m.
        yaw_tolerance: Yaw error accepted before descending, rad.
        release_clearance: Gap between the actor's underside and its support at release, m.
        close_patience: Frames to keep closing without a grasp before reopening to retry.
    """

    speed: float = 0.03
    turn: float = 0.2
    approach_clearance: float = 0.08
    carry_height: float = 0.2
    xy_tolerance: float = 0.006
    z_tolerance: float = 0.004
    yaw_tolerance: float = 0.04
    release_clearance: float = 0.012
    close_patience: int = 15


def _yaw_of(rotation: np.ndarray) -> float:
    """Yaw of a top-down tool frame (direction of its finger axis x)."""
    return float(np.arctan2(rotation[1, 0], rotation[0, 0]))


def _closest_mod_pi(desired: float, current: float) -> float:
    """``desired + k pi`` closest to ``current`` (symmetric jaw)."""
    return current + wrap_angle(2 * (desired - current)) / 2


def _object_yaw(quat: np.ndarray) -> float:
    w, x, y, z = quat
    return float(np.arctan2(2 * (w * z + x * y), 1 - 2 * (y * y + z * z)))


class ScriptedExpert:
    """Privileged expert for the Cup, Tape and Pen tasks.

    Args:
        env: The (unwrapped) :class:`~bench.sim.env.SplatBenchEnv`.
        seed: Unused by the clean expert (kept for the common policy signature).
        config: Tuning.
    """

    name = "expert"

    def __init__(self, env: Any, *, seed: int = 0, config: ExpertConfig | None = None) -> None:
        self.env = env
        self.config = config or ExpertConfig()
        self.task = env.task
        self.table_height = env.table.height
        self.max_opening = env.world.robot.max_opening
        self.chunk_size = env.chunk_size if env.config.control == "chunk" else 1
        self.seed = seed
        self._close_start: int | None = None  # env frame of the pending close command

    def reset(self, *, seed: int | None = None) -> None:
        """Start an episode: forget any pending gripper close."""
        self._close_start = None

    # -- planning -------------------------------------------------------------------------
    def act(  # -> [chunk_size, 7] or [7]
        self, obs: dict[str, np.ndarray], info: dict[str, Any]
    ) -> np.ndarray:
        """Next actions, float32 [chunk_size, 7] (or [7]): TCP delta xyz, rotvec, opening."""
        state: TaskState = info["state"]
        target = np.asarray(info["tcp_target"], dtype=np.float64)
        opening = float(info["grasp"]["commanded_opening"])
        actor = state.objects[self.task.actor.name]
        # actor pose in the tool frame now: rigid while held, used to predict placing
        self._held_offset = target[:3, :3].T @ (actor.pos - target[:3, 3])
        self._held_rel_yaw = _object_yaw(actor.quat) - _yaw_of(target[:3, :3])
        first_frame = int(info["frame"])
        rows = []
        for k in range(self.chunk_size):
            goal, opening = self._next(state, target, opening, first_frame + k)
            delta = np.linalg.inv(target) @ goal
            rows.append(np.concatenate([delta[:3, 3], mat_to_rotvec(delta[:3, :3]), [opening]]))
            target = goal
        chunk = np.asarray(rows, dtype=np.float32)
        return chunk if self.env.config.control == "chunk" else chunk[0]

    def _next(
        self, state: TaskState, target: np.ndarray, opening: float, frame: int
    ) -> tuple[np.ndarray, float]:
        """One frame (absolute env frame ``frame``): the next TCP target and opening command."""
        cfg = self.config
        actor = state.objects[self.task.actor.name]
        yaw = _yaw_of(target[:3, :3])
        xyz = target[:3, 3]
        is_open = opening >= 0.9 * self.max_opening
        if is_open or state.attached is not None:
            self._close_start = None
        if state.attached is not None or (not is_open and state.held(self.task.actor.name)):
            place_xyz, place_yaw = self._place_pose(state, target)
            if self._at(xyz, yaw, place_xyz, place_yaw):  # release, opening just wide enough
                return target, self._release_opening()
            return self._move(xyz, yaw, place_xyz, place_yaw), opening
        if self._placed(state):
            retreat = np.array([xyz[0], xyz[1], self.table_height + cfg.carry_height])
            return self._step_towards(xyz, yaw, retreat, yaw), self._release_opening()
        if not is_open:  # closing without a grasp yet: wait, or give up and reopen
            if self._close_start is None:
                self._close_start = frame
            if state.opening < 0.004 or frame - self._close_start > cfg.close_patience:
                return target, self.max_opening
            return target, 0.0
        grasp_xyz = np.array(
            [actor.pos[0], actor.pos[1], self.table_height + self.task.grasp_height]
        )
        grasp_yaw = self._grasp_yaw(state, yaw)
        if self._at(xyz, yaw, grasp_xyz, grasp_yaw):
            return target, 0.0
        return self._move(xyz, yaw, grasp_xyz, grasp_yaw), self.max_opening

    def _release_opening(self) -> float:
        """Release width: 3 cm more than the actor is thick, and no more.

        Fingers opened wider inside a narrow box press on its walls and lift it.
        """
        width = self.task.actor.grasp_width()  # across a cylinder / pen; a box's short side
        return min(self.max_opening, width + 0.03)

    def _at(self, xyz, yaw, goal_xyz, goal_yaw) -> bool:
        cfg = self.config
        return bool(
            np.linalg.norm(xyz[:2] - goal_xyz[:2]) <= cfg.xy_tolerance
            and abs(xyz[2] - goal_xyz[2]) <= cfg.z_tolerance
            and abs(wrap_angle(yaw - goal_yaw)) <= cfg.yaw_tolerance
        )

    def _move(self, xyz, yaw, goal_xyz, goal_yaw) -> np.ndarray:
        """Lift, travel above the goal at a safe height while turning, then descend."""
        cfg = self.config
        safe_z = max(
            goal_xyz[2] + cfg.approach_clearance, self.table_height + cfg.carry_height * 0.6
        )
        aligned = (
            np.linalg.norm(xyz[:2] - goal_xyz[:2]) <= cfg.xy_tolerance
            and abs(wrap_angle(yaw - goal_yaw)) <= cfg.yaw_tolerance
        )
        if aligned:
            waypoint = goal_xyz
        elif xyz[2] < safe_z - 0.01:
            waypoint = np.array([xyz[0], xyz[1], safe_z])
        else:
            waypoint = np.array([goal_xyz[0], goal_xyz[1], max(xyz[2], safe_z)])
        return self._step_towards(xyz, yaw, waypoint, goal_yaw)

    def _step_towards(self, xyz, yaw, goal_xyz, goal_yaw) -> np.ndarray:
        cfg = self.config
        offset = goal_xyz - xyz
        dist = float(np.linalg.norm(offset))
        new_xyz = goal_xyz if dist <= cfg.speed else xyz + offset / dist * cfg.speed
        return pose(top_down_mat(self._turned(yaw, goal_yaw)), new_xyz)

    def _turned(self, yaw: float, goal_yaw: float) -> float:
        """The yaw one step turns to: towards ``goal_yaw`` by at most ``config.turn``."""
        return yaw + float(np.clip(wrap_angle(goal_yaw - yaw), -self.config.turn, self.config.turn))

    # -- task geometry --------------------------------------------------------------------
    def _grasp_yaw(self, state: TaskState, current: float) -> float:
        if isinstance(self.task.actor.shape, Pen):  # fingers across the pen
            pen_yaw = _object_yaw(state.objects[self.task.actor.name].quat)
            return _closest_mod_pi(pen_yaw + np.pi / 2, current)
        return current

    def _place_pose(self, state: TaskState, target: np.ndarray) -> tuple[np.ndarray, float]:
        """TCP target that puts the actor just above its resting place in the receptacle.

        Uses the actor pose in the tool frame at query time (rigid while attached),
        so the prediction stays right while the target moves inside a chunk.
        """
        cfg = self.config
        rec = state.objects[self.task.receptacle.name]
        shape, rec_shape = self.task.actor.shape, self.task.receptacle.shape
        if isinstance(rec_shape, OpenBox):
            support_z = rec.pos[2] + rec_shape.floor_top
        else:  # plate, box or mesh receptacle: its top
            support_z = rec.pos[2] + self.task.receptacle.top_height()
        actor_half = self.task.actor.resting_height()
        actor_goal = np.array(
            [rec.pos[0], rec.pos[1], support_z + actor_half + cfg.release_clearance]
        )
        yaw = _yaw_of(target[:3, :3])
        goal_yaw = yaw
        if isinstance(shape, Pen):  # turn so the pen lies along the box's long axis
            goal_yaw = _closest_mod_pi(_object_yaw(rec.quat) - self._held_rel_yaw, yaw)
        goal_xyz = actor_goal - top_down_mat(goal_yaw) @ self._held_offset
        return goal_xyz, goal_yaw

    def _placed(self, state: TaskState) -> bool:
        actor, rec = state.objects[self.task.actor.name], state.objects[self.task.receptacle.name]
        return float(np.linalg.norm(actor.pos[:2] - rec.pos[:2])) < 0.05


POLICIES.register(
    "expert",
    ScriptedExpert,
    privileged=True,
    description="privileged scripted pick-and-place (upper bound, demonstrations)",
)
