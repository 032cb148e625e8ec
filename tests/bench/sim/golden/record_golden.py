"""Record the golden rollouts that the shipped Cup/Tape/Pen task files must reproduce bit-exactly.

Run on the code of git main a3b63ea (hard-coded Cup/Tape/Pen TaskSpecs, before task files
existed), under the reference numerics that ``tests/conftest.py`` gives every test process:

    git worktree add /tmp/a3b a3b63ea && cd /tmp/a3b
    OPENBLAS_CORETYPE=Haswell NPY_DISABLE_CPU_FEATURES="X86_V4 AVX512_ICL AVX512_SPR" \
        MUJOCO_GL=egl PYTHONPATH=. python <this checkout>/tests/bench/sim/golden/record_golden.py

It writes ``tasks_main_a3b63ea.json``: per task and policy, the full physical state digest per
frame (sha256 of qpos, qvel, mocap, eq_active, time) and the per-frame state stream rows
(``info["frame_states"]``, as sha256 of its JSON) of expert / noisy-expert episodes in state
mode, plus the sha256 of every wrist image of a short rgb rollout.
``test_sim_task_files.py`` recomputes them.
"""

from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path

import numpy as np

OUT = Path(__file__).with_name("tasks_main_a3b63ea.json")
CONDITIONS = (0, 7)
POLICIES_RUN = ("expert", "noisy-expert")


def physical_digest(env) -> str:
    data = env.unwrapped.world.data
    state = np.concatenate([data.qpos, data.qvel, data.mocap_pos.ravel(),
                            data.mocap_quat.ravel(), data.eq_active.astype(float), [data.time]])
    return hashlib.sha256(state.astype(np.float64).tobytes()).hexdigest()


def row_digest(row) -> str:
    """sha256 of one state-stream row (JSON with Python's exact float repr)."""
    row = row.to_dict() if hasattr(row, "to_dict") else row  # a FrameState since the dict
    return hashlib.sha256(json.dumps(row, sort_keys=True).encode()).hexdigest()[:32]


def rollout(env, policy, condition, *, images=False):
    obs, info = env.reset(seed=condition)
    policy.reset(seed=condition)
    rows, digests = list(info["frame_states"]), [physical_digest(env)]
    shas = [hashlib.sha256(obs["wrist_rgb"].tobytes()).hexdigest()] if images else []
    done = False
    while not done:
        obs, _, term, trunc, info = env.step(policy.act(obs, info))
        rows.extend(info["frame_states"])
        digests.append(physical_digest(env))
        if images:
            shas.append(hashlib.sha256(obs["wrist_rgb"].tobytes()).hexdigest())
        done = term or trunc
    return {"rows": [row_digest(r) for r in rows], "digests": digests, "images": shas,
            "success": bool(info["success"]), "frame": int(info["frame"])}


def main() -> int:
    import gymnasium

    import bench.sim
    from bench.policies import make_policy
    from bench.scene.sample import make_sample_scene

    scene = make_sample_scene(seed=0, n_gaussians=6000)
    golden: dict = {"source": "git main a3b63ea, tests/bench/sim/golden/record_golden.py"}
    for task in ("cup", "tape", "pen"):
        env = gymnasium.make(bench.sim.ENV_IDS[task], scene=scene, obs_mode="state")
        for name in POLICIES_RUN:
            policy = make_policy(name, env, seed=0)
            for condition in CONDITIONS:
                golden[f"{task}/{name}/{condition}"] = rollout(env, policy, condition)
        env.close()
        env = gymnasium.make(bench.sim.ENV_IDS[task], scene=scene, obs_mode="rgb",
                             image_size=(48, 48), max_frames=24)
        policy = make_policy("expert", env, seed=0)
        golden[f"{task}/expert/rgb"] = rollout(env, policy, 3, images=True)
        env.close()
    OUT.write_text(json.dumps(golden, separators=(",", ":")) + "\n")
    print(f"wrote {OUT} ({OUT.stat().st_size} bytes)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
