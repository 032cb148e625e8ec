"""Policies: the Policy protocol, a registry, scripted experts and baselines.

Registered policies: ``expert`` (privileged scripted pick-and-place, an upper
bound and a demonstration source), ``noisy-expert`` (the expert with seeded
Gaussian action noise and occasional missed grasps: a weaker but competent
candidate for paired comparisons), ``random`` (uniform actions from the action
space) and ``hold`` (never moves: a zero baseline).
"""

from bench.policies import baselines as _baselines  # noqa: F401 - registers baselines
from bench.policies import expert as _expert  # noqa: F401 - registers experts
from bench.policies.base import POLICIES, Policy, make_policy

__all__ = ["POLICIES", "Policy", "make_policy"]
