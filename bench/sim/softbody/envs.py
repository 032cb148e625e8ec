"""Gymnasium registration of the deformable tasks (imported by :mod:`bench.sim`)."""

from __future__ import annotations

import gymnasium

SOFTBODY_ENV_IDS = {"rope": "splatbench/Rope-v0"}

for _env_id, _entry in ((SOFTBODY_ENV_IDS["rope"], "bench.sim.softbody.rope:RopeEnv"),):
    if _env_id not in gymnasium.registry:
        gymnasium.register(id=_env_id, entry_point=_entry)
