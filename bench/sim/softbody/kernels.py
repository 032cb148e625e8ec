"""Warp kernels of the spring-mass substep (physics in :mod:`bench.sim.softbody.model`).

One set of ``wp.func`` building blocks is used by two launch shapes:

- per-substep kernels (``forces_kernel``, ``springs_kernel``, ``update_kernel`` here and
  ``self_collision_kernel`` in :mod:`.fused`), one thread per node or spring: captured into a
  CUDA graph, and recorded on a ``wp.Tape`` for system identification;
- :func:`.fused.fused_frame_kernel`: one CPU thread that runs a whole block of substeps
  (springs, self collision, node updates) in a single launch - the CPU counterpart of the
  graph, without per-launch overhead.

The hash-grid query has no adjoint, so everything that uses it lives in :mod:`.fused`, a
module compiled without backward passes.
"""

from __future__ import annotations

import warp as wp

SPHERE = wp.constant(0)
CAPSULE = wp.constant(1)
BOX = wp.constant(2)


@wp.func
def spring_force(xi: wp.vec3, xj: wp.vec3, vi: wp.vec3, vj: wp.vec3, k: float, c: float,
                 rest: float) -> wp.vec3:
    """Force on node i of spring (i, j): Hooke + dashpot along the spring."""
    d = xj - xi
    length = wp.length(d)
    n = d / wp.max(length, 1.0e-12)
    mag = k * (length - rest) + c * wp.dot(vj - vi, n)
    return mag * n


@wp.func
def quat_nslerp(q0: wp.quat, q1: wp.quat, t: float) -> wp.quat:
    """Slerp with the shorter-arc flip and a normalised-lerp fallback (as the numpy reference)."""
    a = wp.normalize(q0)
    b = wp.normalize(q1)
    dot = wp.dot(a, b)
    if dot < 0.0:
        b = -b
        dot = -dot
    if dot > 0.9995:
        return wp.normalize(a + t * (b - a))
    theta = wp.acos(dot)
    return (wp.sin((1.0 - t) * theta) * a + wp.sin(t * theta) * b) / wp.sin(theta)


@wp.func
def collider_distance(kind: int, size: wp.vec3, centre: wp.vec3, rot: wp.quat,
                      p: wp.vec3) -> wp.vec4:
    """(normal x, y, z, signed distance) from point p to a sphere / capsule (local z) / box."""
    local = wp.quat_rotate_inv(rot, p - centre)
    if kind == BOX:
        q = wp.vec3(wp.abs(local[0]) - size[0], wp.abs(local[1]) - size[1],
                    wp.abs(local[2]) - size[2])
        out = wp.vec3(wp.max(q[0], 0.0), wp.max(q[1], 0.0), wp.max(q[2], 0.0))
        outside = wp.length(out)
        qmax = wp.max(q[0], wp.max(q[1], q[2]))
        dist = outside + wp.min(qmax, 0.0)
        n_local = wp.vec3(0.0)
        if outside > 0.0:
            clamped = wp.vec3(wp.clamp(local[0], -size[0], size[0]),
                              wp.clamp(local[1], -size[1], size[1]),
                              wp.clamp(local[2], -size[2], size[2]))
            n_local = wp.normalize(local - clamped)
        else:
            axis = int(0)  # noqa: UP018 - a Warp variable, not a constant
            if q[1] > q[axis]:
                axis = 1
            if q[2] > q[axis]:
                axis = 2
            n_local[axis] = wp.sign(local[axis])
        n = wp.quat_rotate(rot, n_local)
        return wp.vec4(n[0], n[1], n[2], dist)
    closest = wp.vec3(0.0)
    if kind == CAPSULE:
        closest = wp.vec3(0.0, 0.0, wp.clamp(local[2], -size[1], size[1]))
    d = local - closest
    length = wp.length(d)
    n = wp.quat_rotate(rot, d / wp.max(length, 1.0e-12))
    return wp.vec4(n[0], n[1], n[2], length - size[0])


@wp.func
def friction_scale(mu: float, dvn: float, vt: wp.vec3) -> float:
    """Coulomb factor on the tangential velocity: max(0, 1 - mu |dv_n| / |v_t|)."""
    return wp.max(0.0, 1.0 - mu * dvn / wp.max(wp.length(vt), 1.0e-12))


