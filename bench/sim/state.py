"""The privileged simulator state that success predicates, progress scorers and experts read.

A :class:`TaskState` is a plain snapshot (numpy arrays, strings), detached from
MuJoCo, so predicates are deterministic pure functions that unit tests can feed
hand-built positive and negative states.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from bench.geometry import quat_to_mat


def _same(a: object, b: object) -> bool:
    """Exact equality that also works for numpy arrays (Gymnasium's checker compares infos)."""
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        return bool(np.array_equal(a, b))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    return bool(a == b)


def _fields_equal(x: object, y: object) -> bool:
    return type(x) is type(y) and all(
        _same(getattr(x, f), getattr(y, f)) for f in x.__dataclass_fields__
    )


@dataclass(frozen=True, eq=False)
class ObjectState:
    """Pose and velocity of one free object in the world frame (metres, radians)."""

    pos: np.ndarray  # [3]
    quat: np.ndarray  # [4] w, x, y, z
    linvel: np.ndarray = field(default_factory=lambda: np.zeros(3))  # [3] m/s
    angvel: np.ndarray = field(default_factory=lambda: np.zeros(3))  # [3] rad/s

    @property
    def rotation(self) -> np.ndarray:  # [3, 3]
        """World-from-object rotation [3, 3]."""
        return quat_to_mat(self.quat)

    def __eq__(self, other: object) -> bool:
        return _fields_equal(self, other)

    __hash__ = None

    def to_local(self, points: np.ndarray) -> np.ndarray:  # [M, 3] world -> [M, 3] object frame
        """World points in the object frame."""
        return (np.atleast_2d(points) - self.pos) @ self.rotation

    def to_world(self, points: np.ndarray) -> np.ndarray:  # [M, 3] object frame -> [M, 3] world
        """Object-frame points in the world."""
        return np.atleast_2d(points) @ self.rotation.T + self.pos


@dataclass(frozen=True, eq=False)
class TaskState:
    """Everything a predicate may look at, at one control frame.

    Attributes:
        objects: Object name -> its state.
        contacts: Unordered pairs of touching bodies, each a sorted ``(a, b)`` name tuple
            ("table" for the tabletop, "left_pad"/"right_pad" for the finger pads).
        attached: Name of the object welded to the gripper (contact rule), or None.
        tcp_pos: Tool-centre-point position [3] in metres.
        tcp_quat: Tool-centre-point orientation [4] (w, x, y, z).
        opening: Measured finger opening in metres.
        table_height: z of the tabletop in metres.
        frame: Control frames executed so far in the episode.
    """

    objects: dict[str, ObjectState]
    contacts: frozenset[tuple[str, str]]
    attached: str | None
    tcp_pos: np.ndarray
    tcp_quat: np.ndarray
    opening: float
    table_height: float = 0.0
    frame: int = 0

    def __eq__(self, other: object) -> bool:
        return _fields_equal(self, other)

    __hash__ = None

    def touching(self, a: str, b: str) -> bool:
        """Whether bodies ``a`` and ``b`` are in contact."""
        return tuple(sorted((a, b))) in self.contacts

    def held(self, name: str) -> bool:
        """Whether ``name`` is held: welded, or squeezed by both pads (frictional grasp)."""
        return self.attached == name or (
            self.touching(name, "left_pad") and self.touching(name, "right_pad")
        )


@dataclass(frozen=True)
class FrameState:
    """One control frame of the recorded state stream (``info["frame_states"]``).

    Plain Python values (lists, not arrays), so :meth:`to_dict` is the row's JSON and
    :func:`bench.sim.rollout.state_stream_rows` flattens it into the CSV of ``--save-states``.

    Attributes:
        frame: Control frame index (0 = the state after ``reset``).
        ee_pose: Tool-centre pose ``[x, y, z, qw, qx, qy, qz]``, metres and a unit quaternion.
        gripper: Opening normalised by the robot's maximum, in [0, 1].
        opening_m: Finger opening, metres.
        attached: Name of the welded object, "" when none.
        held: The task's actor is held (welded, or squeezed by both pads).
        success_now: The success predicate holds in this frame.
        success: The episode's declared success so far (the predicate held long enough).
        progress: Progress score in [0, 1] (``bench.sim.progress``).
        objects: Object (or tracked rope point) name -> pose ``[x, y, z, qw, qx, qy, qz]``.
    """

    frame: int
    ee_pose: list[float]  # [7]
    gripper: float
    opening_m: float
    attached: str
    held: bool
    success_now: bool
    success: bool
    progress: float
    objects: dict[str, list[float]]  # name -> [7]

    def to_dict(self) -> dict[str, Any]:
        """The row as a JSON-ready dict (field order kept)."""
        return asdict(self)
