"""The openpi wire format (msgpack-numpy), from the policy-server kit ``splatserve``.

One implementation serves both sides: the kit's :mod:`splatserve.wire` (the kit installs in
any environment: numpy, msgpack, websockets). ``tests/bench/policies`` checks its bytes
against ones produced by ``openpi_client.msgpack_numpy.packb``.
"""

from __future__ import annotations

from splatserve.wire import packb, unpackb

__all__ = ["packb", "unpackb"]
