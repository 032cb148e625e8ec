"""A minimal openpi-protocol client (:class:`PolicyClient`): metadata, infer, episode control.

The transport only; what goes into an observation is the caller's business (splatbench's
``openpi`` policy builds its requests from the server's handshake). Faults:

* a text frame from the server is :class:`ServerError` (its one line);
* a reply that is not a msgpack map, or a control reply without the matching ``__ack__``, is
  :class:`ReplyError`;
* a refused, dropped or timed-out connection raises what ``websockets`` raises (``OSError``,
  ``websockets.exceptions.WebSocketException``, ``TimeoutError``): the caller decides whether
  to retry.

Incoming messages are bounded by ``max_message_bytes`` (openpi-client leaves them unbounded).
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping
from typing import Any

from splatserve import wire
from splatserve.server import DEFAULT_MAX_MESSAGE_BYTES


class ServerError(RuntimeError):
    """The server answered with a text frame (its error message)."""


class ReplyError(RuntimeError):
    """The server's reply is not what the protocol says."""


def ws_uri(host: str, port: int | None) -> str:
    """``ws://host[:port]`` (a host that already has a ``ws://`` / ``wss://`` scheme is kept)."""
    base = host if host.startswith(("ws://", "wss://")) else f"ws://{host}"
    return base if port is None else f"{base}:{port}"


class PolicyClient:
    """One connection to an openpi-protocol policy server.

    Args:
        uri: ``ws://host:port``.
        api_key: Sent as ``Authorization: Api-Key ...``.
        max_message_bytes: Largest reply accepted, bytes.
        open_timeout: Limit of the connection handshake, seconds.
    """

    def __init__(self, uri: str, *, api_key: str | None = None,
                 max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES,
                 open_timeout: float = 10.0) -> None:
        self.uri, self.api_key = uri, api_key
        self.max_message_bytes, self.open_timeout = int(max_message_bytes), float(open_timeout)
        self.metadata: dict[str, Any] = {}
        self._ws: Any = None
        self._stack: contextlib.ExitStack | None = None

    @property
    def connected(self) -> bool:
        """Whether a connection is open."""
        return self._ws is not None

    def connect(self, timeout: float | None = None) -> dict[str, Any]:
        """Open the connection and read the server's metadata (a dict; {} if it sent none)."""
        from websockets.sync.client import connect

        self.close()
        headers = {"Authorization": f"Api-Key {self.api_key}"} if self.api_key else None
        stack = contextlib.ExitStack()
        ws = stack.enter_context(connect(self.uri, compression=None,
                                         max_size=self.max_message_bytes,
                                         open_timeout=self.open_timeout,
                                         additional_headers=headers))
        self._ws, self._stack = ws, stack
        first = ws.recv(timeout=timeout if timeout is not None else self.open_timeout)
        if isinstance(first, str):
            self.close()
            raise ServerError(first.strip().splitlines()[-1] if first.strip() else "(empty)")
        meta = wire.unpackb(first)
        self.metadata = dict(meta) if isinstance(meta, Mapping) else {}
        return self.metadata

    def _roundtrip(self, message: Mapping[str, Any], timeout: float | None) -> dict[str, Any]:
        if self._ws is None:
            self.connect(timeout)
        self._ws.send(wire.packb(message))
        reply = self._ws.recv(timeout=timeout)
        if isinstance(reply, str):
            text = reply.strip()
            raise ServerError(text.splitlines()[-1] if text else "(empty)")
        try:
            out = wire.unpackb(reply)
        except Exception as exc:  # noqa: BLE001 - any decode failure is a malformed reply
            raise ReplyError(f"malformed reply ({type(exc).__name__})") from None
        if not isinstance(out, dict):
            raise ReplyError(f"reply is a {type(out).__name__}, expected a map")
        return out

    def infer(self, obs: Mapping[str, Any], *, timeout: float | None = None) -> dict[str, Any]:
        """Send one observation; the reply dict."""
        return self._roundtrip(obs, timeout)

    def _control(self, message: dict[str, Any], timeout: float | None) -> dict[str, Any]:
        reply = self._roundtrip(message, timeout)
        if reply.get("__ack__") != message["__ctrl__"]:
            raise ReplyError(f"{message['__ctrl__']} answered with {sorted(map(str, reply))}, "
                             f"not {{'__ack__': {message['__ctrl__']!r}}}")
        return reply

    def episode_start(self, *, experiment: str = "", task: str = "", episode_id: int = -1,
                      timeout: float | None = None) -> dict[str, Any]:
        """``{"__ctrl__": "episode_start", ...}`` (openpi-client's fields); the ack."""
        return self._control({"__ctrl__": "episode_start", "__experiment__": experiment,
                              "__task__": task, "__episode_id__": int(episode_id)}, timeout)

    def episode_end(self, *, success: bool = False,
                    timeout: float | None = None) -> dict[str, Any]:
        """``{"__ctrl__": "episode_end", "__success__": success}``; the ack."""
        return self._control({"__ctrl__": "episode_end", "__success__": bool(success)}, timeout)

    def close(self) -> None:
        """Close the connection, if any (never raises)."""
        if self._stack is not None:
            try:
                self._stack.close()
            except Exception:  # noqa: BLE001 - closing a dead socket must not raise
                pass
        self._ws = self._stack = None

    def __enter__(self) -> PolicyClient:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()
