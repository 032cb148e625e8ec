"""Spring-mass physics: Warp kernels vs the numpy reference, and closed-form golden values."""

from __future__ import annotations

import numpy as np
import pytest

from bench.sim.softbody import Collider, SpringMassConfig, SpringMassModel, chain, from_points
from bench.sim.softbody.reference import ColliderFrame, reference_frame
from bench.sim.softbody.sim import SpringMassSim

G = 9.81


def _blob(seed: int, n: int = 40, lift: float = 0.04) -> SpringMassModel:
    rng = np.random.default_rng(seed)
    points = rng.uniform(-0.03, 0.03, size=(n, 3)) + [0.0, 0.0, lift]
    points = points.astype(np.float32).astype(np.float64)  # the Warp state is float32
    return from_points(points, radius=0.03, max_neighbors=8, total_mass=0.05, stiffness=40.0,
                       damping=0.02)


def _colliders_frame() -> tuple[list[Collider], ColliderFrame]:
    colliders = [Collider("sphere", (0.015, 0, 0), body=0),
                 Collider("capsule", (0.008, 0.03, 0), body=1),
                 Collider("box", (0.01, 0.02, 0.015), body=1, friction=0.3)]
    q0 = np.array([[1.0, 0, 0, 0], [np.cos(0.3), np.sin(0.3), 0, 0], [1.0, 0, 0, 0]])
    q1 = np.array([[1.0, 0, 0, 0], [np.cos(0.35), np.sin(0.35), 0, 0],
                   [np.cos(0.05), 0, 0, np.sin(0.05)]])
    frame = ColliderFrame(
        kinds=np.array([0, 1, 2]), sizes=np.array([c.size for c in colliders], float),
        pos0=np.array([[0.0, 0.0, 0.088], [0.042, 0.0, 0.04], [-0.044, 0.01, 0.04]]),
        pos1=np.array([[0.0, 0.0, 0.078], [0.04, 0.0, 0.04], [-0.041, 0.01, 0.04]]),
        quat0=q0, quat1=q1,
        linvel=np.array([[0.0, 0.0, -0.1], [0, 0, 0], [0.02, 0, 0]]),
        angvel=np.array([[0.0, 0, 0], [1.0, 0, 0], [0, 0, 1.0]]),
        bodies=np.array([0, 1, 1]), friction=np.array([1.0, 1.0, 0.3]),
        body_com=np.array([[0.0, 0.0, 0.065], [0.0, 0.0, 0.03]]),
    )
    return colliders, frame


@pytest.mark.parametrize("mode", ["fused", "launches"])
def test_warp_frame_matches_numpy_reference(mode):
    model = _blob(0, lift=0.033)  # lowest node 3 mm over the ground: in ground contact
    cfg = SpringMassConfig(dt=2e-4, substeps=50, ground_height=0.0, particle_radius=0.004,
                           self_collision=True, self_stiffness=50.0, self_exclude=0.005,
                           drag=0.5)
    colliders, frame = _colliders_frame()
    attach = np.full(model.num_nodes, -1)
    attach[3] = 0
    local = np.zeros((model.num_nodes, 3))
    local[3] = [0.0, 0.0, -0.02]
    sim = SpringMassSim(model, cfg, colliders, num_bodies=2, device="cpu", mode=mode,
                        rebuild_every=10)
    sim.set_attachment(attach, local)
    x, v = model.positions, model.velocities
    for _ in range(3):
        got = sim.step(frame)
        x, v, want = reference_frame(model, cfg, x, v, frame, attach=attach, attach_local=local)
        np.testing.assert_allclose(sim.positions(), x, atol=2e-5)
        np.testing.assert_allclose(sim.velocities(), v, atol=2e-3)
        for key in want:
            np.testing.assert_allclose(got[key], want[key], rtol=2e-3, atol=2e-4)
    assert np.abs(want["collider_normal"]).sum() > 0  # the colliders really touched the blob


def test_hanging_chain_static_elongation():
    # closed form: spring i (from the top) carries the weight of the n - 1 - i nodes below it
    n, m, k, spacing = 6, 0.05, 80.0, 0.05
    model = chain(n, spacing=spacing, mass=m, stiffness=k, damping=0.3)
    sim = SpringMassSim(model, SpringMassConfig(dt=2e-4, substeps=500, drag=2.0), device="cpu")
    for _ in range(60):  # 6 s: settled
        sim.step()
    z = sim.positions()[:, 2]
    stretch = -np.diff(z) - spacing
    expected = (n - 1 - np.arange(n - 1)) * m * G / k
    np.testing.assert_allclose(stretch, expected, rtol=0.02)


