"""Spring-mass deformables (PhysTwin-style) in NVIDIA Warp, with Gaussians that follow.

- :mod:`.model`: topology (neighbour springs from a point cloud or mesh), parameters,
  colliders, config; :mod:`.reference`: the plain numpy frame step;
- :mod:`.kernels` / :mod:`.sim`: the Warp kernels and :class:`SpringMassSim`;
- :mod:`.coupling`: MuJoCo geoms as kinematic colliders, reactions via ``xfrc_applied``,
  and the force-threshold frictional grasp;
- :mod:`.lbs`: Gaussians bound to nodes by linear blend skinning;
- :mod:`.sysid`: stiffness / damping fitted with ``wp.Tape``;
- :mod:`.rope`: the rope-routing task, its expert and ``splatbench/Rope-v0``.
"""

from bench.sim.softbody.model import (
    Collider,
    SpringMassConfig,
    SpringMassModel,
    chain,
    from_mesh,
    from_points,
    neighbour_springs,
)

__all__ = [
    "Collider",
    "SpringMassConfig",
    "SpringMassModel",
    "chain",
    "from_mesh",
    "from_points",
    "neighbour_springs",
]
