"""``bench serve`` argument parsing (stdlib only; outside bench.policies, whose import is heavy)."""

from __future__ import annotations

from typing import Any


def add_parser(subparsers: Any) -> None:
    """Register ``bench serve``."""
    p = subparsers.add_parser(
        "serve", help="serve a bench policy over the openpi websocket protocol (splatserve)",
        description="Serve a registered policy or an entry point package.module:factory on "
        "ws://HOST:PORT (msgpack-numpy, openpi protocol; see docs/policies.md).")
    p.add_argument("--policy", required=True,
                   help="registered policy name or entry point package.module:factory")
    p.add_argument("--port", type=int, default=8000, help="TCP port (0 = any free port)")
    p.add_argument("--host", default="127.0.0.1", help="interface")
    p.add_argument("--task", default="cup", help="task the policy is built for")
    p.add_argument("--scene", default=None,
                   help="scene bundle for the policy's env [default: a generated sample room]")
    p.add_argument("--chunk-size", type=int, default=None, help="rows per chunk [task default]")
    p.add_argument("--execute", type=int, default=None, help="rows executed [task default]")
    p.add_argument("--seed", type=int, default=0, help="base seed of the policy")
    p.add_argument("--kwargs", default="{}", help="factory keyword arguments as a JSON object")
    p.add_argument("--delay-ms", type=float, default=0.0,
                   help="extra think time per query, ms (latency studies)")
    p.add_argument("--exit-after", type=int, default=None,
                   help="fault drill: die abruptly when query N+1 arrives")
    p.add_argument("--fail-control", action="store_true",
                   help="fault drill: answer every episode control message with an error")
    p.add_argument("--latency-budget-ms", type=float, default=None,
                   help="per-query budget declared in the handshake (clients use it as "
                   "their timeout default)")
    from bench.safety import DEFAULT_MAX_MESSAGE_BYTES

    p.add_argument("--max-message-bytes", type=int, default=DEFAULT_MAX_MESSAGE_BYTES,
                   help="largest request accepted, bytes, at most 1 GiB (a larger request "
                   "closes its connection with code 1009; the server keeps serving)")
    p.set_defaults(func=_serve)


def _serve(args: Any) -> int:
    import json

    from bench.errors import BenchError
    from bench.policies.entry import validate_ref
    from bench.policies.serve import PolicyService, serve, server_env

    if not 0 <= args.port <= 65535:
        raise BenchError(f"--port must be in 0..65535, got {args.port}")
    if args.delay_ms < 0:
        raise BenchError(f"--delay-ms must be >= 0, got {args.delay_ms}")
    if args.latency_budget_ms is not None and not 0 < args.latency_budget_ms <= 3_600_000:
        raise BenchError(f"--latency-budget-ms must be in (0, 3600000], got "
                         f"{args.latency_budget_ms}")
    from bench.safety import MAX_MESSAGE_BYTES, check_count

    check_count(args.max_message_bytes, what="--max-message-bytes", low=1024,
                high=MAX_MESSAGE_BYTES, fix="give a request size in bytes (1 KiB to 1 GiB)")
    try:
        kwargs = json.loads(args.kwargs)
    except json.JSONDecodeError as exc:
        raise BenchError(f"--kwargs is not JSON ({exc.msg}); pass an object like "
                         "'{\"noise\": 0.01}'") from None
    if not isinstance(kwargs, dict):
        raise BenchError("--kwargs must be a JSON object")
    validate_ref(args.policy)
    env = server_env(args.task, scene=args.scene, chunk_size=args.chunk_size,
                     execute=args.execute)
    service = PolicyService(args.policy, env, seed=args.seed, kwargs=kwargs,
                            delay_ms=args.delay_ms, exit_after=args.exit_after,
                            fail_control=args.fail_control,
                            latency_budget_ms=args.latency_budget_ms)
    try:
        serve(service, host=args.host, port=args.port, max_message_bytes=args.max_message_bytes)
    except KeyboardInterrupt:
        pass
    finally:
        env.close()
    return 0
