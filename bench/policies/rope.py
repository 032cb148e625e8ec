"""The rope task's policies (``rope-expert``, ``rope-expert-hasty``), registered in POLICIES.

Both are the privileged scripted rope expert of :mod:`bench.sim.softbody.rope` (it reads
the rope's nodes); the hasty variant is the script another lab would run: twice the speed,
grasp at the very end node, a lower carry and 4 mm of seeded per-frame translation noise
(:data:`bench.sim.softbody.rope.HASTY_EXPERT`). Entry metadata ``tasks=("rope",)``: the
study spec refuses them on rigid tasks.
"""

from __future__ import annotations

from typing import Any

from bench.policies.base import POLICIES


def make_rope_expert(env: Any, *, seed: int = 0) -> Any:
    """The clean scripted rope expert (:class:`bench.sim.softbody.rope.RopeExpert`)."""
    from bench.sim.softbody.rope import RopeExpert

    return RopeExpert(env, seed=seed)


def make_hasty_rope_expert(env: Any, *, seed: int = 0) -> Any:
    """The fast, end-grasping, noisy variant (:data:`~bench.sim.softbody.rope.HASTY_EXPERT`)."""
    from bench.sim.softbody.rope import HASTY_EXPERT, RopeExpert

    policy = RopeExpert(env, seed=seed, config=HASTY_EXPERT)
    policy.name = "rope-expert-hasty"
    return policy


POLICIES.register("rope-expert", make_rope_expert, privileged=True, tasks=("rope",),
                  description="privileged scripted rope routing: grasp node 2, 2 cm/frame, "
                  "carry 10 cm (upper bound)")
POLICIES.register("rope-expert-hasty", make_hasty_rope_expert, privileged=True, tasks=("rope",),
                  noise_m=0.004, description="rope expert at 4 cm/frame grasping the end "
                  "node, carry 8 cm, 4 mm seeded translation noise")
