"""Serve a Python policy object over the openpi websocket protocol (:class:`PolicyServer`).

The policy is anything with ``infer(obs: dict) -> dict`` (openpi's ``BasePolicy``); optional
hooks ``on_episode_start(experiment, task, episode_id)`` (else ``reset()``) and
``on_episode_end(success)`` are called for episode control messages. Per connection:

1. the server sends the metadata dict (``server``, ``policy``, anything given, and the
   ``capabilities`` handshake of :mod:`splatserve.capabilities`);
2. each binary message is a msgpack-numpy dict (:mod:`splatserve.wire`): an observation,
   answered with ``policy.infer(obs)`` plus ``server_timing`` ``{"infer_ms"}``; or a control
   message ``{"__ctrl__": "episode_start" | "episode_end", ...}``, answered with
   ``{"__ack__": "episode_start" | "episode_end"}`` (an unknown control: ``{"__ack__":
   "ignored"}``), as openpi's ``WebsocketPolicyServer`` does;
3. an exception (in the policy, or a malformed message) is answered with a one-line text
   frame ``"<Type>: <message>"`` and the connection is closed (code 1011); the server keeps
   serving other connections. A message over ``max_message_bytes`` closes its connection
   with code 1009.

``GET /healthz`` answers 200 (openpi's health check). Each connection runs in its own thread
(``websockets.sync``); with ``factory`` every connection gets a fresh policy, with ``policy``
one object is shared and its calls are serialised by a lock.
"""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any

from splatserve import __version__, wire
from splatserve.capabilities import Capabilities

SERVER_ID = f"splatserve/{__version__}"
#: Largest request accepted by default: five 1024 x 1024 RGB images fit.
DEFAULT_MAX_MESSAGE_BYTES = 16 << 20
MESSAGE_TOO_BIG = 1009  # websocket close codes (RFC 6455)
INTERNAL_ERROR = 1011


class KitError(ValueError):
    """A user-facing error of the kit (one line: the problem and the fix)."""


def one_line(exc: BaseException) -> str:
    """``"<Type>: <first line of the message>"``: what a text error frame carries."""
    text = str(exc).strip()
    return f"{type(exc).__name__}: {text.splitlines()[0] if text else ''}".rstrip(": ")


