"""MuJoCo <-> spring-mass coupling: geoms as kinematic colliders, reactions, frictional grasp.

Per control frame (the paper's Algorithm 1): read the collider geoms' poses from MuJoCo
before and after the frame's physics steps, run the spring-mass substeps with the colliders
interpolated between the two, and feed the frame-averaged reaction of every collider body
back into ``data.xfrc_applied`` for the next frame (force at the body's centre of mass).

Frictional grasp (real2sim-eval III-C4): while the fingers close, the total normal contact
force of the two pads on the object is watched; once both pads touch and it passes
``force_threshold`` the fingers stop closing (the finger target is held at the measured
opening) and the nodes in contact with a pad are attached to it, so they follow the fingers;
opening the fingers ``release_margin`` past the grasp width releases them.
"""

from __future__ import annotations

from dataclasses import dataclass

import mujoco
import numpy as np

from bench.geometry import quat_to_mat
from bench.sim.softbody.model import Collider
from bench.sim.softbody.reference import ColliderFrame, collider_distance

_GEOM_KINDS = {
    int(mujoco.mjtGeom.mjGEOM_SPHERE): "sphere",
    int(mujoco.mjtGeom.mjGEOM_CAPSULE): "capsule",
    int(mujoco.mjtGeom.mjGEOM_BOX): "box",
}


class GeomColliders:
    """Named MuJoCo geoms as spring-mass colliders (Coulomb ``friction``, None: the sim's).

    Reaction bodies are the geoms' non-world bodies, in first-seen order (``body_ids``).
    """

    def __init__(self, model: mujoco.MjModel, geoms: list[str], *,
                 friction: float | None = None) -> None:
        self.model = model
        self.geom_ids = [mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_GEOM, g) for g in geoms]
        if min(self.geom_ids, default=0) < 0:
            raise ValueError(f"unknown geom in {geoms}")
        bodies = []
        for g in self.geom_ids:
            b = int(model.geom_bodyid[g])
            if b != 0 and b not in bodies:
                bodies.append(b)
        self.body_ids = bodies  # MuJoCo body ids that receive reactions
        self.colliders = []
        for g in self.geom_ids:
            kind = _GEOM_KINDS.get(int(model.geom_type[g]))
            if kind is None:
                raise ValueError(f"geom {g}: only sphere, capsule and box geoms collide")
            size = model.geom_size[g].copy()
            if kind == "sphere":
                size[1:] = 0.0
            elif kind == "capsule":
                size[2] = 0.0
            b = int(model.geom_bodyid[g])
            self.colliders.append(Collider(kind, tuple(float(s) for s in size),
                                           body=bodies.index(b) if b != 0 else -1,
                                           friction=friction))

    def poses(self, data: mujoco.MjData) -> tuple[np.ndarray, np.ndarray]:  # [C, 3], [C, 4]
        """World positions [C, 3] and quaternions [C, 4] (w, x, y, z) of the collider geoms."""
        pos = np.array([data.geom_xpos[g] for g in self.geom_ids], np.float64)
        quat = np.zeros((len(self.geom_ids), 4))
        for k, g in enumerate(self.geom_ids):
            mujoco.mju_mat2Quat(quat[k], data.geom_xmat[g])
        return pos, quat

    def frame(self, start: tuple[np.ndarray, np.ndarray], data: mujoco.MjData, dt: float
              ) -> ColliderFrame:
        """Collider motion from ``start`` poses to the poses now in ``data`` over ``dt`` s."""
        pos0, quat0 = start
        pos1, quat1 = self.poses(data)
        ang = np.zeros((len(pos0), 3))
        for k in range(len(pos0)):
            rel = quat_to_mat(quat1[k]) @ quat_to_mat(quat0[k]).T
            angle = np.arccos(np.clip((np.trace(rel) - 1) / 2, -1.0, 1.0))
            axis = np.array([rel[2, 1] - rel[1, 2], rel[0, 2] - rel[2, 0], rel[1, 0] - rel[0, 1]])
            norm = np.linalg.norm(axis)
            if norm > 1e-12:
                ang[k] = axis / norm * angle / dt
        kinds = np.array([{"sphere": 0, "capsule": 1, "box": 2}[c.kind] for c in self.colliders])
        return ColliderFrame(
            kinds=kinds, sizes=np.array([c.size for c in self.colliders]),
            pos0=pos0, pos1=pos1, quat0=quat0, quat1=quat1, linvel=(pos1 - pos0) / dt,
            angvel=ang, bodies=np.array([c.body for c in self.colliders]),
            friction=np.array([1.0 if c.friction is None else c.friction
                               for c in self.colliders]),
            body_com=np.array([data.xipos[b] for b in self.body_ids]).reshape(-1, 3),
        )

    def apply_reactions(self, data: mujoco.MjData, reactions: dict[str, np.ndarray]) -> None:
        """Write the frame-averaged reactions into ``xfrc_applied`` (force, torque)."""
        for k, b in enumerate(self.body_ids):
            data.xfrc_applied[b, :3] = reactions["body_force"][k]
            data.xfrc_applied[b, 3:] = reactions["body_torque"][k]


@dataclass(frozen=True)
class SoftGraspConfig:
    """Frictional grasp of a deformable: threshold (N), release margin (m), attach band (m)."""

    force_threshold: float = 0.05
    release_margin: float = 0.01
    attach_band: float = 0.003


class SoftGrasp:
    """Force-threshold frictional grasp with node attachment (module doc).

    Args:
        pads: Collider indices of the two finger pads in the spring-mass sim.
        config: Thresholds.
    """

    def __init__(self, pads: tuple[int, int], config: SoftGraspConfig | None = None) -> None:
        self.pads = pads
        self.config = config or SoftGraspConfig()
        self.reset()

    def reset(self) -> None:
        """Release the rope (start of an episode)."""
        self.holding = False
        self.hold_opening = 0.0
        self.last_force = 0.0

    def finger_target(self, commanded: float) -> float:
        """The opening to command this frame (held while grasping, until released)."""
        if self.holding:
            if commanded > self.hold_opening + self.config.release_margin:
                return commanded
            return self.hold_opening
        return commanded

    def update(self, sim, frame: ColliderFrame, reactions: dict[str, np.ndarray], *,
               commanded: float, measured: float) -> None:
        """After a frame: grasp when both pads push hard enough while closing; or release."""
        normal = reactions["collider_normal"]
        a, b = self.pads
        self.last_force = float(normal[a] + normal[b])
        n = sim.model.num_nodes
        if self.holding and commanded > self.hold_opening + self.config.release_margin:
            self.holding = False
            sim.set_attachment(np.full(n, -1), np.zeros((n, 3)))
            return
        closing = commanded < measured - 1e-4
        if (not self.holding and closing and normal[a] > 0 and normal[b] > 0
                and self.last_force >= self.config.force_threshold):
            self.holding = True
            self.hold_opening = measured
            x = sim.positions()
            attach, local = np.full(n, -1), np.zeros((n, 3))
            reach = sim.config.particle_radius + self.config.attach_band
            for pad in self.pads:
                rot = quat_to_mat(frame.quat1[pad])
                dist, _ = collider_distance(int(frame.kinds[pad]), frame.sizes[pad],
                                            frame.pos1[pad], rot, x)
                near = (dist < reach) & (attach < 0)
                attach[near] = pad
                local[near] = (x[near] - frame.pos1[pad]) @ rot
            sim.set_attachment(attach, local)
