"""System identification recovers known stiffness and damping within 5% (wp.Tape + Adam)."""

from __future__ import annotations

import numpy as np
import pytest

from bench.sim.softbody import SpringMassConfig, chain
from bench.sim.softbody.sim import SpringMassSim
from bench.sim.softbody.sysid import fit_stiffness_damping


@pytest.mark.slow
def test_sysid_recovers_known_parameters_within_5_percent():
    k_true, c_true = 80.0, 0.3
    model = chain(4, spacing=0.05, mass=0.05, stiffness=k_true, damping=c_true)
    model.positions[1:, 0] += np.array([0.01, 0.02, 0.03])  # swing and stretch from here
    cfg = SpringMassConfig(dt=1e-3, substeps=10)
    sim = SpringMassSim(model, cfg, device="cpu")
    sim.set_state(model.positions)
    recorded = []
    for _ in range(30):  # 0.3 s
        sim.step()
        recorded.append(sim.positions())
    guess = chain(4, spacing=0.05, mass=0.05, stiffness=1.0, damping=1.0)
    guess.positions[:] = model.positions
    result = fit_stiffness_damping(guess, cfg, np.array(recorded), init_stiffness=55.0,
                                   init_damping=0.2, steps=150, learning_rate=0.05)
    assert result.losses[-1] < 0.01 * result.losses[0]
    assert abs(result.stiffness / k_true - 1) < 0.05
    assert abs(result.damping / c_true - 1) < 0.05
