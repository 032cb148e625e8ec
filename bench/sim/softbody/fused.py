"""Kernels that query the self-collision hash grid (compiled without adjoints; see kernels)."""

from __future__ import annotations

import warp as wp

from bench.sim.softbody.kernels import spring_force, update_node

wp.set_module_options({"enable_backward": False})


@wp.func
def self_force(i: int, grid: wp.uint64, x: wp.array(dtype=wp.vec3),
               rest: wp.array(dtype=wp.vec3), radius: float, query: float, exclude: float,
               k_self: float) -> wp.vec3:
    """Self-collision penalty on node i from nodes closer than 2 r (not rest neighbours)."""
    xi = x[i]
    total = wp.vec3(0.0)
    neighbours = wp.hash_grid_query(grid, xi, query)
    j = int(0)  # noqa: UP018 - a Warp variable, not a constant
    while wp.hash_grid_query_next(neighbours, j):
        if j != i:
            d = x[j] - xi
            length = wp.length(d)
            if length < 2.0 * radius and wp.length(rest[j] - rest[i]) > exclude:
                total = total - k_self * (2.0 * radius - length) * d / wp.max(length, 1.0e-12)
    return total


@wp.kernel
def self_collision_kernel(grid: wp.uint64, x: wp.array(dtype=wp.vec3),
                          rest: wp.array(dtype=wp.vec3), radius: float, query: float,
                          exclude: float, k_self: float, f: wp.array(dtype=wp.vec3)):
    """Per node: add the self-collision repulsion of its hash-grid neighbours to its force."""
    i = wp.tid()
    f[i] = f[i] + self_force(i, grid, x, rest, radius, query, exclude, k_self)


@wp.kernel
def fused_frame_kernel(
    first: int, count: int, substeps: int, dt: float, radius: float, gravity: wp.vec3,
    drag: float, ground_on: int, ground_z: float, ground_mu: float,
    self_on: int, grid: wp.uint64, rest_pos: wp.array(dtype=wp.vec3), query: float,
    exclude: float, k_self: float,
    si: wp.array(dtype=int), sj: wp.array(dtype=int), stiffness: wp.array(dtype=float),
    damping: wp.array(dtype=float), rest: wp.array(dtype=float),
    x: wp.array(dtype=wp.vec3), v: wp.array(dtype=wp.vec3), f: wp.array(dtype=wp.vec3),
    mass: wp.array(dtype=float), attach: wp.array(dtype=int),
    attach_local: wp.array(dtype=wp.vec3),
    c_kind: wp.array(dtype=int), c_size: wp.array(dtype=wp.vec3),
    c_pos0: wp.array(dtype=wp.vec3), c_pos1: wp.array(dtype=wp.vec3),
    c_rot0: wp.array(dtype=wp.quat), c_rot1: wp.array(dtype=wp.quat),
    c_linvel: wp.array(dtype=wp.vec3), c_angvel: wp.array(dtype=wp.vec3),
    c_body: wp.array(dtype=int), c_mu: wp.array(dtype=float), body_com: wp.array(dtype=wp.vec3),
    body_force: wp.array(dtype=wp.vec3), body_torque: wp.array(dtype=wp.vec3),
    c_normal: wp.array(dtype=float),
):
    """Substeps ``first .. first + count - 1`` of a frame in one launch (one CPU thread)."""
    n = x.shape[0]
    for s in range(count):
        for i in range(n):
            f[i] = mass[i] * (gravity - drag * v[i])
        for k in range(si.shape[0]):
            a = si[k]
            b = sj[k]
            fs = spring_force(x[a], x[b], v[a], v[b], stiffness[k], damping[k], rest[k])
            f[a] = f[a] + fs
            f[b] = f[b] - fs
        if self_on != 0:
            for i in range(n):
                f[i] = f[i] + self_force(i, grid, x, rest_pos, radius, query, exclude, k_self)
        for i in range(n):
            update_node(i, first + s, substeps, dt, radius, ground_on, ground_z, ground_mu,
                        x, v, f, mass, attach, attach_local, c_kind, c_size, c_pos0, c_pos1,
                        c_rot0, c_rot1, c_linvel, c_angvel, c_body, c_mu, body_com, x, v,
                        body_force, body_torque, c_normal)
