"""A policy served elsewhere: the openpi websocket protocol client (:class:`WebsocketPolicy`).

Talks to any openpi policy server (``scripts/serve_policy.py`` of openpi: pi0, pi0.5,
pi0-FAST), to a server made with the policy-server kit ``splatserve`` (``python -m
splatserve``, ``python -m splatserve.lerobot``) or to ``bench serve``
(:mod:`bench.policies.serve`, built on the kit) over the msgpack-numpy websocket protocol
(:mod:`splatserve.wire`; the transport is :class:`splatserve.client.PolicyClient`).

What is sent and how the reply is read is one :class:`RemoteConfig`, built in three layers:
a preset (:data:`LAYOUTS`: ``bench``, the layout of ``bench serve``; ``droid``, openpi's
DROID example keys), then the server's capability handshake when its metadata declares one
(:mod:`splatserve.capabilities`: cameras with image sizes, state and action layouts, action
mode, chunk length, prompt key, latency budget, episode control), then the keyword
arguments the user gave, which win. The handshake is read when the policy is built; a
server that wants a camera the task's env does not have, or whose actions are not a 7-D
end-effector action, is a one-line :class:`~bench.errors.BenchError` then, before any
rollout. Unknown metadata keys are ignored.

Where the handshake says ``episode_control`` (or ``episode_control="on"``), each episode
starts with ``{"__ctrl__": "episode_start", "__episode_id__": <episode seed>, ...}`` and
ends with ``{"__ctrl__": "episode_end", "__success__": ...}``, each answered by
``{"__ack__": ...}`` (openpi-client's ``episode_start`` / ``episode_end``). Every reply key
besides the action array (``server_timing``, a newer server's extras) is kept, per query,
in :attr:`WebsocketPolicy.reply_extras`; :meth:`WebsocketPolicy.episode_extras` hands an
ended episode's unknown keys to the study, which stores them with the rollout
(``policy_replies``, :mod:`bench.study.store`).

Faults are :class:`~bench.policies.base.PolicyError` (one line): a refused or dropped
connection or a query past ``timeout_s`` is retried ``retries`` times with exponential
backoff (``backoff_s * 2**k``), reconnecting each time; a text (error) reply, a control
message answered with an error, or a malformed reply (missing key, wrong shape or dtype,
NaN, more than ``max_chunk_rows`` rows, larger than ``max_message_bytes``) is not
retried. The wall time of every query is kept in :attr:`WebsocketPolicy.latencies_ms`.

Registered as policy ``openpi``: in a study spec
``{"factory": "openpi", "kwargs": {"host": "10.0.0.5", "port": 8000, "layout": "droid"}}``.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from splatserve.capabilities import MAX_CHUNK_ROWS  # 1,024 rows: 100 s at 10 Hz

from bench.errors import BenchError
from bench.policies.base import (
    ACTION_DIM,
    ACTION_MODES,
    POLICIES,
    PolicyError,
    camera_images,
)
from bench.safety import DEFAULT_MAX_MESSAGE_BYTES, MAX_MESSAGE_BYTES

GRIPPER_MODES = ("opening_m", "closed_fraction")
EPISODE_CONTROL = ("auto", "on", "off")
#: Proprio index of each state component a handshake may name; 8 is the derived closed
#: fraction of the gripper (0 open .. 1 closed).
STATE_INDEX = {"x": 0, "y": 1, "z": 2, "qw": 3, "qx": 4, "qy": 5, "qz": 6, "opening": 7,
               "closed_fraction": 8}
DEFAULT_TIMEOUT_S = 10.0
#: Reply keys of the openpi protocol the client knows but does not read: not stored with the
#: rollout (``server_timing`` is the server's wall time, like the latency table not
#: deterministic; it stays in ``reply_extras``).
KNOWN_REPLY_KEYS = ("server_timing",)
#: Ended episodes whose reply extras wait for :meth:`WebsocketPolicy.episode_extras` (a
#: caller that never collects them holds at most this many).
KEPT_EPISODES = 64
MESSAGE_TOO_BIG = 1009  # websocket close code (RFC 6455)


@dataclass(frozen=True)
class RemoteConfig:
    """How bench observations map onto a server's keys, and its replies back onto actions.

    Attributes:
        host: Server host name or ``ws://`` / ``wss://`` URI.
        port: Server port (None: part of ``host``).
        image_keys: Bench camera name -> server key (cameras not listed are not sent; an
            absent camera is sent as zeros of its size when it has one).
        image_size: (height, width) to resize every image to with aspect-preserving
            padding (openpi ``resize_with_pad``), or None to send native images.
        image_sizes: Per-camera (height, width), overriding ``image_size``.
        required_cameras: Cameras the server cannot do without: an env lacking one is a
            one-line error when the policy is built (set by the handshake).
        state_keys: Server key -> indices into the 8-D proprio (position 0-2, quaternion
            3-6, opening 7; 8 is the closed fraction 0 open .. 1 closed) sent as float32.
        prompt_key: Server key of the language instruction ("" to not send it).
        extra_keys: Send the time stamp, episode seed and query index as
            ``bench/timestamp``, ``bench/episode_seed``, ``bench/query_index`` (``bench
            serve`` resets its policy at query 0; openpi ignores unknown keys).
        action_key: Key of the action array in the reply.
        action_columns: Reply columns giving (x, y, z, rx, ry, rz, gripper), in order.
        action_mode: "delta" (wrist-frame deltas) or "absolute" (world TCP targets).
        gripper: "opening_m" (metres) or "closed_fraction" (0 open .. 1 closed, DROID); with
            "closed_fraction" a state key holding exactly index 7 is sent as the fraction too.
        chunk_length: Rows of the reply to use (None: all).
        max_chunk_rows: A reply with more rows is malformed.
        timeout_s: Per-query wall-clock limit, seconds (None: the server's declared
            latency budget, else 10 s).
        connect_timeout_s: Limit of one connection attempt, seconds.
        retries: Extra attempts after a transport fault (refused, dropped, timed out).
        backoff_s: First wait before a retry, seconds (doubled each retry).
        api_key: Sent as ``Authorization: Api-Key ...`` (openpi servers that want one).
        max_message_bytes: Largest reply accepted, bytes (a larger one is a fault).
        handshake: Configure from the server's declared capabilities (when it has any).
        episode_control: "auto" (when the handshake says the server accepts it), "on", "off".
    """

    host: str = "127.0.0.1"
    port: int | None = 8000
    image_keys: Mapping[str, str] = field(
        default_factory=lambda: {"wrist": "observation/wrist_image"})
    image_size: tuple[int, int] | None = None
    image_sizes: Mapping[str, tuple[int, int]] = field(default_factory=dict)
    required_cameras: tuple[str, ...] = ()
    state_keys: Mapping[str, tuple[int, ...]] = field(
        default_factory=lambda: {"observation/state": tuple(range(8))})
    prompt_key: str = "prompt"
    extra_keys: bool = True
    action_key: str = "actions"
    action_columns: tuple[int, ...] = tuple(range(ACTION_DIM))
    action_mode: str = "delta"
    gripper: str = "opening_m"
    chunk_length: int | None = None
    max_chunk_rows: int = MAX_CHUNK_ROWS
    timeout_s: float | None = None
    connect_timeout_s: float = 10.0
    retries: int = 2
    backoff_s: float = 0.2
    api_key: str | None = None
    max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES
    handshake: bool = True
    episode_control: str = "auto"

    def __post_init__(self) -> None:
        if self.action_mode not in ACTION_MODES:
            raise BenchError(f"action_mode {self.action_mode!r} is not one of {ACTION_MODES}")
        if self.gripper not in GRIPPER_MODES:
            raise BenchError(f"gripper {self.gripper!r} is not one of {GRIPPER_MODES}")
        if self.episode_control not in EPISODE_CONTROL:
            raise BenchError(f"episode_control {self.episode_control!r} is not one of "
                             f"{EPISODE_CONTROL}")
        if len(self.action_columns) != ACTION_DIM:
            raise BenchError(f"action_columns must name {ACTION_DIM} reply columns "
                             f"(x y z rx ry rz gripper), got {list(self.action_columns)}")
        if self.image_size is not None:
            object.__setattr__(self, "image_size", tuple(int(v) for v in self.image_size))
        object.__setattr__(self, "image_sizes", {str(k): tuple(int(v) for v in size)
                                                 for k, size in self.image_sizes.items()})
        object.__setattr__(self, "required_cameras", tuple(self.required_cameras))
        object.__setattr__(self, "state_keys",
                           {k: tuple(int(i) for i in v) for k, v in self.state_keys.items()})
        if any(not 0 <= i <= 8 for v in self.state_keys.values() for i in v):
            raise BenchError(f"state_keys indices must be 0..8 (proprio 0-7, 8 = closed "
                             f"fraction), got {dict(self.state_keys)}")
        object.__setattr__(self, "action_columns", tuple(int(c) for c in self.action_columns))
        for name in ("timeout_s", "connect_timeout_s"):
            value = getattr(self, name)
            if value is not None and not value > 0:
                raise BenchError(f"{name} must be > 0 seconds, got {value}")
        if self.retries < 0 or self.backoff_s < 0:
            raise BenchError("retries and backoff_s must be >= 0")
        if not 1 <= self.max_chunk_rows <= MAX_CHUNK_ROWS:
            raise BenchError(f"max_chunk_rows must be 1..{MAX_CHUNK_ROWS}, got "
                             f"{self.max_chunk_rows}")
        if self.chunk_length is not None and not 1 <= self.chunk_length <= self.max_chunk_rows:
            raise BenchError(f"chunk_length must be 1..{self.max_chunk_rows} or null, got "
                             f"{self.chunk_length}")
        if not 1024 <= self.max_message_bytes <= MAX_MESSAGE_BYTES:
            raise BenchError(f"max_message_bytes must be 1024..{MAX_MESSAGE_BYTES}, got "
                             f"{self.max_message_bytes}")

    @property
    def uri(self) -> str:
        """The websocket address: ``ws://host`` (unless a scheme is given), ``:port`` if set."""
        from splatserve.client import ws_uri

        return ws_uri(self.host, self.port)

    @property
    def query_timeout_s(self) -> float:
        """The per-query limit in force (``timeout_s``, else the default)."""
        return DEFAULT_TIMEOUT_S if self.timeout_s is None else float(self.timeout_s)


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


