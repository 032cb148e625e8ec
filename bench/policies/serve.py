"""``bench serve``: serve any bench policy over the openpi websocket protocol, on the kit.

The server is the policy-server kit's :class:`splatserve.server.PolicyServer`; this module
only adapts a bench policy to the kit's ``infer(obs) -> dict`` (:class:`BenchServed`) and
declares the ``bench`` layout of :mod:`bench.policies.remote` in the capability handshake:
the task's cameras as ``observation/<camera>_image`` (native size, optional: a state-mode
client sends none), ``observation/state`` = the 8-D proprio, ``prompt``, the policy's
7-D action (``x y z rx ry rz opening``, its ``action_mode``), episode control accepted.
Each request may also carry the ``bench/*`` keys; the reply is ``{"actions": float32
[T, 7], "server_timing": {"infer_ms": ...}}``.

An episode starts with the ``episode_start`` control message (the policy is reset with
``__episode_id__`` as the episode seed) or, for a client that sends no control messages,
with a request whose ``bench/query_index`` is 0 (reset with ``bench/episode_seed``); so a
rollout through the server reproduces the in-process rollout bit for bit. Each connection
gets its own policy instance. An exception inside the policy is answered with a one-line
text message (the openpi convention for server errors) and the connection is closed.

The policy is built for a local environment of the same task and chunk shape (no
rendering: ``obs_mode="state"``, no background); privileged policies (which read the
simulator's ``info``) are refused.

``--delay-ms`` adds a fixed think time per query (latency studies, timeouts),
``--exit-after N`` kills the process abruptly when query ``N + 1`` arrives (fault drills: a
server that dies mid-rollout) and ``--fail-control`` answers every control message with an
error (a drill of a server that breaks on episode control).
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Mapping
from typing import Any

import numpy as np

from bench.errors import BenchError
from bench.safety import DEFAULT_MAX_MESSAGE_BYTES

IMAGE_PREFIX, IMAGE_SUFFIX = "observation/", "_image"
STATE_LAYOUT = ("x", "y", "z", "qw", "qx", "qy", "qz", "opening")
ACTION_LAYOUT = ("x", "y", "z", "rx", "ry", "rz", "opening")


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


class BenchServed:
    """One connection's bench policy as a kit policy (``infer``, episode hooks).

    Args:
        policy: The bench policy instance.
        service: The :class:`PolicyService` (fault drills, shared query count).
    """

    def __init__(self, policy: Any, service: PolicyService) -> None:
        self.policy, self.service = policy, service
        self.started = False  # an episode was opened (by control or by query 0)
        self.opened_by_control = False

    def on_episode_start(self, experiment: str, task: str, episode_id: int) -> None:
        """Reset the policy with the episode id as its episode seed."""
        if self.service.fail_control:
            raise RuntimeError("episode control refused (--fail-control drill)")
        self.policy.reset(seed=int(episode_id))
        self.started = self.opened_by_control = True

    def on_episode_end(self, success: bool) -> None:
        """Close the episode (the next one must be opened again)."""
        if self.service.fail_control:
            raise RuntimeError("episode control refused (--fail-control drill)")
        self.started = self.opened_by_control = False

    def infer(self, request: Mapping[str, Any]) -> dict[str, Any]:
        """``{"actions": float32 [T, 7]}`` for one ``bench``-layout request."""
        self.service.count_query()
        query = int(request.get("bench/query_index", -1))
        # query 0 starts an episode for a client without episode control; a client that
        # reconnected mid-episode gets a fresh instance reset with its episode seed
        if not self.started or (query == 0 and not self.opened_by_control):
            self.policy.reset(seed=int(request.get("bench/episode_seed", 0)))
            self.started = True
        self.opened_by_control = False  # consumed: a later query 0 without control resets
        chunk = np.asarray(self.policy.act(bench_observation(request), {}))
        if self.service.delay_ms > 0:
            time.sleep(self.service.delay_ms / 1000.0)
        return {"actions": chunk}


class PolicyService:
    """One policy name served to many connections (a fresh instance per connection).

    Args:
        policy: Registry name or entry point.
        env: The env the policy is built for.
        seed: Base seed of the policy.
        kwargs: Factory keyword arguments.
        delay_ms: Extra think time per query, milliseconds.
        exit_after: Kill the process when query ``exit_after + 1`` arrives (None: never).
        fail_control: Answer every episode control message with an error (drill).
        latency_budget_ms: Declared per-query budget (clients' timeout default).
    """

    def __init__(self, policy: str, env: Any, *, seed: int = 0,
                 kwargs: Mapping[str, Any] | None = None, delay_ms: float = 0.0,
                 exit_after: int | None = None, fail_control: bool = False,
                 latency_budget_ms: float | None = None) -> None:
        from bench.policies.base import is_privileged, make_policy

        if is_privileged(policy):
            raise BenchError(f"policy {policy!r} reads privileged simulator state (info), so "
                             "it cannot be served; serve a non-privileged policy")
        self.policy, self.env, self.seed = policy, env, seed
        self.kwargs = dict(kwargs or {})
        self.delay_ms, self.exit_after = float(delay_ms), exit_after
        self.fail_control = bool(fail_control)
        self.queries = 0
        self._lock = threading.Lock()
        probe = make_policy(policy, env, seed=seed, **self.kwargs)  # fail at start
        self.capabilities = self._capabilities(probe, latency_budget_ms)
        unwrapped = env.unwrapped
        self.metadata = {"chunk_size": int(unwrapped.chunk_size), "action_dim": 7,
                         "action_mode": self.capabilities.action_mode,
                         "task": unwrapped.task.name}

    def _capabilities(self, probe: Any, budget: float | None) -> Any:
        from splatserve.capabilities import Camera, Capabilities

        unwrapped = self.env.unwrapped
        cameras = {c.name: Camera(key=f"{IMAGE_PREFIX}{c.name}{IMAGE_SUFFIX}", optional=True)
                   for c in unwrapped.rig}
        return Capabilities(
            cameras=cameras, state={"observation/state": STATE_LAYOUT}, action_key="actions",
            action_layout=ACTION_LAYOUT, action_mode=getattr(probe, "action_mode", "delta"),
            chunk_length=None, prompt_key="prompt", latency_budget_ms=budget,
            episode_control=True)

    def count_query(self) -> None:
        """Count one query; the ``--exit-after`` drill dies abruptly past its limit."""
        with self._lock:
            self.queries += 1
            if self.exit_after is not None and self.queries > self.exit_after:
                os._exit(3)  # abrupt death, as a crash or kill -9 would leave it

    def new_connection(self) -> BenchServed:
        """A fresh policy instance for one connection."""
        from bench.policies.base import make_policy

        return BenchServed(make_policy(self.policy, self.env, seed=self.seed, **self.kwargs),
                           self)

    def server(self, *, max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES) -> Any:
        """The kit server of this service (not bound yet)."""
        from splatserve.server import PolicyServer

        return PolicyServer(factory=self.new_connection, capabilities=self.capabilities,
                            metadata=self.metadata, name=self.policy,
                            max_message_bytes=max_message_bytes, log=None)


def serve(service: PolicyService, *, host: str = "127.0.0.1", port: int = 8000,
          ready: Any = None, max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES) -> None:
    """Serve until interrupted; ``ready(server)`` is called once the port is bound.

    ``server.socket.getsockname()`` gives the bound address and ``server.shutdown()`` stops
    it. A message larger than ``max_message_bytes`` closes that connection (close code
    1009; one line on stderr); the server keeps serving others.
    """
    import sys

    from splatserve.server import KitError

    kit = service.server(max_message_bytes=max_message_bytes)
    try:
        bound = kit.bind(host, port)
    except KitError as exc:
        raise BenchError(str(exc)) from None
    kit.log = sys.stderr  # connection notes (an oversize request) from here on
    print(f"[bench serve] {service.policy} on ws://{host}:{bound}", file=sys.stderr,
          flush=True)
    if ready is not None:
        ready(kit.listener)
    kit.serve_forever()
