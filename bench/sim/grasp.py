"""Grasping: the YUBI contact rule (default) and a frictional grasp with a force threshold.

Contact rule (YUBI-Real2Sim): when *both* finger pads touch the same task object
while the fingers are closing, the object is attached to the hand through a
weld equality whose relative pose is the current one (no jump); it is released
as soon as the commanded opening exceeds the opening at attachment by
``release_margin`` (the fingers open).

Frictional rule (real2sim-eval / PhysTwin): no weld; the fingers close until the
total normal force between the pads and one object reaches
``force_threshold``, then the finger target is held ``2 force_threshold / kp``
inside the measured opening so the squeeze stays at about the threshold and
friction alone carries the object.
"""

from __future__ import annotations

import mujoco
import numpy as np

from bench.geometry import mat_to_quat
from bench.sim.config import GRASP_MODES, GraspConfig  # noqa: F401 - re-exported here

CLOSING_EPS = 1e-4  # m: the fingers count as closing when commanded this far inside the opening


def add_grasp_welds(
    spec: mujoco.MjSpec, *, hand_body: str, objects: list[str], config: GraspConfig
) -> None:
    """Add one inactive hand-object weld per graspable object (contact rule)."""
    for name in objects:
        spec.add_equality(
            name=f"grasp_{name}",
            type=mujoco.mjtEq.mjEQ_WELD,
            name1=hand_body,
            name2=name,
            active=False,
            solref=[config.weld_timeconst, 1.0],
            solimp=[0.99, 0.999, 0.001, 0.5, 2.0],
            objtype=mujoco.mjtObj.mjOBJ_BODY,
        )


