"""splatserve: serve a Python policy over the openpi websocket protocol, from its own environment.

Depends on numpy, msgpack and websockets only. :class:`~splatserve.server.PolicyServer`
serves any object with ``infer(obs) -> dict``; :class:`~splatserve.capabilities.Capabilities`
is the handshake it declares; :class:`~splatserve.client.PolicyClient` is the transport of a
client; ``python -m splatserve`` serves ``module:factory`` and ``python -m splatserve.lerobot``
a LeRobot checkpoint.
"""

__version__ = "0.1.0"
