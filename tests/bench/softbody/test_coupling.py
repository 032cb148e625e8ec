"""MuJoCo coupling: geoms as kinematic colliders, reactions through xfrc_applied; CUDA graph."""

from __future__ import annotations

import mujoco
import numpy as np
import pytest

from bench.sim.softbody import Collider, SpringMassConfig, from_points
from bench.sim.softbody.coupling import GeomColliders
from bench.sim.softbody.reference import ColliderFrame, reference_frame
from bench.sim.softbody.sim import SpringMassSim

G = 9.81


def _blob_on(top: float, *, mass: float):
    rng = np.random.default_rng(3)
    points = rng.uniform([-0.03, -0.03, 0.0], [0.03, 0.03, 0.02], (60, 3)) + [0, 0, top + 0.006]
    return from_points(points, radius=0.02, max_neighbors=10, total_mass=mass, stiffness=60.0,
                       damping=0.05)


def test_resting_load_is_fed_back_to_a_free_mujoco_body():
    # a free box on the floor carries a soft blob: the floor must then hold box + blob weight
    spec = mujoco.MjSpec()
    spec.option.timestep = 0.002
    spec.worldbody.add_geom(type=mujoco.mjtGeom.mjGEOM_PLANE, size=[1, 1, 0.1])
    box = spec.worldbody.add_body(name="box", pos=[0, 0, 0.05])
    box.add_freejoint()
    box.add_geom(name="box_geom", type=mujoco.mjtGeom.mjGEOM_BOX, size=[0.06, 0.06, 0.05],
                 mass=0.5)
    model = spec.compile()
    data = mujoco.MjData(model)
    mujoco.mj_forward(model, data)
    geoms = GeomColliders(model, ["box_geom"])
    blob_mass = 0.2
    blob = _blob_on(0.10, mass=blob_mass)
    cfg = SpringMassConfig(dt=2e-4, substeps=50, particle_radius=0.004, drag=3.0)
    sim = SpringMassSim(blob, cfg, geoms.colliders, num_bodies=len(geoms.body_ids))
    for _ in range(150):  # 1.5 s of 10 ms frames
        before = geoms.poses(data)
        for _ in range(5):
            mujoco.mj_step(model, data)
        reactions = sim.step(geoms.frame(before, data, 0.01))
        geoms.apply_reactions(data, reactions)
    floor = np.zeros(6)
    total = 0.0
    for k in range(data.ncon):
        mujoco.mj_contactForce(model, data, k, floor)
        total += floor[0]
    np.testing.assert_allclose(reactions["body_force"][0], [0, 0, -blob_mass * G], atol=0.03)
    assert abs(total - (0.5 + blob_mass) * G) < 0.03 * (0.5 + blob_mass) * G
    assert sim.positions()[:, 2].min() > 0.10  # the blob rests on the box, not in it


@pytest.mark.gpu
def test_cuda_graph_matches_numpy_reference():
    import warp as wp

    wp.init()
    if not wp.is_cuda_available():
        pytest.skip("needs CUDA")
    blob = _blob_on(0.0, mass=0.05)
    cfg = SpringMassConfig(dt=2e-4, substeps=50, ground_height=0.0, particle_radius=0.004,
                           self_collision=True, self_exclude=0.005)
    colliders = [Collider("sphere", (0.01, 0, 0), body=0)]
    frame = ColliderFrame(
        kinds=np.array([0]), sizes=np.array([[0.01, 0, 0]]), pos0=np.array([[0, 0, 0.04]]),
        pos1=np.array([[0, 0, 0.035]]), quat0=np.array([[1.0, 0, 0, 0]]),
        quat1=np.array([[1.0, 0, 0, 0]]), linvel=np.array([[0, 0, -0.5]]),
        angvel=np.zeros((1, 3)), bodies=np.array([0]), friction=np.ones(1),
        body_com=np.array([[0, 0, 0.04]]))
    sim = SpringMassSim(blob, cfg, colliders, num_bodies=1, device="cuda:0", mode="graph",
                        rebuild_every=10)
    x, v = blob.positions, blob.velocities
    for _ in range(3):
        sim.step(frame)
        x, v, _ = reference_frame(blob, cfg, x, v, frame)
    np.testing.assert_allclose(sim.positions(), x, atol=2e-5)