@wp.func
def update_node(
    i: int, step: int, substeps: int, dt: float, radius: float,
    ground_on: int, ground_z: float, ground_mu: float,
    x: wp.array(dtype=wp.vec3), v: wp.array(dtype=wp.vec3), f: wp.array(dtype=wp.vec3),
    mass: wp.array(dtype=float), attach: wp.array(dtype=int),
    attach_local: wp.array(dtype=wp.vec3),
    c_kind: wp.array(dtype=int), c_size: wp.array(dtype=wp.vec3),
    c_pos0: wp.array(dtype=wp.vec3), c_pos1: wp.array(dtype=wp.vec3),
    c_rot0: wp.array(dtype=wp.quat), c_rot1: wp.array(dtype=wp.quat),
    c_linvel: wp.array(dtype=wp.vec3), c_angvel: wp.array(dtype=wp.vec3),
    c_body: wp.array(dtype=int), c_mu: wp.array(dtype=float), body_com: wp.array(dtype=wp.vec3),
    x_out: wp.array(dtype=wp.vec3), v_out: wp.array(dtype=wp.vec3),
    body_force: wp.array(dtype=wp.vec3), body_torque: wp.array(dtype=wp.vec3),
    c_normal: wp.array(dtype=float),
):
    """Integrate node i over one substep (velocity, contacts, position; attached: follow)."""
    alpha = float(step + 1) / float(substeps)
    xi = x[i]
    m = mass[i]
    a = attach[i]
    if a >= 0:
        centre = c_pos0[a] + alpha * (c_pos1[a] - c_pos0[a])
        rot = quat_nslerp(c_rot0[a], c_rot1[a], alpha)
        xn = centre + wp.quat_rotate(rot, attach_local[i])
        x_out[i] = xn
        v_out[i] = c_linvel[a] + wp.cross(c_angvel[a], xn - centre)
        b = c_body[a]
        if b >= 0:
            wp.atomic_add(body_force, b, f[i])
            wp.atomic_add(body_torque, b, wp.cross(xi - body_com[b], f[i]))
        return
    if m <= 0.0:
        x_out[i] = xi
        v_out[i] = v[i]
        return
    vn_ = v[i] + dt * f[i] / m
    if ground_on != 0:
        pen = ground_z + radius - xi[2]
        if pen > 0.0:
            vz = vn_[2]
            dvn = wp.max(vz, pen / dt) - vz
            vt = wp.vec3(vn_[0], vn_[1], 0.0)
            s = friction_scale(ground_mu, dvn, vt)
            vn_ = wp.vec3(vt[0] * s, vt[1] * s, vz + dvn)
    for c in range(c_kind.shape[0]):
        centre = c_pos0[c] + alpha * (c_pos1[c] - c_pos0[c])
        rot = quat_nslerp(c_rot0[c], c_rot1[c], alpha)
        hit = collider_distance(c_kind[c], c_size[c], centre, rot, xi)
        dist = hit[3]
        if dist < radius:
            n = wp.vec3(hit[0], hit[1], hit[2])
            vb = c_linvel[c] + wp.cross(c_angvel[c], xi - centre)
            vrel = vn_ - vb
            vn = wp.dot(vrel, n)
            dvn = wp.max(vn, (radius - dist) / dt) - vn
            vt = vrel - vn * n
            cand = vb + (vn + dvn) * n + vt * friction_scale(c_mu[c], dvn, vt)
            rate = m * (cand - vn_) / dt
            b = c_body[c]
            if b >= 0:
                wp.atomic_sub(body_force, b, rate)
                wp.atomic_sub(body_torque, b, wp.cross(xi - body_com[b], rate))
            wp.atomic_add(c_normal, c, m * dvn / dt)
            vn_ = cand
    v_out[i] = vn_
    x_out[i] = xi + dt * vn_


@wp.kernel
def forces_kernel(v: wp.array(dtype=wp.vec3), mass: wp.array(dtype=float), gravity: wp.vec3,
                  drag: float, f: wp.array(dtype=wp.vec3)):
    """Per node: f = m (g - drag v), the external force that starts each substep's sum."""
    i = wp.tid()
    f[i] = mass[i] * (gravity - drag * v[i])


@wp.kernel
def springs_kernel(x: wp.array(dtype=wp.vec3), v: wp.array(dtype=wp.vec3),
                   si: wp.array(dtype=int), sj: wp.array(dtype=int),
                   stiffness: wp.array(dtype=float), damping: wp.array(dtype=float),
                   rest: wp.array(dtype=float), f: wp.array(dtype=wp.vec3)):
    """Per spring: add its damped spring force to both end nodes (atomic)."""
    s = wp.tid()
    a = si[s]
    b = sj[s]
    fs = spring_force(x[a], x[b], v[a], v[b], stiffness[s], damping[s], rest[s])
    wp.atomic_add(f, a, fs)
    wp.atomic_sub(f, b, fs)


@wp.kernel
def update_kernel(
    step0: wp.array(dtype=int), offset: int, substeps: int, dt: float, radius: float,
    ground_on: int, ground_z: float, ground_mu: float,
    x: wp.array(dtype=wp.vec3), v: wp.array(dtype=wp.vec3), f: wp.array(dtype=wp.vec3),
    mass: wp.array(dtype=float), attach: wp.array(dtype=int),
    attach_local: wp.array(dtype=wp.vec3),
    c_kind: wp.array(dtype=int), c_size: wp.array(dtype=wp.vec3),
    c_pos0: wp.array(dtype=wp.vec3), c_pos1: wp.array(dtype=wp.vec3),
    c_rot0: wp.array(dtype=wp.quat), c_rot1: wp.array(dtype=wp.quat),
    c_linvel: wp.array(dtype=wp.vec3), c_angvel: wp.array(dtype=wp.vec3),
    c_body: wp.array(dtype=int), c_mu: wp.array(dtype=float), body_com: wp.array(dtype=wp.vec3),
    x_out: wp.array(dtype=wp.vec3), v_out: wp.array(dtype=wp.vec3),
    body_force: wp.array(dtype=wp.vec3), body_torque: wp.array(dtype=wp.vec3),
    c_normal: wp.array(dtype=float),
):
    """Per node: integrate one substep with ground and collider contacts (see update_node)."""
    i = wp.tid()
    update_node(i, step0[0] + offset, substeps, dt, radius, ground_on, ground_z, ground_mu,
                x, v, f, mass, attach, attach_local, c_kind, c_size, c_pos0, c_pos1, c_rot0,
                c_rot1, c_linvel, c_angvel, c_body, c_mu, body_com, x_out, v_out, body_force,
                body_torque, c_normal)
