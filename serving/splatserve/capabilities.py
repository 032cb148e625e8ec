"""The capability handshake: what a server declares in its metadata so a client configures itself.

A server built with the kit sends, on connect, its metadata dict with one key
``"capabilities"`` (besides anything else it likes; clients ignore unknown keys)::

    {"capabilities": {
        "version": 1,
        "cameras": {"wrist": {"key": "observation/wrist_image", "size": [224, 224],
                              "optional": false}},
        "state": {"observation/state": ["x", "y", "z", "qw", "qx", "qy", "qz", "opening"]},
        "action": {"key": "actions", "layout": ["x", "y", "z", "rx", "ry", "rz", "opening"],
                   "mode": "delta"},
        "chunk_length": 32, "prompt_key": "prompt", "latency_budget_ms": 250.0,
        "episode_control": true}}

* ``cameras``: the client's camera name -> request key, image ``size`` ``[H, W]`` (the client
  resizes with padding; null: native size) and ``optional`` (a client without that camera
  sends zeros of that size, or omits the key when there is no size, instead of refusing).
* ``state``: request key -> the names of its components, from :data:`STATE_NAMES` (TCP
  position, quaternion w x y z, finger opening in metres or ``closed_fraction`` 0 open .. 1
  closed); sent as float32.
* ``action``: reply key, the name of every column (:data:`ACTION_NAMES`; any other name is a
  column the client ignores) and the mode, ``delta`` (wrist-frame deltas) or ``absolute``
  (world-frame targets).
* ``chunk_length``: rows of a reply the client uses (null: all); ``prompt_key``: request key of
  the instruction ("" for none); ``latency_budget_ms``: what one query may take, the client's
  timeout default; ``episode_control``: the server answers ``{"__ctrl__": "episode_start" |
  "episode_end", ...}`` with ``{"__ack__": ...}``.

Only the standard library and this module's dataclasses: the kit must import anywhere.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

VERSION = 1
#: Components a state key may hold (position, quaternion w x y z, gripper).
STATE_NAMES = ("x", "y", "z", "qw", "qx", "qy", "qz", "opening", "closed_fraction")
#: Action columns a client understands; a layout needs x y z rx ry rz and one gripper column.
ACTION_NAMES = ("x", "y", "z", "rx", "ry", "rz", "opening", "closed_fraction")
ACTION_MODES = ("delta", "absolute")
GRIPPER_NAMES = ("opening", "closed_fraction")
#: Largest chunk a server may declare (and a client accepts): 1,024 rows is 100 s at 10 Hz.
MAX_CHUNK_ROWS = 1024


class CapabilityError(ValueError):
    """Malformed or unusable capability metadata (one line: what is wrong and the fix)."""


@dataclass(frozen=True)
class Camera:
    """One camera the server wants.

    Attributes:
        key: Request key of the uint8 ``[H, W, 3]`` image.
        size: ``(height, width)`` the client resizes to with padding, or None (native).
        optional: A client without this camera sends zeros of ``size`` (or, with no size,
            omits the key) instead of refusing to start.
    """

    key: str
    size: tuple[int, int] | None = None
    optional: bool = False

    def __post_init__(self) -> None:
        if not isinstance(self.key, str) or not self.key:
            raise CapabilityError(f"camera key must be a non-empty string, got {self.key!r}")
        if self.size is not None:
            size = tuple(self.size)
            if len(size) != 2 or not all(isinstance(v, int) and 1 <= v <= 8192 for v in size):
                raise CapabilityError(f"camera {self.key!r} size must be [height, width] "
                                      f"in 1..8192, got {list(size)}")
            object.__setattr__(self, "size", (int(size[0]), int(size[1])))


def _default_state() -> dict[str, tuple[str, ...]]:
    return {"observation/state": ("x", "y", "z", "qw", "qx", "qy", "qz", "opening")}


@dataclass(frozen=True)
class Capabilities:
    """What a policy server takes and gives (the handshake; module docstring).

    Attributes:
        cameras: Client camera name -> :class:`Camera`.
        state: Request key -> component names (:data:`STATE_NAMES`).
        action_key: Reply key of the float ``[T, A]`` action chunk.
        action_layout: Name of every reply column (:data:`ACTION_NAMES`, others ignored).
        action_mode: "delta" or "absolute".
        chunk_length: Rows of a reply to use (None: all), at most :data:`MAX_CHUNK_ROWS`.
        prompt_key: Request key of the language instruction ("" for none).
        latency_budget_ms: What one query may take, ms (None: not declared).
        episode_control: The server honours ``__ctrl__`` episode messages.
    """

    cameras: Mapping[str, Camera] = field(default_factory=dict)
    state: Mapping[str, tuple[str, ...]] = field(default_factory=_default_state)
    action_key: str = "actions"
    action_layout: tuple[str, ...] = ("x", "y", "z", "rx", "ry", "rz", "opening")
    action_mode: str = "delta"
    chunk_length: int | None = None
    prompt_key: str = "prompt"
    latency_budget_ms: float | None = None
    episode_control: bool = True

    def __post_init__(self) -> None:
        cameras = {}
        for name, cam in dict(self.cameras).items():
            cameras[str(name)] = cam if isinstance(cam, Camera) else Camera(**dict(cam))
        object.__setattr__(self, "cameras", cameras)
        state = {}
        for key, names in dict(self.state).items():
            names = tuple(names)
            unknown = [n for n in names if n not in STATE_NAMES]
            if unknown or not names:
                raise CapabilityError(f"state {key!r} has components {list(names)}; each must "
                                      f"be one of {list(STATE_NAMES)}")
            state[str(key)] = names
        object.__setattr__(self, "state", state)
        layout = tuple(str(n) for n in self.action_layout)
        object.__setattr__(self, "action_layout", layout)
        if self.action_mode not in ACTION_MODES:
            raise CapabilityError(f"action mode {self.action_mode!r} is not one of "
                                  f"{list(ACTION_MODES)}")
        if self.chunk_length is not None and not (
                isinstance(self.chunk_length, int) and 1 <= self.chunk_length <= MAX_CHUNK_ROWS):
            raise CapabilityError(f"chunk_length must be 1..{MAX_CHUNK_ROWS} or null, got "
                                  f"{self.chunk_length!r}")
        if self.latency_budget_ms is not None:
            budget = float(self.latency_budget_ms)
            if not 0 < budget <= 3_600_000:
                raise CapabilityError(f"latency_budget_ms must be in (0, 3600000], got {budget}")
            object.__setattr__(self, "latency_budget_ms", budget)

    # -- what a 7-D end-effector client needs ---------------------------------------------
    def action_columns(self) -> tuple[tuple[int, ...], str]:
        """(reply columns of x y z rx ry rz gripper, gripper name); CapabilityError if absent."""
        layout = self.action_layout
        grippers = [g for g in GRIPPER_NAMES if g in layout]
        missing = [n for n in ACTION_NAMES[:6] if n not in layout]
        if missing or len(grippers) != 1:
            raise CapabilityError(
                f"the server's action layout {list(layout)} is not an end-effector action: it "
                f"lacks {missing or 'exactly one gripper column (opening or closed_fraction)'}; "
                "serve a policy whose action layout names x y z rx ry rz and a gripper column")
        names = (*ACTION_NAMES[:6], grippers[0])
        return tuple(layout.index(n) for n in names), grippers[0]

    def to_metadata(self) -> dict[str, Any]:
        """The ``"capabilities"`` value sent in the server metadata (plain msgpack types)."""
        return {
            "version": VERSION,
            "cameras": {name: {"key": c.key, "size": list(c.size) if c.size else None,
                               "optional": c.optional} for name, c in self.cameras.items()},
            "state": {key: list(names) for key, names in self.state.items()},
            "action": {"key": self.action_key, "layout": list(self.action_layout),
                       "mode": self.action_mode},
            "chunk_length": self.chunk_length,
            "prompt_key": self.prompt_key,
            "latency_budget_ms": self.latency_budget_ms,
            "episode_control": self.episode_control,
        }

    @classmethod
    def from_metadata(cls, metadata: Any) -> Capabilities | None:
        """The capabilities a server declared, or None when its metadata has none.

        Unknown keys (a newer server) are ignored; a malformed known key is a CapabilityError.
        """
        if not isinstance(metadata, Mapping) or "capabilities" not in metadata:
            return None
        caps = metadata["capabilities"]
        if not isinstance(caps, Mapping):
            raise CapabilityError("server metadata 'capabilities' is not a map")
        try:
            action = caps.get("action") or {}
            kwargs: dict[str, Any] = {}
            if "cameras" in caps:
                kwargs["cameras"] = {
                    name: Camera(key=c["key"], size=tuple(c["size"]) if c.get("size") else None,
                                 optional=bool(c.get("optional", False)))
                    for name, c in dict(caps["cameras"]).items()}
            if "state" in caps:
                kwargs["state"] = dict(caps["state"])
            if "key" in action:
                kwargs["action_key"] = str(action["key"])
            if "layout" in action:
                kwargs["action_layout"] = tuple(action["layout"])
            if "mode" in action:
                kwargs["action_mode"] = action["mode"]
            for name in ("chunk_length", "prompt_key", "latency_budget_ms", "episode_control"):
                if name in caps:
                    kwargs[name] = caps[name]
            return cls(**kwargs)
        except CapabilityError:
            raise
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise CapabilityError(f"server metadata 'capabilities' is malformed "
                                  f"({type(exc).__name__}: {exc})") from None
