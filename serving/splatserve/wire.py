"""The openpi wire format: msgpack with numpy arrays, one binary websocket message per query.

This is the protocol of openpi's policy servers (``openpi-client``'s ``msgpack_numpy`` and
``WebsocketClientPolicy``): on connect the server sends one packed metadata dict; then each
client message is a packed observation dict (or an episode control message, ``{"__ctrl__":
...}``) and each reply a packed dict (``{"actions": [T, A], ...}`` or ``{"__ack__": ...}``);
a *text* reply is a server-side error message. An ndarray travels as a map
``{b"__ndarray__": True, b"data": raw bytes, b"dtype": dtype.str, b"shape": [..]}`` and a
numpy scalar as ``{b"__npgeneric__": True, b"data": item, b"dtype": dtype.str}``; object,
void and complex arrays are refused (no pickle).

``openpi-client`` 0.1.2 pins ``numpy<2``, so the kit speaks the protocol with ``msgpack``
directly; splatbench's tests check the bytes against ones produced by
``openpi_client.msgpack_numpy.packb``.
"""

from __future__ import annotations

from typing import Any

import msgpack
import numpy as np

_REFUSED_KINDS = ("O", "V", "c")


def _encode(obj: Any) -> Any:
    if isinstance(obj, np.ndarray | np.generic) and obj.dtype.kind in _REFUSED_KINDS:
        raise TypeError(f"cannot send numpy dtype {obj.dtype} over the wire")
    if isinstance(obj, np.ndarray):
        return {b"__ndarray__": True, b"data": np.ascontiguousarray(obj).tobytes(),
                b"dtype": obj.dtype.str, b"shape": list(obj.shape)}
    if isinstance(obj, np.generic):
        return {b"__npgeneric__": True, b"data": obj.item(), b"dtype": obj.dtype.str}
    raise TypeError(f"cannot send {type(obj).__name__} over the wire")


def _decode(obj: dict) -> Any:
    if b"__ndarray__" in obj:
        dtype = np.dtype(obj[b"dtype"])
        if dtype.kind in _REFUSED_KINDS:
            raise TypeError(f"refusing numpy dtype {dtype} from the wire")
        return np.frombuffer(obj[b"data"], dtype=dtype).reshape(obj[b"shape"])
    if b"__npgeneric__" in obj:
        return np.dtype(obj[b"dtype"]).type(obj[b"data"])
    return obj


def packb(obj: Any) -> bytes:
    """Serialise a dict of numpy arrays / scalars / str / numbers (openpi layout)."""
    return msgpack.packb(obj, default=_encode)


def unpackb(data: bytes) -> Any:
    """Inverse of :func:`packb` (arrays are read-only views of the message)."""
    return msgpack.unpackb(data, object_hook=_decode)
