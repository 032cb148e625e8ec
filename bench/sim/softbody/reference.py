"""Plain numpy reference of one spring-mass frame (float64; the Warp kernels are tested on it).

Same physics and order as :mod:`bench.sim.softbody.warp_sim` (see
:mod:`bench.sim.softbody.model`): per substep, forces (gravity, drag, springs,
self-collision penalty), ``v += dt f / m``, ground then collider velocity
constraints with Coulomb friction, attached nodes set from their collider, and
``x += dt v``. Reaction forces on collider bodies are averaged over the frame.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from bench.geometry import quat_slerp, quat_to_mat
from bench.sim.softbody.model import (
    COLLIDER_BOX,
    COLLIDER_CAPSULE,
    COLLIDER_SPHERE,
    SpringMassConfig,
    SpringMassModel,
)


@dataclass
class ColliderFrame:
    """Collider poses over one frame (start -> end) and their rigid velocities.

    Attributes:
        kinds: [C] int collider type codes.
        sizes: [C, 3] metres.
        pos0, pos1: [C, 3] centre at frame start / end.
        quat0, quat1: [C, 4] (w, x, y, z) at frame start / end.
        linvel, angvel: [C, 3] world-frame linear (m/s) and angular (rad/s) velocity.
        bodies: [C] index of the body receiving the reaction (-1 none).
        friction: [C] Coulomb coefficients.
        body_com: [B, 3] centre of mass of each reaction body (torques about it).
    """

    kinds: np.ndarray
    sizes: np.ndarray
    pos0: np.ndarray
    pos1: np.ndarray
    quat0: np.ndarray
    quat1: np.ndarray
    linvel: np.ndarray
    angvel: np.ndarray
    bodies: np.ndarray
    friction: np.ndarray
    body_com: np.ndarray

    @classmethod
    def empty(cls) -> ColliderFrame:
        """A frame with no colliders."""
        z3, z4 = np.zeros((0, 3)), np.zeros((0, 4))
        zi = np.zeros(0, np.int64)
        return cls(zi, z3, z3, z3, z4, z4, z3, z3, zi, np.zeros(0), np.zeros((0, 3)))

    @property
    def count(self) -> int:
        """Number of colliders."""
        return len(self.kinds)


def collider_distance(  # p [N, 3] -> distance [N], normal [N, 3] (outward)
    kind: int, size: np.ndarray, centre: np.ndarray, rot: np.ndarray, p: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Signed distance from points to a sphere / capsule (local z axis) / box, and its normal."""
    local = (p - centre) @ rot
    if kind == COLLIDER_SPHERE:
        closest = np.zeros_like(local)
        radius = size[0]
    elif kind == COLLIDER_CAPSULE:
        closest = np.zeros_like(local)
        closest[:, 2] = np.clip(local[:, 2], -size[1], size[1])
        radius = size[0]
    elif kind == COLLIDER_BOX:
        q = np.abs(local) - size
        outside = np.linalg.norm(np.maximum(q, 0.0), axis=1)
        inside = np.minimum(q.max(axis=1), 0.0)
        dist = outside + inside
        clamped = np.clip(local, -size, size)
        normal_out = local - clamped
        axis = np.argmax(q, axis=1)
        normal_in = np.zeros_like(local)
        normal_in[np.arange(len(local)), axis] = np.sign(local[np.arange(len(local)), axis])
        normal_in[normal_in == 0] = 0.0
        is_out = outside > 0
        n_local = np.where(is_out[:, None], normal_out, normal_in)
        n_local = n_local / np.maximum(np.linalg.norm(n_local, axis=1, keepdims=True), 1e-12)
        return dist, n_local @ rot.T
    else:
        raise ValueError(f"unknown collider kind {kind}")
    d = local - closest
    length = np.linalg.norm(d, axis=1)
    n_local = d / np.maximum(length, 1e-12)[:, None]
    return length - radius, n_local @ rot.T


