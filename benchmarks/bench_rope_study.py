"""Cost of one study rollout of the rope task, beside the rigid Cup task, in the same run.

Run on one core (as in docs/softbody.md, "The rope in a study")::

    OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 MUJOCO_GL=egl taskset -c 1 \\
        .venv/bin/python benchmarks/bench_rope_study.py

Each row is one rollout exactly as ``bench study run`` makes it (``bench.sim.make_env`` with
the runner's keywords: the spec's 128x128 wrist image, its time limit, render backend and the
default deployment; ``make_policy``; ``run_episode``) on the study's default sample room, at the
simulated starts the study uses (``sim_condition_offset`` 100, 101). The rope's pair is
rope-expert / rope-expert-hasty; Cup's the spec's defaults visual-servo / visual-glance.
"""

from __future__ import annotations

import argparse
import json
import os
import time

os.environ.setdefault("MUJOCO_GL", "egl")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--conditions", type=int, nargs="+", default=[100, 101])
    parser.add_argument("--gaussians", type=int, default=None,
                        help="sample-room Gaussians [default: the study spec's default]")
    args = parser.parse_args()
    import bench.sim
    from bench.policies import make_policy
    from bench.scene.sample import make_sample_scene
    from bench.sim.rollout import run_episode
    from bench.study.deployment import Deployment
    from bench.study.spec import StudySpec

    spec = StudySpec(name="bench", sample_scenes={"a": 0}, tasks=("cup", "rope"))
    gaussians = args.gaussians or spec.sample_gaussians
    scene = make_sample_scene(seed=0, n_gaussians=gaussians)
    rows = []
    for task in spec.tasks:
        env = bench.sim.make_env(task, scene, image_size=spec.image_size, max_frames=None,
                                 render_backend=spec.render_backend,
                                 **Deployment().env_overrides())
        try:
            for name in spec.policies[task]:
                policy = make_policy(name, env, seed=spec.seed)
                for condition in args.conditions:
                    start = time.perf_counter()
                    record, _, _ = run_episode(env, policy, init_index=condition)
                    wall = time.perf_counter() - start
                    rows.append({"task": task, "policy": name, "condition": condition,
                                 "success": record.success, "frames": record.frames,
                                 "wall_s": round(wall, 2),
                                 "ms_per_frame": round(1000 * wall / record.frames, 1)})
                    print(json.dumps(rows[-1]), flush=True)
        finally:
            env.close()
    print(f"| task | policy | start | success | frames | wall s | ms / frame |  "
          f"({gaussians:,} background Gaussians, {spec.image_size[0]}x{spec.image_size[1]})")
    print("|---|---|---:|---|---:|---:|---:|")
    for r in rows:
        print(f"| {r['task']} | {r['policy']} | {r['condition']} | {r['success']} | "
              f"{r['frames']} | {r['wall_s']} | {r['ms_per_frame']} |")


if __name__ == "__main__":
    main()
