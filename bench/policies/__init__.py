"""Policies: the Policy interface, a registry, entry points, remote and reference policies.

Registered policies: ``expert`` (privileged scripted pick-and-place, an upper
bound and a demonstration source), ``noisy-expert`` / ``noisy-expert-8mm`` /
``noisy-expert-12mm`` (the expert with seeded Gaussian translation noise of 4,
8 or 12 mm per frame: weaker but competent candidates for paired comparisons;
on the first 20 Cup conditions 20, 15 and 4 successes), ``random`` (uniform
actions from the action space) and ``hold`` (never moves: a zero baseline).
``rope-expert`` / ``rope-expert-hasty`` (:mod:`bench.policies.rope`) are the
privileged scripted experts of the deformable rope task.
``visual-servo`` and ``visual-glance`` (:mod:`bench.policies.visual`) find the
actor by colour in the wrist image, so background damage can change what they
do - the non-privileged candidates a reconstruction study needs. ``openpi``
(:mod:`bench.policies.remote`) is any policy behind an openpi-protocol websocket
server and ``lerobot`` (:mod:`bench.policies.lerobot_policy`) a local LeRobot
``pretrained_model`` directory. Any ``package.module:factory`` is a policy too
(:mod:`bench.policies.entry`). The interface is documented in
:mod:`bench.policies.base` and docs/policies.md.
"""

from bench.policies import baselines as _baselines  # noqa: F401 - registers baselines
from bench.policies import expert as _expert  # noqa: F401 - registers experts
from bench.policies import learned as _learned  # noqa: F401 - registers bc-large, bc-small
from bench.policies import lerobot_policy as _lerobot  # noqa: F401 - registers lerobot
from bench.policies import remote as _remote  # noqa: F401 - registers openpi
from bench.policies import rope as _rope  # noqa: F401 - registers the rope experts
from bench.policies import visual as _visual  # noqa: F401 - registers image-driven policies
from bench.policies.base import POLICIES, Policy, PolicyError, make_policy

__all__ = ["POLICIES", "Policy", "PolicyError", "make_policy"]