def reference_frame(
    model: SpringMassModel,
    config: SpringMassConfig,
    x: np.ndarray,  # [N, 3]
    v: np.ndarray,  # [N, 3]
    colliders: ColliderFrame | None = None,
    *,
    attach: np.ndarray | None = None,  # [N] collider index or -1
    attach_local: np.ndarray | None = None,  # [N, 3] position in the collider frame
) -> tuple[np.ndarray, np.ndarray, dict[str, np.ndarray]]:
    """Advance one frame (``config.substeps`` substeps). Returns (x, v, reactions).

    ``reactions``: ``body_force`` [B, 3] N, ``body_torque`` [B, 3] N m (frame averages),
    ``collider_normal`` [C] N (average total normal contact force per collider).
    """
    from scipy.spatial import cKDTree

    colliders = colliders or ColliderFrame.empty()
    n = model.num_nodes
    attach = np.full(n, -1) if attach is None else np.asarray(attach)
    attach_local = np.zeros((n, 3)) if attach_local is None else np.asarray(attach_local)
    x, v = np.array(x, np.float64), np.array(v, np.float64)
    m = model.masses
    free = (m > 0) & (attach < 0)
    inv_m = np.where(m > 0, 1.0 / np.where(m > 0, m, 1.0), 0.0)
    i, j = model.springs[:, 0], model.springs[:, 1]
    dt, r = config.dt, config.particle_radius
    g = np.asarray(config.gravity, np.float64)
    rest = model.positions
    nb = len(colliders.body_com)
    body_force, body_torque = np.zeros((nb, 3)), np.zeros((nb, 3))
    normal_force = np.zeros(colliders.count)
    for step in range(config.substeps):
        alpha = (step + 1) / config.substeps
        centres = colliders.pos0 + alpha * (colliders.pos1 - colliders.pos0)
        pairs = zip(colliders.quat0, colliders.quat1, strict=True)
        rots = [quat_to_mat(quat_slerp(a, b, alpha)) for a, b in pairs]
        f = m[:, None] * (g - config.drag * v)
        d = x[j] - x[i]
        length = np.linalg.norm(d, axis=1)
        nrm = d / np.maximum(length, 1e-12)[:, None]
        rel = np.einsum("sk,sk->s", v[j] - v[i], nrm)
        mag = model.stiffness * (length - model.rest_lengths) + model.damping * rel
        np.add.at(f, i, mag[:, None] * nrm)
        np.add.at(f, j, -mag[:, None] * nrm)
        if config.self_collision:
            pairs = cKDTree(x).query_pairs(2 * r, output_type="ndarray")
            if len(pairs):
                a, b = pairs[:, 0], pairs[:, 1]
                far = np.linalg.norm(rest[a] - rest[b], axis=1) > config.exclude_distance
                a, b = a[far], b[far]
                dd = x[b] - x[a]
                ll = np.linalg.norm(dd, axis=1)
                nn = dd / np.maximum(ll, 1e-12)[:, None]
                push = (config.self_stiffness * (2 * r - ll))[:, None] * nn
                np.add.at(f, a, -push)
                np.add.at(f, b, push)
        v_new = np.where(free[:, None], v + dt * f * inv_m[:, None], v)
        if config.ground_height is not None:
            pen = config.ground_height + r - x[:, 2]
            hit = free & (pen > 0)
            vn = v_new[:, 2]
            vn_new = np.maximum(vn, pen / dt)
            dvn = np.where(hit, vn_new - vn, 0.0)
            vt = v_new[:, :2]
            speed = np.linalg.norm(vt, axis=1)
            scale = np.maximum(0.0, 1.0 - config.ground_friction * dvn / np.maximum(speed, 1e-12))
            v_new[:, :2] = np.where(hit[:, None], vt * scale[:, None], vt)
            v_new[:, 2] = vn + dvn
        for c in range(colliders.count):
            dist, normal = collider_distance(
                int(colliders.kinds[c]), colliders.sizes[c], centres[c], rots[c], x
            )
            hit = free & (dist < r)
            if not np.any(hit):
                continue
            vb = colliders.linvel[c] + np.cross(colliders.angvel[c], x - centres[c])
            vrel = v_new - vb
            vn = np.einsum("nk,nk->n", vrel, normal)
            vn_new = np.maximum(vn, (r - dist) / dt)
            dvn = vn_new - vn
            vt = vrel - vn[:, None] * normal
            speed = np.linalg.norm(vt, axis=1)
            scale = np.maximum(0.0, 1.0 - colliders.friction[c] * dvn / np.maximum(speed, 1e-12))
            candidate = vb + vn_new[:, None] * normal + vt * scale[:, None]
            impulse_rate = m[:, None] * (candidate - v_new) / dt  # force on the node
            body = int(colliders.bodies[c])
            if body >= 0:
                lever = x[hit] - colliders.body_com[body]
                body_force[body] -= impulse_rate[hit].sum(0)
                body_torque[body] -= np.cross(lever, impulse_rate[hit]).sum(0)
            normal_force[c] += (m * dvn)[hit].sum() / dt
            v_new = np.where(hit[:, None], candidate, v_new)
        x_new = x + dt * np.where(free[:, None], v_new, 0.0)
        held = np.flatnonzero(attach >= 0)
        for node in held:
            c = int(attach[node])
            x_new[node] = centres[c] + rots[c] @ attach_local[node]
            lever = x_new[node] - centres[c]
            v_new[node] = colliders.linvel[c] + np.cross(colliders.angvel[c], lever)
            body = int(colliders.bodies[c])
            if body >= 0:
                body_force[body] += f[node]
                body_torque[body] += np.cross(x[node] - colliders.body_com[body], f[node])
        x, v = x_new, v_new
    s = config.substeps
    return x, v, {
        "body_force": body_force / s,
        "body_torque": body_torque / s,
        "collider_normal": normal_force / s,
    }
