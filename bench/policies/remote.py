"""A policy served elsewhere: the openpi websocket protocol client (:class:`WebsocketPolicy`).

Talks to any openpi policy server (``scripts/serve_policy.py`` of openpi: pi0, pi0.5,
pi0-FAST) or to ``bench serve`` (:mod:`bench.policies.serve`) over the msgpack-numpy
websocket protocol (:mod:`bench.policies.wire`). What is sent and how the reply is read
is one :class:`RemoteConfig`; presets (:data:`LAYOUTS`): ``bench`` (the layout of
``bench serve``: native images, the 8-D proprio, EE delta actions) and ``droid``
(openpi's DROID example keys, 224 x 224 resize-with-pad images, EE pose + gripper as
state, absolute EE actions with a closed-fraction gripper - adapt the columns to your
checkpoint's action head).

Faults are :class:`~bench.policies.base.PolicyError` (one line): a refused or dropped
connection or a query past ``timeout_s`` is retried ``retries`` times with exponential
backoff (``backoff_s * 2**k``), reconnecting each time; a text (error) reply or a
malformed reply (missing key, wrong shape or dtype, NaN) is not retried. The wall time
of every query is kept in :attr:`WebsocketPolicy.latencies_ms`.

Registered as policy ``openpi``: in a study spec
``{"factory": "openpi", "kwargs": {"host": "10.0.0.5", "port": 8000, "layout": "droid"}}``.
"""

from __future__ import annotations

import contextlib
import dataclasses
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from bench.errors import BenchError
from bench.policies.base import (
    ACTION_DIM,
    ACTION_MODES,
    POLICIES,
    PolicyError,
    camera_images,
)

GRIPPER_MODES = ("opening_m", "closed_fraction")


@dataclass(frozen=True)
class RemoteConfig:
    """How bench observations map onto a server's keys, and its replies back onto actions.

    Attributes:
        host: Server host name or ``ws://`` / ``wss://`` URI.
        port: Server port (None: part of ``host``).
        image_keys: Bench camera name -> server key (cameras not listed are not sent; an
            absent camera is sent as zeros of ``image_size`` when ``image_size`` is set).
        image_size: (height, width) to resize every image to with aspect-preserving
            padding (openpi ``resize_with_pad``), or None to send native images.
        state_keys: Server key -> indices into the 8-D proprio (position 0-2, quaternion
            3-6, opening 7) sent as float32.
        prompt_key: Server key of the language instruction ("" to not send it).
        extra_keys: Send the time stamp, episode seed and query index as
            ``bench/timestamp``, ``bench/episode_seed``, ``bench/query_index`` (``bench
            serve`` resets its policy at query 0; openpi ignores unknown keys).
        action_key: Key of the action array in the reply.
        action_columns: Reply columns giving (x, y, z, rx, ry, rz, gripper), in order.
        action_mode: "delta" (wrist-frame deltas) or "absolute" (world TCP targets).
        gripper: "opening_m" (metres) or "closed_fraction" (0 open .. 1 closed, DROID).
        chunk_length: Rows of the reply to use (None: all).
        timeout_s: Per-query wall-clock limit, seconds.
        connect_timeout_s: Limit of one connection attempt, seconds.
        retries: Extra attempts after a transport fault (refused, dropped, timed out).
        backoff_s: First wait before a retry, seconds (doubled each retry).
        api_key: Sent as ``Authorization: Api-Key ...`` (openpi servers that want one).
    """

    host: str = "127.0.0.1"
    port: int | None = 8000
    image_keys: Mapping[str, str] = field(
        default_factory=lambda: {"wrist": "observation/wrist_image"})
    image_size: tuple[int, int] | None = None
    state_keys: Mapping[str, tuple[int, ...]] = field(
        default_factory=lambda: {"observation/state": tuple(range(8))})
    prompt_key: str = "prompt"
    extra_keys: bool = True
    action_key: str = "actions"
    action_columns: tuple[int, ...] = tuple(range(ACTION_DIM))
    action_mode: str = "delta"
    gripper: str = "opening_m"
    chunk_length: int | None = None
    timeout_s: float = 10.0
    connect_timeout_s: float = 10.0
    retries: int = 2
    backoff_s: float = 0.2
    api_key: str | None = None

    def __post_init__(self) -> None:
        if self.action_mode not in ACTION_MODES:
            raise BenchError(f"action_mode {self.action_mode!r} is not one of {ACTION_MODES}")
        if self.gripper not in GRIPPER_MODES:
            raise BenchError(f"gripper {self.gripper!r} is not one of {GRIPPER_MODES}")
        if len(self.action_columns) != ACTION_DIM:
            raise BenchError(f"action_columns must name {ACTION_DIM} reply columns "
                             f"(x y z rx ry rz gripper), got {list(self.action_columns)}")
        if self.image_size is not None:
            object.__setattr__(self, "image_size", tuple(int(v) for v in self.image_size))
        object.__setattr__(self, "state_keys",
                           {k: tuple(int(i) for i in v) for k, v in self.state_keys.items()})
        object.__setattr__(self, "action_columns", tuple(int(c) for c in self.action_columns))
        for name in ("timeout_s", "connect_timeout_s"):
            if not getattr(self, name) > 0:
                raise BenchError(f"{name} must be > 0 seconds, got {getattr(self, name)}")
        if self.retries < 0 or self.backoff_s < 0:
            raise BenchError("retries and backoff_s must be >= 0")
        if self.chunk_length is not None and self.chunk_length < 1:
            raise BenchError(f"chunk_length must be >= 1 or null, got {self.chunk_length}")

    @property
    def uri(self) -> str:
        """The websocket address: ``ws://host`` (unless a scheme is given), ``:port`` if set."""
        base = self.host if self.host.startswith(("ws://", "wss://")) else f"ws://{self.host}"
        return base if self.port is None else f"{base}:{self.port}"