def handshake_fields(capabilities: Any) -> dict[str, Any]:
    """:class:`RemoteConfig` fields from a server's :class:`splatserve.capabilities.Capabilities`.

    Raises BenchError when its actions are not a 7-D end-effector action (one line).
    """
    from splatserve.capabilities import CapabilityError

    try:
        columns, gripper = capabilities.action_columns()
    except CapabilityError as exc:
        raise BenchError(str(exc)) from None
    state_keys = {key: tuple(STATE_INDEX[n] for n in names)
                  for key, names in capabilities.state.items()}
    fields: dict[str, Any] = {
        "image_keys": {name: cam.key for name, cam in capabilities.cameras.items()},
        "image_size": None,
        "image_sizes": {name: cam.size for name, cam in capabilities.cameras.items()
                        if cam.size is not None},
        "required_cameras": tuple(name for name, cam in capabilities.cameras.items()
                                  if not cam.optional),
        "state_keys": state_keys,
        "prompt_key": capabilities.prompt_key,
        "action_key": capabilities.action_key,
        "action_columns": columns,
        "action_mode": capabilities.action_mode,
        "gripper": "closed_fraction" if gripper == "closed_fraction" else "opening_m",
        "chunk_length": capabilities.chunk_length,
    }
    if capabilities.latency_budget_ms is not None:
        fields["timeout_s"] = capabilities.latency_budget_ms / 1000.0
    return fields


