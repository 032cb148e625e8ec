"""The Warp spring-mass simulator: state on a Warp device, one call per frame.

Launch shapes (``mode``):

- ``"fused"`` (CPU default): :func:`~bench.sim.softbody.kernels.fused_frame_kernel` runs a
  block of substeps in one launch (the whole frame without self collision);
- ``"graph"`` (CUDA default): the per-substep launches of one block are captured once into
  a CUDA graph and replayed;
- ``"launches"``: the same per-substep kernels launched one by one (any device; tests).

Self collision looks nodes up in a ``wp.HashGrid`` rebuilt every ``rebuild_every``
substeps; its query radius is ``2 r + 2 * self_margin`` so that nodes moving less than
``self_margin`` within a block are never missed.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from bench.sim.softbody.model import COLLIDER_TYPES, Collider, SpringMassConfig, SpringMassModel
from bench.sim.softbody.reference import ColliderFrame


def init_warp():
    """Import and initialise Warp without its banner and per-module load messages."""
    import warp as wp

    wp.config.quiet = True
    wp.init()
    return wp


def default_device() -> str:
    """"cuda:0" when Warp sees a GPU, else "cpu"."""
    wp = init_warp()
    return "cuda:0" if wp.is_cuda_available() else "cpu"


def _wxyz_to_xyzw(q: np.ndarray) -> np.ndarray:  # [C, 4] -> [C, 4]
    q = np.asarray(q, np.float64).reshape(-1, 4)
    return q[:, [1, 2, 3, 0]]


class SpringMassSim:
    """Simulate one :class:`SpringMassModel` with kinematic colliders.

    Args:
        model: Nodes, springs and parameters.
        config: Integration and contact settings.
        colliders: Kinematic colliders (their poses are given per frame to :meth:`step`).
        num_bodies: Bodies that receive reaction forces (collider ``body`` indices).
        device: Warp device ("cpu", "cuda:0"; None: CUDA when present).
        mode: "fused", "graph" or "launches" (None: fused on CPU, graph on CUDA).
        self_margin: Per-block displacement the self-collision grid tolerates, metres.
        rebuild_every: Substeps per self-collision grid rebuild.
    """

    def __init__(
        self,
        model: SpringMassModel,
        config: SpringMassConfig,
        colliders: Sequence[Collider] = (),
        *,
        num_bodies: int = 0,
        device: str | None = None,
        mode: str | None = None,
        self_margin: float = 0.005,
        rebuild_every: int = 50,
    ) -> None:
        wp = init_warp()
        self.wp = wp
        self.model, self.config = model, config
        self.device = device or default_device()
        is_cuda = str(self.device).startswith("cuda")
        self.mode = mode or ("graph" if is_cuda else "fused")
        if self.mode not in ("fused", "graph", "launches"):
            raise ValueError(f"mode must be 'fused', 'graph' or 'launches', got {self.mode!r}")
        if self.mode == "graph" and not is_cuda:
            raise ValueError("mode='graph' needs a CUDA device; use 'fused' on the CPU")
        if self.mode == "fused" and is_cuda:
            raise ValueError("mode='fused' is the CPU path; use 'graph' on CUDA")
        self.colliders = list(colliders)
        self.num_bodies = int(num_bodies)
        for c in self.colliders:
            if c.body >= self.num_bodies:
                raise ValueError(f"collider body {c.body} >= num_bodies {self.num_bodies}")
        self.self_margin = float(self_margin)
        block = config.substeps
        if config.self_collision:
            block = min(rebuild_every, config.substeps)
        if config.substeps % block:
            raise ValueError(f"substeps ({config.substeps}) must be a multiple of rebuild_every")
        self.block = block
        self._build_arrays()
        self._graph = None
        self.frames = 0
        self.version = 0  # bumped by set_state (renderers cache on (frames, version))

    # -- arrays -----------------------------------------------------------------------------
    def _build_arrays(self) -> None:
        wp, dev, m = self.wp, self.device, self.model
        n, c = m.num_nodes, len(self.colliders)
        f32 = np.float32
        self.x = wp.array(m.positions.astype(f32), dtype=wp.vec3, device=dev)
        self.v = wp.array(m.velocities.astype(f32), dtype=wp.vec3, device=dev)
        self.f = wp.zeros(n, dtype=wp.vec3, device=dev)
        self.mass = wp.array(m.masses.astype(f32), dtype=float, device=dev)
        self.rest_pos = wp.array(m.positions.astype(f32), dtype=wp.vec3, device=dev)
        self.si = wp.array(m.springs[:, 0].astype(np.int32), dtype=int, device=dev)
        self.sj = wp.array(m.springs[:, 1].astype(np.int32), dtype=int, device=dev)
        self.stiffness = wp.array(m.stiffness.astype(f32), dtype=float, device=dev)
        self.damping = wp.array(m.damping.astype(f32), dtype=float, device=dev)
        self.rest = wp.array(m.rest_lengths.astype(f32), dtype=float, device=dev)
        self.attach = wp.array(np.full(n, -1, np.int32), dtype=int, device=dev)
        self.attach_local = wp.zeros(n, dtype=wp.vec3, device=dev)
        kinds = np.array([COLLIDER_TYPES[k.kind] for k in self.colliders], np.int32)
        sizes = np.array([k.size for k in self.colliders], f32).reshape(c, 3)
        mus = np.array(
            [self.config.collider_friction if k.friction is None else k.friction
             for k in self.colliders], f32)
        self.c_kind = wp.array(kinds, dtype=int, device=dev)
        self.c_size = wp.array(sizes, dtype=wp.vec3, device=dev)
        self.c_body = wp.array(np.array([k.body for k in self.colliders], np.int32), dtype=int,
                               device=dev)
        self.c_mu = wp.array(mus, dtype=float, device=dev)
        identity = np.tile([0.0, 0.0, 0.0, 1.0], (c, 1)).astype(f32)
        self.c_pos0 = wp.zeros(c, dtype=wp.vec3, device=dev)
        self.c_pos1 = wp.zeros(c, dtype=wp.vec3, device=dev)
        self.c_rot0 = wp.array(identity, dtype=wp.quat, device=dev)
        self.c_rot1 = wp.array(identity, dtype=wp.quat, device=dev)
        self.c_linvel = wp.zeros(c, dtype=wp.vec3, device=dev)
        self.c_angvel = wp.zeros(c, dtype=wp.vec3, device=dev)
        self.body_com = wp.zeros(self.num_bodies, dtype=wp.vec3, device=dev)
        self.body_force = wp.zeros(self.num_bodies, dtype=wp.vec3, device=dev)
        self.body_torque = wp.zeros(self.num_bodies, dtype=wp.vec3, device=dev)
        self.c_normal = wp.zeros(c, dtype=float, device=dev)
        self.step0 = wp.zeros(1, dtype=int, device=dev)
        self.grid = wp.HashGrid(32, 32, 32, device=dev) if self.config.self_collision else None

    # -- state ------------------------------------------------------------------------------
    def positions(self) -> np.ndarray:  # -> [N, 3] float64
        """Node positions [N, 3], metres."""
        return self.x.numpy().astype(np.float64)

    def velocities(self) -> np.ndarray:  # -> [N, 3] float64
        """Node velocities [N, 3], m/s."""
        return self.v.numpy().astype(np.float64)

    def set_state(self, x: np.ndarray, v: np.ndarray | None = None) -> None:  # [N, 3], [N, 3]
        """Overwrite positions (and velocities; zero when None) of every node."""
        self.version += 1
        self.x.assign(np.asarray(x, np.float32))
        self.v.assign(np.zeros_like(x, np.float32) if v is None else np.asarray(v, np.float32))

    def set_attachment(self, attach: np.ndarray, local: np.ndarray) -> None:  # [N], [N, 3]
        """Attach nodes to colliders (index, -1 free) at collider-frame positions ``local``."""
        self.attach.assign(np.asarray(attach, np.int32))
        self.attach_local.assign(np.asarray(local, np.float32))

    def attachment(self) -> np.ndarray:  # -> [N] int
        """Per-node attachment index [N] (-1: free)."""
        return self.attach.numpy().astype(np.int64)

    def set_parameters(self, *, stiffness=None, damping=None) -> None:  # [S] or scalars
        """Set per-spring stiffness (N/m) and damping (N s/m), arrays [S] or scalars."""
        s = self.model.num_springs
        if stiffness is not None:
            self.stiffness.assign(np.broadcast_to(np.float32(stiffness), (s,)).astype(np.float32))
        if damping is not None:
            self.damping.assign(np.broadcast_to(np.float32(damping), (s,)).astype(np.float32))

    # -- stepping ---------------------------------------------------------------------------
    def step(self, colliders: ColliderFrame | None = None) -> dict[str, np.ndarray]:
        """Advance one frame with colliders moving from their start to end pose.

        Returns frame-averaged ``body_force`` [B, 3] (N), ``body_torque`` [B, 3] (N m) and
        ``collider_normal`` [C] (N): the reactions to feed back to the rigid bodies.
        """
        wp = self.wp
        if colliders is not None and colliders.count:
            if colliders.count != len(self.colliders):
                raise ValueError(
                    f"{colliders.count} collider poses for {len(self.colliders)} colliders"
                )
            self.c_pos0.assign(colliders.pos0.astype(np.float32))
            self.c_pos1.assign(colliders.pos1.astype(np.float32))
            self.c_rot0.assign(_wxyz_to_xyzw(colliders.quat0).astype(np.float32))
            self.c_rot1.assign(_wxyz_to_xyzw(colliders.quat1).astype(np.float32))
            self.c_linvel.assign(colliders.linvel.astype(np.float32))
            self.c_angvel.assign(colliders.angvel.astype(np.float32))
            if self.num_bodies:
                self.body_com.assign(colliders.body_com.astype(np.float32))
        elif self.colliders:
            raise ValueError("this simulation has colliders: pass their ColliderFrame to step()")
        self.body_force.zero_()
        self.body_torque.zero_()
        self.c_normal.zero_()
        for first in range(0, self.config.substeps, self.block):
            if self.grid is not None:
                self.grid.build(self.x, self._query_radius())
            if self.mode == "fused":
                self._launch_fused(first)
            else:
                self.step0.assign(np.array([first], np.int32))
                if self.mode == "graph":
                    if self._graph is None:
                        with wp.ScopedCapture(device=self.device) as capture:
                            self._launch_block()
                        self._graph = capture.graph
                    wp.capture_launch(self._graph)
                else:
                    self._launch_block()
        self.frames += 1
        s = float(self.config.substeps)
        return {
            "body_force": self.body_force.numpy().astype(np.float64) / s,
            "body_torque": self.body_torque.numpy().astype(np.float64) / s,
            "collider_normal": self.c_normal.numpy().astype(np.float64) / s,
        }

    def _query_radius(self) -> float:
        return 2.0 * self.config.particle_radius + 2.0 * self.self_margin

    def _ground(self) -> tuple[int, float]:
        g = self.config.ground_height
        return (0, 0.0) if g is None else (1, float(g))

    def _collider_args(self) -> list:
        return [self.c_kind, self.c_size, self.c_pos0, self.c_pos1, self.c_rot0, self.c_rot1,
                self.c_linvel, self.c_angvel, self.c_body, self.c_mu, self.body_com]

    def _launch_fused(self, first: int) -> None:
        from bench.sim.softbody import fused as F

        cfg = self.config
        ground_on, ground_z = self._ground()
        grid_id = self.grid.id if self.grid is not None else self.wp.uint64(0)
        self.wp.launch(
            F.fused_frame_kernel, dim=1, device=self.device,
            inputs=[first, self.block, cfg.substeps, cfg.dt, cfg.particle_radius,
                    self.wp.vec3(*cfg.gravity), cfg.drag, ground_on, ground_z,
                    cfg.ground_friction, int(cfg.self_collision), grid_id, self.rest_pos,
                    self._query_radius(), cfg.exclude_distance, cfg.self_stiffness,
                    self.si, self.sj, self.stiffness, self.damping, self.rest,
                    self.x, self.v, self.f, self.mass, self.attach, self.attach_local,
                    *self._collider_args(), self.body_force, self.body_torque, self.c_normal],
        )

    def _launch_block(self) -> None:
        from bench.sim.softbody import fused as F
        from bench.sim.softbody import kernels as K

        wp, cfg, dev = self.wp, self.config, self.device
        n, s = self.model.num_nodes, self.model.num_springs
        ground_on, ground_z = self._ground()
        for offset in range(self.block):
            wp.launch(K.forces_kernel, dim=n, device=dev,
                      inputs=[self.v, self.mass, wp.vec3(*cfg.gravity), cfg.drag, self.f])
            if s:
                wp.launch(K.springs_kernel, dim=s, device=dev,
                          inputs=[self.x, self.v, self.si, self.sj, self.stiffness,
                                  self.damping, self.rest, self.f])
            if self.grid is not None:
                wp.launch(F.self_collision_kernel, dim=n, device=dev,
                          inputs=[self.grid.id, self.x, self.rest_pos, cfg.particle_radius,
                                  self._query_radius(), cfg.exclude_distance,
                                  cfg.self_stiffness, self.f])
            wp.launch(K.update_kernel, dim=n, device=dev,
                      inputs=[self.step0, offset, cfg.substeps, cfg.dt, cfg.particle_radius,
                              ground_on, ground_z, cfg.ground_friction, self.x, self.v, self.f,
                              self.mass, self.attach, self.attach_local,
                              *self._collider_args(), self.x, self.v, self.body_force,
                              self.body_torque, self.c_normal])