class PolicyServer:
    """A policy served over the openpi protocol (module docstring).

    Args:
        policy: The policy object shared by every connection (or None with ``factory``).
        factory: Called once per connection for a fresh policy (or None with ``policy``).
        capabilities: The handshake sent in the metadata (None: no ``capabilities`` key).
        metadata: Extra metadata keys (``server`` and ``policy`` are always set).
        name: Policy name for the metadata and the log line.
        max_message_bytes: Largest request accepted, bytes.
        log: Where the start line and connection notes go (None: silent).
    """

    def __init__(self, policy: Any = None, *, factory: Callable[[], Any] | None = None,
                 capabilities: Capabilities | None = None,
                 metadata: Mapping[str, Any] | None = None, name: str = "policy",
                 max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES,
                 log: Any = sys.stderr) -> None:
        if (policy is None) == (factory is None):
            raise KitError("give exactly one of policy= (shared) or factory= (per connection)")
        if not 1024 <= int(max_message_bytes) <= 1 << 30:
            raise KitError(f"max_message_bytes must be 1 KiB .. 1 GiB, got {max_message_bytes}")
        self.policy, self.factory, self.name = policy, factory, name
        self.capabilities = capabilities
        self.max_message_bytes = int(max_message_bytes)
        self.log = log
        self.metadata: dict[str, Any] = {"server": SERVER_ID, "policy": name,
                                         **dict(metadata or {})}
        if capabilities is not None:
            self.metadata["capabilities"] = capabilities.to_metadata()
        self._lock = threading.Lock() if policy is not None else None
        self._server: Any = None

    # -- one connection -------------------------------------------------------------------
    def _say(self, text: str) -> None:
        if self.log is not None:
            print(f"[splatserve] {text}", file=self.log, flush=True)

    def _call(self, fn: Callable[..., Any], *args: Any) -> Any:
        if self._lock is None:
            return fn(*args)
        with self._lock:
            return fn(*args)

    def control(self, policy: Any, message: Mapping[str, Any]) -> dict[str, Any]:
        """Run an episode control message's hook; the ``{"__ack__": ...}`` reply."""
        kind = message["__ctrl__"]
        if kind == "episode_start":
            hook = getattr(policy, "on_episode_start", None)
            if hook is not None:
                self._call(hook, message.get("__experiment__", "unknown"),
                           message.get("__task__", ""), message.get("__episode_id__", -1))
            elif callable(getattr(policy, "reset", None)):
                self._call(policy.reset)
            return {"__ack__": "episode_start"}
        if kind == "episode_end":
            hook = getattr(policy, "on_episode_end", None)
            if hook is not None:
                self._call(hook, bool(message.get("__success__", False)))
            return {"__ack__": "episode_end"}
        return {"__ack__": "ignored"}

    def infer(self, policy: Any, request: Mapping[str, Any]) -> dict[str, Any]:
        """The reply to one observation: ``policy.infer`` plus ``server_timing``."""
        start = time.perf_counter()
        out = self._call(policy.infer, request)
        if not isinstance(out, Mapping):
            raise TypeError(f"policy.infer returned {type(out).__name__}, expected a dict")
        reply = dict(out)
        reply.setdefault("server_timing", {"infer_ms": (time.perf_counter() - start) * 1e3})
        return reply

    def handle(self, websocket: Any) -> None:
        """Serve one connection until it closes (the ``websockets.sync`` handler)."""
        from websockets.exceptions import ConnectionClosed

        try:
            policy = self.factory() if self.factory is not None else self.policy
        except Exception as exc:  # noqa: BLE001 - reported to the client, then closed
            websocket.send(one_line(exc))
            websocket.close(INTERNAL_ERROR, "policy could not be built")
            return
        websocket.send(wire.packb(self.metadata))
        while True:
            try:
                message = websocket.recv()
            except ConnectionClosed as exc:
                if exc.sent is not None and exc.sent.code == MESSAGE_TOO_BIG:
                    self._say(f"closed a connection: {exc.sent.reason} (a request larger than "
                              f"{self.max_message_bytes} bytes); still serving")
                return
            try:
                if isinstance(message, str):
                    raise ValueError("text message; send a msgpack-numpy binary message")
                request = wire.unpackb(message)
                if not isinstance(request, dict):
                    raise ValueError(f"request is a {type(request).__name__}, expected a map")
                if "__ctrl__" in request:
                    reply = self.control(policy, request)
                else:
                    reply = self.infer(policy, request)
                data = wire.packb(reply)
            except Exception as exc:  # noqa: BLE001 - one text frame, then close
                try:
                    websocket.send(one_line(exc))
                    websocket.close(INTERNAL_ERROR, "policy error; reason in the previous frame")
                except ConnectionClosed:
                    pass
                return
            try:
                websocket.send(data)
            except ConnectionClosed:
                return

    # -- the listening socket -------------------------------------------------------------
    def bind(self, host: str = "127.0.0.1", port: int = 8000) -> int:
        """Open the listening socket (before :meth:`serve_forever`); the bound port."""
        import http

        from websockets.sync.server import serve as ws_serve

        def health(connection: Any, request: Any) -> Any:
            if request.path == "/healthz":
                return connection.respond(http.HTTPStatus.OK, "OK\n")
            return None

        try:
            self._server = ws_serve(self.handle, host, port, compression=None,
                                    max_size=self.max_message_bytes, process_request=health)
        except OSError as exc:
            raise KitError(f"cannot listen on {host}:{port} ({exc.strerror or exc}); choose "
                           "another --port") from None
        bound = int(self._server.socket.getsockname()[1])
        self._say(f"{self.name} on ws://{host}:{bound}")
        return bound

    @property
    def listener(self) -> Any:
        """The bound ``websockets`` server (``.socket``, ``.shutdown()``), None before bind."""
        return self._server

    def serve_forever(self) -> None:
        """Serve until :meth:`shutdown` (or KeyboardInterrupt); call :meth:`bind` first."""
        if self._server is None:
            raise KitError("call bind() before serve_forever()")
        with self._server:
            self._server.serve_forever()

    def shutdown(self) -> None:
        """Stop serving (from another thread)."""
        if self._server is not None:
            self._server.shutdown()

    def start(self, host: str = "127.0.0.1", port: int = 0) -> int:
        """Bind and serve in a daemon thread (tests, notebooks); the bound port."""
        bound = self.bind(host, port)
        threading.Thread(target=self.serve_forever, daemon=True,
                         name=f"splatserve-{bound}").start()
        return bound