def env_cameras(env: Any) -> list[str] | None:
    """The camera names an env's observations carry ([] in state mode; None: unknown)."""
    if env is None:
        return None
    unwrapped = getattr(env, "unwrapped", env)
    config = getattr(unwrapped, "config", None)
    if config is None or not hasattr(unwrapped, "rig"):
        return None
    if getattr(config, "obs_mode", "rgb") != "rgb":
        return []
    return sorted(camera.name for camera in unwrapped.rig)


def check_cameras(config: RemoteConfig, have: list[str] | None, *, task: str) -> None:
    """Refuse (one line) a server that requires a camera ``have`` lacks (None: unknown)."""
    missing = [c for c in config.required_cameras if have is not None and c not in have]
    if missing:
        wants = {c: config.image_keys.get(c) for c in missing}
        raise BenchError(f"policy server {config.uri} wants camera(s) {wants} but task {task!r} "
                         f"gives {have}; serve a policy for this camera rig, or run the task "
                         "with those cameras")


def check_server(kwargs: Mapping[str, Any], *, cameras: list[str], task: str) -> bool:
    """Connect once, read the server's handshake, refuse a mismatch with ``task``, close.

    What building the policy checks (a non 7-D end-effector action layout, a malformed
    handshake), plus the cameras against ``cameras`` (the task env's rig), each a one-line
    :class:`~bench.errors.BenchError`; nothing is sent but the connection. Returns False
    when the server cannot be reached now (its rollouts retry, and end as ``error`` if it
    stays away), True otherwise (also when ``handshake`` is off: nothing to check).

    Args:
        kwargs: The policy's keyword arguments (host, port, layout, RemoteConfig fields).
        cameras: Camera names the task's env gives ([]: state observations).
        task: Task name (for the message).
    """
    policy = WebsocketPolicy(None, **kwargs)  # reads the handshake when it is on
    try:
        if not policy.config.handshake:
            return True
        if policy.capabilities is not None:
            check_cameras(policy.config, cameras, task=task)
        return policy._client is not None  # closed again when the connection failed
    finally:
        policy.close()


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
        env: The (unwrapped) environment (gives the opening range and the cameras).
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
        self._base = config or RemoteConfig(**LAYOUTS[layout])
        self._overrides = dict(overrides)
        self._explicit = set(overrides) | ({f.name for f in dataclasses.fields(RemoteConfig)}
                                           if config is not None else set())
        self.config = self._configure(None)
        self.name = name
        self.env = env
        self.task = str(getattr(getattr(getattr(env, "unwrapped", env), "task", None),
                                "name", "")) if env is not None else ""
        self.max_opening = float(env.world.robot.max_opening) if env is not None else 0.11
        self.metadata: dict[str, Any] = {}
        self.capabilities: Any = None
        self.latencies_ms: list[float] = []
        self.reply_extras: list[dict[str, Any]] = []
        self._ended: list[tuple[int, list[dict[str, Any]]]] = []  # (seed, extras), oldest first
        self._client: Any = None
        self._episode_seed = 0
        self._query = 0
        self._episode_open = False
        if self.config.handshake:
            self._read_handshake()

    def _configure(self, capabilities: Any) -> RemoteConfig:
        """Preset < handshake < the user's keyword arguments."""
        fields = {}
        if capabilities is not None:
            fields = {k: v for k, v in handshake_fields(capabilities).items()
                      if k not in self._explicit}
        try:
            return dataclasses.replace(self._base, **{**fields, **self._overrides})
        except TypeError as exc:
            raise BenchError(f"remote policy: {exc}; valid options: "
                             f"{[f.name for f in dataclasses.fields(RemoteConfig)]}") from None

    def _read_handshake(self) -> None:
        """Connect once to read the metadata; configure from it and check it against the env.

        A server that cannot be reached now is not an error here: the rollouts retry and,
        if it stays away, end as ``error``.
        """
        from websockets.exceptions import WebSocketException

        try:
            self._connect()
        except (OSError, TimeoutError, WebSocketException, PolicyError):
            self.close()

    def _apply(self, metadata: dict[str, Any]) -> None:
        from splatserve.capabilities import Capabilities, CapabilityError

        self.metadata = metadata
        if not self.config.handshake:
            return
        try:
            capabilities = Capabilities.from_metadata(metadata)
        except CapabilityError as exc:
            self.close()
            raise BenchError(f"policy server {self.config.uri}: {exc}") from None
        if capabilities is None:
            return
        try:
            self.config = self._configure(capabilities)
        except BenchError as exc:
            self.close()
            raise BenchError(f"policy server {self.config.uri}: {exc}") from None
        self.capabilities = capabilities
        try:
            check_cameras(self.config, env_cameras(self.env), task=self.task)
        except BenchError:
            self.close()
            raise

    @property
    def episode_control(self) -> bool:
        """Whether episodes are opened and closed with control messages."""
        mode = self.config.episode_control
        if mode != "auto":
            return mode == "on"
        return bool(self.capabilities is not None and self.capabilities.episode_control)

    # -- connection ---------------------------------------------------------------------
    def _connect(self) -> None:
        from splatserve.client import PolicyClient, ServerError

        cfg = self.config
        client = PolicyClient(cfg.uri, api_key=cfg.api_key,
                              max_message_bytes=cfg.max_message_bytes,
                              open_timeout=cfg.connect_timeout_s)
        self._client = client
        try:
            metadata = client.connect(timeout=cfg.query_timeout_s)
        except ServerError as exc:
            raise PolicyError(f"policy server {cfg.uri}: server error: {exc}") from None
        self._apply(metadata)

    def close(self) -> None:
        """Close the websocket connection, if any (never raises)."""
        if self._client is not None:
            self._client.close()
        self._client = None

    def __del__(self) -> None:
        self.close()

    # -- policy API -----------------------------------------------------------------------
    def reset(self, *, seed: int | None = None) -> None:
        """Start an episode: record its seed, reset the query count, latencies and extras.

        The ``episode_start`` control message (when used) goes with the first query, so a
        server fault ends the rollout as ``error`` instead of escaping ``reset``.
        """
        self._episode_seed = 0 if seed is None else int(seed)
        self._query = 0
        self._episode_open = False
        self.latencies_ms = []
        self.reply_extras = []

    def act(self, obs: Mapping[str, Any], info: Mapping[str, Any] | None = None
            ) -> np.ndarray:  # -> float32 [T, 7]
        """Query the server for an action chunk (latency in ms recorded); float32 [T, 7]."""
        request = self.encode(obs)
        start = time.perf_counter()
        reply = self._roundtrip(request)
        self.latencies_ms.append((time.perf_counter() - start) * 1000.0)
        self._query += 1
        return self.decode(reply)

    def end_episode(self, *, success: bool = False) -> None:
        """Send ``episode_end`` (when episode control is on and an episode is open)."""
        if self._episode_open and self.episode_control:
            self._control({"__ctrl__": "episode_end", "__success__": bool(success)})
        self._episode_open = False
        # a cleanly ended episode's extras wait for episode_extras (a vector run may reset
        # this policy for its next episode before the record of this one is made)
        self._ended.append((self._episode_seed, self.reply_extras))
        del self._ended[:-KEPT_EPISODES]

    def episode_extras(self, *, seed: int) -> list[dict[str, Any]]:
        """The unknown reply keys of the ended episode started with ``seed``, one dict per query.

        Every reply key but the action array and :data:`KNOWN_REPLY_KEYS`, values as decoded
        (numpy arrays included); handed out once (the newest episode of that seed), [] when
        there is none (an episode that ended in a fault is not kept).
        """
        for i in range(len(self._ended) - 1, -1, -1):
            if self._ended[i][0] == int(seed):
                extras = self._ended.pop(i)[1]
                return [{k: v for k, v in query.items() if k not in KNOWN_REPLY_KEYS}
                        for query in extras]
        return []

    # -- layout ---------------------------------------------------------------------------
    def encode(self, obs: Mapping[str, Any]) -> dict[str, Any]:
        """The server request for a policy observation (see :class:`RemoteConfig`)."""
        cfg = self.config
        images = obs.get("images") or camera_images(obs)
        request: dict[str, Any] = {}
        for camera, key in cfg.image_keys.items():
            size = cfg.image_sizes.get(camera, cfg.image_size)
            image = images.get(camera)
            if image is None:
                if size is None:
                    continue
                image = np.zeros((*size, 3), np.uint8)
            elif size is not None:
                image = resize_with_pad(np.asarray(image), *size)
            request[key] = np.ascontiguousarray(image, dtype=np.uint8)
        proprio = np.asarray(obs["proprio"], dtype=np.float32)
        closed = np.float32(1.0) - np.clip(proprio[7:8] / np.float32(self.max_opening),
                                           0.0, 1.0).astype(np.float32)
        extended = np.concatenate([proprio[:8], closed])
        for key, index in cfg.state_keys.items():
            if cfg.gripper == "closed_fraction" and index == (7,):
                index = (8,)  # the DROID layout: the gripper as a closed fraction
            request[key] = extended[list(index)].astype(np.float32)
        if cfg.prompt_key:
            request[cfg.prompt_key] = str(obs.get("prompt", ""))
        if cfg.extra_keys:
            request["bench/timestamp"] = float(obs.get("timestamp", 0.0))
            request["bench/episode_seed"] = self._episode_seed
            request["bench/query_index"] = self._query
        return request

    def decode(self, reply: Any) -> np.ndarray:  # -> float32 [T, 7]
        """Bench action rows from a server reply; PolicyError when it is malformed.

        Every other reply key is kept in :attr:`reply_extras` (one dict per query).
        """
        cfg = self.config
        where = f"policy server {cfg.uri}"
        if not isinstance(reply, dict) or cfg.action_key not in reply:
            keys = sorted(map(str, reply)) if isinstance(reply, dict) else type(reply).__name__
            raise PolicyError(f"{where}: reply has no {cfg.action_key!r} array (got {keys})")
        self.reply_extras.append({k: v for k, v in reply.items() if k != cfg.action_key})
        actions = reply[cfg.action_key]
        if not isinstance(actions, np.ndarray) or actions.dtype.kind != "f":
            kind = actions.dtype if isinstance(actions, np.ndarray) else type(actions).__name__
            raise PolicyError(f"{where}: {cfg.action_key!r} has dtype {kind}, expected float")
        if actions.ndim != 2 or actions.shape[1] <= max(cfg.action_columns) or not len(actions):
            raise PolicyError(f"{where}: {cfg.action_key!r} has shape {tuple(actions.shape)}, "
                              f"expected [T, >= {max(cfg.action_columns) + 1}]")
        if len(actions) > cfg.max_chunk_rows:
            raise PolicyError(f"{where}: {cfg.action_key!r} has {len(actions)} rows, more than "
                              f"max_chunk_rows={cfg.max_chunk_rows}")
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
    def _episode_start_message(self) -> dict[str, Any]:
        return {"__ctrl__": "episode_start", "__experiment__": "splatbench",
                "__task__": self.task, "__episode_id__": self._episode_seed}

    def _control(self, message: dict[str, Any]) -> None:
        """Send one control message and check its ``__ack__`` (PolicyError otherwise)."""
        reply = self._roundtrip(message, opening=False)
        if not isinstance(reply, dict) or reply.get("__ack__") != message["__ctrl__"]:
            got = sorted(map(str, reply)) if isinstance(reply, dict) else type(reply).__name__
            raise PolicyError(f"policy server {self.config.uri}: {message['__ctrl__']} was not "
                              f"acknowledged (got {got})")

    def _roundtrip(self, request: dict[str, Any], *, opening: bool = True) -> Any:
        """Send ``request`` (first opening the episode when due); the decoded reply.

        After a reconnect the episode is opened again on the new connection.
        """
        from splatserve.client import ReplyError, ServerError
        from websockets.exceptions import WebSocketException

        cfg = self.config
        last = ""
        for attempt in range(cfg.retries + 1):
            if attempt:
                time.sleep(cfg.backoff_s * 2 ** (attempt - 1))
            try:
                if self._client is None or not self._client.connected:
                    self._connect()
                    self._episode_open = False
                if opening and not self._episode_open and self.episode_control:
                    self._control(self._episode_start_message())
                if opening:
                    self._episode_open = True
                return self._client.infer(request, timeout=cfg.query_timeout_s)
            except TimeoutError:
                last = f"no reply within {cfg.query_timeout_s:g} s"
            except (OSError, WebSocketException) as exc:
                sent = getattr(exc, "sent", None)
                if sent is not None and sent.code == MESSAGE_TOO_BIG:  # it would repeat
                    self.close()
                    raise PolicyError(f"policy server {cfg.uri}: reply larger than "
                                      f"max_message_bytes={cfg.max_message_bytes}") from None
                last = f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
            except ServerError as exc:
                raise PolicyError(f"policy server {cfg.uri}: server error: {exc}") from None
            except ReplyError as exc:
                raise PolicyError(f"policy server {cfg.uri}: {exc}") from None
            self.close()  # a timed-out or broken connection is not reused
        raise PolicyError(f"policy server {cfg.uri}: {last} "
                          f"(after {cfg.retries + 1} attempts)")


POLICIES.register(
    "openpi",
    WebsocketPolicy,
    privileged=False,
    remote=True,
    description="a policy behind an openpi-protocol websocket server (openpi serve_policy.py, "
    "splatserve, bench serve); kwargs: host, port, layout, RemoteConfig fields",
)