LAYOUTS: dict[str, dict[str, Any]] = {
    "bench": {},
    "droid": {
        "image_keys": {"exterior": "observation/exterior_image_1_left",
                       "wrist": "observation/wrist_image_left"},
        "image_size": (224, 224),
        "state_keys": {"observation/cartesian_position": (0, 1, 2, 3, 4, 5, 6),
                       "observation/gripper_position": (7,)},
        "extra_keys": False,
        "action_mode": "absolute",
        "gripper": "closed_fraction",
        "chunk_length": 8,
    },
}


def resize_with_pad(image: np.ndarray, height: int, width: int) -> np.ndarray:
    """Resize uint8 ``[H, W, 3]`` to fit ``[height, width]`` keeping aspect, zero-padded.

    The openpi convention (bilinear, centred, black padding); identity when sizes match.
    """
    import cv2

    h, w = image.shape[:2]
    if (h, w) == (height, width):
        return image
    scale = min(height / h, width / w)
    new_h, new_w = max(1, round(h * scale)), max(1, round(w * scale))
    resized = cv2.resize(image, (new_w, new_h), interpolation=cv2.INTER_LINEAR)
    out = np.zeros((height, width, image.shape[2]), dtype=image.dtype)
    top, left = (height - new_h) // 2, (width - new_w) // 2
    out[top:top + new_h, left:left + new_w] = resized
    return out