class Grasp:
    """Runtime grasp state machine; call :meth:`update` once per physics step.

    Args:
        model: Compiled model containing the welds from :func:`add_grasp_welds`.
        config: Rule settings.
        hand_body: Name of the body objects are welded to.
        objects: Graspable object (body) names.
        left_pad: Geom name of the left pad.
        right_pad: Geom name of the right pad.
        finger_kp: Finger servo stiffness (N/m) used to hold the squeeze in friction mode.
    """

    def __init__(
        self,
        model: mujoco.MjModel,
        config: GraspConfig,
        *,
        hand_body: str,
        objects: list[str],
        left_pad: str,
        right_pad: str,
        finger_kp: float,
    ) -> None:
        self.config = config
        self.objects = list(objects)
        self.finger_kp = finger_kp
        self._hand = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_BODY, hand_body)
        self._bodies = [mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_BODY, n) for n in objects]
        self._welds = [
            mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_EQUALITY, f"grasp_{n}") for n in objects
        ]
        # geom -> 0 left pad, 1 right pad, 2 + k object k, -1 anything else
        self._geom_role = np.full(model.ngeom, -1, dtype=np.int64)
        self._geom_role[mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_GEOM, left_pad)] = 0
        self._geom_role[mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_GEOM, right_pad)] = 1
        for k, body in enumerate(self._bodies):
            self._geom_role[model.geom_bodyid == body] = 2 + k
        self.reset()

    def reset(self, data: mujoco.MjData | None = None) -> None:
        """Forget any attachment and squeeze (episode start); turn the welds off in ``data``."""
        self.attached: int | None = None  # index into self.objects
        self.attach_opening = 0.0
        self.squeezing: int | None = None  # friction mode: object being squeezed
        if data is not None:
            for weld in self._welds:
                data.eq_active[weld] = 0

    @property
    def attached_name(self) -> str | None:
        """Name of the welded object, None when nothing is attached."""
        return None if self.attached is None else self.objects[self.attached]

    def pad_contacts(self, data: mujoco.MjData) -> np.ndarray:
        """[n_objects, 2] bool: which pads (left, right) touch which object."""
        touching = np.zeros((len(self.objects), 2), dtype=bool)
        if data.ncon == 0:
            return touching
        roles = self._geom_role[data.contact.geom]  # [ncon, 2]
        for a, b in ((0, 1), (1, 0)):
            pad = roles[:, a] <= 1
            obj = roles[:, b] >= 2
            hits = pad & obj & (roles[:, a] >= 0)
            touching[roles[hits, b] - 2, roles[hits, a]] = True
        return touching

    def pad_contacts_reference(  # -> [n_objects, 2] bool
        self, model: mujoco.MjModel, data: mujoco.MjData
    ) -> np.ndarray:
        """Plain per-contact loop over geom and body names (reference for :meth:`pad_contacts`)."""
        touching = np.zeros((len(self.objects), 2), dtype=bool)
        pads = {"left_pad": 0, "right_pad": 1}
        for index in range(data.ncon):
            g1, g2 = (int(g) for g in data.contact[index].geom)
            for pad_geom, other in ((g1, g2), (g2, g1)):
                pad = pads.get(mujoco.mj_id2name(model, mujoco.mjtObj.mjOBJ_GEOM, pad_geom) or "")
                body = mujoco.mj_id2name(
                    model, mujoco.mjtObj.mjOBJ_BODY, int(model.geom_bodyid[other])
                )
                if pad is not None and body in self.objects:
                    touching[self.objects.index(body), pad] = True
        return touching

    def pad_force(self, model: mujoco.MjModel, data: mujoco.MjData, obj: int) -> float:
        """Total normal force (N) between both pads and object ``obj``."""
        if data.ncon == 0:
            return 0.0
        roles = self._geom_role[data.contact.geom]
        pad_obj = ((roles[:, 0] >= 0) & (roles[:, 0] <= 1) & (roles[:, 1] == 2 + obj)) | (
            (roles[:, 1] >= 0) & (roles[:, 1] <= 1) & (roles[:, 0] == 2 + obj)
        )
        wrench = np.zeros(6)
        total = 0.0
        for index in np.flatnonzero(pad_obj):
            mujoco.mj_contactForce(model, data, int(index), wrench)
            total += abs(wrench[0])
        return total

    def idle_from(self, commanded_opening: float, measured_opening: float) -> str | None:
        """Whether :meth:`update` would do nothing in the coming physics steps of a frame.

        The opening command is constant over a control frame, so: ``"frame"`` when every
        update of the frame is a no-op whatever the physics does (contact rule, an object
        attached and the fingers not opening past the release opening); ``"while_open"``
        when this step's update is a no-op and later ones are while the measured opening
        stays at most ``commanded + CLOSING_EPS`` (the gripper is not closing on anything);
        None when the rule must look at this step (closing, or releasing). The batched
        physics of :meth:`bench.sim.world.World.step_frame` relies on it.
        """
        if self.config.mode == "contact" and self.attached is not None:
            if commanded_opening > self.attach_opening + self.config.release_margin:
                return None
            return "frame"
        if commanded_opening >= measured_opening - CLOSING_EPS:
            return "while_open"
        return None

    def skip_idle(self) -> None:
        """The bookkeeping of updates skipped as no-ops (:meth:`idle_from`): no squeeze."""
        if self.config.mode != "contact":
            self.squeezing = None

    def update(
        self,
        model: mujoco.MjModel,
        data: mujoco.MjData,
        *,
        commanded_opening: float,
        measured_opening: float,
    ) -> float:
        """Advance the rule one physics step; returns the opening command to send to the fingers."""
        if self.config.mode == "contact":
            self._update_contact(model, data, commanded_opening, measured_opening)
            return commanded_opening
        return self._update_friction(model, data, commanded_opening, measured_opening)

    def _update_contact(self, model, data, commanded: float, measured: float) -> None:
        if self.attached is not None:
            if commanded > self.attach_opening + self.config.release_margin:
                data.eq_active[self._welds[self.attached]] = 0
                self.attached = None
            return
        if commanded >= measured - CLOSING_EPS:  # only a closing gripper grasps
            return
        both = np.flatnonzero(self.pad_contacts(data).all(axis=1))
        if both.size:
            self._attach(model, data, int(both[0]), measured)

    def _attach(self, model, data, obj: int, measured: float) -> None:
        hand_rot = data.xmat[self._hand].reshape(3, 3)
        body = self._bodies[obj]
        rel_pos = hand_rot.T @ (data.xpos[body] - data.xpos[self._hand])
        rel_rot = hand_rot.T @ data.xmat[body].reshape(3, 3)
        weld = self._welds[obj]
        # weld data: anchor[3], relpose (pos[3], quat[4]) of body2 in body1, torquescale
        model.eq_data[weld, 0:3] = 0.0
        model.eq_data[weld, 3:6] = rel_pos
        model.eq_data[weld, 6:10] = mat_to_quat(rel_rot)
        model.eq_data[weld, 10] = 1.0
        data.eq_active[weld] = 1
        self.attached = obj
        self.attach_opening = measured

    def _update_friction(self, model, data, commanded: float, measured: float) -> float:
        if commanded >= measured - CLOSING_EPS:  # opening or holding still: nothing to limit
            self.squeezing = None
            return commanded
        # The servo acts on the half opening and the coupled fingers share its force, so the
        # total pad force is kp * (measured - command) / 2: hold it at the threshold.
        hold = max(commanded, measured - 2.0 * self.config.force_threshold / self.finger_kp)
        touching = np.flatnonzero(self.pad_contacts(data).all(axis=1))
        if self.squeezing is not None:  # keep squeezing while both pads stay on the object
            if self.squeezing in touching:
                return hold
            self.squeezing = None
        for obj in touching:
            if self.pad_force(model, data, int(obj)) >= self.config.force_threshold:
                self.squeezing = int(obj)
                return hold
        return commanded