def test_undamped_spring_oscillates_at_sqrt_k_over_m():
    k, m = 100.0, 0.1
    model = chain(2, spacing=0.1, mass=m, stiffness=k)
    model.positions[1, 2] -= 0.01  # 1 cm pull
    cfg = SpringMassConfig(dt=1e-5, substeps=20, gravity=(0.0, 0.0, 0.0))
    sim = SpringMassSim(model, cfg, device="cpu")
    sim.set_state(model.positions)
    times, disp = [], []
    for frame in range(1, 5001):  # 1 s
        sim.step()
        times.append(frame * cfg.frame_dt)
        disp.append(sim.positions()[1, 2] - (1.0 - 0.1))
    t, d = np.array(times), np.array(disp)
    up = np.flatnonzero((d[:-1] < 0) & (d[1:] >= 0))
    crossings = t[up] + (t[up + 1] - t[up]) * (-d[up] / (d[up + 1] - d[up]))
    period = np.diff(crossings).mean()
    assert len(crossings) >= 4
    assert abs(2 * np.pi / period - np.sqrt(k / m)) / np.sqrt(k / m) < 0.01


def _energy(model: SpringMassModel, x: np.ndarray, v: np.ndarray) -> float:
    i, j = model.springs.T
    stretch = np.linalg.norm(x[j] - x[i], axis=1) - model.rest_lengths
    return 0.5 * float((model.masses * (v**2).sum(1)).sum()) + 0.5 * float(
        (model.stiffness * stretch**2).sum())


@pytest.mark.parametrize("damping", [0.0, 0.05])
def test_energy_decays_with_damping_and_is_kept_without(damping):
    model = _blob(1)
    model.damping[:] = damping
    rng = np.random.default_rng(5)
    x0 = model.positions * 1.15 + rng.normal(0, 1e-3, model.positions.shape)  # stretched
    cfg = SpringMassConfig(dt=1e-4, substeps=100, gravity=(0.0, 0.0, 0.0))
    sim = SpringMassSim(model, cfg, device="cpu")
    sim.set_state(x0)
    energies = [_energy(model, x0, np.zeros_like(x0))]
    for _ in range(20):
        sim.step()
        energies.append(_energy(model, sim.positions(), sim.velocities()))
    energies = np.array(energies)
    if damping == 0.0:
        assert np.abs(energies / energies[0] - 1).max() < 0.02
    else:
        assert np.all(np.diff(energies) <= 1e-3 * energies[0])
        assert energies[-1] < 0.1 * energies[0]


def test_rigid_limit_behaves_as_a_rigid_body():
    # the paper's rigid T-block: radius 0.5, <= 50 neighbours, large uniform stiffness
    rng = np.random.default_rng(2)
    points = rng.uniform([-0.05, -0.03, -0.01], [0.05, 0.03, 0.01], size=(150, 3))
    points += [0.0, 0.0, 0.06]
    model = from_points(points, radius=0.5, max_neighbors=50, total_mass=0.3, stiffness=3e4,
                        damping=0.2)
    assert model.num_springs <= 150 * 50
    spin = np.array([0.5, 1.0, 4.0])
    model.velocities = np.cross(spin, points - points.mean(0)) + [0.2, 0.0, 0.0]
    cfg = SpringMassConfig(dt=2e-5, substeps=500, ground_height=0.0, ground_friction=0.4,
                           particle_radius=0.003)
    sim = SpringMassSim(model, cfg, device="cpu")
    worst = 0.0
    for _ in range(20):  # 0.2 s: free flight, landing on the ground, sliding
        sim.step()
        x = sim.positions()
        a, b = points - points.mean(0), x - x.mean(0)
        u, _, vt = np.linalg.svd(b.T @ a)
        rot = u @ np.diag([1, 1, np.linalg.det(u @ vt)]) @ vt
        worst = max(worst, float(np.sqrt(((b - a @ rot.T) ** 2).sum(1).mean())))
    assert sim.positions()[:, 2].min() < 0.01  # it did land
    assert worst < 5e-4  # stated tolerance: 0.5 mm RMS from a rigid motion (object 10 cm)


def test_nodes_from_a_mesh_and_neighbour_limit():
    import trimesh

    from bench.sim.softbody import from_mesh

    box = trimesh.creation.box(extents=(0.1, 0.06, 0.04))
    model = from_mesh(box, count=200, seed=0, radius=0.03, max_neighbors=12, total_mass=0.2,
                      stiffness=100.0)
    assert model.num_nodes == 200
    assert np.all(np.abs(model.positions) <= [0.05, 0.03, 0.02])  # sampled inside
    degree = np.bincount(model.springs.ravel(), minlength=200)
    assert model.rest_lengths.max() <= 0.03 and degree.min() >= 1
    again = from_mesh(box, count=200, seed=0, radius=0.03, max_neighbors=12, total_mass=0.2,
                      stiffness=100.0)
    np.testing.assert_array_equal(again.positions, model.positions)


def test_fused_frames_are_deterministic():
    model = _blob(4)
    cfg = SpringMassConfig(dt=2e-4, substeps=50, ground_height=0.0, particle_radius=0.004,
                           self_collision=True, self_exclude=0.005)
    runs = []
    for _ in range(2):
        sim = SpringMassSim(model, cfg, device="cpu")
        for _ in range(3):
            sim.step()
        runs.append(sim.positions())
    np.testing.assert_array_equal(runs[0], runs[1])