class WebsocketPolicy:
    """A :class:`~bench.policies.base.Policy` answered by a websocket policy server.

    Args:
        env: The (unwrapped) environment (gives the opening range).
        seed: Unused (the server owns any randomness; the episode seed is sent).
        config: A :class:`RemoteConfig`; keyword arguments override its fields.
        layout: Preset of :data:`LAYOUTS` the config starts from ("bench").
        name: Policy name (default "openpi").
    """

    privileged = False

    def __init__(self, env: Any, *, seed: int = 0, config: RemoteConfig | None = None,
                 layout: str = "bench", name: str = "openpi", **overrides: Any) -> None:
        if layout not in LAYOUTS:
            raise BenchError(f"unknown remote layout {layout!r}; use one of {sorted(LAYOUTS)}")
        base = config or RemoteConfig(**LAYOUTS[layout])
        try:
            self.config = dataclasses.replace(base, **overrides) if overrides else base
        except TypeError as exc:
            raise BenchError(f"remote policy: {exc}; valid options: "
                             f"{[f.name for f in dataclasses.fields(RemoteConfig)]}") from None
        self.name = name
        self.action_mode = self.config.action_mode
        self.max_opening = float(env.world.robot.max_opening) if env is not None else 0.11
        self.metadata: dict[str, Any] = {}
        self.latencies_ms: list[float] = []
        self._ws: Any = None
        self._stack: contextlib.ExitStack | None = None
        self._episode_seed = 0
        self._query = 0

    # -- connection ---------------------------------------------------------------------
    def _connect(self) -> None:
        from websockets.sync.client import connect

        from bench.policies import wire

        headers = {"Authorization": f"Api-Key {self.config.api_key}"} if self.config.api_key \
            else None
        stack = contextlib.ExitStack()  # the connection is a context manager (websockets 17)
        self._ws = stack.enter_context(connect(
            self.config.uri, compression=None, max_size=None,
            open_timeout=self.config.connect_timeout_s, additional_headers=headers))
        self._stack = stack
        first = self._ws.recv(timeout=self.config.timeout_s)
        meta = wire.unpackb(first) if isinstance(first, bytes) else {}
        self.metadata = meta if isinstance(meta, dict) else {}

    def close(self) -> None:
        """Close the websocket connection, if any (never raises)."""
        if self._stack is not None:
            try:
                self._stack.close()
            except Exception:  # noqa: BLE001 - closing a dead socket must not raise
                pass
        self._ws = self._stack = None

    def __del__(self) -> None:
        self.close()

    # -- policy API -----------------------------------------------------------------------
    def reset(self, *, seed: int | None = None) -> None:
        """Start an episode: record its seed, reset the query count and the latencies."""
        self._episode_seed = 0 if seed is None else int(seed)
        self._query = 0
        self.latencies_ms = []

    def act(self, obs: Mapping[str, Any], info: Mapping[str, Any] | None = None
            ) -> np.ndarray:  # -> float32 [T, 7]
        """Query the server for an action chunk (latency in ms recorded); float32 [T, 7]."""
        request = self.encode(obs)
        start = time.perf_counter()
        reply = self._roundtrip(request)
        self.latencies_ms.append((time.perf_counter() - start) * 1000.0)
        self._query += 1
        return self.decode(reply)

    # -- layout ---------------------------------------------------------------------------
    def encode(self, obs: Mapping[str, Any]) -> dict[str, Any]:
        """The server request for a policy observation (see :class:`RemoteConfig`)."""
        cfg = self.config
        images = obs.get("images") or camera_images(obs)
        request: dict[str, Any] = {}
        for camera, key in cfg.image_keys.items():
            image = images.get(camera)
            if image is None:
                if cfg.image_size is None:
                    continue
                image = np.zeros((*cfg.image_size, 3), np.uint8)
            elif cfg.image_size is not None:
                image = resize_with_pad(np.asarray(image), *cfg.image_size)
            request[key] = np.ascontiguousarray(image, dtype=np.uint8)
        proprio = np.asarray(obs["proprio"], dtype=np.float32)
        for key, index in cfg.state_keys.items():
            values = proprio[list(index)]
            if cfg.gripper == "closed_fraction" and index == (7,):
                values = 1.0 - np.clip(values / self.max_opening, 0.0, 1.0)
            request[key] = values.astype(np.float32)
        if cfg.prompt_key:
            request[cfg.prompt_key] = str(obs.get("prompt", ""))
        if cfg.extra_keys:
            request["bench/timestamp"] = float(obs.get("timestamp", 0.0))
            request["bench/episode_seed"] = self._episode_seed
            request["bench/query_index"] = self._query
        return request

    def decode(self, reply: Any) -> np.ndarray:  # -> float32 [T, 7]
        """Bench action rows from a server reply; PolicyError when it is malformed."""
        cfg = self.config
        where = f"policy server {cfg.uri}"
        if not isinstance(reply, dict) or cfg.action_key not in reply:
            keys = sorted(map(str, reply)) if isinstance(reply, dict) else type(reply).__name__
            raise PolicyError(f"{where}: reply has no {cfg.action_key!r} array (got {keys})")
        actions = reply[cfg.action_key]
        if not isinstance(actions, np.ndarray) or actions.dtype.kind != "f":
            kind = actions.dtype if isinstance(actions, np.ndarray) else type(actions).__name__
            raise PolicyError(f"{where}: {cfg.action_key!r} has dtype {kind}, expected float")
        if actions.ndim != 2 or actions.shape[1] <= max(cfg.action_columns) or not len(actions):
            raise PolicyError(f"{where}: {cfg.action_key!r} has shape {tuple(actions.shape)}, "
                              f"expected [T, >= {max(cfg.action_columns) + 1}]")
        if not np.all(np.isfinite(actions)):
            raise PolicyError(f"{where}: {cfg.action_key!r} contains NaN or inf")
        rows = np.asarray(actions[:, list(cfg.action_columns)], dtype=np.float32)
        if cfg.chunk_length is not None:
            rows = rows[: cfg.chunk_length]
        if cfg.gripper == "closed_fraction":
            rows = rows.copy()
            rows[:, 6] = (1.0 - np.clip(rows[:, 6], 0.0, 1.0)) * self.max_opening
        return rows

    # -- transport ------------------------------------------------------------------------
    def _roundtrip(self, request: dict[str, Any]) -> Any:
        from websockets.exceptions import WebSocketException

        from bench.policies import wire

        cfg = self.config
        data = wire.packb(request)
        last = ""
        for attempt in range(cfg.retries + 1):
            if attempt:
                time.sleep(cfg.backoff_s * 2 ** (attempt - 1))
            try:
                if self._ws is None:
                    self._connect()
                self._ws.send(data)
                reply = self._ws.recv(timeout=cfg.timeout_s)
            except TimeoutError:
                last = f"no reply within {cfg.timeout_s:g} s"
            except (OSError, WebSocketException) as exc:
                last = f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
            else:
                if isinstance(reply, str):
                    first = reply.strip().splitlines()[-1] if reply.strip() else "(empty)"
                    raise PolicyError(f"policy server {cfg.uri}: server error: {first}")
                try:
                    return wire.unpackb(reply)
                except Exception as exc:  # noqa: BLE001 - any decode failure is malformed
                    raise PolicyError(f"policy server {cfg.uri}: malformed reply "
                                      f"({type(exc).__name__})") from None
            self.close()  # a timed-out or broken connection is not reused
        raise PolicyError(f"policy server {cfg.uri}: {last} "
                          f"(after {cfg.retries + 1} attempts)")


POLICIES.register(
    "openpi",
    WebsocketPolicy,
    privileged=False,
    remote=True,
    description="a policy behind an openpi-protocol websocket server (openpi serve_policy.py, "
    "bench serve); kwargs: host, port, layout, RemoteConfig fields",
)
