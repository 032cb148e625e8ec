"""``python -m splatserve``: serve ``module:attr`` (a policy or a factory) over openpi's protocol.

``attr`` is either a policy object (``infer(obs) -> dict``) shared by every connection, or a
callable (class or factory) called with ``--kwargs`` once per connection. The handshake is
the policy's ``capabilities`` attribute (a :class:`~splatserve.capabilities.Capabilities` or
its metadata dict) or ``--capabilities FILE.json`` (the metadata form). Bad input is one line
on stderr and exit 2.
"""

from __future__ import annotations

import argparse
import importlib
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from splatserve.capabilities import Capabilities, CapabilityError
from splatserve.server import DEFAULT_MAX_MESSAGE_BYTES, KitError, PolicyServer


class OneLineParser(argparse.ArgumentParser):
    """argparse whose usage errors are one line and exit 2."""

    def error(self, message: str) -> None:  # type: ignore[override]
        """Print the one-line usage error and exit 2."""
        print(f"{self.prog}: error: {message}", file=sys.stderr)
        raise SystemExit(2)


def add_server_arguments(parser: argparse.ArgumentParser) -> None:
    """``--host``, ``--port``, ``--max-message-bytes``, ``--latency-budget-ms``."""
    parser.add_argument("--host", default="127.0.0.1",
                        help="interface (0.0.0.0 to serve other machines)")
    parser.add_argument("--port", type=int, default=8000, help="TCP port (0: any free port)")
    parser.add_argument("--max-message-bytes", type=int, default=DEFAULT_MAX_MESSAGE_BYTES,
                        help="largest request accepted, bytes (a larger one closes its "
                        "connection with code 1009)")


def check_server_arguments(args: argparse.Namespace) -> None:
    """Refuse a port or a message bound out of range (KitError)."""
    if not 0 <= args.port <= 65535:
        raise KitError(f"--port must be in 0..65535, got {args.port}")
    if not 1024 <= args.max_message_bytes <= 1 << 30:
        raise KitError(f"--max-message-bytes must be 1024 .. {1 << 30}, got "
                       f"{args.max_message_bytes}")


def run_server(server: PolicyServer, args: argparse.Namespace) -> int:
    """Bind, serve until Ctrl-C; 0."""
    server.bind(args.host, args.port)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    return 0


def guarded(main: Any, argv: Sequence[str] | None) -> int:
    """Run ``main(argv)``; a user error is one line on stderr and exit 2."""
    try:
        return main(argv)
    except (KitError, CapabilityError) as exc:
        print(f"splatserve: error: {str(exc).splitlines()[0]}", file=sys.stderr)
        return 2


def load_attr(ref: str) -> Any:
    """``module:attr`` imported (one-line KitError when it cannot be)."""
    module_name, _, attr = ref.partition(":")
    if not module_name or not attr:
        raise KitError(f"--policy {ref!r} is not module:attr; pass e.g. mypkg.pol:make_policy")
    try:
        module = importlib.import_module(module_name)
    except Exception as exc:  # noqa: BLE001 - any import failure is the user's module
        raise KitError(f"cannot import {module_name!r} ({type(exc).__name__}: "
                       f"{str(exc).splitlines()[0] if str(exc) else ''}); check PYTHONPATH"
                       ) from None
    if not hasattr(module, attr):
        raise KitError(f"module {module_name!r} has no attribute {attr!r}")
    return getattr(module, attr)


def capabilities_of(obj: Any, path: str | None) -> Capabilities | None:
    """The handshake: ``--capabilities FILE`` first, else the object's ``capabilities``."""
    if path:
        try:
            data = json.loads(Path(path).read_text(encoding="utf-8"))
        except (OSError, json.JSONDecodeError) as exc:
            raise KitError(f"--capabilities {path}: cannot read JSON ({exc}); give the "
                           "capabilities dict of docs/policies.md") from None
        return Capabilities.from_metadata({"capabilities": data})
    caps = getattr(obj, "capabilities", None)
    if caps is None or isinstance(caps, Capabilities):
        return caps
    return Capabilities.from_metadata({"capabilities": caps})


def _main(argv: Sequence[str] | None) -> int:
    parser = OneLineParser(prog="splatserve", description=__doc__.split("\n")[0])
    parser.add_argument("--policy", required=True, help="module:attr (object or factory)")
    parser.add_argument("--kwargs", default="{}", help="factory keyword arguments (JSON object)")
    parser.add_argument("--capabilities", default=None, help="handshake JSON file")
    parser.add_argument("--name", default=None, help="policy name in the metadata")
    add_server_arguments(parser)
    args = parser.parse_args(argv)
    check_server_arguments(args)
    try:
        kwargs = json.loads(args.kwargs)
    except json.JSONDecodeError as exc:
        raise KitError(f"--kwargs is not JSON ({exc.msg}); pass an object like "
                       "'{\"gain\": 2}'") from None
    if not isinstance(kwargs, dict):
        raise KitError("--kwargs must be a JSON object")
    sys.path.insert(0, ".")  # a module in the working directory, as `python -m` users expect
    obj = load_attr(args.policy)
    name = args.name or args.policy
    if hasattr(obj, "infer") and not isinstance(obj, type):
        server = PolicyServer(obj, capabilities=capabilities_of(obj, args.capabilities),
                              name=name, max_message_bytes=args.max_message_bytes)
    elif callable(obj):
        try:
            first = obj(**kwargs)  # built at start: a broken factory fails here, not per client
        except Exception as exc:  # noqa: BLE001 - the user's factory
            raise KitError(f"{args.policy}(**kwargs) raised {type(exc).__name__}: "
                           f"{str(exc).splitlines()[0] if str(exc) else ''}") from None
        if not callable(getattr(first, "infer", None)):
            raise KitError(f"{args.policy} returned {type(first).__name__}, which has no "
                           "infer(obs) method")
        built = [first]

        def factory() -> Any:  # the first connection gets the instance built at start
            return built.pop() if built else obj(**kwargs)

        caps = capabilities_of(first, args.capabilities)
        server = PolicyServer(factory=factory, capabilities=caps, name=name,
                              max_message_bytes=args.max_message_bytes)
    else:
        raise KitError(f"{args.policy} is neither a policy (infer method) nor callable")
    return run_server(server, args)


def main(argv: Sequence[str] | None = None) -> int:
    """Console entry point."""
    return guarded(_main, argv)
