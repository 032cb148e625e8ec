"""Spring-mass speed: substeps/s at 2k / 10k / 50k springs, and 600-frame Rope-v0 rollouts.

Run on one core (as in docs/softbody.md):

    OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 MUJOCO_GL=egl taskset -c 1 \
        .venv/bin/python benchmarks/bench_softbody.py

Rows, side by side in one run:
- substeps per second of one object with ~2k / 10k / 50k springs (random nodes in a 20 cm box,
  neighbour springs, gravity + ground contact): the fused Warp CPU frame kernel (one launch per
  frame of 100 substeps), the same Warp kernels launched per substep (the CUDA-graph shape,
  uncaptured), and the plain numpy reference step;
- 600-frame rollouts of ``splatbench/Rope-v0`` with the 128x128 wrist fisheye rendered (rope
  Gaussians + the 40k-Gaussian sample room), ``hold`` policy so all 600 frames run, with the
  time split into MuJoCo + spring-mass physics and rendering; the rope expert's (successful,
  shorter) episode; and the rigid Cup task's 600-frame ``hold`` rollout for comparison.
"""

from __future__ import annotations

import argparse
import json
import os
import time

os.environ.setdefault("MUJOCO_GL", "egl")


def blob(target_springs: int, seed: int = 0):
    import numpy as np

    from bench.sim.softbody import from_points

    nodes = max(int(target_springs / 5.85), 10)  # ~5.85 springs a node at this density
    rng = np.random.default_rng(seed)
    points = rng.uniform(0.0, 0.2, (nodes, 3)) + [0.0, 0.0, 0.01]
    spacing = 0.2 / nodes ** (1 / 3)
    return from_points(points, radius=3 * spacing, max_neighbors=10, total_mass=1.0,
                       stiffness=50.0, damping=0.01)


def spring_rates(target: int, *, frames: int, numpy_substeps: int) -> dict:
    from bench.sim.softbody import SpringMassConfig
    from bench.sim.softbody.reference import reference_frame
    from bench.sim.softbody.sim import SpringMassSim

    model = blob(target)
    cfg = SpringMassConfig(dt=1e-4, substeps=100, ground_height=0.0, particle_radius=0.002)
    row = {"springs": model.num_springs, "nodes": model.num_nodes}
    for mode in ("fused", "launches"):
        sim = SpringMassSim(model, cfg, device="cpu", mode=mode)
        sim.step()  # compile / warm
        start = time.perf_counter()
        for _ in range(frames):
            sim.step()
        row[f"warp_{mode}_substeps_per_s"] = frames * cfg.substeps / (time.perf_counter() - start)
    small = SpringMassConfig(dt=1e-4, substeps=numpy_substeps, ground_height=0.0,
                             particle_radius=0.002)
    start = time.perf_counter()
    reference_frame(model, small, model.positions, model.velocities)
    row["numpy_substeps_per_s"] = numpy_substeps / (time.perf_counter() - start)
    row["fused_vs_numpy"] = row["warp_fused_substeps_per_s"] / row["numpy_substeps_per_s"]
    return row


def rope_rollout(scene, *, policy: str, obs_mode: str = "rgb") -> dict:
    import gymnasium

    import bench.sim  # noqa: F401
    from bench.sim.rollout import run_episode
    from bench.sim.softbody.cli import _Hold
    from bench.sim.softbody.rope import rope_expert

    env = gymnasium.make("splatbench/Rope-v0", scene=scene, obs_mode=obs_mode)
    agent = rope_expert(env) if policy == "expert" else _Hold(env)
    env.reset(seed=0)
    unwrapped = env.unwrapped
    sim = unwrapped.world.sim
    physics = {"t": 0.0}
    original = unwrapped.world.run_frame

    def timed(*args, **kwargs):
        start = time.perf_counter()
        out = original(*args, **kwargs)
        physics["t"] += time.perf_counter() - start
        return out

    unwrapped.world.run_frame = timed
    if unwrapped._renderer is not None:
        unwrapped._renderer.timings.clear()
    record, _, wall = run_episode(env, agent, init_index=0, policy_name=policy)
    timings = dict(unwrapped._renderer.timings) if unwrapped._renderer else {}
    env.close()
    return {"task": "rope", "policy": policy, "obs_mode": obs_mode, "frames": record.frames,
            "success": record.success, "queries": record.policy_queries, "wall_s": wall,
            "physics_s": physics["t"], "spring_mass_substeps": record.frames * sim.config.substeps,
            **{f"{k}_s": v for k, v in timings.items()}}


def cup_rollout(scene) -> dict:
    import gymnasium

    import bench.sim
    from bench.policies import make_policy
    from bench.sim.rollout import run_episode

    env = gymnasium.make(bench.sim.ENV_IDS["cup"], scene=scene)
    record, _, wall = run_episode(env, make_policy("hold", env), init_index=0, policy_name="hold")
    env.close()
    return {"task": "cup", "policy": "hold", "frames": record.frames, "wall_s": wall}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--frames", type=int, default=20, help="Warp frames of 100 substeps")
    parser.add_argument("--numpy-substeps", type=int, default=20, help="numpy reference substeps")
    parser.add_argument("--skip-rollouts", action="store_true")
    parser.add_argument("--json", help="also write the rows here")
    args = parser.parse_args()
    rows = []
    for target in (2000, 10000, 50000):
        row = spring_rates(target, frames=args.frames, numpy_substeps=args.numpy_substeps)
        rows.append(row)
        print(json.dumps({k: round(v, 1) if isinstance(v, float) else v for k, v in row.items()}))
    if not args.skip_rollouts:
        from bench.scene.sample import make_sample_scene

        scene = make_sample_scene(seed=0)
        for result in (rope_rollout(scene, policy="hold"), rope_rollout(scene, policy="expert"),
                       rope_rollout(scene, policy="hold", obs_mode="state"), cup_rollout(scene)):
            rows.append(result)
            print(json.dumps({k: round(v, 3) if isinstance(v, float) else v
                              for k, v in result.items()}))
    if args.json:
        with open(args.json, "w") as handle:
            json.dump(rows, handle, indent=2)


if __name__ == "__main__":
    main()
