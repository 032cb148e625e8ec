"""``bench serve``: serve any bench policy over the openpi websocket protocol.

The server speaks the ``bench`` layout of :mod:`bench.policies.remote`: each
request carries ``observation/<camera>_image`` uint8 ``[H, W, 3]``,
``observation/state`` float32 ``[8]``, ``prompt`` and the ``bench/*`` keys; the
reply is ``{"actions": float32 [T, 7], "policy_timing": {"infer_ms": ...}}``.
A request with ``bench/query_index == 0`` resets the policy with
``bench/episode_seed`` first, so a rollout through the server reproduces the
in-process rollout bit for bit. Each connection gets its own policy instance.
An exception inside the policy is answered with a one-line text message (the
openpi convention for server errors) and the connection is closed.

The policy is built for a local environment of the same task and chunk shape
(no rendering: ``obs_mode="state"``, no background); privileged policies
(which read the simulator's ``info``) are refused.

``--delay-ms`` adds a fixed think time per query (latency studies, timeouts) and
``--exit-after N`` kills the process abruptly when query ``N + 1`` arrives (fault
drills: a server that dies mid-rollout).
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Mapping
from typing import Any

import numpy as np

from bench.errors import BenchError
from bench.safety import DEFAULT_MAX_MESSAGE_BYTES

SERVER_ID = "splatbench-serve/1"
MESSAGE_TOO_BIG = 1009  # websocket close code (RFC 6455)
IMAGE_PREFIX, IMAGE_SUFFIX = "observation/", "_image"


def bench_observation(request: Mapping[str, Any]) -> dict[str, Any]:
    """The policy observation (``bench.policies.base``) of a ``bench``-layout request."""
    images = {
        key[len(IMAGE_PREFIX): -len(IMAGE_SUFFIX)]: np.asarray(value)
        for key, value in request.items()
        if isinstance(key, str) and key.startswith(IMAGE_PREFIX) and key.endswith(IMAGE_SUFFIX)
    }
    if "observation/state" not in request:
        raise ValueError("request has no 'observation/state' (float32 [8] proprio)")
    obs: dict[str, Any] = {f"{camera}_rgb": image for camera, image in images.items()}
    obs.update(images=images, proprio=np.asarray(request["observation/state"], np.float32),
               prompt=str(request.get("prompt", "")),
               timestamp=float(request.get("bench/timestamp", 0.0)))
    return obs


def server_env(task: str, *, scene: str | None = None, chunk_size: int | None = None,
               execute: int | None = None) -> Any:
    """The local env a served policy is built for (state mode, no background)."""
    import bench.sim
    from bench.scene.sample import make_sample_scene

    bundle = scene if scene is not None else make_sample_scene(seed=0, n_gaussians=200)
    return bench.sim.make_env(task, bundle, obs_mode="state", background="none",
                              chunk_size=chunk_size, execute=execute)


class PolicyService:
    """One policy name served to many connections (a fresh instance per connection).

    Args:
        policy: Registry name or entry point.
        env: The env the policy is built for.
        seed: Base seed of the policy.
        kwargs: Factory keyword arguments.
        delay_ms: Extra think time per query, milliseconds.
        exit_after: Kill the process when query ``exit_after + 1`` arrives (None: never).
    """

    def __init__(self, policy: str, env: Any, *, seed: int = 0,
                 kwargs: Mapping[str, Any] | None = None, delay_ms: float = 0.0,
                 exit_after: int | None = None) -> None:
        from bench.policies.base import is_privileged, make_policy

        if is_privileged(policy):
            raise BenchError(f"policy {policy!r} reads privileged simulator state (info), so "
                             "it cannot be served; serve a non-privileged policy")
        self.policy, self.env, self.seed = policy, env, seed
        self.kwargs = dict(kwargs or {})
        self.delay_ms, self.exit_after = float(delay_ms), exit_after
        self.queries = 0
        make_policy(policy, env, seed=seed, **self.kwargs)  # fail at start, not per connection
        unwrapped = env.unwrapped
        self.metadata = {"server": SERVER_ID, "policy": policy,
                         "chunk_size": int(unwrapped.chunk_size),
                         "action_dim": 7, "action_mode": "delta",
                         "task": unwrapped.task.name}

    def handle(self, websocket: Any) -> None:
        """Serve one connection until it closes."""
        from websockets.exceptions import ConnectionClosed

        from bench.policies import wire
        from bench.policies.base import make_policy

        policy = make_policy(self.policy, self.env, seed=self.seed, **self.kwargs)
        websocket.send(wire.packb(self.metadata))
        started = False
        while True:
            try:
                message = websocket.recv()
            except ConnectionClosed as exc:
                if exc.sent is not None and exc.sent.code == MESSAGE_TOO_BIG:
                    print(f"[bench serve] closed a connection: {exc.sent.reason} (a request "
                          "larger than --max-message-bytes); the server keeps serving",
                          file=sys.stderr, flush=True)
                return
            self.queries += 1
            if self.exit_after is not None and self.queries > self.exit_after:
                os._exit(3)  # abrupt death, as a crash or kill -9 would leave it
            start = time.perf_counter()
            try:
                request = wire.unpackb(message)
                # query 0 starts an episode; a client that reconnected mid-episode gets a
                # fresh instance reset with its episode seed (earlier state is lost)
                if int(request.get("bench/query_index", -1)) == 0 or not started:
                    policy.reset(seed=int(request.get("bench/episode_seed", 0)))
                    started = True
                chunk = np.asarray(policy.act(bench_observation(request), {}))
            except Exception as exc:  # noqa: BLE001 - reported to the client, then closed
                reason = str(exc).splitlines()[0] if str(exc) else ""
                websocket.send(f"{type(exc).__name__}: {reason}")
                websocket.close()
                return
            if self.delay_ms > 0:
                time.sleep(self.delay_ms / 1000.0)
            infer_ms = (time.perf_counter() - start) * 1000.0
            websocket.send(wire.packb({"actions": chunk, "policy_timing": {"infer_ms": infer_ms}}))


def serve(service: PolicyService, *, host: str = "127.0.0.1", port: int = 8000,
          ready: Any = None, max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES) -> None:
    """Serve until interrupted; ``ready(server)`` is called once the port is bound.

    A message larger than ``max_message_bytes`` closes that connection (close code 1009,
    the limit in the close reason; one line on stderr); the server keeps serving others.
    """
    from websockets.sync.server import serve as ws_serve

    try:
        server = ws_serve(service.handle, host, port, compression=None,
                          max_size=max_message_bytes)
    except OSError as exc:
        raise BenchError(f"cannot listen on {host}:{port} ({exc.strerror or exc}); choose "
                         "another --port") from None
    with server:
        print(f"[bench serve] {service.policy} on ws://{host}:{server.socket.getsockname()[1]}",
              file=sys.stderr, flush=True)
        if ready is not None:
            ready(server)
        server.serve_forever()
