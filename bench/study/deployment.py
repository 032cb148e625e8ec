"""Deployment-fidelity settings of a study (the spec's ``"deployment"`` object).

RobotArena-inf 360 shows that three deployment choices move policy rankings:
controller gains, how shadows are rendered, and whether the simulator waits for
the policy. A study fixes them here; ``bench study compare`` then pairs two
studies that differ in one of them::

    "deployment": {"execution": "async", "latency_ms": "p50",
                   "controller_gains": "soft", "shadows": true, "fisheye_mode": "direct"}

``latency_ms`` is a number of milliseconds of simulated time, or ``"p50"``: each
policy's own measured median query latency (measured once per task and policy
over :data:`CALIBRATION_QUERIES` queries on its first trial's start, stored in the
results database and reused on ``--resume`` so a resumed study stays consistent).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from bench.errors import BenchError

CALIBRATION_QUERIES = 5


@dataclass(frozen=True)
class Deployment:
    """Typed ``"deployment"`` block (defaults: the bench's stock setup).

    Attributes:
        execution: "blocking" or "async" (:class:`bench.sim.rollout.Execution`).
        latency_ms: Injected think time in async mode, ms of simulated time, or "p50".
        controller_gains: "default", "stiff", "soft" or "custom" (EnvConfig).
        controller_kp: Custom stiffness, s^-2 (with "custom").
        controller_kd: Custom damping, s^-1 (with "custom").
        shadows: MuJoCo-layer shadows on.
        fisheye_mode: Background fisheye: "cubemap" or "direct".
    """

    execution: str = "blocking"
    latency_ms: float | str = 0.0
    controller_gains: str = "default"
    controller_kp: float | None = None
    controller_kd: float | None = None
    shadows: bool = False
    fisheye_mode: str = "cubemap"

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Deployment:
        """Settings from the spec's ``deployment`` object; BenchError names unknown keys."""
        known = [f.name for f in dataclasses.fields(cls)]
        unknown = sorted(set(data) - set(known))
        if unknown:
            raise BenchError(f"unknown deployment keys {unknown}; valid keys: {known}")
        try:
            deployment = cls(**data)
            deployment.env_overrides()  # EnvConfig validates gains and fisheye mode
            from bench.sim.config import EnvConfig

            EnvConfig(**deployment.env_overrides())
        except (TypeError, ValueError) as exc:
            raise BenchError(f"deployment: {exc}") from None
        return deployment

    def __post_init__(self) -> None:
        if self.execution not in ("blocking", "async"):
            raise ValueError(f"execution {self.execution!r} is not 'blocking' or 'async'")
        if isinstance(self.latency_ms, str):
            if self.latency_ms != "p50":
                raise ValueError(f"latency_ms must be milliseconds or \"p50\", got "
                                 f"{self.latency_ms!r}")
        elif isinstance(self.latency_ms, bool) or not (
                isinstance(self.latency_ms, int | float) and math.isfinite(self.latency_ms)
                and self.latency_ms >= 0):
            raise ValueError(f"latency_ms must be a number >= 0 or \"p50\", got "
                             f"{self.latency_ms!r}")
        if self.execution == "blocking" and self.latency_ms not in (0, 0.0):
            raise ValueError("latency_ms needs execution='async' (blocking execution waits "
                             "for the policy)")
        if not isinstance(self.shadows, bool):
            raise ValueError(f"shadows must be true or false, got {self.shadows!r}")

    def env_overrides(self) -> dict[str, Any]:
        """EnvConfig fields this deployment sets."""
        return {"controller_gains": self.controller_gains, "controller_kp": self.controller_kp,
                "controller_kd": self.controller_kd, "shadows": self.shadows,
                "fisheye_mode": self.fisheye_mode}

    @property
    def measured(self) -> bool:
        """True when the latency is measured per policy (async with ``latency_ms="p50"``)."""
        return self.execution == "async" and self.latency_ms == "p50"

    def execution_for(self, measured_ms: float | None = None) -> Any:
        """The rollout :class:`~bench.sim.rollout.Execution` (``measured_ms`` for "p50")."""
        from bench.sim.rollout import Execution

        if self.execution == "blocking":
            return Execution()
        latency = measured_ms if self.measured else float(self.latency_ms)
        if latency is None:
            raise BenchError("latency_ms='p50' needs a measured latency")
        return Execution(mode="async", latency_ms=float(latency))


def measure_latency_ms(env: Any, policy: Any, *, init_index: int,
                       queries: int = CALIBRATION_QUERIES) -> float:
    """Median wall time (ms) of ``queries`` policy queries on ``init_index``'s first frame."""
    import time

    import numpy as np

    from bench.policies.base import policy_observation

    obs, info = env.reset(seed=init_index)
    policy.reset(seed=init_index)
    observation = policy_observation(obs, env, frame=0)
    times = []
    for _ in range(queries):
        tick = time.perf_counter()
        policy.act(observation, info)
        times.append((time.perf_counter() - tick) * 1000.0)
    policy.reset(seed=init_index)
    return float(np.median(times))
